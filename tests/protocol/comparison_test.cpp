// SPDX-License-Identifier: Apache-2.0
// Phases 3 and 4 decide with the noise in view: the recent loss's standard error by batch
// means, repeated runs pooled, the loss compared with its uncertainty, and a difference inside
// the noise inconclusive (the same phase, no strike). Each mechanism with its twin.
#include <doctest/doctest.h>

#include "mldiag/evidence/recorder.hpp"
#include "mldiag/protocol/diagnosis.hpp"

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace {

namespace p = mldiag::protocol;

// A loss series: `level` plus AR(1) noise (x_t = phi x_{t-1} + sd e_t), centred so that the
// mean of the series is exactly `level` up to rounding (the cases below name their effect).
std::vector<double> series(std::size_t n, double level, double sd, double phi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  std::vector<double> x(n);
  double prev = 0.0, sum = 0.0;
  for (auto& v : x) {
    v = prev = phi * prev + sd * n01(rng);
    sum += v;
  }
  for (auto& v : x) v += level - sum / static_cast<double>(n);
  return x;
}

// Summarizes a series the way the monitor does: recorded step by step, summarized by
// protocol::summarize (window 100).
p::evidence_summary summarize(const std::vector<double>& losses, std::vector<mldiag::finding> findings = {}) {
  mldiag::recorder rec(512);
  for (std::size_t i = 0; i < losses.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, losses[i]);
    (void)rec.end_step();
  }
  return p::summarize(rec.past(), findings, p::check_obvious(rec.past()));
}

// The reference: batch means written out again, in long double, over the same numbers.
double reference_se(const std::vector<double>& recent) {
  const std::size_t b = recent.size() / 10, skip = recent.size() - 10 * b;
  long double means[10], grand = 0;
  for (std::size_t k = 0; k < 10; ++k) {
    long double s = 0;
    for (std::size_t i = 0; i < b; ++i) s += static_cast<long double>(recent[skip + k * b + i]);
    means[k] = s / static_cast<long double>(b);
    grand += means[k] / 10;
  }
  long double q = 0;
  for (long double m : means) q += (m - grand) * (m - grand);
  return static_cast<double>(std::sqrt(q / 9) / std::sqrt(10.0L));
}

mldiag::finding symptom(std::string name) {
  mldiag::finding f;
  f.symptom = std::move(name);
  f.severity = mldiag::severity::warning;
  f.first_step = 0;
  return f;
}

// A summary made by hand: a recent loss with its standard error, and its symptoms.
p::evidence_summary run(double loss, double se, std::vector<std::string> symptoms = {}) {
  p::evidence_summary e;
  e.recent_loss = loss;
  e.recent_loss_se = se;
  e.obvious.no_nan_inf = p::obvious_checks::result::passed;
  for (auto& s : symptoms) e.findings.push_back(symptom(std::move(s)));
  return e;
}

// Phase 3 on the numbers: a baseline at 2.6155 that shows "loss not decreasing".
p::hypothesis_phase<0> testing(double base_se) {
  auto dx = p::diagnose(mldiag::question::convergence, {symptom("loss not decreasing")});
  return std::move(dx)
      .with_baseline(run(2.6155, base_se, {"loss not decreasing"}))
      .propose({"learning rate too high", "the loss swings", {"learning_rate", 10.0, 1.0}});
}

}  // namespace

TEST_CASE("the recent loss's standard error is batch means over the summarized window") {
  // 137 losses with NaN and Inf planted: summarize keeps the last 100 finite ones.
  std::vector<double> losses = series(137, 2.5, 0.1, 0.8, 1);
  losses[130] = std::nan("");
  losses[131] = INFINITY;
  losses[5] = -INFINITY;
  const auto e = summarize(losses);
  std::vector<double> recent;
  for (double v : losses)
    if (std::isfinite(v)) recent.push_back(v);
  recent.erase(recent.begin(), recent.end() - 100);
  CHECK(e.recent_loss_se == doctest::Approx(reference_se(recent)).epsilon(1e-12));
  CHECK(e.runs == 1);

  // A window that does not divide by 10: 57 losses, blocks of 5, the oldest 7 left out.
  const std::vector<double> short_run = series(57, 1.0, 0.05, 0.5, 2);
  CHECK(summarize(short_run).recent_loss_se == doctest::Approx(reference_se(short_run)).epsilon(1e-12));
  CHECK(p::batch_means_se(short_run) == doctest::Approx(reference_se(short_run)).epsilon(1e-12));

  // Twin: below 20 losses the noise is unknown, at 20 it is known.
  CHECK(std::isnan(summarize(series(19, 1.0, 0.05, 0.5, 3)).recent_loss_se));
  CHECK(std::isfinite(summarize(series(20, 1.0, 0.05, 0.5, 3)).recent_loss_se));
}

