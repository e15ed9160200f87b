// SPDX-License-Identifier: Apache-2.0
// low_mfu: model FLOPs utilization in the method's low bands.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/low_mfu.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <algorithm>

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("low_mfu: below 20% a warning, 20-40% info, above quiet, and TCA when MFU is absent") {
  det::low_mfu healthy;
  CHECK(run_filled(healthy, 300, [](int, auto& r, auto& rng) {
          r.observe(mldiag::efficiency_evidence{.mfu = std::min(1.0, gauss(rng, 0.48, 0.05))});
        }).empty());
  det::low_mfu d;
  const auto f = run_filled(d, 300, [](int, auto& r, auto& rng) { r.observe(mldiag::efficiency_evidence{.mfu = gauss(rng, 0.12, 0.05)}); });
  REQUIRE(f.size() == 1);  // an onset, reported once
  CHECK(f[0].symptom == "low MFU");
  CHECK(f[0].severity == mldiag::severity::warning);
  CHECK(f[0].last_step == 29);  // 20 warm-up steps, then 10 in the band
  CHECK(f[0].first_step == 20);
  CHECK(evidence(f[0], "band_high") == 0.2);
  CHECK(evidence(f[0], "mfu") == doctest::Approx(0.12).epsilon(0.2));
  det::low_mfu mid;
  const auto g =
      run_filled(mid, 300, [](int, auto& r, auto& rng) { r.observe(mldiag::efficiency_evidence{.mfu = gauss(rng, 0.3, 0.03)}); });
  REQUIRE(g.size() == 1);
  CHECK(g[0].severity == mldiag::severity::info);
  CHECK(evidence(g[0], "band_low") == 0.2);
  CHECK(evidence(g[0], "band_high") == 0.4);
  det::low_mfu tca;
  const auto h = run_filled(tca, 100, [](int, auto& r, auto&) { r.observe(mldiag::efficiency_evidence{.tensor_core_activity = 0.1}); });
  REQUIRE(h.size() == 1);
  CHECK(evidence(h[0], "tensor_core_activity") == 0.1);
  det::low_mfu none;  // no efficiency evidence: nothing to say
  CHECK(run_filled(none, 100, [](int, auto& r, auto&) { r.observe(mldiag::scalar::loss, 1.0); }).empty());
}
