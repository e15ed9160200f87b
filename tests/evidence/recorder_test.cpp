// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include "mldiag/evidence/diagnostic.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support/count_allocations.hpp"

#include <cmath>
#include <cstdint>
#include <span>
#include <random>
#include <string>
#include <vector>

namespace {
template <class T>
T get(const mldiag::diagnostic& d, const std::string& key) {
  for (const auto& [k, v] : d)
    if (k == key) return std::get<T>(v);
  FAIL("missing key " << key);
  return T{};
}
}  // namespace

TEST_CASE("a step records loss lr and tensors by role and joins a bounded history") {
  mldiag::recorder rec(3);
  std::vector<float> g = {3.0f, 4.0f}, w = {1.0f, NAN};
  for (int step = 0; step < 5; ++step) {
    rec.begin_step(step);
    rec.observe(mldiag::scalar::loss, 10.0 - step);
    rec.observe(mldiag::scalar::learning_rate, 1e-3);
    rec.observe(mldiag::role::gradient, "layer0.w", g);
    rec.observe(mldiag::role::parameter, "layer0.w", w);
    const auto& s = rec.end_step();
    CHECK(s.step == step);
  }
  CHECK(rec.past().size() == 3);  // bounded
  CHECK(rec.past()[0].step == 2);
  CHECK(rec.past().back().loss == 6.0);
  CHECK(rec.names().size() == 1);  // the same name in two roles is one id
  CHECK(rec.past().back().gradients.at(0).stats.l2_norm() == 5.0);
  CHECK(rec.past().back().global_grad_norm() == 5.0);
  CHECK(rec.past().back().parameters.at(0).stats.nan == 1);
}

TEST_CASE("the global gradient norm is the norm of every gradient element together") {
  // Tensors of scales 2^-600 to 2^600 (their squares over- and underflow a double), zeros, an
  // empty tensor, a denormal; the reference sums the squares in long double, scaled by hand.
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(0.3, 1.0);
  mldiag::recorder rec;
  rec.begin_step(0);
  std::vector<std::vector<double>> tensors;
  for (int e : {-600, -40, 0, 3, 90, 597, 598, 599, 600}) {  // the last four all count
    std::vector<double> x(1000 + static_cast<std::size_t>((e + 600) % 700));
    for (auto& v : x) v = std::ldexp(normal(rng), e);
    tensors.push_back(std::move(x));
  }
  tensors.push_back(std::vector<double>(17, 0.0));
  tensors.push_back({});
  tensors.push_back({4.9e-324});
  for (std::size_t i = 0; i < tensors.size(); ++i)
    rec.observe(mldiag::role::gradient, std::to_string(i), mldiag::compute_stats(std::span<const double>(tensors[i])));
  rec.end_step();
  // sum x^2 / 2^1200 in long double (its exponent reaches 2^16383), then the root times 2^600.
  long double sum = 0.0L;
  for (const auto& x : tensors)
    for (double v : x) sum += std::ldexp(static_cast<long double>(v), -600) * std::ldexp(static_cast<long double>(v), -600);
  const double want = static_cast<double>(std::ldexp(std::sqrt(sum), 600));
  const auto& snap = rec.past().back();
  CHECK(snap.global_grad_norm() == doctest::Approx(want).epsilon(1e-13));
  mldiag::tensor_stats merged;
  for (const auto& g : snap.gradients) merged.merge(g.stats);
  CHECK(snap.global_grad_norm() == doctest::Approx(mldiag::norm_of(merged)).epsilon(1e-13));

  SUBCASE("NaN anywhere is NaN, else Inf anywhere is Inf; no finite element is 0") {
    mldiag::recorder r;
    r.begin_step(1);
    const std::vector<float> inf = {1.0f, INFINITY}, nan = {NAN, 2.0f}, all_inf = {-INFINITY};
    r.observe(mldiag::role::gradient, "a", mldiag::compute_stats(std::span<const float>(inf)));
    r.end_step();
    CHECK(r.past().back().global_grad_norm() == INFINITY);
    r.begin_step(2);
    r.observe(mldiag::role::gradient, "a", mldiag::compute_stats(std::span<const float>(inf)));
    r.observe(mldiag::role::gradient, "b", mldiag::compute_stats(std::span<const float>(nan)));
    r.end_step();
    CHECK(std::isnan(*r.past().back().global_grad_norm()));
    r.begin_step(3);
    r.observe(mldiag::role::gradient, "c", mldiag::compute_stats(std::span<const float>()));
    r.end_step();
    CHECK(r.past().back().global_grad_norm() == 0.0);
    r.begin_step(4);
    r.observe(mldiag::role::gradient, "d", mldiag::compute_stats(std::span<const float>(all_inf)));
    r.end_step();
    CHECK(r.past().back().global_grad_norm() == INFINITY);
  }
}

