// SPDX-License-Identifier: Apache-2.0
// layer_dominates: one layer that takes most of the step, read from the layer timings.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/layer_dominates.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <string>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("layer_dominates reads the layer timings and names the slow layer and refuses a negative time is refused") {
  mldiag::detectors::layer_dominates even;
  CHECK(run(even, 100, [](int step, mldiag::recorder& r, double&, double&) {
    for (int l = 0; l < 4; ++l) r.observe(mldiag::layer_timing{"layers." + std::to_string(l), 0.001 * (1 + (step + l) % 3)});
  }).empty());
  mldiag::detectors::layer_dominates slow;
  const auto g = run(slow, 100, [](int step, mldiag::recorder& r, double&, double&) {
    for (int l = 0; l < 4; ++l) r.observe(mldiag::layer_timing{"layers." + std::to_string(l), l == 2 && step >= 60 ? 0.02 : 0.001});
  });
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 60);
  CHECK(g.front().where.front().first == "layers.2");
  CHECK(g.front().evidence.front().second == doctest::Approx(0.02 / 0.023));
  mldiag::recorder rec;
  rec.begin_step(0);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::layer_timing{"layers.0", -1.0}), doctest::Contains("mldiag: recorder::observe(layer_timing) 'layers.0'"),
                       mldiag::error);
}
