// SPDX-License-Identifier: Apache-2.0
// constant_loss: a loss constant from the start, and a loss of exactly zero.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/constant_loss.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag::finding;
using mldiag::role;
using mldiag::severity;
}  // namespace

TEST_CASE("constant_loss: a loss that never moved, and a loss of exactly zero") {
  mldiag::detectors::constant_loss d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (int i = 0; i < 7; ++i) {  // seven epochs at 2.3026
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, 2.30258 + 1e-6 * (i % 2));
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].symptom == "loss constant from the start");
  CHECK(out[0].first_step == 4);
  mldiag::detectors::constant_loss z;
  out.clear();
  const double losses[] = {14.68, 14.36, 0.0, 0.0};
  for (int i = 0; i < 4; ++i) {
    rec.begin_step(100 + i);
    rec.observe(mldiag::scalar::loss, losses[i]);
    z.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].symptom == "loss exactly zero");
  CHECK(out[0].severity == severity::warning);
  CHECK(out[0].first_step == 102);
  CHECK(out[0].last_step == 103);
  // A hinge (triplet) loss reaches 0 on single batches and comes back (the zoo's round 8):
  // info once, when it first comes back, and its later zeros, even two in a row, are not
  // reported. Its twin stays at 0 from its first zero (a mask that drops every target).
  std::int64_t base = 1000;  // each series at steps of its own: 1000, then 1100
  const auto zeros = [&](const std::vector<double>& series) {
    mldiag::detectors::constant_loss h;
    std::vector<finding> found;
    for (std::size_t i = 0; i < series.size(); ++i) {
      rec.begin_step(base + static_cast<std::int64_t>(i));
      rec.observe(mldiag::scalar::loss, series[i]);
      h.observe({rec.end_step(), rec.past(), rec.names()}, found);
    }
    base += 100;
    return found;
  };
  const auto hinge = zeros({0.9, 0.7, 0.0, 0.4, 0.3, 0.0, 0.2, 0.0, 0.0, 0.1, 0.0});
  REQUIRE(hinge.size() == 1);
  CHECK(hinge[0].severity == severity::info);
  CHECK(hinge[0].first_step == 1002);
  CHECK(hinge[0].last_step == 1003);
  const auto masked = zeros({0.9, 0.7, 0.0, 0.0, 0.0, 0.0});
  REQUIRE(masked.size() == 1);
  CHECK(masked[0].severity == severity::warning);
  CHECK(masked[0].first_step == 1102);
  // A loss that moves is not constant.
  mldiag::detectors::constant_loss m;
  out.clear();
  for (int i = 0; i < 10; ++i) {
    rec.begin_step(2000 + i);
    rec.observe(mldiag::scalar::loss, 2.3 - 0.01 * i);
    m.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
}

TEST_CASE("constant_loss: a constant loss while the optimizer moves what its gradient reaches is info") {
  // The loss to six digits for five steps (word2vec's 6 ln 2 while its zero-initialized output
  // vectors move): the parameters are being trained. A detached graph (gradient zero, weight
  // decay moving the tensor) or a missing optimizer step (update zero) is not.
  const auto run = [](float grad, float update) {
    mldiag::detectors::constant_loss d;
    mldiag::recorder rec(4);
    std::vector<finding> out;
    const std::vector<float> param(100, 0.01f), g(100, grad), u(100, update);
    for (int step = 0; step < 8; ++step) {
      rec.begin_step(step);
      rec.observe(mldiag::scalar::loss, 4.1588826 - 1e-7 * step);
      rec.observe(role::gradient, "context.weight", g);
      rec.observe(role::parameter, "context.weight", param);
      rec.observe(role::update, "context.weight", u);
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    REQUIRE(out.size() == 1);
    CHECK(out[0].symptom == "loss constant from the start");
    return out[0];
  };
  const auto trained = run(1e-3f, 1e-3f);
  CHECK(trained.severity == severity::info);
  const auto ratio = std::find_if(trained.evidence.begin(), trained.evidence.end(),
                                  [](const auto& e) { return e.first == "largest_update_ratio"; });
  REQUIRE(ratio != trained.evidence.end());
  CHECK(ratio->second == doctest::Approx(0.1));  // 1e-3 / 1e-2 per element
  CHECK(run(0.0f, 1e-7f).severity == severity::warning);  // weight decay alone: a detached graph
  CHECK(run(1e-3f, 0.0f).severity == severity::warning);  // no optimizer step
  // No updates recorded (a log): the loss alone decides, as before.
  mldiag::detectors::constant_loss d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (int step = 0; step < 8; ++step) {
    rec.begin_step(step);
    rec.observe(mldiag::scalar::loss, 2.302585);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].severity == severity::warning);
}
