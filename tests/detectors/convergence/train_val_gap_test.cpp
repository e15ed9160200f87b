// SPDX-License-Identifier: Apache-2.0
// train_val_gap: a training loss far below the validation loss, at a step and at an evaluation
// recorded after its step closed.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/train_val_gap.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {
using mldiag_test::run_monitor;
}  // namespace

TEST_CASE("the training loss far below the validation loss: a repeated batch, not healthy overfitting") {
  auto gap = [](double final_train, double val) {
    mldiag::monitor mon;
    return run_monitor(mon, 300, [&](int i, mldiag::monitor& m) {
      m.observe(mldiag::scalar::loss, i < 10 ? 2.3 : std::max(final_train, 2.3 * std::exp(-i / 20.0)));
      if (i % 50 == 49) m.observe(mldiag::scalar::val_loss, std::max(val, 2.3 * std::exp(-i / 40.0)));
    }).named("training loss far below validation loss");
  };
  const auto same_batch = gap(0.0006, 0.93);
  REQUIRE(same_batch.size() == 1);
  CHECK(same_batch[0].first_step == 99);
  CHECK(gap(0.01, 0.1).empty());   // the digits MLP's healthy overfitting
  CHECK(gap(0.3, 0.45).empty());
}

TEST_CASE("train_val_gap: a loss that goes negative is measured by its fall, not by a ratio") {
  // A Gaussian NLL (the zoo's round 7): training 0.5 -> -0.8, validation settling at 0.6 — an
  // ordinary generalization gap of 1.4 against a fall of 1.3. The twin: a repeated batch,
  // training -> -3, validation climbing to 200.
  const auto run = [](double final_train, double final_val) {
    mldiag::monitor mon;
    return run_monitor(mon, 300, [&](int i, mldiag::monitor& m) {
      const double t = 1.0 - std::exp(-i / 40.0);
      m.observe(mldiag::scalar::loss, 0.5 + (final_train - 0.5) * t);
      if (i % 50 == 49) m.observe(mldiag::scalar::val_loss, 0.5 + (final_val - 0.5) * t);
    }).named("training loss far below validation loss");
  };
  CHECK(run(-0.8, 0.6).empty());
  const auto repeated = run(-3.0, 200.0);
  REQUIRE(repeated.size() == 1);
  CHECK(repeated[0].first_step == 49);
}

TEST_CASE("train_val_gap alone: a validation loss at the step or recorded afterwards, against the recent training losses") {
  // Training 2.3 -> ~0.001 (a memorized batch); `val` at step 49, given at the step or, when
  // `later`, recorded after the step closed (observe_evaluation).
  const auto run = [](double val, bool later) {
    mldiag::detectors::train_val_gap d;
    mldiag::recorder rec(64);
    std::vector<mldiag::finding> out;
    for (int i = 0; i < 60; ++i) {
      rec.begin_step(i);
      rec.observe(mldiag::scalar::loss, i < 10 ? 2.3 : 2.3 * std::exp(-(i - 10) / 5.0));
      if (i == 49 && !later) rec.observe(mldiag::scalar::val_loss, val);
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
      if (i == 49 && later) d.observe_evaluation({rec.record_evaluation(49, val), rec.past(), rec.names()}, out);
    }
    return out;
  };
  // By hand: the last 20 training losses (steps 30-49) average 0.012. A validation loss of 0.5
  // is 40 times that, but 0.49 above it, under a quarter of the initial 2.3 (0.575): quiet.
  // 1.0 is both: found, at step 49.
  CHECK(run(0.5, false).empty());
  CHECK(run(0.5, true).empty());
  for (const bool later : {false, true}) {
    CAPTURE(later);
    const auto f = run(1.0, later);
    REQUIRE(f.size() == 1);
    CHECK(f[0].symptom == mldiag::symptoms::train_far_below_val);
    CHECK(f[0].first_step == 49);
    CHECK(f[0].severity == mldiag::severity::warning);  // its consequence is the gap itself
    CHECK(f[0].why.find("consequence observed") != std::string::npos);
    CHECK(mldiag_test::evidence(f[0], "initial_train_loss") == doctest::Approx(2.3));
  }
}
