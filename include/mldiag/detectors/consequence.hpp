// SPDX-License-Identifier: Apache-2.0
/// `harm_watch`: what counts as a consequence for the findings that wait for one
/// (grounds::awaits_consequence) — the run's progress worsening, validation worsening, a loss
/// that turned non-finite. The monitor reads it each step and escalates what waits.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Harm, as the escalation policy reads it, seen in the run's own evidence. Each kind is
/// reported on the step it starts:
/// - **progress worsens**: the mean of the last `window` (20) losses (where the loss is the
///   progress measure) at least `worsen_fraction` (10%) above the lowest such mean of the run
///   and `worsen_standard_errors` (3) of the window's standard errors above it (for a loss with
///   no lower bound, whose level can be 0 or below, 10% of what it gained since its first
///   window); for a progress metric (`observe_metric`), the metric's own verdict
///   (`metric_not_improving` at warning: not improving, or a fifth of its gain lost over its
///   window of 50 by four standard errors), which the monitor adds: a looser line of its own
///   here made a waiting finding a warning on a dip the metric's verdict calls noise (an RL
///   return falling back for ten updates);
/// - **validation worsens**: a validation loss `val_worsen_fraction` (5%) above the best one
///   before it;
/// - **values turn non-finite**: a NaN or Inf loss.
/// Not harm: a statement about the numbers (a norm that grows, attention that sharpens) while
/// the loss keeps falling and validation holds; and, where the progress measure is a metric
/// (objective::not_progress), a worsening after the run made most of its gain while the
/// anomaly held (progressed_since): the run itself refuted the claim that it cannot progress.
class harm_watch {
 public:
  struct config {
    std::size_t window = 20;
    double worsen_fraction = 0.1;
    double worsen_standard_errors = 3.0;
    double val_worsen_fraction = 0.05;
    double progressed_fraction = 0.5;
  };
  explicit harm_watch(bool loss_is_progress = true, bool loss_bounded = true)
      : harm_watch(loss_is_progress, loss_bounded, config{}) {}
  harm_watch(bool loss_is_progress, bool loss_bounded, config c)
      : c_(c), loss_is_progress_(loss_is_progress), loss_bounded_(loss_bounded), losses_(std::max<std::size_t>(c.window, 3)) {}

  /// The harm that starts at this step, in words; empty when none does.
  [[nodiscard]] std::string observe(const snapshot& s) {
    std::string harm;
    const auto add = [&](const std::string& h) { harm += harm.empty() ? h : "; " + h; };
    if (s.loss && !std::isfinite(*s.loss)) {
      if (!non_finite_) add("the loss turned non-finite");
      non_finite_ = true;
    } else if (s.loss) {
      non_finite_ = false;
      if (loss_is_progress_) {
        losses_.push(*s.loss);
        if (losses_.full()) {
          const double now = losses_.mean();
          if (std::isnan(first_loss_)) first_loss_ = now;
          best_loss_ = std::min(best_loss_, now);
          const double se = losses_.stddev() / std::sqrt(static_cast<double>(losses_.size()));
          // A level with no floor under it (0 or below) gives no fraction: the gain does.
          const double scale = loss_bounded_ ? std::fabs(best_loss_) : first_loss_ - best_loss_;
          const bool worse = (loss_bounded_ || scale >= 2.0 * c_.worsen_standard_errors * se) && now - best_loss_ >= c_.worsen_fraction * scale &&
                             now - best_loss_ >= c_.worsen_standard_errors * se && now > best_loss_;
          if (worse && !loss_worse_)
            add(loss_bounded_ ? "the loss's mean of " + std::to_string(losses_.size()) + " rose " + percent(now / best_loss_ - 1.0) + " above its best"
                              : "the loss's mean of " + std::to_string(losses_.size()) + " lost " + percent((now - best_loss_) / scale) + " of its gain");
          loss_worse_ = worse;
        }
      }
    }
    if (s.val_loss) add_to(harm, validation(*s.val_loss));
    for (const auto& m : s.metrics) {
      if (!std::isfinite(m.value)) continue;
      metric& t = of(m.id);
      t.values.push(m.higher_is_better ? m.value : -m.value);
      if (!t.values.full()) continue;
      const double now = t.values.mean();
      if (std::isnan(t.first)) t.first = now;
      t.best = std::max(t.best, now);
      // Tracked for progressed_since; the metric's harm is its own verdict (class comment).
    }
    return harm;
  }

  /// Where each progress metric stands (its best window mean so far), kept by what waits so
  /// that progressed_since can say later whether the run progressed after it began.
  struct progress_mark {
    std::vector<std::pair<std::uint32_t, double>> best;
  };
  [[nodiscard]] progress_mark mark() const {
    progress_mark m;
    for (const auto& t : metrics_)
      if (!std::isnan(t.first)) m.best.emplace_back(t.id, t.best);
    return m;
  }
  /// Whether a progress metric made most (`progressed_fraction`, half) of its run's gain since
  /// `m`, by more than chance (twice worsen_standard_errors of its window's standard errors: the
  /// best of many windows of a flat, noisy metric stands a few above its first by selection
  /// alone): an anomaly held while the run made most of its progress did not stop it, and a
  /// later dip of a noisy metric is no consequence of it.
  [[nodiscard]] bool progressed_since(const progress_mark& m) const {
    for (const auto& t : metrics_) {
      if (std::isnan(t.first) || !t.values.full()) continue;
      double then = t.first;
      for (const auto& [id, best] : m.best)
        if (id == t.id) then = std::max(then, best);
      const double since = t.best - then, total = t.best - t.first;
      const double se = t.values.stddev() / std::sqrt(static_cast<double>(t.values.size()));
      if (since >= 2.0 * c_.worsen_standard_errors * se && since >= c_.progressed_fraction * total && since > 0.0) return true;
    }
    return false;
  }

  /// A validation loss recorded after its step closed (monitor::observe_evaluation): the harm
  /// it starts, in words; empty when none.
  [[nodiscard]] std::string validation(double val_loss) {
    if (!std::isfinite(val_loss)) return {};
    const bool worse = best_val_ < std::numeric_limits<double>::infinity() &&
                       val_loss > best_val_ + c_.val_worsen_fraction * std::fabs(best_val_);
    std::string harm;
    if (worse && !val_worse_) harm = "the validation loss rose " + percent(val_loss / best_val_ - 1.0) + " above its best";
    val_worse_ = worse;
    best_val_ = std::min(best_val_, val_loss);
    return harm;
  }

 private:
  static void add_to(std::string& harm, const std::string& h) {
    if (!h.empty()) harm += harm.empty() ? h : "; " + h;
  }
  struct metric {
    std::uint32_t id;
    signals::window values;
    double first = std::numeric_limits<double>::quiet_NaN();
    double best = -std::numeric_limits<double>::infinity();
  };
  metric& of(std::uint32_t id) {
    for (auto& m : metrics_)
      if (m.id == id) return m;
    metrics_.push_back({id, signals::window(std::max<std::size_t>(c_.window, 3))});
    return metrics_.back();
  }
  static std::string percent(double fraction) { return std::to_string(static_cast<long long>(std::lround(100.0 * fraction))) + "%"; }

  config c_;
  bool loss_is_progress_, loss_bounded_;
  signals::window losses_;
  double best_loss_ = std::numeric_limits<double>::infinity();
  double first_loss_ = std::numeric_limits<double>::quiet_NaN();
  double best_val_ = std::numeric_limits<double>::infinity();
  bool loss_worse_ = false, val_worse_ = false, non_finite_ = false;
  std::vector<metric> metrics_;
};

}  // namespace mldiag::detectors
