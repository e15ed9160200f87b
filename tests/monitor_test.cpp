// SPDX-License-Identifier: Apache-2.0
// The monitor in a real (small) training loop: findings out, diagnoses opened in phase 1,
// sinks, the L0 configuration checks, and no allocation on quiet steps.
#include <doctest/doctest.h>

#include "mldiag/monitor.hpp"

#include "support/count_allocations.hpp"
#include "support/softmax_trainer.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

namespace {
void feed(mldiag::monitor& mon, const mldiag_test::trainer_config& c, std::vector<std::string>* seen = nullptr) {
  mldiag_test::train_softmax(c, [&](int, double loss, const std::vector<float>& gw, const std::vector<float>& gb) {
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, c.lr);
    mon.observe(mldiag::role::gradient, "classifier.weight", gw);
    mon.observe(mldiag::role::gradient, "classifier.bias", gb);
    for (const auto& f : mon.end_step())
      if (seen) seen->push_back(f.symptom);
  });
}
}  // namespace

TEST_CASE("a healthy run stays quiet and a planted LR fault opens diagnoses in phase 1") {
  mldiag::monitor quiet({.task = {.classes = 3}});
  std::vector<std::string> none;
  feed(quiet, {.lr = 0.5}, &none);
  CHECK(none.empty());
  CHECK(quiet.open_diagnoses() == 0);

  mldiag::monitor mon({.task = {.classes = 3}});
  std::vector<std::string> seen, sunk;
  mon.attach([&](const mldiag::finding& f) { sunk.push_back(f.symptom); });
  feed(mon, {.lr = 10.0}, &seen);
  REQUIRE(!seen.empty());
  CHECK(sunk == seen);  // every finding reaches the sinks
  REQUIRE(mon.open_diagnoses() >= 1);
  // One diagnosis per question and symptom, however often it fired.
  for (std::size_t i = 0; i < mon.open_diagnoses(); ++i)
    for (std::size_t j = i + 1; j < mon.open_diagnoses(); ++j)
      CHECK(mon.opened_by(i).symptom != mon.opened_by(j).symptom);
  auto dx = mon.take_diagnosis(0);
  CHECK(dx.log().front().phase == mldiag::protocol::phase_id::evidence);
  auto pattern = std::move(dx).with_baseline(mon.baseline());
  const auto candidates = pattern.candidates();
  CHECK(std::any_of(candidates.begin(), candidates.end(), [](const auto* row) { return row->cause == "learning rate too high"; }));
  CHECK_THROWS_WITH_AS((void)mon.take_diagnosis(99), doctest::Contains("mldiag: monitor::take_diagnosis: index 99"), mldiag::error);
}

TEST_CASE("L0: the task is checked before the first step, and its findings reach sinks with the first step") {
  mldiag::monitor mon({.task = {.classes = 10, .learning_rate = -1e-3, .label_min = 0, .label_max = 10, .fp16 = true,
                                .loss_scaling = false, .data_loader_workers = 0}});
  const auto f = mon.configuration_findings();
  REQUIRE(f.size() == 4);
  CHECK(f[0].symptom == "learning rate not finite or negative");
  CHECK(f[1].symptom == "labels out of range");
  CHECK(f[2].symptom == "fp16 without loss scaling");
  CHECK(f[3].question == mldiag::question::efficiency);
  CHECK(f[0].first_step == -1);
  CHECK(mon.open_diagnoses() == 3);  // info findings open none, and before any step
  std::vector<std::string> sunk;
  mon.attach([&](const mldiag::finding& x) { sunk.push_back(x.symptom); });
  mon.observe(mldiag::scalar::loss, 2.3);
  CHECK(mon.end_step().empty());  // a step's own findings only
  REQUIRE(sunk.size() == 4);
  CHECK(sunk[1] == "labels out of range");
  (void)mon.end_step();
  CHECK(sunk.size() == 4);  // delivered once
  mldiag::monitor sane({.task = {.classes = 10, .learning_rate = 3e-4, .label_min = 0, .label_max = 9}});
  CHECK(sane.configuration_findings().empty());
  CHECK_THROWS_WITH_AS(mldiag::monitor({.task = {.max_grad_norm = -1.0}}), doctest::Contains("mldiag: task::max_grad_norm is -1"),
                       mldiag::error);
}

