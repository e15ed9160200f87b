// SPDX-License-Identifier: Apache-2.0
// Signals against hand-derived values and long double closed forms.
#include <doctest/doctest.h>

#include "mldiag/signals/window.hpp"

#include "../support/count_allocations.hpp"

#include <cmath>
#include <random>

using mldiag::signals::window;

TEST_CASE("a window keeps the last values oldest first and mean and stddev are the textbook ones") {
  window w(4);
  for (double x : {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}) w.push(x);
  CHECK(w.size() == 4);
  CHECK(w.full());
  CHECK(w[0] == 3.0);
  CHECK(w.back() == 6.0);
  CHECK(w.mean() == 4.5);
  // sample standard deviation of 3,4,5,6: sqrt(5/3)
  CHECK(w.stddev() == doctest::Approx(std::sqrt(5.0 / 3.0)).epsilon(1e-15));
  // The largest value of what the window holds now (100 was pushed out), NaN when empty.
  window m(3);
  CHECK(std::isnan(m.max()));
  for (double x : {100.0, -1.0, 7.0, -3.0}) m.push(x);
  CHECK(m.max() == 7.0);
  CHECK_THROWS_WITH_AS(window(0), doctest::Contains("mldiag: signals::window: capacity 0"), mldiag::error);
}

TEST_CASE("median and MAD are robust to one outlier") {
  window w(5);
  for (double x : {3.0, 1.0, 100.0, 2.0, 4.0}) w.push(x);
  CHECK(w.median() == 3.0);
  // |x - 3| = 0, 2, 97, 1, 1 -> median 1 -> 1.4826
  CHECK(w.mad() == doctest::Approx(1.4826).epsilon(1e-15));
  window e(4);
  for (double x : {4.0, 1.0, 3.0, 2.0}) e.push(x);
  CHECK(e.median() == 2.5);
  CHECK(std::isnan(window(3).median()));
}

TEST_CASE("the least-squares slope and its t-statistic match the closed form") {
  window exact(10);
  for (int i = 0; i < 10; ++i) exact.push(2.0 * i + 1.0);
  const auto t = mldiag::signals::slope(exact);
  CHECK(t.slope == doctest::Approx(2.0).epsilon(1e-15));
  CHECK(t.intercept == doctest::Approx(1.0).epsilon(1e-14));
  CHECK(std::isinf(t.t_stat));
  // Noisy data: slope and t against long double sums.
  std::mt19937_64 rng(1);
  std::normal_distribution<double> noise(0.0, 0.5);
  window w(200);
  for (int i = 0; i < 200; ++i) w.push(10.0 - 0.01 * i + noise(rng));
  long double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const long double n = 200;
  for (int i = 0; i < 200; ++i) {
    sx += i;
    sy += w[static_cast<std::size_t>(i)];
    sxx += static_cast<long double>(i) * i;
    sxy += i * static_cast<long double>(w[static_cast<std::size_t>(i)]);
  }
  const long double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
  long double sse = 0;
  for (int i = 0; i < 200; ++i) {
    const long double e = w[static_cast<std::size_t>(i)] - (a + b * i);
    sse += e * e;
  }
  const long double se = std::sqrt(sse / (n - 2) / (sxx - sx * sx / n));
  const auto r = mldiag::signals::slope(w);
  CHECK(r.slope == doctest::Approx(static_cast<double>(b)).epsilon(1e-12));
  CHECK(r.t_stat == doctest::Approx(static_cast<double>(b / se)).epsilon(1e-10));
  CHECK(r.t_stat < -2.0);  // the downward trend is significant
}

TEST_CASE("sign change rate separates a zigzag a monotone run and noise") {
  window zig(50), up(50), noise(5000);
  for (int i = 0; i < 50; ++i) {
    zig.push(i % 2 ? 1.0 : -1.0);
    up.push(i);
  }
  std::mt19937_64 rng(2);
  std::normal_distribution<double> n01;
  for (int i = 0; i < 5000; ++i) noise.push(n01(rng));
  CHECK(mldiag::signals::sign_change_rate(zig) == 1.0);
  CHECK(mldiag::signals::sign_change_rate(up) == 0.0);
  // For white noise the rate is 2/3.
  CHECK(mldiag::signals::sign_change_rate(noise) == doctest::Approx(2.0 / 3.0).epsilon(0.03));
}

TEST_CASE("the EMA follows its recurrence and the ratio to the mean is plain") {
  auto e = mldiag::signals::ema::with_span(3.0);  // alpha = 0.5
  e.push(4.0);
  e.push(8.0);
  e.push(0.0);
  CHECK(e.value() == 3.0);  // 4 -> 6 -> 3
  window w(3);
  for (double x : {1.0, 2.0, 3.0}) w.push(x);
  CHECK(mldiag::signals::ratio_to_mean(20.0, w) == 10.0);
  CHECK_THROWS_AS(mldiag::signals::ema(0.0), mldiag::error);
}

TEST_CASE("pushing and robust statistics allocate nothing") {
  window w(1000);
  const auto before = mldiag_test::allocations();
  double sink = 0;
  for (int i = 0; i < 5000; ++i) {
    w.push(i * 0.5);
    if (i % 100 == 99) sink += w.median() + w.mad() + mldiag::signals::slope(w).slope;
  }
  CHECK(mldiag_test::allocations() == before);
  CHECK(sink > 0);
}
