// SPDX-License-Identifier: Apache-2.0
// A full diagnosis on a real (small) training run with a planted fault: softmax regression on
// three Gaussian classes (tests/support/softmax_trainer.hpp) with a learning rate far too high.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/protocol/diagnosis.hpp"

#include "../support/softmax_trainer.hpp"

#include <cmath>
#include <memory>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

namespace {

namespace p = mldiag::protocol;

using config = mldiag_test::trainer_config;

struct run_result {
  p::evidence_summary summary;
  std::vector<mldiag::finding> findings;
};

// Trains and summarizes the run with the default detector set and the obvious checks.
run_result train(const config& c) {
  mldiag::recorder rec(512);
  auto detectors = mldiag::detectors::default_set();
  run_result r;
  mldiag_test::train_softmax(c, [&](int step, double loss, const std::vector<float>& gw, const std::vector<float>& gb) {
    rec.begin_step(step);
    rec.observe(mldiag::scalar::loss, loss);
    rec.observe(mldiag::scalar::learning_rate, c.lr);
    rec.observe(mldiag::role::gradient, "classifier.weight", gw);
    rec.observe(mldiag::role::gradient, "classifier.bias", gb);
    detectors.observe({rec.end_step(), rec.past(), rec.names()}, r.findings);
  });
  r.summary = p::summarize(rec.past(), r.findings, p::check_obvious(rec.past(), 3));
  return r;
}

config with(config c, const p::change& ch) {
  if (ch.variable == "learning_rate") c.lr = ch.to;
  else if (ch.variable == "initialization") c.init_scale = ch.to;
  else if (ch.variable == "batch_size") c.batch = ch.to;
  else if (ch.variable == "momentum") c.momentum = ch.to;
  return c;
}

const config faulty{.lr = 10.0};  // the planted fault: healthy up to about 1

}  // namespace

TEST_CASE("a full diagnosis: evidence, pattern, a rejected and a confirmed hypothesis, fix, verification") {
  const auto base = train(faulty);
  REQUIRE(!base.summary.findings.empty());  // the detectors saw something
  CAPTURE(base.summary.findings.front().symptom);

  auto dx = p::diagnose(mldiag::question::convergence, base.summary.findings);
  auto pattern = std::move(dx).with_baseline(base.summary);
  static_assert(decltype(pattern)::strikes == 0);
  static_assert(decltype(pattern)::phase == p::phase_id::pattern);
  const auto candidates = pattern.candidates();
  REQUIRE(!candidates.empty());
  const auto high = std::find_if(candidates.begin(), candidates.end(),
                                 [](const p::pattern_row* r) { return r->cause == "learning rate too high"; });
  REQUIRE(high != candidates.end());
  CHECK((*high)->variable == "learning_rate");
  const auto where = pattern.where();
  CHECK(where.since_step >= 0);

  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };

  // A hypothesis that does not hold: the initialization is not the problem.
  auto h1 = std::move(pattern).propose({"gradients do not reach early layers", "loss does not settle", {"initialization", 0.01, 0.1}});
  CHECK(h1.tested().change.variable == "initialization");
  CHECK(!h1.confirmed());  // proposed is not confirmed
  auto after1 = std::move(h1).test(run);
  REQUIRE(!after1.was_confirmed());  // rejected: back to phase 2 with one strike
  CHECK_THROWS_WITH_AS((void)p::fix_phase<0>(std::move(after1).confirmed()), doctest::Contains("mldiag: the outcome is not 'confirmed'"),
                       mldiag::error);
  auto pattern1 = std::move(after1).rejected();
  static_assert(decltype(pattern1)::strikes == 1);

  // The right one, from the table's row: lower the learning rate 10x.
  auto h2 = std::move(pattern1).propose(p::hypothesis(**high, "the loss swings and climbs", 10.0, 1.0));
  CHECK(h2.tested().change.variable == "learning_rate");
  auto after2 = std::move(h2).test(run);
  REQUIRE(after2.was_confirmed());
  auto fix = std::move(after2).confirmed();
  static_assert(std::is_same_v<decltype(fix), p::fix_phase<1>>);
  REQUIRE(fix.confirmed().has_value());
  CHECK(fix.confirmed()->cause == "learning rate too high");
  const auto fixes = fix.fixes();
  REQUIRE(fixes.size() == 1);
  CHECK(std::string(fixes.front()).find("lower the learning rate") != std::string::npos);

  // Verification: the fixed run against the phase-1 baseline, on the same checks.
  auto done = std::move(fix).verify(train(with(faulty, {"learning_rate", 10.0, 1.0})).summary);
  REQUIRE(done.was_better());
  const auto resolved = std::move(done).better();
  const auto& log = resolved.log();
  REQUIRE(log.size() == 7);
  using id = p::phase_id;
  const std::vector<id> phases{id::evidence, id::evidence, id::pattern, id::hypothesis, id::pattern, id::hypothesis, id::fix};
  for (std::size_t i = 0; i < log.size(); ++i) CHECK(log[i].phase == phases[i]);
  CHECK(log[1].text.find("baseline recorded") == 0);
  CHECK(log[3].text.find("'gradients do not reach early layers' rejected") == 0);
  CHECK(log[5].text.find("'learning rate too high' confirmed") == 0);
  CHECK(log[6].text.find("resolved") != std::string::npos);
}