TEST_CASE("batch means see the autocorrelation that sd/sqrt(n) misses — on independent losses they agree") {
  // Averaged over 200 series so the verdict is about the estimator, not one series' luck.
  const auto ratio = [](double phi) {
    double sum = 0;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      const auto x = series(100, 2.0, 0.1, phi, seed);
      double m = 0, q = 0;
      for (double v : x) m += v / 100;
      for (double v : x) q += (v - m) * (v - m);
      sum += p::batch_means_se(x) / (std::sqrt(q / 99) / 10);
    }
    return sum / 200;
  };
  // AR(1) with phi 0.9: the true standard error is about sqrt((1 + phi) / (1 - phi)) = 4.4
  // times the naive one; blocks of 10 steps still carry some of the correlation, so batch
  // means see less of it (2.6 times on these series), but far more than sd/sqrt(n).
  CHECK(ratio(0.9) > 2.0);
  // Twin: independent losses, where sd/sqrt(n) is right.
  CHECK(ratio(0.0) == doctest::Approx(1.0).epsilon(0.15));
}

TEST_CASE("pool: the mean over runs, the spread across runs, a symptom any run raised") {
  auto a = run(2.0, 0.5, {"loss spike", "loss spike"});
  a.obvious.learning_rate_sane = p::obvious_checks::result::failed;
  a.first_step = 3;
  const auto b = run(2.3, 0.5, {"oscillation"});
  const auto c = run(2.9, 0.5, {"loss spike", "plateau"});
  const std::vector<p::evidence_summary> three{a, b, c};
  const auto pooled = p::pool(three);
  // By hand: mean 7.2 / 3 = 2.4; deviations -0.4, -0.1, 0.5; sd = sqrt(0.42 / 2); se = sd / sqrt(3) = sqrt(0.07).
  CHECK(pooled.recent_loss == doctest::Approx(2.4).epsilon(1e-14));
  CHECK(pooled.recent_loss_se == doctest::Approx(std::sqrt(0.07)).epsilon(1e-14));
  CHECK(pooled.runs == 3);
  REQUIRE(pooled.findings.size() == 4);  // both of a's spikes, b's oscillation, c's plateau
  CHECK(pooled.findings[0].symptom == "loss spike");
  CHECK(pooled.findings[1].symptom == "loss spike");
  CHECK(pooled.findings[2].symptom == "oscillation");
  CHECK(pooled.findings[3].symptom == "plateau");
  CHECK(pooled.obvious.learning_rate_sane == p::obvious_checks::result::failed);  // the first run's
  CHECK(pooled.first_step == 3);

  // One run is its own pool: its loss, its batch-means standard error, one run.
  const auto one = p::pool(std::span(three).first(1));
  CHECK(one.recent_loss == 2.0);
  CHECK(one.recent_loss_se == 0.5);
  CHECK(one.runs == 1);

  CHECK_THROWS_WITH_AS((void)p::pool({}), doctest::Contains("mldiag: protocol::pool: no runs to pool"), mldiag::error);
}

TEST_CASE("a symptom one seed raised makes the pooled variant not better — without that seed it is") {
  const auto base = run(2.0, 0.001, {"loss not decreasing"});
  const std::vector<std::string> focus{"loss not decreasing"};
  const std::vector<p::evidence_summary> seeds{run(1.5, 0.001), run(1.51, 0.001), run(1.49, 0.001, {"loss spike"})};
  CHECK(p::compare(p::pool(seeds), base, focus).result == p::verdict::worse);
  CHECK(p::compare(p::pool(seeds), base, focus).new_symptom == "loss spike");
  // Twin: the two quiet seeds alone.
  CHECK(p::compare(p::pool(std::span(seeds).first(2)), base, focus).result == p::verdict::better);
}

