// SPDX-License-Identifier: Apache-2.0
/// The float-accumulating host kernel for one block, and its instantiation per ISA.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/block_stats_narrow.hpp"  // also defines MLDIAG_HOST_VECTORS
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/host_isa.hpp"  // MLDIAG_HOST_DISPATCH
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <bit>  // std::bit_cast
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <type_traits>

namespace mldiag::inline MLDIAG_ABI::detail {

#ifdef MLDIAG_HOST_VECTORS
// ---- The float-accumulating kernel (issue 18) ----
// block_stats_narrow widens every element to double and keeps two double accumulators per
// lane: exact to 1e-12, and compute-bound (0.35-0.62 of the read rate for fp32, 0.13-0.22 for
// bf16 on AVX-512, bench/host_stats_bench). This one keeps d = x - c and d^2 in
// float lanes over runs of `float_run_groups` vectors and folds each run into double lanes,
// so a run's rounding error never grows with the block. The bounds, for the moments'
// contract of docs/stats.md (u = 2^-24): each d is rounded once (u|d|), each square once
// (u d^2), a run of R sums adds (R - 1) u of its terms, so Σd is off by at most R u Σ|d| and
// Σd^2 by (R + 2) u Σd^2 relative; the double folds add nothing that matters. M2 = Σd^2 -
// (Σd)^2/n amplifies Σd^2's error by Σd^2 / M2 = 1 + ((mean - c) / sd)^2, which the kernel
// holds at most `float_reshift_ratio` (else a second pass around the mean, from L1). With
// R = 8 and ratio 2: variance within 20 u = 1.2e-6, standard deviation 6e-7, mean 8 u √2 sd =
// 6.7e-7 sd, L2 norm 6e-7 — inside the 1e-6 contract with room for the folds.
inline constexpr std::size_t float_run_groups = 8;
inline constexpr double float_reshift_ratio = 1.5;
// Squares in float must neither overflow nor underflow: a float sum that overflows reads as
// non-finite and sends the block to the exact kernel, and a block whose largest |x - c| is
// below 2^-40 (squares below 2^-80, where flushed or denormal squares of its smaller
// deviations would matter) goes there too. Vanishing gradients of 1e-12 pay the exact price.
inline constexpr double float_min_deviation = 0x1p-40;

template <std::size_t L>
struct float_vectors {
  typedef float f32 __attribute__((vector_size(L * 4)));
  typedef float f32h __attribute__((vector_size(L * 2)));
  typedef std::int32_t i32 __attribute__((vector_size(L * 4)));
  typedef double f64h __attribute__((vector_size(L * 4)));
  typedef std::uint16_t u16 __attribute__((vector_size(L * 2)));
  typedef std::int16_t i16x2 __attribute__((vector_size(L * 4)));  // 2L 16-bit lanes
  typedef std::uint8_t u8 __attribute__((vector_size(L)));
};

// A run's float sums into double lanes: lanes 0 .. L/2-1 into lo_half, the rest into hi_half.
// GCC 12 builds an 8-float to 8-double convert in an AVX-512 function as four 4-wide converts
// and two inserts, but a 16-wide convert as two full-width ones (the fold fell from 40
// instructions to 10, and bf16 in L1 went from 11.6-12.5 to 14.2-14.6 G elements/s, issue
// 18); for AVX2 and SSE2 the halves are the better code (a 16-wide convert there went
// through memory).
template <std::size_t L>
[[gnu::always_inline]] inline void fold_to_double(const typename float_vectors<L>::f32& v,
                                                  typename float_vectors<L>::f64h& lo_half,
                                                  typename float_vectors<L>::f64h& hi_half) noexcept {
  using f64h = typename float_vectors<L>::f64h;
  if constexpr (L == 16) {
    typedef double f64w __attribute__((vector_size(L * 8)));
    const f64w w = __builtin_convertvector(v, f64w);
    f64h a, b;
    std::memcpy(&a, &w, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&w) + sizeof a, sizeof b);
    lo_half += a;
    hi_half += b;
  } else {
    using f32h = typename float_vectors<L>::f32h;
    f32h a, b;
    std::memcpy(&a, &v, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    lo_half += __builtin_convertvector(a, f64h);
    hi_half += __builtin_convertvector(b, f64h);
  }
}

struct float_pass_sums {
  float lo = 0.0f, hi = 0.0f;  // extrema (seeded with the block's first element)
  std::uint64_t zeros = 0;
  double s = 0.0, q = 0.0;  // Σd, Σd^2 with d = x - c
};

// A float pass's last step: false when a sum is not finite (a NaN or Inf element, or a float
// sum that overflowed, leaves one; read by bits, so exact under -ffast-math too), else its
// results into `out`.
inline bool finish_pass(float lo, float hi, double s, double q, float_pass_sums& out) noexcept {
  constexpr std::uint64_t exp_mask = 0x7ff0000000000000ull;
  if ((std::bit_cast<std::uint64_t>(s) & exp_mask) == exp_mask ||
      (std::bit_cast<std::uint64_t>(q) & exp_mask) == exp_mask) {
    return false;
  }
  out.lo = lo;
  out.hi = hi;
  out.s = s;
  out.q = q;
  return true;
}

// One pass over a block around the float shift `c`. Returns false when the block holds a
// non-finite element or a float sum overflowed; the caller then takes the exact kernel.
// bf16 is read two elements per 32-bit lane (the high one is a float once its low half is
// cleared, the low one once shifted up), which saves the widening of each element; the two
// halves keep accumulators of their own (so a run still sums R terms per lane, and the adds
// form two chains), and zeros are counted in 16-bit lanes, both halves by one compare.
template <class F, std::size_t L>
[[gnu::always_inline]] inline bool float_pass(const typename F::element* x, std::size_t n, float c,
                                              float_pass_sums& out) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  using f64h = typename V::f64h;
  using storage = typename F::storage;
  constexpr bool pairs = std::is_same_v<F, fmt_bf16>;
  constexpr std::size_t per_group = pairs ? 2 * L : L;  // elements per vector load
  constexpr auto abs_mask = static_cast<std::int32_t>(F::abs_mask);
  constexpr auto sign_bit = static_cast<std::int32_t>(F::abs_mask + 1u);
  constexpr auto inf_bits = static_cast<std::int32_t>(F::inf);
  const float first = value_of<F>(F::bits(x[0]));
  f32 lo = f32{} + first, hi = lo;
  const f32 cv = f32{} + c;
  i32 zero = {}, bad = {};
  using i16x2 = typename V::i16x2;
  i16x2 zero16 = {};  // bf16: per 16-bit lane, at most block_elems / (2 L) <= 2048
  f64h s0 = {}, s1 = {}, q0 = {}, q1 = {};
  auto take = [&](const f32& v, f32& s, f32& q) {
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    const f32 d = v - cv;
    s += d;
    q += d * d;
  };
  auto fold = [&](const f32& s, const f32& q) {
    fold_to_double<L>(s, s0, s1);
    fold_to_double<L>(q, q0, q1);
  };
  const std::size_t groups = n / per_group;
  for (std::size_t g = 0; g < groups;) {
    const std::size_t run_end = std::min(groups, g + float_run_groups);
    f32 s = {}, q = {}, s2 = {}, q2 = {};
    for (; g < run_end; ++g) {
      const auto* p = x + g * per_group;
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes);
      i32 u;
      if constexpr (pairs || sizeof(storage) == 4) {
        std::memcpy(&u, p, sizeof u);
      } else if constexpr (sizeof(storage) == 2) {
        typename V::u16 raw;
        std::memcpy(&raw, p, sizeof raw);
        u = __builtin_convertvector(raw, i32);
      } else {
        typename V::u8 raw;
        std::memcpy(&raw, p, sizeof raw);
        u = __builtin_convertvector(raw, i32);
      }
      if constexpr (pairs) {  // non-finite bf16 widen to non-finite floats: caught by the sums
        zero16 -= (__builtin_bit_cast(i16x2, u) & static_cast<std::int16_t>(abs_mask)) == 0;
        take(__builtin_bit_cast(f32, u & static_cast<std::int32_t>(0xffff0000u)), s, q);
        take(__builtin_bit_cast(f32, u << 16), s2, q2);
      } else {
        const i32 a = u & abs_mask;
        if constexpr (!F::widens_non_finite) {
          if constexpr (F::has_inf) bad |= a >= inf_bits;
          else bad |= a == inf_bits;
        }
        zero -= a == 0;
        f32 v;
        if constexpr (F::sign_shift == F::mag_shift) {
          v = __builtin_bit_cast(f32, u << F::mag_shift);
        } else {
          v = __builtin_bit_cast(f32, ((u & sign_bit) << F::sign_shift) | (a << F::mag_shift));
        }
        if constexpr (F::scale != 1.0f) v *= F::scale;
        take(v, s, q);
      }
    }
    fold(s, q);
    if constexpr (pairs) fold(s2, q2);
  }
  // The tail (fewer than one vector): in double, element by element.
  float tlo = first, thi = first;
  double ts = 0.0, tq = 0.0;
  for (std::size_t i = groups * per_group; i < n; ++i) {
    const std::uint32_t u = F::bits(x[i]);
    const auto a = static_cast<storage>(u & F::abs_mask);
    if (!is_finite_bits<F>(a)) return false;
    out.zeros += static_cast<std::uint64_t>(a == 0);
    const float v = value_of<F>(u);
    tlo = v < tlo ? v : tlo;
    thi = v > thi ? v : thi;
    const double d = static_cast<double>(v) - static_cast<double>(c);
    ts += d;
    tq += d * d;
  }
  std::array<std::int32_t, L> bad_l, zero_l;
  std::memcpy(bad_l.data(), &bad, sizeof bad);
  std::memcpy(zero_l.data(), &zero, sizeof zero);
  std::array<std::int16_t, 2 * L> zero16_l;
  std::memcpy(zero16_l.data(), &zero16, sizeof zero16);
  for (auto z : zero16_l) out.zeros += static_cast<std::uint16_t>(z);
  std::array<float, L> lo_l, hi_l;
  std::memcpy(lo_l.data(), &lo, sizeof lo);
  std::memcpy(hi_l.data(), &hi, sizeof hi);
  std::array<double, L> s_l, q_l;
  std::memcpy(s_l.data(), &s0, sizeof s0);
  std::memcpy(s_l.data() + L / 2, &s1, sizeof s1);
  std::memcpy(q_l.data(), &q0, sizeof q0);
  std::memcpy(q_l.data() + L / 2, &q1, sizeof q1);
  double s = 0.0, q = 0.0;
  for (std::size_t j = 0; j < L; ++j) {  // fixed order
    if (bad_l[j] != 0) return false;
    out.zeros += static_cast<std::uint32_t>(zero_l[j]);
    tlo = lo_l[j] < tlo ? lo_l[j] : tlo;
    thi = hi_l[j] > thi ? hi_l[j] : thi;
    s += s_l[j];
    q += q_l[j];
  }
  return finish_pass(tlo, thi, s + ts, q + tq, out);
}

