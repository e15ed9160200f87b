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
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
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
  CHECK(out[0].first_step == 102);
  // A loss that moves is not constant.
  mldiag::detectors::constant_loss m;
  out.clear();
  for (int i = 0; i < 10; ++i) {
    rec.begin_step(200 + i);
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
