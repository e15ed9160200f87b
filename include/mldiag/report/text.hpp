// SPDX-License-Identifier: Apache-2.0
/// The text report for a terminal: a run's findings as episodes grouped by question, with
/// their evidence numbers and locations, and the diagnosis log phase by phase.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/report/episodes.hpp"
#include "mldiag/report/format.hpp"
#include "mldiag/report/run_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report {

struct text_options {
  /// Findings below this severity are counted but not listed.
  severity min_severity = severity::warning;
  /// At most this many locations per finding.
  std::size_t max_locations = 3;
  /// The episode rule's gap in steps (episodes.hpp).
  std::int64_t episode_gap = default_episode_gap;
};

/// One finding as the reports show it. Detectors report while their condition holds, either
/// as one finding whose last_step grows or as a fresh finding at each step; deliveries of the
/// same (question, symptom, detector, top location) at consecutive logged steps collapse into
/// one group with the number of deliveries, the span of steps and the numbers of its most
/// severe delivery (the newest among equals). The reports list the coarser episodes
/// (episodes.hpp) instead; `mldiag scan --json` lists these groups as its `findings`.
struct finding_group {
  finding f;
  std::int64_t delivered_first = -1;  ///< the step of the first delivery
  std::int64_t delivered_last = -1;   ///< the step of the newest delivery
  std::size_t deliveries = 0;
};

/// Groups a run's findings (see finding_group), ordered by question, then severity (highest
/// first), then first step. `steps` are the run's logged steps, which define "consecutive"
/// (for steps not among them, or without them: steps that differ by at most 1).
[[nodiscard]] inline std::vector<finding_group> group_findings(const std::vector<logged_finding>& findings,
                                                               const std::vector<std::int64_t>& steps = {}) {
  // The index of a step among the logged ones (steps are usually increasing: binary search,
  // else a linear scan).
  const bool sorted = std::is_sorted(steps.begin(), steps.end());
  auto index_of = [&](std::int64_t step) -> std::int64_t {
    if (steps.empty()) return step;
    if (sorted) {
      const auto it = std::lower_bound(steps.begin(), steps.end(), step);
      if (it != steps.end() && *it == step) return it - steps.begin();
      return -1;
    }
    const auto it = std::find(steps.begin(), steps.end(), step);
    return it == steps.end() ? -1 : it - steps.begin();
  };
  std::map<std::tuple<int, std::string, std::string, std::string>, std::size_t> open;  // key -> newest group
  std::vector<finding_group> groups;
  for (const auto& lf : findings) {
    const auto& f = lf.finding;
    auto key = std::make_tuple(static_cast<int>(f.question), f.symptom, f.detector, f.where.empty() ? std::string() : f.where.front().first);
    const auto it = open.find(key);
    if (it != open.end()) {
      auto& g = groups[it->second];
      const auto here = index_of(lf.step), before = index_of(g.delivered_last);
      // Adjacent in the log, or (a step the log does not have) at most one step apart.
      const bool consecutive = here >= 0 && before >= 0 ? here - before <= 1 : lf.step - g.delivered_last <= 1;
      if (consecutive) {
        const auto first = std::min(g.f.first_step, f.first_step), last = std::max(g.f.last_step, f.last_step);
        if (f.severity >= g.f.severity) g.f = f;  // the most severe delivery's numbers
        g.f.first_step = first;
        g.f.last_step = last;
        g.delivered_last = lf.step;
        ++g.deliveries;
        continue;
      }
    }
    open[std::move(key)] = groups.size();
    groups.push_back({f, lf.step, lf.step, 1});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const finding_group& a, const finding_group& b) {
    if (a.f.question != b.f.question) return a.f.question < b.f.question;
    if (a.f.severity != b.f.severity) return a.f.severity > b.f.severity;
    return a.f.first_step < b.f.first_step;
  });
  return groups;
}

/// The episodes of a run (episodes.hpp) in the order the reports list them: by question,
/// then peak severity (highest first), then start.
[[nodiscard]] inline std::vector<episode> report_episodes(const run_log& run, std::int64_t gap = default_episode_gap) {
  auto out = group_episodes(run.findings, gap);
  std::stable_sort(out.begin(), out.end(), [](const episode& a, const episode& b) {
    if (a.question != b.question) return a.question < b.question;
    if (a.severity() != b.severity()) return a.severity() > b.severity();
    return a.first_step < b.first_step;
  });
  return out;
}

