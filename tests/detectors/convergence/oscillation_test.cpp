// SPDX-License-Identifier: Apache-2.0
// oscillation: a loss that zigzags with a large amplitude.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/oscillation.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
}  // namespace

TEST_CASE("oscillation fires on a zigzag of large amplitude and not on noise") {
  mldiag::detectors::oscillation d;
  CHECK(run(d, 500, healthy).empty());
  mldiag::detectors::oscillation z;
  const auto f = run(z, 500, [](int step, mldiag::recorder&, double& loss, double&) { if (step >= 300) loss *= (step % 2 ? 1.4 : 0.7); });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step >= 300);
  CHECK(f.front().first_step <= 400);
}
