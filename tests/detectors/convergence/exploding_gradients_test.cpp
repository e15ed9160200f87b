// SPDX-License-Identifier: Apache-2.0
// exploding_gradients: a jump or a growth of the gradient norm, judged by the loss's answer, the
// baseline's noise and the clip bound; each false alarm of the zoo has its twin that still fires.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/exploding_gradients.hpp"
#include "mldiag/detectors/early_anomaly/loss_spike.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag_test::run_monitor;
using mldiag_test::replay_series;
using mldiag::finding;
using mldiag::severity;

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

}  // namespace

TEST_CASE("exploding_gradients fires when the norm jumps 50x and not on 5x noise") {
  mldiag::detectors::exploding_gradients d;
  CHECK(run(d, 300, healthy).empty());
  mldiag::detectors::exploding_gradients d2;
  CHECK(run(d2, 300, [](int step, mldiag::recorder&, double&, double& g) { if (step % 50 == 10) g *= 5; }).empty());
  // The loss answers (up 50% more each step): 50x at step 200 is info ("the loss has not
  // answered yet"), and the second step up decides, critical by its size (100x at 201).
  mldiag::detectors::exploding_gradients d3;
  auto f = run(d3, 300, [](int step, mldiag::recorder&, double& loss, double& g) {
    if (step >= 200) g *= 50 * (step - 199), loss *= 1.0 + 0.5 * (step - 199);
  });
  REQUIRE(!f.empty());
  CHECK(f.front().severity == mldiag::severity::info);
  CHECK(f.front().first_step == 200);
  std::erase_if(f, [](const mldiag::finding& x) { return x.severity == mldiag::severity::info; });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 200);  // every finding of the jump carries its first step
  CHECK(f.front().last_step == 201);
  CHECK(f.front().severity == mldiag::severity::critical);
  CHECK(f.back().severity == mldiag::severity::critical);
  CHECK(f.front().where.front().first == "grad/layers.0.w");
  // The same norms with the loss unmoved (issue 38: size alone decides nothing where a loss is
  // recorded): nothing above info until the norm has stayed up without progress, `sustain`
  // (10) steps from the jump (the growth rule, from its anchor, a step sooner); then critical
  // by its size.
  mldiag::detectors::exploding_gradients d4;
  auto g = run(d4, 300, [](int step, mldiag::recorder&, double&, double& n) { if (step >= 200) n *= 50 * (step - 199); });
  std::erase_if(g, [](const mldiag::finding& x) { return x.severity == mldiag::severity::info; });
  REQUIRE(!g.empty());
  CHECK(g.front().last_step >= 208);
  CHECK(g.front().last_step <= 209);
  CHECK(g.front().severity == mldiag::severity::critical);
}

TEST_CASE("exploding gradients under clipping: a contained jump is not critical on its size alone") {
  // An LSTM clipped at 5 (the zoo's): one step's norm jumps 142x its median and the loss, whose
  // update clip_grad_norm_ bounded, goes on falling. Clipped or not, the jump the loss did not
  // answer is info (issue 38); one it answered is found, graded by the norm that was applied.
  auto run = [](std::optional<double> clip, bool loss_answers) {
    mldiag::monitor mon({.task = {.max_grad_norm = clip}});
    return run_monitor(mon, 80, [&](int i, mldiag::monitor& m) {
      const bool jump = i == 50;
      const bool up = loss_answers && i >= 51 && i < 54;
      m.observe(mldiag::scalar::loss, up ? 4.0 : 2.0 - 0.01 * i);
      m.observe(mldiag::scalar::grad_norm, jump || (loss_answers && i == 51) ? 142.0 : 1.0 + 0.01 * (i % 3));
    });
  };
  const auto unclipped = run(std::nullopt, false);
  CHECK(unclipped.named("exploding gradients").empty());
  CHECK(unclipped.named("gradient norm jumped; the loss has not answered yet").size() == 1);
  const auto unclipped_answered = run(std::nullopt, true).named("exploding gradients");
  REQUIRE(unclipped_answered.size() == 1);
  CHECK(unclipped_answered[0].severity == severity::critical);
  CHECK(unclipped_answered[0].first_step == 50);
  const auto contained = run(5.0, false);
  CHECK(contained.named("exploding gradients").empty());
  CHECK(contained.named("gradient norm jumped; the loss has not answered yet").size() == 1);
  // Clipped, but the loss answers (2 -> 4 at the second jump step): found, and graded by what
  // the optimizer applied — the bound, 5x the median — a warning, where the same jump unclipped
  // is critical (above). An actor-critic's 160x jump clipped at 0.5 moved its weights 3x (issue 38).
  const auto answered = run(5.0, true).named("exploding gradients");
  REQUIRE(answered.size() == 1);
  CHECK(answered[0].severity == severity::warning);
  CHECK(answered[0].first_step == 50);
  // Twin: a bound at 120x the median applied 120x: critical again.
  const auto loose = run(120.0, true).named("exploding gradients");
  REQUIRE(loose.size() == 1);
  CHECK(loose[0].severity == severity::critical);
  CHECK(std::find(answered[0].evidence.begin(), answered[0].evidence.end(),
                  std::pair<std::string, double>{"clip_norm", 5.0}) != answered[0].evidence.end());
  // A bound that is no bound is refused, with what to do.
  CHECK_THROWS_WITH_AS((void)mldiag::monitor({.task = {.max_grad_norm = -1.0}}),
                       doctest::Contains("mldiag: task::max_grad_norm is -1"), mldiag::error);
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
    m.observe(mldiag::scalar::loss, (2.1 - 1.1 * t - 0.002 * std::max(0, i - 55)) * (1.0 + noise(rng)));
    m.observe(mldiag::scalar::grad_norm, (0.2 + 7.8 * t) * (1.0 + 5 * noise(rng)));
  });
  CHECK(h.named("exploding gradients").empty());
  CHECK(h.at_least(severity::warning).empty());
  CHECK(h.named("gradient norm jumped; the loss has not answered yet").size() <= 1);

  // Gradients never zeroed: the norm accumulates, 40x in 100 steps, and the loss stops improving.
  mldiag::monitor faulty;
  const auto f = run_monitor(faulty, 200, [&](int i, mldiag::monitor& m) {
    const double loss = i < 100 ? 2.0 - 0.004 * i : 1.6 + 0.002 * (i - 100);
    m.observe(mldiag::scalar::loss, loss * (1.0 + noise(rng)));
    m.observe(mldiag::scalar::grad_norm, i < 100 ? 0.5 * (1.0 + noise(rng)) : 0.5 * (1.0 + 0.4 * (i - 100)));
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
    m.observe(mldiag::scalar::loss, losses[i]);
    m.observe(mldiag::scalar::grad_norm, norms[i]);
  });
  REQUIRE(!b.named("exploding gradients").empty());
  CHECK(b.named("exploding gradients")[0].first_step == 5);  // 2.4 = 10x the baseline's 0.24, loss up 13%
  mldiag::monitor no_loss;
  const auto n = run_monitor(no_loss, 9, [&](int i, mldiag::monitor& m) { m.observe(mldiag::scalar::grad_norm, norms[i]); });
  REQUIRE(!n.named("exploding gradients").empty());
  CHECK(n.named("exploding gradients")[0].first_step == 5);
}

