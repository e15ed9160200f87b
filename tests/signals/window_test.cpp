// SPDX-License-Identifier: Apache-2.0
// Signals against hand-derived values, long double closed forms and plain sorts.
#include <doctest/doctest.h>

#include "mldiag/signals/window.hpp"

#include "../support/count_allocations.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

// The window keeps running state for its statistics (issue 18): every statistic below is
// checked against an independent recomputation over long series, through many wrap-arounds.
namespace {

// The window's values, oldest first.
std::vector<double> values_of(const window& w) {
  std::vector<double> v;
  for (std::size_t i = 0; i < w.size(); ++i)
    v.push_back(w[i]);
  return v;
}

// Order statistics from a plain sort of a copy.
double sorted_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double sorted_mad(const std::vector<double>& v) {
  const double m = sorted_median(v);
  std::vector<double> d;
  for (double x : v)
    d.push_back(std::fabs(x - m));
  return 1.4826 * sorted_median(d);
}

bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// Two-pass sums in long double; deviations are taken from the mean (exact when it lies within a
// factor of two of the value) so that no large intercept enters the residuals.
struct line_fit {
  long double mean = 0, stddev = 0, slope = 0, intercept = 0, t_stat = 0, mean_abs = 0,
              slope_scale = 0;
};
line_fit fit(const std::vector<double>& v) {
  line_fit r;
  const auto n = static_cast<long double>(v.size());
  long double s = 0;
  for (double x : v) {
    s += x;
    r.mean_abs += std::fabs(x);
  }
  r.mean = s / n;
  r.mean_abs /= n;
  long double q = 0, sxy = 0, sxx = 0;
  const long double x_mean = (n - 1) / 2;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const long double d = v[i] - r.mean, dx = static_cast<long double>(i) - x_mean;
    q += d * d;
    sxy += dx * d;
    sxx += dx * dx;
  }
  r.stddev = std::sqrt(q / (n - 1));
  r.slope = sxy / sxx;
  r.intercept = r.mean - r.slope * x_mean;
  r.slope_scale = r.stddev / std::sqrt(sxx);
  long double sse = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const long double e = (v[i] - r.mean) - r.slope * (static_cast<long double>(i) - x_mean);
    sse += e * e;
  }
  const long double se = std::sqrt(sse / (n - 2) / sxx);
  r.t_stat = se > 0 ? r.slope / se : (r.slope == 0 ? 0 : std::copysign(HUGE_VALL, r.slope));
  return r;
}

// Series that are hard on running statistics, in stretches of 97 values: noise, ties, a
// constant that is not a binary fraction, +0 and -0, a level 1e9 times its noise, rare spikes
// of 1e15 among values near 1 (they enter and leave the sums), a trend, and values out of the
// sums' range (1e-130 and 1e130: recomputed directly while the window holds them).
double adversarial(std::mt19937_64& rng, int i) {
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u;
  switch ((i / 97) % 8) {
    case 0:
      return z(rng);
    case 1:
      return std::round(4.0 * u(rng)) / 4.0;
    case 2:
      return 0.1;
    case 3:
      return u(rng) < 0.5 ? 0.0 : -0.0;
    case 4:
      return 1e6 + 1e-3 * z(rng);
    case 5:
      return u(rng) < 0.05 ? 1e15 * (1.0 + u(rng)) : 1.0 + 0.01 * z(rng);
    case 6:
      return 0.01 * i + 1e-3 * z(rng);
    default:
      return (u(rng) < 0.5 ? 1e-130 : 1e130) * (1.0 + u(rng));
  }
}

}  // namespace

TEST_CASE("median, MAD and max of a running window are exactly those of a plain sort") {
  for (const std::size_t capacity : {1, 2, 3, 4, 5, 8, 64, 100, 257}) {
    CAPTURE(capacity);
    for (const int every : {1, 7, 1000}) {  // asked at every push, now and then, rarely
      CAPTURE(every);
      std::mt19937_64 rng(capacity * 10 + static_cast<std::size_t>(every));
      std::uniform_real_distribution<double> u;
      window w(capacity);
      for (int i = 0; i < 6000; ++i) {
        double x = adversarial(rng, i);
        if (i % 500 == 250) x = u(rng) < 0.5 ? HUGE_VAL : -HUGE_VAL;  // infinities are ordered too
        w.push(x);
        if (i == 3001) w.clear();
        if (i % every != 0 || w.empty()) continue;
        const auto v = values_of(w);
        CAPTURE(i);
        CHECK(same(w.median(), sorted_median(v)));
        CHECK(same(w.mad(), sorted_mad(v)));
        CHECK(w.max() == *std::max_element(v.begin(), v.end()));
      }
    }
  }
}

