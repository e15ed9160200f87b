// SPDX-License-Identifier: Apache-2.0
// The user's declarations (docs/declarations.md), each through the monitor as a user writes it
// and each with its twin: the same run without the declaration, or with one that does not
// apply, which must still report what the declaration answers.
#include "support.hpp"
#include "mldiag/monitor.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using mldiag::severity;
using mldiag_test::delivered;

bool any_warning(const delivered& d) { return !d.at_least(severity::warning).empty(); }

// An adversarial objective hovering at its equilibrium (ln 2 with noise and a short excursion
// every 150 steps), and a progress metric the user gives beside it.
delivered adversarial(mldiag::monitor& mon, bool metric_improves) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 700, [&](int step, mldiag::monitor& m) {
    const double excursion = step % 150 >= 140 && step % 150 < 143 ? 1.5 : 0.0;
    m.observe(mldiag::scalar::loss, std::log(2.0) * (1.0 + 0.05 * noise(rng)) + excursion);
    const double quality = metric_improves ? 0.9 * (1.0 - std::exp(-step / 150.0)) : 0.3;
    m.observe_metric("classifier_accuracy", quality + 0.02 * noise(rng), true);
  });
}

}  // namespace

TEST_CASE("declarations: a loss that is not a progress measure, with the metric that is") {
  SUBCASE("declared: the loss's equilibrium and excursions raise nothing while the metric improves") {
    mldiag::monitor mon({.task = {.objective = mldiag::objective::not_progress}});
    const auto d = adversarial(mon, true);
    CHECK_MESSAGE(!any_warning(d), (d.all.empty() ? std::string() : d.all[0].symptom));
    // The loss's progress verdicts stood aside; the metric's verdict is in the set.
    CHECK(!mon.detector_set().contains("loss_not_decreasing"));
    CHECK(!mon.detector_set().contains("loss_spike"));
    CHECK(mon.detector_set().contains("metric_not_improving"));
    CHECK(mon.detector_set().contains("non_finite"));  // a NaN loss is still one
  }
  SUBCASE("twin: not declared, the same run is read as a loss that does not decrease") {
    mldiag::monitor mon;
    const auto d = adversarial(mon, true);
    CHECK(!d.named(mldiag::symptoms::loss_not_decreasing).empty());
    CHECK(any_warning(d));
  }
  SUBCASE("twin: declared, a metric that does not improve is the convergence verdict") {
    mldiag::monitor mon({.task = {.objective = mldiag::objective::not_progress}});
    const auto d = adversarial(mon, false);
    const auto stalled = d.named(mldiag::symptoms::progress_not_improving);
    REQUIRE(stalled.size() == 1);
    CHECK(stalled[0].severity == severity::warning);
    CHECK(stalled[0].where.at(0).first == "classifier_accuracy");
    CHECK(d.named(mldiag::symptoms::loss_not_decreasing).empty());
  }
  SUBCASE("declared, a non-finite loss is still critical") {
    mldiag::monitor mon({.task = {.objective = mldiag::objective::not_progress}});
    const auto d = mldiag_test::run_monitor(mon, 20, [](int step, mldiag::monitor& m) {
      m.observe(mldiag::scalar::loss, step == 12 ? std::nan("") : 0.7);
    });
    const auto nan = d.named(mldiag::symptoms::non_finite_loss);
    REQUIRE(nan.size() == 1);
    CHECK(nan[0].severity == severity::critical);
  }
}

namespace {

// A curriculum: the loss falls 3 -> 0.5 over 300 steps, the data gets harder at step 300 (the
// loss jumps to 2.5) and it falls again.
delivered curriculum(mldiag::monitor& mon, bool declare) {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 600, [&](int step, mldiag::monitor& m) {
    if (declare && step == 300) m.observe(mldiag::regime_change{mldiag::change::data});
    const double level = step < 300 ? 0.5 + 2.5 * std::exp(-step / 60.0) : 0.5 + 2.0 * std::exp(-(step - 300) / 60.0);
    m.observe(mldiag::scalar::loss, level * (1.0 + 0.03 * noise(rng)));
  });
}

}  // namespace