TEST_CASE("a quiet step allocates nothing from the second step on") {
  mldiag::monitor mon;
  std::vector<float> g(512, 0.01f);
  auto step = [&](int i) {
    mon.observe(mldiag::scalar::loss, 1.0 + 3.0 * std::exp(-i / 300.0));
    mon.observe(mldiag::scalar::learning_rate, 1e-3);
    mon.observe(mldiag::role::gradient, "w", g);
    return mon.end_step().size();
  };
  // Step 0 learns the names and reserves the history's 512 slots; from step 1 on nothing
  // allocates, through the first pass over the history and beyond it (issue 18; it took 512
  // steps, one per slot, before).
  std::size_t fired = step(0);
  const auto before = mldiag_test::allocations();
  for (int i = 1; i < 1600; ++i) fired += step(i);
  CHECK(fired == 0);
  CHECK(mldiag_test::allocations() == before);
}

namespace {
// A detector of the user's own: fires once the loss exceeds a line.
struct loss_above {
  double line = 5.0;
  void observe(const mldiag::observation& o, std::vector<mldiag::finding>& out) {
    if (o.now.loss && *o.now.loss > line)
      out.push_back(mldiag::make_finding(mldiag::question::convergence, mldiag::symptoms::sustained_loss_increase,
                                         mldiag::severity::warning, o.now.step, name(), {{"loss", *o.now.loss}}));
  }
  [[nodiscard]] std::string_view name() const { return "loss_above"; }
};

std::vector<std::string> names_of(const mldiag::monitor& mon) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < mon.detector_set().size(); ++i) out.emplace_back(mon.detector_set()[i].name());
  return out;
}
}  // namespace

TEST_CASE("monitor: configured entries, each name once, and the user's own detectors") {
  // classes > 1 configures initial_loss and chance_level in their place, once each.
  for (const auto& config : {mldiag::monitor_config{.task = {.classes = 10}},
                             mldiag::monitor_config{.task = {.classes = 10}, .detectors = {"initial_loss", "loss_spike", "chance_level"}}}) {
    mldiag::monitor mon(config);
    auto names = names_of(mon);
    CHECK(std::count(names.begin(), names.end(), "initial_loss") == 1);
    CHECK(std::count(names.begin(), names.end(), "chance_level") == 1);
    std::sort(names.begin(), names.end());
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  }
  // An entry's own parameters win over the monitor's classes: a 2-class task reports a first
  // loss of ln 10 as far from ln 2 ...
  {
    mldiag::monitor mon({.task = {.classes = 10}, .detectors = {{"initial_loss", {{"classes", 2}}}}});
    mon.observe(mldiag::scalar::loss, std::log(10.0));
    const auto f = mon.end_step();
    REQUIRE(f.size() == 1);
    CHECK(f[0].symptom == mldiag::symptoms::initial_loss_far_from_chance);
  }
  // ... while with the monitor's 10 classes the same loss is exactly at chance.
  {
    mldiag::monitor mon({.task = {.classes = 10}, .detectors = {"initial_loss"}});
    mon.observe(mldiag::scalar::loss, std::log(10.0));
    CHECK(mon.end_step().empty());
  }
  // A configured entry's parameter takes effect: a jump of 15x is below warn_ratio 20.
  CHECK_THROWS_WITH_AS(mldiag::monitor({.detectors = {{"exploding_gradients", {{"warn_ratios", 20}}}}}),
                       doctest::Contains("unknown parameter 'warn_ratios'"), mldiag::error);
  // The user's own detector: added, its findings delivered and opening a diagnosis; one of the
  // same name replaces it in its place.
  mldiag::monitor mon({.detectors = {"loss_spike"}});
  mon.add(loss_above{});
  CHECK(names_of(mon) == std::vector<std::string>{"loss_spike", "loss_above"});
  mon.add(loss_above{.line = 100.0});
  CHECK(names_of(mon) == std::vector<std::string>{"loss_spike", "loss_above"});
  mon.add(mldiag::detectors::make_detector("loss_spike", {{"factor", 4}}));
  CHECK(names_of(mon) == std::vector<std::string>{"loss_spike", "loss_above"});
  mon.observe(mldiag::scalar::loss, 50.0);
  CHECK(mon.end_step().empty());  // the replacement's line is 100
  mon.observe(mldiag::scalar::loss, 150.0);
  const auto f = mon.end_step();
  REQUIRE(f.size() == 1);
  CHECK(f[0].detector == "loss_above");
  CHECK(mon.open_diagnoses() == 1);
}

