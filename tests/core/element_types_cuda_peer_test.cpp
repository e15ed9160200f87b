// SPDX-License-Identifier: Apache-2.0
// The peer test: mldiag's element types against CUDA's own host conversions, bit for bit.
// A plain C++ translation unit (no nvcc, no GPU): CUDA's cuda_fp16.h, cuda_bf16.h and
// cuda_fp8.h compile with g++ -std=c++20 as they are, with no define; only the CUDA include
// directory is needed, best as a system directory (-isystem, as CMake's CUDA::cudart target
// gives it) so that the headers' C-style casts do not trip -Wold-style-cast. The pragmas below
// cover a plain -I too.
//
// Inputs are the ones where rounding can go wrong: every representable value of the target
// type, both signs, the exact midpoints between neighbours (and the last and first ulp of the
// source type either side of each), a sweep of float bit patterns through every exponent, the
// specials, and random doubles, including ones that float would round onto a midpoint.
#include <doctest/doctest.h>

#include "mldiag/core/element_types.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"  // clang only, at present
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <bit>
#include <cmath>  // std::nextafter, std::ilogb
#include <cstdint>
#include <cstdio>  // std::snprintf
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

template <class Source>
std::uint64_t source_bits(Source x) {
  if constexpr (sizeof(Source) == 4) {
    return std::bit_cast<std::uint32_t>(x);
  } else {
    return std::bit_cast<std::uint64_t>(x);
  }
}

// Compares ours(x) and theirs(x) for every input; reports the first mismatch and the count.
template <class Source, class Ours, class Theirs>
void compare_all(const std::string& what, const std::vector<Source>& inputs, Ours ours,
                 Theirs theirs) {
  std::size_t mismatches = 0;
  for (const Source x : inputs) {
    const std::uint64_t a = ours(x);
    const std::uint64_t b = theirs(x);
    if (a != b && mismatches++ == 0) {
      INFO(what, ": input ", hex(source_bits(x)), " mldiag ", hex(a), " CUDA ", hex(b));
      CHECK(a == b);
    }
  }
  INFO(what, ": ", inputs.size(), " inputs");
  CHECK(mismatches == 0);
}

// CUDA's side, as bits.
std::uint32_t cuda_half(float x) {
  return static_cast<__half_raw>(__float2half_rn(x)).x;
}
std::uint32_t cuda_half(double x) {
  return static_cast<__half_raw>(__double2half(x)).x;
}
std::uint32_t cuda_bfloat16(float x) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
}
std::uint32_t cuda_bfloat16(double x) {
  return static_cast<__nv_bfloat16_raw>(__double2bfloat16(x)).x;
}
// The conversion function and the constructor that uses it must agree; when they do not, the
// result has bit 8 set and matches nothing.
std::uint32_t cuda_fp8(float x, __nv_fp8_interpretation_t kind) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind);
}
std::uint32_t cuda_fp8(double x, __nv_fp8_interpretation_t kind) {
  return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, kind);
}
template <class Source>
std::uint32_t cuda_e4m3(Source x) {
  const std::uint32_t cvt = cuda_fp8(x, __NV_E4M3);
  const std::uint32_t ctor = __nv_fp8_e4m3(x).__x;
  return cvt == ctor ? cvt : 0x100u | cvt;
}
template <class Source>
std::uint32_t cuda_e5m2(Source x) {
  const std::uint32_t cvt = cuda_fp8(x, __NV_E5M2);
  const std::uint32_t ctor = __nv_fp8_e5m2(x).__x;
  return cvt == ctor ? cvt : 0x100u | cvt;
}