TEST_CASE("compare_loss: the effect with its standard error, and the line at two of them") {
  // se = sqrt(0.006^2 + 0.008^2) = 0.01.
  const auto beyond = p::compare_loss(run(1.0 - 0.0201, 0.008), run(1.0, 0.006));
  CHECK(beyond.noise_known);
  CHECK(beyond.effect == doctest::Approx(0.0201));
  CHECK(beyond.se == doctest::Approx(0.01));
  CHECK(beyond.z == doctest::Approx(2.01));
  CHECK(beyond.result == p::verdict::better);
  // Twin: just inside the line.
  const auto inside = p::compare_loss(run(1.0 - 0.0199, 0.008), run(1.0, 0.006));
  CHECK(inside.z == doctest::Approx(1.99));
  CHECK(inside.result == p::verdict::inconclusive);
  // And the other side.
  CHECK(p::compare_loss(run(1.0 + 0.0201, 0.008), run(1.0, 0.006)).result == p::verdict::worse);
  CHECK(p::compare_loss(run(1.0 + 0.0199, 0.008), run(1.0, 0.006)).result == p::verdict::inconclusive);

  // A variant without a finite loss is worse, whatever the noise.
  CHECK(p::compare_loss(run(std::nan(""), 0.008), run(1.0, 0.006)).result == p::verdict::worse);
  CHECK(p::compare_loss(run(INFINITY, std::nan("")), run(1.0, 0.006)).result == p::verdict::worse);
  // Noise unknown: the rule without noise, and it says so.
  const auto unknown = p::compare_loss(run(0.999, std::nan("")), run(1.0, 0.006));
  CHECK(!unknown.noise_known);
  CHECK(std::isnan(unknown.z));
  CHECK(unknown.result == p::verdict::better);
  CHECK(p::compare_loss(run(1.001, 0.008), run(1.0, std::nan(""))).result == p::verdict::worse);
  CHECK_THROWS_WITH_AS((void)p::compare_loss(run(1.0, -0.1), run(1.0, 0.1)),
                       doctest::Contains("mldiag: compare_loss: a negative standard error"), mldiag::error);
}

TEST_CASE("inside the noise is inconclusive: still phase 3, the same hypothesis, no strike") {
  // The numbers: 2.6108 against 2.6155, each with a standard error of 0.0085.
  auto h = testing(0.0085);
  auto out = std::move(h).conclude(run(2.6108, 0.0085));
  REQUIRE(out.was_inconclusive());
  CHECK(!out.was_confirmed());
  CHECK(!out.was_rejected());
  static_assert(std::is_same_v<decltype(std::move(out).inconclusive()), p::hypothesis_phase<0>>);
  CHECK_THROWS_WITH_AS((void)p::pattern_phase<1>(std::move(out).rejected()),
                       doctest::Contains("mldiag: the outcome is not 'rejected' but 'inconclusive'"), mldiag::error);
  CHECK_THROWS_WITH_AS((void)p::fix_phase<0>(std::move(out).confirmed()),
                       doctest::Contains("mldiag: the outcome is not 'confirmed' but 'inconclusive'"), mldiag::error);
  // Still a variant of the phases, for std::visit.
  CHECK(std::visit([](const auto& d) { return d.rejected().size(); }, out) == 0);
  auto again = std::move(out).inconclusive();
  CHECK(again.tested().cause == "learning rate too high");
  CHECK(again.rejected().empty());
  CHECK(!again.confirmed());
  CHECK(again.log().back().phase == p::phase_id::hypothesis);
  CHECK(again.log().back().text ==
        "'learning rate too high' inconclusive (learning_rate 10 -> 1: recent loss 2.6108 vs baseline 2.6155, "
        "effect 0.0047 +- 0.0120, z 0.39: inside the noise; pool more runs)");

  // More seeds of the variant, pooled, and the same hypothesis concluded again: still inside
  // the noise while the baseline's own 0.0085 dominates ...
  const std::vector<p::evidence_summary> seeds{run(2.6108, 0.0085), run(2.6101, 0.0085), run(2.6113, 0.0085)};
  auto still = std::move(again).conclude(p::pool(seeds));
  REQUIRE(still.was_inconclusive());
  CHECK(std::move(still).inconclusive().log().back().text.find("recent loss 2.6107 (3 runs) vs baseline 2.6155") !=
        std::string::npos);
}