TEST_CASE(
    "a NaN makes median and MAD take the direct way, and the running way is exact again once it "
    "has left") {
  // What median() and mad() always made of a NaN: nth_element over the values in window order.
  const auto nth_median = [](std::vector<double> v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return v.size() % 2 == 1 ? *mid : 0.5 * (*std::max_element(v.begin(), mid) + *mid);
  };
  window w(5);
  for (double x : {1.0, 2.0, 3.0, 4.0, 5.0})
    w.push(x);
  CHECK(w.median() == 3.0);
  CHECK(w.median() == 3.0);  // the second question keeps a sorted copy from here on
  w.push(std::nan(""));
  CHECK(w.size() == 5);
  for (double x : {9.0, 8.0, 7.0, 6.0}) {
    const auto v = values_of(w);
    CHECK(same(w.median(), nth_median(v)));
    std::vector<double> d;
    for (double y : v)
      d.push_back(std::fabs(y - nth_median(v)));
    CHECK(same(w.mad(), 1.4826 * nth_median(d)));
    w.push(x);
  }
  CHECK(std::isnan(w[0]));
  for (double x : {10.0, 0.5}) {
    w.push(x);
    const auto v = values_of(w);
    CHECK(w.median() == sorted_median(v));
    CHECK(w.mad() == sorted_mad(v));
  }
}

TEST_CASE(
    "running mean, stddev and least-squares trend agree with long double two-pass sums to the last "
    "bits") {
  for (const std::size_t capacity : {1, 2, 3, 5, 10, 64, 100, 500}) {
    CAPTURE(capacity);
    std::mt19937_64 rng(capacity);
    window w(capacity);
    std::vector<double> v;
    for (int i = 0; i < 12000; ++i) {
      const double x = adversarial(rng, i);
      w.push(x);
      v.push_back(x);
      if (v.size() > capacity) v.erase(v.begin());
      if (i % 3 != 0) continue;
      CAPTURE(i);
      const auto r = fit(v);
      const bool out_of_range = std::any_of(v.begin(), v.end(), [](double y) {
        return y != 0.0 && !(std::fabs(y) > 1e-120 && std::fabs(y) < 1e120);
      });
      // Recomputed directly (the textbook two passes) while values out of the sums' range are held.
      const double tol = out_of_range ? 1e-12 : 1e-15;
      CHECK(std::fabs(w.mean() - static_cast<double>(r.mean)) <=
            tol * static_cast<double>(r.mean_abs));
      if (v.size() < 2) continue;
      CHECK(std::fabs(w.stddev() - static_cast<double>(r.stddev)) <=
            tol * static_cast<double>(r.stddev));
      const auto t = mldiag::signals::slope(w);
      CHECK(std::fabs(t.slope - static_cast<double>(r.slope)) <=
            tol * static_cast<double>(std::fabs(r.slope) + r.slope_scale));
      CHECK(std::fabs(t.intercept - static_cast<double>(r.intercept)) <=
            4 * tol * static_cast<double>(r.mean_abs));
      if (v.size() < 3) continue;
      if (std::isinf(r.t_stat)) {
        CHECK(t.t_stat == static_cast<double>(r.t_stat));
      } else {
        // The reference is the less accurate side here: for a near-perfect fit (three values
        // 1e6 apart from their noise) its residuals cancel; exact arithmetic puts the window's
        // t-statistic within an ulp where the reference is off by ten.
        CHECK(std::fabs(t.t_stat - static_cast<double>(r.t_stat)) <=
              100 * tol * static_cast<double>(std::fabs(r.t_stat) + 1));
      }
    }
  }
}

TEST_CASE("a running mean forgets values 1e22 and 1e30 times the others once they have left") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u;
  window w(50);
  std::vector<double> v;
  for (int i = 0; i < 6000; ++i) {
    const double x = u(rng) < 0.02 ? (i < 3000 ? 1e22 : 1e30) * (1.0 + u(rng)) : 1.0 + 0.5 * z(rng);
    w.push(x);
    v.push_back(x);
    if (v.size() > 50) v.erase(v.begin());
    const auto r = fit(v);  // only the mean is asked for: the sums of squares stay off
    CHECK(std::fabs(w.mean() - static_cast<double>(r.mean)) <=
          1e-15 * static_cast<double>(r.mean_abs));
  }
}

