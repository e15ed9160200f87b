// SPDX-License-Identifier: Apache-2.0
// The defects seen when the default monitor met training loops written elsewhere, each one a
// test: a NaN gradient norm is evidence, all-NaN tensors have a NaN norm, non-finite values are
// localized to their origin, consequences of a blow-up are marked, escalation is delivered,
// short logs are judged on their face, the train/validation gap, the configured learning rate,
// and baselines that adapt to a change of regime without swallowing a slow explosion.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using mldiag::finding;
using mldiag::role;
using mldiag::severity;

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

// Every finding a monitor delivers (sinks see all severities), with the step.
struct delivered {
  std::vector<finding> all;
  [[nodiscard]] std::vector<finding> at_least(severity s) const {
    std::vector<finding> out;
    for (const auto& f : all)
      if (f.severity >= s) out.push_back(f);
    return out;
  }
  [[nodiscard]] std::vector<finding> named(const std::string& symptom) const {
    std::vector<finding> out;
    for (const auto& f : all)
      if (f.symptom == symptom) out.push_back(f);
    return out;
  }
};

// A monitor run: `step(i, mon)` observes step i; returns every delivered finding.
delivered run_monitor(mldiag::monitor& mon, int steps, const std::function<void(int, mldiag::monitor&)>& step) {
  auto out = std::make_shared<delivered>();
  mon.add_sink([out](const finding& f) { out->all.push_back(f); });
  for (int i = 0; i < steps; ++i) {
    mon.begin_step(i);
    step(i, mon);
    (void)mon.end_step();
  }
  return *out;
}

std::vector<float> filled(std::size_t n, float v) { return std::vector<float>(n, v); }

}  // namespace

TEST_CASE("a logged NaN gradient norm is evidence, not an absent value") {
  // Absent: nothing, and the snapshot says there is no norm.
  mldiag::recorder rec(8);
  rec.begin_step(0);
  rec.record_loss(1.0);
  CHECK_FALSE(rec.end_step().has_global_grad_norm());
  rec.begin_step(1);
  rec.record_grad_norm(not_a_number);
  const auto& s = rec.end_step();
  CHECK(s.has_grad_norm);
  CHECK(s.has_global_grad_norm());
  CHECK(std::isnan(s.global_grad_norm()));

  // Once with a finite loss: a warning that says the loss stayed finite; three in a row: critical.
  mldiag::monitor mon;
  const auto d = run_monitor(mon, 30, [](int i, mldiag::monitor& m) {
    m.observe_loss(2.0 - 0.01 * i);
    m.observe_grad_norm(i == 10 || (i >= 20 && i < 23) ? not_a_number : 1.0);
  });
  const auto nf = d.named("non-finite gradient norm");
  REQUIRE(nf.size() == 4);
  CHECK(nf[0].first_step == 10);
  CHECK(nf[0].severity == severity::warning);
  CHECK(nf[0].where.empty());
  CHECK(std::find(nf[0].evidence.begin(), nf[0].evidence.end(), std::pair<std::string, double>{"loss_finite", 1.0}) !=
        nf[0].evidence.end());
  CHECK(nf[1].severity == severity::warning);  // step 20: the first of three
  CHECK(nf[3].severity == severity::critical);  // step 22: the third in a row
  CHECK(nf[3].first_step == 22);

  // An fp16 loss scaler that lowers its scale at the same step skipped the step: info.
  mldiag::monitor amp;
  const auto a = run_monitor(amp, 20, [](int i, mldiag::monitor& m) {
    m.observe_loss(2.0 - 0.01 * i);
    m.observe_loss_scale(i < 12 ? 65536.0 : 32768.0);
    m.observe_grad_norm(i == 12 ? INFINITY : 1.0);
  });
  const auto skipped = a.named("skipped step: gradient overflow under loss scaling");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].severity == severity::info);
  CHECK(a.at_least(severity::warning).empty());
  CHECK(amp.open_diagnoses() == 0);

  // Inf given as the norm with no tensor recorded is not "values in tensors".
  mldiag::monitor inf;
  const auto b = run_monitor(inf, 3, [](int i, mldiag::monitor& m) { m.observe_grad_norm(i == 2 ? INFINITY : 1.0); });
  CHECK(b.named("non-finite values in tensors").empty());
  CHECK(b.named("non-finite gradient norm").size() == 1);
}

TEST_CASE("an all-NaN tensor has a NaN norm, an infinite one +Inf, as frameworks report it") {
  mldiag::recorder rec(4);
  rec.begin_step(0);
  rec.record(role::gradient, "w", filled(16, NAN));
  rec.record(role::gradient, "b", filled(4, 0.5f));
  const auto& s = rec.end_step();
  CHECK(s.gradients[0].stats.l2_norm() == 0.0);  // the finite elements' norm: none
  CHECK(std::isnan(mldiag::norm_of(s.gradients[0].stats)));
  CHECK(std::isnan(s.global_grad_norm()));
  rec.begin_step(1);
  std::vector<float> one_inf = filled(8, 1.0f);
  one_inf[3] = -INFINITY;
  rec.record(role::gradient, "w", one_inf);
  CHECK(mldiag::norm_of(rec.end_step().gradients[0].stats) == INFINITY);
  rec.begin_step(2);
  rec.record(role::gradient, "w", filled(4, 3.0f));
  CHECK(mldiag::norm_of(rec.end_step().gradients[0].stats) == doctest::Approx(6.0));  // sqrt(4 * 9)
}

TEST_CASE("non-finite values are localized to their origin, forward order first") {
  mldiag::detectors::non_finite d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  // The forward pass overflowed in layer 2; backprop spread NaN to every gradient.
  rec.begin_step(0);
  rec.record(role::gradient, "conv1.weight", filled(8, NAN));
  rec.record(role::gradient, "fc.weight", filled(8, NAN));
  rec.record(role::activation, "conv1.relu", filled(8, 1.0f));
  rec.record(role::activation, "conv2.relu", filled(8, INFINITY));
  rec.record(role::activation, "fc.out", filled(8, NAN));
  d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].where.front().first == "act/conv2.relu");
  CHECK(out[0].where[1].first == "act/fc.out");
  // Without activations: the gradient backward computes first, the last one recorded that holds it.
  out.clear();
  rec.begin_step(1);
  rec.record(role::gradient, "l0.weight", filled(8, NAN));
  rec.record(role::gradient, "l1.weight", filled(8, NAN));
  rec.record(role::gradient, "l2.weight", filled(8, 0.25f));
  d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].where.front().first == "grad/l1.weight");
  CHECK(out[0].where[1].first == "grad/l0.weight");
  const auto rule = std::find_if(out[0].evidence.begin(), out[0].evidence.end(), [](const auto& e) { return e.first == "origin_rule"; });
  REQUIRE(rule != out[0].evidence.end());
  CHECK(rule->second == 2.0);
}

