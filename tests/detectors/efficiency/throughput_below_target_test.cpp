// SPDX-License-Identifier: Apache-2.0
// throughput_below_target: throughput below the user's target while the hardware is busy.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/throughput_below_target.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::evidence;
using mldiag::finding;
}  // namespace

TEST_CASE("throughput_below_target: info when the hardware is busy and the target is not met") {
  det::throughput_below_target healthy;
  CHECK(run_filled(healthy, 300, [](int, auto& r, auto& rng) {
          r.observe(mldiag::efficiency_evidence{.throughput = gauss(rng, 0.98e5, 0.02), .throughput_target = 1e5});
        }).empty());
  det::throughput_below_target d;
  const auto f = run_filled(d, 300, [](int, auto& r, auto&) {
    r.observe(mldiag::efficiency_evidence{.mfu = 0.52});
    r.observe(mldiag::efficiency_evidence{.throughput = 0.7e5, .throughput_target = 1e5});  // 70% of the target with MFU 52%: a memory-bound model
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].symptom == "throughput below target");
  CHECK(f[0].severity == mldiag::severity::info);
  CHECK(evidence(f[0], "throughput_fraction") == doctest::Approx(0.7));
  CHECK(evidence(f[0], "mfu") == 0.52);
  det::throughput_below_target low;  // MFU 25%: low_mfu's finding, not this one
  CHECK(run_filled(low, 300, [](int, auto& r, auto&) {
          r.observe(mldiag::efficiency_evidence{.mfu = 0.25});
          r.observe(mldiag::efficiency_evidence{.throughput = 0.7e5, .throughput_target = 1e5});
        }).empty());
}