TEST_CASE("declarations: a change of data made on purpose restarts the baselines") {
  SUBCASE("twin: not declared, the harder stage is read as a loss spike") {
    mldiag::monitor mon;
    const auto d = curriculum(mon, false);
    const auto spikes = d.named(mldiag::symptoms::loss_spike);
    REQUIRE(!spikes.empty());
    CHECK(spikes[0].first_step >= 300);
    CHECK(spikes[0].severity >= severity::warning);
  }
  SUBCASE("declared at step 300: nothing at warning or above") {
    mldiag::monitor mon;
    const auto d = curriculum(mon, true);
    CHECK(!any_warning(d));
    // The declaration is evidence of its step: the snapshot carries it.
    bool recorded = false;
    const auto& past = mon.evidence().past();
    for (std::size_t i = 0; i < past.size(); ++i)
      recorded = recorded || (past[i].step == 300 && past[i].change == mldiag::change::data);
    CHECK(recorded);
  }
  SUBCASE("a fault after the declared change is still found") {
    mldiag::monitor mon;
    std::mt19937_64 rng(9);
    std::normal_distribution<double> noise(0.0, 1.0);
    const auto d = mldiag_test::run_monitor(mon, 600, [&](int step, mldiag::monitor& m) {
      if (step == 300) m.observe(mldiag::regime_change{mldiag::change::data});
      double level = step < 300 ? 0.5 + 2.5 * std::exp(-step / 60.0) : 0.5 + 2.0 * std::exp(-(step - 300) / 60.0);
      if (step >= 480) level *= 4.0;  // a spike well after the new stage began
      m.observe(mldiag::scalar::loss, level * (1.0 + 0.03 * noise(rng)));
    });
    const auto spikes = d.named(mldiag::symptoms::loss_spike);
    REQUIRE(!spikes.empty());
    CHECK(spikes[0].first_step >= 480);
  }
}

namespace {

// An embedding whose norm grows steadily (a linear ramp: growth that keeps its pace) beside a
// layer that does not; from step 240 the loss rises by half (a consequence, which makes the
// growth found at 199 a warning where nothing was declared), and the run ends at 280, before
// the growth has lasted embedding_growth's 100 observations.
delivered growing_embedding(mldiag::monitor& mon) {
  std::vector<float> emb(256), other(256, 0.1f);
  return mldiag_test::run_monitor(mon, 280, [&](int step, mldiag::monitor& m) {
    for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = static_cast<float>((0.01 + 0.001 * step) * ((i % 2) ? 1 : -1));
    m.observe(mldiag::scalar::loss, (2.0 + std::exp(-step / 100.0)) * (step < 240 ? 1.0 : 1.5));
    m.observe(mldiag::role::parameter, "tok_embed.weight", emb);
    m.observe(mldiag::role::parameter, "head.weight", other);
  });
}

}  // namespace

TEST_CASE("declarations: a tensor expected to grow, and one detector's opinion of one tensor") {
  SUBCASE("twin: not declared, the embedding's growth is a warning once the loss worsens") {
    mldiag::monitor mon;
    const auto d = growing_embedding(mon);
    const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
    REQUIRE(g.size() == 2);
    CHECK(g[0].severity == severity::info);
    CHECK(g[1].severity == severity::warning);
  }
  SUBCASE("declared to grow: the same finding, at info, with the declaration as its reason") {
    mldiag::monitor mon;
    mon.expect_growth("tok_embed");
    const auto d = growing_embedding(mon);
    const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
    REQUIRE(g.size() == 1);  // never escalated: what was declared has no consequence to wait for
    CHECK(g[0].severity == severity::info);
    CHECK(g[0].why.starts_with("declared: tok_embed declared to grow"));
    CHECK(!g[0].awaits_consequence);
    CHECK(d.named(mldiag::symptoms::embedding_norm_growing).size() == 1);
  }
  SUBCASE("twin: a declaration for another tensor (a name that only starts the same) changes nothing") {
    mldiag::monitor mon;
    mon.expect_growth("tok_emb");  // covers tok_emb and tok_emb.*, not tok_embed.weight
    mon.quiet("embedding_growth", "head");
    const auto d = growing_embedding(mon);
    const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
    REQUIRE(g.size() == 2);
    CHECK(g[1].severity == severity::warning);
  }
  SUBCASE("quiet names a detector that exists, and a tensor") {
    mldiag::monitor mon;
    CHECK_THROWS_WITH(mon.quiet("embedding_grow", "x"), doctest::Contains("no detector named 'embedding_grow'"));
    CHECK_THROWS_WITH(mon.quiet("embedding_growth", ""), doctest::Contains("give a detector's name and a tensor's name"));
  }
}

