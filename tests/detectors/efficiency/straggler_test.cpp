// SPDX-License-Identifier: Apache-2.0
// straggler: one rank consistently slower than the others.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/straggler.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <vector>

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("straggler: one rank consistently slower than the median rank is named") {
  det::straggler healthy;
  CHECK(run_filled(healthy, 500, [](int, auto& r, auto& rng) {
          std::vector<double> t(8);
          for (auto& x : t)
            x = gauss(rng, 0.1, 0.02);
          r.observe(mldiag::rank_step_times{t});
        }).empty());
  det::straggler d;
  const auto f = run_filled(d, 200, [](int step, auto& r, auto& rng) {
    std::vector<double> t(8);
    for (auto& x : t)
      x = gauss(rng, 0.1, 0.01);
    if (step >= 50) t[5] = 0.13;  // 30% slower
    r.observe(mldiag::rank_step_times{t});
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].first_step == 50);
  CHECK(f[0].last_step == 69);
  CHECK(f[0].where.front().first == "rank 5");
  CHECK(evidence(f[0], "rank") == 5);
  CHECK(evidence(f[0], "ratio_to_median_rank") == doctest::Approx(1.3).epsilon(0.05));
  det::straggler rotating;  // a different rank slow each step: no straggler
  CHECK(run_filled(rotating, 200, [](int step, auto& r, auto&) {
          std::vector<double> t(4, 0.1);
          t[static_cast<std::size_t>(step % 4)] = 0.14;
          r.observe(mldiag::rank_step_times{t});
        }).empty());
}
