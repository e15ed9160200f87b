// SPDX-License-Identifier: Apache-2.0
/// The AVX-512 host kernels for bf16 and fp32 blocks centred near zero (issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/element_types.hpp"
#include "mldiag/stats/block_stats_float.hpp"  // also MLDIAG_HOST_VECTORS, MLDIAG_HOST_DISPATCH
#include "mldiag/stats/block_stats_narrow.hpp"
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <bit>      // std::bit_cast
#include <cmath>    // HUGE_VALF
#include <cstddef>
#include <cstdint>  // INT16_MIN, INT16_MAX
#include <cstring>  // std::memcpy

#ifdef MLDIAG_HOST_DISPATCH
#include <immintrin.h>  // the AVX-512 passes around 0 (bf16_centred_pass, f32_centred_pass)
#endif

namespace mldiag::inline MLDIAG_ABI::detail {

#ifdef MLDIAG_HOST_VECTORS
#ifdef MLDIAG_HOST_DISPATCH
// ---- bf16 and fp32 around zero with AVX-512 (issue 18) ----
// block_stats_float spends 20 instructions on 32 bf16 elements (two unpacks, and per half a
// subtract, an add, an FMA, a min and a max). A block whose 16 samples look centred near zero
// (mean^2 at most `centred_ratio` times their variance) is summed around the shift 0 instead,
// which needs no subtraction: 11 instructions for 32 bf16 (bf16_centred_pass), 6 for 16 fp32
// (f32_centred_pass). Blocks that the samples show far from zero-centred (LayerNorm weights,
// post-ReLU activations) take block_stats_float, and a block that turns out
// off-centre after the pass takes its second pass there too. The float sums keep the
// contract's analysis with c = 0: two accumulators per sum take alternate vectors (the add's
// latency), and a run of `float_run_groups` vectors puts 8 terms in each lane before the two
// are added and folded into double (R = 8, docs/stats.md).
inline constexpr double centred_ratio = 0.25;

// The end of a pass around 0 (bf16_centred_pass, f32_centred_pass): the 16 double lanes of Σx
// and Σx² summed in a fixed order, then the tail (fewer elements than one step of the loop)
// in double, element by element; false at a non-finite tail element.
[[gnu::always_inline]] inline void sum_lanes16(const float_vectors<16>::f64h& s0, const float_vectors<16>::f64h& s1,
                                               const float_vectors<16>::f64h& q0, const float_vectors<16>::f64h& q1,
                                               double& s, double& q) noexcept {
  std::array<double, 16> s_l, q_l;
  std::memcpy(s_l.data(), &s0, sizeof s0);
  std::memcpy(s_l.data() + 8, &s1, sizeof s1);
  std::memcpy(q_l.data(), &q0, sizeof q0);
  std::memcpy(q_l.data() + 8, &q1, sizeof q1);
  s = 0.0;
  q = 0.0;
  for (std::size_t j = 0; j < 16; ++j) {  // fixed order
    s += s_l[j];
    q += q_l[j];
  }
}
template <class F>
[[gnu::always_inline]] inline bool centred_tail(const typename F::element* x, std::size_t from, std::size_t n,
                                                float& lo, float& hi, double& s, double& q,
                                                std::uint64_t& zeros) noexcept {
  using storage = typename F::storage;
  for (std::size_t i = from; i < n; ++i) {
    const std::uint32_t u = F::bits(x[i]);
    const auto a = static_cast<storage>(u & F::abs_mask);
    if (!is_finite_bits<F>(a)) return false;
    zeros += static_cast<std::uint64_t>(a == 0);
    const float v = value_of<F>(u);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    s += static_cast<double>(v);
    q += static_cast<double>(v) * static_cast<double>(v);
  }
  return true;
}

// bf16 around 0: a 64-byte vector holds 32 elements, two per 32-bit lane; the high one is a
// float once the lane's low half is cleared, the low one once shifted up (two instructions,
// where widening each element costs two more). Σx: two adds, Σx²: two FMAs, zeros: one test
// of the 16-bit magnitudes into a mask and one masked add, extrema: three 16-bit integer
// max/min on the raw bits (the float order follows from them, below): 11 instructions.
// On the Emerald Rapids Xeon, in L1: 15.5 G elements/s, where the AVX-512 BF16 dot product
// (Σx and Σx² by one vdpbf16ps each, the kernel this one replaced) ran at 13.6-14.4 and,
// with the block's other steps, 64 MiB bf16 reached 0.60-0.63 of the read ceiling against
// 0.67-0.72 with this one (bench/host_stats_bench). That kernel ran at 25-28 G/s on Zen 5,
// where this one has not been measured (docs/benchmarks.md).
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline bool bf16_centred_pass(const bfloat16* x, std::size_t n,
                                                                                 float_pass_sums& out) noexcept {
  using f32 = float_vectors<16>::f32;
  using f64 = float_vectors<16>::f64h;
  using i32 = float_vectors<16>::i32;
  const __m512i high16 = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512i abs16 = _mm512_set1_epi16(0x7fff), one16 = _mm512_set1_epi16(1);
  __m512i max_s = _mm512_set1_epi16(INT16_MIN), min_s = _mm512_set1_epi16(INT16_MAX);  // the bits as signed ...
  __m512i max_u = _mm512_setzero_si512();                                              // ... and the largest unsigned
  __m512i zeros = _mm512_setzero_si512();  // per 16-bit lane, at most block_elems / 32 = 128
  f64 s0 = {}, s1 = {}, q0 = {}, q1 = {};
  const auto* bytes = reinterpret_cast<const char*>(x);
  const std::size_t vectors = n / 32;  // 32 elements a vector
  for (std::size_t v = 0; v < vectors;) {
    const std::size_t run_end = std::min(vectors, v + float_run_groups);
    __m512 sa = _mm512_setzero_ps(), sb = sa, qa = sa, qb = sa;
    for (; v < run_end; ++v) {
      const char* p = bytes + v * 64;
      __builtin_prefetch(p + prefetch_bytes);
      const __m512i u = _mm512_loadu_si512(p);
      // The high element of a 32-bit lane is a float once the low half is cleared, the low one
      // once shifted up (a generic vector shift: GCC 12 warns falsely inside _mm512_slli_epi32).
      const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(u, high16));
      const __m512 lo = __builtin_bit_cast(__m512, __builtin_bit_cast(i32, u) << 16);
      sa = _mm512_add_ps(sa, hi);
      qa = _mm512_fmadd_ps(hi, hi, qa);
      sb = _mm512_add_ps(sb, lo);
      qb = _mm512_fmadd_ps(lo, lo, qb);
      zeros = _mm512_mask_add_epi16(zeros, _mm512_testn_epi16_mask(u, abs16), zeros, one16);
      max_s = _mm512_max_epi16(max_s, u);
      min_s = _mm512_min_epi16(min_s, u);
      max_u = _mm512_max_epu16(max_u, u);
    }
    fold_to_double<16>(__builtin_bit_cast(f32, sa) + __builtin_bit_cast(f32, sb), s0, s1);
    fold_to_double<16>(__builtin_bit_cast(f32, qa) + __builtin_bit_cast(f32, qb), q0, q1);
  }
  // Extrema from the bits: a positive maximum is the largest signed value; with none (all
  // negative), the maximum is the negative of smallest magnitude, which is then also the
  // smallest signed value. A negative minimum is the largest unsigned value; with none, the
  // smallest signed value. (A fourth running value, the smallest unsigned, is not needed.)
  std::array<std::int16_t, 32> ms, ns;
  std::array<std::uint16_t, 32> mu, zl;
  std::memcpy(ms.data(), &max_s, sizeof ms);
  std::memcpy(ns.data(), &min_s, sizeof ns);
  std::memcpy(mu.data(), &max_u, sizeof mu);
  std::memcpy(zl.data(), &zeros, sizeof zl);
  std::int16_t top_s = INT16_MIN, low_s = INT16_MAX;
  std::uint16_t top_u = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    top_s = std::max(top_s, ms[j]);
    low_s = std::min(low_s, ns[j]);
    top_u = std::max(top_u, mu[j]);
    out.zeros += zl[j];
  }
  const auto value = [](std::uint32_t bits16) { return std::bit_cast<float>(bits16 << 16); };
  const std::size_t head = vectors * 32;
  const auto low_bits = static_cast<std::uint16_t>(low_s);
  float lo = head == 0 ? value(x[0].bits) : value(top_u >= 0x8000u ? top_u : low_bits);
  float hi = head == 0 ? lo : value(top_s >= 0 ? static_cast<std::uint16_t>(top_s) : low_bits);
  double s, q;
  sum_lanes16(s0, s1, q0, q1, s, q);
  if (!centred_tail<fmt_bf16>(x, head, n, lo, hi, s, q, out.zeros)) return false;
  return finish_pass(lo, hi, s, q, out);
}

