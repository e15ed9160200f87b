// SPDX-License-Identifier: Apache-2.0
// step_time_outliers: intermittent slow steps.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/step_time_outliers.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("step_time_outliers: intermittent slow steps are info and jitter is not") {
  const auto total = [](double s) {
    mldiag::step_timings t;
    t.total = s;
    return t;
  };
  det::step_time_outliers healthy;
  CHECK(run_filled(healthy, 1500, [&](int step, auto& r, auto& rng) {
          r.observe(total(gauss(rng, 0.1, 0.03) * (step % 50 == 7 ? 1.3 : 1.0)));  // 1.3x hiccups
        }).empty());
  det::step_time_outliers d;
  const auto f = run_filled(d, 400, [&](int step, auto& r, auto& rng) {
    r.observe(total(step >= 100 && step % 40 == 20 ? 0.3 : gauss(rng, 0.1, 0.02)));  // 3x every 40 steps
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].symptom == "step-time outliers");
  CHECK(f[0].severity == mldiag::severity::info);
  CHECK(f[0].first_step == 100);  // outliers at 100, 140 and 180
  CHECK(f[0].last_step == 180);
  CHECK(evidence(f[0], "outliers_in_window") == 3);
  CHECK(evidence(f[0], "worst_ratio_to_median") == doctest::Approx(3.0).epsilon(0.05));
}
