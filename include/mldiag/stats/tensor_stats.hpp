// SPDX-License-Identifier: Apache-2.0
/// `tensor_stats`: the mergeable summary of one tensor (counts, extrema, moments, L2 norm).
#pragma once

#include "mldiag/core/config.hpp"

#include <cmath>    // std::sqrt, std::ldexp, std::frexp (device-callable with nvcc)
#include <cstdint>  // std::uint64_t
#include <cstring>  // std::memcpy (the bits of a double)

namespace mldiag::inline MLDIAG_ABI {
namespace detail {
// std::min/max are constexpr host functions that device code may not call; these may.
template <class T>
MLDIAG_HOST_DEVICE constexpr T lesser(T a, T b) noexcept {
  return b < a ? b : a;
}
template <class T>
MLDIAG_HOST_DEVICE constexpr T greater(T a, T b) noexcept {
  return a < b ? b : a;
}
// The power of two that scales moments: the exponent e of max_abs (max_abs < 2^e),
// clamped to +-1000 so that 2^-e is a normal double.
MLDIAG_HOST_DEVICE inline int scale_exponent(double max_abs) noexcept {
  if (max_abs == 0.0) return 0;
#ifndef __CUDA_ARCH__
  // A normal max_abs = 1.m * 2^(biased - 1023) = 0.1m * 2^(biased - 1022): frexp's exponent,
  // read from the bits (frexp is a library call, and this runs twice per 4096-element block).
  std::uint64_t bits = 0;
  std::memcpy(&bits, &max_abs, sizeof bits);
  const int biased = static_cast<int>((bits >> 52) & 0x7ffu);
  if (biased != 0 && biased != 0x7ff) return lesser(greater(biased - 1022, -1000), 1000);
#endif
  int e = 0;
  (void)std::frexp(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
  return lesser(greater(e, -1000), 1000);
}

// x * 2^k, skipping the library call in the common case k = 0 (blocks of one tensor mostly
// share a scale): the merge runs once per 4096-element block.
MLDIAG_HOST_DEVICE inline double ldexp_unless_0(double x, int k) noexcept {
  return k == 0 ? x : std::ldexp(x, k);
}

// std::ldexp(x, k), by one multiply where 2^k is a normal double (|k| up to 1022): the product
// is x * 2^k rounded once, as ldexp rounds it, and a library call less per block
// (finish_from_shifted_sums runs once per 4096-element block; issue 18).
MLDIAG_HOST_DEVICE inline double times_pow2(double x, int k) noexcept {
#ifndef __CUDA_ARCH__
  if (k >= -1022 && k <= 1023) {
    const std::uint64_t bits = static_cast<std::uint64_t>(k + 1023) << 52;
    double p = 0.0;
    std::memcpy(&p, &bits, sizeof p);
    return x * p;
  }
#endif
  return std::ldexp(x, k);
}

// The largest finite double, spelled so that device code may use it too.
inline constexpr double max_double = 0x1.fffffffffffffp+1023;

// a + b = hi + lo exactly (Knuth's two-sum; additions only, so no FMA contraction can
// change it). Under -ffast-math the compiler may fold lo to 0: the pair then degrades to a
// plain double, which is what the moments had before they carried a low part.
MLDIAG_HOST_DEVICE inline void two_sum(double a, double b, double& hi, double& lo) noexcept {
  hi = a + b;
  const double bb = hi - a;
  lo = (a - (hi - bb)) + (b - bb);
}

// r * 2^e, where a result that the rounding of a representable value can have pushed past
// the double range saturates instead of becoming +Inf: a result up to 1e-6 above the largest
// double (the accuracy contract's bound) is the largest double, one beyond that is +Inf (so
// +Inf means the true value exceeds the double range by more than the contract's error).
MLDIAG_HOST_DEVICE inline double ldexp_saturated(double r, int e) noexcept {
  const double v = std::ldexp(r, e);
  if (v <= max_double) return v;
  // Here r * 2^e > max_double, so e >= 1024 - exponent(r) and r * 2^(e - 1024) is normal.
  constexpr double limit = 0x1.fffffffffffffp-1 * (1.0 + 1e-6);  // max_double * 2^-1024 * (1 + 1e-6)
  return std::ldexp(r, e - 1024) <= limit ? max_double : v;
}
}  // namespace detail

/// The power of two a tensor's moments are scaled by (the exponent e of `max_abs`, max_abs <
/// 2^e, clamped to +-1000): public for tools that accumulate sums the way the statistics do,
/// so that theirs merge bit for bit with these (the `mldiag checkpoint-diff` command).
using detail::scale_exponent;

/// Statistics of a tensor, computed in one pass and mergeable in any fixed order.
///
/// Counts cover all elements. Extrema and moments cover the finite elements only, so one NaN
/// does not hide the scale of the rest. Moments are kept as (n, mean, M2) and merged with
/// Chan's rule; the L2 norm is derived from them (`sum x^2 = M2 + n * mean^2`, two
/// non-negative terms, so no cancellation).
///
/// `scale_exp` keeps the moments finite and normal for any finite input: the mean is stored
/// divided by 2^scale_exp and M2 divided by 2^(2 * scale_exp), where 2^scale_exp is the
/// smallest power of two above `max_abs` (0 when there is no non-zero finite element; clamped
/// to +-1000 so that 2^-e is a normal double). Scaling by a power of two is exact.
///
/// The scaled mean is a pair, `mean_scaled + mean_lo`: the low part keeps the digits that a
/// double cannot hold next to a large mean, so that Chan's merge of blocks whose means differ
/// by less than the mean's last digit still sees the difference (float64 data like
/// 1e10 + 1e-3 * noise). It lives in what was padding: the size and layout of the other
/// fields are unchanged.
///
/// **Example**
/// ```cpp
/// std::vector<float> g = ...;
/// mldiag::tensor_stats s = mldiag::compute_stats(std::span<const float>(g));
/// if (s.non_finite() > 0) { ... }
/// double norm = s.l2_norm();
/// ```
struct tensor_stats {
  std::uint64_t count = 0;    ///< all elements
  std::uint64_t nan = 0;      ///< NaN, any payload, either sign
  std::uint64_t pos_inf = 0;  ///< +Inf
  std::uint64_t neg_inf = 0;  ///< -Inf
  std::uint64_t zeros = 0;    ///< +0 and -0 (a denormal is not a zero)

