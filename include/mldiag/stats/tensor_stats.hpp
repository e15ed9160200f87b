// SPDX-License-Identifier: Apache-2.0
/// `tensor_stats`: the mergeable summary of one tensor (counts, extrema, moments, L2 norm).
#pragma once

#include "mldiag/core/config.hpp"

#include <cmath>    // std::sqrt, std::ldexp, std::frexp (device-callable with nvcc)
#include <cstdint>  // std::uint64_t

namespace mldiag {
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
  int e = 0;
  (void)std::frexp(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
  return lesser(greater(e, -1000), 1000);
}
}  // namespace detail

/// Statistics of a tensor, computed in one pass and mergeable in any fixed order.
///
/// Counts cover all elements. Extrema and moments cover the finite elements only, so one NaN
/// does not hide the scale of the rest. Moments are kept as (n, mean, M2) and merged with
/// Chan's rule; the L2 norm is derived from them (`sum x^2 = M2 + n * mean^2`, two
/// non-negative terms, so no cancellation).
///
/// `scale_exp` keeps the moments finite and normal for any finite input: the mean is stored
/// divided by 2^scale_exp and M2 divided by 2^(2 * scale_exp), where 2^scale_exp is the smallest power of two above
/// `max_abs` (0 when there is no non-zero finite element; clamped to +-1000 so that 2^-e is a
/// normal double). Scaling by a power of two is exact.
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

  double mean_scaled = 0.0;  ///< mean of the finite elements / 2^scale_exp
  double m2_scaled = 0.0;    ///< sum of (x - mean)^2 over finite elements / 2^(2 * scale_exp)
  int scale_exp = 0;         ///< see above

  /// Number of finite elements (those the moments and extrema describe).
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::uint64_t finite() const noexcept {
    return count - nan - pos_inf - neg_inf;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::uint64_t non_finite() const noexcept {
    return nan + pos_inf + neg_inf;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr bool empty() const noexcept { return count == 0; }

  /// Mean of the finite elements (0 when there are none).
  MLDIAG_HOST_DEVICE [[nodiscard]] double mean() const noexcept { return std::ldexp(mean_scaled, scale_exp); }
  /// Population variance of the finite elements (0 when there are none). It is +Inf when
  /// the variance itself exceeds the double range (standard deviation above 1.3e154) and 0
  /// below it; the standard deviation and the L2 norm are accurate for every finite input.
  MLDIAG_HOST_DEVICE [[nodiscard]] double variance() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : std::ldexp(m2_scaled / static_cast<double>(n), 2 * scale_exp);
  }
  /// Population standard deviation of the finite elements.
  MLDIAG_HOST_DEVICE [[nodiscard]] double stddev() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : std::ldexp(std::sqrt(m2_scaled / static_cast<double>(n)), scale_exp);
  }
  /// L2 norm of the finite elements: sqrt(sum x^2).
  MLDIAG_HOST_DEVICE [[nodiscard]] double l2_norm() const noexcept {
    const auto n = static_cast<double>(finite());
    return std::ldexp(std::sqrt(m2_scaled + n * mean_scaled * mean_scaled), scale_exp);
  }
  /// Root mean square of the finite elements: sqrt(sum x^2 / n).
  MLDIAG_HOST_DEVICE [[nodiscard]] double rms() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : l2_norm() / std::sqrt(static_cast<double>(n));
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
    m2_scaled = other.m2_scaled;
    scale_exp = other.scale_exp;
    return *this;
  }
  // Bring both to the exponent of the merged max_abs, the one compute_stats of the whole
  // would have (not the larger of the two: a part of zeros has exponent 0, above that of a
  // part below 1). Power-of-two scaling: exact unless the smaller part falls 2^1074 below the
  // larger, where it cannot change the result anyway; a part of zeros has moments 0.
  const int e = detail::scale_exponent(max_abs);
  const double mean_a = std::ldexp(mean_scaled, scale_exp - e);
  const double mean_b = std::ldexp(other.mean_scaled, other.scale_exp - e);
  const double m2a = std::ldexp(m2_scaled, 2 * (scale_exp - e));
  const double m2b = std::ldexp(other.m2_scaled, 2 * (other.scale_exp - e));
  const double fb = static_cast<double>(nb) / static_cast<double>(na + nb);
  const double delta = mean_b - mean_a;
  mean_scaled = mean_a + delta * fb;
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
  out.mean_scaled = std::ldexp(shift + s / nf, -out.scale_exp);
  out.m2_scaled = std::ldexp(greater(0.0, q - s * (s / nf)), -2 * out.scale_exp);
}

}  // namespace detail
}  // namespace mldiag
