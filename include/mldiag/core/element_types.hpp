// SPDX-License-Identifier: Apache-2.0
/// Host-usable 16- and 8-bit floating-point element types whose conversions match CUDA's.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <bit>          // std::bit_cast, std::bit_width
#include <cstdint>      // std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t
#include <type_traits>  // the layout checks at the end

// Why not include <cuda_fp16.h> and friends: this header must build with any C++20 compiler and
// no CUDA toolkit. The conversions reproduce the host paths of CUDA 13.0's cuda_fp16.hpp,
// cuda_bf16.hpp and cuda_fp8.hpp bit for bit; tests/core/element_types_cuda_peer_test.cpp
// compares them against those headers.
//
// Every conversion works on the bits with integer arithmetic only, so its result does not
// depend on the floating-point environment (rounding mode, flush-to-zero, -ffast-math). What
// CUDA's host code does, and so what we do:
//
// - Rounding is to nearest even, once, directly from the source value. The double paths do not
//   round through float: __double2half pre-rounds with a shifter, __double2bfloat16 rounds to
//   float with round-to-odd, __nv_cvt_double_to_fp8 rounds the double's own bits. All three are
//   correctly rounded, as ours is.
// - half, bfloat16: overflow gives +-inf, +-inf stays +-inf, and every NaN (float or double,
//   either sign, any payload) gives 0x7fff.
// - float8_e4m3, float8_e5m2, with __NV_SATFINITE (what the __nv_fp8_e4m3(float) and
//   __nv_fp8_e5m2(float) constructors use): a magnitude that rounds above the largest finite
//   value, and +-inf, give +-max finite (E4M3 0x7e = 448, E5M2 0x7b = 57344). A float NaN is
//   first made 0x7fffffff, so it gives 0x7f. A double NaN keeps its sign: E4M3 gives
//   sign | 0x7f, E5M2 gives sign | 0x7e | (the top two bits of the double's fraction).
// - To float: bfloat16 is its bits shifted left by 16 (NaN sign and payload kept); a half or
//   fp8 NaN gives 0x7fffffff (sign and payload dropped). To double is to float, then widened
//   exactly (a NaN quieted, as the hardware widening does).

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

// A small binary format, as the rounding and decoding code needs it.
struct small_format {
  int exponent_bits;
  int mantissa_bits;
  int exponent_bias;
  std::uint32_t max_finite;     // largest finite magnitude, as bits
  std::uint32_t overflow_bits;  // the magnitude an overflow gives: inf, or max finite (SATFINITE)

  constexpr int sign_shift() const noexcept { return exponent_bits + mantissa_bits; }
};

inline constexpr small_format half_format{5, 10, 15, 0x7bffu, 0x7c00u};
inline constexpr small_format bfloat16_format{8, 7, 127, 0x7f7fu, 0x7f80u};
inline constexpr small_format e4m3_format{4, 3, 7, 0x7eu, 0x7eu};
inline constexpr small_format e5m2_format{5, 2, 15, 0x7bu, 0x7bu};

// Rounds a finite binary32 or binary64 magnitude (the source's bits with the sign cleared; the
// source has SrcFrac fraction bits and exponent bias SrcBias) to format F, to nearest even, and
// returns F's magnitude bits.
//
// With e' = max(e, 1), the target's biased exponent clamped to the denormal range, the rounded
// value is q * 2^(e' - bias - M) and its bits are ((e' - 1) << M) + q. The one formula covers
// normals, denormals, a rounding carry into the next binade, and a denormal source (no implicit
// bit: float -> bfloat16).
template <small_format F, int SrcFrac, int SrcBias, class UInt>
constexpr std::uint32_t round_magnitude(UInt abs_bits) noexcept {
  constexpr UInt frac_mask = (UInt{1} << SrcFrac) - 1;
  const int biased = static_cast<int>(abs_bits >> SrcFrac);
  const UInt frac = abs_bits & frac_mask;
  const UInt sig = biased == 0 ? frac : (frac | (frac_mask + 1));
  const int target_exp = (biased == 0 ? 1 : biased) - SrcBias + F.exponent_bias;
  const int clamped_exp = target_exp < 1 ? 1 : target_exp;
  const int shift = SrcFrac - F.mantissa_bits + (clamped_exp - target_exp);
  // Then sig < 2^(SrcFrac + 1) <= half a quantum, which rounds to zero; the early return also
  // keeps the shifts below the width of UInt.
  if (shift > SrcFrac + 1) return 0;
  UInt q = sig >> shift;
  const UInt rem = sig & ((UInt{1} << shift) - 1);
  const UInt halfway = UInt{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u) != 0)) ++q;
  // clamped_exp reaches 2046 - 1023 + bias for a huge double: 64 bits hold the sum.
  const std::uint64_t bits = (static_cast<std::uint64_t>(clamped_exp - 1) << F.mantissa_bits) +
                             static_cast<std::uint64_t>(q);
  return bits > F.max_finite ? F.overflow_bits : static_cast<std::uint32_t>(bits);
}

