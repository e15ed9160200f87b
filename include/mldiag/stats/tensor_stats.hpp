// SPDX-License-Identifier: Apache-2.0
/// `tensor_stats`: the mergeable summary of one tensor (counts, extrema, moments, L2 norm).
#pragma once

#include <algorithm>  // std::min, std::max
#include <cmath>      // std::sqrt, std::ldexp
#include <cstdint>    // std::uint64_t
#include <limits>

namespace mldiag {

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

  double min = std::numeric_limits<double>::infinity();   ///< smallest finite element
  double max = -std::numeric_limits<double>::infinity();  ///< largest finite element
  double max_abs = 0.0;                                   ///< largest finite |x|

  double mean_scaled = 0.0;  ///< mean of the finite elements / 2^scale_exp
  double m2_scaled = 0.0;    ///< sum of (x - mean)^2 over finite elements / 2^(2 * scale_exp)
  int scale_exp = 0;         ///< see above

  /// Number of finite elements (those the moments and extrema describe).
  [[nodiscard]] constexpr std::uint64_t finite() const noexcept {
    return count - nan - pos_inf - neg_inf;
  }
  [[nodiscard]] constexpr std::uint64_t non_finite() const noexcept {
    return nan + pos_inf + neg_inf;
  }
  [[nodiscard]] constexpr bool empty() const noexcept { return count == 0; }

  /// Mean of the finite elements (0 when there are none).
  [[nodiscard]] double mean() const noexcept { return std::ldexp(mean_scaled, scale_exp); }
  /// Population variance of the finite elements (0 when there are none). It is +Inf when
  /// the variance itself exceeds the double range (standard deviation above 1.3e154) and 0
  /// below it; the standard deviation and the L2 norm are accurate for every finite input.
  [[nodiscard]] double variance() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : std::ldexp(m2_scaled / static_cast<double>(n), 2 * scale_exp);
  }
  /// Population standard deviation of the finite elements.
  [[nodiscard]] double stddev() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : std::ldexp(std::sqrt(m2_scaled / static_cast<double>(n)), scale_exp);
  }
  /// L2 norm of the finite elements: sqrt(sum x^2).
  [[nodiscard]] double l2_norm() const noexcept {
    const auto n = static_cast<double>(finite());
    return std::ldexp(std::sqrt(m2_scaled + n * mean_scaled * mean_scaled), scale_exp);
  }
  /// Root mean square of the finite elements: sqrt(sum x^2 / n).
  [[nodiscard]] double rms() const noexcept {
    const auto n = finite();
    return n == 0 ? 0.0 : l2_norm() / std::sqrt(static_cast<double>(n));
  }

  /// Merges `other` into `*this`. Counts add and extrema combine exactly; moments follow
  /// Chan et al. (1979). Merging in a fixed order gives bit-identical results.
  tensor_stats& merge(const tensor_stats& other) noexcept;

  friend bool operator==(const tensor_stats&, const tensor_stats&) = default;
};

/// The merge of two statistics, `a` first.
[[nodiscard]] inline tensor_stats merge(tensor_stats a, const tensor_stats& b) noexcept {
  return a.merge(b);
}

inline tensor_stats& tensor_stats::merge(const tensor_stats& other) noexcept {
  const std::uint64_t na = finite();
  const std::uint64_t nb = other.finite();
  count += other.count;
  nan += other.nan;
  pos_inf += other.pos_inf;
  neg_inf += other.neg_inf;
  zeros += other.zeros;
  if (nb == 0) return *this;
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  max_abs = std::max(max_abs, other.max_abs);
  if (na == 0) {
    mean_scaled = other.mean_scaled;
    m2_scaled = other.m2_scaled;
    scale_exp = other.scale_exp;
    return *this;
  }
  // Bring both to the larger exponent (power-of-two scaling: exact unless the smaller part
  // falls 2^1074 below the larger, where it cannot change the result anyway).
  const int e = std::max(scale_exp, other.scale_exp);
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

}  // namespace mldiag
