// SPDX-License-Identifier: Apache-2.0
/// Row entropy on the device: rows of probabilities or logits -> entropy_stats, asynchronously.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/cuda/block_stats.cuh"
#include "mldiag/cuda/check.cuh"
#include "mldiag/stats/entropy.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mldiag::inline MLDIAG_ABI::cuda {
namespace detail {

// Rows up to this length go one per warp (many short router rows); longer rows one per block
// (long attention rows), so no warp walks a 32k-element row alone.
inline constexpr std::uint64_t warp_row_limit = 4096;

// One row's result: entropy, support (0: invalid row), and log(support) for the normalized
// entropy, taken here where every thread has a row rather than in the one-block reduction.
struct row_entropy {
  double h = 0.0;
  std::uint64_t support = 0;
  double log_n = 0.0;
};

// Probabilities: a lane's share of a row, (S, T) with S = sum p and T = sum p log p, and an
// invalid mark (a NaN, an Inf or a negative p).
struct prob_part {
  double s = 0.0, t = 0.0;
  bool invalid = false;
};

template <class F>
__device__ inline void prob_add(prob_part& p, std::uint32_t u) {
  if (!finite_bits<F>(u & F::abs_mask)) {
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

// Sum, maximum and "or" of one value over a group of T threads (a warp, T = 32, or the block,
// T = block_threads), the same bits in every thread: a butterfly inside each warp (a + b and
// b + a are the same float), then, for a block, every thread combines the warps' values in
// warp order. `shared` holds warps_per_block values of the type. (op_add and op_max are
// block_stats.cuh's.)
struct op_or {
  __device__ int operator()(int a, int b) const { return a | b; }
};

template <int T, class V, class Op>
__device__ inline V group_all_reduce(V v, Op op, V* shared) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if constexpr (T == 32) {
    return v;
  } else {
    __syncthreads();  // `shared` may still be read from the previous reduction
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    V all = shared[0];
    for (int w = 1; w < T / 32; ++w) all = op(all, shared[w]);
    return all;
  }
}

struct group_scratch {
  float f[warps_per_block];
  int i[warps_per_block];
  unsigned long long u[warps_per_block];
  double d[warps_per_block];
};

// Calls fn(bits) for the elements of a row that thread t of a group of T owns, and done() after
// each 16-byte vector (or after each element where the row is read one element at a time): in
// 16-byte loads where the row starts on a 16-byte boundary and its length is a whole number of
// vectors (attention rows of 2^k keys), else element by element. Which thread reads which
// element depends only on the row's length and alignment.
template <class F, int T, class Fn, class Done>
__device__ inline void for_row(const typename F::storage* row, std::uint64_t len, int t, Fn&& fn, Done&& done) {
  using S = typename F::storage;
  constexpr std::uint64_t per_vec = 16 / sizeof(S);
  if (reinterpret_cast<std::uintptr_t>(row) % 16 == 0 && len % per_vec == 0) {
    const auto* v = reinterpret_cast<const uint4*>(row);
    const std::uint64_t vectors = len / per_vec;
#pragma unroll 4
    for (std::uint64_t i = static_cast<std::uint64_t>(t); i < vectors; i += T) {
      const uint4 q = v[i];
      const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (sizeof(S) == 4) {
          fn(w[j]);
        } else if constexpr (sizeof(S) == 2) {
          fn(w[j] & 0xffffu);
          fn(w[j] >> 16);
        } else {
          fn(w[j] & 0xffu);
          fn((w[j] >> 8) & 0xffu);
          fn((w[j] >> 16) & 0xffu);
          fn(w[j] >> 24);
        }
      }
      done();
    }
  } else {
    for (std::uint64_t i = static_cast<std::uint64_t>(t); i < len; i += T) {
      fn(static_cast<std::uint32_t>(row[i]));
      done();
    }
  }
}

// The entropy of one row of logits, by a group of T threads (thread t), in float lanes: pass 1
// finds the row's maximum m, its support (entries that are not -inf, the masked ones) and
// whether a NaN or +Inf makes it invalid; pass 2 (over the same bytes, now in L1 or L2) sums
// S = sum e^(x - m) and U = sum (x - m) e^(x - m) with the fast exponential (ex2.approx),
// folding the float sums of each vector (at most 16 terms) into double. H = log S - U / S.
// Error: each term's relative error is a few float ulps (x - m rounded, ex2.approx within
// 2 ulps), the float sums add at most 15 roundings; within the host's 2e-6 (1 + ln n) nats
// (docs/stats.md), tested against a long double softmax on fp32, bf16 and fp16 rows.
template <class F, int T>
__device__ inline row_entropy logits_row(const typename F::storage* row, std::uint64_t len, int t, group_scratch& sh) {
  float m = -HUGE_VALF;
  unsigned long long support = 0;
  int bad = 0;
  for_row<F, T>(
      row, len, t,
      [&](std::uint32_t u) {
        const std::uint32_t a = u & F::abs_mask;
        if (finite_bits<F>(a)) {
          m = fmaxf(m, widen<F>(u));
          ++support;
        } else if (!(F::has_inf && a == F::inf && u != a)) {
          bad = 1;  // NaN or +Inf
        }
      },
      [] {});
  m = group_all_reduce<T>(m, op_max{}, sh.f);
  support = group_all_reduce<T>(support, op_add{}, sh.u);
  bad = group_all_reduce<T>(bad, op_or{}, sh.i);
  if (bad != 0 || support == 0) return {};
  float sf = 0.0f, uf = 0.0f;
  double s = 0.0, u = 0.0;
  for_row<F, T>(
      row, len, t,
      [&](std::uint32_t bits) {
        if (!finite_bits<F>(bits & F::abs_mask)) return;  // -inf: masked (NaN and +Inf are out)
        const float d = widen<F>(bits) - m;                 // <= 0, or -inf where it overflows
        const float e = __expf(d);
        if (e > 0.0f) {  // e = 0: far below the maximum, nothing representable (and d e = NaN at d = -inf)
          sf += e;
          uf = fmaf(d, e, uf);
        }
      },
      [&] {
        s += static_cast<double>(sf);
        u += static_cast<double>(uf);
        sf = uf = 0.0f;
      });
  s = group_all_reduce<T>(s, op_add{}, sh.d);
  u = group_all_reduce<T>(u, op_add{}, sh.d);
  double h = log(s) - u / s;
  if (isnan(h)) return {};  // not a number: the row is invalid, never a valid 0
  if (h < 0.0) h = 0.0;     // a rounding below 0 is 0
  return {h, support, support > 1 ? log(static_cast<double>(support)) : 0.0};
}

// The entropy of one row of probabilities normalized to sum 1 (log S - T / S), in double.
template <class F, int T>
__device__ inline row_entropy probs_row(const typename F::storage* row, std::uint64_t len, int t, group_scratch& sh) {
  prob_part p;
  for_row<F, T>(row, len, t, [&](std::uint32_t u) { prob_add<F>(p, u); }, [] {});
  const double s = group_all_reduce<T>(p.s, op_add{}, sh.d);
  const double tt = group_all_reduce<T>(p.t, op_add{}, sh.d);
  const int bad = group_all_reduce<T>(p.invalid ? 1 : 0, op_or{}, sh.i);
  if (bad != 0 || s == 0.0) return {};
  const double h = log(s) - tt / s;
  if (isnan(h)) return {};  // invalid, as on the host
  return {h > 0.0 ? h : 0.0, len, len > 1 ? log(static_cast<double>(len)) : 0.0};
}

__device__ inline void add_row(entropy_stats& acc, const row_entropy& r) {
  if (r.support == 0) ++acc.invalid_rows;
  else acc.add_row(r.h, r.support, r.log_n);
}

// Rows of up to warp_row_limit: a warp per row. Warp w of block b takes rows
// (b + k gridDim) warps_per_block + w, k = 0, 1, ..., and adds them in that order into an
// accumulator of its own; the block's partial (partials[blockIdx.x]) is its warps' accumulators
// merged in warp order. No barrier until the end: a warp starts its next row as soon as it has
// finished one. The grid depends on the number of rows only (entropy_blocks), so the partials
// do too.
template <class F, bool Logits>
__global__ void __launch_bounds__(block_threads)
    entropy_warp_rows_kernel(const typename F::storage* __restrict__ x, std::uint64_t rows,
                             std::uint64_t row_len, entropy_stats* __restrict__ partials) {
  __shared__ group_scratch sh[warps_per_block];
  __shared__ alignas(entropy_stats) unsigned char storage[warps_per_block * sizeof(entropy_stats)];
  auto* warp_acc = reinterpret_cast<entropy_stats*>(storage);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  entropy_stats acc;
  for (std::uint64_t r = blockIdx.x * static_cast<std::uint64_t>(warps_per_block) + static_cast<std::uint64_t>(warp); r < rows;
       r += static_cast<std::uint64_t>(gridDim.x) * warps_per_block) {
    const auto* row = x + r * row_len;
    const row_entropy e = Logits ? logits_row<F, 32>(row, row_len, lane, sh[warp]) : probs_row<F, 32>(row, row_len, lane, sh[warp]);
    if (lane == 0) add_row(acc, e);
  }
  if (lane == 0) warp_acc[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    entropy_stats all = warp_acc[0];
    for (int w = 1; w < warps_per_block; ++w) all.merge(warp_acc[w]);
    partials[blockIdx.x] = all;
  }
}

// Longer rows: a block per row, its rows added in order into the block's partial.
template <class F, bool Logits>
__global__ void __launch_bounds__(block_threads)
    entropy_block_rows_kernel(const typename F::storage* __restrict__ x, std::uint64_t rows,
                              std::uint64_t row_len, entropy_stats* __restrict__ partials) {
  __shared__ group_scratch sh;
  entropy_stats acc;
  for (std::uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const auto* row = x + r * row_len;
    const row_entropy e = Logits ? logits_row<F, block_threads>(row, row_len, static_cast<int>(threadIdx.x), sh)
                                 : probs_row<F, block_threads>(row, row_len, static_cast<int>(threadIdx.x), sh);
    if (threadIdx.x == 0) add_row(acc, e);
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// One block: the blocks' partials into one entropy_stats (block_merge: each thread a contiguous
// run in order, then a fixed tree).
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link
// (tests/cuda/link_twice_a.cu and link_twice_b.cu check it).
template <class Unused = void>
__global__ void __launch_bounds__(block_threads)
    entropy_reduce_kernel(const entropy_stats* __restrict__ parts, std::uint64_t count, entropy_stats* __restrict__ out) {
  __shared__ alignas(entropy_stats) unsigned char storage[block_threads * sizeof(entropy_stats)];
  auto* shared = reinterpret_cast<entropy_stats*>(storage);
  const entropy_stats all = block_merge(parts, count, shared);
  if (threadIdx.x == 0) *out = all;
}

// Blocks of the row kernel for `rows` rows of `len`: the partials' count. At most 1024, so
// that the one-block reduction merges at most 4 partials a thread (one partial per 8 rows took
// 38 us for 65536 rows on an H200, about an eighth of the 312 us); 1024 blocks of 8 warps are about two
// waves on a 132-SM GPU.
inline constexpr std::uint64_t entropy_max_blocks = 1024;
[[nodiscard]] inline std::uint64_t entropy_blocks(std::uint64_t rows, std::uint64_t len) noexcept {
  const std::uint64_t units = len <= warp_row_limit ? (rows + warps_per_block - 1) / warps_per_block : rows;
  return units == 0 ? 1 : (units < entropy_max_blocks ? units : entropy_max_blocks);
}

}  // namespace detail

/// Device workspace bytes for the entropy of `rows` rows (of any length): room for the row
/// kernel's per-block partials, of which there are at most min(rows, 1024).
[[nodiscard]] inline std::size_t entropy_workspace_bytes(std::uint64_t rows) noexcept {
  const std::uint64_t parts = rows < detail::entropy_max_blocks ? rows : detail::entropy_max_blocks;
  return (parts * sizeof(entropy_stats) + 255) / 256 * 256;
}

/// Enqueues the row entropy of a contiguous device tensor of rows of `row_len` logits
/// (`logits` true, entropy of softmax in float lanes, two passes over each row, within
/// 2e-6 (1 + ln n) nats as on the host; -inf entries masked) or
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
  if (t.dtype() == dtype::f64) {
    mldiag::detail::fail(who, t.name(), "float64 rows are not supported on the device yet; use the host entropy");
  }
  auto* partials = static_cast<entropy_stats*>(d_workspace);
  const std::uint64_t blocks = rows == 0 ? 0 : detail::entropy_blocks(rows, len);
  if (rows > 0) {
    const bool by_warp = len <= detail::warp_row_limit;
    const auto grid = static_cast<unsigned>(blocks);
    mldiag::detail::with_format(t.dtype(), [&](auto tag) {
      using F = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<F, mldiag::detail::fmt_f64>) {
        const auto* x = static_cast<const typename F::storage*>(t.data());
        if (logits) {
          if (by_warp) detail::entropy_warp_rows_kernel<F, true><<<grid, detail::block_threads, 0, stream>>>(x, rows, len, partials);
          else detail::entropy_block_rows_kernel<F, true><<<grid, detail::block_threads, 0, stream>>>(x, rows, len, partials);
        } else {
          if (by_warp) detail::entropy_warp_rows_kernel<F, false><<<grid, detail::block_threads, 0, stream>>>(x, rows, len, partials);
          else detail::entropy_block_rows_kernel<F, false><<<grid, detail::block_threads, 0, stream>>>(x, rows, len, partials);
        }
      }
    });
    check(cudaGetLastError(), std::string(who) + ": row kernel launch");
  }
  detail::entropy_reduce_kernel<><<<1, detail::block_threads, 0, stream>>>(partials, blocks, d_out);
  check(cudaGetLastError(), std::string(who) + ": reduce kernel launch");
}

}  // namespace mldiag::cuda