TEST_CASE(
    "a window of equal values has a stddev, slope and t-statistic of exactly 0, after any "
    "history") {
  for (const std::size_t capacity : {1, 2, 3, 100}) {
    window w(capacity);
    for (int i = 0; i < 1000; ++i)
      w.push(1e3 * std::sin(i) + i);
    (void)mldiag::signals::slope(w);  // the running sums are on
    for (std::size_t i = 0; i < capacity; ++i)
      w.push(0.1);
    CHECK(w.mean() == 0.1);
    if (capacity < 2) continue;
    CHECK(w.stddev() == 0.0);
    const auto t = mldiag::signals::slope(w);
    CHECK(t.slope == 0.0);
    CHECK(t.intercept == 0.1);
    if (capacity >= 3) CHECK(t.t_stat == 0.0);
  }
}

TEST_CASE("a perfect line keeps its exact slope and an infinite t-statistic as the window slides") {
  window w(10);
  for (int i = 0; i < 1000; ++i) {
    w.push(2.0 * i + 1.0);
    if (i < 2) continue;
    const auto t = mldiag::signals::slope(w);
    CHECK(t.slope == 2.0);
    CHECK(t.intercept == w[0]);
    CHECK(std::isinf(t.t_stat));
    CHECK(t.t_stat > 0.0);
  }
}

TEST_CASE("the running sign change rate is a direct count") {
  const auto direct = [](const std::vector<double>& v) {
    std::size_t changes = 0, pairs = 0;
    for (std::size_t i = 2; i < v.size(); ++i) {
      const double a = v[i - 1] - v[i - 2], b = v[i] - v[i - 1];
      if (a == 0.0 || b == 0.0) continue;
      ++pairs;
      if ((a > 0.0) != (b > 0.0)) ++changes;
    }
    return v.size() < 3 ? std::nan("")
           : pairs == 0 ? 0.0
                        : static_cast<double>(changes) / static_cast<double>(pairs);
  };
  for (const std::size_t capacity : {1, 2, 3, 4, 50}) {
    std::mt19937_64 rng(capacity);
    std::uniform_int_distribution<int> level(0, 3);  // ties: flat steps
    window w(capacity);
    for (int i = 0; i < 3000; ++i) {
      w.push(i % 400 == 7 ? std::nan("") : static_cast<double>(level(rng)));
      if (i == 1500) w.clear();
      CHECK(same(mldiag::signals::sign_change_rate(w), direct(values_of(w))));
    }
  }
}

TEST_CASE("a copied window answers as the original") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> z;
  window a(50);
  for (int i = 0; i < 120; ++i) {
    a.push(z(rng));
    (void)a.median();
    (void)a.mad();
    (void)mldiag::signals::slope(a);
    (void)mldiag::signals::sign_change_rate(a);
  }
  window b = a;
  for (int i = 0; i < 200; ++i) {
    const double x = z(rng);
    a.push(x);
    b.push(x);
    CHECK(a.median() == b.median());
    CHECK(a.mad() == b.mad());
    CHECK(a.stddev() == b.stddev());
    CHECK(mldiag::signals::slope(a).t_stat == mldiag::signals::slope(b).t_stat);
  }
}

TEST_CASE(
    "pushing allocates nothing while every statistic is kept, cleared, dropped and taken up "
    "again") {
  window w(1000);
  std::mt19937_64 rng(4);
  std::normal_distribution<double> z;
  const auto before = mldiag_test::allocations();
  double sink = 0;
  for (int i = 0; i < 20000; ++i) {
    w.push(i % 3001 == 5 ? std::nan("") : i % 2999 == 5 ? 1e300 : z(rng));
    if (i == 10000) w.clear();
    if (i % 4 == 0 || (i > 15000 && i % 1500 == 0)) {
      sink += w.median() + w.mad() + w.max() + w.mean() + w.stddev() +
              mldiag::signals::slope(w).t_stat + mldiag::signals::sign_change_rate(w);
    }
  }
  CHECK(mldiag_test::allocations() == before);
  CHECK(sink != 0.0);
}
