// SPDX-License-Identifier: Apache-2.0
// non_finite: NaN or Inf in the loss, a logged gradient norm or a tensor, localized to its origin,
// and the norms it reads (a logged NaN is evidence, an absent norm is absent).
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/non_finite.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag_test::filled;
using mldiag_test::not_a_number;
using mldiag_test::run_monitor;
using mldiag::finding;
using mldiag::role;
using mldiag::severity;
}  // namespace

TEST_CASE("non_finite fires at the first NaN and names the first tensor in layer order") {
  mldiag::detectors::non_finite d;
  CHECK(run(d, 300, healthy).empty());
  std::vector<float> bad = {1.0f, NAN, INFINITY};
  const auto f = run(d, 300, [&](int step, mldiag::recorder& rec, double&, double&) {
    if (step >= 120) rec.observe(mldiag::role::activation, "layers.3.act", bad);
  });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 120);
  CHECK(f.front().severity == mldiag::severity::critical);
  CHECK(f.front().where.front().first == "act/layers.3.act");
  const auto l = run(d, 300, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 77) loss = NAN; });
  REQUIRE(l.size() == 1);
  CHECK(l.front().symptom == "non-finite loss");
  CHECK(l.front().first_step == 77);
}

TEST_CASE("a logged NaN gradient norm is evidence, not an absent value") {
  // Absent: nothing, and the snapshot says there is no norm.
  mldiag::recorder rec(8);
  rec.begin_step(0);
  rec.observe(mldiag::scalar::loss, 1.0);
  CHECK_FALSE(rec.end_step().global_grad_norm().has_value());
  rec.begin_step(1);
  rec.observe(mldiag::scalar::grad_norm, not_a_number);
  const auto& s = rec.end_step();
  CHECK(s.grad_norm.has_value());
  CHECK(s.global_grad_norm().has_value());
  CHECK(std::isnan(s.global_grad_norm().value_or(0.0)));

  // Once with a finite loss: a warning that says the loss stayed finite; three in a row: critical.
  mldiag::monitor mon;
  const auto d = run_monitor(mon, 30, [](int i, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 2.0 - 0.01 * i);
    m.observe(mldiag::scalar::grad_norm, i == 10 || (i >= 20 && i < 23) ? not_a_number : 1.0);
  });
  // Delivered once per escalation (monitor::episode_gap): the warning at step 10, then the
  // critical third in a row at step 22; the warnings at 20 and 21 repeat the episode.
  const auto nf = d.named("non-finite gradient norm");
  REQUIRE(nf.size() == 2);
  CHECK(nf[0].first_step == 10);
  CHECK(nf[0].severity == severity::warning);
  CHECK(nf[0].where.empty());
  CHECK(std::find(nf[0].evidence.begin(), nf[0].evidence.end(), std::pair<std::string, double>{"loss_finite", 1.0}) !=
        nf[0].evidence.end());
  CHECK(nf[1].last_step == 22);
  CHECK(nf[1].severity == severity::critical);  // step 22: the third in a row
  CHECK(nf[1].first_step == 22);

  // An fp16 loss scaler that lowers its scale at the same step skipped the step: info.
  mldiag::monitor amp;
  const auto a = run_monitor(amp, 20, [](int i, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 2.0 - 0.01 * i);
    m.observe(mldiag::scalar::loss_scale, i < 12 ? 65536.0 : 32768.0);
    m.observe(mldiag::scalar::grad_norm, i == 12 ? INFINITY : 1.0);
  });
  const auto skipped = a.named("skipped step: gradient overflow under loss scaling");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].severity == severity::info);
  CHECK(a.at_least(severity::warning).empty());
  CHECK(amp.open_diagnoses() == 0);

  // Inf given as the norm with no tensor recorded is not "values in tensors".
  mldiag::monitor inf;
  const auto b = run_monitor(inf, 3, [](int i, mldiag::monitor& m) { m.observe(mldiag::scalar::grad_norm, i == 2 ? INFINITY : 1.0); });
  CHECK(b.named("non-finite values in tensors").empty());
  CHECK(b.named("non-finite gradient norm").size() == 1);
}

TEST_CASE("an all-NaN tensor has a NaN norm, an infinite one +Inf, as frameworks report it") {
  mldiag::recorder rec(4);
  rec.begin_step(0);
  rec.observe(role::gradient, "w", filled(16, NAN));
  rec.observe(role::gradient, "b", filled(4, 0.5f));
  const auto& s = rec.end_step();
  CHECK(s.gradients[0].stats.l2_norm() == 0.0);  // the finite elements' norm: none
  CHECK(std::isnan(mldiag::norm_of(s.gradients[0].stats)));
  CHECK(std::isnan(s.global_grad_norm().value_or(0.0)));
  rec.begin_step(1);
  std::vector<float> one_inf = filled(8, 1.0f);
  one_inf[3] = -INFINITY;
  rec.observe(role::gradient, "w", one_inf);
  CHECK(mldiag::norm_of(rec.end_step().gradients[0].stats) == INFINITY);
  rec.begin_step(2);
  rec.observe(role::gradient, "w", filled(4, 3.0f));
  CHECK(mldiag::norm_of(rec.end_step().gradients[0].stats) == doctest::Approx(6.0));  // sqrt(4 * 9)
}

TEST_CASE("non-finite values are localized to their origin, forward order first") {
  mldiag::detectors::non_finite d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  // The forward pass overflowed in layer 2; backprop spread NaN to every gradient.
  rec.begin_step(0);
  rec.observe(role::gradient, "conv1.weight", filled(8, NAN));
  rec.observe(role::gradient, "fc.weight", filled(8, NAN));
  rec.observe(role::activation, "conv1.relu", filled(8, 1.0f));
  rec.observe(role::activation, "conv2.relu", filled(8, INFINITY));
  rec.observe(role::activation, "fc.out", filled(8, NAN));
  d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].where.front().first == "act/conv2.relu");
  CHECK(out[0].where[1].first == "act/fc.out");
  // Without activations: the gradient backward computes first, the last one recorded that holds it.
  out.clear();
  rec.begin_step(1);
  rec.observe(role::gradient, "l0.weight", filled(8, NAN));
  rec.observe(role::gradient, "l1.weight", filled(8, NAN));
  rec.observe(role::gradient, "l2.weight", filled(8, 0.25f));
  d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].where.front().first == "grad/l1.weight");
  CHECK(out[0].where[1].first == "grad/l0.weight");
  const auto rule = std::find_if(out[0].evidence.begin(), out[0].evidence.end(), [](const auto& e) { return e.first == "origin_rule"; });
  REQUIRE(rule != out[0].evidence.end());
  CHECK(rule->second == 2.0);
}

TEST_CASE("non-finite inputs are the origin: the data, before any layer") {
  std::vector<float> x = filled(64, 0.5f), act = filled(64, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  act[5] = std::numeric_limits<float>::quiet_NaN();
  mldiag::monitor mon;
  const auto d = run_monitor(mon, 1, [&](int, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, not_a_number);
    m.observe(role::activation, "fc1.relu", mldiag::compute_stats(std::span<const float>(act)));
    m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(x)));
  });
  const auto nf = d.named("non-finite loss");
  REQUIRE(!nf.empty());
  REQUIRE(nf[0].where.size() == 2);
  CHECK(nf[0].where[0].first == "input/x");
  double rule = 0.0;
  for (const auto& [k, v] : nf[0].evidence)
    if (k == "origin_rule") rule = v;
  CHECK(rule == 4.0);
}
