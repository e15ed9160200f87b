// SPDX-License-Identifier: Apache-2.0
/// The inference monitor's device half: the first non-finite event of a run by atomic minimum
/// and per-row fingerprints, into fixed device buffers, with no allocation and no host
/// synchronization, so that both run inside a captured CUDA graph; the host reads the buffers
/// back later through a pinned copy and an event (`inference_readback`).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/cuda/check.cuh"
#include "mldiag/inference/fingerprint.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// The sentinel's device record: the smallest key of a non-finite element seen, and counts.
/// A key orders events as the host monitor does: step (high 24 bits), the tap's order in its
/// step (16 bits), then the row (24 bits), so the atomic minimum is the first event.
struct sentinel_record {
  unsigned long long first_key;
  unsigned long long nan;
  unsigned long long inf;
};

inline constexpr unsigned long long sentinel_none = ~0ull;

[[nodiscard]] MLDIAG_HOST_DEVICE constexpr unsigned long long sentinel_key(std::int64_t step, unsigned order,
                                                                         std::uint64_t row) noexcept {
  return (static_cast<unsigned long long>(step & 0xffffff) << 40) | (static_cast<unsigned long long>(order & 0xffff) << 24) |
         static_cast<unsigned long long>(row & 0xffffff);
}

namespace detail {
template <class T>
__device__ inline float load_float(const T* p, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) return p[i];
  else if constexpr (std::is_same_v<T, __half>) return __half2float(p[i]);
  else return __bfloat162float(p[i]);
}

// Counts NaN and Inf and takes the minimum key of the elements holding one: one atomic per
// warp that saw any (a ballot), none otherwise, so a clean tensor costs a read.
template <class T>
__global__ void sentinel_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t cols, unsigned long long key_base,
                                sentinel_record* rec) {
  const unsigned lane = threadIdx.x & 31u;
  for (std::int64_t base = blockIdx.x * static_cast<std::int64_t>(blockDim.x); base < n;
       base += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = base + threadIdx.x;
    bool is_nan = false, is_inf = false;
    if (i < n) {
      const float v = load_float(x, i);
      is_nan = v != v;
      is_inf = !is_nan && (v - v != 0.0f);
    }
    const unsigned nans = __ballot_sync(0xffffffffu, is_nan), infs = __ballot_sync(0xffffffffu, is_inf);
    if ((nans | infs) == 0u) continue;
    unsigned long long key = (is_nan || is_inf) ? key_base + static_cast<unsigned long long>(i / cols) : sentinel_none;
    for (int off = 16; off > 0; off >>= 1) {
      const unsigned long long other = __shfl_down_sync(0xffffffffu, key, off);
      key = other < key ? other : key;
    }
    if (lane == 0) {
      atomicMin(&rec->first_key, key);
      if (nans) atomicAdd(&rec->nan, static_cast<unsigned long long>(__popc(nans)));
      if (infs) atomicAdd(&rec->inf, static_cast<unsigned long long>(__popc(infs)));
    }
  }
}

// The device fingerprint of one row: count, NaN, Inf, amax, sum, sum of squares and the 64
// sketch buckets, as host make_fingerprint computes them (same hash of the column).
struct row_fingerprint {
  unsigned long long nan, inf;
  double amax, sum, sum_squares;
  double sketch[inference::sketch_buckets];
};