float cuda_to_float(mldiag::half x) {
  __half_raw raw;
  raw.x = x.bits;
  return __half2float(__half(raw));
}
float cuda_to_float(mldiag::bfloat16 x) {
  __nv_bfloat16_raw raw;
  raw.x = x.bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
float cuda_to_float(mldiag::float8_e4m3 x) {
  __nv_fp8_e4m3 v;
  v.__x = x.bits;
  return static_cast<float>(v);
}
float cuda_to_float(mldiag::float8_e5m2 x) {
  __nv_fp8_e5m2 v;
  v.__x = x.bits;
  return static_cast<float>(v);
}

template <class T>
constexpr std::uint32_t pattern_count = sizeof(T) == 2 ? 65536u : 256u;

template <class T>
constexpr int mantissa_bits = std::is_same_v<T, mldiag::half>          ? 10
                              : std::is_same_v<T, mldiag::bfloat16>    ? 7
                              : std::is_same_v<T, mldiag::float8_e4m3> ? 3
                                                                       : 2;

template <class T>
T make(std::uint32_t bits) {
  if constexpr (sizeof(T) == 2) {
    return T::from_bits(static_cast<std::uint16_t>(bits));
  } else {
    return T::from_bits(static_cast<std::uint8_t>(bits));
  }
}

bool is_finite_bits(float f) {
  return (std::bit_cast<std::uint32_t>(f) & 0x7f800000u) != 0x7f800000u;
}

// The non-negative finite values of T in increasing order (the patterns 0x00... up to the first
// non-finite one), then the value one ulp above the largest, which is where overflow begins.
template <class T>
std::vector<double> ladder() {
  std::vector<double> values;
  for (std::uint32_t b = 0; b < pattern_count<T> / 2; ++b) {
    const float f = mldiag::to_float(make<T>(b));
    if (!is_finite_bits(f)) break;  // inf (half, bfloat16, E5M2) or NaN (E4M3 0x7f)
    values.push_back(f);
  }
  const std::size_t n = values.size();
  values.push_back(values[n - 1] + (values[n - 1] - values[n - 2]));
  return values;
}

std::vector<float> float_specials() {
  std::vector<float> v;
  for (const std::uint32_t b :
       {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
        0x7fa00000u, 0x7fc00000u, 0x7fc00001u, 0x7fffffffu, 0x3f800000u}) {
    v.push_back(std::bit_cast<float>(b));
    v.push_back(std::bit_cast<float>(b | 0x80000000u));
  }
  return v;
}

std::vector<double> double_specials() {
  std::vector<double> v;
  for (const std::uint64_t b : std::initializer_list<std::uint64_t>{
           0x0000000000000000u, 0x0000000000000001u, 0x000fffffffffffffu, 0x0010000000000000u,
           0x7fefffffffffffffu, 0x7ff0000000000000u, 0x7ff0000000000001u, 0x7ff4000000000000u,
           0x7ff8000000000000u, 0x7ffc000000000000u, 0x7ff8000000000001u, 0x7fffffffffffffffu,
           0x47efffffe0000000u /* FLT_MAX */, 0x47efffffe0000001u, 0x47f0000000000000u}) {
    v.push_back(std::bit_cast<double>(b));
    v.push_back(std::bit_cast<double>(b | 0x8000000000000000u));
  }
  return v;
}

// (a) float inputs: a sweep of bit patterns i * 65537 through every exponent and both signs,
// the specials, and for every value v of T and midpoint m between neighbours: +-v, +-m, and
// +-m one float ulp either side. The midpoints are exact in float for all four formats.
template <class T>
std::vector<float> float_inputs() {
  std::vector<float> v = float_specials();
  for (std::uint32_t i = 0; i < 65536u; ++i)
    v.push_back(std::bit_cast<float>(i * 65537u));
  const std::vector<double> values = ladder<T>();
  for (std::size_t k = 0; k < values.size(); ++k) {
    const auto value = static_cast<float>(values[k]);
    v.push_back(value);
    v.push_back(-value);
    if (k + 1 == values.size()) break;
    const auto mid = static_cast<float>((values[k] + values[k + 1]) / 2);
    for (const float m : {mid, std::nextafter(mid, 0.0f),
                          std::nextafter(mid, std::numeric_limits<float>::infinity())}) {
      v.push_back(m);
      v.push_back(-m);
    }
  }
  return v;
}

// (b) double inputs: the same values and midpoints with one double ulp either side; the
// midpoints moved by a relative 2^-30 (float rounds those back onto the midpoint: a path that
// went through float would round twice); the float specials widened; and random doubles,
// both random bit patterns and values spread over T's exponent range.
template <class T>
std::vector<double> double_inputs(std::uint64_t seed) {
  std::vector<double> v = double_specials();
  for (const float f : float_specials())
    v.push_back(f);
  const std::vector<double> values = ladder<T>();
  for (std::size_t k = 0; k < values.size(); ++k) {
    v.push_back(values[k]);
    v.push_back(-values[k]);
    if (k + 1 == values.size()) break;
    const double mid = (values[k] + values[k + 1]) / 2;
    for (const double m : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e308),
                           mid * (1 - 0x1p-30), mid * (1 + 0x1p-30)}) {
      v.push_back(m);
      v.push_back(-m);
    }
  }
  std::mt19937_64 rng(seed);
  // T's exponents, in double's biased form, with a margin for underflow and overflow.
  const auto lowest = static_cast<int>(std::ilogb(values[1])) - 4;
  const auto highest = static_cast<int>(std::ilogb(values.back())) + 4;
  std::uniform_int_distribution<int> exponent(lowest, highest);
  for (int i = 0; i < 100000; ++i) {
    v.push_back(std::bit_cast<double>(rng()));
    const std::uint64_t r = rng();
    const auto e = static_cast<std::uint64_t>(exponent(rng) + 1023);
    v.push_back(std::bit_cast<double>((r & 0x800fffffffffffffu) | (e << 52)));
    // A midpoint of normal Ts (T's mantissa random, then the half-ulp bit), moved by up to
    // 3 double ulps either way.
    constexpr int m = mantissa_bits<T>;
    constexpr std::uint64_t kept =
        0x8000000000000000u | (((std::uint64_t{1} << m) - 1) << (52 - m));
    const std::uint64_t mid = (r & kept) | (e << 52) | (std::uint64_t{1} << (51 - m));
    v.push_back(std::bit_cast<double>(mid + (r & 7u) - 3u));
  }
  return v;
}

