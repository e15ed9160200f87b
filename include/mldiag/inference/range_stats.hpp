// SPDX-License-Identifier: Apache-2.0
/// `range_stats`: one pass over a tensor as an inference engine computed it, against the format
/// it is stored in: counts of NaN and Inf, the largest finite magnitude and its headroom, the
/// values past the format's range (clipped or overflowed) and below it (flushed to zero), the
/// mean and L2 norm, and for block-scaled formats the elements a block's shared scale flushes.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/inference/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace mldiag::inline MLDIAG_ABI::inference {

/// What one pass over a tensor's values gives (host code; the sums are in double, each
/// element's square exact in double from a float).
struct range_stats {
  std::uint64_t count = 0;       ///< elements
  std::uint64_t nan = 0;         ///< NaN elements
  std::uint64_t inf = 0;         ///< +-Inf elements
  std::uint64_t clipped = 0;     ///< finite, above the format's largest finite magnitude
  std::uint64_t saturated = 0;   ///< finite, at the largest finite magnitude (a clamping format's clipped values)
  std::uint64_t flushed = 0;     ///< non-zero, below half the format's smallest non-zero: stored as 0
  std::uint64_t nonzero = 0;     ///< finite and non-zero
  std::uint64_t blocks = 0;      ///< blocks of a block-scaled format
  std::uint64_t block_flushed = 0;  ///< non-zero elements their block's shared scale flushes
  double amax = 0.0;             ///< the largest finite magnitude
  double sum = 0.0;              ///< of the finite values
  double sum_squares = 0.0;      ///< of the finite values
  double max_finite = 0.0;       ///< the format's, in the tensor's units
  bool overflows_to_inf = true;  ///< the format's: past max_finite is Inf rather than a clamp

  [[nodiscard]] std::uint64_t non_finite() const noexcept { return nan + inf; }
  [[nodiscard]] std::uint64_t finite() const noexcept { return count - nan - inf; }
  [[nodiscard]] double mean() const noexcept {
    return finite() ? sum / static_cast<double>(finite()) : std::numeric_limits<double>::quiet_NaN();
  }
  [[nodiscard]] double l2() const noexcept { return std::sqrt(sum_squares); }
  /// Bits between the largest finite value and the format's limit: log2(max_finite / amax);
  /// negative once values are past it, +Inf for a tensor of zeros.
  [[nodiscard]] double headroom_bits() const noexcept {
    if (!(amax > 0.0)) return std::numeric_limits<double>::infinity();
    return std::log2(max_finite / amax);
  }
  /// The share of non-zero values stored as 0: flushed by the format's range, or by their block's scale.
  [[nodiscard]] double flushed_fraction() const noexcept {
    const auto lost = flushed + block_flushed;
    return nonzero ? static_cast<double>(lost) / static_cast<double>(nonzero) : 0.0;
  }
  [[nodiscard]] double clipped_fraction() const noexcept {
    return finite() ? static_cast<double>(clipped) / static_cast<double>(finite()) : 0.0;
  }
  [[nodiscard]] double saturated_fraction() const noexcept {
    return finite() ? static_cast<double>(saturated) / static_cast<double>(finite()) : 0.0;
  }
};

namespace detail {
// The largest exponent of an element format's normal numbers (OCP MX: E4M3 8, E5M2 15), which
// sets a block's shared power-of-two scale: 2^(floor(log2 amax_block) - emax).
[[nodiscard]] inline int element_emax(number_format f) noexcept {
  switch (f) {
    case number_format::fp8_e4m3: return 8;
    case number_format::fp8_e5m2: return 15;
    case number_format::fp16: return 15;
    case number_format::bf16: return 127;
    case number_format::fp32: return 127;
    case number_format::int8: return 6;  // 127 < 2^7: the element's top power of two is 2^6
  }
  return 0;
}
}  // namespace detail

/// One pass over `values` as stored in `fmt`. Where `fmt.block` > 0 the range limits are the
/// block's: each block of `block` consecutive elements gets the power-of-two scale OCP MX gives
/// it (its largest magnitude's exponent less the element format's largest), nothing in it can
/// clip, and its non-zero elements below half the scaled smallest non-zero are counted in
/// `block_flushed` (a block whose largest value is 2^10 times its smallest loses the small ones
/// in E4M3).
[[nodiscard]] inline range_stats measure(std::span<const float> values, const storage_format& fmt) {
  fmt.validate();
  range_stats r;
  r.count = values.size();
  r.max_finite = fmt.max_finite();
  r.overflows_to_inf = fmt.overflows_to_inf();
  const double half_min = 0.5 * fmt.min_nonzero();
  // A value stored as code x scale in float is the double limit give or take the float's
  // rounding: within 1e-6 of it counts as at the limit, beyond as past it.
  const double past = r.max_finite * (1.0 + 1e-6), at = r.max_finite * (1.0 - 1e-6);
  const bool blocked = fmt.block > 0;
  for (const float v : values) {
    if (std::isnan(v)) {
      ++r.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++r.inf;
      continue;
    }
    const double x = v;
    const double a = std::fabs(x);
    r.sum += x;
    r.sum_squares += x * x;
    if (a > r.amax) r.amax = a;
    if (a == 0.0) continue;
    ++r.nonzero;
    if (!blocked) {
      if (a > past) ++r.clipped;
      else if (a >= at) ++r.saturated;
      else if (a < half_min) ++r.flushed;
    }
  }
  if (blocked) {
    // The element format's smallest non-zero at scale 1, relative to the block's scale.
    const storage_format unit{.format = fmt.format};
    const double unit_half_min = 0.5 * unit.min_nonzero();
    const int emax = detail::element_emax(fmt.format);
    for (std::size_t b = 0; b < values.size(); b += fmt.block) {
      const std::size_t e = std::min(values.size(), b + fmt.block);
      double block_amax = 0.0;
      for (std::size_t i = b; i < e; ++i)
        if (std::isfinite(values[i])) block_amax = std::max(block_amax, static_cast<double>(std::fabs(values[i])));
      ++r.blocks;
      if (!(block_amax > 0.0)) continue;
      int exponent = 0;
      (void)std::frexp(block_amax, &exponent);  // block_amax = m 2^exponent, m in [0.5, 1)
      const double block_scale = std::ldexp(1.0, exponent - 1 - emax);
      const double line = unit_half_min * block_scale;
      for (std::size_t i = b; i < e; ++i) {
        const double a = std::fabs(static_cast<double>(values[i]));
        if (std::isfinite(values[i]) && a > 0.0 && a < line) ++r.block_flushed;
      }
    }
  }
  return r;
}

}  // namespace mldiag::inference
