// SPDX-License-Identifier: Apache-2.0
// The detectors inside the monitor: findings downstream of a blow-up marked as consequences,
// what the task says reaching the detectors that read it (classes once, from_checkpoint, the
// configured learning-rate peak), and Q3 evidence opening a diagnosis.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/monitor.hpp"

#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {
using mldiag::role;
using mldiag_test::filled;
using mldiag_test::not_a_number;
using mldiag_test::run_monitor;
}  // namespace

TEST_CASE("findings downstream of a blow-up are consequences and open no diagnosis") {
  mldiag::monitor mon;
  std::vector<float> good = filled(64, 0.01f);
  std::vector<float> blown = filled(64, NAN);
  for (int i = 0; i < 20; ++i) blown[static_cast<std::size_t>(i)] = 0.0f;  // what is left: 20 zeros
  const auto d = run_monitor(mon, 80, [&](int i, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, i < 40 ? 2.0 - 0.01 * i : not_a_number);
    m.observe(mldiag::scalar::learning_rate, i < 60 ? 1e-3 : 50.0);  // at step 60 the lr goes absurd: downstream too
    m.observe(role::gradient, "w", i < 40 ? good : blown);
  });
  const auto lr = d.named("learning rate absurdly large");
  REQUIRE(lr.size() == 1);
  CHECK(lr[0].is_consequence());
  CHECK(lr[0].consequence_of == "non-finite loss");
  CHECK(lr[0].consequence_of_step == 40);
  CHECK(d.named("vanishing gradients").empty());  // NaN gradients say nothing about vanishing
  REQUIRE(mon.open_diagnoses() == 1);
  CHECK(mon.opened_by(0).symptom == "non-finite loss");
  // Long after the run recovered, a new finding is a cause again.
  mldiag::monitor later;
  const auto e = run_monitor(later, 400, [&](int i, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, i == 10 ? not_a_number : 2.0);
    m.observe(mldiag::scalar::learning_rate, i < 300 ? 1e-3 : 50.0);
  });
  REQUIRE(e.named("learning rate absurdly large").size() == 1);
  CHECK_FALSE(e.named("learning rate absurdly large")[0].is_consequence());
}

TEST_CASE("the observed learning rate is compared with the configured peak") {
  auto run = [](double observed) {
    mldiag::monitor mon({.task = {.learning_rate = 1e-3}});
    return run_monitor(mon, 20, [&](int, mldiag::monitor& m) {
      m.observe(mldiag::scalar::loss, 2.0);
      m.observe(mldiag::scalar::learning_rate, observed);
    }).named("learning rate above the configured peak");
  };
  CHECK(run(1.5e-3).empty());
  REQUIRE(run(1e-2).size() == 1);
  CHECK(run(1e-2)[0].first_step == 0);
  // Without a configured peak the detector is silent.
  mldiag::monitor plain;
  CHECK(run_monitor(plain, 5, [](int, mldiag::monitor& m) { m.observe(mldiag::scalar::learning_rate, 1e-2); }).named("learning rate above the configured peak").empty());
}

TEST_CASE("the monitor gives the detectors that need classes their place once") {
  mldiag::monitor mon({.task = {.classes = 10}});
  int initial = 0, chance = 0;
  const auto& set = mon.detector_set();
  for (std::size_t i = 0; i < set.size(); ++i) {
    initial += set[i].name() == "initial_loss";
    chance += set[i].name() == "chance_level";
  }
  CHECK(initial == 1);
  CHECK(chance == 1);
  CHECK(set.size() == std::size(mldiag::detectors::detector_names));
}

TEST_CASE("from_checkpoint: a fine-tuned run's first loss is not judged against ln(classes)") {
  // A reused head answering its old classes: 3.3 against ln 5 = 1.61, falling to 0.4.
  const auto run = [](bool from_checkpoint) {
    mldiag::monitor mon({.task = {.classes = 5, .from_checkpoint = from_checkpoint}});
    const auto d = run_monitor(mon, 60, [](int i, mldiag::monitor& m) { m.observe(mldiag::scalar::loss, 0.4 + 2.9 * std::exp(-i / 10.0)); });
    return std::pair{d, mon.baseline().obvious.loss_matches_task};
  };
  using result = mldiag::protocol::obvious_checks::result;
  const auto [scratch, scratch_check] = run(false);
  CHECK(scratch.named("initial loss far from ln(classes)").size() == 1);
  CHECK(scratch_check == result::failed);
  const auto [tuned, tuned_check] = run(true);
  CHECK(tuned.named("initial loss far from ln(classes)").empty());
  CHECK(tuned_check == result::not_run);
  // chance_level stays: a loss at ln C after training is wrong from a checkpoint too.
  mldiag::monitor mon({.task = {.classes = 5, .from_checkpoint = true}});
  bool chance = false, initial = false;
  for (std::size_t i = 0; i < mon.detector_set().size(); ++i) {
    chance = chance || mon.detector_set()[i].name() == "chance_level";
    initial = initial || mon.detector_set()[i].name() == "initial_loss";
  }
  CHECK(chance);
  CHECK_FALSE(initial);
}

