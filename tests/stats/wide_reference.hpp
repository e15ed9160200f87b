// SPDX-License-Identifier: Apache-2.0
// A reference type wider than the library's float64 arithmetic in both precision and range:
// __float128 where the compiler has it (113-bit significand, exponent to 16383), else
// long double, which must then have the range too (aarch64 Linux: IEEE quad). Only +, -, *, /
// and a square root by Newton's method are used, so no libquadmath is needed.
#pragma once

#include <cmath>
#include <limits>

namespace mldiag_test {

#if defined(__SIZEOF_FLOAT128__)
using wide = __float128;
#else
using wide = long double;
static_assert(std::numeric_limits<long double>::max_exponent > 2 * 1024,
              "the wide reference needs squares of any double: no __float128 and a narrow long double");
#endif

// sqrt of a non-negative wide value: a long double start, then Newton steps in wide.
inline wide wide_sqrt(wide x) {
  if (x <= 0) return 0;
  wide y = static_cast<wide>(std::sqrt(static_cast<long double>(x)));
  if (!(y > 0)) y = 1;  // x beyond long double's range (not reached from doubles)
  for (int i = 0; i < 3; ++i) y = (y + x / y) / 2;
  return y;
}

inline wide wide_abs(wide x) { return x < 0 ? -x : x; }

// |got - want| / |want| in wide, returned as a double (+Inf when want is 0 and got is not).
inline double wide_relative_error(double got, wide want) {
  if (want == 0) return got == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(wide_abs((static_cast<wide>(got) - want) / want));
}

// Mean, population variance and L2 norm of float64 values, two-pass in wide.
struct wide_moments {
  wide mean = 0, variance = 0, l2 = 0;
};
template <class Range>
wide_moments wide_moments_of(const Range& x) {
  wide_moments r;
  wide sum = 0, sum_sq = 0;
  std::size_t n = 0;
  for (auto v : x) {
    const wide w = static_cast<wide>(static_cast<double>(v));
    sum += w;
    sum_sq += w * w;
    ++n;
  }
  if (n == 0) return r;
  r.mean = sum / static_cast<wide>(n);
  wide m2 = 0;
  for (auto v : x) {
    const wide d = static_cast<wide>(static_cast<double>(v)) - r.mean;
    m2 += d * d;
  }
  r.variance = m2 / static_cast<wide>(n);
  r.l2 = wide_sqrt(sum_sq);
  return r;
}

}  // namespace mldiag_test