TEST_CASE("the same effect with ten times less noise is confirmed") {
  auto out = testing(0.00085).conclude(run(2.6108, 0.00085));
  REQUIRE(out.was_confirmed());
  const auto fix = std::move(out).confirmed();
  static_assert(std::is_same_v<decltype(fix), const p::fix_phase<0>>);
  CHECK(fix.log().back().text.find("'learning rate too high' confirmed (learning_rate 10 -> 1: recent loss 2.6108 vs "
                                   "baseline 2.6155, effect 0.0047 +- 0.0012, z 3.91)") == 0);
}

TEST_CASE("an inconclusive test decided by pooled seeds: the variant's share of the noise shrinks") {
  // A quiet baseline (0.001) and one noisy variant run (0.01): effect 0.01, z about 1.
  auto out = testing(0.001).conclude(run(2.6055, 0.01));
  REQUIRE(out.was_inconclusive());
  // Four seeds of the variant agree to within 0.0005: the pooled spread is small.
  const std::vector<p::evidence_summary> seeds{run(2.6055, 0.01), run(2.6050, 0.01), run(2.6060, 0.01), run(2.6055, 0.01)};
  // The same phase comes back, so the outcome can be decided again in place (docs/method.md).
  out = std::move(out).inconclusive().conclude(p::pool(seeds));
  REQUIRE(out.was_confirmed());
  CHECK(std::move(out).confirmed().rejected().empty());
}

TEST_CASE("worse beyond the noise is a strike — the same difference inside a wide noise is not") {
  auto worse = testing(0.01).conclude(run(2.70, 0.01));
  REQUIRE(worse.was_rejected());
  const auto back = std::move(worse).rejected();
  static_assert(std::is_same_v<decltype(back), const p::pattern_phase<1>>);
  CHECK(back.rejected().size() == 1);
  CHECK(back.log().back().text.find("the loss is worse beyond the noise") != std::string::npos);
  // Twin: the same 0.0845 higher, with a standard error of 0.05 on each side (z -1.2).
  auto wide = testing(0.05).conclude(run(2.70, 0.05));
  CHECK(wide.was_inconclusive());
}

TEST_CASE("a focus symptom still there or a new one is a strike, whatever the loss") {
  auto remains = testing(0.001).conclude(run(2.0, 0.001, {"loss not decreasing"}));
  REQUIRE(remains.was_rejected());
  CHECK(std::move(remains).rejected().log().back().text.find("; still shows loss not decreasing)") != std::string::npos);
  auto fresh = testing(0.001).conclude(run(2.0, 0.001, {"loss spike"}));
  REQUIRE(fresh.was_rejected());
  CHECK(std::move(fresh).rejected().log().back().text.find("; new symptom: loss spike)") != std::string::npos);
  // Twin: cleared, nothing new, the same loss: confirmed.
  CHECK(testing(0.001).conclude(run(2.0, 0.001)).was_confirmed());
}

TEST_CASE("a verification inside the noise stays in phase 4 with the same confirmed hypothesis") {
  auto fix = testing(0.001).conclude(run(2.50, 0.001)).confirmed();
  auto out = std::move(fix).verify(run(2.6140, 0.002));  // z about 0.67
  REQUIRE(out.was_inconclusive());
  CHECK(!out.was_better());
  CHECK(!out.was_not_better());
  CHECK_THROWS_WITH_AS((void)p::resolved(std::move(out).better()),
                       doctest::Contains("mldiag: the outcome is not 'better' but 'inconclusive'"), mldiag::error);
  auto same = std::move(out).inconclusive();
  static_assert(std::is_same_v<decltype(same), p::fix_phase<0>>);
  REQUIRE(same.confirmed().has_value());
  CHECK(same.confirmed()->cause == "learning rate too high");
  CHECK(same.rejected().empty());
  CHECK(same.log().back().phase == p::phase_id::fix);
  CHECK(same.log().back().text.find("inside the noise: still in phase 4") == 0);
  // Verified again with a clear run: resolved.
  auto done = std::move(same).verify(run(2.50, 0.001));
  REQUIRE(done.was_better());
  CHECK(std::move(done).better().log().back().text.find("better than the baseline: resolved (recent loss 2.5000 vs "
                                                         "baseline 2.6155, effect 0.1155 +- 0.0014, z 81.67)") == 0);
}

