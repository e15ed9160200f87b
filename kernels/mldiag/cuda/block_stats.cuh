// SPDX-License-Identifier: Apache-2.0
/// Device kernels: one thread block computes the tensor_stats of one chunk; merges in fixed order.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/block_stats.hpp"  // the element formats (constants only on the device)
#include "mldiag/stats/chunk_table.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace mldiag::inline MLDIAG_ABI::cuda::detail {

using mldiag::detail::chunk;

// 256 threads x 256 elements = one 65536-element chunk (the host engine's unit), so a chunk's
// partial covers the same elements on host and device.
inline constexpr int block_threads = 256;
inline constexpr int warps_per_block = block_threads / 32;
// 16-byte loads issued before any is used: four in flight per thread.
inline constexpr int loads_in_flight = 4;

// Where a tensor of the list lives (plain data, copied to the device by the plan).
struct device_tensor {
  const void* data;
  std::uint64_t numel;
};

// Accumulators of one thread. Every element of a chunk is seen by exactly one thread; which
// one depends only on the chunk's length and alignment, never on the launch.
struct thread_acc {
  float lo, hi;
  std::uint32_t zeros = 0;
  std::uint32_t non_finite = 0;  // the fast path only notes that there is one
  double s = 0.0, q = 0.0;
};

template <class F>
__device__ inline bool finite_bits(std::uint32_t a) {
  if constexpr (F::has_inf) return a < F::inf;
  else return a != F::inf;
}

// The float value of finite narrow bits (the host's value_of, on the device).
template <class F>
__device__ inline float widen(std::uint32_t u) {
  if constexpr (F::sign_shift == F::mag_shift) {
    return __uint_as_float(u << F::mag_shift);
  } else {
    const std::uint32_t sign = (u & (F::abs_mask + 1u)) << F::sign_shift;
    const std::uint32_t mag = (u & F::abs_mask) << F::mag_shift;
    return __uint_as_float(sign | mag) * F::scale;
  }
}

// The fast step: no select. fp32 and bf16 need no test at all: an Inf or NaN makes the
// thread's sum of squares non-finite, checked once per chunk (3 of ~16 PTX instructions per
// bf16 element saved). The other formats widen Inf/NaN patterns to finite floats and raise
// `non_finite` instead.
template <class F>
__device__ inline void fast_step(thread_acc& t, std::uint32_t u, double shift) {
  const std::uint32_t a = u & F::abs_mask;
  if constexpr (!F::widens_non_finite) t.non_finite |= finite_bits<F>(a) ? 0u : 1u;
  t.zeros += a == 0 ? 1u : 0u;
  const float v = widen<F>(u);
  t.lo = fminf(t.lo, v);
  t.hi = fmaxf(t.hi, v);
  const double d = static_cast<double>(v) - shift;
  t.s += d;
  t.q = fma(d, d, t.q);
}

// Element bits of a narrow format from a little-endian 16-byte word.
template <class F>
__device__ inline std::uint32_t element_of(const uint4& w, int j) {
  constexpr int bytes = sizeof(typename F::storage);
  const std::uint32_t word = j * bytes / 4 == 0 ? w.x : j * bytes / 4 == 1 ? w.y : j * bytes / 4 == 2 ? w.z : w.w;
  if constexpr (bytes == 4) return word;
  else if constexpr (bytes == 2) return (word >> (16 * (j % 2))) & 0xffffu;
  else return (word >> (8 * (j % 4))) & 0xffu;
}

template <class F>
__device__ inline std::uint32_t load_bits(const void* p, std::uint64_t i) {
  return static_cast<std::uint32_t>(static_cast<const typename F::storage*>(p)[i]);
}

// Reduces one value over the block in a fixed tree (shuffles within warps, then warp 0 over
// the warps' results); the result is valid in thread 0.
template <class T, class Op>
__device__ inline T block_reduce(T v, Op op, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  __syncthreads();  // `shared` may still be read from a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps_per_block ? shared[lane] : shared[0];
    for (int offset = warps_per_block / 2; offset > 0; offset /= 2) {
      const T other = __shfl_down_sync(0xffffffffu, v, offset);
      if (lane + offset < warps_per_block) v = op(v, other);
    }
  }
  return v;
}

