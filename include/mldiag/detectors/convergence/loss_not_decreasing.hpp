// SPDX-License-Identifier: Apache-2.0
/// Q1 `loss_not_decreasing`: a loss that has not come down since the start.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1: the loss has not come down since the start (mean of the last `window` losses within
/// `min_improvement` of the mean of the first `start_window`, and no significant downward trend)
/// after `warmup` steps, while gradients are finite and non-zero: learning rate too low,
/// wrong loss, frozen model. Defaults: warmup 200, window 100, min_improvement 0.05.
/// Once reported, the loss counts as flat until it has improved by twice `min_improvement`
/// since the start: an improvement that hovers around the line is one
/// episode, not a delivery each time it crosses (an autoencoder at 2.5-4.6% for 400 steps
/// was delivered 9 times; docs/accuracy.md#loss_not_decreasing).
/// With a declared `floor` (task::loss_floor: label smoothing, mixup, an entropy bonus) the
/// improvement is measured against the distance from the start to that floor, not to 0.
class loss_not_decreasing {
 public:
  struct config {
    std::size_t warmup = 200;
    std::size_t window = 100;
    double min_improvement = 0.05;
    double t_critical = 2.0;
    std::size_t start_window = 10;  // the first losses: a run that converges fast is not flat
    double floor = 0.0;             ///< the declared lowest loss the objective can reach
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"warmup", &config::warmup},
          field<config>{"window", &config::window},
          field<config>{"min_improvement", &config::min_improvement},
          field<config>{"t_critical", &config::t_critical},
          field<config>{"start_window", &config::start_window},
          field<config>{"floor", &config::floor}};
    }
  };
  loss_not_decreasing() : loss_not_decreasing(config{}) {}
  explicit loss_not_decreasing(config c) : c_(c), first_(c.start_window), recent_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"loss_not_decreasing", question::convergence, {symptoms::loss_not_decreasing}, "a loss that has not come down since the start", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "no progress since the start: the harm itself"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return std::max(c_.warmup, c_.window); }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.loss || !std::isfinite(*o.now.loss)) return;
    if (!first_.full()) first_.push(*o.now.loss);
    recent_.push(*o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double start = first_.mean(), now = recent_.mean();
    const double to_floor = std::fabs(start - c_.floor);
    const double improvement = (start - now) / (to_floor > 0.0 ? to_floor : std::fabs(start));
    const auto t = signals::slope(recent_);
    // The global gradient norm reads every gradient's statistics (about 1 us for 300 tensors,
    // issue 18): asked for only where the loss has not improved.
    const auto gradients_normal = [&] {
      const auto g = o.now.global_grad_norm();
      return !g || std::isnan(*g) || (std::isfinite(*g) && *g > 0.0);
    };
    // Cleared only by the improvement itself: a window's trend t-statistic passes -2 by chance
    // every few hundred steps of pure noise, which would re-arm the report. fired_ is active
    // while a reported flat stretch lasts.
    const bool flat = fired_.active() ? improvement < 2.0 * c_.min_improvement
                                      : improvement < c_.min_improvement && !(t.t_stat < -c_.t_critical) &&
                                            gradients_normal();
    if (fired_.rise(flat)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::loss_not_decreasing, severity::info, o.now.step, name(),
                                          {{"initial_mean", start}, {"recent_mean", now}, {"improvement", improvement},
                                           {"trend_t_stat", t.t_stat}}),
                             {.harm = true, .note = "no progress since the start"}));
    }
  }

 private:
  config c_;
  signals::window first_, recent_;
  std::size_t seen_ = 0;
  edge fired_;
};

}  // namespace mldiag::detectors