TEST_CASE("a verification worse beyond the noise is a strike") {
  auto fix = testing(0.001).conclude(run(2.50, 0.001)).confirmed();
  auto out = std::move(fix).verify(run(2.70, 0.001));
  REQUIRE(out.was_not_better());
  const auto back = std::move(out).not_better();
  static_assert(std::is_same_v<decltype(back), const p::pattern_phase<1>>);
  CHECK(back.rejected().size() == 1);
  CHECK(back.log().back().text.find("not better than the baseline: back to phase 2") == 0);
}

TEST_CASE("the flagship's 2.6108 against 2.6155, with a transformer's noise, is inconclusive — without the noise it was confirmed") {
  // The flagship transformer's last 100 losses spread about 0.12 a step, correlated from step
  // to step (its batch-means standard error 0.022). Series like them at the same two levels
  // (batch-means standard errors 0.016 and 0.017), through summarize.
  const auto base = summarize(series(100, 2.6155, 0.10, 0.5, 11), {symptom("attention entropy collapse")});
  const auto variant = summarize(series(100, 2.6108, 0.10, 0.5, 12));
  REQUIRE(base.recent_loss_se > 0.01);
  REQUIRE(variant.recent_loss_se > 0.01);
  const auto loss = p::compare_loss(variant, base);
  CHECK(loss.effect == doctest::Approx(0.0047).epsilon(1e-6));
  CHECK(std::fabs(loss.z) < 1.0);

  auto dx = p::diagnose(mldiag::question::early_anomaly, {symptom("attention entropy collapse")});
  auto h = std::move(dx).with_baseline(base).propose(
      {"attention logits grow too large", "one block", {"attention_score_factor", 50.0, 1.0}});
  auto out = std::move(h).conclude(variant);
  REQUIRE(out.was_inconclusive());
  CHECK(std::move(out).inconclusive().log().back().text.find("inside the noise; pool more runs") != std::string::npos);

  // Twin: the same two runs with their noise unknown (what "not higher by any amount" saw):
  // confirmed, and the log says the noise was not in view.
  auto blind_base = base, blind_variant = variant;
  blind_base.recent_loss_se = blind_variant.recent_loss_se = std::nan("");
  auto dx2 = p::diagnose(mldiag::question::early_anomaly, {symptom("attention entropy collapse")});
  auto old = std::move(dx2)
                 .with_baseline(blind_base)
                 .propose({"attention logits grow too large", "one block", {"attention_score_factor", 50.0, 1.0}})
                 .conclude(blind_variant);
  REQUIRE(old.was_confirmed());
  CHECK(std::move(old).confirmed().log().back().text.find("noise unknown") != std::string::npos);
}

TEST_CASE("summarize keeps warnings and the claims that wait for a consequence, not plain info") {
  const auto at = [](mldiag::severity s, bool waits, const char* symptom) {
    mldiag::finding f = mldiag::make_finding(mldiag::question::convergence, mldiag::symptom{symptom}, s, 3, "test", {});
    f.awaits_consequence = waits;
    return f;
  };
  const auto e = summarize(series(40, 1.0, 0.05, 0.5, 4),
                           {at(mldiag::severity::warning, false, "loss not decreasing"),
                            at(mldiag::severity::info, true, "learning rate absurdly large"),
                            at(mldiag::severity::info, false, "learning rate dropped")});
  REQUIRE(e.findings.size() == 2);
  CHECK(e.findings[0].symptom == "loss not decreasing");
  // A rate above every rate known to train, still waiting: the pattern's co-symptom.
  CHECK(e.findings[1].symptom == "learning rate absurdly large");
}
