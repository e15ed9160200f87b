// SPDX-License-Identifier: Apache-2.0
/// What a diagnosis compares: the evidence of a run summarized into checks, and localization.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/evidence/substructure.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::protocol {

/// "Check the obvious first": the phase-1 checks, each passed, failed or not run.
struct obvious_checks {
  enum class result : std::uint8_t { not_run, passed, failed };
  result learning_rate_sane = result::not_run;   ///< finite, positive, not absurd
  result loss_matches_task = result::not_run;    ///< e.g. initial cross-entropy near ln(classes)
  result labels_in_range = result::not_run;      ///< labels within [0, classes)
  result no_nan_inf = result::not_run;           ///< no NaN/Inf in loss, gradients, activations

  [[nodiscard]] bool any_run() const noexcept {
    return learning_rate_sane != result::not_run || loss_matches_task != result::not_run ||
           labels_in_range != result::not_run || no_nan_inf != result::not_run;
  }
};

/// The checks the history itself can answer: learning rate sane and no NaN/Inf; the loss
/// against ln(classes) when `classes` > 1. Labels are the caller's to check. The lines are
/// the detectors' defaults (vocab/thresholds.hpp): one policy, not two.
[[nodiscard]] inline obvious_checks check_obvious(const history& past, double classes = 0) {
  using r = obvious_checks::result;
  obvious_checks c;
  bool any_lr = false, lr_ok = true, finite = true;
  double first_loss = std::nan("");
  for (std::size_t i = 0; i < past.size(); ++i) {
    const snapshot& s = past[i];
    if (s.lr) {
      any_lr = true;
      lr_ok = lr_ok && std::isfinite(*s.lr) && *s.lr >= 0.0 && *s.lr <= thresholds::max_learning_rate;
    }
    if (s.loss && std::isnan(first_loss)) first_loss = *s.loss;
    if (s.loss && !std::isfinite(*s.loss)) finite = false;
    for (role ro : {role::gradient, role::activation})
      for (const auto& t : s.of(ro)) finite = finite && t.stats.non_finite() == 0;
  }
  if (any_lr) c.learning_rate_sane = lr_ok ? r::passed : r::failed;
  c.no_nan_inf = finite ? r::passed : r::failed;
  if (classes > 1 && std::isfinite(first_loss)) {
    c.loss_matches_task = thresholds::near_chance(first_loss, classes) ? r::passed : r::failed;
  }
  return c;
}

/// The evidence of one run (the baseline, a variant, a verification), reduced to what the
/// protocol compares: the symptoms at warning or above, the recent loss with its standard
/// error and its trend, the obvious checks, and the steps it covers. `pool` makes one from
/// repeated runs (seeds) of the same configuration.
struct evidence_summary {
  std::vector<finding> findings;  ///< warning or above
  double recent_loss = std::nan("");
  /// The standard error of `recent_loss`: by batch means within one run (`batch_means_se`),
  /// across runs once pooled. NaN when unknown (fewer than `loss_se_min_count` losses).
  double recent_loss_se = std::nan("");
  double loss_trend_t = std::nan("");
  obvious_checks obvious;
  std::int64_t first_step = -1, last_step = -1;
  std::size_t tensors = 0;  ///< tensors recorded in the newest step (for "all or some")
  std::size_t runs = 1;     ///< runs (seeds) behind `recent_loss`: 1 unless pooled

  [[nodiscard]] bool has(std::string_view symptom) const {
    return std::any_of(findings.begin(), findings.end(), [&](const finding& f) { return f.symptom == symptom; });
  }
};

// Consecutive training losses are correlated (each step starts from the weights the last one
// left), so sd/sqrt(n) understates the noise of their mean: on the flagship transformer's last
// 100 losses it gives 0.0121 where the means of 10 blocks give 0.0218 (the demo's run.jsonl,
// LibTorch path). Block means are nearly independent once a block outlasts the correlation (10
// steps each in the default 100-step window); 10 blocks leave their spread 9 degrees of freedom.
inline constexpr std::size_t loss_se_blocks = 10;
/// Fewer losses than this and the recent loss's standard error is unknown (NaN): two a block.
inline constexpr std::size_t loss_se_min_count = 2 * loss_se_blocks;
/// A difference counts when it is at least this many standard errors: about 95% two-sided
/// under normal noise, the line the issue asked for ("inside the noise is inconclusive").
inline constexpr double noise_z = 2.0;

