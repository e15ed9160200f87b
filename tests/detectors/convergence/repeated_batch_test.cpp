// SPDX-License-Identifier: Apache-2.0
// repeated_batch: the same input batch every step.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/repeated_batch.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {
using mldiag_test::run_monitor;
using mldiag::role;
using mldiag::severity;
}  // namespace

TEST_CASE("repeated_batch: the same input batch every step is found, mini-batches and a declared full batch are not warnings") {
  // A data set of 1000 rows of 16 features; each step reads 32 rows.
  std::mt19937_64 rng(15);
  std::normal_distribution<float> z;
  std::vector<float> rows(1000 * 16);
  for (auto& v : rows) v = z(rng);
  std::vector<std::size_t> order(1000);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto batch_of = [&](const std::vector<std::size_t>& pick) {
    std::vector<float> b;
    for (const auto r : pick)
      for (std::size_t k = 0; k < 16; ++k) b.push_back(rows[r * 16 + k]);
    return b;
  };
  const auto run = [&](const std::function<std::vector<float>(int)>& batch, bool full_batch) {
    mldiag::monitor mon({.task = {.full_batch = full_batch}});
    return run_monitor(mon, 200, [&](int i, mldiag::monitor& m) {
      m.observe(mldiag::scalar::loss, 1.0 / (1.0 + i));
      const auto b = batch(i);
      m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(b)));
    }).named("the same input batch every step");
  };
  // Healthy: a fresh shuffled mini-batch every step (epochs of 31 batches, reshuffled).
  std::vector<std::size_t> shuffled = order;
  const auto minibatch = [&](int i) {
    if (i % 31 == 0) std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const auto at = static_cast<std::size_t>(i % 31) * 32;
    return batch_of(std::vector<std::size_t>(shuffled.begin() + static_cast<std::ptrdiff_t>(at),
                                             shuffled.begin() + static_cast<std::ptrdiff_t>(at + 32)));
  };
  CHECK(run(minibatch, false).empty());
  // The fault: the first batch every step. Step 0 is the first; steps 1-20 repeat it, so the
  // run of 20 is reached at step 20, and it began at step 1.
  const auto first = minibatch(0);
  const auto same = run([&](int) { return first; }, false);
  REQUIRE(same.size() == 1);
  CHECK(same[0].severity == severity::warning);
  CHECK(same[0].first_step == 1);
  CHECK(same[0].last_step == 20);
  REQUIRE(same[0].where.size() == 1);
  CHECK(same[0].where[0].first == "input/x");
  // Full-batch training, the rows in a new order every step (sums in another order: equal
  // within the tolerance, not bit for bit): the same finding, info once the user says so.
  const auto whole = [&](int) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    return batch_of(shuffled);
  };
  const auto undeclared = run(whole, false);
  REQUIRE(undeclared.size() == 1);
  CHECK(undeclared[0].severity == severity::warning);
  const auto declared = run(whole, true);
  REQUIRE(declared.size() == 1);
  CHECK(declared[0].severity == severity::info);
  // The limit it states: one batch with fresh noise each step (an augmentation) is not seen.
  std::normal_distribution<float> noise(0.0f, 0.1f);
  CHECK(run([&](int) {
          auto b = first;
          for (auto& v : b) v += noise(rng);
          return b;
        }, false).empty());
  CHECK_THROWS_WITH_AS(mldiag::detectors::repeated_batch({.sustain = 0}), doctest::Contains("mldiag: repeated_batch: need"),
                       mldiag::error);
}

TEST_CASE("repeated_batch alone: an input with the statistics of the last for sustain steps, from the first repeat") {
  // Two batches of 64 elements that differ; then the second one again and again.
  std::vector<float> a(64), b(64);
  for (std::size_t i = 0; i < 64; ++i) {
    a[i] = static_cast<float>(i % 7) - 3.0f;
    b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  }
  const auto run = [&](mldiag::detectors::repeated_batch d, int repeats_from) {
    mldiag::recorder rec(4);
    std::vector<mldiag::finding> out;
    for (int step = 0; step < 40; ++step) {
      rec.begin_step(step);
      rec.observe(mldiag::scalar::loss, 1.0);
      rec.observe(role::input, "x", step >= repeats_from || step % 2 == 0 ? b : a);  // a, b alternate: never alike
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run({}, 1000).empty());
  // b from step 10: steps 11.. repeat their predecessor, the run of 5 reached at step 15.
  const auto found = run(mldiag::detectors::repeated_batch({.sustain = 5}), 10);
  REQUIRE(found.size() == 1);
  CHECK(found[0].symptom == mldiag::symptoms::same_input_batch);
  CHECK(found[0].severity == severity::warning);
  CHECK(found[0].first_step == 11);
  CHECK(found[0].last_step == 15);
  CHECK(found[0].why.find("held 5 of 5") != std::string::npos);
  // Declared full batch: the same finding, info, and its reason says so.
  const auto meant = run(mldiag::detectors::repeated_batch({.sustain = 5, .full_batch = true}), 10);
  REQUIRE(meant.size() == 1);
  CHECK(meant[0].severity == severity::info);
  CHECK(meant[0].why.find("expected") != std::string::npos);
}
