// SPDX-License-Identifier: Apache-2.0
// configured_lr: a learning rate above the peak the task states (the monitor's side of it, the
// peak given through `task::learning_rate`, is in monitor_integration_test.cpp).
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/configured_lr.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <string>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("configured_lr: a rate above twice its peak is an onset, a schedule below it and an unknown peak are quiet") {
  // A warm-up to the peak 1e-3 and a decay: never above it.
  const auto schedule = [](int step) { return step < 20 ? 1e-3 * (step + 1) / 20.0 : 1e-3 * 100.0 / (80.0 + step); };
  mldiag::detectors::configured_lr within({.peak = 1e-3});
  CHECK(run(within, 100, [&](int step, mldiag::recorder& r, double&, double&) {
          r.observe(mldiag::scalar::learning_rate, schedule(step));
        }).empty());
  // No peak given: the detector cannot judge, whatever the rate.
  mldiag::detectors::configured_lr unknown;
  CHECK(run(unknown, 50, [](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, 1.0); }).empty());
  // The schedule multiplied by 10 from step 40 (a learning rate scaled twice), back at 60, and
  // again from 80: two onsets.
  mldiag::detectors::configured_lr twice({.peak = 1e-3});
  const auto f = run(twice, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    const bool scaled = (step >= 40 && step < 60) || step >= 80;
    r.observe(mldiag::scalar::learning_rate, schedule(step) * (scaled ? 10.0 : 1.0));
  });
  REQUIRE(f.size() == 2);
  CHECK(f[0].symptom == mldiag::symptoms::lr_above_configured_peak);
  CHECK(f[0].first_step == 40);
  CHECK(f[1].first_step == 80);
  // Held from its first step (horizon 1): a warning, and the reason says so.
  CHECK(f[0].severity == mldiag::severity::warning);
  CHECK(f[0].why.find("held 1 of 1") != std::string::npos);
  CHECK(mldiag_test::evidence(f[0], "factor") == doctest::Approx(schedule(40) * 10.0 / 1e-3));
  CHECK(mldiag_test::evidence(f[0], "configured_peak") == 1e-3);
  // At exactly max_factor times the peak: not above it.
  mldiag::detectors::configured_lr at_line({.peak = 1e-3, .max_factor = 2.0});
  CHECK(run(at_line, 10, [](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, 2e-3); }).empty());
}
