// SPDX-License-Identifier: Apache-2.0
// The element types against references written here from the formats' definitions, with no
// CUDA: every bit pattern decodes to what the sign/exponent/mantissa fields say, every value
// round-trips, and hand-derived rounding, overflow and NaN cases come out as CUDA's host code
// gives them (element_types_cuda_peer_test.cpp checks the same against CUDA's headers).
#include <doctest/doctest.h>

#include "mldiag/core/element_types.hpp"

#include <bit>
#include <cmath>  // std::ldexp, std::nextafter, std::abs
#include <cstdint>
#include <cstdio>  // std::snprintf
#include <limits>
#include <string>
#include <type_traits>

namespace {

// NaN is told by the bits: these tests also run built with -ffast-math, where std::isnan may
// be folded to false.
bool is_nan(float f) {
  return (std::bit_cast<std::uint32_t>(f) & 0x7fffffffu) > 0x7f800000u;
}

// True where the FPU treats denormal inputs as zero (DAZ): on x86, in a program linked with
// -ffast-math. The exact conversions do not depend on it; the checks below are written so that
// they do not either, except where a test says so.
bool denormals_are_zero() {
  volatile float denormal = 0x1p-140f;
  return denormal * 2.0f == 0.0f;
}

// float -> double from the fields with std::ldexp, which stays exact under DAZ (unlike the
// hardware conversion, for float denormals).
double widen(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  const auto exp = static_cast<int>((u >> 23) & 0xffu);
  const auto mant = static_cast<double>(u & 0x7fffffu);
  double magnitude = 0;
  if (exp == 0xff) {
    magnitude = mant == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = std::ldexp(mant, -149);
  } else {
    magnitude = std::ldexp(mant + 0x1p23, exp - 150);
  }
  return (u >> 31) != 0 ? -magnitude : magnitude;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// How a format spells its specials.
enum class specials { ieee, e4m3 };

struct format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  specials kind;
};

constexpr format half_fmt{5, 10, 15, specials::ieee};
constexpr format bfloat16_fmt{8, 7, 127, specials::ieee};
constexpr format e4m3_fmt{4, 3, 7, specials::e4m3};
constexpr format e5m2_fmt{5, 2, 15, specials::ieee};

bool ref_is_nan(format f, std::uint32_t bits) {
  const std::uint32_t exp_max = (1u << f.exponent_bits) - 1u;
  const std::uint32_t exp = (bits >> f.mantissa_bits) & exp_max;
  const std::uint32_t mant = bits & ((1u << f.mantissa_bits) - 1u);
  if (f.kind == specials::e4m3) return exp == exp_max && mant == (1u << f.mantissa_bits) - 1u;
  return exp == exp_max && mant != 0;
}

// The reference decoder: (-1)^s * m * 2^(e - bias - M), with the implicit bit for e > 0 and
// e = 1 for denormals; exact in double, and every value of these formats is a float.
double ref_decode(format f, std::uint32_t bits) {
  const std::uint32_t exp_max = (1u << f.exponent_bits) - 1u;
  const bool negative = ((bits >> (f.exponent_bits + f.mantissa_bits)) & 1u) != 0;
  const auto exp = static_cast<int>((bits >> f.mantissa_bits) & exp_max);
  const auto mant = static_cast<int>(bits & ((1u << f.mantissa_bits) - 1u));
  double magnitude = 0;
  if (ref_is_nan(f, bits)) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (f.kind == specials::ieee && exp == static_cast<int>(exp_max)) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    magnitude = std::ldexp(mant, 1 - f.bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(mant + (1 << f.mantissa_bits), exp - f.bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Every bit pattern of T decodes to the reference value (NaN for NaN), as float and as double.
template <class T, class Bits>
void check_decoding(format f) {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < (1u << (1 + f.exponent_bits + f.mantissa_bits)); ++b) {
    const T x = T::from_bits(static_cast<Bits>(b));
    const float as_float = static_cast<float>(x);
    const double as_double = static_cast<double>(x);
    const double expected = ref_decode(f, b);
    bool ok = false;
    if (ref_is_nan(f, b)) {
      ok = is_nan(as_float) &&
           (std::bit_cast<std::uint64_t>(as_double) & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    } else {
      // Compare the bits so that -0 and +0 differ.
      ok =
          std::bit_cast<std::uint64_t>(widen(as_float)) == std::bit_cast<std::uint64_t>(expected) &&
          std::bit_cast<std::uint64_t>(as_double) == std::bit_cast<std::uint64_t>(expected) &&
          std::bit_cast<std::uint32_t>(mldiag::to_float(x)) ==
              std::bit_cast<std::uint32_t>(as_float);
    }
    if (!ok && mismatches++ == 0) {
      INFO("bits ", hex(b), " float ", as_float, " double ", as_double, " expected ", expected);
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
}

// Every non-NaN pattern survives T -> float -> T and T -> double -> T, except E5M2's
// infinities, which SATFINITE turns into +-max finite (checked with the rounding cases).
template <class T, class Bits>
void check_round_trip(format f, bool saturates) {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < (1u << (1 + f.exponent_bits + f.mantissa_bits)); ++b) {
    if (ref_is_nan(f, b)) continue;
    if (saturates && std::abs(ref_decode(f, b)) == std::numeric_limits<double>::infinity()) {
      continue;
    }
    const T x = T::from_bits(static_cast<Bits>(b));
    const T via_float(static_cast<float>(x));
    const T via_double(static_cast<double>(x));
    const bool ok = via_float == x && via_double == x;
    if (!ok && mismatches++ == 0) {
      INFO("bits ", hex(b), " via float ", hex(via_float.bits), " via double ",
           hex(via_double.bits));
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
}

// detail::finite_to_float against the exact conversion, for every finite pattern.
template <class T, class Bits>
void check_finite_to_float(format f) {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < (1u << (1 + f.exponent_bits + f.mantissa_bits)); ++b) {
    const double value = ref_decode(f, b);
    if (ref_is_nan(f, b) || value == std::numeric_limits<double>::infinity() ||
        value == -std::numeric_limits<double>::infinity()) {
      continue;
    }
    const T x = T::from_bits(static_cast<Bits>(b));
    const float fast = mldiag::detail::finite_to_float(x);
    const float exact = static_cast<float>(x);
    const bool ok = std::bit_cast<std::uint32_t>(fast) == std::bit_cast<std::uint32_t>(exact);
    if (!ok && mismatches++ == 0) {
      INFO("bits ", hex(b), " fast ", hex(std::bit_cast<std::uint32_t>(fast)), " exact ",
           hex(std::bit_cast<std::uint32_t>(exact)));
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
}

float from_float_bits(std::uint32_t b) {
  return std::bit_cast<float>(b);
}
double from_double_bits(std::uint64_t b) {
  return std::bit_cast<double>(b);
}

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr double dinf = std::numeric_limits<double>::infinity();

}  // namespace

// The layout promises, checked where the compiler can.
static_assert(std::is_trivially_copyable_v<mldiag::half>);
static_assert(std::is_standard_layout_v<mldiag::float8_e4m3>);
static_assert(!std::is_convertible_v<float, mldiag::half>, "the constructors are explicit");
static_assert(!std::is_convertible_v<mldiag::bfloat16, float>, "the conversions are explicit");
static_assert(mldiag::half{}.bits == 0 && mldiag::float8_e5m2{}.bits == 0);
// The conversions are constant expressions; these are also the header's documentation examples.
static_assert(mldiag::half(0.1f).bits == 0x2e66);
static_assert(static_cast<float>(mldiag::half::from_bits(0x2e66)) == 0.0999755859375f);
static_assert(mldiag::bfloat16(1.0f / 3.0f).bits == 0x3eab);
static_assert(static_cast<float>(mldiag::bfloat16::from_bits(0x3eab)) == 0.333984375f);
static_assert(mldiag::to_float(mldiag::float8_e5m2::from_bits(0x3c)) == 1.0f);
static_assert(static_cast<float>(mldiag::float8_e5m2(1e6)) == 57344.0f);
static_assert(static_cast<float>(mldiag::float8_e4m3(1000.0f)) == 448.0f);
static_assert(mldiag::half(1.0f).bits == 0x3c00);
static_assert(mldiag::half(-2.0).bits == 0xc000);
static_assert(mldiag::bfloat16(1.0f).bits == 0x3f80);
static_assert(mldiag::float8_e4m3(1000.0f).bits == 0x7e);
static_assert(mldiag::float8_e5m2(1e6).bits == 0x7b);
static_assert(mldiag::to_float(mldiag::half::from_bits(0x0001)) == 0x1p-24f);
static_assert(static_cast<double>(mldiag::float8_e4m3::from_bits(0x7e)) == 448.0);
static_assert(mldiag::detail::finite_to_float(mldiag::float8_e5m2::from_bits(0xfb)) == -57344.0f);

TEST_CASE("every half bit pattern decodes to its sign exponent and mantissa fields") {
  check_decoding<mldiag::half, std::uint16_t>(half_fmt);
}
TEST_CASE("every bfloat16 bit pattern decodes to its sign exponent and mantissa fields") {
  check_decoding<mldiag::bfloat16, std::uint16_t>(bfloat16_fmt);
}
TEST_CASE("every float8_e4m3 bit pattern decodes to its sign exponent and mantissa fields") {
  check_decoding<mldiag::float8_e4m3, std::uint8_t>(e4m3_fmt);
}
TEST_CASE("every float8_e5m2 bit pattern decodes to its sign exponent and mantissa fields") {
  check_decoding<mldiag::float8_e5m2, std::uint8_t>(e5m2_fmt);
}

TEST_CASE("every non-NaN value round-trips through float and double") {
  check_round_trip<mldiag::half, std::uint16_t>(half_fmt, false);
  check_round_trip<mldiag::bfloat16, std::uint16_t>(bfloat16_fmt, false);
  check_round_trip<mldiag::float8_e4m3, std::uint8_t>(e4m3_fmt, true);
  check_round_trip<mldiag::float8_e5m2, std::uint8_t>(e5m2_fmt, true);
}

TEST_CASE("detail::finite_to_float is exact for every finite pattern") {
  // Under DAZ the multiply sees a denormal as 0: the documented limit of these helpers.
  if (denormals_are_zero()) {
    MESSAGE("skipped: the FPU flushes denormal inputs to zero (built with -ffast-math?)");
    return;
  }
  check_finite_to_float<mldiag::half, std::uint16_t>(half_fmt);
  check_finite_to_float<mldiag::bfloat16, std::uint16_t>(bfloat16_fmt);
  check_finite_to_float<mldiag::float8_e4m3, std::uint8_t>(e4m3_fmt);
  check_finite_to_float<mldiag::float8_e5m2, std::uint8_t>(e5m2_fmt);
}

TEST_CASE("half rounds to nearest even once and overflows to infinity") {
  using mldiag::half;
  CHECK(half(1.0f + 0x1p-11f).bits == 0x3c00);             // tie: down to even
  CHECK(half(1.0f + 0x3p-11f).bits == 0x3c02);             // tie: up to even
  CHECK(half(1.0f + 0x1p-11f + 0x1p-20f).bits == 0x3c01);  // just above the tie
  CHECK(half(65504.0f).bits == 0x7bff);                    // max finite
  CHECK(half(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
  CHECK(half(65520.0f).bits == 0x7c00);  // max + half an ulp: tie to even is inf
  CHECK(half(-1e10f).bits == 0xfc00);
  CHECK(half(inf).bits == 0x7c00);
  CHECK(half(-inf).bits == 0xfc00);
  CHECK(half(0x1p-24f).bits == 0x0001);   // smallest denormal
  CHECK(half(0x1p-25f).bits == 0x0000);   // half of it: tie to even zero
  CHECK(half(-0x1p-25f).bits == 0x8000);  // signed zero
  CHECK(half(std::nextafter(0x1p-25f, 1.0f)).bits == 0x0001);
  CHECK(half(0x3p-25f).bits == 0x0002);             // 1.5 denormal ulps: tie to even 2
  CHECK(half(0x1p-14f - 0x1p-25f).bits == 0x0400);  // rounds up into the normals
  CHECK(half(-0.0f).bits == 0x8000);
  CHECK(half(0x1p-149f).bits == 0x0000);  // float denormal
  // Every NaN is 0x7fff, sign and payload dropped, on both paths.
  CHECK(half(from_float_bits(0xffc00000u)).bits == 0x7fff);
  CHECK(half(from_float_bits(0x7f800001u)).bits == 0x7fff);
  CHECK(half(from_double_bits(0xfff8000000000000u)).bits == 0x7fff);
  // From double, rounded once: float would round 1 + 2^-11 + 2^-40 to the tie 1 + 2^-11,
  // and then down to 1.
  CHECK(half(1.0 + 0x1p-11 + 0x1p-40).bits == 0x3c01);
  CHECK(half(65520.0 - 0x1p-30).bits == 0x7bff);
  CHECK(half(0x1p-25 + 0x1p-60).bits == 0x0001);
  CHECK(half(1e300).bits == 0x7c00);
  CHECK(half(-dinf).bits == 0xfc00);
  CHECK(half(0x1p-1074).bits == 0x0000);
}

TEST_CASE("bfloat16 rounds to nearest even once and overflows to infinity") {
  using mldiag::bfloat16;
  CHECK(bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);
  CHECK(bfloat16(1.0f + 0x3p-8f).bits == 0x3f82);
  CHECK(bfloat16(from_float_bits(0x3f808001u)).bits == 0x3f81);
  CHECK(bfloat16(from_float_bits(0x7f7f7fffu)).bits == 0x7f7f);  // below max + half an ulp
  CHECK(bfloat16(from_float_bits(0x7f7f8000u)).bits == 0x7f80);  // max + half an ulp: inf
  CHECK(bfloat16(-std::numeric_limits<float>::max()).bits == 0xff80);
  CHECK(bfloat16(inf).bits == 0x7f80);
  // Denormals: float denormals land on bfloat16 denormals.
  CHECK(bfloat16(from_float_bits(0x00008000u)).bits == 0x0000);  // tie: even zero
  CHECK(bfloat16(from_float_bits(0x00008001u)).bits == 0x0001);
  CHECK(bfloat16(from_float_bits(0x00018000u)).bits == 0x0002);  // tie: up to even
  CHECK(bfloat16(from_float_bits(0x807fffffu)).bits == 0x8080);  // up into the normals
  CHECK(bfloat16(from_float_bits(0xffc00001u)).bits == 0x7fff);
  CHECK(bfloat16(from_double_bits(0x7ff0000000000001u)).bits == 0x7fff);
  // From double, rounded once.
  CHECK(bfloat16(1.0 + 0x1p-8 + 0x1p-30).bits == 0x3f81);
  CHECK(bfloat16(0x1.ffp127 - 0x1p90).bits == 0x7f7f);  // just below max + half an ulp
  CHECK(bfloat16(0x1.ffp127).bits == 0x7f80);           // max + half an ulp: tie to even is inf
  CHECK(bfloat16(1e39).bits == 0x7f80);                 // beyond float's range
  CHECK(bfloat16(-1e39).bits == 0xff80);
  CHECK(bfloat16(0x1p-134).bits == 0x0000);  // half the smallest denormal: tie
  CHECK(bfloat16(0x1p-134 + 0x1p-170).bits == 0x0001);
  CHECK(bfloat16(-0x1p-300).bits == 0x8000);
}

TEST_CASE("float8_e4m3 saturates to 448 and rounds to nearest even") {
  using mldiag::float8_e4m3;
  CHECK(float8_e4m3(1000.0f).bits == 0x7e);
  CHECK(float8_e4m3(-1000.0f).bits == 0xfe);
  CHECK(float8_e4m3(448.0f).bits == 0x7e);
  CHECK(float8_e4m3(464.0f).bits == 0x7e);  // max + half an ulp: even is max
  CHECK(float8_e4m3(465.0f).bits == 0x7e);  // would round to 480, the NaN pattern: saturates
  CHECK(float8_e4m3(inf).bits == 0x7e);     // SATFINITE: inf is max finite too
  CHECK(float8_e4m3(-inf).bits == 0xfe);
  CHECK(float8_e4m3(1.0f).bits == 0x38);
  CHECK(float8_e4m3(1.0f + 0x1p-4f).bits == 0x38);  // tie: down to even
  CHECK(float8_e4m3(1.0f + 0x3p-4f).bits == 0x3a);  // tie: up to even
  CHECK(float8_e4m3(0x1p-9f).bits == 0x01);         // smallest denormal
  CHECK(float8_e4m3(0x1p-10f).bits == 0x00);        // half of it: even zero
  CHECK(float8_e4m3(-0x1p-10f).bits == 0x80);
  CHECK(float8_e4m3(std::nextafter(0x1p-10f, 1.0f)).bits == 0x01);
  CHECK(float8_e4m3(0x3p-10f).bits == 0x02);
  // A float NaN is canonicalised first: 0x7f whatever its sign; a double NaN keeps its sign.
  CHECK(float8_e4m3(from_float_bits(0xffc00000u)).bits == 0x7f);
  CHECK(float8_e4m3(from_float_bits(0x7f800001u)).bits == 0x7f);
  CHECK(float8_e4m3(from_double_bits(0x7ff8000000000000u)).bits == 0x7f);
  CHECK(float8_e4m3(from_double_bits(0xfff8000000000000u)).bits == 0xff);
  CHECK(float8_e4m3(from_double_bits(0xfff0000000000001u)).bits == 0xff);
  CHECK(float8_e4m3(-dinf).bits == 0xfe);
  CHECK(float8_e4m3(1.0 + 0x1p-4 + 0x1p-40).bits == 0x39);  // once from double
  CHECK(float8_e4m3(1.0f + 0x1p-4f + 0x1p-40f).bits == 0x38);
  CHECK(float8_e4m3(1e300).bits == 0x7e);
}

TEST_CASE("float8_e5m2 saturates to 57344 and rounds to nearest even") {
  using mldiag::float8_e5m2;
  CHECK(float8_e5m2(1e6).bits == 0x7b);
  CHECK(float8_e5m2(1e6f).bits == 0x7b);
  CHECK(float8_e5m2(-1e6f).bits == 0xfb);
  CHECK(float8_e5m2(57344.0f).bits == 0x7b);
  CHECK(float8_e5m2(61439.0f).bits == 0x7b);
  CHECK(float8_e5m2(61440.0f).bits == 0x7b);  // tie would be inf: saturates
  CHECK(float8_e5m2(inf).bits == 0x7b);
  CHECK(float8_e5m2(-inf).bits == 0xfb);
  CHECK(float8_e5m2(1.0f).bits == 0x3c);
  CHECK(float8_e5m2(1.125f).bits == 0x3c);  // tie: down to even
  CHECK(float8_e5m2(1.375f).bits == 0x3e);  // tie: up to even
  CHECK(float8_e5m2(0x1p-16f).bits == 0x01);
  CHECK(float8_e5m2(0x1p-17f).bits == 0x00);
  CHECK(float8_e5m2(-0x1p-17f).bits == 0x80);
  CHECK(float8_e5m2(0x3p-17f).bits == 0x02);
  CHECK(float8_e5m2(from_float_bits(0xff800001u)).bits == 0x7f);
  // A double NaN keeps its sign and the top two bits of its fraction, over 0x7e.
  CHECK(float8_e5m2(from_double_bits(0x7ff8000000000000u)).bits == 0x7e);
  CHECK(float8_e5m2(from_double_bits(0xfff8000000000000u)).bits == 0xfe);
  CHECK(float8_e5m2(from_double_bits(0x7ff4000000000000u)).bits == 0x7f);
  CHECK(float8_e5m2(from_double_bits(0x7ff0000000000001u)).bits == 0x7e);
  CHECK(float8_e5m2(from_double_bits(0xfffc000000000000u)).bits == 0xff);
  CHECK(float8_e5m2(dinf).bits == 0x7b);
  CHECK(float8_e5m2(1.125 + 0x1p-40).bits == 0x3d);  // once from double
  CHECK(float8_e5m2(1.125f + 0x1p-40f).bits == 0x3c);
}

TEST_CASE("conversions to float drop NaN payloads as CUDA does except for bfloat16") {
  using mldiag::bfloat16;
  using mldiag::float8_e4m3;
  using mldiag::float8_e5m2;
  using mldiag::half;
  const auto float_bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  CHECK(float_bits(static_cast<float>(half::from_bits(0xfe01))) == 0x7fffffffu);
  CHECK(float_bits(static_cast<float>(half::from_bits(0xfc00))) == 0xff800000u);
  CHECK(float_bits(static_cast<float>(bfloat16::from_bits(0xffc1))) == 0xffc10000u);
  CHECK(float_bits(static_cast<float>(float8_e4m3::from_bits(0xff))) == 0x7fffffffu);
  CHECK(float_bits(static_cast<float>(float8_e5m2::from_bits(0xfd))) == 0x7fffffffu);
  CHECK(float_bits(static_cast<float>(float8_e5m2::from_bits(0xfc))) == 0xff800000u);
  CHECK(float_bits(static_cast<float>(float8_e4m3::from_bits(0x80))) == 0x80000000u);
}