TEST_CASE("one hard batch near a zero loss is batch noise, not an explosion, a spike or a climb") {
  std::size_t off = 0;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    const auto series = hard_batches(seed);
    mldiag::monitor mon;
    const auto d = run_monitor(mon, static_cast<int>(series.size()), [&](int i, mldiag::monitor& m) {
      m.observe(mldiag::scalar::loss, series[static_cast<std::size_t>(i)].first);
      m.observe(mldiag::scalar::grad_norm, series[static_cast<std::size_t>(i)].second);
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
    m.observe(mldiag::scalar::loss, 1.0 + 0.02 * z(rng) + (i > 100 ? 0.001 * (i - 100) : 0.0));
    m.observe(mldiag::scalar::grad_norm, std::pow(10.0, 0.15 * z(rng)) * (i > 100 ? std::pow(1.1, i - 100) : 1.0));
  });
  const auto e = d.named("exploding gradients");
  REQUIRE(!e.empty());
  CHECK(e[0].severity >= severity::warning);
  CHECK(e[0].last_step > 100);
  CHECK(e[0].last_step <= 150);  // 1.1^25 = 11x: found within about 50 steps of the onset
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

TEST_CASE("exploding gradients: an anchor set by a stretch of easy batches does not make hard ones a growth") {
  // A healthy batch-8 run of 2000 steps as the zoo recorded it (round 6): late in training most
  // batches are easy (norm ~0.05-0.5) and some hold a hard row (norm 2-20), so the mean of 10
  // losses makes "progress" exactly when a stretch of easy batches comes, and the last ten
  // norms then sit 8x below the run's median. An anchor taken from them (the rule before round
  // 6) made hard batches a 12-17x "growth" six times after step 1600.
  const auto series = mldiag_test::recorded_series("fixup_rezero_batch8.csv");
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

TEST_CASE("exploding gradients: a jump whose loss came back is info, one whose loss stays up is found") {
  // A settled run (loss 2 + 3 e^(-t/200) with noise 0.05, norm about 1): at step 150 the norm
  // jumps 12x for two steps and the loss is up 30% on both (the loss answered, marginally —
  // below the decisive 1.5x, which decides at once — as a CTC
  // network's did at SGD 0.2, batch 8, in round 12's healthy runs), then either falls back to
  // its trend or stays up. Harm is what lasts (issue 38): the first is info, the second a warning
  // from the jump's first step, decided `come_back` (10) steps after the loss answered.
  const auto jump = [](bool stays_up) {
    return [stays_up](int step, mldiag::recorder&, double& loss, double& g) {
      if (step == 150 || step == 151) g *= 12.0;
      if (step == 150 || step == 151 || (stays_up && step > 151)) loss *= 1.3;
    };
  };
  mldiag::detectors::exploding_gradients back;
  const auto came_back = run(back, 300, jump(false));
  CHECK(std::none_of(came_back.begin(), came_back.end(), [](const finding& f) { return f.severity >= severity::warning; }));
  REQUIRE(std::count_if(came_back.begin(), came_back.end(),
                        [](const finding& f) { return f.symptom == mldiag::symptoms::grad_norm_jump_recovered.text; }) == 1);
  for (const auto& f : came_back)
    if (f.symptom == mldiag::symptoms::grad_norm_jump_recovered.text) CHECK(f.first_step == 150);
  // Twin: the same jump, the loss staying up.
  mldiag::detectors::exploding_gradients stays;
  auto stayed = run(stays, 300, jump(true));
  std::erase_if(stayed, [](const finding& f) { return f.severity < severity::warning; });
  REQUIRE(stayed.size() == 1);
  CHECK(stayed[0].symptom == mldiag::symptoms::exploding_gradients.text);
  CHECK(stayed[0].first_step == 150);
  CHECK(stayed[0].last_step == 161);  // answered at 151; ten steps without coming back
  CHECK(stayed[0].severity == severity::warning);  // a 12x peak, below critical_ratio (100)
}
