// SPDX-License-Identifier: Apache-2.0
// loss_spike: a loss far above its robust running baseline, and not batch noise.
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/loss_spike.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <random>
#include <utility>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag_test::replay_series;
using mldiag::finding;
using mldiag::severity;
}  // namespace

TEST_CASE("loss_spike fires on a sustained 2x loss and not on single-step outliers") {
  mldiag::detectors::loss_spike d;
  CHECK(run(d, 400, healthy).empty());
  mldiag::detectors::loss_spike d2;
  CHECK(run(d2, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step % 97 == 50) loss *= 1.9; }).empty());
  mldiag::detectors::loss_spike d3;
  const auto f = run(d3, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step >= 300 && step < 330) loss *= 2.0; });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 300);  // the run began at 300; reported at 301 (sustain 2)
  CHECK(f.front().last_step == 301);
  CHECK(f.front().question == mldiag::question::early_anomaly);
  // The method's rule (10x the moving average) ignores a 2x spike and catches a 12x one.
  auto rule = mldiag::detectors::loss_spike::method_rule();
  CHECK(run(rule, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step >= 300) loss *= 2.0; }).empty());
  auto rule2 = mldiag::detectors::loss_spike::method_rule();
  const auto g = run(rule2, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 350) loss *= 12.0; });
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 350);
}

TEST_CASE("loss_spike: small noisy batches do not spike, a real spike and a 10^8x jump do") {
  // Batch-64 losses late in training: median ~0.1, heavy right tail.
  std::mt19937_64 rng(11);
  std::gamma_distribution<double> batch(1.5, 0.07);
  mldiag::detectors::loss_spike d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (int i = 0; i < 5000; ++i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, batch(rng));
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
  out.clear();
  // Seven epoch lines, the last one 10^8x: critical at once, no second observation needed.
  mldiag::detectors::loss_spike e;
  for (int i = 0; i < 7; ++i) {
    rec.begin_step(10000 + i);
    rec.observe(mldiag::scalar::loss, i < 6 ? 1.0 - 0.05 * i : 1e8);
    e.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].severity == severity::critical);
  CHECK(out[0].first_step == 10006);
}

TEST_CASE("loss_spike: one hard batch of 8 is not critical at once, a loss that stays up is") {
  // Batch-8 losses late in training (median ~0.14, gamma-shaped: the largest of 50 near 0.5),
  // then one batch with a confidently wrong row: 1.8, 13x the median, about 3x the window's
  // largest. Then the twin: the same value held.
  const auto run = [](int held) {
    std::mt19937_64 rng(5);
    std::gamma_distribution<double> batch(2.0, 0.07);
    mldiag::detectors::loss_spike d;
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int i = 0; i < 300; ++i) {
      rec.begin_step(i);
      rec.observe(mldiag::scalar::loss, i >= 200 && i < 200 + held ? 1.8 : batch(rng));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run(1).empty());
  const auto held = run(2);
  REQUIRE(held.size() == 1);
  CHECK(held[0].first_step == 200);
  CHECK(held[0].last_step == 201);
  CHECK(held[0].severity == severity::critical);
}

TEST_CASE("loss_spike: a baseline of fewer than five losses judges only the unmistakable") {
  // The first 40 losses of a healthy zoo run (held-out round 7: a Gaussian NLL, RMSprop,
  // batch 8): 0.45, 0.49, then 0.76, 0.78 — 1.6x a median of two, warned at step 3 before.
  const std::vector<double> recorded = {
      0.4536, 0.485,  0.757,  0.7786,   0.13,    0.3463, 0.2881,  0.3508,   0.1103,  0.3843,
      0.3034, 0.07155, 0.2475, 0.2384,  0.06126, 0.3267, -0.03542, 0.5418,  0.2357,  0.2951,
      0.3128, 0.2069, 0.1771, -0.05666, 0.6273,  0.1959, 0.3808,  0.2614,   0.3033,  0.3576,
      0.06355, 0.4503, 0.03501, 0.2908, 0.5792,  0.1569, 0.09012, 0.6629,   0.2499,  0.2037};
  const auto spikes = [](const std::vector<double>& losses) {
    std::vector<std::pair<double, double>> series;
    for (const double l : losses) series.emplace_back(l, 1.0);
    return replay_series(series, mldiag::detectors::loss_spike{});
  };
  CHECK(spikes(recorded).empty());
  // The twins: the same sustained rise once five losses are known is a spike (1.2 and 1.3
  // against a median near 0.45, far out of its noise), and a 100x loss is critical at once
  // even on a baseline of two.
  std::vector<double> later = {0.45, 0.47, 0.44, 0.46, 0.45, 0.46, 1.2, 1.3};
  const auto s = spikes(later);
  REQUIRE(s.size() == 1);
  CHECK(s[0].first_step == 6);
  CHECK(s[0].last_step == 7);
  const auto early = spikes({0.45, 0.47, 1.2, 1.3, 0.46});
  CHECK(early.empty());
  const auto huge = spikes({0.45, 0.47, 50.0});
  REQUIRE(huge.size() == 1);
  CHECK(huge[0].severity == severity::critical);
  CHECK(huge[0].last_step == 2);
}
