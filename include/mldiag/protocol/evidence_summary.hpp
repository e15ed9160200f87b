// SPDX-License-Identifier: Apache-2.0
/// What a diagnosis compares: the evidence of a run summarized into checks, and localization.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/evidence/substructure.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
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
/// protocol compares: the symptoms at warning or above, the recent loss and its trend, the
/// obvious checks, and the steps it covers.
struct evidence_summary {
  std::vector<finding> findings;  ///< warning or above
  double recent_loss = std::nan("");
  double loss_trend_t = std::nan("");
  obvious_checks obvious;
  std::int64_t first_step = -1, last_step = -1;
  std::size_t tensors = 0;  ///< tensors recorded in the newest step (for "all or some")

  [[nodiscard]] bool has(std::string_view symptom) const {
    return std::any_of(findings.begin(), findings.end(), [&](const finding& f) { return f.symptom == symptom; });
  }
};

/// Summarizes a run from its history and the findings its detectors raised.
[[nodiscard]] inline evidence_summary summarize(const history& past, std::span<const finding> findings,
                                               const obvious_checks& obvious, std::size_t window = 100) {
  evidence_summary e;
  e.obvious = obvious;
  for (const auto& f : findings)
    if (f.severity >= severity::warning) e.findings.push_back(f);
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
  }
  return e;
}

/// Whether `variant` is better than `base` on the same checks: it clears the symptoms in
/// `focus` (those that opened the diagnosis; when `focus` is empty, at least one of the base's
/// symptoms), raises none the base did not have, and its recent loss is not higher. The focus
/// matters: a change that removes a side symptom (a smaller learning rate softening the loss
/// spike a dead layer causes) has not fixed the problem under diagnosis.
[[nodiscard]] inline bool better(const evidence_summary& variant, const evidence_summary& base,
                                 std::span<const std::string> focus = {}) {
  bool cleared = false;
  if (focus.empty()) {
    for (const auto& f : base.findings) cleared = cleared || !variant.has(f.symptom);
  } else {
    cleared = std::none_of(focus.begin(), focus.end(), [&](const std::string& s) { return variant.has(s); });
  }
  for (const auto& f : variant.findings)
    if (!base.has(f.symptom)) return false;
  const bool loss_ok = !(variant.recent_loss > base.recent_loss) || std::isnan(base.recent_loss);
  return (cleared || base.findings.empty()) && loss_ok && std::isfinite(variant.recent_loss);
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
