// SPDX-License-Identifier: Apache-2.0
// gradient_persistence: the sketched cosine between consecutive steps' gradients against the
// exact float64 cosine, its absent cases, and its errors.
#include <doctest/doctest.h>

#include "mldiag/core/element_types.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/persistence.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/stats/host_isa.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

// "w<t>", built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive) on
// "w" + std::to_string(t).
std::string tensor_name(std::size_t t) {
  std::string s = "w";
  s += std::to_string(t);
  return s;
}

// Tensors of awkward sizes: below, at and far above max_per_tensor (4096: sampled).
const std::vector<std::size_t> sizes = {1, 7, 4096, 4097, 30000, 250000};

// b = rho * a + sqrt(1 - rho^2) * noise, per tensor, so the exact cosine is near rho.
struct pair_of_steps {
  std::vector<std::vector<float>> a, b;
};
pair_of_steps correlated(double rho, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n01;
  pair_of_steps p;
  for (std::size_t n : sizes) {
    std::vector<float> a(n), b(n);
    const double scale = 1.0 + static_cast<double>(n % 5);  // tensors differ in scale
    for (std::size_t i = 0; i < n; ++i) {
      const double x = n01(gen), y = n01(gen);
      a[i] = static_cast<float>(scale * x);
      b[i] = static_cast<float>(scale * (rho * x + std::sqrt(1.0 - rho * rho) * y));
    }
    p.a.push_back(std::move(a));
    p.b.push_back(std::move(b));
  }
  return p;
}

// The float64 cosine over every element of every tensor (the reference).
double exact_cosine(const pair_of_steps& p) {
  long double dot = 0, a2 = 0, b2 = 0;
  for (std::size_t t = 0; t < p.a.size(); ++t) {
    for (std::size_t i = 0; i < p.a[t].size(); ++i) {
      dot += static_cast<long double>(p.a[t][i]) * p.b[t][i];
      a2 += static_cast<long double>(p.a[t][i]) * p.a[t][i];
      b2 += static_cast<long double>(p.b[t][i]) * p.b[t][i];
    }
  }
  return static_cast<double>(dot / std::sqrt(a2 * b2));
}

std::optional<double> sketched(mldiag::gradient_persistence& g, const pair_of_steps& p) {
  for (std::size_t t = 0; t < p.a.size(); ++t) g.add(tensor_name(t), std::span<const float>(p.a[t]));
  CHECK_FALSE(g.finish_step().has_value());  // the first step has nothing to compare with
  for (std::size_t t = 0; t < p.b.size(); ++t) g.add(tensor_name(t), std::span<const float>(p.b[t]));
  const auto c = g.finish_step();
  if (!c) return std::nullopt;
  CHECK_FALSE(c->increments.has_value());  // two steps have no pair of increments
  return c->consecutive;
}

}  // namespace

TEST_CASE("gradient_persistence estimates the cosine of consecutive gradients within 0.05 of float64") {
  for (const double rho : {0.0, 0.3, 0.9, 0.99, -0.7}) {
    CAPTURE(rho);
    const auto p = correlated(rho, 11u + static_cast<unsigned>(100 * (rho + 1.0)));
    const double exact = exact_cosine(p);
    mldiag::gradient_persistence g;
    const auto c = sketched(g, p);
    REQUIRE(c.has_value());
    CAPTURE(exact);
    CAPTURE(*c);
    // Standard error sqrt(2 / 4096) = 0.022 from the sketch, plus the sampling of the large
    // tensors (about 4096 of each): 0.05 is more than two standard errors of both.
    CHECK(std::fabs(*c - exact) < 0.05);
  }
}