// float -> F's bits; every NaN gives `nan_bits`.
template <small_format F>
constexpr std::uint32_t from_float(float value, std::uint32_t nan_bits) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return nan_bits;
  const std::uint32_t sign = (x >> 31) << F.sign_shift();
  if (abs == 0x7f800000u) return sign | F.overflow_bits;
  return sign | round_magnitude<F, 23, 127>(abs);
}

// double -> F's bits, for a double that is not NaN.
template <small_format F>
constexpr std::uint32_t from_non_nan_double(std::uint64_t x) noexcept {
  const std::uint64_t abs = x & 0x7fffffffffffffffu;
  const auto sign = static_cast<std::uint32_t>(x >> 63) << F.sign_shift();
  if (abs == 0x7ff0000000000000u) return sign | F.overflow_bits;
  return sign | round_magnitude<F, 52, 1023>(abs);
}

constexpr bool is_nan_bits(std::uint64_t x) noexcept {
  return (x & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
}

constexpr std::uint16_t half_bits_from(float value) noexcept {
  return static_cast<std::uint16_t>(from_float<half_format>(value, 0x7fffu));
}
constexpr std::uint16_t half_bits_from(double value) noexcept {
  const auto x = std::bit_cast<std::uint64_t>(value);
  return static_cast<std::uint16_t>(is_nan_bits(x) ? 0x7fffu : from_non_nan_double<half_format>(x));
}
constexpr std::uint16_t bfloat16_bits_from(float value) noexcept {
  return static_cast<std::uint16_t>(from_float<bfloat16_format>(value, 0x7fffu));
}
constexpr std::uint16_t bfloat16_bits_from(double value) noexcept {
  const auto x = std::bit_cast<std::uint64_t>(value);
  return static_cast<std::uint16_t>(is_nan_bits(x) ? 0x7fffu
                                                   : from_non_nan_double<bfloat16_format>(x));
}
constexpr std::uint8_t e4m3_bits_from(float value) noexcept {
  return static_cast<std::uint8_t>(from_float<e4m3_format>(value, 0x7fu));
}
constexpr std::uint8_t e4m3_bits_from(double value) noexcept {
  const auto x = std::bit_cast<std::uint64_t>(value);
  if (is_nan_bits(x)) return static_cast<std::uint8_t>(((x >> 63) << 7) | 0x7fu);
  return static_cast<std::uint8_t>(from_non_nan_double<e4m3_format>(x));
}
constexpr std::uint8_t e5m2_bits_from(float value) noexcept {
  return static_cast<std::uint8_t>(from_float<e5m2_format>(value, 0x7fu));
}
constexpr std::uint8_t e5m2_bits_from(double value) noexcept {
  const auto x = std::bit_cast<std::uint64_t>(value);
  // As __nv_cvt_double_to_fp8: the NaN keeps its sign and the top two bits of its fraction.
  if (is_nan_bits(x)) return static_cast<std::uint8_t>(((x >> 63) << 7) | 0x7eu | ((x >> 50) & 3u));
  return static_cast<std::uint8_t>(from_non_nan_double<e5m2_format>(x));
}

// F's bits -> binary32 bits, exactly, for finite `bits` (each format spells inf and NaN its own
// way, so the callers sort those out).
template <small_format F>
constexpr std::uint32_t finite_to_float_bits(std::uint32_t bits) noexcept {
  constexpr int m = F.mantissa_bits;
  const std::uint32_t sign = ((bits >> F.sign_shift()) & 1u) << 31;
  const std::uint32_t exp = (bits >> m) & ((1u << F.exponent_bits) - 1u);
  const std::uint32_t mant = bits & ((1u << m) - 1u);
  if (exp != 0) {
    return sign | ((exp + static_cast<std::uint32_t>(127 - F.exponent_bias)) << 23) |
           (mant << (23 - m));
  }
  if (mant == 0) return sign;
  // Denormal, mant * 2^(1 - bias - m): the leading 1 of mant becomes the implicit bit.
  // bit_width returns T before LWG 3656 and int after: cast for both.
  const int top = static_cast<int>(std::bit_width(mant)) - 1;
  const auto float_exp = static_cast<std::uint32_t>(top + 1 - F.exponent_bias - m + 127);
  return sign | (float_exp << 23) | ((mant << (23 - top)) & 0x7fffffu);
}

// float -> double with integer operations only. The hardware conversion is exact too, except
// where the FPU treats denormal inputs as zero (DAZ, which a program linked with -ffast-math
// turns on at startup on x86): bfloat16's denormals are float denormals. A NaN comes out
// quiet, as from the hardware conversion on x86 and Arm.
constexpr double widen(float value) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(value);
  const std::uint64_t sign = std::uint64_t{u >> 31} << 63;
  const std::uint32_t exp = (u >> 23) & 0xffu;
  const std::uint64_t mant = u & 0x7fffffu;
  if (exp == 0xffu) {
    const std::uint64_t quiet = mant != 0 ? 0x0008000000000000u : 0u;
    return std::bit_cast<double>(sign | 0x7ff0000000000000u | quiet | (mant << 29));
  }
  if (exp != 0)
    return std::bit_cast<double>(sign | (std::uint64_t{exp + 896u} << 52) | (mant << 29));
  if (mant == 0) return std::bit_cast<double>(sign);
  // Denormal, mant * 2^-149: the leading 1 of mant becomes the implicit bit.
  const int top = static_cast<int>(std::bit_width(mant)) - 1;
  const auto double_exp = static_cast<std::uint64_t>(top - 149 + 1023);
  return std::bit_cast<double>(sign | (double_exp << 52) |
                               ((mant << (52 - top)) & 0x000fffffffffffffu));
}