namespace {

// Training loss falling to 0.1, validation evaluated every 50 steps: steady at 1.0 (a
// different domain: far above training, and stable), or rising 1.0 -> 2.5 after step 300.
delivered validation_run(mldiag::monitor& mon, bool val_worsens) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 600, [&](int step, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, (0.1 + 2.0 * std::exp(-step / 50.0)) * (1.0 + 0.03 * noise(rng)));
    if (step % 50 == 49) {
      const double val = val_worsens && step > 300 ? 1.0 + 1.5 * (step - 300) / 300.0 : 1.0;
      m.observe(mldiag::scalar::val_loss, val);
    }
  });
}

}  // namespace

TEST_CASE("declarations: validation drawn unlike training is judged by the gap's trend") {
  SUBCASE("twin: not declared, a steady gap of 10x is reported") {
    mldiag::monitor mon;
    const auto d = validation_run(mon, false);
    REQUIRE(!d.named(mldiag::symptoms::train_far_below_val).empty());
    CHECK(any_warning(d));
  }
  SUBCASE("declared: the steady gap raises nothing") {
    mldiag::monitor mon({.task = {.validation_unlike_training = true}});
    const auto d = validation_run(mon, false);
    CHECK(d.named(mldiag::symptoms::train_far_below_val).empty());
    CHECK(!any_warning(d));
  }
  SUBCASE("declared: a gap that widens while validation worsens is reported") {
    mldiag::monitor mon({.task = {.validation_unlike_training = true}});
    const auto d = validation_run(mon, true);
    const auto gap = d.named(mldiag::symptoms::train_far_below_val);
    REQUIRE(gap.size() == 1);
    CHECK(gap[0].severity == severity::warning);
    CHECK(gap[0].first_step > 300);
    // The rule, from its own evidence: widened by a quarter of the initial training loss.
    CHECK(mldiag_test::evidence(gap[0], "gap") - mldiag_test::evidence(gap[0], "first_gap") >=
          0.25 * mldiag_test::evidence(gap[0], "initial_train_loss"));
  }
}

namespace {

// An in-batch contrastive loss with batch 256: an uninformed model's loss is ln 256 = 5.545.
delivered contrastive(mldiag::monitor& mon, bool learns) {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 400, [&](int step, mldiag::monitor& m) {
    const double level = learns ? 1.5 + 4.0 * std::exp(-step / 80.0) : std::log(256.0);
    m.observe(mldiag::scalar::loss, level * (1.0 + 0.01 * noise(rng)));
  });
}

}  // namespace

TEST_CASE("declarations: a loss's chance level that is not ln(classes)") {
  const double chance = std::log(256.0);
  SUBCASE("declared: a contrastive loss sitting at ln(batch) is at chance") {
    mldiag::monitor mon({.task = {.chance_loss = chance}});
    const auto d = contrastive(mon, false);
    const auto stuck = d.named(mldiag::symptoms::loss_at_chance_level);
    REQUIRE(stuck.size() == 1);
    CHECK(stuck[0].severity == severity::warning);
    CHECK(mldiag_test::evidence(stuck[0], "declared_chance") == doctest::Approx(chance));
    // The first loss was where an uninformed model starts: no initial-loss finding.
    CHECK(d.named(mldiag::symptoms::initial_loss_far_from_chance).empty());
  }
  SUBCASE("twin: declared, a contrastive loss that learns is not") {
    mldiag::monitor mon({.task = {.chance_loss = chance}});
    const auto d = contrastive(mon, true);
    CHECK(d.named(mldiag::symptoms::loss_at_chance_level).empty());
  }
  SUBCASE("twin: not declared, nothing knows the loss's chance level") {
    mldiag::monitor mon;
    const auto d = contrastive(mon, false);
    CHECK(d.named(mldiag::symptoms::loss_at_chance_level).empty());
  }
  SUBCASE("a chance level that is not a positive number is refused") {
    CHECK_THROWS_WITH(mldiag::monitor({.task = {.chance_loss = -1.0}}), doctest::Contains("task::chance_loss is -1"));
  }
}

namespace {

// Label smoothing: the loss falls from 1.00 to 0.955 within ten steps and stays there, 0.045
// above the smoothed floor of 0.91.
delivered smoothed(mldiag::monitor& mon) {
  std::mt19937_64 rng(8);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 400, [&](int step, mldiag::monitor& m) {
    const double level = step < 10 ? 1.0 : 0.955;
    m.observe(mldiag::scalar::loss, level + 0.002 * noise(rng));
  });
}

}  // namespace