TEST_CASE("gradient_persistence: identical gradients give 1, negated ones -1, to rounding") {
  const auto p = correlated(0.0, 5);
  pair_of_steps same{p.a, p.a}, negated{p.a, p.a};
  for (auto& t : negated.b)
    for (auto& v : t) v = -v;
  mldiag::gradient_persistence g1, g2;
  const auto c1 = sketched(g1, same), c2 = sketched(g2, negated);
  REQUIRE(c1.has_value());
  REQUIRE(c2.has_value());
  CHECK(*c1 == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(*c2 == doctest::Approx(-1.0).epsilon(1e-12));
}

TEST_CASE("gradient_persistence: add_sampled with a gathered sample equals add") {
  const auto p = correlated(0.5, 9);
  mldiag::gradient_persistence direct, gathered;
  const auto c_direct = sketched(direct, p);
  for (const auto* step : {&p.a, &p.b}) {
    for (std::size_t t = 0; t < step->size(); ++t) {
      const auto& v = (*step)[t];
      const std::size_t s = gathered.stride_for(v.size());
      std::vector<double> sample;
      for (std::size_t i = 0; i < v.size(); i += s) sample.push_back(v[i]);
      gathered.add_sampled(tensor_name(t), std::span<const double>(sample), s, v.size());
    }
    if (step == &p.a) CHECK_FALSE(gathered.finish_step().has_value());
  }
  const auto c_gathered = gathered.finish_step();
  REQUIRE(c_direct.has_value());
  REQUIRE(c_gathered.has_value());
  CHECK(c_gathered->consecutive == doctest::Approx(*c_direct).epsilon(1e-12));
  // The stride is odd above max_per_tensor, 1 below.
  CHECK(gathered.stride_for(4096) == 1);
  CHECK(gathered.stride_for(250000) % 2 == 1);
  CHECK((250000 + gathered.stride_for(250000) - 1) / gathered.stride_for(250000) <= 4096);
}

TEST_CASE("gradient_persistence: every host ISA gives the same cosines, bit for bit, within 0.05 of float64") {
  // The sketch runs in the widest vectors the CPU has, one element at a time elsewhere; each
  // lane does the scalar loop's operations. Three steps of the awkward sizes (tails of 1-7
  // elements, runs that wrap around the last bucket, strided samples), in float, double and
  // bf16; and a matrix whose one column dominates (structured gradients).
  const auto p = correlated(0.6, 77);
  const auto third = correlated(0.6, 78).b;
  std::vector<float> column(300 * 64);
  std::mt19937_64 gen(5);
  std::normal_distribution<double> n01;
  std::vector<float> column_next(column.size());
  for (std::size_t i = 0; i < column.size(); ++i) {
    const double big = i % 64 == 3 ? 50.0 : 1.0;  // column 3 of [300, 64]
    const double x = n01(gen);
    column[i] = static_cast<float>(big * x);
    column_next[i] = static_cast<float>(big * (0.6 * x + 0.8 * n01(gen)));
  }
  const auto before = mldiag::active_host_isa();
  std::optional<mldiag::gradient_cosines> first_f, first_d, first_b;
  std::optional<double> first_column;
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    mldiag::gradient_persistence gf, gd, gb, gc;
    std::optional<mldiag::gradient_cosines> cf, cd, cb;
    for (const auto* step : {&p.a, &p.b, &third}) {
      for (std::size_t t = 0; t < step->size(); ++t) {
        const auto& v = (*step)[t];
        std::vector<double> d(v.begin(), v.end());
        std::vector<mldiag::bfloat16> b;
        for (float x : v) b.push_back(mldiag::bfloat16(x));
        gf.add(tensor_name(t), std::span<const float>(v));
        gd.add(tensor_name(t), std::span<const double>(d));
        gb.add(tensor_name(t), std::span<const mldiag::bfloat16>(b));
      }
      cf = gf.finish_step();
      cd = gd.finish_step();
      cb = gb.finish_step();
    }
    REQUIRE(cf.has_value());
    REQUIRE(cd.has_value());
    REQUIRE(cb.has_value());
    REQUIRE(cf->increments.has_value());
    // float and double inputs hold the same values: the same sketch.
    CHECK(cf->consecutive == cd->consecutive);
    CHECK(std::fabs(cf->consecutive - exact_cosine({p.b, third})) < 0.05);
    CHECK(std::fabs(cb->consecutive - exact_cosine({p.b, third})) < 0.05);
    gc.add("column", std::span<const float>(column));
    (void)gc.finish_step();
    gc.add("column", std::span<const float>(column_next));
    const auto cc = gc.finish_step();
    REQUIRE(cc.has_value());
    CHECK(std::fabs(cc->consecutive - exact_cosine({{column}, {column_next}})) < 0.05);
    if (!first_f) {
      first_f = cf;
      first_d = cd;
      first_b = cb;
      first_column = cc->consecutive;
    } else {
      CHECK(cf->consecutive == first_f->consecutive);
      CHECK(*cf->increments == *first_f->increments);
      CHECK(cd->consecutive == first_d->consecutive);
      CHECK(cb->consecutive == first_b->consecutive);
      CHECK(*cb->increments == *first_b->increments);
      CHECK(cc->consecutive == *first_column);
    }
    // A NaN or an Inf in the vector part or in the tail: no cosine on any ISA.
    for (std::size_t at : {std::size_t{2}, std::size_t{33}, std::size_t{98}}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        mldiag::gradient_persistence g;
        std::vector<float> ones(99, 1.0f), with_bad(99, 1.0f);
        with_bad[at] = bad;
        g.add("w", std::span<const float>(ones));
        (void)g.finish_step();
        g.add("w", std::span<const float>(with_bad));
        CHECK_FALSE(g.finish_step().has_value());
        g.add("w", std::span<const float>(ones));
        CHECK_FALSE(g.finish_step().has_value());  // the previous step held it
        g.add("w", std::span<const float>(ones));
        const auto c = g.finish_step();
        REQUIRE(c.has_value());
        CHECK(c->consecutive == doctest::Approx(1.0).epsilon(1e-12));
      }
    }
  }
  mldiag::select_host_isa(before);
}