TEST_CASE("findings downstream of a blow-up are consequences and open no diagnosis") {
  mldiag::monitor mon;
  std::vector<float> good = filled(64, 0.01f);
  std::vector<float> blown = filled(64, NAN);
  for (int i = 0; i < 20; ++i) blown[static_cast<std::size_t>(i)] = 0.0f;  // what is left: 20 zeros
  const auto d = run_monitor(mon, 80, [&](int i, mldiag::monitor& m) {
    m.observe_loss(i < 40 ? 2.0 - 0.01 * i : not_a_number);
    m.observe_lr(i < 60 ? 1e-3 : 50.0);  // at step 60 the lr goes absurd: downstream too
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
    m.observe_loss(i == 10 ? not_a_number : 2.0);
    m.observe_lr(i < 300 ? 1e-3 : 50.0);
  });
  REQUIRE(e.named("learning rate absurdly large").size() == 1);
  CHECK_FALSE(e.named("learning rate absurdly large")[0].is_consequence());
}

TEST_CASE("dead_activations is delivered again when a layer joins or the severity rises") {
  mldiag::detectors::dead_activations d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  std::vector<float> live(1000, 1.0f), dying(1000, 0.0f), dead(1000, 0.0f);
  for (int i = 0; i < 5; ++i) dying[static_cast<std::size_t>(i)] = 1.0f;  // 99.5% zeros
  for (int step = 0; step < 40; ++step) {
    rec.begin_step(step);
    rec.record(role::activation, "a.relu", step < 5 ? live : step < 25 ? dying : dead);
    rec.record(role::activation, "b.relu", step < 15 ? live : dying);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 3);
  CHECK(out[0].first_step == 5);
  CHECK(out[0].severity == severity::warning);
  CHECK(out[0].where.size() == 1);
  CHECK(out[1].first_step == 15);  // b.relu joins
  CHECK(out[1].where.size() == 2);
  CHECK(out[2].first_step == 25);  // a.relu from 99.5% to 100%: critical
  CHECK(out[2].severity == severity::critical);
  CHECK(out[2].where.front().first == "act/a.relu");
}

TEST_CASE("the training loss far below the validation loss: a repeated batch, not healthy overfitting") {
  auto gap = [](double final_train, double val) {
    mldiag::monitor mon;
    return run_monitor(mon, 300, [&](int i, mldiag::monitor& m) {
      m.observe_loss(i < 10 ? 2.3 : std::max(final_train, 2.3 * std::exp(-i / 20.0)));
      if (i % 50 == 49) m.observe_val_loss(std::max(val, 2.3 * std::exp(-i / 40.0)));
    }).named("training loss far below validation loss");
  };
  const auto same_batch = gap(0.0006, 0.93);
  REQUIRE(same_batch.size() == 1);
  CHECK(same_batch[0].first_step == 99);
  CHECK(gap(0.01, 0.1).empty());   // the digits MLP's healthy overfitting
  CHECK(gap(0.3, 0.45).empty());
}

TEST_CASE("the observed learning rate is compared with the configured peak") {
  auto run = [](double observed) {
    mldiag::monitor mon;
    (void)mon.check_configuration({.learning_rate = 1e-3});
    return run_monitor(mon, 20, [&](int, mldiag::monitor& m) {
      m.observe_loss(2.0);
      m.observe_lr(observed);
    }).named("learning rate above the configured peak");
  };
  CHECK(run(1.5e-3).empty());
  REQUIRE(run(1e-2).size() == 1);
  CHECK(run(1e-2)[0].first_step == 0);
  // Without a configured peak the detector is silent.
  mldiag::monitor plain;
  CHECK(run_monitor(plain, 5, [](int, mldiag::monitor& m) { m.observe_lr(1e-2); }).named("learning rate above the configured peak").empty());
}

TEST_CASE("exploding gradients under clipping: a contained jump is not critical on its size alone") {
  // An LSTM clipped at 5 (the zoo's): one step's norm jumps 142x its median and the loss, whose
  // update clip_grad_norm_ bounded, goes on falling. Unclipped, the same jump is critical on its
  // own; told the clip bound, the monitor needs the loss to answer.
  auto run = [](std::optional<double> clip, bool loss_answers) {
    mldiag::monitor mon;
    (void)mon.check_configuration({.max_grad_norm = clip});
    return run_monitor(mon, 80, [&](int i, mldiag::monitor& m) {
      const bool jump = i == 50;
      const bool up = loss_answers && i >= 51 && i < 54;
      m.observe_loss(up ? 4.0 : 2.0 - 0.01 * i);
      m.observe_grad_norm(jump || (loss_answers && i == 51) ? 142.0 : 1.0 + 0.01 * (i % 3));
    });
  };
  const auto unclipped = run(std::nullopt, false).named("exploding gradients");
  REQUIRE(unclipped.size() == 1);
  CHECK(unclipped[0].severity == severity::critical);
  CHECK(unclipped[0].first_step == 50);
  const auto contained = run(5.0, false);
  CHECK(contained.named("exploding gradients").empty());
  CHECK(contained.named("gradient norm jumped; the loss has not answered yet").size() == 1);
  // Clipped, but the loss answers (2 -> 4 at the second jump step): found, critical by its size.
  const auto answered = run(5.0, true).named("exploding gradients");
  REQUIRE(answered.size() == 1);
  CHECK(answered[0].severity == severity::critical);
  CHECK(answered[0].first_step == 50);
  CHECK(std::find(answered[0].evidence.begin(), answered[0].evidence.end(),
                  std::pair<std::string, double>{"clip_norm", 5.0}) != answered[0].evidence.end());
  // A bound that is no bound is refused, with what to do.
  mldiag::monitor bad;
  CHECK_THROWS_WITH_AS((void)bad.check_configuration({.max_grad_norm = -1.0}),
                       doctest::Contains("mldiag: training_config::max_grad_norm is -1"), mldiag::error);
  CHECK_THROWS_AS(mldiag::detectors::make_detector("exploding_gradients", {{"clip_norm", NAN}}), mldiag::error);
}

