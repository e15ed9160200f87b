// SPDX-License-Identifier: Apache-2.0
/// `mldiag scan`: replays a training log's scalar series (loss, validation loss, gradient
/// norm, learning rate, loss scale) through the default Q1/Q2 detectors.
#pragma once

#include "mldiag/monitor.hpp"
#include "mldiag/report/run_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::cli {

// What a scan found in one run, with notes on what it could not use.
struct scan_result {
  std::vector<report::logged_finding> findings;  // every delivery, in order
  std::vector<std::string> notes;                // e.g. a grad-norm column that is all zeros
  std::size_t steps = 0;
};

// Replays `run` step by step through a `mldiag::monitor` with the default detectors — the
// same semantics as a live run, consequences of a non-finite event marked as such: a step's
// logged `loss`, `val_loss`, `lr`, `grad/global_norm` and `loss_scale` become its evidence (a
// value logged as NaN or Inf is evidence too; a value not logged at a step is not recorded
// there). A detector that needs more loss values than the log has (a window, a warm-up) is
// named in a note, "too few points to judge", instead of staying silent.
//
// A gradient-norm column that is exactly zero wherever it is finite is not a measurement
// (BigScience's 13B logs print `grad norm: 0.000` when the norm is not computed): it is left
// out, with a note.
//
// **Example**
// ```cpp
// for (const auto& run : mldiag::cli::read_log("train.csv"))
//   for (const auto& f : mldiag::cli::scan(run).findings) ...
// ```
// What the user declares about a run on the command line (docs/declarations.md): the task
// (objective, reference levels, validation unlike training), changes made on purpose at a step
// (--event STEP:KIND), and the columns that are progress metrics (--metric NAME:higher).
// Columns a JSON Lines report wrote (`progress/NAME/higher|lower`, `change/KIND`) are read as
// the same declarations without options.
struct scan_options {
  mldiag::task task = {};
  std::vector<std::pair<std::int64_t, mldiag::change>> events;
  std::vector<std::pair<std::string, bool>> metrics;  // column, higher is better
};

// A log with at most this many loss values is a short series (epoch lines, a pasted excerpt):
// every value is a summary, and the windows sized for per-step batch losses never fill.
inline constexpr std::size_t short_series_points = 30;

// The default detectors, with the parameters a careful reader of a short series uses: three
// equal values are a constant loss (five would find it late in a five-epoch log); a loss whose
// mean over two values is 3x the best such mean, and 0.25 above it, has jumped and not come back
// (an epoch mean does not stray as a batch does); two gradient norms are the baseline a jump is
// measured against, and a loss that answered a jump and is still up one value later has not
// come back (one value is an epoch). Whatever the task tells a detector still applies (monitor's constructor).
[[nodiscard]] inline monitor_config short_series_config(const mldiag::task& task) {
  const monitor defaults({.history = 64, .task = task});
  monitor_config c{.history = 64, .task = task};
  const auto& set = defaults.detector_set();
  for (std::size_t d = 0; d < set.size(); ++d) {
    const std::string name(set[d].name());
    if (name == "constant_loss") c.detectors.emplace_back(name, detectors::parameters{{"steps", 3}});
    else if (name == "divergence") c.detectors.emplace_back(name, detectors::parameters{{"best_window", 2}, {"above_best", 3.0}});
    else if (name == "exploding_gradients") c.detectors.emplace_back(name, detectors::parameters{{"settle", 2}, {"come_back", 1}});
    else c.detectors.emplace_back(name);
  }
  return c;
}