TEST_CASE("three rejected hypotheses escalate: question the fundamentals") {
  const auto base = train(faulty);
  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };
  auto pattern = p::diagnose(mldiag::question::convergence, base.summary.findings).with_baseline(base.summary);
  auto r1 = std::move(pattern).propose({"gradients do not reach early layers", "-", {"initialization", 0.01, 0.05}}).test(run);
  REQUIRE(!r1.was_confirmed());
  auto r2 = std::move(r1).rejected().propose({"batch too small", "-", {"batch_size", 256, 512}}).test(run);
  REQUIRE(!r2.was_confirmed());
  auto r3 = std::move(r2).rejected().propose({"momentum missing", "-", {"momentum", 0.0, 0.5}}).test(run);
  REQUIRE(!r3.was_confirmed());
  // Still a variant of the two phases, for std::visit.
  CHECK(std::visit([](const auto& d) { return d.rejected().size(); }, r3) == 3);
  const auto e = std::move(r3).rejected();
  static_assert(std::is_same_v<decltype(e), const p::escalated>);
  CHECK(std::string(e.message()).find("question the fundamentals") != std::string::npos);
  CHECK(e.rejected().size() == 3);
  CHECK(e.log().back().text.find("escalate") == 0);
}

TEST_CASE("a fix that does not verify is a strike: the three-strike rule survives the way back to phase 2") {
  const auto base = train(faulty);
  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };
  auto pattern = p::diagnose(mldiag::question::convergence, base.summary.findings).with_baseline(base.summary);
  // Two rejected hypotheses ...
  auto r1 = std::move(pattern).propose({"gradients do not reach early layers", "-", {"initialization", 0.01, 0.05}}).test(run);
  auto r2 = std::move(r1).rejected().propose({"batch too small", "-", {"batch_size", 256, 512}}).test(run);
  auto p2 = std::move(r2).rejected();
  static_assert(decltype(p2)::strikes == 2);
  // ... then a confirmed one whose fix, applied, is not better than the baseline (the caller
  // applied a different change than the one tested: the run still has the fault).
  auto r3 = std::move(p2).propose({"learning rate too high", "-", {"learning_rate", 10.0, 1.0}}).test(run);
  REQUIRE(r3.was_confirmed());
  auto fix = std::move(r3).confirmed();
  auto v = std::move(fix).verify(train(faulty).summary);
  REQUIRE(!v.was_better());
  // The third failed attempt: no fourth tweak, whichever way it failed.
  static_assert(std::is_same_v<decltype(std::move(v).not_better()), p::escalated>);
  const auto e = std::move(v).not_better();
  CHECK(e.rejected().size() == 3);
  CHECK(e.rejected().back().cause == "learning rate too high");
  CHECK(e.log().back().text.find("escalate") == 0);
  CHECK(e.log().back().phase == p::phase_id::fix);
}