TEST_CASE("exploding gradients: a regime change while the loss falls is not an explosion") {
  // A network leaving its plateau: the gradient norm grows 0.2 -> 8 over 15 steps while the
  // loss falls 2.1 -> 1.0 (the LibTorch CNN of the issue).
  mldiag::monitor healthy;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.02);
  const auto h = run_monitor(healthy, 200, [&](int i, mldiag::monitor& m) {
    const double t = std::clamp((i - 40) / 15.0, 0.0, 1.0);
    m.observe_loss((2.1 - 1.1 * t - 0.002 * std::max(0, i - 55)) * (1.0 + noise(rng)));
    m.observe_grad_norm((0.2 + 7.8 * t) * (1.0 + 5 * noise(rng)));
  });
  CHECK(h.named("exploding gradients").empty());
  CHECK(h.at_least(severity::warning).empty());
  CHECK(h.named("gradient norm jumped; the loss has not answered yet").size() <= 1);

  // Gradients never zeroed: the norm accumulates, 40x in 100 steps, and the loss stops improving.
  mldiag::monitor faulty;
  const auto f = run_monitor(faulty, 200, [&](int i, mldiag::monitor& m) {
    const double loss = i < 100 ? 2.0 - 0.004 * i : 1.6 + 0.002 * (i - 100);
    m.observe_loss(loss * (1.0 + noise(rng)));
    m.observe_grad_norm(i < 100 ? 0.5 * (1.0 + noise(rng)) : 0.5 * (1.0 + 0.4 * (i - 100)));
  });
  const auto e = f.named("exploding gradients");
  REQUIRE(!e.empty());
  CHECK(e[0].severity >= severity::warning);
  CHECK(e[0].last_step > 100);
  CHECK(e[0].last_step <= 135);  // 10x the anchor by about step 123, held for growth_sustain (5) steps

  // A jump with a loss rise (BLOOM-176B's): found; a jump where no loss is recorded: found.
  mldiag::monitor bloom;
  const double norms[] = {0.24, 0.25, 0.23, 0.24, 0.95, 2.4, 15.9, 145, 960};
  const double losses[] = {2.20, 2.21, 2.19, 2.20, 2.3, 2.6, 3.4, 4.4, 5.1};
  const auto b = run_monitor(bloom, 9, [&](int i, mldiag::monitor& m) {
    m.observe_loss(losses[i]);
    m.observe_grad_norm(norms[i]);
  });
  REQUIRE(!b.named("exploding gradients").empty());
  CHECK(b.named("exploding gradients")[0].first_step == 5);  // 2.4 = 10x the baseline's 0.24, loss up 13%
  mldiag::monitor no_loss;
  const auto n = run_monitor(no_loss, 9, [&](int i, mldiag::monitor& m) { m.observe_grad_norm(norms[i]); });
  REQUIRE(!n.named("exploding gradients").empty());
  CHECK(n.named("exploding gradients")[0].first_step == 5);
}

TEST_CASE("loss_spike: small noisy batches do not spike, a real spike and a 10^8x jump do") {
  // Batch-64 losses late in training: median ~0.1, heavy right tail.
  std::mt19937_64 rng(11);
  std::gamma_distribution<double> batch(1.5, 0.07);
  mldiag::detectors::loss_spike d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (int i = 0; i < 5000; ++i) {
    rec.begin_step(i);
    rec.record_loss(batch(rng));
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
  out.clear();
  // Seven epoch lines, the last one 10^8x: critical at once, no second observation needed.
  mldiag::detectors::loss_spike e;
  for (int i = 0; i < 7; ++i) {
    rec.begin_step(10000 + i);
    rec.record_loss(i < 6 ? 1.0 - 0.05 * i : 1e8);
    e.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].severity == severity::critical);
  CHECK(out[0].first_step == 10006);
}

TEST_CASE("chance_level waits for a slow starter and still finds a run that never learns") {
  auto run = [](int learns_from) {
    mldiag::monitor mon({.classes = 10});
    std::mt19937_64 rng(5);
    std::normal_distribution<double> noise(0.0, 0.03);
    return run_monitor(mon, 400, [&](int i, mldiag::monitor& m) {
      const double chance = std::log(10.0);
      const double loss = i < learns_from ? chance : chance * std::exp(-(i - learns_from) / 80.0) + 0.1;
      m.observe_loss(loss + noise(rng));
    }).named("loss stuck at chance level");
  };
  CHECK(run(110).empty());  // LibTorch's MNIST recipe starts learning near step 100
  const auto stuck = run(100000);
  REQUIRE(stuck.size() == 1);
  CHECK(stuck[0].first_step == 199);
}