[[nodiscard]] inline scan_result scan(const report::run_log& run, const scan_options& options = {}) {
  scan_result out;
  const auto* loss = run.metric("loss");
  const auto* val_loss = run.metric("val_loss");
  const auto* lr = run.metric("lr");
  const auto* grad_norm = run.metric("grad/global_norm");
  const auto* loss_scale = run.metric("loss_scale");
  const auto* grad_cosine = run.metric("grad/step_cosine");
  const auto* grad_increment_cosine = run.metric("grad/increment_cosine");
  if (grad_norm != nullptr) {
    bool all_zero = true, any = false;
    for (const double g : *grad_norm) {
      if (report::run_log::is_absent(g) || !std::isfinite(g)) continue;
      any = true;
      all_zero = all_zero && g == 0.0;
    }
    if (any && all_zero) {
      out.notes.emplace_back("the gradient norm is 0 at every logged step: not a measurement, left out");
      grad_norm = nullptr;
    }
  }
  if (loss == nullptr && val_loss == nullptr && grad_norm == nullptr)
    out.notes.emplace_back("no loss, validation loss or gradient norm in this log: nothing for the detectors to read");

  // The progress metrics: the declared columns, then those a JSON Lines report named so.
  struct metric_column {
    std::string name;
    const std::vector<double>* values;
    bool higher_is_better;
  };
  std::vector<metric_column> metrics;
  for (const auto& [column, higher] : options.metrics) {
    const auto* values = run.metric(column);
    if (values == nullptr) {
      out.notes.push_back("--metric " + column + ": the log has no such column; its columns are listed under metrics");
      continue;
    }
    metrics.push_back({column, values, higher});
  }
  std::vector<std::pair<std::int64_t, mldiag::change>> events = options.events;
  for (const auto& m : run.metric_names) {
    const std::string_view n = m;
    if (n.starts_with("progress/") && (n.ends_with("/higher") || n.ends_with("/lower"))) {
      const bool higher = n.ends_with("/higher");
      const auto name = n.substr(9, n.size() - 9 - (higher ? 7 : 6));
      if (!name.empty()) metrics.push_back({std::string(name), run.metric(m), higher});
    } else if (n.starts_with("change/")) {
      if (const auto kind = mldiag::change_named(n.substr(7))) {
        const auto* flags = run.metric(m);
        for (std::size_t i = 0; flags != nullptr && i < run.steps.size(); ++i)
          if (!report::run_log::is_absent((*flags)[i]) && (*flags)[i] != 0.0) events.emplace_back(run.steps[i], *kind);
      }
    }
  }
  if (options.task.objective == mldiag::objective::not_progress && metrics.empty())
    out.notes.emplace_back("the loss is declared not a progress measure and no progress metric was given (--metric NAME:higher): "
                           "nothing judges whether the run makes progress");

  std::sort(events.begin(), events.end());
  std::size_t next_event = 0;
  std::size_t loss_points = 0;
  for (std::size_t i = 0; loss != nullptr && i < loss->size(); ++i)
    loss_points += !report::run_log::is_absent((*loss)[i]) && std::isfinite((*loss)[i]) ? 1 : 0;
  const bool short_series = loss_points > 0 && loss_points <= short_series_points;
  monitor mon(short_series ? short_series_config(options.task) : monitor_config{.history = 64, .task = options.task});
  if (short_series) {
    out.notes.push_back(
        "a short series (" + std::to_string(loss_points) +
        " loss values), read as summaries such as epoch means: it can show a loss constant for 3 values, a jump of the "
        "loss to 3x its best that holds for 2 values, a gradient-norm jump after 2 values; it cannot separate batch "
        "noise from a trend, so spikes against the noise, plateaus and oscillation are not judged");
  }
  auto logged = [](const std::vector<double>* column, std::size_t i, double& v) {
    if (column == nullptr || report::run_log::is_absent((*column)[i])) return false;
    v = (*column)[i];
    return true;
  };
  std::size_t losses = 0;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    mon.begin_step(run.steps[i]);
    double v = 0.0;
    if (logged(loss, i, v)) {
      mon.observe(mldiag::scalar::loss, v);
      losses += std::isfinite(v) ? 1 : 0;
    }
    if (logged(val_loss, i, v)) mon.observe(mldiag::scalar::val_loss, v);
    if (logged(lr, i, v)) mon.observe(mldiag::scalar::learning_rate, v);
    if (logged(grad_norm, i, v)) mon.observe(mldiag::scalar::grad_norm, v);
    if (logged(loss_scale, i, v)) mon.observe(mldiag::scalar::loss_scale, v);
    // A cosine a log rounded out of [-1, 1] (or any non-number) is not one: left out.
    if (logged(grad_cosine, i, v) && v >= -1.0 && v <= 1.0) {
      gradient_cosines c{v, std::nullopt};
      if (double w = 0.0; logged(grad_increment_cosine, i, w) && w >= -1.0 && w <= 1.0) c.increments = w;
      mon.observe(c);
    }
    // A change declared at a step the log does not have takes effect at the next logged one.
    for (; next_event < events.size() && events[next_event].first <= run.steps[i]; ++next_event)
      mon.observe(regime_change{events[next_event].second});
    for (const auto& m : metrics)
      if (logged(m.values, i, v)) mon.observe_metric(m.name, v, m.higher_is_better);
    for (const auto& f : mon.end_step()) out.findings.push_back({run.steps[i], f});
  }
  if (loss != nullptr) {
    const auto& set = mon.detector_set();
    for (std::size_t d = 0; d < set.size(); ++d) {
      const std::size_t needs = set[d].needs_losses();
      if (needs > losses) {
        out.notes.push_back(std::string(set[d].name()) + ": too few points to judge (it needs " + std::to_string(needs) +
                            " loss values; the log has " + std::to_string(losses) + ")");
      }
    }
  }
  for (; next_event < events.size(); ++next_event)
    out.notes.push_back("--event " + std::to_string(events[next_event].first) + ":" + std::string(name(events[next_event].second)) +
                        ": after the log's last step; it changed nothing");
  out.steps = run.steps.size();
  return out;
}

}  // namespace mldiag::cli