template <class T>
__global__ void fingerprint_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols, row_fingerprint* out) {
  __shared__ double sketch[inference::sketch_buckets];
  __shared__ double sum, sum_squares, amax;
  __shared__ unsigned long long nan, inf;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (unsigned b = threadIdx.x; b < inference::sketch_buckets; b += blockDim.x) sketch[b] = 0.0;
    if (threadIdx.x == 0) sum = sum_squares = amax = 0.0, nan = inf = 0;
    __syncthreads();
    double s = 0.0, q = 0.0, m = 0.0;
    unsigned long long nn = 0, ni = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = load_float(x, r * cols + c);
      if (v != v) {
        ++nn;
        continue;
      }
      if (v - v != 0.0f) {
        ++ni;
        continue;
      }
      const double d = v;
      s += d;
      q += d * d;
      m = fmax(m, fabs(d));
      const std::uint64_t h = inference::detail::mix(static_cast<std::uint64_t>(c));
      atomicAdd(&sketch[h % inference::sketch_buckets], (h >> 63) ? -d : d);
    }
    atomicAdd(&sum, s);
    atomicAdd(&sum_squares, q);
    // amax >= 0: the bits of non-negative doubles order as the values do.
    atomicMax(reinterpret_cast<unsigned long long*>(&amax), static_cast<unsigned long long>(__double_as_longlong(m)));
    if (nn) atomicAdd(&nan, nn);
    if (ni) atomicAdd(&inf, ni);
    __syncthreads();
    if (threadIdx.x == 0) {
      out[r].nan = nan, out[r].inf = inf, out[r].amax = amax, out[r].sum = sum, out[r].sum_squares = sum_squares;
    }
    for (unsigned b = threadIdx.x; b < inference::sketch_buckets; b += blockDim.x) out[r].sketch[b] = sketch[b];
    __syncthreads();
  }
}
}  // namespace detail

/// Fixed device buffers for one run: the sentinel record and room for `max_rows` fingerprints.
/// Allocated once (before any graph capture); every call after that only launches kernels and
/// enqueues copies on the caller's stream.
///
/// **Example**
/// ```cpp
/// mldiag::cuda::inference_buffers buf(4096);
/// buf.reset(stream);                                   // outside or inside the graph
/// buf.sentinel(d_h, rows * cols, cols, step, order, stream);  // at each tap
/// buf.readback(stream);                                // async copy to pinned memory
/// if (auto ev = buf.poll(); ev && ev->any()) report(*ev);      // a step later
/// ```
class inference_buffers {
 public:
  explicit inference_buffers(std::size_t max_rows) : max_rows_(max_rows) {
    check(cudaMalloc(&d_record_, sizeof(sentinel_record)), "cuda::inference_buffers: sentinel record");
    if (max_rows_ > 0)
      check(cudaMalloc(&d_rows_, max_rows_ * sizeof(detail::row_fingerprint)), "cuda::inference_buffers: fingerprint rows");
    check(cudaMallocHost(&h_record_, sizeof(sentinel_record)), "cuda::inference_buffers: pinned record");
    check(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "cuda::inference_buffers: event");
    h_record_->first_key = sentinel_none, h_record_->nan = h_record_->inf = 0;
  }
  inference_buffers(const inference_buffers&) = delete;
  inference_buffers& operator=(const inference_buffers&) = delete;
  ~inference_buffers() {
    cudaEventDestroy(copied_);
    cudaFreeHost(h_record_);
    cudaFree(d_rows_);
    cudaFree(d_record_);
  }

  /// Clears the sentinel record (a memset node in a graph).
  void reset(cudaStream_t stream) {
    check(cudaMemsetAsync(d_record_, 0xff, sizeof(unsigned long long), stream), "cuda::inference_buffers::reset");
    check(cudaMemsetAsync(reinterpret_cast<char*>(d_record_) + sizeof(unsigned long long), 0, 2 * sizeof(unsigned long long), stream),
          "cuda::inference_buffers::reset");
  }

