// SPDX-License-Identifier: Apache-2.0
// Severity earned by consequences: an early signal is info until harm follows (the progress
// measure or validation worsening, a loss turning non-finite), then a warning, delivered once
// with the harm in its `why`; each case with its twin. harm_watch's line checked against the
// rule computed here in long double.
#include "support.hpp"
#include "mldiag/detectors/consequence.hpp"
#include "mldiag/monitor.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using mldiag::severity;

// An embedding whose norm grows steadily from step 0 (embedding_growth fires when its window
// of 200 fills), the loss given by `loss(step)`, a validation loss every 50 steps by `val`.
mldiag_test::delivered early_signal_run(int steps, const std::function<double(int)>& loss,
                                        const std::function<double(int)>& val = {}) {
  mldiag::monitor mon;
  std::vector<float> emb(256);
  return mldiag_test::run_monitor(mon, steps, [&](int step, mldiag::monitor& m) {
    for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = static_cast<float>((0.01 + 0.001 * step) * ((i % 2) ? 1 : -1));
    m.observe(mldiag::scalar::loss, loss(step));
    m.observe(mldiag::role::parameter, "tok_embed.weight", emb);
    if (val && step % 50 == 49) m.observe(mldiag::scalar::val_loss, val(step));
  });
}

double falling_loss(int step) { return 1.0 + 2.0 * std::exp(-step / 100.0) + 0.01 * std::sin(step * 1.3); }

}  // namespace

TEST_CASE("consequence: an early signal with no harm stays info (within its persistence horizon)") {
  // 250 steps: the growth found at 199 has not lasted embedding_growth's 100 observations yet.
  const auto d = early_signal_run(250, falling_loss);
  const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
  REQUIRE(g.size() == 1);
  CHECK(g[0].severity == severity::info);
  CHECK(g[0].first_step == 199);
  CHECK(g[0].awaits_consequence);
  CHECK(g[0].why.find("no consequence yet; a warning when one follows, or after 100 observations") != std::string::npos);
  CHECK(d.at_least(severity::warning).empty());
}

TEST_CASE("consequence: twin — the same signal lasting past its horizon is a warning by persistence") {
  const auto d = early_signal_run(600, falling_loss);
  const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
  REQUIRE(g.size() == 2);
  CHECK(g[1].severity == severity::warning);
  CHECK(g[1].last_step == 298);
  CHECK(g[1].why.starts_with("held 100 of 100 observations"));
}

TEST_CASE("consequence: the same signal becomes a warning when the loss then worsens, once") {
  // From step 240 (before the growth has lasted its 100 observations) the loss climbs to 1.6x.
  const auto d = early_signal_run(700, [](int step) { return falling_loss(step) * (step < 240 ? 1.0 : 1.0 + 0.6 * std::min(1.0, (step - 240) / 100.0)); });
  const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
  REQUIRE(g.size() == 2);  // the info at onset, then the escalation
  CHECK(g[0].severity == severity::info);
  CHECK(g[1].severity == severity::warning);
  CHECK(g[1].first_step == 199);  // the signal's own onset
  CHECK(g[1].last_step > 240);
  CHECK(g[1].last_step < 290);
  CHECK(g[1].why.starts_with("consequence observed at step " + std::to_string(g[1].last_step) + ": the loss's mean of 20 rose"));
  CHECK(!g[1].awaits_consequence);
}

TEST_CASE("consequence: validation that worsens is a consequence — a steady validation is not") {
  // Validation every 50 steps: steady at 1.2, then 1.2 + 0.01 per step from step 200 (1.69 at 249).
  const auto worse = early_signal_run(290, falling_loss, [](int step) { return step < 200 ? 1.2 : 1.2 + 0.01 * (step - 200); });
  const auto g = worse.named(mldiag::symptoms::embedding_norm_growing);
  REQUIRE(g.size() == 2);
  CHECK(g[1].severity == severity::warning);
  CHECK(g[1].last_step == 249);
  CHECK(g[1].why.find("the validation loss rose") != std::string::npos);
  const auto steady = early_signal_run(290, falling_loss, [](int) { return 1.2; });
  CHECK(steady.named(mldiag::symptoms::embedding_norm_growing).size() == 1);  // twin: info only
}

