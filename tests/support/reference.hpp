// SPDX-License-Identifier: Apache-2.0
// Independent references for the statistics tests: values decoded one by one to long double,
// classified with std::isnan/std::isinf on the decoded value (not by bits, as the library
// does), and summed two-pass in long double.
#pragma once

#include <mldiag/core/element.hpp>
#include <mldiag/stats/tensor_stats.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mldiag_test {

struct reference_stats {
  std::uint64_t count = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
  long double min = INFINITY, max = -INFINITY, max_abs = 0;
  long double mean = 0, variance = 0, l2 = 0;
  std::uint64_t finite = 0;
};

template <class T>
long double decode(T x) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<long double>(x);
  else return static_cast<long double>(static_cast<double>(x));
}

template <class T>
reference_stats reference_of(std::span<const T> x) {
  reference_stats r;
  r.count = x.size();
  long double sum = 0, sum_sq = 0;
  for (const T& e : x) {
    const long double v = decode(e);
    if (std::isnan(v)) {
      ++r.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++(v > 0 ? r.pos_inf : r.neg_inf);
      continue;
    }
    ++r.finite;
    if (v == 0) ++r.zeros;
    r.min = std::min(r.min, v);
    r.max = std::max(r.max, v);
    r.max_abs = std::max(r.max_abs, std::fabs(v));
    sum += v;
    sum_sq += v * v;
  }
  if (r.finite > 0) {
    r.mean = sum / static_cast<long double>(r.finite);
    long double m2 = 0;
    for (const T& e : x) {
      const long double v = decode(e);
      if (std::isfinite(v)) m2 += (v - r.mean) * (v - r.mean);
    }
    r.variance = m2 / static_cast<long double>(r.finite);
  }
  r.l2 = std::sqrt(sum_sq);
  return r;
}

inline double relative_error(double got, long double want) {
  if (want == 0) return std::fabs(got) == 0 ? 0.0 : INFINITY;
  return static_cast<double>(std::fabs((static_cast<long double>(got) - want) / want));
}

// The accuracy contract of docs/stats.md for data of element type T: 1e-6 for the formats of
// 32 bits or fewer (the host kernel accumulates them in float lanes, issue 18), 1e-12 for
// float64, whose kernel keeps the tighter figure because it costs nothing there.
template <class T>
inline constexpr double contract_tol = std::is_same_v<T, double> ? 1e-12 : 1e-6;

// Counts and extrema exactly; moments to `tol` relative (the mean relative to the data's
// scale, since a mean near zero has no relative accuracy to speak of; the variance, a square,
// to 2 tol).
inline void check_against(const mldiag::tensor_stats& s, const reference_stats& r,
                          double tol = 1e-12) {
  CHECK(s.count == r.count);
  CHECK(s.nan == r.nan);
  CHECK(s.pos_inf == r.pos_inf);
  CHECK(s.neg_inf == r.neg_inf);
  CHECK(s.zeros == r.zeros);
  CHECK(s.finite() == r.finite);
  if (r.finite == 0) return;
  CHECK(static_cast<long double>(s.min) == r.min);
  CHECK(static_cast<long double>(s.max) == r.max);
  CHECK(static_cast<long double>(s.max_abs) == r.max_abs);
  // The mean to tol of the data's scale and the spread through the standard deviation, each
  // plus a denormal step (a result in the denormal range cannot be closer); the variance
  // where it is a normal double.
  const long double scale = std::max(std::fabs(r.mean), std::sqrt(r.variance));
  CHECK(std::fabs(static_cast<long double>(s.mean()) - r.mean) <=
        tol * scale + std::numeric_limits<double>::denorm_min());
  const long double denorm = std::numeric_limits<double>::denorm_min();
  if (r.variance > 0) {
    const long double sd = std::sqrt(r.variance);
    CHECK(std::fabs(s.stddev() - sd) <= tol * sd + denorm);
  }
  if (r.variance > std::numeric_limits<double>::min() &&
      r.variance < std::numeric_limits<double>::max()) {
    CHECK(relative_error(s.variance(), r.variance) <= 2 * tol);
  }
  // A norm below the smallest normal double is itself a denormal: a few bits, no more.
  CHECK(std::fabs(s.l2_norm() - r.l2) <= tol * r.l2 + denorm);
}

}  // namespace mldiag_test