TEST_CASE("gradient_persistence: absent without a previous step, for zeros, and around a NaN") {
  mldiag::gradient_persistence g;
  const std::vector<float> ones(100, 1.0f), zeros(100, 0.0f);
  std::vector<float> with_nan(100, 1.0f);
  with_nan[50] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(g.finish_step().has_value());  // nothing added
  g.add("w", std::span<const float>(ones));
  CHECK_FALSE(g.finish_step().has_value());  // first step
  g.add("w", std::span<const float>(zeros));
  CHECK_FALSE(g.finish_step().has_value());  // a zero gradient has no direction
  g.add("w", std::span<const float>(ones));
  CHECK_FALSE(g.finish_step().has_value());  // the previous step was zeros
  g.add("w", std::span<const float>(with_nan));
  CHECK_FALSE(g.finish_step().has_value());  // NaN: non_finite's business, not a cosine
  g.add("w", std::span<const float>(ones));
  CHECK_FALSE(g.finish_step().has_value());  // the previous step held a NaN
  g.add("w", std::span<const float>(ones));
  const auto c = g.finish_step();
  REQUIRE(c.has_value());
  CHECK(c->consecutive == doctest::Approx(1.0));
  CHECK_FALSE(c->increments.has_value());  // the step before the previous held a NaN
  g.reset();
  g.add("w", std::span<const float>(ones));
  CHECK_FALSE(g.finish_step().has_value());  // reset forgets the previous step
}

TEST_CASE("gradient_persistence: the increments' cosine against float64 for accumulated and for noisy gradients") {
  // Three steps g0, g1 = g0 + f1, g2 = g1 + f2 (never zeroed: the increments are the fresh
  // gradients f1, f2, with cosine rho), and three steps mu + n_t (healthy: increments
  // n1 - n0 and n2 - n1, cosine about -0.5 whatever mu is).
  std::mt19937_64 gen(21);
  std::normal_distribution<double> n01;
  for (const bool accumulated : {true, false}) {
    CAPTURE(accumulated);
    std::vector<std::vector<std::vector<float>>> steps(3);  // [step][tensor][element]
    for (std::size_t n : sizes) {
      std::vector<double> mu(n), x(n), y(n), z(n);
      for (std::size_t i = 0; i < n; ++i) {
        mu[i] = 3.0 * n01(gen);  // a direction every step shares, larger than the noise
        x[i] = n01(gen);
        y[i] = n01(gen);
        z[i] = n01(gen);
      }
      for (std::size_t s = 0; s < 3; ++s) steps[s].emplace_back(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (accumulated) {
          const double f1 = x[i], f2 = 0.6 * x[i] + 0.8 * y[i];  // cos(f1, f2) = 0.6
          steps[0].back()[i] = static_cast<float>(mu[i]);
          steps[1].back()[i] = static_cast<float>(mu[i] + f1);
          steps[2].back()[i] = static_cast<float>(mu[i] + f1 + f2);
        } else {
          steps[0].back()[i] = static_cast<float>(mu[i] + x[i]);
          steps[1].back()[i] = static_cast<float>(mu[i] + y[i]);
          steps[2].back()[i] = static_cast<float>(mu[i] + z[i]);
        }
      }
    }
    // The float64 reference over every element.
    long double dd = 0, n1 = 0, n0 = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        const long double d1 = static_cast<long double>(steps[2][t][i]) - steps[1][t][i];
        const long double d0 = static_cast<long double>(steps[1][t][i]) - steps[0][t][i];
        dd += d1 * d0;
        n1 += d1 * d1;
        n0 += d0 * d0;
      }
    }
    const double exact = static_cast<double>(dd / std::sqrt(n1 * n0));
    CHECK(exact == doctest::Approx(accumulated ? 0.6 : -0.5).epsilon(0.05));  // the planted structure
    mldiag::gradient_persistence g;
    std::optional<mldiag::gradient_cosines> c;
    for (std::size_t s = 0; s < 3; ++s) {
      for (std::size_t t = 0; t < sizes.size(); ++t) g.add(tensor_name(t), std::span<const float>(steps[s][t]));
      c = g.finish_step();
    }
    REQUIRE(c.has_value());
    REQUIRE(c->increments.has_value());
    CAPTURE(exact);
    CAPTURE(*c->increments);
    CHECK(std::fabs(*c->increments - exact) < 0.05);
  }
}

TEST_CASE("gradient_persistence and the recorder refuse bad input with an mldiag: message") {
  CHECK_THROWS_WITH_AS(mldiag::gradient_persistence(0), doctest::Contains("mldiag:"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::gradient_persistence(16, 0), doctest::Contains("max_per_tensor"), mldiag::error);
  mldiag::gradient_persistence g;
  const std::vector<double> three(3, 1.0);
  CHECK_THROWS_WITH_AS(g.add_sampled("w", std::span<const double>(three), 1, 10), doctest::Contains("stride_for"),
                       mldiag::error);
  mldiag::recorder rec;
  rec.begin_step(0);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::gradient_cosines{1.5}), doctest::Contains("not a cosine"), mldiag::error);
  CHECK_THROWS_AS(rec.observe(mldiag::gradient_cosines{std::numeric_limits<double>::quiet_NaN()}), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::gradient_cosines{0.5, -2.0}), doctest::Contains("not a cosine"), mldiag::error);
  rec.observe(mldiag::gradient_cosines{-1.0, 0.25});
  const auto& s = rec.end_step();
  CHECK(s.grad_cosine == -1.0);
  CHECK(s.grad_increment_cosine.has_value());
  CHECK(s.grad_increment_cosine == 0.25);
}
