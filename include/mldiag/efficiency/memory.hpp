// SPDX-License-Identifier: Apache-2.0
/// Memory evidence sources on the host: resident set size, fragmentation, growth per step, and
/// a callback type for any allocator. (`cudaMemGetInfo` is in kernels/mldiag/cuda/memory.cuh,
/// LibTorch's CUDA caching allocator in adapters/torch_cuda_memory.hpp.)
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include <algorithm>
#include <charconv>  // from_chars: no locale, no allocation
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>         // open
#include <sys/resource.h>  // getrusage
#include <unistd.h>        // read, close, sysconf
#endif

namespace mldiag::inline MLDIAG_ABI::efficiency {

/// The process's resident set size now and at its peak, in bytes (absent where unknown).
struct host_memory {
  std::optional<double> rss = {};
  std::optional<double> peak_rss = {};
};

/// Whether `read_host_memory` can measure on this platform (Linux: `/proc/self/statm` and
/// `getrusage`); elsewhere it knows neither.
#if defined(__linux__)
inline constexpr bool host_memory_supported = true;
#else
inline constexpr bool host_memory_supported = false;
#endif

/// Reads the resident set size (`/proc/self/statm`, resident pages x page size) and its peak
/// (`getrusage` ru_maxrss, KiB on Linux; never below the RSS just read). No allocation, a few
/// microseconds: it can run every step. Absent where the platform does not say (see
/// `host_memory_supported`).
///
/// **Example**
/// ```cpp
/// const auto h = mldiag::efficiency::read_host_memory();
/// if (h.rss) std::printf("RSS %.0f MB\n", *h.rss / 1e6);
/// ```
[[nodiscard]] inline host_memory read_host_memory() noexcept {
  host_memory h;
#if defined(__linux__)
  // open/read into a stack buffer rather than an fstream: no allocation in the step path.
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[256];
    const auto n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n > 0) {
      const char* p = buf;
      const char* end = buf + n;
      std::uint64_t size_pages = 0, resident_pages = 0;
      auto r = std::from_chars(p, end, size_pages);  // the first field is the virtual size
      if (r.ec == std::errc{} && r.ptr < end && *r.ptr == ' ') {
        r = std::from_chars(r.ptr + 1, end, resident_pages);
        const long page = ::sysconf(_SC_PAGESIZE);
        if (r.ec == std::errc{} && page > 0)
          h.rss = static_cast<double>(resident_pages) * static_cast<double>(page);
      }
    }
  }
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0)
    h.peak_rss = static_cast<double>(usage.ru_maxrss) * 1024.0;
  // The kernel syncs its per-thread RSS counters lazily (measured: ru_maxrss 64 KiB below
  // statm's resident right after start), and a peak below the present is no peak.
  if (h.rss && !(h.peak_rss >= h.rss)) h.peak_rss = h.rss;
#endif
  return h;
}

/// `m` with `host_rss` and `host_rss_peak` filled from `read_host_memory`.
[[nodiscard]] inline memory_evidence with_host_memory(memory_evidence m) noexcept {
  const auto h = read_host_memory();
  m.host_rss = h.rss;
  m.host_rss_peak = h.peak_rss;
  return m;
}

/// 1 - allocated / reserved: the share of an allocator's pool that no tensor uses. Absent when
/// reserved is 0 (an empty pool has no fragmentation to speak of); an error when a value is
/// negative or allocated exceeds reserved (the pool includes the allocated blocks).
///
/// **Example**
/// ```cpp
/// double f = *mldiag::efficiency::fragmentation(6e9, 8e9);  // 0.25
/// ```
[[nodiscard]] inline std::optional<double> fragmentation(double allocated, double reserved) {
  if (!(allocated >= 0.0) || !(reserved >= 0.0) || allocated > reserved) {
    throw error("efficiency::fragmentation: allocated " + std::to_string(allocated) +
                ", reserved " + std::to_string(reserved) + "; need 0 <= allocated <= reserved");
  }
  if (!(reserved > 0.0)) return std::nullopt;
  return 1.0 - allocated / reserved;
}

