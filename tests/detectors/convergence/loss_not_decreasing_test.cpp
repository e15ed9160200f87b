// SPDX-License-Identifier: Apache-2.0
// loss_not_decreasing: a loss that has not come down since the start, reported once.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/loss_not_decreasing.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cmath>
#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag::finding;
}  // namespace

TEST_CASE("loss_not_decreasing fires on a flat loss and not on a learning run") {
  mldiag::detectors::loss_not_decreasing d;
  CHECK(run(d, 600, healthy).empty());
  mldiag::detectors::loss_not_decreasing flat;
  const auto f = run(flat, 600, [](int step, mldiag::recorder&, double& loss, double&) { loss = 2.3 + 0.01 * std::sin(step); });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 199);  // the end of the warm-up
  // A loss whose improvement hovers around the 5% line (a zoo autoencoder's sat at 2.5-4.6%
  // for 400 steps and was delivered 9 times) is one finding, and a real recovery (20%) is not
  // re-reported; the edge alone delivered once per crossing.
  const auto hover = [](int step, mldiag::recorder&, double& loss, double&) {
    // Batch noise around 5% below the start (a deterministic hash in [-0.01, 0.01)), then 20%.
    const double h = std::sin(step * 12.9898) * 43758.5453;
    loss = step < 10 ? 1.0 : step < 700 ? 0.95 + 0.02 * (h - std::floor(h) - 0.5) : 0.8;
  };
  mldiag::detectors::loss_not_decreasing hovering;
  const auto h = run(hovering, 1000, hover);
  REQUIRE(h.size() == 1);
  CHECK(h.front().first_step >= 199);
  // The test can fail: a detector that re-reports on each crossing finds this loss several times.
  std::size_t crossings = 0;
  {
    std::vector<double> l;
    bool below = false;
    double dummy = 0.0;
    mldiag::recorder r(4);
    for (int i = 0; i < 1000; ++i) {
      double loss = 0.0;
      hover(i, r, loss, dummy);
      l.push_back(loss);
      if (i < 199 || l.size() < 100) continue;
      double first = 0.0, recent = 0.0;
      for (int k = 0; k < 10; ++k) first += l[static_cast<std::size_t>(k)] / 10.0;
      for (std::size_t k = l.size() - 100; k < l.size(); ++k) recent += l[k] / 100.0;
      const bool now = (first - recent) / first < 0.05;
      crossings += now && !below ? 1u : 0u;
      below = now;
    }
  }
  CHECK(crossings > 1);
}
