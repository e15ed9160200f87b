// SPDX-License-Identifier: Apache-2.0
/// How a planted-fault run is judged: the finding it reports (the first at warning or above
/// from the onset on), whether that finding answers the fault's question and points at the
/// planted layer, how many steps it took, and the false alarms. Shared by the fault suite and
/// the zoo, so both count the same way.
#pragma once

#include "faults.hpp"

#include <mldiag/vocab/finding.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace examples {

/// What a run was meant to show: nothing (healthy), or a fault's question from `onset` on,
/// in `layer` where the fault has one.
struct expectation {
  bool healthy = true;
  std::int64_t onset = 0;
  mldiag::question expected = mldiag::question::convergence;
  bool has_layer = false;
  std::string layer;  ///< "" when the fault has no layer
};

/// What a judge reads from one run.
struct verdict {
  bool detected = false, right_question = false;
  std::optional<bool> top1;  ///< only where the fault has a layer
  std::int64_t steps_to_detect = -1;
  /// Steps from the onset to the first finding at warning or above (-1: none in the run): the
  /// same as steps_to_detect unless the first finding was an early signal at info, which waits
  /// for a consequence or a persistence (issue 38).
  std::int64_t steps_to_warning = -1;
  std::string question, symptom, location, detector;
  int alarms_before_onset = 0;  ///< findings before a fault existed: false alarms too
  int healthy_alarms = 0;       ///< findings in a healthy run
  std::string false_alarm;      ///< the first false alarm, as a person reads it
  std::string false_alarm_detector;
};

/// "grad/blocks.1.qkv.weight" -> "blocks.1.qkv.weight"
[[nodiscard]] inline std::string_view strip_role(std::string_view where) {
  for (std::string_view p : {"grad/", "param/", "act/", "update/"})
    if (where.substr(0, p.size()) == p) return where.substr(p.size());
  return where;
}

/// Whether a finding's location lies in `layer` (the layer itself or one of its tensors).
[[nodiscard]] inline bool in_layer(std::string_view where, std::string_view layer) {
  const auto w = strip_role(where);
  return w == layer || (w.size() > layer.size() && w.substr(0, layer.size()) == layer && w[layer.size()] == '.');
}

/// "Q1: loss spike at act/logits at step 12", as the tables print a finding.
[[nodiscard]] inline std::string describe(const seen_finding& s) {
  return std::string(mldiag::name(s.f.question)).substr(0, 2) + ": " + s.f.symptom +
         (s.f.where.empty() ? "" : " at " + s.f.where.front().first) + " at step " + std::to_string(s.step);
}

/// Judges a run's findings (warning and above, in order) against what it was meant to show.
/// The reported finding is the first at or after the onset; within a step the most severe,
/// then the lowest question number (a neutral order: it does not look at the fault).
/// Findings before the onset, and every finding of a healthy run, are false alarms.
[[nodiscard]] inline verdict judge(std::span<const seen_finding> findings, const expectation& want) {
  verdict v;
  // An early signal at info is no alarm: only warnings and above count as false alarms.
  const auto alarm = [](const seen_finding& s) { return s.f.severity >= mldiag::severity::warning; };
  if (want.healthy) {
    for (const auto& s : findings) {
      if (!alarm(s)) continue;
      if (v.healthy_alarms++ == 0) {
        v.false_alarm = describe(s);
        v.false_alarm_detector = s.f.detector;
      }
    }
    return v;
  }
  const seen_finding* first = nullptr;
  for (const auto& s : findings) {
    if (s.step >= want.onset && alarm(s) && v.steps_to_warning < 0) v.steps_to_warning = s.step - want.onset;
    if (s.step < want.onset) {
      if (!alarm(s)) continue;
      if (v.alarms_before_onset++ == 0) {
        v.false_alarm = describe(s);
        v.false_alarm_detector = s.f.detector;
      }
      continue;
    }
    if (first == nullptr) first = &s;
    else if (s.step == first->step &&
             (s.f.severity > first->f.severity || (s.f.severity == first->f.severity && s.f.question < first->f.question)))
      first = &s;
  }
  if (first == nullptr) return v;
  v.detected = true;
  v.steps_to_detect = first->step - want.onset;
  v.question = std::string(mldiag::name(first->f.question));
  v.symptom = first->f.symptom;
  v.detector = first->f.detector;
  v.right_question = first->f.question == want.expected;
  v.location = first->f.where.empty() ? "" : first->f.where.front().first;
  if (want.has_layer) v.top1 = !first->f.where.empty() && in_layer(first->f.where.front().first, want.layer);
  return v;
}

/// The median, or -1 for an empty list.
[[nodiscard]] inline double median(std::vector<double> v) {
  if (v.empty()) return -1.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace examples
