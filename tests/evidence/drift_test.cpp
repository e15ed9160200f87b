// SPDX-License-Identifier: Apache-2.0
// drift_tracker against a __float128 reference (exact mode) and against itself at other
// powers of two (the sketch is linear, so scaling theta by 2^k scales every bucket exactly).
#include <doctest/doctest.h>

#include "mldiag/evidence/drift.hpp"

#include "../stats/wide_reference.hpp"

#include <array>
#include <cmath>
#include <random>
#include <span>
#include <vector>

namespace {

using mldiag_test::wide;

// ||theta - theta0|| / ||theta0|| in wide.
wide reference_drift(const std::vector<double>& theta0, const std::vector<double>& theta) {
  wide d2 = 0, n2 = 0;
  for (std::size_t i = 0; i < theta0.size(); ++i) {
    const wide a = theta0[i], b = theta[i];
    d2 += (b - a) * (b - a);
    n2 += a * a;
  }
  return mldiag_test::wide_sqrt(d2) / mldiag_test::wide_sqrt(n2);
}

struct pair_of_tensors {
  std::vector<double> theta0, theta;
};

// theta0 ~ scale * N(0, 1), theta = theta0 + 0.1 * scale * N(0, 1): a drift of about 0.1.
pair_of_tensors random_pair(std::size_t n, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  pair_of_tensors p{std::vector<double>(n), std::vector<double>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    p.theta0[i] = scale * normal(rng);
    p.theta[i] = p.theta0[i] + 0.1 * scale * normal(rng);
  }
  return p;
}

}  // namespace

TEST_CASE("drift of non-const spans: start and observe take std::span<T> as well") {
  // std::span<float> matched the range overload, which wrapped it in std::span again and
  // called itself forever (a hang at -O2, a stack overflow at -O0).
  std::vector<float> w0 = {3.0f, 4.0f}, w = {3.0f, 4.0f + 5.0f};
  mldiag::drift_tracker exact(mldiag::drift_tracker::mode::exact);
  exact.start("w", std::span<float>(w0));
  CHECK(exact.observe("w", std::span<float>(w)) == doctest::Approx(1.0).epsilon(1e-15));  // |(0, 5)| / |(3, 4)|
  CHECK(exact.observe("w", std::span<const float>(w)) == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(exact.observe("w", w) == doctest::Approx(1.0).epsilon(1e-15));
  std::array<double, 2> a = {3.0, 9.0};
  CHECK(exact.observe("w", a) == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(exact.observe("w", std::span<double, 2>(a)) == doctest::Approx(1.0).epsilon(1e-15));
  mldiag::drift_tracker sketch(mldiag::drift_tracker::mode::sketch, 64);
  sketch.start("w", std::span<float>(w0));
  CHECK(std::isfinite(sketch.observe("w", std::span<float>(w))));
  CHECK_THROWS_WITH_AS((void)exact.observe("w", std::span<float>(w.data(), 1)),
                       doctest::Contains("mldiag: drift_tracker::observe 'w': 1 values but the start had 2"),
                       mldiag::error);
}

TEST_CASE("drift of float64 parameters of any magnitude matches the wide reference") {
  // The sums of squares were plain doubles: +Inf for parameters of 1e200 (drift NaN) and 0
  // for 1e-170 (drift 0: the norm of theta0 underflowed, and so did the difference).
  for (double scale : {1.0, 1e200, 1e-170, 1e300, 1e-300, 4e-320}) {
    const auto p = random_pair(5000, scale, 7);
    mldiag::drift_tracker exact(mldiag::drift_tracker::mode::exact);
    exact.start("w", p.theta0);
    const double got = exact.observe("w", p.theta);
    CAPTURE(scale);
    CHECK(std::isfinite(got));
    // Denormal parameters carry few digits of their own; the reference has the same digits.
    CHECK(mldiag_test::wide_relative_error(got, reference_drift(p.theta0, p.theta)) <= 1e-12);
  }
}

TEST_CASE("the sketched drift is the same at every power-of-two scale") {
  const auto p = random_pair(20000, 1.0, 9);
  mldiag::drift_tracker unit(mldiag::drift_tracker::mode::sketch, 4096);
  unit.start("w", p.theta0);
  const double at_one = unit.observe("w", p.theta);
  CHECK(at_one == doctest::Approx(static_cast<double>(reference_drift(p.theta0, p.theta))).epsilon(0.1));
  for (int k : {664, -565, 990, -1000}) {  // 2^664 ~ 1e200, 2^-565 ~ 1e-170
    std::vector<double> t0 = p.theta0, t = p.theta;
    for (auto& v : t0) v = std::ldexp(v, k);
    for (auto& v : t) v = std::ldexp(v, k);
    mldiag::drift_tracker scaled(mldiag::drift_tracker::mode::sketch, 4096);
    scaled.start("w", t0);
    CAPTURE(k);
    const double got = scaled.observe("w", t);
    // Every bucket and every scaled square is the unit one times a power of two: the same
    // result up to the last bit (no value here is a denormal, even at 2^-1000).
    CHECK(got == doctest::Approx(at_one).epsilon(1e-15));
  }
}