TEST_CASE("consequence: harm long after the signal is not its consequence") {
  // The loss worsens at step 1000, more than consequence_window (500) steps after the last
  // report of the growth (its persistence, 298): no third delivery.
  static_assert(mldiag::monitor::consequence_window < 1000 - 298);
  const auto d = early_signal_run(1100, [](int step) { return falling_loss(step) * (step < 1000 ? 1.0 : 1.8); });
  const auto g = d.named(mldiag::symptoms::embedding_norm_growing);
  REQUIRE(g.size() == 2);
  CHECK(g[1].why.starts_with("held 100"));
}

namespace {

// The step at which the mean of the last 20 first stands 10% and 3 standard errors above the
// lowest such mean: harm_watch's rule, computed independently.
long first_worse(const std::vector<double>& l) {
  long double best = 1e300L;
  for (std::size_t i = 19; i < l.size(); ++i) {
    long double sum = 0, sq = 0;
    for (std::size_t j = i - 19; j <= i; ++j) sum += l[j];
    const long double mean = sum / 20;
    for (std::size_t j = i - 19; j <= i; ++j) sq += (l[j] - mean) * (l[j] - mean);
    const long double se = std::sqrt(sq / 19) / std::sqrt(20.0L);
    best = std::min(best, mean);
    if (mean - best >= 0.1L * best && mean - best >= 3 * se && mean > best) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("harm_watch: the loss's worsening starts where the rule says, once — a non-finite loss is harm") {
  std::vector<double> l;
  for (int i = 0; i < 400; ++i) l.push_back(falling_loss(i) * (i < 300 ? 1.0 : 1.0 + 0.004 * (i - 300)));
  mldiag::detectors::harm_watch w;
  mldiag::recorder rec(4);
  std::vector<long> starts;
  for (std::size_t i = 0; i < l.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, l[i]);
    if (!w.observe(rec.end_step()).empty()) starts.push_back(static_cast<long>(i));
  }
  REQUIRE(starts.size() == 1);
  CHECK(starts[0] == first_worse(l));
  // Declared not a progress measure, the same loss is no harm; a NaN loss still is.
  mldiag::detectors::harm_watch surrogate(false);
  std::size_t harms = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(1000 + i));
    rec.observe(mldiag::scalar::loss, i == 350 ? std::nan("") : l[i]);
    const auto h = surrogate.observe(rec.end_step());
    if (!h.empty()) {
      ++harms;
      CHECK(h == "the loss turned non-finite");
    }
  }
  CHECK(harms == 1);
}

TEST_CASE("harm_watch: a loss with no lower bound is judged by the share of its gain, not by its level near 0") {
  // Falls 3 -> -0.01 (a gain of about 3) and rises back by `rise`: 0.06 is 2% of the gain (no
  // harm), though 6x the best level's magnitude; 0.5 is 17% of it (harm).
  for (const double rise : {0.06, 0.5}) {
    std::vector<double> l;
    for (int i = 0; i < 400; ++i) l.push_back(-0.01 + 3.0 * std::exp(-i / 30.0) + (i >= 300 ? rise : 0.0) + 0.001 * ((i * 7) % 5 - 2));
    mldiag::detectors::harm_watch unbounded(true, false), bounded;
    mldiag::recorder rec(4);
    std::string said_unbounded, said_bounded;
    for (std::size_t i = 0; i < l.size(); ++i) {
      rec.begin_step(static_cast<std::int64_t>(i));
      rec.observe(mldiag::scalar::loss, l[i]);
      const auto& s = rec.end_step();
      said_unbounded += unbounded.observe(s);
      said_bounded += bounded.observe(s);
    }
    CHECK(!said_bounded.empty());  // the level's 10% line: crossed by both
    if (rise < 0.1) {
      CHECK(said_unbounded.empty());
    } else {
      CHECK(said_unbounded.find("of its gain") != std::string::npos);
    }
  }
}
