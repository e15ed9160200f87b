// SPDX-License-Identifier: Apache-2.0
// initial_loss: the first loss against ln(classes).
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/initial_loss.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cmath>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("initial_loss compares the first loss with ln(classes)") {
  mldiag::detectors::initial_loss off;
  CHECK(run(off, 10, [](int, mldiag::recorder&, double& loss, double&) { loss = 50.0; }).empty());
  mldiag::detectors::initial_loss ok({10, 0.25});
  CHECK(run(ok, 10, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 0) loss = 2.35; }).empty());
  mldiag::detectors::initial_loss bad({10, 0.25});
  const auto f = run(bad, 10, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 0) loss = 9.0; });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 0);
  // Two classes: ln 2 = 0.69, and a freshly initialized model's first mini-batch sits within
  // 0.5 nats of it (the absolute line); 0.25 ln 2 = 0.17 alone would warn at 0.95.
  using C = mldiag::detectors::initial_loss::config;
  CHECK(mldiag::thresholds::near_chance(0.95, 2.0));
  CHECK(mldiag::thresholds::near_chance(0.25, 2.0));
  CHECK_FALSE(mldiag::thresholds::near_chance(1.25, 2.0));
  CHECK_FALSE(mldiag::detectors::initial_loss::near_chance(0.95, 2, C{.min_difference = 0.0}));
  // Ten classes: 0.25 ln 10 = 0.58 is the larger line.
  CHECK(mldiag::thresholds::near_chance(std::log(10.0) + 0.55, 10.0));
  CHECK_FALSE(mldiag::thresholds::near_chance(std::log(10.0) + 0.6, 10.0));
  mldiag::detectors::initial_loss two({2, 0.25});
  CHECK(run(two, 10, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 0) loss = 0.95; }).empty());
}