struct op_add {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct op_min {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a < b ? a : b; }
};
struct op_max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct block_shared {
  double d[warps_per_block];
  float f[warps_per_block];
  unsigned long long u[warps_per_block];
};

// The careful path for a chunk that holds a non-finite element (or starts with one): the
// first finite element is the shift, non-finite elements are counted by class and replaced
// by the shift. Scalar loads; rare.
template <class F>
__device__ tensor_stats careful_chunk(const void* x, std::uint64_t n, block_shared& sh) {
  tensor_stats out;
  out.count = n;
  unsigned long long first = ~0ull;
  for (std::uint64_t i = threadIdx.x; i < n; i += block_threads) {
    if (finite_bits<F>(load_bits<F>(x, i) & F::abs_mask)) {
      first = i;
      break;
    }
  }
  first = block_reduce(first, op_min{}, sh.u);
  __shared__ unsigned long long first_shared;
  if (threadIdx.x == 0) first_shared = first;
  __syncthreads();
  first = first_shared;
  unsigned long long nan = 0, pos = 0, neg = 0, zeros = 0;
  float shift = 0.0f;
  if (first != ~0ull) shift = widen<F>(load_bits<F>(x, first));
  float lo = shift, hi = shift;
  double s = 0.0, q = 0.0;
  const double shift_d = shift;
  for (std::uint64_t i = threadIdx.x; i < n; i += block_threads) {
    const std::uint32_t u = load_bits<F>(x, i);
    const std::uint32_t a = u & F::abs_mask;
    if (!finite_bits<F>(a)) {
      if (!F::has_inf || a != F::inf) ++nan;
      else if (u == F::inf) ++pos;
      else ++neg;
      continue;
    }
    zeros += a == 0 ? 1u : 0u;
    const float v = widen<F>(u);
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
    const double d = static_cast<double>(v) - shift_d;
    s += d;
    q = fma(d, d, q);
  }
  nan = block_reduce(nan, op_add{}, sh.u);
  pos = block_reduce(pos, op_add{}, sh.u);
  neg = block_reduce(neg, op_add{}, sh.u);
  zeros = block_reduce(zeros, op_add{}, sh.u);
  lo = block_reduce(lo, op_min{}, sh.f);
  hi = block_reduce(hi, op_max{}, sh.f);
  s = block_reduce(s, op_add{}, sh.d);
  q = block_reduce(q, op_add{}, sh.d);
  if (threadIdx.x == 0) {
    out.nan = nan;
    out.pos_inf = pos;
    out.neg_inf = neg;
    out.zeros = zeros;
    mldiag::detail::finish_from_shifted_sums(out, lo, hi, shift_d, s, q, n - nan - pos - neg);
  }
  return out;
}