TEST_CASE("declarations: a loss floor above 0") {
  SUBCASE("twin: not declared, a 4.5% fall reads as a loss that does not decrease") {
    mldiag::monitor mon;
    CHECK(!smoothed(mon).named(mldiag::symptoms::loss_not_decreasing).empty());
  }
  SUBCASE("declared at 0.91: the same fall is half the way to the floor") {
    mldiag::monitor mon({.task = {.loss_floor = 0.91}});
    CHECK(smoothed(mon).named(mldiag::symptoms::loss_not_decreasing).empty());
  }
}

namespace {

// A surrogate loss constant from the start (no tensors recorded: constant_loss's warning
// "nothing is being trained"), beside a progress metric that climbs (time constant 60 steps:
// most of its gain after step 50), climbs early (time constant 10: done by step 50), stays flat,
// or climbs and then loses its gain from step 150.
// climbs_early_dips: climbs early, then 0.3 lower for ten steps from step 150 (an RL return's
// dip) and back.
enum class metric_path { climbs, climbs_early, flat, climbs_then_falls, climbs_early_then_falls, climbs_early_dips };
delivered constant_surrogate(mldiag::monitor& mon, metric_path path) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 300, [&](int step, mldiag::monitor& m) {
    m.observe(mldiag::scalar::loss, 0.5);
    double r = 0.2;
    if (path == metric_path::climbs) r = 1.0 - 0.8 * std::exp(-step / 60.0);
    if (path == metric_path::climbs_then_falls) r = step < 150 ? 1.0 - 0.8 * std::exp(-step / 60.0) : 0.2;
    if (path == metric_path::climbs_early) r = 1.0 - 0.8 * std::exp(-step / 10.0);
    if (path == metric_path::climbs_early_then_falls) r = step < 150 ? 1.0 - 0.8 * std::exp(-step / 10.0) : 0.2;
    if (path == metric_path::climbs_early_dips) r = 1.0 - 0.8 * std::exp(-step / 10.0) - (step >= 150 && step < 160 ? 0.3 : 0.0);
    m.observe_metric("return", r + 0.01 * noise(rng), true);
  });
}

// A detector of the user's own that states a convergence warning on every step of [from, to),
// and of [again, again_to) where given.
struct warns_between {
  std::int64_t from, to, again = -1, again_to = -1;
  [[nodiscard]] std::string_view name() const { return "warns_between"; }
  void observe(const mldiag::observation& o, std::vector<mldiag::finding>& out) const {
    if ((o.now.step < from || o.now.step >= to) && (o.now.step < again || o.now.step >= again_to)) return;
    out.push_back(mldiag::detectors::escalate(
        mldiag::make_finding(mldiag::question::convergence, mldiag::symptoms::vanishing_gradients, severity::info, o.now.step, name()),
        {.harm = true}));
  }
};

}  // namespace