std::uint64_t fresh_seed() {
  return std::random_device{}();
}

// True where the FPU treats denormal inputs as zero and flushes denormal results (DAZ/FTZ: on
// x86, a program linked with -ffast-math). mldiag's conversions do not depend on it, but two
// of CUDA's host paths use the FPU and do: __double2bfloat16 (static_cast<float>), and the
// widening of a float to double.
bool denormals_flushed() {
  volatile float denormal = 0x1p-140f;
  return denormal * 2.0f == 0.0f;
}

// (c) every bit pattern of T, decoded to float and to double, compared by bits (NaNs
// included). CUDA has no half or bfloat16 to double: its float, widened, stands in.
template <class T>
void compare_to_float(const std::string& what) {
  std::vector<std::uint32_t> patterns(pattern_count<T>);
  for (std::uint32_t b = 0; b < pattern_count<T>; ++b)
    patterns[b] = b;
  compare_all(
      what, patterns,
      [](std::uint32_t b) { return std::bit_cast<std::uint32_t>(mldiag::to_float(make<T>(b))); },
      [](std::uint32_t b) { return std::bit_cast<std::uint32_t>(cuda_to_float(make<T>(b))); });
  if (denormals_flushed()) {
    MESSAGE("to double not compared: the FPU flushes denormals (built with -ffast-math?)");
    return;
  }
  compare_all(
      what + " as double", patterns,
      [](std::uint32_t b) { return std::bit_cast<std::uint64_t>(static_cast<double>(make<T>(b))); },
      [](std::uint32_t b) {
        return std::bit_cast<std::uint64_t>(static_cast<double>(cuda_to_float(make<T>(b))));
      });
}

}  // namespace

TEST_CASE("half from float matches __float2half_rn") {
  compare_all(
      "half(float)", float_inputs<mldiag::half>(),
      [](float x) { return std::uint32_t{mldiag::half(x).bits}; },
      [](float x) { return cuda_half(x); });
}

TEST_CASE("half from double matches __double2half") {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  compare_all(
      "half(double)", double_inputs<mldiag::half>(seed),
      [](double x) { return std::uint32_t{mldiag::half(x).bits}; },
      [](double x) { return cuda_half(x); });
}

TEST_CASE("bfloat16 from float matches __float2bfloat16_rn") {
  compare_all(
      "bfloat16(float)", float_inputs<mldiag::bfloat16>(),
      [](float x) { return std::uint32_t{mldiag::bfloat16(x).bits}; },
      [](float x) { return cuda_bfloat16(x); });
}

TEST_CASE("bfloat16 from double matches __double2bfloat16") {
  if (denormals_flushed()) {
    MESSAGE(
        "skipped: the FPU flushes denormals (built with -ffast-math?), and CUDA's host "
        "__double2bfloat16 rounds through float arithmetic");
    return;
  }
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  compare_all(
      "bfloat16(double)", double_inputs<mldiag::bfloat16>(seed),
      [](double x) { return std::uint32_t{mldiag::bfloat16(x).bits}; },
      [](double x) { return cuda_bfloat16(x); });
}

TEST_CASE("float8_e4m3 from float and double matches __nv_cvt_float_to_fp8 SATFINITE E4M3") {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  compare_all(
      "float8_e4m3(float)", float_inputs<mldiag::float8_e4m3>(),
      [](float x) { return std::uint32_t{mldiag::float8_e4m3(x).bits}; },
      [](float x) { return cuda_e4m3(x); });
  compare_all(
      "float8_e4m3(double)", double_inputs<mldiag::float8_e4m3>(seed),
      [](double x) { return std::uint32_t{mldiag::float8_e4m3(x).bits}; },
      [](double x) { return cuda_e4m3(x); });
}

TEST_CASE("float8_e5m2 from float and double matches __nv_cvt_float_to_fp8 SATFINITE E5M2") {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  compare_all(
      "float8_e5m2(float)", float_inputs<mldiag::float8_e5m2>(),
      [](float x) { return std::uint32_t{mldiag::float8_e5m2(x).bits}; },
      [](float x) { return cuda_e5m2(x); });
  compare_all(
      "float8_e5m2(double)", double_inputs<mldiag::float8_e5m2>(seed),
      [](double x) { return std::uint32_t{mldiag::float8_e5m2(x).bits}; },
      [](double x) { return cuda_e5m2(x); });
}

TEST_CASE("every bit pattern converts to the float and double CUDA gives") {
  compare_to_float<mldiag::half>("half to float");
  compare_to_float<mldiag::bfloat16>("bfloat16 to float");
  compare_to_float<mldiag::float8_e4m3>("float8_e4m3 to float");
  compare_to_float<mldiag::float8_e5m2>("float8_e5m2 to float");
}