// The fast path: 16-byte loads over the aligned middle of the chunk, `loads_in_flight` per
// thread at a time; the misaligned head and the tail element by element. Returns false in
// every thread when the chunk holds a non-finite element.
template <class F>
__device__ bool fast_chunk(const void* x, std::uint64_t n, block_shared& sh, tensor_stats& out) {
  using storage = typename F::storage;
  constexpr int per_word = 16 / sizeof(storage);
  // The shift is the median of the first, middle and last elements, so that one outlier in
  // one of those places does not become the shift (the host engine does the same per block).
  const std::uint32_t b0 = load_bits<F>(x, 0), b1 = load_bits<F>(x, n / 2), b2 = load_bits<F>(x, n - 1);
  if (!finite_bits<F>(b0 & F::abs_mask) || !finite_bits<F>(b1 & F::abs_mask) || !finite_bits<F>(b2 & F::abs_mask))
    return false;  // uniform across the block: the careful path takes the chunk
  const float v0 = widen<F>(b0), v1 = widen<F>(b1), v2 = widen<F>(b2);
  const float shift = fmaxf(fminf(v0, v1), fminf(fmaxf(v0, v1), v2));
  const double shift_d = shift;
  thread_acc t;
  t.lo = t.hi = shift;
  // Head: elements before the first 16-byte boundary.
  const auto address = reinterpret_cast<std::uintptr_t>(x);
  const std::uint64_t misaligned = (address % 16) / sizeof(storage);
  const std::uint64_t head = misaligned == 0 ? 0 : (per_word - misaligned < n ? per_word - misaligned : n);
  if (threadIdx.x < head) fast_step<F>(t, load_bits<F>(x, threadIdx.x), shift_d);
  const auto* words = reinterpret_cast<const uint4*>(static_cast<const storage*>(x) + head);
  const std::uint64_t word_count = (n - head) / per_word;
  std::uint64_t w = threadIdx.x;
  for (; w + (loads_in_flight - 1) * block_threads < word_count; w += loads_in_flight * block_threads) {
    uint4 v[loads_in_flight];
#pragma unroll
    for (int k = 0; k < loads_in_flight; ++k) v[k] = __ldg(words + w + k * block_threads);
#pragma unroll
    for (int k = 0; k < loads_in_flight; ++k) {
#pragma unroll
      for (int j = 0; j < per_word; ++j) fast_step<F>(t, element_of<F>(v[k], j), shift_d);
    }
  }
  for (; w < word_count; w += block_threads) {
    const uint4 v = __ldg(words + w);
#pragma unroll
    for (int j = 0; j < per_word; ++j) fast_step<F>(t, element_of<F>(v, j), shift_d);
  }
  // Tail: what is left after the last whole word.
  const std::uint64_t tail_begin = head + word_count * per_word;
  if (tail_begin + threadIdx.x < n) fast_step<F>(t, load_bits<F>(x, tail_begin + threadIdx.x), shift_d);

  if constexpr (F::widens_non_finite) {
    const auto bits = static_cast<unsigned long long>(__double_as_longlong(t.q));
    t.non_finite = (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull ? 1u : 0u;
  }
  if (__syncthreads_or(t.non_finite != 0)) return false;
  const unsigned long long zeros = block_reduce<unsigned long long>(t.zeros, op_add{}, sh.u);
  const float lo = block_reduce(t.lo, op_min{}, sh.f);
  const float hi = block_reduce(t.hi, op_max{}, sh.f);
  const double s = block_reduce(t.s, op_add{}, sh.d);
  const double q = block_reduce(t.q, op_add{}, sh.d);
  if (threadIdx.x == 0) {
    out.count = n;
    out.zeros = zeros;
    mldiag::detail::finish_from_shifted_sums(out, lo, hi, shift_d, s, q, n);
  }
  return true;
}

// float64 chunks: a first look for classes and the largest magnitude, then moments of the
// values scaled by 2^-e (exact), as on the host. Scalar loads; float64 gradients are rare.
__device__ inline tensor_stats f64_chunk(const double* x, std::uint64_t n, block_shared& sh) {
  using F = mldiag::detail::fmt_f64;
  tensor_stats out;
  out.count = n;
  unsigned long long nan = 0, pos = 0, neg = 0, zeros = 0, first = ~0ull;
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (std::uint64_t i = threadIdx.x; i < n; i += block_threads) {
    const auto u = static_cast<std::uint64_t>(__double_as_longlong(x[i]));
    const std::uint64_t a = u & F::abs_mask;
    if (a >= F::inf) {
      if (a > F::inf) ++nan;
      else if (u == F::inf) ++pos;
      else ++neg;
      continue;
    }
    if (first == ~0ull) first = i;
    zeros += a == 0 ? 1u : 0u;
    lo = fmin(lo, x[i]);
    hi = fmax(hi, x[i]);
  }
  nan = block_reduce(nan, op_add{}, sh.u);
  pos = block_reduce(pos, op_add{}, sh.u);
  neg = block_reduce(neg, op_add{}, sh.u);
  zeros = block_reduce(zeros, op_add{}, sh.u);
  first = block_reduce(first, op_min{}, sh.u);
  struct dmin { __device__ double operator()(double a, double b) const { return fmin(a, b); } };
  struct dmax { __device__ double operator()(double a, double b) const { return fmax(a, b); } };
  lo = block_reduce(lo, dmin{}, sh.d);
  hi = block_reduce(hi, dmax{}, sh.d);
  __shared__ double scale_shared[3];
  __shared__ unsigned long long first_shared;
  if (threadIdx.x == 0) {
    out.nan = nan;
    out.pos_inf = pos;
    out.neg_inf = neg;
    out.zeros = zeros;
    first_shared = first;
    const int e = mldiag::detail::scale_exponent(fmax(-lo, hi));
    scale_shared[0] = ldexp(1.0, -e);
    scale_shared[1] = lo;
    scale_shared[2] = hi;
  }
  __syncthreads();
  if (first_shared == ~0ull) return out;
  const double scale = scale_shared[0];
  const double shift = x[first_shared] * scale;
  double s = 0.0, q = 0.0;
  for (std::uint64_t i = threadIdx.x; i < n; i += block_threads) {
    const auto u = static_cast<std::uint64_t>(__double_as_longlong(x[i]));
    if ((u & F::abs_mask) >= F::inf) continue;
    const double d = x[i] * scale - shift;
    s += d;
    q = fma(d, d, q);
  }
  s = block_reduce(s, op_add{}, sh.d);
  q = block_reduce(q, op_add{}, sh.d);
  if (threadIdx.x == 0) {
    const std::uint64_t finite = n - out.nan - out.pos_inf - out.neg_inf;
    // The scaled sums give mean and M2 in units of 2^e: finish in those units, then restate.
    tensor_stats scaled = out;
    mldiag::detail::finish_from_shifted_sums(scaled, scale_shared[1] * scale, scale_shared[2] * scale,
                                             shift, s, q, finite);
    out.min = scale_shared[1];
    out.max = scale_shared[2];
    out.max_abs = fmax(-out.min, out.max);
    out.scale_exp = mldiag::detail::scale_exponent(out.max_abs);
    // scaled.* are relative to 2^(scale_exp(scaled max_abs)); bring them to out.scale_exp.
    out.mean_scaled = ldexp(scaled.mean_scaled, scaled.scale_exp);
    out.mean_lo = static_cast<float>(ldexp(static_cast<double>(scaled.mean_lo), scaled.scale_exp));
    out.m2_scaled = ldexp(scaled.m2_scaled, 2 * scaled.scale_exp);
  }
  return out;
}

// One block per chunk of the group [first, first + count) of the table, grid-stride.
template <class F>
__global__ void __launch_bounds__(block_threads)
    chunk_stats_kernel(const device_tensor* __restrict__ tensors, const chunk* __restrict__ chunks,
                       std::uint64_t first, std::uint64_t count, tensor_stats* __restrict__ partials) {
  static_assert(block_threads % 32 == 0 && warps_per_block <= 32);
  __shared__ block_shared sh;
  for (std::uint64_t c = blockIdx.x; c < count; c += gridDim.x) {
    const chunk ch = chunks[first + c];
    const device_tensor t = tensors[ch.tensor];
    const std::uint64_t n = ch.end - ch.begin;
    tensor_stats result;
    if constexpr (std::is_same_v<F, mldiag::detail::fmt_f64>) {
      result = f64_chunk(static_cast<const double*>(t.data) + ch.begin, n, sh);
    } else {
      const void* x = static_cast<const typename F::storage*>(t.data) + ch.begin;
      if (!fast_chunk<F>(x, n, sh, result)) result = careful_chunk<F>(x, n, sh);
    }
    if (threadIdx.x == 0) partials[first + c] = result;
    __syncthreads();
  }
}

// Merges `count` statistics (tensor_stats, entropy_stats: anything with merge()) from `in` in
// a fixed tree: each thread merges a contiguous run in order, then pairs halve. Valid in thread
// 0. The run's loads go four at a time, issued before the first of them is merged (for one
// block merging a 4 GiB tensor's 32768 partials, 128 a thread, that saved about 30 of some
// 220 us on an H200, leaving 192; merging such a tensor in groups, merge_tensors_kernel, did
// the rest).
template <class T>
__device__ inline T block_merge(const T* in, std::uint64_t count, T* shared /* [block_threads] */) {
  const std::uint64_t per = (count + block_threads - 1) / block_threads;
  const std::uint64_t begin = threadIdx.x * per < count ? threadIdx.x * per : count;
  const std::uint64_t end = begin + per < count ? begin + per : count;
  T acc;
  std::uint64_t k = begin;
  for (; k + 4 <= end; k += 4) {
    const T a = in[k], b = in[k + 1], c = in[k + 2], d = in[k + 3];
    acc.merge(a);
    acc.merge(b);
    acc.merge(c);
    acc.merge(d);
  }
  for (; k < end; ++k) acc.merge(in[k]);
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = block_threads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x].merge(shared[threadIdx.x + stride]);
    __syncthreads();
  }
  return shared[0];
}

