// SPDX-License-Identifier: Apache-2.0
/// `host_engine`: the worker threads that the host statistics run on, started once.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// A fixed set of worker threads, started at construction and reused by every call: running
/// a job allocates nothing and starts no thread. The calling thread is worker 0, so
/// `host_engine(1)` starts no thread at all.
///
/// Results computed with it never depend on the number of threads: work is split into fixed
/// units whose results are merged in a fixed order (see `stats_plan`).
///
/// **Example**
/// ```cpp
/// mldiag::host_engine engine(2);  // the caller and one worker
/// plan.compute(engine);
/// ```
class host_engine {
 public:
  /// `threads` >= 1 workers, counting the caller.
  explicit host_engine(unsigned threads = 1) : threads_(threads) {
    if (threads == 0 || threads > 1024) {
      throw error("host_engine: " + std::to_string(threads) +
                  " threads requested; ask for 1 to 1024 (1 runs on the caller only)");
    }
    workers_.reserve(threads - 1);
    for (unsigned w = 1; w < threads; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
  }
  host_engine(const host_engine&) = delete;
  host_engine& operator=(const host_engine&) = delete;
  ~host_engine() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  [[nodiscard]] unsigned threads() const noexcept { return threads_; }

  /// Runs `job(worker)` once on every worker (0 .. threads()-1) and returns when all are
  /// done. `job` must not throw. One job at a time: calls from several threads serialize.
  template <class Job>
  void run(Job& job) {
    std::lock_guard serial(run_mutex_);
    if (threads_ == 1) {
      job(0u);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      fn_ = [](void* ctx, unsigned w) { (*static_cast<Job*>(ctx))(w); };
      ctx_ = &job;
      pending_ = threads_ - 1;
      ++generation_;
    }
    wake_.notify_all();
    job(0u);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void worker_loop(unsigned w) {
    std::uint64_t seen = 0;
    for (;;) {
      void (*fn)(void*, unsigned) = nullptr;
      void* ctx = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stopping_) return;
        fn = fn_;
        ctx = ctx_;
      }
      fn(ctx, w);
      {
        std::lock_guard lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  void (*fn_)(void*, unsigned) = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace mldiag