TEST_CASE("a fix that does not verify after one strike goes back to phase 2 with two") {
  const auto base = train(faulty);
  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };
  auto pattern = p::diagnose(mldiag::question::convergence, base.summary.findings).with_baseline(base.summary);
  auto r1 = std::move(pattern).propose({"gradients do not reach early layers", "-", {"initialization", 0.01, 0.05}}).test(run);
  auto r2 = std::move(r1).rejected().propose({"learning rate too high", "-", {"learning_rate", 10.0, 1.0}}).test(run);
  auto v = std::move(r2).confirmed().verify(train(faulty).summary);
  static_assert(std::is_same_v<decltype(std::move(v).not_better()), p::pattern_phase<2>>);
  REQUIRE(!v.was_better());
  const auto back = std::move(v).not_better();
  CHECK(back.rejected().size() == 2);
  CHECK(!back.confirmed());
}

TEST_CASE("the table: which phase allows which action") {
  static_assert(p::allows<p::phases::evidence, p::events::record_baseline>);
  static_assert(!p::allows<p::phases::evidence, p::events::ask_fixes>);
  static_assert(!p::allows<p::phases::pattern<1>, p::events::ask_fixes>);
  static_assert(p::allows<p::phases::fix<2>, p::events::ask_fixes>);
  static_assert(!p::allows<p::phases::escalated, p::events::propose>);
  static_assert(std::is_same_v<p::next<p::phases::hypothesis<1>, p::events::rejected>, p::pattern_phase<2>>);
  static_assert(std::is_same_v<p::next<p::phases::hypothesis<2>, p::events::rejected>, p::escalated>);
  static_assert(std::is_same_v<p::next<p::phases::fix<0>, p::events::not_verified>, p::pattern_phase<1>>);
  static_assert(std::is_same_v<p::next<p::phases::fix<2>, p::events::not_verified>, p::escalated>);
  // No phase is constructible from outside: only diagnose() and the transitions make one.
  static_assert(!std::is_constructible_v<p::fix_phase<0>, std::unique_ptr<p::detail::diagnosis_state>>);
  static_assert(!std::is_default_constructible_v<p::evidence_phase>);
  static_assert(!std::is_copy_constructible_v<p::pattern_phase<0>>);
  CHECK(p::label(p::phase_id::fix) == "phase 4 (fix and verify)");
}

TEST_CASE("a baseline without the obvious checks is refused") {
  auto dx = p::diagnose(mldiag::question::convergence);
  CHECK_THROWS_WITH_AS((void)std::move(dx).with_baseline(p::evidence_summary{}),
                       doctest::Contains("mldiag: with_baseline: the baseline has no 'check the obvious first'"),
                       mldiag::error);
}

TEST_CASE("localization says where since when and in which substructure") {
  p::evidence_summary e;
  e.first_step = 0;
  e.last_step = 999;
  e.tensors = 10;
  mldiag::finding f;
  f.symptom = "exploding gradients";
  f.first_step = 600;
  f.last_step = 999;
  f.where = {{"grad/layers.3.attn.q_proj", 50.0}, {"grad/layers.3.mlp.fc1", 10.0}};
  e.findings.push_back(f);
  const auto l = p::localize(e);
  CHECK(!l.from_start);
  CHECK(l.since_step == 600);
  CHECK(l.consistent);
  CHECK(!l.all_tensors);
  CHECK(l.where.front().first == "grad/layers.3.attn.q_proj");
  REQUIRE(l.substructures.size() == 2);
  CHECK(l.substructures[0].first == "attention");
  CHECK(l.substructures[1].first == "ffn");
}
