// SPDX-License-Identifier: Apache-2.0
// lr_sanity: a learning rate that is not finite, zero, absurdly large or jumps.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/lr_sanity.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("lr_sanity: negative or NaN is critical and zero from the start is a warning") {
  mldiag::detectors::lr_sanity d;
  CHECK(run(d, 100, [](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, 3e-4); }).empty());
  mldiag::detectors::lr_sanity n;
  const auto f = run(n, 100, [](int step, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, step == 40 ? NAN : 3e-4); });
  REQUIRE(f.size() == 1);
  CHECK(f.front().severity == mldiag::severity::critical);
  CHECK(f.front().first_step == 40);
  mldiag::detectors::lr_sanity z;
  const auto g = run(z, 100, [](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, 0.0); });
  REQUIRE(g.size() == 1);
  CHECK(g.front().symptom == "learning rate is zero");
  CHECK(g.front().first_step == 9);  // the tenth step at zero
  // Twin: a log excerpt whose rate is first seen at step 60, already 0 (a cool-down printed as
  // 0.000000): training's start is unseen, so the zero waits for a consequence (info).
  mldiag::detectors::lr_sanity excerpt;
  const auto e = run(excerpt, 100, [](int step, mldiag::recorder& r, double&, double&) {
    if (step >= 60) r.observe(mldiag::scalar::learning_rate, 0.0);
  });
  REQUIRE(e.size() == 1);
  CHECK(e.front().symptom == "learning rate is zero");
  CHECK(e.front().severity == mldiag::severity::info);
  CHECK(e.front().awaits_consequence);
  CHECK(e.front().first_step == 69);
  mldiag::detectors::lr_sanity end;  // decays to zero at the end, as llm.c does: info only
  const auto h = run(end, 100, [](int step, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, step < 80 ? 1e-3 : 0.0); });
  REQUIRE(h.size() == 1);
  CHECK(h.front().severity == mldiag::severity::info);
  mldiag::detectors::lr_sanity warm;  // a linear warm-up from lr/20 and a cosine decay: smooth
  CHECK(run(warm, 300, [](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::scalar::learning_rate, step < 20 ? 1e-3 * (step + 1) / 20.0 : 1e-3 * 0.5 * (1.0 + std::cos(3.14159 * (step - 20) / 300.0)));
  }).empty());
  mldiag::detectors::lr_sanity jump;
  const auto j = run(jump, 100, [](int step, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, step >= 60 ? 0.3 : 3e-3); });
  REQUIRE(j.size() == 1);
  CHECK(j.front().symptom == "learning rate jumped");
  CHECK(j.front().first_step == 60);
  CHECK(j.front().evidence.back().second == doctest::Approx(100.0));
  mldiag::detectors::lr_sanity big;
  const auto b = run(big, 20, [](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::scalar::learning_rate, 8.0); });
  REQUIRE(b.size() == 1);
  CHECK(b.front().symptom ==
        "learning rate absurdly large");
  // Above the line is a claim the run's progress decides: info that waits for a consequence.
  CHECK(b.front().severity == mldiag::severity::info);
  CHECK(b.front().awaits_consequence);
}

TEST_CASE("lr_sanity through the monitor: a rate above max_lr is a warning only when the run worsens") {
  // word2vec's SGD at 10 over sparse rows: the loss falls, the claim stays info (issue 38).
  const auto run_at = [](double lr, bool rises) {
    mldiag::monitor mon({.task = {.learning_rate = lr}});
    std::vector<mldiag::finding> seen;
    mon.attach([&seen](const mldiag::finding& f) { seen.push_back(f); });
    for (int i = 0; i < 120; ++i) {
      mon.begin_step(i);
      // A falling loss with batch noise, or one that climbs from step 40 on: a rate that cannot train.
      const double noise = 0.02 * ((i * 7919) % 13 - 6) / 6.0;
      mon.observe(mldiag::scalar::loss, (rises && i >= 40 ? 2.0 + 0.05 * (i - 40) : 4.0 - 0.015 * std::min(i, 40)) + noise);
      mon.observe(mldiag::scalar::learning_rate, lr);
      (void)mon.end_step();
    }
    mon.finish();
    std::vector<mldiag::finding> large;
    for (const auto& f : seen)
      if (f.symptom == mldiag::symptoms::lr_absurdly_large) large.push_back(f);
    return large;
  };
  const auto trains = run_at(10.0, false);
  REQUIRE(!trains.empty());
  for (const auto& f : trains) CHECK(f.severity == mldiag::severity::info);
  // Twin: the same rate while the loss climbs: the consequence makes it a warning.
  const auto climbs = run_at(10.0, true);
  REQUIRE(!climbs.empty());
  CHECK(climbs.back().severity == mldiag::severity::warning);
  CHECK(climbs.back().why.find("consequence observed") != std::string::npos);
  // The line itself is sane: nothing.
  CHECK(run_at(mldiag::thresholds::max_learning_rate, true).empty());
}