// CUDA's host decoders turn every half and fp8 NaN into this one.
inline constexpr std::uint32_t canonical_float_nan = 0x7fffffffu;

constexpr float half_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t abs = bits & 0x7fffu;
  if (abs > 0x7c00u) return std::bit_cast<float>(canonical_float_nan);
  if (abs == 0x7c00u) return std::bit_cast<float>((std::uint32_t{bits} << 16) | 0x7f800000u);
  return std::bit_cast<float>(finite_to_float_bits<half_format>(bits));
}
constexpr float e4m3_to_float(std::uint8_t bits) noexcept {
  if ((bits & 0x7fu) == 0x7fu) return std::bit_cast<float>(canonical_float_nan);
  return std::bit_cast<float>(finite_to_float_bits<e4m3_format>(bits));
}
// An E5M2 value is the half with the same top byte: CUDA decodes it that way, so do we.
constexpr float e5m2_to_float(std::uint8_t bits) noexcept {
  return half_to_float(static_cast<std::uint16_t>(bits << 8));
}

}  // namespace detail

/// IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits), with the layout of CUDA's
/// `__half`. The conversions are CUDA's host conversions bit for bit: `half(float)` is
/// `__float2half_rn` and `half(double)` is `__double2half` (round to nearest even, once;
/// overflow gives +-inf; every NaN gives 0x7fff); `float(h)` is `__half2float` (exact; every NaN
/// gives 0x7fffffff). `==` compares bits.
///
/// **Example**
/// ```cpp
/// const mldiag::half h(0.1f);               // h.bits == 0x2e66
/// const float f = static_cast<float>(h);    // 0.0999755859375f
/// ```
struct half {
  std::uint16_t bits = 0;

  half() = default;
  explicit constexpr half(float value) noexcept : bits(detail::half_bits_from(value)) {}
  explicit constexpr half(double value) noexcept : bits(detail::half_bits_from(value)) {}