// The checks after a block's first float pass around `c` (a deviation too small for float
// squares, a shift too far from the mean) and the block's tensor_stats.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats finish_float_block(const typename F::element* x,
                                                              std::size_t n, float c,
                                                              float_pass_sums r) noexcept {
  const double nf = static_cast<double>(n);
  const double deviation = std::max(static_cast<double>(r.hi) - c, c - static_cast<double>(r.lo));
  if (deviation != 0.0 && deviation < float_min_deviation) return block_stats_narrow<F>(x, n);
  if (needs_reshift(r.s, r.q, nf, float_reshift_ratio)) {
    c = static_cast<float>(static_cast<double>(c) + r.s / nf);
    float_pass_sums again;
    if (!float_pass<F, L>(x, n, c, again) || needs_reshift(again.s, again.q, nf, float_reshift_ratio)) {
      return block_stats_narrow<F>(x, n);
    }
    r.s = again.s;
    r.q = again.q;
  }
  tensor_stats out;
  out.count = n;
  out.zeros = r.zeros;
  finish_from_shifted_sums(out, r.lo, r.hi, c, r.s, r.q, n);
  return out;
}

// The float pass around the shift `c`, then, if the shift lay too far from the mean, a second
// one around the mean (from L1); blocks neither can take go to the exact kernel.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats block_stats_float_around(const typename F::element* x,
                                                                    std::size_t n, float c) noexcept {
  float_pass_sums r;
  if (!float_pass<F, L>(x, n, c, r)) return block_stats_narrow<F>(x, n);
  return finish_float_block<F, L>(x, n, c, r);
}

