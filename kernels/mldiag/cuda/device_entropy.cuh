// SPDX-License-Identifier: Apache-2.0
/// Row entropy on the device: rows of probabilities or logits -> entropy_stats, asynchronously.
#pragma once

#include "mldiag/cuda/block_stats.cuh"
#include "mldiag/cuda/check.cuh"
#include "mldiag/stats/entropy.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mldiag::cuda {
namespace detail {

// Rows up to this length go one per warp (many short router rows); longer rows one per block
// (long attention rows), so no warp walks a 32k-element row alone.
inline constexpr std::uint64_t warp_row_limit = 4096;

// One row's result: entropy, support, and whether it has one.
struct row_entropy {
  double h;
  std::uint64_t support;  // 0: invalid row
};

// A lane's share of a row: the online log-sum-exp state for logits, or (S, T) for
// probabilities (S = sum p, T = sum p log p), and an invalid mark.
struct row_part {
  logit_row_state lse;
  double s = 0.0, t = 0.0;
  bool invalid = false;
};

template <class F, bool Logits>
__device__ inline void row_add(row_part& p, std::uint32_t u) {
  const std::uint32_t a = u & F::abs_mask;
  const bool fin = finite_bits<F>(a);
  if constexpr (Logits) {
    if (fin) p.lse.add(static_cast<double>(widen<F>(u)));
    else if (!(F::has_inf && a == F::inf && u != a)) p.invalid = true;  // NaN or +Inf
  } else {
    if (!fin) {
      p.invalid = true;
      return;
    }
    const double x = static_cast<double>(widen<F>(u));
    if (x < 0.0) p.invalid = true;
    else if (x > 0.0) {
      p.s += x;
      p.t += x * log(x);
    }
  }
}

__device__ inline void row_merge(row_part& a, const row_part& b) {
  a.lse.merge(b.lse);
  a.s += b.s;
  a.t += b.t;
  a.invalid = a.invalid || b.invalid;
}

__device__ inline row_part shfl_down(const row_part& p, int offset) {
  row_part o;
  o.lse.m = __shfl_down_sync(0xffffffffu, p.lse.m, offset);
  o.lse.s = __shfl_down_sync(0xffffffffu, p.lse.s, offset);
  o.lse.u = __shfl_down_sync(0xffffffffu, p.lse.u, offset);
  o.lse.support = __shfl_down_sync(0xffffffffu, p.lse.support, offset);
  o.s = __shfl_down_sync(0xffffffffu, p.s, offset);
  o.t = __shfl_down_sync(0xffffffffu, p.t, offset);
  o.invalid = __shfl_down_sync(0xffffffffu, p.invalid ? 1 : 0, offset) != 0;
  return o;
}

template <bool Logits>
__device__ inline row_entropy finish_row(const row_part& p, std::uint64_t row_len) {
  if constexpr (Logits) {
    if (p.invalid || p.lse.support == 0) return {0.0, 0};
    const double h = p.lse.entropy();
    if (isnan(h)) return {0.0, 0};  // not a number: the row is invalid, never a valid 0
    return {h, p.lse.support};
  } else {
    if (p.invalid || p.s == 0.0) return {0.0, 0};
    const double h = log(p.s) - p.t / p.s;
    if (isnan(h)) return {0.0, 0};  // invalid, as on the host
    return {h > 0.0 ? h : 0.0, row_len};  // a rounding below 0 is 0
  }
}

// Warp per row; lanes stride over the row; a fixed butterfly merges the lanes.
template <class F, bool Logits>
__global__ void __launch_bounds__(block_threads)
    entropy_warp_rows_kernel(const typename F::storage* __restrict__ x, std::uint64_t rows,
                             std::uint64_t row_len, row_entropy* __restrict__ out) {
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * warps_per_block;
  const int lane = threadIdx.x % 32;
  for (std::uint64_t r = blockIdx.x * static_cast<std::uint64_t>(warps_per_block) + threadIdx.x / 32; r < rows; r += warps) {
    row_part p;
    const auto* row = x + r * row_len;
    for (std::uint64_t i = lane; i < row_len; i += 32) row_add<F, Logits>(p, static_cast<std::uint32_t>(row[i]));
    for (int offset = 16; offset > 0; offset /= 2) {
      const row_part other = shfl_down(p, offset);
      row_merge(p, other);
    }
    if (lane == 0) out[r] = finish_row<Logits>(p, row_len);
  }
}

// Block per row: threads stride over the row; warps merge by butterfly, then warp 0 merges
// the warps in order.
template <class F, bool Logits>
__global__ void __launch_bounds__(block_threads)
    entropy_block_rows_kernel(const typename F::storage* __restrict__ x, std::uint64_t rows,
                              std::uint64_t row_len, row_entropy* __restrict__ out) {
  __shared__ alignas(row_part) unsigned char storage[warps_per_block * sizeof(row_part)];
  auto* parts = reinterpret_cast<row_part*>(storage);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (std::uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    row_part p;
    const auto* row = x + r * row_len;
    for (std::uint64_t i = threadIdx.x; i < row_len; i += block_threads) row_add<F, Logits>(p, static_cast<std::uint32_t>(row[i]));
    for (int offset = 16; offset > 0; offset /= 2) {
      const row_part other = shfl_down(p, offset);
      row_merge(p, other);
    }
    if (lane == 0) parts[warp] = p;
    __syncthreads();
    if (threadIdx.x == 0) {
      row_part all = parts[0];
      for (int w = 1; w < warps_per_block; ++w) row_merge(all, parts[w]);
      out[r] = finish_row<Logits>(all, row_len);
    }
    __syncthreads();
  }
}

// One block: the rows' entropies into entropy_stats, each thread a contiguous run in order,
// then a fixed tree.
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link
// (tests/cuda/link_twice_a.cu and link_twice_b.cu check it).
template <class Unused = void>
__global__ void __launch_bounds__(block_threads)
    entropy_reduce_kernel(const row_entropy* __restrict__ rows_in, std::uint64_t rows, entropy_stats* __restrict__ out) {
  __shared__ alignas(entropy_stats) unsigned char storage[block_threads * sizeof(entropy_stats)];
  auto* shared = reinterpret_cast<entropy_stats*>(storage);
  const std::uint64_t per = (rows + block_threads - 1) / block_threads;
  entropy_stats acc;
  for (std::uint64_t k = threadIdx.x * per; k < rows && k < (threadIdx.x + 1) * per; ++k) {
    if (rows_in[k].support == 0) ++acc.invalid_rows;
    else acc.add_row(rows_in[k].h, rows_in[k].support);
  }
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = block_threads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x].merge(shared[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = shared[0];
}

}  // namespace detail

/// Device workspace bytes for the entropy of `rows` rows.
[[nodiscard]] inline std::size_t entropy_workspace_bytes(std::uint64_t rows) noexcept {
  return (rows * sizeof(detail::row_entropy) + 255) / 256 * 256;
}

/// Enqueues the row entropy of a contiguous device tensor of rows of `row_len` logits
/// (`logits` true, entropy of softmax with an online log-sum-exp; -inf entries masked) or
/// probabilities, into `*d_out` (device memory), on `stream`. Rows up to 4096 long go one per
/// warp, longer ones one per block. No allocation, no host synchronization.
inline void entropy_rows(const tensor_ref& t, std::int64_t row_len, bool logits, void* d_workspace,
                         std::size_t workspace_bytes, entropy_stats* d_out, cudaStream_t stream) {
  const char* who = logits ? "cuda::entropy_from_logits" : "cuda::entropy_from_probs";
  if (!t.is_contiguous()) mldiag::detail::fail(who, t.name(), "strided device tensors are not supported yet");
  require_device_memory(t, t.device().index, who);
  if (row_len <= 0) mldiag::detail::fail(who, t.name(), "row length " + std::to_string(row_len) + " is not positive");
  const auto len = static_cast<std::uint64_t>(row_len);
  if (t.numel() % len != 0) {
    mldiag::detail::fail(who, t.name(), std::to_string(t.numel()) + " elements do not divide into rows of " + std::to_string(row_len));
  }
  const std::uint64_t rows = t.numel() / len;
  if (workspace_bytes < entropy_workspace_bytes(rows) || (rows > 0 && d_workspace == nullptr)) {
    mldiag::detail::fail(who, t.name(), "workspace too small: needs entropy_workspace_bytes(rows) = " +
                                            std::to_string(entropy_workspace_bytes(rows)) + " bytes");
  }
  auto* per_row = static_cast<detail::row_entropy*>(d_workspace);
  const bool by_warp = len <= detail::warp_row_limit;
  const std::uint64_t units = by_warp ? (rows + detail::warps_per_block - 1) / detail::warps_per_block : rows;
  const auto blocks = static_cast<unsigned>(units == 0 ? 1 : (units < 65535u * 16u ? units : 65535u * 16u));
  if (t.dtype() == dtype::f64) {
    mldiag::detail::fail(who, t.name(), "float64 rows are not supported on the device yet; use the host entropy");
  }
  mldiag::detail::with_format(t.dtype(), [&](auto tag) {
    using F = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<F, mldiag::detail::fmt_f64>) {
      const auto* x = static_cast<const typename F::storage*>(t.data());
      if (logits) {
        if (by_warp) detail::entropy_warp_rows_kernel<F, true><<<blocks, detail::block_threads, 0, stream>>>(x, rows, len, per_row);
        else detail::entropy_block_rows_kernel<F, true><<<blocks, detail::block_threads, 0, stream>>>(x, rows, len, per_row);
      } else {
        if (by_warp) detail::entropy_warp_rows_kernel<F, false><<<blocks, detail::block_threads, 0, stream>>>(x, rows, len, per_row);
        else detail::entropy_block_rows_kernel<F, false><<<blocks, detail::block_threads, 0, stream>>>(x, rows, len, per_row);
      }
    }
  });
  check(cudaGetLastError(), std::string(who) + ": row kernel launch");
  detail::entropy_reduce_kernel<><<<1, detail::block_threads, 0, stream>>>(per_row, rows, d_out);
  check(cudaGetLastError(), std::string(who) + ": reduce kernel launch");
}

}  // namespace mldiag::cuda
