// SPDX-License-Identifier: Apache-2.0
// dead_activations: activations that are (almost) all zeros, and layers that only start at zero.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/dead_activations.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag::finding;
using mldiag::role;
using mldiag::severity;
}  // namespace

TEST_CASE("dead_activations reads activation statistics: a dead ReLU, not a sparse one") {
  std::vector<float> relu(1000, 0.0f);
  relu[3] = 1.0f;
  std::vector<float> fine(1000, 0.3f), sparse(1000, 0.0f);
  for (std::size_t i = 0; i < 1000; i += 30) sparse[i] = 1.0f;  // 96.6% zeros: a healthy sparse FFN
  mldiag::detectors::dead_activations quiet;
  CHECK(run(quiet, 50, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::activation, "ffn.relu", sparse); }).empty());
  mldiag::detectors::dead_activations d;
  const auto f = run(d, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::activation, "mlp.relu", step >= 20 ? relu : fine);
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 20);
  CHECK(f.front().where.front().first == "act/mlp.relu");
}

TEST_CASE("dead_activations is delivered again when a layer joins or the severity rises") {
  mldiag::detectors::dead_activations d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  std::vector<float> live(1000, 1.0f), dying(1000, 0.0f), dead(1000, 0.0f);
  for (int i = 0; i < 5; ++i) dying[static_cast<std::size_t>(i)] = 1.0f;  // 99.5% zeros
  for (int step = 0; step < 40; ++step) {
    rec.begin_step(step);
    rec.observe(role::activation, "a.relu", step < 5 ? live : step < 25 ? dying : dead);
    rec.observe(role::activation, "b.relu", step < 15 ? live : dying);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 3);
  CHECK(out[0].first_step == 5);
  CHECK(out[0].severity == severity::warning);
  CHECK(out[0].where.size() == 1);
  CHECK(out[1].first_step == 15);  // b.relu joins
  CHECK(out[1].where.size() == 2);
  CHECK(out[2].first_step == 25);  // a.relu from 99.5% to 100%: critical
  CHECK(out[2].severity == severity::critical);
  CHECK(out[2].where.front().first == "act/a.relu");
}

// Round 5 of the zoo: tensors that start at zero and losses whose floor is far above 0. Each
// case is recorded from a healthy zoo run (or written from its numbers), and each has a twin
// that shows the old rule on the same numbers, so that the test can fail.
TEST_CASE("dead_activations: a layer that starts at zero and comes alive is not dead, one that stays dead is") {
  // word2vec's output vectors start at 0: its scores are all zero at step 0, 36% zero at
  // step 1 (the zoo's skip-gram runs). A ReLU whose bias is pushed to -50 stays at 100%.
  std::vector<float> scores0(640, 0.0f), scores1(640, 0.0f), live(640, 0.5f), dead(640, 0.0f);
  for (std::size_t i = 0; i < 640; i += 3) scores1[i] = 0.01f;  // a third left zero
  for (std::size_t i = 0; i < 640; i += 2) scores1[i] = 0.02f;
  const auto deliver = [&](mldiag::detectors::dead_activations d, int dies_at) {
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 30; ++step) {
      rec.begin_step(step);
      rec.observe(role::activation, "context.out", step == 0 ? scores0 : step == 1 ? scores1 : live);
      rec.observe(role::activation, "mlp.relu", step >= dies_at ? dead : live);
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(deliver({}, 1000).empty());
  const auto f = deliver({}, 20);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == severity::critical);
  CHECK(f[0].first_step == 20);
  CHECK(f[0].last_step == 20);  // alive before: no wait
  CHECK(f[0].where.front().first == "act/mlp.relu");
  // Dead from its first observation on: never seen alive, so the second observation decides.
  const auto born_dead = deliver({}, 0);
  REQUIRE(born_dead.size() == 1);
  CHECK(born_dead[0].first_step == 0);
  CHECK(born_dead[0].last_step == 1);
  // The twin: a streak of one observation calls the zero-initialized layer dead at step 0.
  mldiag::detectors::dead_activations::config one;
  one.patience = 1;
  const auto old = deliver(mldiag::detectors::dead_activations(one), 1000);
  REQUIRE(old.size() == 1);
  CHECK(old[0].first_step == 0);
  CHECK(old[0].severity == severity::critical);
}