  /// The half whose bit pattern is `b`.
  static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits = b;
    return h;
  }

  explicit constexpr operator float() const noexcept { return detail::half_to_float(bits); }
  explicit constexpr operator double() const noexcept {
    return detail::widen(detail::half_to_float(bits));
  }

  friend constexpr bool operator==(half, half) noexcept = default;
};

/// bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the top half of a float), with the layout
/// of CUDA's `__nv_bfloat16`. The conversions are CUDA's host conversions bit for bit:
/// `bfloat16(float)` is `__float2bfloat16_rn` and `bfloat16(double)` is `__double2bfloat16`
/// (round to nearest even, once; overflow gives +-inf; every NaN gives 0x7fff);
/// `float(b)` is `__bfloat162float` (the bits shifted up by 16, NaN payload included). `==`
/// compares bits.
///
/// **Example**
/// ```cpp
/// const mldiag::bfloat16 b(1.0f / 3.0f);    // b.bits == 0x3eab
/// const float f = static_cast<float>(b);    // 0.333984375f
/// ```
struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  explicit constexpr bfloat16(float value) noexcept : bits(detail::bfloat16_bits_from(value)) {}
  explicit constexpr bfloat16(double value) noexcept : bits(detail::bfloat16_bits_from(value)) {}

  /// The bfloat16 whose bit pattern is `b`.
  static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 h;
    h.bits = b;
    return h;
  }

  explicit constexpr operator float() const noexcept {
    return std::bit_cast<float>(std::uint32_t{bits} << 16);
  }
  explicit constexpr operator double() const noexcept {
    return detail::widen(static_cast<float>(*this));
  }

  friend constexpr bool operator==(bfloat16, bfloat16) noexcept = default;
};

/// FP8 E4M3 as OCP and NVIDIA define it (1 sign, 4 exponent, 3 mantissa bits, bias 7; no
/// infinities; S.1111.111 is NaN; largest finite 448), with the layout of CUDA's
/// `__nv_fp8_e4m3`. The conversions are CUDA's host conversions bit for bit:
/// `float8_e4m3(float)` and `float8_e4m3(double)` are `__nv_cvt_float_to_fp8` and
/// `__nv_cvt_double_to_fp8` with `__NV_SATFINITE, __NV_E4M3` (round to nearest even, once;
/// overflow and +-inf give +-448; a float NaN gives 0x7f, a double NaN sign | 0x7f);
/// `float(e)` is exact, and a NaN gives 0x7fffffff. `==` compares bits.
///
/// **Example**
/// ```cpp
/// const mldiag::float8_e4m3 e(1000.0f);     // saturates: e.bits == 0x7e
/// const float f = static_cast<float>(e);    // 448.0f
/// ```
struct float8_e4m3 {
  std::uint8_t bits = 0;

  float8_e4m3() = default;
  explicit constexpr float8_e4m3(float value) noexcept : bits(detail::e4m3_bits_from(value)) {}
  explicit constexpr float8_e4m3(double value) noexcept : bits(detail::e4m3_bits_from(value)) {}

  /// The float8_e4m3 whose bit pattern is `b`.
  static constexpr float8_e4m3 from_bits(std::uint8_t b) noexcept {
    float8_e4m3 e;
    e.bits = b;
    return e;
  }

  explicit constexpr operator float() const noexcept { return detail::e4m3_to_float(bits); }
  explicit constexpr operator double() const noexcept {
    return detail::widen(detail::e4m3_to_float(bits));
  }

  friend constexpr bool operator==(float8_e4m3, float8_e4m3) noexcept = default;
};

/// FP8 E5M2 (1 sign, 5 exponent, 2 mantissa bits, bias 15; IEEE-like infinities and NaNs;
/// largest finite 57344), with the layout of CUDA's `__nv_fp8_e5m2`. The conversions are
/// CUDA's host conversions bit for bit: `float8_e5m2(float)` and `float8_e5m2(double)` are
/// `__nv_cvt_float_to_fp8` and `__nv_cvt_double_to_fp8` with `__NV_SATFINITE, __NV_E5M2`
/// (round to nearest even, once; overflow and +-inf give +-57344; a float NaN gives 0x7f, a
/// double NaN sign | 0x7e | its top two fraction bits); `float(e)` is exact, +-inf stays
/// +-inf, and a NaN gives 0x7fffffff. `==` compares bits.
///
/// **Example**
/// ```cpp
/// const mldiag::float8_e5m2 e(1e6);         // saturates: e.bits == 0x7b
/// const float f = static_cast<float>(e);    // 57344.0f
/// ```
struct float8_e5m2 {
  std::uint8_t bits = 0;