TEST_CASE("constant_loss: a loss that never moved, and a loss of exactly zero") {
  mldiag::detectors::constant_loss d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (int i = 0; i < 7; ++i) {  // seven epochs at 2.3026
    rec.begin_step(i);
    rec.record_loss(2.30258 + 1e-6 * (i % 2));
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
    rec.record_loss(losses[i]);
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
      rec.record_loss(series[i]);
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
    rec.record_loss(2.3 - 0.01 * i);
    m.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
}

TEST_CASE("the monitor gives the detectors that need classes their place once") {
  mldiag::monitor mon({.classes = 10});
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

namespace {

// A nearly separable table late in training, batch 8: most batches' losses near 0.005 with
// a log-normal spread, and one batch in 20 holding a confidently wrong row (loss 0.2-0.8, its
// gradient 10-60x the median); the gradient norms themselves swing over a decade. What the
// zoo's healthy `tabular` runs look like (issue 15: 4 loss_spike, 4 exploding_gradients and
// 1 divergence false alarms before the corroborations). Returns (loss, grad norm) per step.
std::vector<std::pair<double, double>> hard_batches(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u;
  std::vector<std::pair<double, double>> out;
  for (int i = 0; i < 400; ++i) {
    const double fall = std::exp(-i / 40.0);  // 0.69 -> near zero
    const bool hard = i > 100 && u(rng) < 0.05;
    // The spread grows as the loss nears zero: 5% at the start (0.68, 0.61, 0.60, 0.62 in a
    // zoo run), a factor of 2 (0.3 decades) at the end.
    const double spread = 0.02 + 0.28 * (1.0 - fall);
    const double loss = hard ? 0.2 + 0.6 * u(rng) : (0.69 * fall + 0.005) * std::pow(10.0, spread * z(rng));
    const double norm = hard ? (10.0 + 50.0 * u(rng)) * 0.07 : (0.5 * fall + 0.07) * std::pow(10.0, 0.4 * z(rng));
    out.emplace_back(loss, norm);
  }
  return out;
}

// The findings of detectors `d...` over a (loss, grad norm) series.
template <class... D>
std::vector<finding> replay_series(const std::vector<std::pair<double, double>>& series, D... d) {
  mldiag::recorder rec(4);
  std::vector<finding> out;
  for (std::size_t i = 0; i < series.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.record_loss(series[i].first);
    rec.record_grad_norm(series[i].second);
    const mldiag::observation o{rec.end_step(), rec.past(), rec.names()};
    (d.observe(o, out), ...);
  }
  return out;
}

}  // namespace

TEST_CASE("one hard batch near a zero loss is batch noise, not an explosion, a spike or a climb") {
  std::size_t off = 0;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    const auto series = hard_batches(seed);
    mldiag::monitor mon;
    const auto d = run_monitor(mon, static_cast<int>(series.size()), [&](int i, mldiag::monitor& m) {
      m.observe_loss(series[static_cast<std::size_t>(i)].first);
      m.observe_grad_norm(series[static_cast<std::size_t>(i)].second);
    });
    CHECK(d.named("exploding gradients").size() == 0);
    for (const auto& f : d.named("loss spike")) CHECK(f.severity < severity::warning);
    CHECK(d.named("sustained loss increase").empty());
    // The test can fail: with the corroborations switched off, the same runs raise warnings.
    using mldiag::detectors::exploding_gradients;
    using mldiag::detectors::loss_spike;
    exploding_gradients::config eg;
    eg.min_jitter_z = 0.0;
    eg.loss_up_steps = 1;
    eg.growth_sustain = 1;
    loss_spike::config ls;
    ls.immediate_min_rise = 0.0;
    ls.noisy_sustain = 1;
    for (const auto& f : replay_series(series, exploding_gradients(eg), loss_spike(ls)))
      off += f.severity >= severity::warning ? 1u : 0u;
  }
  CHECK(off > 0);
}

TEST_CASE("exploding gradients: a one-step loss rise inside a falling loss's batch noise is not decisive") {
  // The zoo's healthy `cnn/digits-res sgd warmup_cosine lr 0.2 batch 64 seed 1020`, steps 0-60
  // as its JSON Lines recorded them: a CNN at the edge of stability leaving its plateau. At
  // step 49-50 its norm is 11.8x the median of the last 100 and the loss 3.28 against a median
  // of 2.16 (1.5x, +1.1 nats) — but the loss is falling fast, its last 50 have a robust spread
  // of 0.18, and the rise is 6 of them; the next step it is 2.05 and the run trains to 0.05.
  const std::vector<double> loss = {
      2.31, 2.29, 2.31, 2.31, 2.3,  2.3,  2.31, 2.29, 2.29, 2.26, 2.28, 2.27, 2.27, 2.28, 2.27, 2.25,
      2.29, 2.27, 2.24, 2.25, 2.23, 2.23, 2.2,  2.16, 2.16, 2.11, 2.17, 2.1,  2.09, 2.04, 2.02, 2.04,
      1.92, 1.94, 2,    2.13, 1.89, 1.67, 1.71, 1.54, 1.86, 2.12, 2.17, 1.76, 1.51, 1.37, 1.27, 1.21,
      1.41, 2.03, 3.28, 2.05, 1.93, 1.83, 1.62, 1.51, 1.57, 1.35, 1.24, 1.06, 0.799};
  const std::vector<double> norm = {
      0.385, 0.423, 0.377, 0.398, 0.357, 0.316, 0.414, 0.416, 0.35,  0.411, 0.32, 0.565, 0.412, 0.38, 0.267, 0.517,
      0.512, 0.409, 0.4,   0.354, 0.422, 0.527, 0.505, 0.614, 0.576, 0.531, 0.801, 0.73, 0.916, 1.02, 1.25,  1.47,
      1.2,   1.62,  2.4,   2.7,   1.67,  1.57,  1.77,  2.3,   4.9,   3.44,  2.75, 1.12, 1.09,  1.27, 1.31,  1.92,
      3.06,  6.81,  6.76,  0.829, 0.898, 0.946, 0.987, 1.28,  1.49,  1.45,  1.53, 1.83, 1.37};
  REQUIRE(loss.size() == norm.size());
  std::vector<std::pair<double, double>> series;
  for (std::size_t i = 0; i < loss.size(); ++i) series.emplace_back(loss[i], norm[i]);
  using mldiag::detectors::exploding_gradients;
  const auto warnings = [&](exploding_gradients::config c) {
    std::size_t n = 0;
    for (const auto& f : replay_series(series, exploding_gradients(c)))
      n += f.severity >= severity::warning ? 1u : 0u;
    return n;
  };
  CHECK(warnings({}) == 0);
  // The test can fail: without the batch-noise line the one step decides (as it did before).
  exploding_gradients::config no_mads;
  no_mads.decisive_mads = 0.0;
  CHECK(warnings(no_mads) > 0);
  // The same jump over a steady loss of 2.0 (spread 0.01) is decisive: 3.28 is 1.6x its
  // median, 1.28 nats and a hundred MADs above it.
  for (std::size_t i = 0; i < series.size(); ++i)
    if (i != 50) series[i].first = 2.0 + 0.01 * std::sin(static_cast<double>(i));
  CHECK(warnings({}) > 0);
}

TEST_CASE("exploding gradients: a steady growth is found through a noisy baseline's jitter bar") {
  // Gradients never zeroed on a noisy run: the norm, already swinging 2x step to step, then
  // grows 1.1x per step on top while the loss stalls. The jitter is of the baseline's
  // differences, so the growth itself does not raise the bar.
  std::mt19937_64 rng(9);
  std::normal_distribution<double> z;
  mldiag::monitor mon;
  const auto d = run_monitor(mon, 200, [&](int i, mldiag::monitor& m) {
    m.observe_loss(1.0 + 0.02 * z(rng) + (i > 100 ? 0.001 * (i - 100) : 0.0));
    m.observe_grad_norm(std::pow(10.0, 0.15 * z(rng)) * (i > 100 ? std::pow(1.1, i - 100) : 1.0));
  });
  const auto e = d.named("exploding gradients");
  REQUIRE(!e.empty());
  CHECK(e[0].severity >= severity::warning);
  CHECK(e[0].last_step > 100);
  CHECK(e[0].last_step <= 150);  // 1.1^25 = 11x: found within about 50 steps of the onset
}

TEST_CASE("divergence: a climb is not two 2% rises and one outlier batch") {
  mldiag::detectors::divergence d;
  mldiag::recorder rec(4);
  std::vector<finding> out;
  const double losses[] = {0.010, 0.006, 0.008, 0.005, 0.009, 0.007, 0.006, 0.0074, 0.0077, 0.256};
  for (int i = 0; i < 10; ++i) {
    rec.begin_step(i);
    rec.record_loss(losses[i]);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  CHECK(out.empty());
  // A climb (BigScience 104B experiment 2) is still found.
  mldiag::detectors::divergence c;
  const double climb[] = {6.3, 6.4, 6.35, 6.37, 6.6, 7.31, 9.12, 10.24};
  for (int i = 0; i < 8; ++i) {
    rec.begin_step(100 + i);
    rec.record_loss(climb[i]);
    c.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(!out.empty());
  CHECK(out[0].symptom == "sustained loss increase");
}

TEST_CASE("input_scale: raw 0-255 pixels are found at step 0, standardized features are not") {
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int> pixel(0, 255);
  std::normal_distribution<double> z;
  std::vector<float> raw(32 * 784), standard(32 * 30);
  long double sq = 0.0L;
  for (auto& v : raw) {
    v = static_cast<float>(pixel(rng));
    sq += static_cast<long double>(v) * v;
  }
  const double reference_rms = static_cast<double>(std::sqrt(sq / static_cast<long double>(raw.size())));
  for (auto& v : standard) v = static_cast<float>(z(rng));
  for (std::size_t i = 0; i < standard.size(); i += 97) standard[i] = 25.0f;  // heavy tails of a real table

  mldiag::monitor faulty;
  const auto f = run_monitor(faulty, 3, [&](int, mldiag::monitor& m) {
    m.observe_loss(2.3);
    m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(raw)));
  });
  const auto found = f.named("inputs not normalized");
  REQUIRE(found.size() == 1);  // once per onset
  CHECK(found[0].first_step == 0);
  CHECK(found[0].severity == severity::warning);
  REQUIRE(!found[0].where.empty());
  CHECK(found[0].where[0].first == "input/x");
  CHECK(found[0].where[0].second == doctest::Approx(reference_rms).epsilon(1e-9));

  // Inputs recorded every 4th step are one onset, not one per recording.
  mldiag::monitor sparse;
  const auto e = run_monitor(sparse, 12, [&](int i, mldiag::monitor& m) {
    m.observe_loss(2.3);
    if (i % 4 == 0) m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(raw)));
  });
  CHECK(e.named("inputs not normalized").size() == 1);

  mldiag::monitor healthy;
  const auto h = run_monitor(healthy, 3, [&](int, mldiag::monitor& m) {
    m.observe_loss(2.3);
    m.observe(role::input, "x", mldiag::compute_stats(std::span<const float>(standard)));
  });
  CHECK(h.named("inputs not normalized").empty());
  CHECK_THROWS_WITH_AS(mldiag::detectors::input_scale({.max_rms = 0.0}), doctest::Contains("mldiag: input_scale: max_rms"),
                       mldiag::error);
}