// Partials one block merges: a tensor of more chunks is merged in groups of this many, one
// block a group, and the last block of the tensor to finish merges the groups' results.
inline constexpr std::uint64_t merge_group = block_threads;

// The tensors' chunk partials into one result per tensor, in a fixed tree whatever the grid:
// a tensor of at most merge_group chunks is one block's block_merge; a longer one is cut into
// groups of merge_group consecutive partials, each merged by a block into group_results, and
// the block that finishes its tensor's last group (an atomic count per tensor, reset by that
// block for the next compute) merges the groups' results in group order. One 4 GiB bf16 tensor
// (32768 partials) took 192 us in one block, about 15% of the statistics' time (H200;
// docs/benchmarks.md); in groups, 128 blocks share it.
// `group_tensor[g]` is the tensor of group g, `group_first[i]` the first group of tensor i;
// `done[i]` is 0 between computes (the plan's upload zeroes it).
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link
// (tests/cuda/link_twice_a.cu and link_twice_b.cu check it).
template <class Unused = void>
__global__ void __launch_bounds__(block_threads)
    merge_tensors_kernel(const tensor_stats* __restrict__ partials, const std::uint64_t* __restrict__ first,
                         const std::uint64_t* __restrict__ count, const std::uint64_t* __restrict__ group_tensor,
                         const std::uint64_t* __restrict__ group_first, std::uint64_t groups,
                         unsigned int* done, tensor_stats* group_results, tensor_stats* __restrict__ results) {
  // Raw storage: tensor_stats has default member initializers, which __shared__ disallows.
  __shared__ alignas(tensor_stats) unsigned char storage[block_threads * sizeof(tensor_stats)];
  __shared__ int last;
  auto* shared = reinterpret_cast<tensor_stats*>(storage);
  for (std::uint64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const std::uint64_t i = group_tensor[g];
    const std::uint64_t c = count[i];
    if (c <= merge_group) {
      const tensor_stats r = block_merge(partials + first[i], c, shared);
      if (threadIdx.x == 0) results[i] = r;
      __syncthreads();
      continue;
    }
    const std::uint64_t j = g - group_first[i], ngroups = (c + merge_group - 1) / merge_group;
    const std::uint64_t begin = j * merge_group, n = c - begin < merge_group ? c - begin : merge_group;
    const tensor_stats r = block_merge(partials + first[i] + begin, n, shared);
    if (threadIdx.x == 0) {
      group_results[g] = r;
      __threadfence();  // the result is visible before the count says so
      last = atomicAdd(done + i, 1u) == ngroups - 1 ? 1 : 0;
    }
    __syncthreads();
    if (last != 0) {
      __threadfence();
      const tensor_stats all = block_merge(group_results + group_first[i], ngroups, shared);
      if (threadIdx.x == 0) {
        results[i] = all;
        done[i] = 0;
      }
    }
    __syncthreads();
  }
}

// One block: the total over the tensors in a fixed tree, and the "any non-finite" flag.
// A template, as merge_tensors_kernel.
template <class Unused = void>
__global__ void __launch_bounds__(block_threads)
    merge_total_kernel(tensor_stats* __restrict__ results, std::uint64_t tensors, int* __restrict__ any_non_finite) {
  __shared__ alignas(tensor_stats) unsigned char storage[block_threads * sizeof(tensor_stats)];
  auto* shared = reinterpret_cast<tensor_stats*>(storage);
  const tensor_stats total = block_merge(results, tensors, shared);
  if (threadIdx.x == 0) {
    results[tensors] = total;
    *any_non_finite = total.non_finite() > 0 ? 1 : 0;
  }
}

}  // namespace mldiag::cuda::detail