/// The text report of a run: the run's steps and last loss, then its findings as episodes
/// (episodes.hpp: the deliveries of one symptom at one place, close together in steps) at
/// `min_severity` or above, grouped by question, one entry each — start-end, how many
/// deliveries, the peak (highest severity, the first among equals) with its locations and
/// evidence numbers — then the diagnosis log and the diagnoses still open.
///
///     Q1 convergence
///       info     plateau — steps 4536-19380, 174 deliveries, peak info at step 4536
///                evidence: recent_mean=3.60593 initial_mean=8.62191 ...
///                detector: plateau
///
/// **Example**
/// ```cpp
/// const auto log = mldiag::report::read_jsonl("run.jsonl");
/// fmt::print("{}", mldiag::report::text_report(log));
/// ```
[[nodiscard]] inline std::string text_report(const run_log& run, const text_options& o = {}) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "== mldiag report: {} ==\n", run.title.empty() ? std::string("run") : run.title);
  if (!run.steps.empty()) {
    fmt::format_to(it, "steps {}-{} ({} logged)", run.steps.front(), run.steps.back(), run.steps.size());
    if (const auto* loss = run.metric("loss")) {
      for (auto v = loss->rbegin(); v != loss->rend(); ++v) {
        if (run_log::is_absent(*v)) continue;
        fmt::format_to(it, ", last loss {:.6g}", *v);
        break;
      }
    }
    out += '\n';
  }
  const auto episodes = report_episodes(run, o.episode_gap);
  std::size_t shown = 0, hidden = 0, deliveries = 0;
  for (const auto& e : episodes) {
    (e.severity() >= o.min_severity ? shown : hidden) += 1;
    if (e.severity() >= o.min_severity) deliveries += e.count;
  }
  fmt::format_to(it, "{} episode(s) at {} or above", shown, name(o.min_severity));
  if (deliveries > shown) fmt::format_to(it, ", from {} deliveries", deliveries);
  if (hidden > 0) fmt::format_to(it, " ({} below, not listed)", hidden);
  out += '\n';
  int question_shown = 0;
  for (const auto& e : episodes) {
    if (e.severity() < o.min_severity) continue;
    if (static_cast<int>(e.question) != question_shown) {
      question_shown = static_cast<int>(e.question);
      fmt::format_to(it, "\n{}\n", name(e.question));
    }
    const auto& f = e.peak;
    fmt::format_to(it, "  {:<8} {} — {}", name(e.severity()), e.symptom, step_span(e.first_step, e.last_step));
    if (e.count > 1) {
      const auto at = e.peak_delivered >= 0 ? e.peak_delivered : f.last_step;
      fmt::format_to(it, ", {} deliveries, peak {} at {}", e.count, name(e.severity()), step_span(at, at));
    }
    out += '\n';
    if (!f.where.empty()) {
      out += "           where:";
      for (std::size_t i = 0; i < f.where.size() && i < o.max_locations; ++i)
        fmt::format_to(it, "{} {} ({:.4g})", i ? "," : "", f.where[i].first, f.where[i].second);
      if (f.where.size() > o.max_locations) fmt::format_to(it, ", and {} more", f.where.size() - o.max_locations);
      out += '\n';
    }
    // Places other deliveries of the episode named and the peak did not.
    std::vector<std::string_view> also;
    for (const auto& p : e.places)
      if (std::none_of(f.where.begin(), f.where.end(), [&](const auto& w) { return w.first == p; })) also.push_back(p);
    if (!also.empty()) {
      out += "           also at:";
      for (std::size_t i = 0; i < also.size() && i < o.max_locations; ++i) fmt::format_to(it, "{} {}", i ? "," : "", also[i]);
      if (also.size() > o.max_locations) fmt::format_to(it, ", and {} more", also.size() - o.max_locations);
      out += '\n';
    }
    if (!f.evidence.empty()) {
      out += "           evidence:";
      for (const auto& [k, v] : f.evidence) fmt::format_to(it, " {}={:.6g}", k, v);
      out += '\n';
    }
    if (f.is_consequence()) fmt::format_to(it, "           a consequence of {} at step {}\n", f.consequence_of, f.consequence_of_step);
    if (!f.detector.empty()) fmt::format_to(it, "           detector: {}\n", f.detector);
  }
  if (!run.diagnosis.empty()) {
    out += "\ndiagnosis log\n";
    for (const auto& line : run.diagnosis) fmt::format_to(it, "  {}: {}\n", protocol::label(line.phase), line.text);
  }
  if (!run.open_diagnoses.empty()) {
    out += "\nopen diagnoses\n";
    for (const auto& d : run.open_diagnoses) {
      fmt::format_to(it, "  open, {}: {}: {}, opened {}\n", protocol::label(d.phase), name(d.question), d.symptom,
                     d.opened_at >= 0 ? "at step " + std::to_string(d.opened_at) : std::string("before training"));
      for (const auto& line : d.log) fmt::format_to(it, "    {}: {}\n", protocol::label(line.phase), line.text);
    }
  }
  return out;
}

}  // namespace mldiag::report