TEST_CASE("non-finite inputs are the origin: the data, before any layer") {
  std::vector<float> x = filled(64, 0.5f), act = filled(64, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  act[5] = std::numeric_limits<float>::quiet_NaN();
  mldiag::monitor mon;
  const auto d = run_monitor(mon, 1, [&](int, mldiag::monitor& m) {
    m.observe_loss(not_a_number);
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

// Round 5 of the zoo: tensors that start at zero and losses whose floor is far above 0. Each
// case is recorded from a healthy zoo run (or written from its numbers), and each has a twin
// that shows the old rule on the same numbers, so that the test can fail.

TEST_CASE("dead_activations: a layer that starts at zero and comes alive is not dead, one that stays dead is") {
  // word2vec's output vectors start at 0: its scores are all zero at step 0, 36% zero at
  // step 1 (the zoo's skip-gram runs). A ReLU whose bias is pushed to -50 stays at 100%.
  std::vector<float> scores0(640, 0.0f), scores1(640, 0.0f), live(640, 0.5f), dead(640, 0.0f);
  for (std::size_t i = 0; i < 640; i += 3) scores1[i] = 0.01f;  // a third left zero
  for (std::size_t i = 0; i < 640; i += 2) scores1[i] = 0.02f;
  const auto deliver = [&](mldiag::detectors::dead_activations d, int dies_at) {
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 30; ++step) {
      rec.begin_step(step);
      rec.record(role::activation, "context.out", step == 0 ? scores0 : step == 1 ? scores1 : live);
      rec.record(role::activation, "mlp.relu", step >= dies_at ? dead : live);
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(deliver({}, 1000).empty());
  const auto f = deliver({}, 20);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == severity::critical);
  CHECK(f[0].first_step == 20);
  CHECK(f[0].last_step == 20);  // alive before: no wait
  CHECK(f[0].where.front().first == "act/mlp.relu");
  // Dead from its first observation on: never seen alive, so the second observation decides.
  const auto born_dead = deliver({}, 0);
  REQUIRE(born_dead.size() == 1);
  CHECK(born_dead[0].first_step == 0);
  CHECK(born_dead[0].last_step == 1);
  // The twin: a streak of one observation calls the zero-initialized layer dead at step 0.
  mldiag::detectors::dead_activations::config one;
  one.patience = 1;
  const auto old = deliver(mldiag::detectors::dead_activations(one), 1000);
  REQUIRE(old.size() == 1);
  CHECK(old[0].first_step == 0);
  CHECK(old[0].severity == severity::critical);
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
      rec.record_loss(4.1588826 - 1e-7 * step);
      rec.record(role::gradient, "context.weight", g);
      rec.record(role::parameter, "context.weight", param);
      rec.record(role::update, "context.weight", u);
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
    rec.record_loss(2.302585);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out[0].severity == severity::warning);
}

TEST_CASE("embedding_growth: a small initialization settling at its scale is not growth without bound") {
  const auto run = [](mldiag::detectors::embedding_growth d, const std::function<double(int)>& norm) {
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 400; ++step) {
      rec.begin_step(step);
      // A tensor of 100 equal elements has the norm 10 |v|.
      rec.record(role::parameter, "embed.weight", filled(100, static_cast<float>(norm(step) / 10.0)));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  // word2vec's input vectors (the zoo, round 5): 0.62 -> ~26 as the loss falls, then settled.
  const auto settling = [](int t) { return 0.62 + 25.0 * (1.0 - std::exp(-t / 40.0)); };
  CHECK(run({}, settling).empty());
  // Growth without bound keeps its pace: linear, 0.4% of the start per step; and an Adam random
  // walk at 100x the learning rate from step 100 (norm^2 grows linearly: 70 -> 142 in 100 steps).
  const auto linear = run({}, [](int t) { return 10.0 * (1.0 + 0.004 * t); });
  REQUIRE(linear.size() == 1);
  CHECK(linear[0].last_step == 199);
  const auto walk = run({}, [](int t) { return std::sqrt(4900.0 + 152.0 * std::max(0, t - 100)); });
  REQUIRE(walk.size() == 1);
  CHECK(walk[0].last_step == 199);
  // The twin: without the pace line the settling tensor is reported when the window fills.
  mldiag::detectors::embedding_growth::config no_pace;
  no_pace.min_pace_kept = 0.0;
  CHECK(run(mldiag::detectors::embedding_growth(no_pace), settling).size() == 1);
}

TEST_CASE("exploding gradients: a plateau left slowly and a zero-initialized first step are not explosions") {
  using mldiag::detectors::exploding_gradients;
  const auto warnings = [](const std::vector<double>& loss, const std::vector<double>& norm, exploding_gradients::config c) {
    REQUIRE(loss.size() == norm.size());
    std::vector<std::pair<double, double>> series;
    for (std::size_t i = 0; i < loss.size(); ++i) series.emplace_back(loss[i], norm[i]);
    std::size_t n = 0;
    for (const auto& f : replay_series(series, exploding_gradients(c))) n += f.severity >= severity::warning ? 1u : 0u;
    return n;
  };
  // `skipgram/licenses-d100-w5 momentum constant lr 0.5 batch 64 seed 1001`, steps 0-99 as its
  // JSON Lines recorded them: the output vectors start at 0, the gradient grows 30x as they
  // grow, and the loss leaves 6 ln 2 by 6% — 0.9% when the norm passes 16x, but with a batch
  // noise of 1e-5 to 1e-3 every fall is out of the noise.
  const std::vector<double> slow_loss = {
      4.1588826, 4.1588826, 4.1588821, 4.1588821, 4.1588821, 4.1588826, 4.1588802, 4.1588783, 4.1588755, 4.1588802,
      4.1588778, 4.1588759, 4.1588774, 4.1588778, 4.1588769, 4.1588783, 4.1588721, 4.1588683, 4.1588659, 4.1588545,
      4.1588607, 4.1588497, 4.1588488, 4.158854,  4.1588459, 4.1588392, 4.1588192, 4.1588573, 4.1588645, 4.1588345,
      4.1588306, 4.158814,  4.1587548, 4.1587839, 4.1587391, 4.1587405, 4.1587086, 4.1587486, 4.1587038, 4.158649,
      4.1585984, 4.1586418, 4.1584401, 4.1584301, 4.1585736, 4.158442,  4.1578045, 4.1576338, 4.1584787, 4.1580591,
      4.1577024, 4.1575618, 4.1577978, 4.1573858, 4.1571488, 4.1564903, 4.1570597, 4.1557555, 4.1560497, 4.1546941,
      4.1565027, 4.1556435, 4.1559429, 4.1537457, 4.1525731, 4.1523151, 4.1525736, 4.1531782, 4.1492109, 4.1513138,
      4.1454086, 4.1461396, 4.1468616, 4.1455145, 4.1420445, 4.1439075, 4.1311121, 4.1234078, 4.1229119, 4.1276073,
      4.1304722, 4.1179261, 4.1211362, 4.125999,  4.1177564, 4.056953,  4.0829835, 4.0396338, 4.0714493, 4.0558438,
      4.0667286, 4.0470181, 4.0279508, 3.9896038, 4.0352068, 4.0362744, 3.9932632, 3.9781084, 3.8869243, 3.9281678};
  const std::vector<double> slow_norm = {
      0.004418, 0.004407, 0.004551, 0.004546, 0.004468, 0.004413, 0.004443, 0.004444, 0.004461, 0.004459, 0.004451,
      0.004508, 0.004492, 0.004578, 0.00465,  0.004541, 0.004572, 0.004644, 0.004696, 0.004805, 0.004671, 0.004912,
      0.004811, 0.005051, 0.004897, 0.005043, 0.004973, 0.005055, 0.005227, 0.00518,  0.005377, 0.00557,  0.006198,
      0.005884, 0.006105, 0.006169, 0.006261, 0.006129, 0.006821, 0.007009, 0.007747, 0.006918, 0.008522, 0.009039,
      0.007471, 0.008295, 0.01375,  0.01448,  0.008793, 0.01163,  0.01324,  0.01433,  0.01373,  0.01255,  0.0157,
      0.01733,  0.01599,  0.02295,  0.02075,  0.02379,  0.01839,  0.0214,   0.02323,  0.02631,  0.02597,  0.02835,
      0.03177,  0.03063,  0.03697,  0.0288,   0.04078,  0.03851,  0.03901,  0.03671,  0.04291,  0.04689,  0.05878,
      0.06634,  0.06959,  0.06161,  0.05724,  0.06832,  0.06896,  0.06754,  0.07443,  0.1113,   0.09106,  0.1135,
      0.0938,   0.1023,   0.1043,   0.1038,   0.1101,   0.1268,   0.1204,   0.1184,   0.13,     0.1358,   0.1478,
      0.1412};
  CHECK(warnings(slow_loss, slow_norm, {}) == 0);
  exploding_gradients::config tenth_only;  // the twin: progress only as a 10% fall
  tenth_only.progress_z = 0.0;
  CHECK(warnings(slow_loss, slow_norm, tenth_only) > 0);
  // `skipgram/licenses-d64-w3 adagrad constant lr 0.1 batch 8 seed 5001`, steps 0-39: at step
  // 0 only the zero-initialized output vectors have a gradient (0.016); from step 1 the input
  // vectors' joins it (0.17-0.9) while a batch of 8 keeps the loss noisy and flat.
  const std::vector<double> first_loss = {4.159, 4.158, 4.158, 4.158, 4.186, 4.161, 4.133, 4.148, 4.138, 4.107,
                                          4.206, 4.085, 4.162, 4.066, 4.053, 4.124, 4.138, 4.01,  4.191, 4.043,
                                          4.039, 3.9,   4.203, 3.943, 4.133, 4.202, 4.017, 3.668, 4.134, 4.207,
                                          3.998, 4.055, 3.955, 3.874, 3.468, 4.047, 4.001, 4.126, 3.639, 4.008};
  const std::vector<double> first_norm = {
      0.01597, 0.1693, 0.2083, 0.2952, 0.3734, 0.3722, 0.4404, 0.4534, 0.4417, 0.5151, 0.5943, 0.4868, 0.5272, 0.5734,
      0.6067,  0.5312, 0.5888, 0.6915, 0.6148, 0.5586, 0.6902, 0.7794, 0.6388, 0.6413, 0.6676, 0.6879, 0.6141, 0.7329,
      0.7313,  0.5875, 0.6981, 0.7209, 0.6729, 0.723,  0.6812, 0.839,  0.8366, 0.8775, 0.7082, 0.8894};
  CHECK(warnings(first_loss, first_norm, {}) == 0);
  exploding_gradients::config no_settle;  // the twin: a baseline of step 0 alone
  no_settle.settle = 1;
  CHECK(warnings(first_loss, first_norm, no_settle) > 0);
  // An explosion after the baseline has formed is still found: the same run with its norm
  // x30 from step 20 while the loss climbs.
  auto late_norm = first_norm;
  auto late_loss = first_loss;
  for (std::size_t i = 20; i < late_norm.size(); ++i) {
    late_norm[i] *= 30.0;
    late_loss[i] += 0.1 * static_cast<double>(i - 19);
  }
  CHECK(warnings(late_loss, late_norm, {}) > 0);
}

// Round 6 of the zoo (held-out, measured once) exposed three assumptions that a tensor
// starting at zero and a checkpoint break; each mechanism below has its twin that must still
// fire.

TEST_CASE("vanishing_gradients: a gradient through a factor that starts at zero is not vanishing through depth") {
  // LoRA (PEFT's initialization): lora_B = 0, so lora_A's gradient s B^T delta x^T is exactly 0
  // at step 0 and grows with ||B|| (the zoo's round 6: 2.9e-4 of the new head's RMS at step 4,
  // 1e-3 near step 17), while lora_B's gradient s delta (A x)^T is normal from the start.
  enum class first_layer { lora, vanishing };
  const auto run = [](first_layer kind, std::size_t input_tensors) {
    mldiag::detectors::vanishing_gradients::config c;
    c.input_tensors = input_tensors;
    mldiag::detectors::vanishing_gradients d(c);
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 40; ++step) {
      rec.begin_step(step);
      const bool lora = kind == first_layer::lora;
      const double a_rms = lora ? 3e-6 * step : 1e-6, b_rms = lora ? 0.01 : 1e-6;
      rec.record(role::gradient, "fc1.lora_A.weight", filled(256, static_cast<float>(a_rms)));
      rec.record(role::gradient, "fc1.lora_B.weight", filled(256, static_cast<float>(b_rms)));
      rec.record(role::gradient, "head.weight", filled(64, 0.05f));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run(first_layer::lora, 2).empty());
  // The mechanism's twin: the first tensor alone as the input side (the rule before round 6)
  // reads lora_A's ratio, 2.4e-4 at step 4, as vanishing.
  CHECK(run(first_layer::lora, 1).size() == 1);
  // And the fault's: both tensors of the first layer at 2e-5 of the last, found at step 4.
  const auto vanishing = run(first_layer::vanishing, 2);
  REQUIRE(vanishing.size() == 1);
  CHECK(vanishing[0].first_step == 0);
  CHECK(vanishing[0].last_step == 4);
  CHECK(vanishing[0].where.front().first == "grad/fc1.lora_A.weight");
}

TEST_CASE("update_ratio: a step small because its gradient is small is not an update too small") {
  // SGD at 0.01 over three weight matrices of 256 elements at 1.0 (norm 16); a residual branch
  // behind a ReZero gate at ~0 gets a gradient of 5e-6 per element, so its step is 5e-8 of the
  // tensor. `rate` is each tensor's learning rate, `grad` its gradient per element.
  struct tensor_case {
    const char* name;
    double rate, grad;
  };
  const auto run = [](std::vector<tensor_case> tensors) {
    mldiag::detectors::update_ratio d;
    mldiag::recorder rec(4);
    std::vector<finding> out;
    const auto param = filled(256, 1.0f);
    for (int step = 0; step < 10; ++step) {
      rec.begin_step(step);
      for (const auto& t : tensors) {
        rec.record(role::parameter, t.name, param);
        rec.record(role::gradient, t.name, filled(256, static_cast<float>(t.grad)));
        rec.record(role::update, t.name, filled(256, static_cast<float>(t.rate * t.grad)));
      }
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run({{"stem.weight", 0.01, 0.01}, {"blocks.0.conv.weight", 0.01, 5e-6}, {"head.weight", 0.01, 0.01}}).empty());
  // Twins: the branch in a parameter group of its own at 1e-8 (its gradient normal): stepped at
  // a millionth of the others' rate; and a learning rate of 1e-9 for all (nothing moves).
  const auto own_group = run({{"stem.weight", 0.01, 0.01}, {"blocks.0.conv.weight", 1e-8, 0.01}, {"head.weight", 0.01, 0.01}});
  REQUIRE(own_group.size() == 1);
  CHECK(own_group[0].symptom == "update ratio too small");
  CHECK(own_group[0].where.front().first == "param/blocks.0.conv.weight");
  const auto all_small = run({{"stem.weight", 1e-9, 0.01}, {"blocks.0.conv.weight", 1e-9, 0.01}, {"head.weight", 1e-9, 0.01}});
  REQUIRE(all_small.size() == 1);
  CHECK(all_small[0].symptom == "update ratio too small");
}

TEST_CASE("from_checkpoint: a fine-tuned run's first loss is not judged against ln(classes)") {
  // A reused head answering its old classes: 3.3 against ln 5 = 1.61, falling to 0.4.
  const auto run = [](bool from_checkpoint) {
    mldiag::monitor mon({.classes = 5, .from_checkpoint = from_checkpoint});
    const auto d = run_monitor(mon, 60, [](int i, mldiag::monitor& m) { m.observe_loss(0.4 + 2.9 * std::exp(-i / 10.0)); });
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
  mldiag::monitor mon({.classes = 5, .from_checkpoint = true});
  bool chance = false, initial = false;
  for (std::size_t i = 0; i < mon.detector_set().size(); ++i) {
    chance = chance || mon.detector_set()[i].name() == "chance_level";
    initial = initial || mon.detector_set()[i].name() == "initial_loss";
  }
  CHECK(chance);
  CHECK_FALSE(initial);
}

TEST_CASE("loss_spike: one hard batch of 8 is not critical at once, a loss that stays up is") {
  // Batch-8 losses late in training (median ~0.14, gamma-shaped: the largest of 50 near 0.5),
  // then one batch with a confidently wrong row: 1.8, 13x the median, about 3x the window's
  // largest. Then the twin: the same value held.
  const auto run = [](int held) {
    std::mt19937_64 rng(5);
    std::gamma_distribution<double> batch(2.0, 0.07);
    mldiag::detectors::loss_spike d;
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int i = 0; i < 300; ++i) {
      rec.begin_step(i);
      rec.record_loss(i >= 200 && i < 200 + held ? 1.8 : batch(rng));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run(1).empty());
  const auto held = run(2);
  REQUIRE(held.size() == 1);
  CHECK(held[0].first_step == 200);
  CHECK(held[0].last_step == 201);
  CHECK(held[0].severity == severity::critical);
}

TEST_CASE("exploding gradients: an anchor set by a stretch of easy batches does not make hard ones a growth") {
  // A healthy batch-8 run of 2000 steps as the zoo recorded it (round 6): late in training most
  // batches are easy (norm ~0.05-0.5) and some hold a hard row (norm 2-20), so the mean of 10
  // losses makes "progress" exactly when a stretch of easy batches comes, and the last ten
  // norms then sit 8x below the run's median. An anchor taken from them (the rule before round
  // 6) made hard batches a 12-17x "growth" six times after step 1600.
  std::vector<std::pair<double, double>> series;
  {
    std::ifstream in(std::string(MLDIAG_DETECTOR_DATA) + "/fixup_rezero_batch8.csv");
    REQUIRE(in.good());
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream row(line);
      double step = 0, loss = 0, norm = 0;
      char comma = 0;
      row >> step >> comma >> loss >> comma >> norm;
      REQUIRE(row);
      series.emplace_back(loss, norm);
    }
  }
  REQUIRE(series.size() == 2000);
  const auto warnings = [](const std::vector<finding>& found) {
    std::vector<finding> w;
    for (const auto& f : found)
      if (f.severity >= severity::warning) w.push_back(f);
    return w;
  };
  CHECK(warnings(replay_series(series, mldiag::detectors::exploding_gradients{})).empty());
  // The twin: gradients never zeroed from step 1500 (the norm a running sum of the last
  // gradients, ~0.5 a step) while the loss stalls at its level then: found within 100 steps.
  auto faulted = series;
  double sum = 0.0;
  for (std::size_t i = 1500; i < faulted.size(); ++i) {
    sum += 0.5;
    faulted[i] = {0.3, sum};
  }
  const auto found = warnings(replay_series(faulted, mldiag::detectors::exploding_gradients{}));
  REQUIRE(!found.empty());
  CHECK(found[0].last_step >= 1500);
  CHECK(found[0].last_step <= 1600);
}

TEST_CASE("train_val_gap: a loss that goes negative is measured by its fall, not by a ratio") {
  // A Gaussian NLL (the zoo's round 7): training 0.5 -> -0.8, validation settling at 0.6 — an
  // ordinary generalization gap of 1.4 against a fall of 1.3. The twin: a repeated batch,
  // training -> -3, validation climbing to 200.
  const auto run = [](double final_train, double final_val) {
    mldiag::monitor mon;
    return run_monitor(mon, 300, [&](int i, mldiag::monitor& m) {
      const double t = 1.0 - std::exp(-i / 40.0);
      m.observe_loss(0.5 + (final_train - 0.5) * t);
      if (i % 50 == 49) m.observe_val_loss(0.5 + (final_val - 0.5) * t);
    }).named("training loss far below validation loss");
  };
  CHECK(run(-0.8, 0.6).empty());
  const auto repeated = run(-3.0, 200.0);
  REQUIRE(repeated.size() == 1);
  CHECK(repeated[0].first_step == 49);
}

TEST_CASE("exploding gradients: first steps that overshoot and recover are info, ones that do not recover are not") {
  // The first 60 steps of a healthy zoo run (held-out round 7: a QAT MLP, Adagrad at 0.06,
  // batch 64): Adagrad's first update moves every weight by about the learning rate, and the
  // loss goes 2.32 -> 30-41 for four steps with the norm 57-92x its first value, then trains.
  // Warned at step 1 before (a baseline of one norm, a decisive loss).
  const std::vector<std::pair<double, double>> recorded = {
      {2.321, 1.078}, {29.74, 61.87}, {28.92, 99.59}, {40.7, 72.08}, {34.76, 49.53}, {9.455, 32.56},
      {5.884, 17.51}, {2.499, 8.371}, {2.114, 7.439}, {1.311, 3.823}, {1.022, 4.163}, {1.114, 3.07},
      {0.9707, 2.262}, {1.026, 3.249}, {0.9529, 3.569}, {1.64, 8.053}, {1.139, 4.655}, {1.644, 7.554},
      {1.018, 2.297}, {1.154, 4.184}, {0.8095, 3.303}, {0.9656, 4.062}, {1.089, 3.854}, {1.012, 3.131},
      {0.7289, 1.929}, {0.6142, 1.697}, {0.6244, 1.664}, {0.5519, 1.064}, {0.6729, 1.664}, {0.845, 2.427},
      {0.8407, 1.871}, {0.6322, 1.355}, {0.9598, 2.833}, {0.7515, 3.107}, {0.5995, 1.992}, {0.8881, 3.14},
      {0.8578, 3.009}, {0.9017, 2.015}, {0.6292, 1.346}, {0.5613, 1.686}, {0.7415, 1.719}, {0.7619, 2.956},
      {0.7462, 1.83}, {0.6544, 1.762}, {0.6901, 1.288}, {0.8552, 4.099}, {0.7693, 2.67}, {0.7363, 1.961},
      {0.6881, 1.019}, {0.8356, 1.752}, {0.7605, 1.835}, {0.7343, 2.071}, {0.5543, 1.71}, {0.7165, 1.315},
      {0.6618, 1.93}, {0.7401, 2.398}, {0.7883, 2.688}, {0.5239, 0.9208}, {0.808, 1.577}, {0.7776, 2.484}};
  const auto found = replay_series(recorded, mldiag::detectors::exploding_gradients{}, mldiag::detectors::loss_spike{});
  for (const auto& f : found) CHECK_MESSAGE(f.severity < severity::warning, f.symptom, " at ", f.last_step);
  REQUIRE(found.size() == 1);
  CHECK(found[0].symptom == mldiag::symptoms::first_steps_overshot);
  CHECK(found[0].first_step == 1);
  // By hand: the median of the losses of steps 7-9 (2.499, 2.114, 1.311) is 2.114, within 5%
  // of the loss before the jump (2.321); steps 5-7's (9.455, 5.884, 2.499) is not.
  CHECK(found[0].last_step == 9);

  // The twin that does not recover (a learning rate that overshoots for good): the loss stays
  // at 30: the jump's verdict, `sustain` (10) norms after it, from its first step.
  auto stuck = recorded;
  for (std::size_t i = 5; i < stuck.size(); ++i) stuck[i] = {30.0 + 0.1 * static_cast<double>(i % 3), 60.0};
  const auto up = replay_series(stuck, mldiag::detectors::exploding_gradients{});
  REQUIRE(!up.empty());
  CHECK(up[0].symptom == mldiag::symptoms::exploding_gradients);
  CHECK(up[0].severity == severity::warning);  // peak 92x: below critical_ratio (100)
  CHECK(up[0].first_step == 1);
  CHECK(up[0].last_step == 11);
  // And one whose loss goes non-finite while it waits: at once.
  auto blown = recorded;
  blown[3].first = std::numeric_limits<double>::infinity();
  const auto inf = replay_series(blown, mldiag::detectors::exploding_gradients{});
  REQUIRE(!inf.empty());
  CHECK(inf[0].severity >= severity::warning);
  CHECK(inf[0].last_step == 3);
}

TEST_CASE("loss_spike: a baseline of fewer than five losses judges only the unmistakable") {
  // The first 40 losses of a healthy zoo run (held-out round 7: a Gaussian NLL, RMSprop,
  // batch 8): 0.45, 0.49, then 0.76, 0.78 — 1.6x a median of two, warned at step 3 before.
  const std::vector<double> recorded = {
      0.4536, 0.485,  0.757,  0.7786,   0.13,    0.3463, 0.2881,  0.3508,   0.1103,  0.3843,
      0.3034, 0.07155, 0.2475, 0.2384,  0.06126, 0.3267, -0.03542, 0.5418,  0.2357,  0.2951,
      0.3128, 0.2069, 0.1771, -0.05666, 0.6273,  0.1959, 0.3808,  0.2614,   0.3033,  0.3576,
      0.06355, 0.4503, 0.03501, 0.2908, 0.5792,  0.1569, 0.09012, 0.6629,   0.2499,  0.2037};
  const auto spikes = [](const std::vector<double>& losses) {
    std::vector<std::pair<double, double>> series;
    for (const double l : losses) series.emplace_back(l, 1.0);
    return replay_series(series, mldiag::detectors::loss_spike{});
  };
  CHECK(spikes(recorded).empty());
  // The twins: the same sustained rise once five losses are known is a spike (1.2 and 1.3
  // against a median near 0.45, far out of its noise), and a 100x loss is critical at once
  // even on a baseline of two.
  std::vector<double> later = {0.45, 0.47, 0.44, 0.46, 0.45, 0.46, 1.2, 1.3};
  const auto s = spikes(later);
  REQUIRE(s.size() == 1);
  CHECK(s[0].first_step == 6);
  CHECK(s[0].last_step == 7);
  const auto early = spikes({0.45, 0.47, 1.2, 1.3, 0.46});
  CHECK(early.empty());
  const auto huge = spikes({0.45, 0.47, 50.0});
  REQUIRE(huge.size() == 1);
  CHECK(huge[0].severity == severity::critical);
  CHECK(huge[0].last_step == 2);
}

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
    mldiag::monitor mon;
    (void)mon.check_configuration({.full_batch = full_batch});
    return run_monitor(mon, 200, [&](int i, mldiag::monitor& m) {
      m.observe_loss(1.0 / (1.0 + i));
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