// Sixteen elements spread over a block: their mean is the float pass's shift (its error is a
// quarter of the spread on Gaussian data, so the second pass that a shift more than one sd
// from the mean needs runs for about 1 block in 16000), and their variance tells the bf16 dot
// kernel whether the block is centred near zero. False when a sample is not finite (the
// exact kernel then) or the block has fewer than 16 elements.
struct block_sample {
  double mean = 0.0, variance = 0.0;
};
template <class F>
[[gnu::always_inline]] inline bool sample_block(const typename F::element* x, std::size_t n,
                                                block_sample& out) noexcept {
  using storage = typename F::storage;
  constexpr std::size_t samples = 16;
  if (n < samples) return false;
  double sum = 0.0, sum_sq = 0.0;
  for (std::size_t k = 0; k < samples; ++k) {
    const std::uint32_t u = F::bits(x[k * (n / samples)]);
    if (!is_finite_bits<F>(static_cast<storage>(u & F::abs_mask))) return false;
    const auto v = static_cast<double>(value_of<F>(u));
    sum += v;
    sum_sq += v * v;
  }
  out.mean = sum / samples;
  out.variance = std::max(0.0, sum_sq / samples - out.mean * out.mean);
  return true;
}

// One block of a format of 32 bits or fewer with the float-accumulating pass; blocks it
// cannot take (a non-finite element, a float overflow, deviations below 2^-40, a mean that a
// second pass cannot centre) go to block_stats_narrow, the exact kernel.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats block_stats_float(const typename F::element* x,
                                                             std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<F>(x, n, sample)) return block_stats_narrow<F>(x, n);
  return block_stats_float_around<F, L>(x, n, static_cast<float>(sample.mean));
}

// One kernel per ISA: the same source, compiled for each vector width. GCC and Clang inline
// the always_inline workers into these, so every loop is built for the function's target.
template <class F>
tensor_stats block_stats_portable(const typename F::element* x, std::size_t n) noexcept {
  return block_stats_float<F, lanes>(x, n);
}
#ifdef MLDIAG_HOST_DISPATCH
template <class F>
__attribute__((target("avx2,fma"))) tensor_stats block_stats_avx2(const typename F::element* x,
                                                                  std::size_t n) noexcept {
  return block_stats_float<F, 8>(x, n);
}
template <class F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) tensor_stats block_stats_avx512(
    const typename F::element* x, std::size_t n) noexcept {
  return block_stats_float<F, 16>(x, n);
}
#endif
#endif  // MLDIAG_HOST_VECTORS

}  // namespace mldiag::detail