/// The standard error of the mean of `values` (a series, oldest first) by batch means: the
/// newest `loss_se_blocks * b` values (b = size / loss_se_blocks; the oldest size mod
/// loss_se_blocks left out so the blocks are equal) split into `loss_se_blocks` consecutive
/// blocks; the sample standard deviation of the block means over sqrt(blocks). NaN below
/// `loss_se_min_count` values. A loss still falling inside the window widens it (the trend
/// counts as spread), which errs toward "inconclusive", never toward a confirmation.
///
/// **Example**: `double se = protocol::batch_means_se(last_100_losses);`
[[nodiscard]] inline double batch_means_se(std::span<const double> values) {
  const std::size_t n = values.size();
  if (n < loss_se_min_count) return std::nan("");
  const std::size_t b = n / loss_se_blocks;
  const std::size_t skip = n - b * loss_se_blocks;
  double means[loss_se_blocks];
  double grand = 0.0;
  for (std::size_t k = 0; k < loss_se_blocks; ++k) {
    double s = 0.0;
    for (std::size_t i = 0; i < b; ++i) s += values[skip + k * b + i];
    means[k] = s / static_cast<double>(b);
    grand += means[k];
  }
  grand /= static_cast<double>(loss_se_blocks);
  double q = 0.0;
  for (double m : means) q += (m - grand) * (m - grand);
  const double blocks = static_cast<double>(loss_se_blocks);
  return std::sqrt(q / (blocks - 1.0)) / std::sqrt(blocks);
}

/// Summarizes a run from its history and the findings its detectors raised: the recent loss
/// is the mean of the last `window` finite losses, its standard error their batch means.
[[nodiscard]] inline evidence_summary summarize(const history& past, std::span<const finding> findings,
                                               const obvious_checks& obvious, std::size_t window = 100) {
  evidence_summary e;
  e.obvious = obvious;
  // Warnings, and the claims still waiting for a consequence (info until harm follows): a rate
  // above every rate known to train is the pattern's co-symptom before the loss has answered it.
  for (const auto& f : findings)
    if (f.severity >= severity::warning || f.awaits_consequence) e.findings.push_back(f);
  if (past.empty()) return e;
  e.first_step = past[0].step;
  e.last_step = past.back().step;
  e.tensors = past.back().gradients.size() + past.back().activations.size() + past.back().parameters.size();
  signals::window losses(window);
  for (std::size_t i = 0; i < past.size(); ++i)
    if (past[i].loss && std::isfinite(*past[i].loss)) losses.push(*past[i].loss);
  if (!losses.empty()) {
    e.recent_loss = losses.mean();
    e.loss_trend_t = signals::slope(losses).t_stat;
    std::vector<double> recent(losses.size());  // once per summary, never per step
    for (std::size_t i = 0; i < losses.size(); ++i) recent[i] = losses[i];
    e.recent_loss_se = batch_means_se(recent);
  }
  return e;
}

