// SPDX-License-Identifier: Apache-2.0
/// Q1 `plateau`: a loss that fell and then stalled.
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

/// Q1: the loss decreased (by more than `min_improvement` since the start) and then stalled:
/// no significant trend over the last `window` losses and less than `stall_change` relative
/// change across them. Info, not a warning: the end of a cool-down plateaus too (GPT-2 medium's
/// last six evaluations sit within 0.0001). Once reported it stays reported until the loss
/// shows a significant decrease again (no flicker on noisy runs).
class plateau {
 public:
  struct config {
    std::size_t window = 500;
    double min_improvement = 0.05;
    double stall_change = 0.005;
    double t_critical = 2.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_improvement", &config::min_improvement},
          field<config>{"stall_change", &config::stall_change},
          field<config>{"t_critical", &config::t_critical}};
    }
  };
  plateau() : plateau(config{}) {}
  explicit plateau(config c) : c_(c), first_(c.window < 100 ? c.window : 100), recent_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"plateau", question::convergence, {symptoms::plateau}, "a loss that fell and then stalled", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "progress that stopped: the harm itself"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return c_.window; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.loss || !std::isfinite(*o.now.loss)) return;
    if (!first_.full()) first_.push(*o.now.loss);
    recent_.push(*o.now.loss);
    if (!recent_.full() || !first_.full()) return;
    const double start = first_.mean(), now = recent_.mean();
    const auto t = signals::slope(recent_);
    const double change = std::fabs(t.slope * static_cast<double>(recent_.size())) / std::fabs(now);
    const bool stalled = (start - now) / std::fabs(start) > c_.min_improvement && std::fabs(t.t_stat) < c_.t_critical &&
                         change < c_.stall_change;
    if (active_) {
      active_ = !(t.t_stat < -c_.t_critical);  // re-armed by a significant decrease
      return;
    }
    if (stalled) {
      active_ = true;
      out.push_back(escalate(make_finding(question::convergence, symptoms::plateau, severity::info, o.now.step, name(),
                                          {{"recent_mean", now}, {"initial_mean", start}, {"relative_change_over_window", change}}),
                             {.note = "the end of a cool-down plateaus too"}));
    }
  }

 private:
  config c_;
  signals::window first_, recent_;
  bool active_ = false;
};

}  // namespace mldiag::detectors
