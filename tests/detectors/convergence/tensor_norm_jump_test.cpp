// SPDX-License-Identifier: Apache-2.0
// tensor_norm_jump: one tensor's norm jumping far above its own baseline (a tensor detector,
// run per tensor by `per_tensor`; combinators_test.cpp runs it that way).
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/tensor_norm_jump.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include "../support.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace {

// The findings of one tensor_norm_jump fed the norms of a tensor of 100 equal elements (its
// L2 norm is 10 |v|), one step each.
std::vector<mldiag::finding> jumps(mldiag::detectors::tensor_norm_jump d, const std::vector<double>& norms) {
  mldiag::recorder rec(4);
  std::vector<mldiag::finding> out;
  for (std::size_t i = 0; i < norms.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, 1.0);
    const auto x = mldiag_test::filled(100, static_cast<float>(norms[i] / 10.0));
    d.observe({rec.end_step(), rec.past(), rec.names()}, "blocks.3.mlp", mldiag::compute_stats(std::span<const float>(x)), out);
  }
  return out;
}

}  // namespace

TEST_CASE("tensor_norm_jump: a norm 10x its own median is an onset naming the tensor, noise below it is not") {
  // Healthy: norms between 0.5 and 4 (8x apart at most), in a repeating pattern.
  std::vector<double> healthy;
  for (int i = 0; i < 200; ++i) healthy.push_back(i % 4 == 0 ? 4.0 : i % 4 == 1 ? 0.5 : 1.0);
  CHECK(jumps({}, healthy).empty());
  // Steady at 1, then 20x from step 60 to 65, then back, then 20x again from step 90: two onsets.
  std::vector<double> spiky(120, 1.0);
  for (std::size_t i = 60; i < 66; ++i) spiky[i] = 20.0;
  for (std::size_t i = 90; i < 120; ++i) spiky[i] = 20.0;
  const auto f = jumps({}, spiky);
  REQUIRE(f.size() == 2);
  CHECK(f[0].symptom == mldiag::symptoms::tensor_norm_jump);
  CHECK(f[0].first_step == 60);
  CHECK(f[1].first_step == 90);
  REQUIRE(f[0].where.size() == 1);
  CHECK(f[0].where[0].first == "blocks.3.mlp");
  CHECK(f[0].where[0].second == doctest::Approx(20.0).epsilon(1e-5));
  CHECK(f[0].severity == mldiag::severity::warning);  // persistent on its first step (horizon 1)
  // The jump does not join the baseline: the second onset is measured against 1, not 20.
  CHECK(mldiag_test::evidence(f[1], "baseline_median") == doctest::Approx(1.0).epsilon(1e-5));
  // A higher line ignores the 20x.
  CHECK(jumps(mldiag::detectors::tensor_norm_jump({.ratio = 25.0}), spiky).empty());
}
