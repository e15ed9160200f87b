// SPDX-License-Identifier: Apache-2.0
/// How the host engine's workers share a job's units: contiguous runs, long first (issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <algorithm>
#include <atomic>
#include <cstddef>

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

// Hands out the indices 0 .. count-1 of a job's units in contiguous runs, guided-style: a
// worker takes a share of what is left (left / (2 threads), at least one), so the first runs
// are long and the last ones single units that even out the finish. Handed out one unit at a
// time, the two threads of a 2-vCPU VM read interleaved 256 KiB units of one tensor and
// reached 0.78-0.94 of the two-thread read ceiling (fp32, 64 MiB and 1 GiB, three runs
// alternating with the guided runs); in contiguous runs 0.87-0.99 (issue 18; docs/stats.md).
// Who computes a unit never changes its result, so results stay bit-identical.
class guided_units {
 public:
  guided_units(std::size_t count, unsigned threads) noexcept
      : count_(count), divisor_(2 * static_cast<std::size_t>(std::max(threads, 1u))) {}

  // The next run [begin, end), or false when every unit is taken.
  bool take(std::size_t& begin, std::size_t& end) noexcept {
    std::size_t at = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (at >= count_) return false;
      const std::size_t share = std::max<std::size_t>(1, (count_ - at) / divisor_);
      if (next_.compare_exchange_weak(at, at + share, std::memory_order_relaxed)) {
        begin = at;
        end = at + share;
        return true;
      }
    }
  }

 private:
  std::atomic<std::size_t> next_{0};
  std::size_t count_, divisor_;
};

}  // namespace detail
}  // namespace mldiag
