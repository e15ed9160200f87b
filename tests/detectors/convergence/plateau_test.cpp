// SPDX-License-Identifier: Apache-2.0
// plateau: a loss that fell and then stalled.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/plateau.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cmath>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("plateau reports once when a learning run stalls") {
  mldiag::detectors::plateau d({200, 0.05, 0.005, 2.0});
  const auto f = run(d, 3000, [](int step, mldiag::recorder&, double& loss, double&) {
    loss = step < 1000 ? 5.0 - 0.003 * step : 2.0 + 0.001 * std::sin(step);
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().severity == mldiag::severity::info);
  CHECK(f.front().first_step >= 1000);
  CHECK(f.front().first_step <= 1300);
}

TEST_CASE("plateau stays silent while the loss keeps decreasing") {
  mldiag::detectors::plateau d({200, 0.05, 0.005, 2.0});
  CHECK(run(d, 3000, [](int step, mldiag::recorder&, double& loss, double&) { loss = 6.0 - 0.001 * step; }).empty());
}
