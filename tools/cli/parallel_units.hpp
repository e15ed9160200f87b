// SPDX-License-Identifier: Apache-2.0
/// A tensor's units shared out to the host engine's workers, merged later in a fixed order.
#pragma once

#include "mldiag/stats/host_engine.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>  // std::exception_ptr: a worker's error, rethrown on the caller
#include <thread>

namespace mldiag::cli {

namespace detail {

inline unsigned resolve_threads(unsigned threads) noexcept {
  if (threads != 0) return std::min(threads, 1024u);
  return std::max(1u, std::min(std::thread::hardware_concurrency(), 1024u));
}

// Runs fn(unit, worker) for units 0..count-1 on the engine; the first exception is rethrown.
template <class Fn>
void for_each_unit(host_engine& engine, std::size_t count, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  auto job = [&](unsigned w) noexcept {
    for (;;) {
      const std::size_t u = next.fetch_add(1, std::memory_order_relaxed);
      if (u >= count) return;
      try {
        fn(u, w);
      } catch (...) {
        if (!failed.exchange(true)) first = std::current_exception();
      }
    }
  };
  if (count <= 1) job(0u);  // one unit: no hand-off
  else engine.run(job);
  if (first) std::rethrow_exception(first);
}

}  // namespace detail

}  // namespace mldiag::cli
