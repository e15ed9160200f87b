// SPDX-License-Identifier: Apache-2.0
/// Q1 `oscillation`: a loss that swings around its trend with a large amplitude.
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

/// Q1: oscillation — the loss swings up and down around its trend with large amplitude:
/// over `window` losses, the sign-change rate of the differences above `min_sign_changes`
/// (white noise gives 2/3, with a standard error near 0.05 over 100 points: 0.85 is four of
/// them above) and the robust spread of the residuals around the least-squares line (MAD)
/// above `min_spread` of the median loss (healthy per-step noise is a few percent; the
/// 1.5B run's single-batch outliers do not move a MAD). Learning rate too high.
class oscillation {
 public:
  struct config {
    std::size_t window = 100;
    double min_sign_changes = 0.85;
    double min_spread = 0.1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_sign_changes", &config::min_sign_changes},
          field<config>{"min_spread", &config::min_spread}};
    }
  };
  oscillation() : oscillation(config{}) {}
  explicit oscillation(config c) : c_(c), losses_(c.window), residuals_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"oscillation", question::convergence, {symptoms::loss_oscillation}, "a loss that swings around its trend with a large amplitude", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "the loss swinging around its trend: the harm itself"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return c_.window; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.loss || !std::isfinite(*o.now.loss)) return;
    losses_.push(*o.now.loss);
    if (!losses_.full()) return;
    const double changes = signals::sign_change_rate(losses_);
    // The spread only where the sign changes are over their line: the residuals move with each
    // new line, so their MAD is the one statistic here that costs a pass over the window
    // (issue 18), and white noise (2/3) is far below the line.
    const bool turning = changes > c_.min_sign_changes;
    const double spread = turning ? residual_spread() : std::numeric_limits<double>::quiet_NaN();
    if (fired_.rise(turning && spread > c_.min_spread)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::loss_oscillation, severity::info, o.now.step, name(),
                                          {{"sign_change_rate", changes}, {"relative_spread", spread}}),
                             {.harm = true, .note = "the loss swings around its trend"}));
    }
  }

 private:
  // The robust spread (MAD) of the losses around their least-squares line, over the median loss.
  double residual_spread() {
    const auto t = signals::slope(losses_);
    residuals_.clear();
    for (std::size_t i = 0; i < losses_.size(); ++i) {
      residuals_.push(losses_[i] - (t.intercept + t.slope * static_cast<double>(i)));
    }
    // A median loss of exactly 0 (a margin loss met on most batches) leaves no scale to be
    // relative to: not judged (NaN), where dividing gave inf and fired.
    const double level = std::fabs(losses_.median());
    return level > 0.0 ? residuals_.mad() / level : std::numeric_limits<double>::quiet_NaN();
  }

  config c_;
  signals::window losses_, residuals_;
  edge fired_;
};

}  // namespace mldiag::detectors
