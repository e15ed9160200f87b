// SPDX-License-Identifier: Apache-2.0
/// `finding`: what a detector reports — question, symptom, severity, when, where, the numbers.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/symptom.hpp"

// Standard library only: the pattern tables, the protocol and the log readers include this.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// The three questions of the method; every finding answers one.
enum class question : std::uint8_t {
  convergence = 1,    ///< Q1: why isn't it converging
  early_anomaly = 2,  ///< Q2: what are these early anomaly signals
  efficiency = 3,     ///< Q3: why isn't it fast enough
};

[[nodiscard]] constexpr std::string_view name(question q) noexcept {
  switch (q) {
    case question::convergence: return "Q1 convergence";
    case question::early_anomaly: return "Q2 early anomaly";
    case question::efficiency: return "Q3 efficiency";
  }
  return "?";
}

enum class severity : std::uint8_t { info = 0, warning = 1, critical = 2 };

[[nodiscard]] constexpr std::string_view name(severity s) noexcept {
  switch (s) {
    case severity::info: return "info";
    case severity::warning: return "warning";
    case severity::critical: return "critical";
  }
  return "?";
}

/// A symptom with the evidence behind it. It carries no fix: fixes exist only in phase 4 of a
/// diagnosis.
struct finding {
  mldiag::question question = mldiag::question::convergence;
  std::string symptom;  ///< e.g. "exploding gradients"
  mldiag::severity severity = mldiag::severity::warning;
  std::int64_t first_step = -1;  ///< when it started
  std::int64_t last_step = -1;   ///< the newest step that shows it
  /// Where, ranked by evidence (highest first): tensor or layer names with a score.
  std::vector<std::pair<std::string, double>> where;
  /// The numbers behind it, by name (e.g. {"ratio_to_median", 66.0}).
  std::vector<std::pair<std::string, double>> evidence;
  std::string detector;  ///< which detector produced it
  /// Why it has its severity, as the escalation policy decided it (detectors/escalation.hpp):
  /// "consequence observed; the loss rose above its median", "expected; full-batch training".
  std::string why;
  /// Set when the finding is downstream of an earlier critical event (the run went
  /// non-finite): that event's symptom and step. Such a finding is a consequence, not a new
  /// cause: the monitor opens no diagnosis for it. Empty and -1 otherwise.
  std::string consequence_of;
  std::int64_t consequence_of_step = -1;
  /// Info that becomes a warning when harm follows (grounds::awaits_consequence): the monitor
  /// watches the run for a consequence and delivers the finding again, escalated, when one is seen.
  bool awaits_consequence = false;
  [[nodiscard]] bool is_consequence() const noexcept { return consequence_of_step >= 0; }
};

/// A finding with the common fields filled: `first_step` and `last_step` are `step`.
[[nodiscard]] inline finding make_finding(question q, mldiag::symptom symptom, severity level, std::int64_t step,
                                         std::string_view detector_name,
                                         std::vector<std::pair<std::string, double>> evidence = {}) {
  finding f;
  f.question = q;
  f.symptom = std::string(symptom.text);
  f.severity = level;
  f.first_step = f.last_step = step;
  f.detector = std::string(detector_name);
  f.evidence = std::move(evidence);
  return f;
}

/// Whether a finding is evidence of the run breaking (symptoms::run_breaking): never itself
/// the consequence of another; when critical, what follows it is its consequence.
[[nodiscard]] inline bool is_run_breaking(const finding& f) noexcept {
  return std::any_of(symptoms::run_breaking.begin(), symptoms::run_breaking.end(),
                     [&](symptom s) { return s == std::string_view(f.symptom); });
}

}  // namespace mldiag
