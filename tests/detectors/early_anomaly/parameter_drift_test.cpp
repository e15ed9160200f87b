// SPDX-License-Identifier: Apache-2.0
// parameter_drift: parameters as far from their initialization as their own norm, with the drift
// tracker that measures it (exact and sketched).
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/parameter_drift.hpp"
#include "mldiag/evidence/drift.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <random>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("parameter_drift with the drift tracker: found when theta has moved its own norm") {
  // Drift: exact and sketched agree (within the sketch's few percent) and the detector fires
  // when theta has moved its own norm.
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n01;
  std::vector<float> theta0(20000), theta(20000);
  for (auto& v : theta0) v = n01(rng);
  mldiag::drift_tracker exact(mldiag::drift_tracker::mode::exact), sketch(mldiag::drift_tracker::mode::sketch, 4096);
  exact.start("w", theta0);
  sketch.start("w", theta0);
  mldiag::detectors::parameter_drift p;
  std::vector<double> drifts;
  const auto g = run(p, 30, [&](int step, mldiag::recorder& r, double&, double&) {
    for (std::size_t i = 0; i < theta.size(); ++i) theta[i] = theta0[i] * (1.0f + 0.1f * static_cast<float>(step));
    const double d = exact.observe("w", theta);
    drifts.push_back(d);
    CHECK(sketch.observe("w", theta) == doctest::Approx(d).epsilon(0.1));
    r.observe(mldiag::parameter_drift_of{"w", d});
  });
  CHECK(drifts[5] == doctest::Approx(0.5).epsilon(1e-6));  // theta = 1.5 theta0
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 11);  // drift 1.1 > 1
  CHECK_THROWS_WITH_AS((void)exact.observe("v", theta), doctest::Contains("no start() for this name"), mldiag::error);
}