TEST_CASE("declarations: with a loss that is not a progress measure, a convergence warning waits for the progress metric") {
  const mldiag::monitor_config surrogate{.task = {.objective = mldiag::objective::not_progress}};
  SUBCASE("twin: not declared, a constant loss is a warning at once") {
    mldiag::monitor mon;
    const auto c = constant_surrogate(mon, metric_path::climbs).named(mldiag::symptoms::loss_constant_from_start);
    REQUIRE(c.size() == 1);
    CHECK(c[0].severity == severity::warning);
  }
  SUBCASE("declared, with the return climbing: info that waits, never a warning") {
    mldiag::monitor mon(surrogate);
    const auto d = constant_surrogate(mon, metric_path::climbs);
    const auto c = d.named(mldiag::symptoms::loss_constant_from_start);
    REQUIRE(c.size() == 1);
    CHECK(c[0].severity == severity::info);
    CHECK(c[0].awaits_consequence);
    CHECK(c[0].why.starts_with("the loss is not a progress measure (declared)"));
    CHECK(!any_warning(d));
  }
  SUBCASE("declared, a claim that began after the return made its gain is a warning, once, when the return loses it") {
    mldiag::monitor mon(surrogate);
    mon.add(warns_between{50, 140});  // stops before persistence alone would make it a warning
    const auto c = constant_surrogate(mon, metric_path::climbs_early_then_falls).named(mldiag::symptoms::vanishing_gradients);
    REQUIRE(c.size() == 2);
    CHECK(c[0].severity == severity::info);
    CHECK(c[1].severity == severity::warning);
    CHECK(c[1].why.find("return") != std::string::npos);
    CHECK(c[1].last_step >= 150);
  }
  SUBCASE("twin: the return dipping for ten steps is no consequence: the metric's own verdict calls it noise") {
    mldiag::monitor mon(surrogate);
    mon.add(warns_between{50, 140});
    const auto d = constant_surrogate(mon, metric_path::climbs_early_dips);
    const auto c = d.named(mldiag::symptoms::vanishing_gradients);
    REQUIRE(c.size() == 1);
    CHECK(c[0].severity == severity::info);
    CHECK(!any_warning(d));
  }
  SUBCASE("twin: a claim held while the return made most of its gain is refuted by it; the return's fall is the metric's own warning") {
    mldiag::monitor mon(surrogate);
    const auto d = constant_surrogate(mon, metric_path::climbs_then_falls);
    const auto c = d.named(mldiag::symptoms::loss_constant_from_start);
    REQUIRE(c.size() == 1);
    CHECK(c[0].severity == severity::info);
    std::vector<mldiag::finding> verdicts;  // the return's own: worsening, or no longer above its start
    for (const auto& f : d.all)
      if (f.detector == "metric_not_improving" && f.severity >= severity::warning) verdicts.push_back(f);
    REQUIRE(!verdicts.empty());
    CHECK(verdicts[0].last_step >= 150);
  }
  SUBCASE("declared, a return that never improves (the metric's own verdict) makes it a warning") {
    mldiag::monitor mon(surrogate);
    const auto d = constant_surrogate(mon, metric_path::flat);
    const auto stalled = d.named(mldiag::symptoms::progress_not_improving);
    REQUIRE(stalled.size() == 1);
    const auto c = d.named(mldiag::symptoms::loss_constant_from_start);
    REQUIRE(c.size() == 2);
    CHECK(c[1].severity == severity::warning);
    CHECK(c[1].last_step == stalled[0].last_step);
    CHECK(c[1].why.find(std::string(mldiag::symptoms::progress_not_improving.text)) != std::string::npos);
  }
  SUBCASE("declared, a warning that recurs for 100 steps stands by persistence; its twin that stops at 70 does not") {
    for (const std::int64_t to : {std::int64_t{300}, std::int64_t{120}}) {
      mldiag::monitor mon(surrogate);
      mon.add(warns_between{50, to});
      const auto d = constant_surrogate(mon, metric_path::climbs_early).named(mldiag::symptoms::vanishing_gradients);
      REQUIRE(!d.empty());
      CHECK(d[0].severity == severity::info);
      CHECK(d[0].first_step == 50);
      if (to == 300) {
        REQUIRE(d.size() == 2);
        CHECK(d[1].severity == severity::warning);
        CHECK(d[1].last_step == 50 + mldiag::monitor::progress_persist);
        CHECK(d[1].why.find("recurring for 100 steps") != std::string::npos);
      } else {
        CHECK(d.size() == 1);
      }
    }
  }
  SUBCASE("a claim that comes and goes is judged from its first making; twin: first made after the gain, it escalates") {
    for (const bool early : {true, false}) {
      mldiag::monitor mon(surrogate);
      // Steps 10-39 and again 120-134 (a new episode: more than episode_gap apart), or only the
      // second; the return climbs until 150 and then loses its gain.
      mon.add(early ? warns_between{10, 40, 120, 135} : warns_between{120, 135});
      const auto d = constant_surrogate(mon, metric_path::climbs_then_falls).named(mldiag::symptoms::vanishing_gradients);
      REQUIRE(!d.empty());
      bool warned = false;
      for (const auto& f : d) warned = warned || f.severity >= severity::warning;
      CHECK(warned == !early);
    }
  }
  SUBCASE("twin: recurring for 250 steps while the return makes most of its gain is not harm") {
    mldiag::monitor mon(surrogate);
    mon.add(warns_between{50, 300});
    const auto d = constant_surrogate(mon, metric_path::climbs).named(mldiag::symptoms::vanishing_gradients);
    REQUIRE(d.size() == 1);
    CHECK(d[0].severity == severity::info);
  }
}