TEST_CASE(
    "the monitor takes Q3 evidence and a low MFU opens a diagnosis whose candidates come from the "
    "table") {
  mldiag::monitor mon;
  const double ranks[] = {0.1, 0.1};
  for (int step = 0; step < 40; ++step) {
    mon.observe(mldiag::scalar::loss, 2.0 - 0.001 * step);  // a loss that moves: a constant one is a finding of its own
    mon.observe(mldiag::efficiency_evidence{.mfu = 0.1});
    mon.observe(mldiag::efficiency_evidence{.tensor_core_activity = 0.2});
    mon.observe(mldiag::efficiency_evidence{.throughput = 1e4, .throughput_target = 1e5});
    mon.observe(mldiag::efficiency_evidence{.communication_bytes = 1e9});
    mon.observe(mldiag::rank_step_times{ranks});
    mldiag::memory_evidence m;
    m.capacity = 8e9;
    m.used = 2e9;
    mon.observe(m);
    (void)mon.end_step();
  }
  REQUIRE(mon.open_diagnoses() == 1);
  CHECK(mon.opened_by(0).symptom == "low MFU");
  CHECK(mon.evidence().past().back().efficiency.tensor_core_activity == 0.2);
  auto pattern = mon.take_diagnosis(0).with_baseline(mon.baseline());
  const auto candidates = pattern.candidates();
  REQUIRE(candidates.size() >= 3);
  CHECK(std::any_of(candidates.begin(), candidates.end(),
                    [](const auto* row) { return row->cause == "the wrong backend: unfused attention or fp32 math"; }));
}

namespace {

// A detector that states the same anomaly at `place(step)` on the steps `on(step)` says, at a
// severity `level(step)` says: the monitor's episode rule is what is under test.
struct repeating {
  std::function<bool(std::int64_t)> on;
  std::function<mldiag::severity(std::int64_t)> level;
  std::function<std::string(std::int64_t)> place;
  static constexpr mldiag::detectors::detector_info about{"repeating", mldiag::question::convergence, {}, "a test double"};
  std::string_view name() const { return "repeating"; }
  void observe(const mldiag::observation& o, std::vector<mldiag::finding>& out) {
    if (!on(o.now.step)) return;
    auto f = mldiag::make_finding(mldiag::question::convergence, mldiag::symptom{"repeated symptom"}, level(o.now.step), o.now.step, name());
    f.where.emplace_back(place(o.now.step), 1.0);
    out.push_back(std::move(f));
  }
};

std::vector<mldiag::finding> delivered_by(repeating r, int steps) {
  mldiag::monitor mon({.detectors = {"non_finite"}});
  mon.add(std::move(r));
  std::vector<mldiag::finding> got, returned;
  mon.attach([&](const mldiag::finding& f) { got.push_back(f); });
  for (int i = 0; i < steps; ++i) {
    mon.begin_step(i);
    mon.observe(mldiag::scalar::loss, 1.0);
    for (const auto& f : mon.end_step()) returned.push_back(f);
  }
  CHECK(got.size() == returned.size());  // the sinks and end_step see the same deliveries
  return got;
}

}  // namespace

TEST_CASE("an episode is delivered when it starts and when it escalates, not once per step") {
  // Held from step 10 to 199 (warning, critical from 150), then again from 300 after a pause
  // longer than the episode gap.
  const auto got = delivered_by({[](std::int64_t s) { return (s >= 10 && s < 200) || s >= 300; },
                                 [](std::int64_t s) { return s >= 150 && s < 200 ? mldiag::severity::critical : mldiag::severity::warning; },
                                 [](std::int64_t) { return std::string("blocks.1"); }},
                                400);
  REQUIRE(got.size() == 3);
  CHECK(got[0].first_step == 10);
  CHECK(got[0].severity == mldiag::severity::warning);
  CHECK(got[1].first_step == 150);
  CHECK(got[1].severity == mldiag::severity::critical);
  CHECK(got[2].first_step == 300);  // a new episode: 100 steps without it
  static_assert(mldiag::monitor::episode_gap < 100);
}

TEST_CASE("twin: the same symptom at a new place each step is news each step") {
  const auto got = delivered_by({[](std::int64_t s) { return s >= 10 && s < 40; },
                                 [](std::int64_t) { return mldiag::severity::warning; },
                                 [](std::int64_t s) { return "blocks." + std::to_string(s); }},
                                60);
  CHECK(got.size() == 30);
}

TEST_CASE("twin: a repetition after a pause longer than the gap is a new episode") {
  // Every 60th step: each a new episode.
  const auto got = delivered_by({[](std::int64_t s) { return s % 60 == 0; },
                                 [](std::int64_t) { return mldiag::severity::warning; },
                                 [](std::int64_t) { return std::string("x"); }},
                                600);
  CHECK(got.size() == 10);
}