TEST_CASE("misuse of the recorder is an mldiag error") {
  mldiag::recorder rec;
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::scalar::loss, 1.0), doctest::Contains("mldiag: recorder::observe: no step is open"), mldiag::error);
  rec.begin_step(5);
  CHECK_THROWS_WITH_AS(rec.begin_step(6), doctest::Contains("was not ended"), mldiag::error);
  rec.end_step();
  CHECK_THROWS_WITH_AS(rec.begin_step(5), doctest::Contains("does not come after step 5"), mldiag::error);
  rec.begin_step(6);
  const double bad[] = {1.0, -2.0};
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::router_load{"moe0", bad}), doctest::Contains("negative or not finite"), mldiag::error);
}

TEST_CASE("router load gives normalized entropy dead experts and max over mean") {
  mldiag::recorder rec;
  rec.begin_step(0);
  const double even[] = {5, 5, 5, 5}, skewed[] = {12, 4, 0, 0};
  rec.observe(mldiag::router_load{"even", even});
  rec.observe(mldiag::router_load{"skewed", skewed});
  const auto& s = rec.end_step();
  CHECK(s.routers[0].normalized_entropy == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(s.routers[0].max_over_mean == 1.0);
  CHECK(s.routers[1].dead == 2);
  // p = 0.75, 0.25: H = 0.562335 nats, / log 4
  CHECK(s.routers[1].normalized_entropy == doctest::Approx(0.5623351446 / std::log(4.0)).epsilon(1e-9));
  CHECK(s.routers[1].max_over_mean == 3.0);
}

TEST_CASE("router assignments are counted into the same load as the counts themselves") {
  // 16 tokens over 4 experts, counted by hand: expert 0 x12, expert 1 x4, experts 2 and 3 x0.
  const std::int64_t choice[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0};
  const std::uint8_t small[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0};
  mldiag::recorder rec;
  rec.begin_step(0);
  rec.observe(mldiag::router_assignments{"moe.int64", std::span<const std::int64_t>(choice), 4});
  rec.observe(mldiag::router_assignments{"moe.uint8", std::span<const std::uint8_t>(small), 4});
  rec.observe(mldiag::router_assignments{"moe.empty", std::span<const std::int64_t>(), 4});
  const auto& s = rec.end_step();
  REQUIRE(s.routers.size() == 3);
  for (int i = 0; i < 2; ++i) {
    CHECK(s.routers[static_cast<std::size_t>(i)].experts == 4);
    CHECK(s.routers[static_cast<std::size_t>(i)].total_load == 16.0);
    CHECK(s.routers[static_cast<std::size_t>(i)].dead == 2);
    CHECK(s.routers[static_cast<std::size_t>(i)].max_over_mean == 3.0);  // 12 / (16 / 4)
    // p = 0.75, 0.25: H = 0.562335 nats, / log 4
    CHECK(s.routers[static_cast<std::size_t>(i)].normalized_entropy == doctest::Approx(0.5623351446 / std::log(4.0)).epsilon(1e-9));
  }
  CHECK(s.routers[2].total_load == 0.0);
  CHECK(s.routers[2].dead == 4);
}

TEST_CASE("a router assignment outside the experts is an mldiag error") {
  mldiag::recorder rec;
  rec.begin_step(0);
  const std::int64_t negative[] = {0, -1, 2}, too_big[] = {0, 4}, fine[] = {3};
  const std::uint32_t unsigned_big[] = {7};
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::router_assignments{"moe", std::span<const std::int64_t>(negative), 4}),
                       doctest::Contains("mldiag: recorder::observe(router_assignments) 'moe': expert index -1 is outside [0, 4)"), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::router_assignments{"moe", std::span<const std::int64_t>(too_big), 4}),
                       doctest::Contains("expert index 4 is outside [0, 4)"), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::router_assignments{"moe", std::span<const std::uint32_t>(unsigned_big), 4}),
                       doctest::Contains("expert index 7 is outside"), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::router_assignments{"moe", std::span<const std::int64_t>(fine), 0}),
                       doctest::Contains("0 experts"), mldiag::error);
  rec.observe(mldiag::router_assignments{"moe", std::span<const std::int64_t>(fine), 4});
  const auto& s = rec.end_step();
  REQUIRE(s.routers.size() == 1);  // nothing recorded for the refused calls
  CHECK(s.routers[0].total_load == 1.0);
  CHECK(s.routers[0].dead == 3);
}

