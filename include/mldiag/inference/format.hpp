// SPDX-License-Identifier: Apache-2.0
/// `storage_format`: the number format an inference engine stores a tensor in (fp32, bf16, fp16,
/// fp8 E4M3/E5M2, int8 with its scale, optionally block-scaled), and the limits a value meets
/// there: the largest finite value, where it flushes to zero, its rounding error.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::inference {

/// The element formats an engine stores activations, weights and KV caches in.
enum class number_format : std::uint8_t { fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8 };

[[nodiscard]] constexpr std::string_view name(number_format f) noexcept {
  switch (f) {
    case number_format::fp32: return "fp32";
    case number_format::bf16: return "bf16";
    case number_format::fp16: return "fp16";
    case number_format::fp8_e4m3: return "fp8_e4m3";
    case number_format::fp8_e5m2: return "fp8_e5m2";
    case number_format::int8: return "int8";
  }
  return "?";
}

/// A tensor's storage: the element format, the scale a value is divided by before it is stored
/// (int8's and scaled fp8's; 1 for a plain float format), and `block` elements sharing one scale
/// (32 for MXFP8; 0 = one scale for the whole tensor). Limits below are in the tensor's own units
/// (the scale applied), so a value is compared with them as the engine computed it.
///
/// **Example**: `storage_format{.format = number_format::int8, .scale = 0.02}` holds |x| up to
/// 127 x 0.02 = 2.54; `storage_format{number_format::fp16}` holds |x| up to 65504.
struct storage_format {
  number_format format = number_format::fp32;
  double scale = 1.0;
  std::uint32_t block = 0;

  /// The largest finite magnitude; a larger one overflows (fp16, bf16, E5M2: to Inf) or
  /// saturates/clips (E4M3 has no Inf, int8 clamps).
  [[nodiscard]] double max_finite() const noexcept {
    switch (format) {
      case number_format::fp32: return 3.4028234663852886e38 * scale;
      case number_format::bf16: return 3.3895313892515355e38 * scale;
      case number_format::fp16: return 65504.0 * scale;
      case number_format::fp8_e4m3: return 448.0 * scale;
      case number_format::fp8_e5m2: return 57344.0 * scale;
      case number_format::int8: return 127.0 * scale;
    }
    return 0.0;
  }
  /// The smallest positive magnitude that is stored as non-zero (the smallest subnormal; int8's
  /// one step): values below half of it round to 0 (flushed).
  [[nodiscard]] double min_nonzero() const noexcept {
    switch (format) {
      case number_format::fp32: return std::ldexp(1.0, -149) * scale;
      case number_format::bf16: return std::ldexp(1.0, -133) * scale;
      case number_format::fp16: return std::ldexp(1.0, -24) * scale;
      case number_format::fp8_e4m3: return std::ldexp(1.0, -9) * scale;
      case number_format::fp8_e5m2: return std::ldexp(1.0, -16) * scale;
      case number_format::int8: return scale;
    }
    return 0.0;
  }
  /// The unit roundoff of a float format (half the distance from 1 to the next value): a stored
  /// value is within this relative error of the computed one. For int8 the error is absolute
  /// (half a step, `scale / 2`), and this returns the relative error at full scale, 1/254.
  [[nodiscard]] double unit_roundoff() const noexcept {
    switch (format) {
      case number_format::fp32: return std::ldexp(1.0, -24);
      case number_format::bf16: return std::ldexp(1.0, -8);
      case number_format::fp16: return std::ldexp(1.0, -11);
      case number_format::fp8_e4m3: return std::ldexp(1.0, -4);
      case number_format::fp8_e5m2: return std::ldexp(1.0, -3);
      case number_format::int8: return 1.0 / 254.0;
    }
    return 0.0;
  }
  /// Whether a value past max_finite() becomes Inf (fp16, bf16, fp32, E5M2) rather than being
  /// clamped (int8, and E4M3, which has no Inf: a saturating cast clamps, a plain one gives NaN).
  [[nodiscard]] bool overflows_to_inf() const noexcept {
    return format != number_format::int8 && format != number_format::fp8_e4m3;
  }
  /// "fp16", "int8 (scale 0.02)", "fp8_e4m3 (scale 0.5, blocks of 32)".
  [[nodiscard]] std::string describe() const {
    std::string s(name(format));
    if (scale != 1.0 || block != 0) {
      s += " (scale " + std::to_string(scale);
      if (block != 0) s += ", blocks of " + std::to_string(block);
      s += ")";
    }
    return s;
  }
  /// Throws `mldiag::error` for a scale that is not a positive finite number.
  void validate() const {
    if (!(scale > 0.0) || !std::isfinite(scale)) {
      throw error("storage_format scale is " + std::to_string(scale) +
                  "; give the positive factor values are divided by before they are stored (1 for a plain float format)");
    }
  }
};

}  // namespace mldiag::inference