TEST_CASE("an evaluation joins the step it was measured after, and its detectors see it") {
  mldiag::monitor mon;
  CHECK_THROWS_WITH_AS(mon.observe_evaluation(1.0), doctest::Contains("no step has closed yet"), mldiag::error);
  std::vector<float> g(64, 0.01f);
  // Training loss falls to 0.05 while the test loss stays at 2: the train/validation gap
  // detector (min_ratio 5, min_gap 0.25 of the initial loss) must fire from an evaluation.
  std::size_t gap_findings = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 40; ++i) {
      const int step = epoch * 40 + i;
      mon.observe(mldiag::scalar::loss, 2.0 * std::exp(-step / 10.0) + 0.05);
      mon.observe(mldiag::role::gradient, "w", g);
      mon.end_step();
    }
    const std::int64_t last = mon.evidence().past().back().step;
    for (const auto& f : mon.observe_evaluation(2.0)) gap_findings += f.symptom == mldiag::symptoms::train_far_below_val ? 1 : 0;
    // The value is the closed step's, not the next one's.
    CHECK(mon.evidence().past().back().step == last);
    CHECK(mon.evidence().past().back().val_loss == 2.0);
  }
  CHECK(gap_findings == 1);  // an onset, once
  // An earlier, still kept step; a step not kept; a step open.
  mon.observe_evaluation(10, 3.0);
  CHECK(mon.evidence().past()[10].val_loss == 3.0);
  CHECK_THROWS_WITH_AS(mon.observe_evaluation(100000, 1.0), doctest::Contains("is not in the history"), mldiag::error);
  mon.observe(mldiag::scalar::loss, 0.05);
  CHECK_THROWS_WITH_AS(mon.observe_evaluation(1.0), doctest::Contains("or observe(scalar::val_loss, v) for the open step"), mldiag::error);
}

TEST_CASE("each diagnosis localizes and ranks causes by its own symptom") {
  // Two faults at different times: the learning rate x1000 from step 200 (divergence) after
  // a gradient tensor carrying NaN at steps 50-52. Each open diagnosis must say its own
  // "since" and have its own candidates, not the run's.
  mldiag::monitor mon({.task = {.classes = 3}});
  std::vector<float> g(64, 0.01f), bad(64, 0.01f);
  bad[3] = std::nanf("");
  double loss = 1.1;
  for (int step = 0; step < 260; ++step) {
    loss = step < 200 ? 1.1 * std::exp(-step / 150.0) + 0.2 : loss * 1.3;
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, step < 200 ? 1e-3 : 1.0);
    mon.observe(mldiag::role::gradient, "w", step >= 50 && step <= 52 ? bad : g);
    mon.end_step();
  }
  REQUIRE(mon.open_diagnoses() >= 2);
  std::vector<std::int64_t> since;
  std::vector<std::string> first_cause;
  while (mon.open_diagnoses() > 0) {
    const std::string symptom = mon.opened_by(0).symptom;
    const std::int64_t opened_at = mon.opened_by(0).first_step;
    auto pattern = mon.take_diagnosis(0).with_baseline(mon.baseline());
    const auto where = pattern.where();
    CHECK(where.since_step == opened_at);  // the symptom's own start, not the run's first finding
    since.push_back(where.since_step);
    const auto c = pattern.candidates();
    for (const auto* row : c) CHECK(mldiag::protocol::matches(*row, symptom));
    first_cause.push_back(c.empty() ? std::string() : std::string(c.front()->cause));
  }
  std::sort(since.begin(), since.end());
  CHECK(since.front() < 60);
  CHECK(since.back() >= 200);
}

