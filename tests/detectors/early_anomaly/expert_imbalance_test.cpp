// SPDX-License-Identifier: Apache-2.0
// expert_imbalance: a router that collapses, starves or overloads its experts, after its warm-up.
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/expert_imbalance.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <span>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("expert_imbalance: a skewed router held ten steps, a dead expert held fifty, the busiest expert as info") {
  mldiag::detectors::expert_imbalance m;
  const double even[] = {10, 11, 9, 10}, skew[] = {37, 1, 1, 1};
  const auto g = run(m, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step >= 62 ? std::span<const double>(skew) : std::span<const double>(even)});
  });
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 62);
  CHECK(g.front().last_step == 71);  // ten steps in a row
  mldiag::detectors::expert_imbalance blip;  // nine skewed steps in a row: a fluctuation
  CHECK(run(blip, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step >= 62 && step < 71 ? std::span<const double>(skew) : std::span<const double>(even)});
  }).empty());
  // A router imbalanced at initialization that the balancing loss evens out within the
  // warm-up (50 observations) is not an anomaly; one that stays imbalanced is found when the
  // warm-up ends.
  mldiag::detectors::expert_imbalance init_skew;
  CHECK(run(init_skew, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step < 40 ? std::span<const double>(skew) : std::span<const double>(even)});
  }).empty());
  mldiag::detectors::expert_imbalance stuck;
  const auto k = run(stuck, 100, [&](int, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", std::span<const double>(skew)});
  });
  REQUIRE(k.size() == 1);
  CHECK(k.front().first_step == 50);
  CHECK(k.front().last_step == 59);
  // An expert empty for 30 steps after the warm-up that revives is not yet an anomaly; one
  // empty for 50 steps is (rule 2): an early signal, info until a consequence follows (the
  // monitor escalates it then; tests/detectors/consequence_test.cpp). A busiest expert at 2.5x the mean, with the
  // entropy at 0.78, is info: the monitor does not know whether the layer drops tokens.
  // Hand-derived: {60, 50, 50, 0} has normalized entropy 0.79 and max/mean 1.5;
  // {100, 20, 20, 20} has 0.78 and 2.5.
  const double balanced[] = {40, 44, 36, 40}, one_dead[] = {60, 50, 50, 0}, busiest[] = {100, 20, 20, 20};
  mldiag::detectors::expert_imbalance revived;
  CHECK(run(revived, 200, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step >= 60 && step < 90 ? std::span<const double>(one_dead) : std::span<const double>(balanced)});
  }).empty());
  mldiag::detectors::expert_imbalance stays_dead;
  const auto sd = run(stays_dead, 200, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step >= 60 ? std::span<const double>(one_dead) : std::span<const double>(balanced)});
  });
  REQUIRE(sd.size() == 1);
  CHECK(sd.front().severity == mldiag::severity::info);
  CHECK(sd.front().awaits_consequence);
  CHECK(sd.front().first_step == 60);
  CHECK(sd.front().last_step == 109);
  mldiag::detectors::expert_imbalance busy;
  const auto bz = run(busy, 200, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::router_load{"moe.0", step >= 60 ? std::span<const double>(busiest) : std::span<const double>(balanced)});
  });
  REQUIRE(bz.size() == 1);
  CHECK(bz.front().severity == mldiag::severity::info);
  CHECK(bz.front().first_step == 60);
}