TEST_CASE("the diagnostic snapshot has the seed's keys and decides the trend by regression") {
  mldiag::recorder rec(1000);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::vector<float> g = {0.0f, 3.0f, 4.0f}, bad = {1.0f, INFINITY};
  for (int step = 0; step < 200; ++step) {
    rec.begin_step(step);
    // Decreasing on average, but the last point is above the first one: a two-point
    // comparison would say "increasing".
    double loss = 5.0 - 0.005 * step + noise(rng);
    if (step == 0) loss = 4.0;
    if (step == 199) loss = 4.5;
    rec.observe(mldiag::scalar::loss, loss);
    rec.observe(mldiag::role::gradient, "fc.weight", g);
    rec.observe(mldiag::role::gradient, "fc.bias", bad);
    rec.observe(mldiag::role::parameter, "fc.weight", g);
    rec.end_step();
  }
  const auto d = mldiag::diagnostic_snapshot(rec.past(), rec.names(), 200);
  CHECK(get<double>(d, "grad/fc.weight/norm") == 5.0);
  CHECK(get<bool>(d, "grad/fc.weight/has_nan") == false);
  CHECK(get<bool>(d, "grad/fc.bias/has_inf") == true);
  CHECK(get<double>(d, "param/fc.weight/norm") == 5.0);
  CHECK(get<std::string>(d, "loss/trend") == "decreasing");
  double sum = 0;
  for (std::size_t i = 0; i < rec.past().size(); ++i) sum += *rec.past()[i].loss;
  CHECK(get<double>(d, "loss/recent_mean") == doctest::Approx(sum / 200).epsilon(1e-12));
  // A flat noisy loss is not "decreasing".
  mldiag::recorder flat(100);
  for (int step = 0; step < 100; ++step) {
    flat.begin_step(step);
    flat.observe(mldiag::scalar::loss, 3.0 + noise(rng));
    flat.end_step();
  }
  CHECK(get<std::string>(mldiag::diagnostic_snapshot(flat.past(), flat.names()), "loss/trend") == "flat_or_increasing");
}

TEST_CASE("after warm-up a step allocates nothing") {
  mldiag::recorder rec(64);
  std::vector<float> g(1000, 0.5f);
  const double loads[] = {1, 2, 3, 4};
  auto step = [&](int i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, 1.0);
    rec.observe(mldiag::scalar::learning_rate, 1e-3);
    for (const char* name : {"a", "b", "c"}) rec.observe(mldiag::role::gradient, name, g);
    rec.observe(mldiag::router_load{"moe", loads});
    rec.end_step();
  };
  for (int i = 0; i < 100; ++i) step(i);  // warm-up: names interned, history slots grown
  const auto before = mldiag_test::allocations();
  for (int i = 100; i < 300; ++i) step(i);
  CHECK(mldiag_test::allocations() == before);
}

TEST_CASE("the step hook sees the finished snapshot and a hook that throws leaves the step closed") {
  mldiag::recorder rec(4);
  int calls = 0;
  rec.set_step_hook([&](mldiag::snapshot& s, mldiag::name_table& names) {
    ++calls;
    if (s.step == 1) throw mldiag::error("hook failed");
    s.loss = 2.0 * *s.loss;  // what the history keeps is what the hook left
    (void)names.intern("from the hook");
  });
  rec.begin_step(0);
  rec.observe(mldiag::scalar::loss, 1.5);
  CHECK(rec.end_step().loss == 3.0);
  CHECK(rec.past().back().loss == 3.0);
  CHECK(rec.names().size() == 1);
  rec.begin_step(1);
  CHECK_THROWS_WITH(rec.end_step(), doctest::Contains("hook failed"));
  CHECK(rec.past().size() == 1);  // the failed step did not join the history
  rec.begin_step(2);              // and the recorder is not stuck in it
  CHECK(rec.end_step().step == 2);
  CHECK(calls == 3);
  rec.set_step_hook({});
  rec.begin_step(3);
  (void)rec.end_step();
  CHECK(calls == 3);
}