  float8_e5m2() = default;
  explicit constexpr float8_e5m2(float value) noexcept : bits(detail::e5m2_bits_from(value)) {}
  explicit constexpr float8_e5m2(double value) noexcept : bits(detail::e5m2_bits_from(value)) {}

  /// The float8_e5m2 whose bit pattern is `b`.
  static constexpr float8_e5m2 from_bits(std::uint8_t b) noexcept {
    float8_e5m2 e;
    e.bits = b;
    return e;
  }

  explicit constexpr operator float() const noexcept { return detail::e5m2_to_float(bits); }
  explicit constexpr operator double() const noexcept {
    return detail::widen(detail::e5m2_to_float(bits));
  }

  friend constexpr bool operator==(float8_e5m2, float8_e5m2) noexcept = default;
};

/// The exact float value of `x`, as `static_cast<float>(x)` gives it; one overload per element
/// type, for generic code.
///
/// **Example**
/// ```cpp
/// const float f = mldiag::to_float(mldiag::float8_e5m2::from_bits(0x3c));  // 1.0f
/// ```
constexpr float to_float(half x) noexcept {
  return static_cast<float>(x);
}
constexpr float to_float(bfloat16 x) noexcept {
  return static_cast<float>(x);
}
constexpr float to_float(float8_e4m3 x) noexcept {
  return static_cast<float>(x);
}
constexpr float to_float(float8_e5m2 x) noexcept {
  return static_cast<float>(x);
}

namespace detail {

// Finite bits -> float for the statistics engine's inner loops: shifts, masks and one multiply
// by a power of two, no branch. The shift lines the format's exponent and mantissa up with
// float's; the multiply moves the exponent bias from float's 127 to the format's. A denormal of
// the format lands on a float denormal, which the multiply scales into a normal float, exactly.
//
// Only for finite inputs: inf and NaN come out as large finite numbers (E4M3's NaN as -480 or
// 480). And only where the FPU does not treat denormal inputs as zero: on x86 a program linked
// with -ffast-math sets DAZ/FTZ at startup (crtfastmath.o), and then every denormal of half,
// E4M3 and E5M2 comes out as +-0. The exact conversions above (operator float) have neither
// limit.
constexpr float finite_to_float(half x) noexcept {
  const std::uint32_t b = x.bits;
  return std::bit_cast<float>(((b & 0x8000u) << 16) | ((b & 0x7fffu) << 13)) * 0x1p112f;
}
// bfloat16 is the top half of a float: no scaling, and valid for inf and NaN too.
constexpr float finite_to_float(bfloat16 x) noexcept {
  return std::bit_cast<float>(std::uint32_t{x.bits} << 16);
}
constexpr float finite_to_float(float8_e4m3 x) noexcept {
  const std::uint32_t b = x.bits;
  return std::bit_cast<float>(((b & 0x80u) << 24) | ((b & 0x7fu) << 20)) * 0x1p120f;
}
constexpr float finite_to_float(float8_e5m2 x) noexcept {
  const std::uint32_t b = x.bits;
  return std::bit_cast<float>(((b & 0x80u) << 24) | ((b & 0x7fu) << 21)) * 0x1p112f;
}

}  // namespace detail

// The layout other code (and CUDA's own types) relies on.
static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);
static_assert(alignof(half) == 2 && alignof(bfloat16) == 2);
static_assert(std::is_standard_layout_v<half> && std::is_trivially_copyable_v<half>);
static_assert(std::is_standard_layout_v<bfloat16> && std::is_trivially_copyable_v<bfloat16>);
static_assert(std::is_standard_layout_v<float8_e4m3> && std::is_trivially_copyable_v<float8_e4m3>);
static_assert(std::is_standard_layout_v<float8_e5m2> && std::is_trivially_copyable_v<float8_e5m2>);

}  // namespace mldiag