/// Memory growth per step over the last `window` samples: the median of the slopes between
/// each sample of the older half and its partner half a window later (a robust estimate: up
/// to a quarter of the samples can be outliers and the median ignores them, where a least-
/// squares slope follows a single spike). Samples may be taken every few steps (the slope is
/// per step). Allocates at construction only.
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::growth_tracker g(64);
/// g.push(step, reserved_bytes);
/// if (g.bytes_per_step() > 1e6) { /* a MB per step (absent below 4 samples) */ }
/// ```
class growth_tracker {
 public:
  explicit growth_tracker(std::size_t window = 64)
      : steps_(window), bytes_(window), slopes_(window / 2) {
    if (window < 4)
      throw error("efficiency::growth_tracker: window " + std::to_string(window) +
                  "; keep at least 4 samples");
  }
  /// A sample; steps must increase and bytes be finite. An absent sample is skipped.
  void push(std::int64_t step, std::optional<double> sample) {
    if (!sample) return;
    const double bytes = *sample;
    if (size_ > 0 && step <= at_step(size_ - 1)) {
      throw error("efficiency::growth_tracker::push: step " + std::to_string(step) +
                  " does not come after step " + std::to_string(at_step(size_ - 1)));
    }
    if (!std::isfinite(bytes))
      throw error("efficiency::growth_tracker::push: bytes is " + std::to_string(bytes) + "; give a finite byte count, or no sample");
    const std::size_t slot = (start_ + size_) % steps_.size();
    steps_[slot] = step;
    bytes_[slot] = bytes;
    if (size_ < steps_.size())
      ++size_;
    else
      start_ = (start_ + 1) % steps_.size();
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Bytes per step (negative when shrinking); absent below 4 samples.
  [[nodiscard]] std::optional<double> bytes_per_step() const noexcept {
    if (size_ < 4) return std::nullopt;
    const std::size_t half = size_ / 2;
    for (std::size_t i = 0; i < half; ++i) {
      const std::size_t j = i + size_ - half;  // with an odd count the middle sample is unused
      slopes_[i] = (at_bytes(j) - at_bytes(i)) / static_cast<double>(at_step(j) - at_step(i));
    }
    const auto mid = slopes_.begin() + static_cast<std::ptrdiff_t>(half / 2);
    std::nth_element(slopes_.begin(), mid, slopes_.begin() + static_cast<std::ptrdiff_t>(half));
    if (half % 2 == 1) return *mid;
    return 0.5 * (*std::max_element(slopes_.begin(), mid) + *mid);
  }
  void clear() noexcept { start_ = size_ = 0; }

 private:
  [[nodiscard]] std::int64_t at_step(std::size_t i) const noexcept {
    return steps_[(start_ + i) % steps_.size()];
  }
  [[nodiscard]] double at_bytes(std::size_t i) const noexcept {
    return bytes_[(start_ + i) % bytes_.size()];
  }

  std::vector<std::int64_t> steps_;
  std::vector<double> bytes_;
  mutable std::vector<double> slopes_;  // scratch
  std::size_t start_ = 0, size_ = 0;
};

/// What any allocator can report: a callable that fills a `memory_evidence` (allocated,
/// reserved, peak, capacity, largest free block: whatever it knows; the rest stays absent). A
/// custom arena, a CUDA memory pool (`cudaMemPoolGetAttribute`), jemalloc's stats, LibTorch's
/// caching allocator (adapters/torch_cuda_memory.hpp) all fit.
using memory_callback = std::function<memory_evidence()>;

/// One place to read memory each step: the allocator's callback (if any), the host's RSS, and
/// the growth of the first known of allocated, reserved and RSS. After construction a sample
/// allocates nothing (unless the callback does).
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::memory_probe probe([&] { return mldiag::torch_cuda::memory(0); });
/// mon.observe(probe.sample(step));
/// std::optional<double> leak = probe.growth_per_step();  // bytes per step, robust to noise
/// ```
class memory_probe {
 public:
  explicit memory_probe(memory_callback allocator = {}, std::size_t growth_window = 64)
      : allocator_(std::move(allocator)), growth_(growth_window) {}
  [[nodiscard]] memory_evidence sample(std::int64_t step) {
    memory_evidence m = with_host_memory(allocator_ ? allocator_() : memory_evidence{});
    const int source = m.allocated ? 1 : m.reserved ? 2 : m.host_rss ? 3 : 0;
    if (source != source_) growth_.clear();  // a different quantity: its growth starts again
    source_ = source;
    if (source != 0)
      growth_.push(step, source == 1 ? m.allocated : source == 2 ? m.reserved : m.host_rss);
    return m;
  }
  [[nodiscard]] std::optional<double> growth_per_step() const noexcept { return growth_.bytes_per_step(); }

 private:
  memory_callback allocator_;
  growth_tracker growth_;
  int source_ = 0;
};

}  // namespace mldiag::efficiency