namespace {

// L-BFGS as LibTorch runs it: the closure evaluates the loss at the step's parameters, then at
// trial points (here 4x higher); from step `stop` the optimizer has met its tolerance and moves
// nothing while the gradients stay non-zero. `one_left` freezes only "b" from `stop` on.
delivered line_search_run(mldiag::monitor& mon, int stop, bool one_left) {
  std::vector<float> w(64), b(64), g(64, 0.01f);
  return mldiag_test::run_monitor(mon, 80, [&](int step, mldiag::monitor& m) {
    const int moved_w = one_left ? step : std::min(step, stop), moved_b = std::min(step, stop);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>(0.5 + 0.001 * moved_w) * (i % 2 ? 1.0f : -1.0f);
      b[i] = static_cast<float>(0.2 - 0.001 * moved_b);
    }
    const double loss = 0.3 + std::exp(-std::min(step, stop) / 10.0);
    for (int evaluation = 0; evaluation < 3; ++evaluation) m.observe(mldiag::scalar::loss, evaluation == 0 ? loss : 4.0 * loss);
    m.observe(mldiag::role::gradient, "w", g);
    m.observe(mldiag::role::gradient, "b", g);
    m.observe(mldiag::role::parameter, "w", w);
    m.observe(mldiag::role::parameter, "b", b);
  });
}

}  // namespace

TEST_CASE("declarations: an optimizer that evaluates the loss several times a step and stops at its tolerance") {
  SUBCASE("declared: the step's loss is its first evaluation, and stopping everywhere at once is info") {
    mldiag::monitor mon({.task = {.full_batch = true, .line_search = true}});
    const auto d = line_search_run(mon, 40, false);
    REQUIRE(mon.evidence().past().back().loss.has_value());
    CHECK(*mon.evidence().past().back().loss == doctest::Approx(0.3 + std::exp(-4.0)));
    const auto frozen = d.named(mldiag::symptoms::frozen_parameters);
    REQUIRE(frozen.size() == 2);  // w and b
    for (const auto& f : frozen) {
      CHECK(f.severity == severity::info);
      CHECK(f.why.find("met its tolerance") != std::string::npos);
    }
    CHECK(!any_warning(d));
  }
  SUBCASE("twin: not declared, the last evaluation is kept and the stop is frozen parameters") {
    mldiag::monitor mon({.task = {.full_batch = true}});
    const auto d = line_search_run(mon, 40, false);
    CHECK(*mon.evidence().past().back().loss == doctest::Approx(4.0 * (0.3 + std::exp(-4.0))));
    const auto frozen = d.named(mldiag::symptoms::frozen_parameters);
    REQUIRE(frozen.size() == 2);
    CHECK(frozen[0].severity == severity::warning);
  }
  SUBCASE("twin: declared, one tensor left behind while the other moves is still frozen") {
    mldiag::monitor mon({.task = {.full_batch = true, .line_search = true}});
    const auto frozen = line_search_run(mon, 40, true).named(mldiag::symptoms::frozen_parameters);
    REQUIRE(frozen.size() == 1);
    CHECK(frozen[0].where.at(0).first == "param/b");
    CHECK(frozen[0].severity == severity::warning);
  }
}

namespace {

// L-BFGS's updates: two 512-element matrices move by 1e-3 of themselves until `stop`, then by
// 1e-10 (the optimizer met its tolerance) while their gradients stay; with `one_left`, only
// "v" stops and "u" keeps moving.
delivered converged_updates(mldiag::monitor& mon, int stop, bool one_left) {
  std::vector<float> u(512, 0.5f), v(512, -0.25f), g(512, 1e-3f), du(512), dv(512);
  return mldiag_test::run_monitor(mon, 60, [&](int step, mldiag::monitor& m) {
    const bool stopped = step >= stop;
    for (std::size_t i = 0; i < u.size(); ++i) {
      du[i] = u[i] * (stopped && !one_left ? 1e-10f : 1e-3f);
      dv[i] = v[i] * (stopped ? 1e-10f : 1e-3f);
    }
    m.observe(mldiag::scalar::loss, 0.3 + std::exp(-std::min(step, stop) / 10.0));
    m.observe(mldiag::role::gradient, "u", g);
    m.observe(mldiag::role::gradient, "v", g);
    m.observe(mldiag::role::parameter, "u", u);
    m.observe(mldiag::role::parameter, "v", v);
    m.observe(mldiag::role::update, "u", du);
    m.observe(mldiag::role::update, "v", dv);
  });
}

}  // namespace