TEST_CASE("observe_logits records the row entropy on the rows and steps the config samples") {
  std::vector<float> scores(8 * 16);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i % 5) * 0.5f;
  const auto expected = mldiag::entropy_from_logits(scores, 16);
  mldiag::monitor every_row({.entropy = {.row_stride = 1}});
  mldiag::monitor sampled({.entropy = {.row_stride = 4, .every = 2}});
  mldiag::monitor by_default;  // every 5th row, every step
  for (int step = 0; step < 4; ++step) {
    for (auto* m : {&every_row, &sampled, &by_default}) {
      m->observe(mldiag::scalar::loss, 1.0);
      m->observe_logits("attn", scores, 16);
      (void)m->end_step();
    }
  }
  const auto& all = every_row.evidence().past();
  const auto& some = sampled.evidence().past();
  REQUIRE(all.size() == 4);
  REQUIRE(some.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    REQUIRE(all[k].attention.size() == 1);
    CHECK(all[k].attention[0].stats == expected);
    // Steps 0 and 2 read rows {0, 4} and then {1, 5}; steps 1 and 3 record nothing.
    CHECK(some[k].attention.size() == (k % 2 == 0 ? 1u : 0u));
    if (k % 2 == 0) CHECK(some[k].attention[0].stats.rows == 2);
  }
  // The default: rows {k, k + 5} at step k (k + 5 only while it is one of the 8 rows), each
  // the entropy of that row alone.
  const auto& dflt = by_default.evidence().past();
  REQUIRE(dflt.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    REQUIRE(dflt[k].attention.size() == 1);
    mldiag::entropy_stats two = mldiag::entropy_from_logits(std::span<const float>(scores).subspan(16 * k, 16), 16);
    if (k + 5 < 8) two.merge(mldiag::entropy_from_logits(std::span<const float>(scores).subspan(16 * (k + 5), 16), 16));
    const auto& got = dflt[k].attention[0].stats;
    CHECK(got.rows == (k + 5 < 8 ? 2u : 1u));
    CHECK(got.sum == doctest::Approx(two.sum).epsilon(1e-12));
    CHECK(got.normalized_sum == doctest::Approx(two.normalized_sum).epsilon(1e-12));
    CHECK(got.min == doctest::Approx(two.min).epsilon(1e-12));
    CHECK(got.max == doctest::Approx(two.max).epsilon(1e-12));
  }
}

TEST_CASE("a quiet step with every kind of evidence allocates nothing from the second step on") {
  mldiag::monitor mon({.task = {.classes = 10}});
  std::vector<float> w(4096), g(4096), u(4096), act(2048), resid(1024), write(1024), scores(4 * 32 * 32);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * static_cast<float>(static_cast<int>(i % 97) - 48) / 48.0f;
  for (std::size_t i = 0; i < act.size(); ++i) act[i] = static_cast<float>(i % 13) * 0.1f;
  for (std::size_t i = 0; i < resid.size(); ++i) resid[i] = static_cast<float>(i % 11) * 0.1f - 0.5f;
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i % 7) * 0.3f;
  const std::vector<double> loads = {30, 34, 29, 35};
  auto step = [&](int i) {
    const double t = static_cast<double>(i);
    const float scale = static_cast<float>(1.0 + 0.05 * std::sin(t / 7.0));
    for (std::size_t k = 0; k < g.size(); ++k) g[k] = w[k] * 0.1f * scale;
    for (std::size_t k = 0; k < u.size(); ++k) {
      u[k] = -1e-2f * g[k];
      w[k] += u[k];  // the parameters move by their updates (else: "frozen parameters")
    }
    for (std::size_t k = 0; k < write.size(); ++k) write[k] = 0.1f * resid[k] * scale;
    mon.observe(mldiag::scalar::loss, std::log(10.0) * (0.3 + 0.7 * std::exp(-t / 400.0)) + 0.01 * std::sin(t));
    mon.observe(mldiag::scalar::learning_rate, 1e-3);
    for (int layer = 0; layer < 3; ++layer) {
      const std::string name = "layers." + std::to_string(layer);
      mon.observe(mldiag::role::parameter, name + ".w", w);
      mon.observe(mldiag::role::gradient, name + ".w", g);
      mon.observe(mldiag::role::update, name + ".w", u);
      mon.observe(mldiag::role::activation, name + ".mlp", act);
      mon.observe(mldiag::role::residual_input, name, resid);
      mon.observe(mldiag::role::block_output, name, write);
      mon.observe_logits(name + ".attn", scores, 32);
    }
    mon.observe(mldiag::router_load{"layers.1.moe", loads});
    const auto f = mon.end_step();
    for (const auto& x : f) MESSAGE(i << ": " << x.detector << ": " << x.symptom);
    return f.size();
  };
  std::size_t fired = step(0);
  // (std::to_string above allocates for names longer than the small-string buffer: none are.)
  const auto before = mldiag_test::allocations();
  for (int i = 1; i < 1200; ++i) fired += step(i);
  CHECK(fired == 0);
  CHECK(mldiag_test::allocations() == before);
}