// fp32 around 0: on a CPU with two 512-bit vector ports (Intel's server
// cores) the shifted kernel's eight operations per 16 fp32 elements (and, compare, subtract
// for the zero count; min, max; subtract the shift, add, FMA) bound it at 4 cycles a vector:
// 7.2-7.8 G elements/s in L1 on an Emerald Rapids Xeon, where 64 MiB from its L3 arrives at
// 8 G/s. Around 0: Σx by one add, Σx² by one FMA, zeros by one test into a mask and one
// masked add, min and max: six operations.
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline bool f32_centred_pass(const float* x, std::size_t n,
                                                                                float_pass_sums& out) noexcept {
  using f32 = float_vectors<16>::f32;
  using f64 = float_vectors<16>::f64h;
  const __m512i abs32 = _mm512_set1_epi32(0x7fffffff), one32 = _mm512_set1_epi32(1);
  f32 lo = f32{} + HUGE_VALF, hi = f32{} - HUGE_VALF;
  __m512i zeros = _mm512_setzero_si512();  // per lane, at most block_elems / 16
  f64 s0 = {}, s1 = {}, q0 = {}, q1 = {};
  const std::size_t pairs_of_vectors = n / 32;
  for (std::size_t v = 0; v < pairs_of_vectors;) {
    const std::size_t run_end = std::min(pairs_of_vectors, v + float_run_groups / 2);
    __m512 sa = _mm512_setzero_ps(), sb = sa, qa = sa, qb = sa;
    for (; v < run_end; ++v) {
      const float* p = x + v * 32;
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes);
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes + 64);
      const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
      const __m512i ua = _mm512_castps_si512(a), ub = _mm512_castps_si512(b);
      zeros = _mm512_mask_add_epi32(zeros, _mm512_testn_epi32_mask(ua, abs32), zeros, one32);
      zeros = _mm512_mask_add_epi32(zeros, _mm512_testn_epi32_mask(ub, abs32), zeros, one32);
      // Generic vectors for the extrema: GCC 12 warns falsely inside _mm512_min_ps.
      const f32 fa = __builtin_bit_cast(f32, a), fb = __builtin_bit_cast(f32, b);
      lo = fa < lo ? fa : lo;
      hi = fa > hi ? fa : hi;
      lo = fb < lo ? fb : lo;
      hi = fb > hi ? fb : hi;
      sa = _mm512_add_ps(sa, a);
      qa = _mm512_fmadd_ps(a, a, qa);
      sb = _mm512_add_ps(sb, b);
      qb = _mm512_fmadd_ps(b, b, qb);
    }
    fold_to_double<16>(__builtin_bit_cast(f32, sa) + __builtin_bit_cast(f32, sb), s0, s1);
    fold_to_double<16>(__builtin_bit_cast(f32, qa) + __builtin_bit_cast(f32, qb), q0, q1);
  }
  // A NaN or Inf leaves a non-finite Σx², which finish_pass refuses (the extrema then go unused).
  std::array<float, 16> lo_l, hi_l;
  std::array<std::uint32_t, 16> zl;
  std::memcpy(lo_l.data(), &lo, sizeof lo_l);
  std::memcpy(hi_l.data(), &hi, sizeof hi_l);
  std::memcpy(zl.data(), &zeros, sizeof zl);
  float tlo = x[0], thi = x[0];
  for (std::size_t j = 0; j < 16; ++j) {
    tlo = lo_l[j] < tlo ? lo_l[j] : tlo;
    thi = hi_l[j] > thi ? hi_l[j] : thi;
    out.zeros += zl[j];
  }
  double s, q;
  sum_lanes16(s0, s1, q0, q1, s, q);
  if (!centred_tail<fmt_f32>(x, pairs_of_vectors * 32, n, tlo, thi, s, q, out.zeros)) return false;
  return finish_pass(tlo, thi, s, q, out);
}