  double min = HUGE_VAL;   ///< smallest finite element (+Inf when there is none)
  double max = -HUGE_VAL;  ///< largest finite element (-Inf when there is none)
  double max_abs = 0.0;                                   ///< largest finite |x|

  double mean_scaled = 0.0;  ///< mean of the finite elements / 2^scale_exp (high part)
  double m2_scaled = 0.0;    ///< sum of (x - mean)^2 over finite elements / 2^(2 * scale_exp)
  int scale_exp = 0;         ///< see above
  float mean_lo = 0.0f;      ///< low part of the scaled mean (|mean_lo| <= ulp(mean_scaled))

  /// Number of finite elements (those the moments and extrema describe).
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::uint64_t finite() const noexcept {
    return count - nan - pos_inf - neg_inf;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::uint64_t non_finite() const noexcept {
    return nan + pos_inf + neg_inf;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr bool empty() const noexcept { return count == 0; }

  /// Mean of the finite elements (0 when there are none); always within [min, max].
  MLDIAG_HOST_DEVICE [[nodiscard]] double mean() const noexcept {
    if (finite() == 0) return 0.0;
    const double m = std::ldexp(mean_scaled + static_cast<double>(mean_lo), scale_exp);
    return detail::lesser(detail::greater(m, min), max);  // rounding cannot leave the range
  }
  /// Population variance of the finite elements (0 when there are none). It is +Inf when
  /// the variance itself exceeds the double range (standard deviation above 1.34e154) by more
  /// than 1e-6 relative (see `l2_norm`); the standard deviation and the L2 norm are accurate
  /// there.
  MLDIAG_HOST_DEVICE [[nodiscard]] double variance() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : detail::ldexp_saturated(m2_scaled / static_cast<double>(n), 2 * scale_exp);
  }
  /// Population standard deviation of the finite elements; finite for any finite input (it is
  /// at most max_abs, and is clamped to it).
  MLDIAG_HOST_DEVICE [[nodiscard]] double stddev() const noexcept {
    const auto n = finite();
    if (n == 0) return 0.0;
    return detail::lesser(std::ldexp(std::sqrt(m2_scaled / static_cast<double>(n)), scale_exp), max_abs);
  }
  /// L2 norm of the finite elements: sqrt(sum x^2). Finite whenever the true norm is at most
  /// the largest double (1.797e308): a result that rounding puts up to 1e-6 above it is the
  /// largest double. +Inf only when the true norm exceeds the double range (e.g. two elements
  /// of 1.3e308), by more than 1e-6 relative.
  MLDIAG_HOST_DEVICE [[nodiscard]] double l2_norm() const noexcept {
    const auto n = static_cast<double>(finite());
    return detail::ldexp_saturated(std::sqrt(m2_scaled + n * mean_scaled * mean_scaled), scale_exp);
  }
  /// Root mean square of the finite elements: sqrt(sum x^2 / n); finite for any finite input
  /// (at most max_abs, and clamped to it).
  MLDIAG_HOST_DEVICE [[nodiscard]] double rms() const noexcept {
    const auto n = finite();
    if (n == 0) return 0.0;
    const double nf = static_cast<double>(n);
    const double r = std::sqrt(m2_scaled / nf + mean_scaled * mean_scaled);
    return detail::lesser(std::ldexp(r, scale_exp), max_abs);
  }

  /// Merges `other` into `*this`. Counts add and extrema combine exactly; moments follow
  /// Chan et al. (1979). Merging in a fixed order gives bit-identical results.
  MLDIAG_HOST_DEVICE tensor_stats& merge(const tensor_stats& other) noexcept;

  friend bool operator==(const tensor_stats&, const tensor_stats&) = default;
};

/// The merge of two statistics, `a` first.
[[nodiscard]] MLDIAG_HOST_DEVICE inline tensor_stats merge(tensor_stats a,
                                                         const tensor_stats& b) noexcept {
  return a.merge(b);
}

MLDIAG_HOST_DEVICE inline tensor_stats& tensor_stats::merge(const tensor_stats& other) noexcept {
  const std::uint64_t na = finite();
  const std::uint64_t nb = other.finite();
  count += other.count;
  nan += other.nan;
  pos_inf += other.pos_inf;
  neg_inf += other.neg_inf;
  zeros += other.zeros;
  if (nb == 0) return *this;
  min = detail::lesser(min, other.min);
  max = detail::greater(max, other.max);
  max_abs = detail::greater(max_abs, other.max_abs);
  if (na == 0) {
    mean_scaled = other.mean_scaled;
    mean_lo = other.mean_lo;
    m2_scaled = other.m2_scaled;
    scale_exp = other.scale_exp;
    return *this;
  }
  // Bring both to the exponent of the merged max_abs, the one compute_stats of the whole
  // would have (not the larger of the two: a part of zeros has exponent 0, above that of a
  // part below 1). Power-of-two scaling: exact unless the smaller part falls 2^1074 below the
  // larger, where it cannot change the result anyway; a part of zeros has moments 0.
  const int e = detail::scale_exponent(max_abs);
  const int ka = scale_exp - e, kb = other.scale_exp - e;  // both 0 when the parts share a scale
  const double mean_a = detail::ldexp_unless_0(mean_scaled, ka);
  const double lo_a = detail::ldexp_unless_0(static_cast<double>(mean_lo), ka);
  const double mean_b = detail::ldexp_unless_0(other.mean_scaled, kb);
  const double lo_b = detail::ldexp_unless_0(static_cast<double>(other.mean_lo), kb);
  const double m2a = detail::ldexp_unless_0(m2_scaled, 2 * ka);
  const double m2b = detail::ldexp_unless_0(other.m2_scaled, 2 * kb);
  const double fb = static_cast<double>(nb) / static_cast<double>(na + nb);
  // The difference of the means from their pairs: the high parts are close when it matters
  // (then their difference is exact), and the low parts hold what a double mean would lose
  // (issue 16: 1.4e-5 relative error in the variance of 1e10 + 1e-3 N(0, 1) without them).
  const double delta = (mean_b - mean_a) + (lo_b - lo_a);
  double hi = 0.0, lo = 0.0;
  detail::two_sum(mean_a, delta * fb, hi, lo);
  detail::two_sum(hi, lo + lo_a, hi, lo);
  mean_scaled = hi;
  mean_lo = static_cast<float>(lo);
  m2_scaled = m2a + m2b + delta * delta * static_cast<double>(na) * fb;
  scale_exp = e;
  return *this;
}

namespace detail {

// The statistics of a block from its one-pass sums: `finite` finite elements with extrema lo
// and hi, and s = sum d, q = sum d^2 with d = x - shift. Counts other than these are the
// caller's. Shared by the host kernel and the CUDA kernels, so both finish a block alike.
MLDIAG_HOST_DEVICE inline void finish_from_shifted_sums(tensor_stats& out, double lo, double hi,
                                                        double shift, double s, double q,
                                                        std::uint64_t finite) noexcept {
  if (finite == 0) return;
  const double nf = static_cast<double>(finite);
  out.min = lo;
  out.max = hi;
  out.max_abs = greater(-lo, hi);  // exact, and one accumulator fewer
  out.scale_exp = scale_exponent(out.max_abs);
  double mean_hi = 0.0, mean_lo = 0.0;
  two_sum(shift, s / nf, mean_hi, mean_lo);  // the mean as a pair: no digit of s/n is lost
  out.mean_scaled = times_pow2(mean_hi, -out.scale_exp);
  out.mean_lo = static_cast<float>(times_pow2(mean_lo, -out.scale_exp));
  out.m2_scaled = times_pow2(greater(0.0, q - s * (s / nf)), -2 * out.scale_exp);
}

// True when the one-pass M2 = q - s^2/n of shifted sums cancels more than `reshift_ratio`
// allows (q > reshift_ratio * M2): the shift lies far from the mean in units of the spread
// (about 7.9 standard deviations), and M2 carries q's rounding error times q / M2. The block
// workers then sum again around the mean (a second pass over the block, in L1). 64 bounds the
// amplification at 64 (6 bits), where a block whose first element (then the shift) was an
// outlier lost up to log2(block) bits (issue 16: L2 error 1.5e-10 on one 2^43 then 4096
// ones), and is rare enough on real data not to cost: the shift is the median of three
// elements, and a Gaussian block needs it 7.9 sigma out.
inline constexpr double reshift_ratio = 64.0;
MLDIAG_HOST_DEVICE inline bool needs_reshift(double s, double q, double nf,
                                             double ratio = reshift_ratio) noexcept {
  return s * (s / nf) * ratio > q * (ratio - 1.0);
}

}  // namespace detail
}  // namespace mldiag
