// SPDX-License-Identifier: Apache-2.0
// tensor_stats against independent references: hand-derived values and long double sums.
#include <doctest/doctest.h>

#include "mldiag/stats/compute.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace {

struct reference {
  long double sum = 0, sum_sq = 0;
  long double min = INFINITY, max = -INFINITY;
  unsigned long long finite = 0;
};

template <class T>
reference reference_of(const std::vector<T>& x) {
  reference r;
  for (T v : x) {
    if (!std::isfinite(v)) continue;
    const long double l = v;
    r.sum += l;
    r.sum_sq += l * l;
    r.min = std::min(r.min, l);
    r.max = std::max(r.max, l);
    ++r.finite;
  }
  return r;
}

double rel(double got, long double want) {
  return want == 0 ? std::fabs(got) : static_cast<double>(std::fabs((got - want) / want));
}

}  // namespace

TEST_CASE("L2 norm of 1..12 is sqrt(650) = 25.495098") {
  std::vector<float> x;
  for (int i = 1; i <= 12; ++i)
    x.push_back(static_cast<float>(i));
  const auto s = mldiag::compute_stats(std::span<const float>(x));
  CHECK(s.count == 12);
  CHECK(s.l2_norm() == doctest::Approx(25.495098).epsilon(1e-7));
  CHECK(s.mean == doctest::Approx(6.5).epsilon(1e-15));
  // population variance of 1..n is (n^2 - 1) / 12
  CHECK(s.variance() == doctest::Approx(143.0 / 12.0).epsilon(1e-14));
  CHECK(s.min == 1.0);
  CHECK(s.max == 12.0);
}

TEST_CASE("NaN and Inf and zeros are counted by bit pattern and moments cover finite values") {
  std::vector<float> x = {1.0f,
                          -0.0f,
                          0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          -2.0f};
  const auto s = mldiag::compute_stats(std::span<const float>(x));
  CHECK(s.count == 9);
  CHECK(s.nan == 2);
  CHECK(s.pos_inf == 1);
  CHECK(s.neg_inf == 1);
  CHECK(s.zeros == 2);  // the denormal is not a zero
  CHECK(s.finite() == 5);
  CHECK(s.min == -2.0);
  CHECK(s.max == 1.0);
  CHECK(s.max_abs == 2.0);
  CHECK(s.l2_norm() == doctest::Approx(std::sqrt(5.0)).epsilon(1e-15));
}

TEST_CASE("random fp32 data across many chunks agrees with a long double reference") {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(3.0f, 0.5f);
  std::vector<float> x(1'000'003);
  for (auto& v : x)
    v = normal(rng);
  const auto s = mldiag::compute_stats(std::span<const float>(x));
  const auto r = reference_of(x);
  const long double n = static_cast<long double>(r.finite);
  const long double mean = r.sum / n;
  long double m2 = 0;
  for (float v : x)
    m2 += (v - mean) * (v - mean);
  CHECK(rel(s.mean, mean) < 1e-12);
  CHECK(rel(s.variance(), m2 / n) < 1e-10);
  CHECK(rel(s.l2_norm(), std::sqrt(r.sum_sq)) < 1e-12);
  CHECK(s.min == static_cast<double>(r.min));
  CHECK(s.max == static_cast<double>(r.max));
}

TEST_CASE("the L2 norm stays finite and accurate for huge and tiny float64 and float32") {
  for (double magnitude : {1e300, 1e-300, 3e38, 1e-38}) {
    std::vector<double> x(10000);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = magnitude * (1.0 + static_cast<double>(i % 7));
    const auto s = mldiag::compute_stats(std::span<const double>(x));
    long double ss = 0;  // long double holds 1e600 and 1e-600
    for (double v : x)
      ss += static_cast<long double>(v) * v;
    CAPTURE(magnitude);
    CHECK(std::isfinite(s.l2_norm()));
    CHECK(rel(s.l2_norm(), std::sqrt(ss)) < 1e-12);
  }
  std::vector<float> big(5000, 3.0e38f), tiny(5000, 1.0e-38f);
  CHECK(rel(mldiag::compute_stats(std::span<const float>(big)).l2_norm(),
            std::sqrt(5000.0L) * 3.0e38L) < 1e-6);
  CHECK(rel(mldiag::compute_stats(std::span<const float>(tiny)).l2_norm(),
            std::sqrt(5000.0L) * static_cast<long double>(1.0e-38f)) < 1e-6);
}

TEST_CASE("merging partial results equals the statistics of the concatenation") {
  std::vector<double> a = {1, 2, 3, 4}, b = {10, -20, std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  const auto sa = mldiag::compute_stats(std::span<const double>(a));
  const auto sb = mldiag::compute_stats(std::span<const double>(b));
  const auto merged = mldiag::merge(sa, sb);
  const auto direct = mldiag::compute_stats(std::span<const double>(ab));
  CHECK(merged.count == direct.count);
  CHECK(merged.nan == 1);
  CHECK(merged.min == -20.0);
  CHECK(merged.max == 10.0);
  CHECK(merged.mean == doctest::Approx(0.0).epsilon(1e-15));  // (1+2+3+4+10-20)/6
  CHECK(merged.l2_norm() == doctest::Approx(std::sqrt(530.0)).epsilon(1e-14));
}

TEST_CASE("an empty range gives an empty mergeable result and null with a size is an error") {
  const auto e = mldiag::compute_stats(std::span<const float>());
  CHECK(e.empty());
  CHECK(e.l2_norm() == 0.0);
  std::vector<float> one = {4.0f};
  const auto m = mldiag::merge(e, mldiag::compute_stats(std::span<const float>(one)));
  CHECK(m.count == 1);
  CHECK(m.l2_norm() == 4.0);
  CHECK_THROWS_WITH_AS(
      (void)mldiag::compute_stats(std::span<const float>(static_cast<const float*>(nullptr), 3)),
      doctest::Contains("mldiag: "), mldiag::error);
}
