// SPDX-License-Identifier: Apache-2.0
// chance_level: a classifier's loss still at ln(classes) after the warm-up.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/chance_level.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <cmath>
#include <random>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag_test::run_monitor;
}  // namespace

TEST_CASE("chance_level fires when a classifier's loss stays at ln(classes) after the warm-up") {
  mldiag::detectors::chance_level off;
  CHECK(run(off, 100, [](int, mldiag::recorder&, double& loss, double&) { loss = std::log(10.0); }).empty());
  mldiag::detectors::chance_level learning({10, 50, 20, 0.1});
  // The healthy synthetic loss starts at 5.0 and is near 4.4 over steps 30-49: above
  // 0.9 ln 100 = 4.14, so a 100-class task would still be at chance there (one onset).
  mldiag::detectors::chance_level c100({100, 50, 20, 0.1});
  CHECK(run(c100, 300, healthy).size() == 1);
  CHECK(run(learning, 300, [](int step, mldiag::recorder&, double& loss, double&) { loss = 2.3 * std::exp(-step / 20.0); }).empty());
  mldiag::detectors::chance_level stuck({10, 50, 20, 0.1});
  const auto f = run(stuck, 300, [](int, mldiag::recorder&, double& loss, double&) { loss = std::log(10.0) * 0.95; });
  REQUIRE(f.size() == 1);  // an onset, reported once
  CHECK(f.front().first_step == 49);  // the end of the warm-up
  CHECK(f.front().question == mldiag::question::convergence);
}

TEST_CASE("chance_level waits for a slow starter and still finds a run that never learns") {
  auto run = [](int learns_from) {
    mldiag::monitor mon({.task = {.classes = 10}});
    std::mt19937_64 rng(5);
    std::normal_distribution<double> noise(0.0, 0.03);
    return run_monitor(mon, 400, [&](int i, mldiag::monitor& m) {
      const double chance = std::log(10.0);
      const double loss = i < learns_from ? chance : chance * std::exp(-(i - learns_from) / 80.0) + 0.1;
      m.observe(mldiag::scalar::loss, loss + noise(rng));
    }).named("loss stuck at chance level");
  };
  CHECK(run(110).empty());  // LibTorch's MNIST recipe starts learning near step 100
  const auto stuck = run(100000);
  REQUIRE(stuck.size() == 1);
  CHECK(stuck[0].first_step == 199);
}