TEST_CASE("declarations: a line search's converged steps are not an update ratio too small") {
  SUBCASE("declared: no matrix moves once the optimizer met its tolerance, info") {
    mldiag::monitor mon({.task = {.full_batch = true, .line_search = true}});
    const auto small = converged_updates(mon, 30, false).named(mldiag::symptoms::update_ratio_too_small);
    REQUIRE(small.size() == 1);
    CHECK(small[0].severity == severity::info);
    CHECK(small[0].first_step == 30);
    CHECK(small[0].why.find("met its tolerance") != std::string::npos);
  }
  SUBCASE("twin: not declared, the same steps are an update ratio too small") {
    mldiag::monitor mon({.task = {.full_batch = true}});
    const auto small = converged_updates(mon, 30, false).named(mldiag::symptoms::update_ratio_too_small);
    REQUIRE(small.size() == 1);
    CHECK(small[0].severity == severity::warning);
  }
  SUBCASE("twin: declared, one matrix stopped while the other moves is still too small") {
    mldiag::monitor mon({.task = {.full_batch = true, .line_search = true}});
    const auto small = converged_updates(mon, 30, true).named(mldiag::symptoms::update_ratio_too_small);
    REQUIRE(small.size() == 1);
    CHECK(small[0].where.at(0).first == "param/v");
    CHECK(small[0].severity == severity::warning);
  }
}

namespace {

// Learned uncertainty weights: the loss falls 3 -> -1 through 0 with noise 0.05, and one
// batch pair at step 150 (a level near 0) sits 3 above its neighbours.
delivered through_zero(mldiag::monitor& mon) {
  std::mt19937_64 rng(23);
  std::normal_distribution<double> noise(0.0, 1.0);
  return mldiag_test::run_monitor(mon, 300, [&](int step, mldiag::monitor& m) {
    const double level = -1.0 + 4.0 * std::exp(-step / 100.0);
    m.observe(mldiag::scalar::loss, level + 0.05 * noise(rng) + (step == 150 || step == 151 ? 3.0 : 0.0));
  });
}

}  // namespace

TEST_CASE("declarations: a loss with no lower bound") {
  SUBCASE("twin: not declared, a rise of 3 near 0 reads as a spike many times the median") {
    mldiag::monitor mon;
    const auto s = through_zero(mon).named(mldiag::symptoms::loss_spike);
    REQUIRE(!s.empty());
    CHECK(s[0].severity >= severity::warning);
    double ratio = 0.0;
    for (const auto& [key, v] : s[0].evidence)
      if (key == "ratio_to_median") ratio = v;
    CHECK(ratio > 5.0);
  }
  SUBCASE("declared: the level's ratios stand aside") {
    mldiag::monitor mon({.task = {.loss_floor = mldiag::no_lower_bound}});
    const auto d = through_zero(mon);
    CHECK(d.named(mldiag::symptoms::loss_spike).empty());
    CHECK(!any_warning(d));
  }
  SUBCASE("a floor that is not a number, or +inf, is refused") {
    CHECK_THROWS_WITH(mldiag::monitor({.task = {.loss_floor = std::numeric_limits<double>::infinity()}}),
                      doctest::Contains("mldiag::no_lower_bound"));
    CHECK_THROWS_WITH(mldiag::monitor({.task = {.loss_floor = std::nan("")}}), doctest::Contains("mldiag:"));
  }
}

namespace {

// Cosine annealing with warm restarts (SGDR) at steps 150, 300 and 450: the loss falls toward
// 0.1, and each restart of the rate lifts it by up to 1.6 and lets it fall back, at 150 and 450
// over five steps (a climb), at 300 by 1.0 at once on its third step, 7x below the 10x that
// one observation needs to decide alone (round 14's restart to SGD 0.1
// went 0.92, 1.04, 2.50, 2.21, 1.71, back to 1.0 in 8 steps). The
// validation loss sits at 0.6 from step 100 on: a gap of 0.5, six times the training loss but
// small beside the run's initial loss of 3.1. `declared` is the kind declared at each restart (none: nothing declared).
delivered warm_restarts(mldiag::monitor& mon, std::optional<mldiag::change> declared) {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> noise(0.0, 1.0);
  constexpr double climb[] = {0.2, 0.5, 0.9, 1.3, 1.6};
  constexpr double jump[] = {0.0, 0.05, 1.0, 0.9, 0.8};
  return mldiag_test::run_monitor(mon, 600, [&](int step, mldiag::monitor& m) {
    const int since = step % 150;
    if (declared && step >= 150 && since == 0) m.observe(mldiag::regime_change{*declared});
    double level = 0.1 + 3.0 * std::exp(-step / 60.0);
    const double* bump = step / 150 == 2 ? jump : climb;
    if (step >= 150) level += since < 5 ? bump[since] : 1.6 * std::exp(-(since - 4) / 2.0) + 0.1 * std::exp(-since / 40.0);
    m.observe(mldiag::scalar::loss, level * (1.0 + 0.03 * noise(rng)));
    if (step >= 100 && step % 50 == 49) m.observe(mldiag::scalar::val_loss, 0.6 + 0.005 * noise(rng));
  });
}

}  // namespace