/// Pools repeated runs (seeds) of one configuration into one summary: the recent loss is the
/// mean over the runs, its standard error the sample standard deviation across runs over
/// sqrt(k) (for one run, that run's own), `runs` is k; a symptom any run raised counts (its
/// findings from the first run that raised it); the obvious checks, trend, steps and tensors
/// are the first run's. Each summary counts as one run. Across seeds the spread includes what
/// one run's batch means cannot see (the seed's own luck), so pooled runs are the stronger
/// evidence. Throws `mldiag::error` on an empty span.
///
/// **Example**: `std::move(test).conclude(protocol::pool(std::vector{seed1, seed2, seed3}))`.
[[nodiscard]] inline evidence_summary pool(std::span<const evidence_summary> runs) {
  if (runs.empty()) {
    throw error("protocol::pool: no runs to pool; pass the summaries of one or more runs (seeds) of the same "
                "configuration");
  }
  evidence_summary e = runs.front();
  if (runs.size() == 1) return e;
  e.runs = runs.size();
  const double k = static_cast<double>(runs.size());
  double mean = 0.0;
  for (const auto& r : runs) mean += r.recent_loss;
  mean /= k;
  double q = 0.0;
  for (const auto& r : runs) q += (r.recent_loss - mean) * (r.recent_loss - mean);
  e.recent_loss = mean;
  e.recent_loss_se = std::sqrt(q / (k - 1.0)) / std::sqrt(k);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const std::size_t known = e.findings.size();  // the symptoms of the runs before this one
    const auto seen = [&](const std::string& symptom) {
      return std::any_of(e.findings.begin(), e.findings.begin() + static_cast<std::ptrdiff_t>(known),
                         [&](const finding& f) { return f.symptom == symptom; });
    };
    for (const auto& f : runs[i].findings)
      if (!seen(f.symptom)) e.findings.push_back(f);
  }
  return e;
}

/// How a comparison came out: better beyond the noise, worse (or, for a whole comparison, not
/// better), or inside the noise.
enum class verdict : std::uint8_t { better, worse, inconclusive };

/// The variant's recent loss against the base's, with the uncertainty of the difference.
struct loss_comparison {
  double effect = std::nan("");  ///< base - variant: positive when the variant's loss is lower
  double se = std::nan("");      ///< sqrt(se_base^2 + se_variant^2); NaN when the noise is unknown
  double z = std::nan("");       ///< effect / se
  verdict result = verdict::inconclusive;
  /// False when either standard error is unknown: then `result` is the rule without noise
  /// (not higher is better, higher is worse), and never inconclusive.
  bool noise_known = false;
};

/// Compares recent losses: `better` when z >= `noise_z`, `worse` when z <= -`noise_z`,
/// `inconclusive` between. A non-finite variant loss is worse; without a base loss, or with
/// either standard error unknown, the rule without noise decides (`noise_known` false).
/// Throws `mldiag::error` on a negative standard error.
[[nodiscard]] inline loss_comparison compare_loss(const evidence_summary& variant, const evidence_summary& base) {
  if (base.recent_loss_se < 0.0 || variant.recent_loss_se < 0.0) {
    throw error("compare_loss: a negative standard error of the recent loss; leave recent_loss_se as summarize or "
                "pool computes it (NaN when unknown)");
  }
  loss_comparison c;
  c.effect = base.recent_loss - variant.recent_loss;
  c.noise_known = std::isfinite(base.recent_loss_se) && std::isfinite(variant.recent_loss_se) &&
                  std::isfinite(base.recent_loss) && std::isfinite(variant.recent_loss);
  if (c.noise_known) {
    c.se = std::hypot(base.recent_loss_se, variant.recent_loss_se);
    c.z = c.effect == 0.0 ? 0.0 : c.effect / c.se;  // no difference is z 0, even without noise
  }
  if (!std::isfinite(variant.recent_loss)) c.result = verdict::worse;
  else if (!c.noise_known) {
    c.result = variant.recent_loss > base.recent_loss ? verdict::worse : verdict::better;  // NaN base: better
  } else {
    c.result = c.z >= noise_z ? verdict::better : c.z <= -noise_z ? verdict::worse : verdict::inconclusive;
  }
  return c;
}

/// A variant against a base on the same checks: the symptoms, then the loss.
struct comparison {
  verdict result = verdict::worse;
  std::string new_symptom;  ///< the first symptom the variant raised that the base did not ("" if none)
  std::string remaining;    ///< a focus symptom the variant still shows ("" if the focus cleared)
  loss_comparison loss;
};