  /// The sentinel over one tapped tensor of `n` elements in rows of `cols` (float, __half or
  /// __nv_bfloat16), tap `order` of step `step`.
  template <class T>
  void sentinel(const T* d_x, std::int64_t n, std::int64_t cols, std::int64_t step, unsigned order, cudaStream_t stream) {
    if (n <= 0) return;
    if (cols <= 0) throw error("cuda::inference_buffers::sentinel: cols is " + std::to_string(cols) + "; give the row length");
    const int threads = 256;
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((n + threads - 1) / threads, 1024));
    detail::sentinel_kernel<<<blocks, threads, 0, stream>>>(d_x, n, cols, sentinel_key(step, order, 0), d_record_);
    check(cudaGetLastError(), "cuda::inference_buffers::sentinel: launch");
  }

  /// Fingerprints of `rows` rows of `cols` elements into slots [first_slot, first_slot + rows).
  template <class T>
  void fingerprint(const T* d_x, std::int64_t rows, std::int64_t cols, std::size_t first_slot, cudaStream_t stream) {
    if (rows <= 0) return;
    if (first_slot + static_cast<std::size_t>(rows) > max_rows_) {
      throw error("cuda::inference_buffers::fingerprint: slots " + std::to_string(first_slot) + ".." +
                  std::to_string(first_slot + static_cast<std::size_t>(rows)) + " past the " + std::to_string(max_rows_) +
                  " the buffers were made for; make them larger");
    }
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(rows, 4096));
    detail::fingerprint_kernel<<<blocks, 128, 0, stream>>>(d_x, rows, cols, d_rows_ + first_slot);
    check(cudaGetLastError(), "cuda::inference_buffers::fingerprint: launch");
  }

  /// Enqueues the copy of the sentinel record to pinned memory and records an event; no wait.
  void readback(cudaStream_t stream) {
    check(cudaMemcpyAsync(h_record_, d_record_, sizeof(sentinel_record), cudaMemcpyDeviceToHost, stream),
          "cuda::inference_buffers::readback");
    check(cudaEventRecord(copied_, stream), "cuda::inference_buffers::readback: event");
    pending_ = true;
  }

  /// The sentinel's answer once its copy has landed (cudaEventQuery: never waits), else nothing.
  struct event {
    std::int64_t step = -1;
    unsigned order = 0;
    std::uint64_t row = 0;
    unsigned long long nan = 0, inf = 0;
    [[nodiscard]] bool any() const noexcept { return nan + inf > 0; }
  };
  [[nodiscard]] std::optional<event> poll() {
    if (!pending_) return std::nullopt;
    const cudaError_t q = cudaEventQuery(copied_);
    if (q == cudaErrorNotReady) return std::nullopt;
    check(q, "cuda::inference_buffers::poll");
    pending_ = false;
    event e;
    e.nan = h_record_->nan;
    e.inf = h_record_->inf;
    if (h_record_->first_key != sentinel_none) {
      e.step = static_cast<std::int64_t>(h_record_->first_key >> 40);
      e.order = static_cast<unsigned>((h_record_->first_key >> 24) & 0xffff);
      e.row = h_record_->first_key & 0xffffff;
    }
    return e;
  }

  /// Copies `rows` fingerprints from slot `first_slot` and fills host fingerprints (names and
  /// positions from `t`, the tap they were taken of). Synchronous: for the end of a request or
  /// a comparison run, not the decode loop.
  [[nodiscard]] std::vector<inference::fingerprint> fingerprints(const inference::tap& t, std::size_t first_slot, unsigned order) const {
    std::vector<detail::row_fingerprint> rows(t.rows);
    check(cudaMemcpy(rows.data(), d_rows_ + first_slot, t.rows * sizeof(detail::row_fingerprint), cudaMemcpyDeviceToHost),
          "cuda::inference_buffers::fingerprints");
    std::vector<inference::fingerprint> out;
    for (std::size_t r = 0; r < t.rows; ++r) {
      inference::fingerprint f = inference::detail::fingerprint_of(t, r, order);
      f.nan = rows[r].nan;
      f.inf = rows[r].inf;
      f.amax = rows[r].amax;
      inference::detail::finish_moments(f, rows[r].sum, rows[r].sum_squares);
      for (std::size_t b = 0; b < inference::sketch_buckets; ++b) f.sketch[b] = static_cast<float>(rows[r].sketch[b]);
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::size_t max_rows_;
  sentinel_record* d_record_ = nullptr;
  sentinel_record* h_record_ = nullptr;
  detail::row_fingerprint* d_rows_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  bool pending_ = false;
};

}  // namespace mldiag::cuda
