// SPDX-License-Identifier: Apache-2.0
// input_scale: inputs that are not normalized, found at the first step.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/input_scale.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace {
using mldiag_test::healthy;
using mldiag_test::run_monitor;
using mldiag::role;
using mldiag::severity;
}  // namespace

TEST_CASE("input_scale: raw 0-255 pixels are found at step 0, standardized features are not") {
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int> pixel(0, 255);
  std::normal_distribution<double> z;
  std::vector<float> raw(32 * 784), standard(32 * 30);
  long double sq = 0.0L;
  for (auto& v : raw) {
    v = static_cast<float>(pixel(rng));
    sq += static_cast<long double>(v) * v;
  }
  const double reference_rms = static_cast<double>(std::sqrt(sq / static_cast<long double>(raw.size())));
  for (auto& v : standard) v = static_cast<float>(z(rng));
  for (std::size_t i = 0; i < standard.size(); i += 97) standard[i] = 25.0f;  // heavy tails of a real table

  mldiag::monitor faulty;
  const auto f = run_monitor(faulty, 3, [&](int, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 2.3);
    m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(raw)));
  });
  const auto found = f.named("inputs not normalized");
  REQUIRE(found.size() == 1);  // once per onset
  CHECK(found[0].first_step == 0);
  CHECK(found[0].severity == severity::warning);
  REQUIRE(!found[0].where.empty());
  CHECK(found[0].where[0].first == "input/x");
  CHECK(found[0].where[0].second == doctest::Approx(reference_rms).epsilon(1e-9));

  // Inputs recorded every 4th step are one onset, not one per recording.
  mldiag::monitor sparse;
  const auto e = run_monitor(sparse, 12, [&](int i, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 2.3);
    if (i % 4 == 0) m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(raw)));
  });
  CHECK(e.named("inputs not normalized").size() == 1);

  mldiag::monitor healthy;
  const auto h = run_monitor(healthy, 3, [&](int, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 2.3);
    m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(standard)));
  });
  CHECK(h.named("inputs not normalized").empty());
  CHECK_THROWS_WITH_AS(mldiag::detectors::input_scale({.max_rms = 0.0}), doctest::Contains("mldiag: input_scale: max_rms"),
                       mldiag::error);
}
