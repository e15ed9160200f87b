// SPDX-License-Identifier: Apache-2.0
// embedding_growth: embedding norms growing without bound, not settling.
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/embedding_growth.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::filled;
using mldiag::finding;
using mldiag::role;
}  // namespace

TEST_CASE("embedding_growth: a steady embedding is quiet, one growing 1% a step is found when the window fills") {
  std::vector<float> emb(256, 0.01f);
  mldiag::detectors::embedding_growth e;
  CHECK(run(e, 400, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::parameter, "tok_embed", emb); }).empty());
  mldiag::detectors::embedding_growth e2;
  const auto f = run(e2, 400, [&](int step, mldiag::recorder& r, double&, double&) {
    for (auto& v : emb) v = 0.01f * static_cast<float>(1.0 + 0.01 * step);  // +1% per step
    r.observe(mldiag::role::parameter, "tok_embed", emb);
  });
  // The onset at info (an early signal waiting for a consequence), then, still growing 100
  // observations later with no consequence seen, a warning by persistence.
  REQUIRE(f.size() == 2);
  CHECK(f[0].first_step == 199);  // the first full window: 3x growth
  CHECK(f[0].severity == mldiag::severity::info);
  CHECK(f[0].awaits_consequence);
  CHECK(f[1].last_step == 298);
  CHECK(f[1].first_step == 199);
  CHECK(f[1].severity == mldiag::severity::warning);
  CHECK(f[1].why.starts_with("held 100 of 100 observations"));
}

TEST_CASE("embedding_growth: a small initialization settling at its scale is not growth without bound") {
  const auto run = [](mldiag::detectors::embedding_growth d, const std::function<double(int)>& norm) {
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 400; ++step) {
      rec.begin_step(step);
      // A tensor of 100 equal elements has the norm 10 |v|.
      rec.observe(role::parameter, "embed.weight", filled(100, static_cast<float>(norm(step) / 10.0)));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  // word2vec's input vectors (the zoo, round 5): 0.62 -> ~26 as the loss falls, then settled.
  const auto settling = [](int t) { return 0.62 + 25.0 * (1.0 - std::exp(-t / 40.0)); };
  CHECK(run({}, settling).empty());
  // Growth without bound keeps its pace: linear, 0.4% of the start per step; and an Adam random
  // walk at 100x the learning rate from step 100 (norm^2 grows linearly: 70 -> 142 in 100 steps).
  const auto linear = run({}, [](int t) { return 10.0 * (1.0 + 0.004 * t); });
  REQUIRE(linear.size() == 2);  // its onset, and its persistence 100 observations on
  CHECK(linear[0].last_step == 199);
  CHECK(linear[1].last_step == 298);
  const auto walk = run({}, [](int t) { return std::sqrt(4900.0 + 152.0 * std::max(0, t - 100)); });
  REQUIRE(!walk.empty());
  CHECK(walk[0].last_step == 199);
  // The twin: without the pace line the settling tensor is reported when the window fills.
  mldiag::detectors::embedding_growth::config no_pace;
  no_pace.min_pace_kept = 0.0;
  CHECK(run(mldiag::detectors::embedding_growth(no_pace), settling).size() == 1);
}