/// Compares `variant` with `base`. Worse (not better: a strike) when the variant raises a
/// symptom the base did not have, or does not clear the symptoms in `focus` (those that opened
/// the diagnosis; when `focus` is empty, at least one of the base's symptoms), or its loss is
/// worse beyond the noise. Otherwise the loss decides: better beyond the noise is better;
/// inside the noise is inconclusive. The focus matters: a change that removes a side symptom
/// (a smaller learning rate softening the loss spike a dead layer causes) has not fixed the
/// problem under diagnosis.
[[nodiscard]] inline comparison compare(const evidence_summary& variant, const evidence_summary& base,
                                        std::span<const std::string> focus = {}) {
  comparison c;
  c.loss = compare_loss(variant, base);
  for (const auto& f : variant.findings)
    if (!base.has(f.symptom)) {
      c.new_symptom = f.symptom;
      return c;
    }
  if (focus.empty()) {
    const bool cleared = base.findings.empty() ||
                         std::any_of(base.findings.begin(), base.findings.end(), [&](const finding& f) { return !variant.has(f.symptom); });
    if (!cleared) c.remaining = base.findings.front().symptom;
  } else {
    const auto left = std::find_if(focus.begin(), focus.end(), [&](const std::string& s) { return variant.has(s); });
    if (left != focus.end()) c.remaining = *left;
  }
  c.result = c.remaining.empty() ? c.loss.result : verdict::worse;
  return c;
}

/// Whether `variant` is better than `base` beyond the noise (`compare(...)` says `better`).
[[nodiscard]] inline bool better(const evidence_summary& variant, const evidence_summary& base,
                                 std::span<const std::string> focus = {}) {
  return compare(variant, base, focus).result == verdict::better;
}

/// Phase 2's answer to "where and when": which tensors (all or some), since when (from the
/// start or developed), consistent or intermittent, and by substructure.
struct localization {
  std::vector<std::pair<std::string, double>> where;  ///< ranked
  bool all_tensors = false;
  bool from_start = false;
  std::int64_t since_step = -1;
  bool consistent = false;
  /// attention / ffn / embedding / moe / norm / other, with how many locations.
  std::vector<std::pair<std::string, int>> substructures;
};

/// The substructure a tensor name belongs to, by the default `substructure_patterns` (the
/// profiler's): "attention", "ffn", "embedding", "moe", "norm" or "other".
[[nodiscard]] inline std::string_view substructure_of(std::string_view name) {
  static const substructure_patterns patterns;
  return substructure_name(patterns.classify(name));
}

/// Localizes the findings of `e` whose symptom is in `focus` (all of them when `focus` is
/// empty, or when none matches): a diagnosis localizes its own symptom, not the whole run's.
[[nodiscard]] inline localization localize(const evidence_summary& e, std::span<const std::string> focus = {}) {
  localization l;
  const auto in_focus = [&](const finding& f) {
    return std::find(focus.begin(), focus.end(), f.symptom) != focus.end();
  };
  const bool filter = std::any_of(e.findings.begin(), e.findings.end(), in_focus);
  std::int64_t first = -1, covered = 0;
  for (const auto& f : e.findings) {
    if (filter && !in_focus(f)) continue;
    if (first < 0 || f.first_step < first) first = f.first_step;
    covered += f.last_step - f.first_step + 1;
    for (const auto& [name, score] : f.where) {
      auto it = std::find_if(l.where.begin(), l.where.end(), [&](const auto& w) { return w.first == name; });
      if (it == l.where.end()) l.where.emplace_back(name, score);
      else it->second = std::max(it->second, score);
    }
  }
  std::sort(l.where.begin(), l.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  l.since_step = first;
  const std::int64_t span = e.last_step - e.first_step + 1;
  l.from_start = first >= 0 && span > 0 && first - e.first_step <= span / 20;
  l.consistent = first >= 0 && covered * 2 >= (e.last_step - first + 1);
  l.all_tensors = e.tensors > 0 && l.where.size() * 5 >= e.tensors * 4;
  for (const auto& [name, score] : l.where) {
    std::string_view part = name;
    if (const auto slash = part.find('/'); slash != std::string_view::npos) part = part.substr(slash + 1);
    const std::string sub(substructure_of(part));
    auto it = std::find_if(l.substructures.begin(), l.substructures.end(), [&](const auto& s) { return s.first == sub; });
    if (it == l.substructures.end()) l.substructures.emplace_back(sub, 1);
    else ++it->second;
  }
  return l;
}

}  // namespace mldiag::protocol
