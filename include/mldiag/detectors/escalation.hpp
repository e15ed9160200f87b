// SPDX-License-Identifier: Apache-2.0
/// The escalation policy: the one place a finding's severity is decided, from the grounds the
/// detector that found the anomaly states, and written into the finding with its reason.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/finding.hpp"

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// What a detector states about an anomaly it found, for the policy to weigh. A detector says
/// what it saw and what its consequence is; it does not pick a severity.
///
/// **Example**: a loss above its baseline for `held` observations, its peak at `magnitude`
/// times the baseline:
/// `escalate(f, {.held = run, .horizon = c_.sustain, .magnitude = peak, .critical_at = c_.critical_factor})`
struct grounds {
  /// Needs no consequence: a non-finite loss, a learning rate that is not a number, a layer
  /// that passes nothing on. Critical at once.
  bool unambiguous = false;
  /// Explained by what the monitor was told or by a benign cause it can see (a full-batch
  /// run's repeated input, a loss scaler's skipped step, a schedule that decays to zero).
  bool expected = false;
  /// The consequence the detector names for this anomaly is observed (the loss rose with the
  /// gradient norm, the loss has not improved while it held).
  bool harm = false;
  /// A true statement about the numbers that has not hurt anything yet (Q2's early signals):
  /// info until a consequence follows — the monitor escalates it to a warning when the run's
  /// progress worsens, validation worsens or values turn non-finite (monitor::consequence_window)
  /// — or until it has lasted past its horizon (the detector states it again then).
  bool awaits_consequence = false;
  /// Observations the anomaly has held in a row, and how many make persistence count as harm
  /// on its own (0: persistence never does).
  std::size_t held = 1;
  std::size_t horizon = 0;
  /// The anomaly's size on the detector's own scale, and the line at which a harmful or
  /// persistent one is critical.
  double magnitude = 0.0;
  double critical_at = std::numeric_limits<double>::infinity();
  /// In words: what was seen that decided (the consequence, the explanation, the evidence).
  std::string_view note = {};
};

/// The policy. Critical: unambiguous, or harmful or persistent at or above the critical line.
/// Info: expected, awaiting a consequence, or neither harmful nor persistent yet. Warning:
/// harmful or persistent.
[[nodiscard]] constexpr severity decide(const grounds& g) noexcept {
  if (g.unambiguous) return severity::critical;
  if (g.expected) return severity::info;
  const bool persisted = g.horizon > 0 && g.held >= g.horizon;
  if (!g.harm && !persisted) return severity::info;
  return g.magnitude >= g.critical_at ? severity::critical : severity::warning;
}

/// Why the policy decided as it did, in a line (`finding::why`).
[[nodiscard]] inline std::string explain(const grounds& g) {
  std::string why;
  const auto add = [&](std::string_view part) {
    if (part.empty()) return;
    if (!why.empty()) why += "; ";
    why += part;
  };
  const severity s = decide(g);
  if (g.unambiguous) add("unambiguous");
  else if (g.expected) add("expected");
  else if (g.harm) add("consequence observed");
  else if (g.horizon > 0 && g.held >= g.horizon) add("held " + std::to_string(g.held) + " of " + std::to_string(g.horizon) + " observations");
  else if (g.awaits_consequence)
    add(g.horizon > 0 ? "no consequence yet; a warning when one follows, or after " + std::to_string(g.horizon) + " observations"
                      : "no consequence yet; a warning when one follows");
  else add("no consequence yet");
  if (s == severity::critical && !g.unambiguous) add("at or above its critical line");
  add(g.note);
  return why;
}

/// The finding with the policy's severity and its reason.
[[nodiscard]] inline finding escalate(finding f, const grounds& g) {
  f.severity = decide(g);
  f.why = explain(g);
  f.awaits_consequence = g.awaits_consequence && f.severity == severity::info && !g.expected;
  return f;
}

}  // namespace mldiag::detectors