[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline tensor_stats block_stats_avx512_f32(const float* x,
                                                                                             std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<fmt_f32>(x, n, sample)) return block_stats_narrow<fmt_f32>(x, n);
  if (sample.mean * sample.mean > centred_ratio * sample.variance) {
    return block_stats_float_around<fmt_f32, 16>(x, n, static_cast<float>(sample.mean));
  }
  float_pass_sums r;
  if (!f32_centred_pass(x, n, r)) return block_stats_narrow<fmt_f32>(x, n);
  return finish_float_block<fmt_f32, 16>(x, n, 0.0f, r);
}

[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline tensor_stats block_stats_avx512_bf16(
    const bfloat16* x, std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<fmt_bf16>(x, n, sample)) return block_stats_narrow<fmt_bf16>(x, n);
  if (sample.mean * sample.mean > centred_ratio * sample.variance) {
    return block_stats_float_around<fmt_bf16, 16>(x, n, static_cast<float>(sample.mean));
  }
  float_pass_sums r;
  if (!bf16_centred_pass(x, n, r)) return block_stats_narrow<fmt_bf16>(x, n);
  return finish_float_block<fmt_bf16, 16>(x, n, 0.0f, r);
}
#endif
#endif  // MLDIAG_HOST_VECTORS

}  // namespace mldiag::detail