TEST_CASE("declarations: a schedule's restart (change::optimizer) keeps the task's scale and lets the new baseline form") {
  SUBCASE("declared at each restart: nothing at warning or above") {
    mldiag::monitor mon;
    const auto d = warm_restarts(mon, mldiag::change::optimizer);
    CHECK_MESSAGE(!any_warning(d), (d.all.empty() ? std::string() : d.all[0].symptom + " at " + std::to_string(d.all[0].first_step)));
  }
  SUBCASE("twin: not declared, a restart's rise is a loss spike") {
    mldiag::monitor mon;
    const auto d = warm_restarts(mon, std::nullopt);
    const auto spikes = d.named(mldiag::symptoms::loss_spike);
    REQUIRE(!spikes.empty());
    CHECK(spikes[0].first_step >= 150);
    CHECK(spikes[0].severity >= severity::warning);
  }
  SUBCASE("twin: declared as new data, the gap is measured against the new stage's own losses") {
    // A new stage is a new task: its first losses (0.3-1.7) are the gap's scale, and 0.5 is
    // far above a quarter of them.
    mldiag::monitor mon;
    const auto d = warm_restarts(mon, mldiag::change::data);
    const auto gap = d.named(mldiag::symptoms::train_far_below_val);
    REQUIRE(!gap.empty());
    CHECK(gap[0].first_step >= 150);
    // The restart's rise is no spike and no climb under either declaration: the new baseline
    // forms from the change's own first losses.
    CHECK(d.named(mldiag::symptoms::loss_spike).empty());
    CHECK(d.named(mldiag::symptoms::sustained_loss_increase).empty());
  }
}

namespace {

// A detector of a user's own that counts the losses it has seen since it was added or last
// started again, and raises one info finding at step 99 saying how many. With `Answers`, it
// also says what a declared change means to it (`on_change`): it keeps its count across an
// optimizer change and starts again on new data.
template <bool Answers>
struct counting_detector {
  static constexpr mldiag::symptom counted{"losses counted"};
  static constexpr mldiag::detectors::detector_info about{"counting", mldiag::question::convergence, {counted},
                                                          "how many losses since it started", {.restarts_on_change = true}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const mldiag::observation& o, std::vector<mldiag::finding>& out) {
    if (o.now.loss) ++seen;
    if (o.now.step == 99)
      out.push_back(mldiag::make_finding(mldiag::question::convergence, counted, severity::info, o.now.step, name(),
                                         {{"seen", static_cast<double>(seen)}}));
  }
  void on_change(mldiag::change kind)
    requires Answers
  {
    if (kind == mldiag::change::data) seen = 0;
  }
  std::size_t seen = 0;
};

template <bool Answers>
double counted_after(mldiag::change kind) {
  mldiag::monitor mon;
  mon.add(counting_detector<Answers>{});
  const auto d = mldiag_test::run_monitor(mon, 100, [&](int step, mldiag::monitor& m) {
    if (step == 60) m.observe(mldiag::regime_change{kind});
    m.observe(mldiag::scalar::loss, 1.0);
  });
  const auto f = d.named(counting_detector<Answers>::counted.text);
  REQUIRE(f.size() == 1);
  for (const auto& [name, value] : f[0].evidence)
    if (name == "seen") return value;
  FAIL("no 'seen' evidence");
  return -1.0;
}

}  // namespace

TEST_CASE("declarations: a detector of one's own says what a change means to it (on_change)") {
  // Answers: an optimizer change keeps all 100 losses; new data at step 60 starts it again, 40.
  CHECK(counted_after<true>(mldiag::change::optimizer) == 100.0);
  CHECK(counted_after<true>(mldiag::change::data) == 40.0);
  // Twin: without on_change, any declared change puts it back as it was added (40 either way).
  CHECK(counted_after<false>(mldiag::change::optimizer) == 40.0);
  CHECK(counted_after<false>(mldiag::change::data) == 40.0);
}
