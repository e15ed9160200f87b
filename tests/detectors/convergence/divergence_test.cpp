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
