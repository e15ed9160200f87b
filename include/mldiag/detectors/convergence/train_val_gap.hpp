// SPDX-License-Identifier: Apache-2.0
/// Q1 `train_val_gap`: a training loss far below the validation loss.
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
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1: the training loss far below the validation loss: at a step with a validation loss,
/// the validation loss at least `min_ratio` (5) times the mean of the last `window` (20)
/// training losses and above it by at least `min_gap` (0.25) of the run's initial training
/// loss (the mean of its first 10; a scale that means the same for cross-entropy and MSE).
/// Once a training loss has been negative (no floor at 0), the ratio line becomes: the gap at
/// least `min_ratio` times the training loss's fall from that initial mean.
/// Memorization: the same batch every step, validation data that differs from training data
/// (a different preprocessing), a leak in the training data. Healthy overfitting of a small
/// data set stays far below: the digits MLP ends at training 0.01, validation 0.1 (a gap of
/// 4% of its initial 2.3). Reports onsets.
/// With `trend` (task::validation_unlike_training: balanced validation for long-tailed
/// training, another domain) the gap's level means nothing: it reports when the gap has
/// widened since the first evaluation it could judge by `min_gap` of the initial training
/// loss while the validation loss is above its best (validation worsens).
class train_val_gap {
 public:
  struct config {
    std::size_t window = 20;
    double min_ratio = 5.0;
    double min_gap = 0.25;
    bool trend = false;  ///< judge the gap's trend, not its level
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"min_gap", &config::min_gap},
          field<config>{"trend", &config::trend}};
    }
  };
  train_val_gap() : train_val_gap(config{}) {}
  explicit train_val_gap(config c) : c_(c), recent_(c.window == 0 ? 1 : c.window), first_(10) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"train_val_gap", question::convergence, {symptoms::train_far_below_val}, "a training loss far below the validation loss", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "learning that does not carry to validation; declared unlike training: the gap widening while validation worsens"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  /// New data or fine-tuning start it again (a new task's initial loss is the new scale). A new
  /// optimizer or its schedule, or unfrozen layers, leave the task and its scale as they were
  /// (restarted there, `min_gap` would become a share of the small losses after a late restart).
  void on_change(mldiag::change kind) {
    if (kind == mldiag::change::data || kind == mldiag::change::fine_tuning) *this = train_val_gap(c_);
  }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.loss && std::isfinite(*s.loss)) {
      recent_.push(*s.loss);
      if (!first_.full()) first_.push(*s.loss);
      negative_seen_ = negative_seen_ || *s.loss < 0.0;
    }
    compare(o, out);
  }
  /// An evaluation recorded after its step closed: the same comparison, against the training
  /// losses seen up to that step.
  void observe_evaluation(const observation& o, std::vector<finding>& out) { compare(o, out); }

 private:
  void compare(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (!s.val_loss || !std::isfinite(*s.val_loss) || recent_.size() < recent_.capacity() / 2 + 1) return;
    const double val_loss = *s.val_loss;
    const double train = recent_.mean(), scale = std::fabs(first_.mean());
    const double gap = val_loss - train;
    // A ratio of loss values means something only for a loss floored at 0. One that has gone
    // negative once (a Gaussian NLL as it fits; its batches straddle 0 long before their mean
    // does) has no floor to measure from: the gap is then taken against what training gained
    // since its start, min_ratio times that fall (healthy Gaussian-NLL runs meet the clamped
    // ratio; a repeated batch there sits at 60-5000x its fall: docs/accuracy.md#train_val_gap).
    const bool ratio_ok = !negative_seen_ ? val_loss >= c_.min_ratio * std::max(train, 0.0)
                                      : gap >= c_.min_ratio * std::max(first_.mean() - train, 0.0);
    if (c_.trend) {
      if (!first_gap_) first_gap_ = gap;
      const bool worsens = val_loss > best_val_;
      best_val_ = std::min(best_val_, val_loss);
      const bool widened = gap - *first_gap_ >= c_.min_gap * scale && worsens;
      if (fired_.rise(widened)) {
        out.push_back(escalate(make_finding(question::convergence, symptoms::train_far_below_val, severity::info, s.step,
                                            name(),
                                            {{"val_loss", val_loss}, {"recent_train_loss", train}, {"gap", gap},
                                             {"first_gap", *first_gap_}, {"initial_train_loss", scale}}),
                               {.harm = true, .note = "the gap widened while validation worsened (validation declared unlike training)"}));
      }
      return;
    }
    const bool wide = ratio_ok && gap >= c_.min_gap * scale && gap > 0.0;
    if (fired_.rise(wide)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::train_far_below_val, severity::info,
                                          s.step, name(),
                                          {{"val_loss", val_loss}, {"recent_train_loss", train}, {"gap", gap},
                                           {"initial_train_loss", scale}}),
                             {.harm = true, .note = "what is learned does not carry over to validation"}));
    }
  }

  config c_;
  signals::window recent_, first_;
  edge fired_;
  bool negative_seen_ = false;
  std::optional<double> first_gap_;
  double best_val_ = std::numeric_limits<double>::infinity();
};

}  // namespace mldiag::detectors
