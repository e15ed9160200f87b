// SPDX-License-Identifier: Apache-2.0
// A full diagnosis on a real (small) training run with a planted fault: softmax regression on
// three Gaussian classes (tests/support/softmax_trainer.hpp) with a learning rate far too high.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/protocol/diagnosis.hpp"

#include "../support/softmax_trainer.hpp"

#include <cmath>
#include <random>
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
    rec.record_loss(loss);
    rec.record_lr(c.lr);
    rec.record(mldiag::role::gradient, "classifier.weight", gw);
    rec.record(mldiag::role::gradient, "classifier.bias", gb);
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
  const auto candidates = pattern.candidates();
  REQUIRE(!candidates.empty());
  CHECK(std::find(candidates.begin(), candidates.end(), "learning rate too high") != candidates.end());
  const auto where = pattern.where();
  CHECK(where.since_step >= 0);

  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };

  // A hypothesis that does not hold: the initialization is not the problem.
  auto h1 = std::move(pattern).propose({"gradients do not reach early layers", "loss does not settle", {"initialization", 0.01, 0.1}});
  auto after1 = std::move(h1).test(run);
  REQUIRE(after1.index() == 1);  // rejected: back to phase 2 with one strike
  auto pattern1 = std::get<1>(std::move(after1));
  static_assert(decltype(pattern1)::strikes == 1);

  // The right one: lower the learning rate 10x.
  auto h2 = std::move(pattern1).propose({"learning rate too high", "the loss swings and climbs", {"learning_rate", 10.0, 1.0}});
  auto after2 = std::move(h2).test(run);
  REQUIRE(after2.index() == 0);  // confirmed
  auto fix = std::get<0>(std::move(after2));
  const auto fixes = fix.fixes();
  REQUIRE(fixes.size() == 1);
  CHECK(std::string(fixes.front()).find("lower the learning rate") != std::string::npos);

  // Verification: the fixed run against the phase-1 baseline, on the same checks.
  auto done = std::move(fix).verify(train(with(faulty, {"learning_rate", 10.0, 1.0})).summary);
  REQUIRE(done.index() == 0);
  const auto& log = std::get<0>(done).state().log;
  REQUIRE(log.size() == 7);
  CHECK(log[1].find("phase 1 (evidence): baseline recorded") == 0);
  CHECK(log[3].find("phase 3 (hypothesis): 'gradients do not reach early layers' rejected") == 0);
  CHECK(log[5].find("phase 3 (hypothesis): 'learning rate too high' confirmed") == 0);
  CHECK(log[6].find("resolved") != std::string::npos);
}

TEST_CASE("three rejected hypotheses escalate: question the fundamentals") {
  const auto base = train(faulty);
  const p::experiment run = [](const p::change& ch) { return train(with(faulty, ch)).summary; };
  auto pattern = p::diagnose(mldiag::question::convergence, base.summary.findings).with_baseline(base.summary);
  auto r1 = std::move(pattern).propose({"gradients do not reach early layers", "-", {"initialization", 0.01, 0.05}}).test(run);
  REQUIRE(r1.index() == 1);
  auto r2 = std::get<1>(std::move(r1)).propose({"batch too small", "-", {"batch_size", 256, 512}}).test(run);
  REQUIRE(r2.index() == 1);
  auto r3 = std::get<1>(std::move(r2)).propose({"momentum missing", "-", {"momentum", 0.0, 0.5}}).test(run);
  REQUIRE(r3.index() == 1);
  static_assert(std::is_same_v<std::variant_alternative_t<1, decltype(r3)>, p::escalated>);
  const auto& e = std::get<1>(r3);
  CHECK(std::string(e.message()).find("question the fundamentals") != std::string::npos);
  CHECK(e.state().rejected.size() == 3);
  CHECK(e.state().log.back().find("escalate") == 0);
}

TEST_CASE("a baseline without the obvious checks is refused") {
  auto dx = p::diagnose(mldiag::question::convergence);
  CHECK_THROWS_WITH_AS((void)std::move(dx).with_baseline(p::evidence_summary{}),
                       doctest::Contains("mldiag: evidence_phase::with_baseline: the baseline has no 'check the obvious first'"),
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
