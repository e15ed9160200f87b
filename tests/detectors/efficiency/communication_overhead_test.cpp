// SPDX-License-Identifier: Apache-2.0
// communication_overhead: collectives that take a large share of the step, or a slow link.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/communication_overhead.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("communication_overhead: a large share of the step, or a link far below its bandwidth") {
  const auto timings = [](double comm, double total) {
    mldiag::step_timings t;
    t.communication = comm;
    t.total = total;
    return t;
  };
  det::communication_overhead healthy;
  CHECK(run_filled(healthy, 300, [&](int, auto& r, auto& rng) {
          r.observe(timings(gauss(rng, 0.005, 0.3), gauss(rng, 0.1, 0.02)));
          r.observe(mldiag::efficiency_evidence{.communication_bytes = 1e9, .link_bandwidth = 4e11});  // 1 GB in 5 ms: 2e11 B/s, half the link, share 5% < 10%
        }).empty());
  det::communication_overhead share;
  const auto f = run_filled(share, 100, [&](int step, auto& r, auto&) {
    r.observe(timings(step >= 40 ? 0.04 : 0.005, 0.1));
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].symptom == "communication overhead");
  CHECK(f[0].first_step == 40);
  CHECK(f[0].last_step == 49);
  CHECK(evidence(f[0], "communication_share") == doctest::Approx(0.4));  // 0.04 / 0.1
  CHECK(f[0].where.front().first == "communication");
  det::communication_overhead slow_link;
  const auto g = run_filled(slow_link, 100, [&](int, auto& r, auto&) {
    r.observe(timings(0.015, 0.1));  // share 0.15: under 0.25, over 0.1
    r.observe(mldiag::efficiency_evidence{.communication_bytes = 1e9, .link_bandwidth = 4e11});
  });
  REQUIRE(g.size() == 1);
  // 1e9 B / 0.015 s = 6.67e10 B/s, 1/6 of the link's 4e11
  CHECK(evidence(g[0], "achieved_bandwidth") == doctest::Approx(1e9 / 0.015));
  CHECK(evidence(g[0], "bandwidth_fraction") == doctest::Approx(1.0 / 6.0));
  det::communication_overhead untimed;  // bytes without a communication time: nothing
  CHECK(run_filled(untimed, 100, [&](int, auto& r, auto&) { r.observe(mldiag::efficiency_evidence{.communication_bytes = 1e9, .link_bandwidth = 4e11}); }).empty());
}
