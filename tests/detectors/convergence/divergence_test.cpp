// SPDX-License-Identifier: Apache-2.0
// divergence: a missing loss, a sustained climb, a loss scale halving step after step.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/divergence.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cmath>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag::finding;
}  // namespace

TEST_CASE("divergence fires on a missing loss a steady climb and a halving loss scale") {
  mldiag::detectors::divergence d;
  CHECK(run(d, 300, healthy).empty());
  // Missing loss: a step without one after steps with one.
  mldiag::recorder rec(8);
  std::vector<mldiag::finding> out;
  mldiag::detectors::divergence m;
  for (int step = 0; step < 5; ++step) {
    rec.begin_step(step);
    rec.observe(mldiag::scalar::learning_rate, 1e-3);  // the step logged its other values (a Megatron line without "lm loss")
    if (step != 3) rec.observe(mldiag::scalar::loss, 1.0);
    m.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out.front().symptom == "missing loss value");
  CHECK(out.front().first_step == 3);
  // A climb: +15% per step from step 200.
  mldiag::detectors::divergence c;
  const auto f = run(c, 260, [](int step, mldiag::recorder&, double& loss, double&) {
    if (step >= 200) loss *= std::pow(1.15, step - 199);
  });
  REQUIRE(!f.empty());
  CHECK(f.front().symptom == "sustained loss increase");
  CHECK(f.front().first_step == 202);  // three rises, all 10% above the baseline, 30% in all
  // The loss scale halving four times in a row from step 100.
  mldiag::detectors::divergence s;
  const auto h = run(s, 200, [](int step, mldiag::recorder& r, double&, double&) {
    if (step >= 100 && step < 104) r.observe(mldiag::scalar::loss_scale, 65536.0 / std::pow(2.0, step - 99));
    else if (step >= 104) r.observe(mldiag::scalar::loss_scale, 4096.0);
  });
  REQUIRE(!h.empty());
  CHECK(h.front().symptom == "loss scale halving step after step");
  CHECK(h.front().first_step == 102);  // the third halving
}

TEST_CASE("divergence: a climb is not two 2% rises and one outlier batch") {
  mldiag::detectors::divergence d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  const double losses[] = {0.010, 0.006, 0.008, 0.005, 0.009, 0.007, 0.006, 0.0074, 0.0077, 0.256};
  for (int i = 0; i < 10; ++i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, losses[i]);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
  // A climb (BigScience 104B experiment 2) is still found.
  mldiag::detectors::divergence c;
  const double climb[] = {6.3, 6.4, 6.35, 6.37, 6.6, 7.31, 9.12, 10.24};
  for (int i = 0; i < 8; ++i) {
    rec.begin_step(100 + i);
    rec.observe(mldiag::scalar::loss, climb[i]);
    c.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(!out.empty());
  CHECK(out[0].symptom == "sustained loss increase");
}

namespace {

// Gradients never zeroed (LibTorch's MNIST example without zero_grad()): the loss falls to 0.3
// by step 200, then climbs steadily toward 84 by step 2000. The losses, and the findings.
std::vector<double> runaway_losses() {
  std::vector<double> l;
  for (int step = 0; step < 2000; ++step)
    l.push_back(step < 200 ? 0.3 + 2.0 * (1.0 - step / 200.0) : 0.3 + (84.0 - 0.3) * (step - 200) / 1800.0);
  return l;
}

std::vector<mldiag::finding> far_above_best(const std::vector<double>& losses) {
  mldiag::detectors::divergence d;
  mldiag::recorder rec(8);
  std::vector<mldiag::finding> out, kept;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, losses[i]);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  for (const auto& f : out)
    if (f.symptom == mldiag::symptoms::loss_far_above_best) kept.push_back(f);
  return kept;
}

// The first step at which the mean of the last 20 reaches `factor` times the lowest such mean so
// far, in long double: the rule computed independently of the detector's windows.
long first_at(const std::vector<double>& l, long double factor) {
  long double best = 1e300L;
  for (std::size_t i = 19; i < l.size(); ++i) {
    long double sum = 0;
    for (std::size_t j = i - 19; j <= i; ++j) sum += l[j];
    const long double mean = sum / 20;
    best = std::min(best, mean);
    if (mean >= factor * best && mean - best >= 0.25L) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("divergence: a loss that runs away from its best is reported when it starts and once more when critical") {
  const auto losses = runaway_losses();
  const auto f = far_above_best(losses);
  REQUIRE(f.size() == 2);
  CHECK(f[0].severity == mldiag::severity::warning);
  CHECK(f[0].first_step == first_at(losses, 4.0L));
  CHECK(f[1].severity == mldiag::severity::critical);
  CHECK(f[1].first_step == first_at(losses, 10.0L));
  CHECK(mldiag_test::evidence(f[1], "ratio_to_best") >= 10.0);
}

TEST_CASE("divergence: twin — a healthy loss with a hard stretch at twice its level is not far above its best") {
  std::vector<double> losses;
  for (int step = 0; step < 1500; ++step) {
    double l = 0.4 + 2.0 * std::exp(-step / 150.0) + 0.05 * std::sin(step * 1.7);
    if (step >= 900 && step < 960) l *= 2.0;  // a stretch of hard batches, then back
    losses.push_back(l);
  }
  CHECK(far_above_best(losses).empty());
  // Declared not a progress measure, even the runaway is not judged from the loss.
  mldiag::detectors::divergence d({.loss_is_progress = false});
  mldiag::recorder rec(8);
  std::vector<mldiag::finding> out;
  const auto runaway = runaway_losses();
  for (std::size_t i = 0; i < runaway.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, runaway[i]);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
}
