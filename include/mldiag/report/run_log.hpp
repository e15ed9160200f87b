// SPDX-License-Identifier: Apache-2.0
/// `run_log`: a whole run as columns of metrics by step, its findings and its diagnosis log —
/// what the reports render and what the command-line tool reads logs into.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only: the log readers and their fuzzers include this without fmt.
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/protocol/log.hpp"

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report {

/// A finding as it was reported: at which step the monitor delivered it.
struct logged_finding {
  std::int64_t step = -1;
  mldiag::finding finding;
};

/// One record of a diagnosis log: the phase it was written in (`unknown` when a file did not
/// say) and its text.
using diagnosis_line = protocol::log_entry;

/// A diagnosis still open when the run_log was written: one the monitor opened (a finding at
/// warning or above whose question and symptom had none, `monitor::open_diagnoses()`) and
/// nobody took through the method yet. The reports show it as "open, phase 1: evidence" with
/// what opened it and its log lines, so a page never says "no diagnosis" while some are open.
///
/// Filling it is the writer's job (the monitor side: `monitor::opened_by(i)` gives the
/// question and symptom, the diagnosis's `log()` its lines); the reports only render it.
///
/// **Example**
/// ```cpp
/// run.open_diagnoses.push_back({mldiag::question::convergence, "plateau", 4536,
///                               mldiag::protocol::phase_id::evidence,
///                               {{mldiag::protocol::phase_id::evidence, "opened by plateau"}}});
/// ```
struct open_diagnosis {
  mldiag::question question = mldiag::question::convergence;
  std::string symptom;          ///< the symptom of the finding that opened it
  std::int64_t opened_at = -1;  ///< the step it was opened at (-1: before training, or not known)
  protocol::phase_id phase = protocol::phase_id::evidence;  ///< where it stands (1 when opened)
  std::vector<diagnosis_line> log;  ///< its diagnosis log so far, in order
};

/// A run: steps in the order they were logged, one column of values per metric (aligned with
/// `steps`), findings, diagnosis lines and the diagnoses still open.
///
/// A metric that was not logged at a step holds `absent()`, a NaN with its own bit pattern, so
/// "logged as NaN" (evidence: the loss *was* NaN) and "not logged" stay apart;
/// `is_absent(v)` tells them apart, `std::isnan` does not.
///
/// Metric names are the ones people already log (docs/formats.md): `loss`, `val_loss`, `lr`,
/// `loss_scale`, `grad/global_norm`, `grad/<tensor>/norm`, `param/<tensor>/norm`, ...
///
/// **Example**
/// ```cpp
/// mldiag::report::run_log log;
/// log.add_step(0);
/// log.set("loss", 2.30);
/// log.set("grad/fc1.weight/norm", 0.7);
/// ```
struct run_log {
  std::string title;
  std::vector<std::int64_t> steps;
  std::vector<std::string> metric_names;           // in the order first seen
  std::vector<std::vector<double>> metric_values;  // [metric][step index], absent() where not logged
  std::vector<logged_finding> findings;
  std::vector<diagnosis_line> diagnosis;
  /// Diagnoses open at the end of the run, in the order opened (see open_diagnosis); empty
  /// when none were or the writer did not say. The JSON Lines reader leaves it empty.
  std::vector<open_diagnosis> open_diagnoses;

  /// The "not logged" value: a quiet NaN with payload 0xab5e7.
  [[nodiscard]] static double absent() noexcept { return std::bit_cast<double>(absent_bits); }
  [[nodiscard]] static bool is_absent(double v) noexcept { return std::bit_cast<std::uint64_t>(v) == absent_bits; }

  /// Appends a step (every metric absent at it) and returns its index. Steps need not be
  /// increasing: readers that care (detectors replaying the log) check.
  std::size_t add_step(std::int64_t step) {
    steps.push_back(step);
    for (auto& column : metric_values) column.push_back(absent());
    return steps.size() - 1;
  }

  /// Sets a metric at the newest step (adding the column, absent at earlier steps, on first
  /// sight). Throws mldiag::error when no step was added yet.
  void set(std::string_view metric, double value) {
    if (steps.empty()) throw error("run_log: set(\"" + std::string(metric) + "\") before any add_step(); add a step first");
    metric_values[column(metric)].back() = value;
  }

  /// The column of a metric, or nullptr when the run never logged it.
  [[nodiscard]] const std::vector<double>* metric(std::string_view name) const noexcept {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &metric_values[it->second];
  }

  /// The index of a metric's column, creating it (absent everywhere) on first sight.
  std::size_t column(std::string_view name) {
    if (const auto it = index_.find(std::string(name)); it != index_.end()) return it->second;
    metric_names.emplace_back(name);
    metric_values.emplace_back(steps.size(), absent());
    index_.emplace(metric_names.back(), metric_names.size() - 1);
    return metric_names.size() - 1;
  }

  /// Renames a column (readers map a log's own column names onto the canonical ones). Throws
  /// mldiag::error when `to` exists already.
  void rename(std::string_view from, std::string_view to) {
    const auto it = index_.find(std::string(from));
    if (it == index_.end() || from == to) return;
    if (index_.contains(std::string(to)))
      throw error("run_log: cannot rename '" + std::string(from) + "' to '" + std::string(to) + "', which exists already");
    const auto i = it->second;
    index_.erase(it);
    metric_names[i] = std::string(to);
    index_.emplace(metric_names[i], i);
  }

 private:
  static constexpr std::uint64_t absent_bits = 0x7ff80000000ab5e7ULL;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace mldiag::report
