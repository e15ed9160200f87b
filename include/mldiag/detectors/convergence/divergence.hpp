// SPDX-License-Identifier: Apache-2.0
/// Q1 `divergence`: a lost loss value, a sustained climb of the loss, an fp16 loss scale that keeps halving.
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

/// Q1: divergence signs other than a spike: a loss value that goes missing after losses were
/// logged (critical); a loss that rose by at least `min_step_rise` on each of the last
/// `rise_steps` observations, by `rise_fraction` and by `min_rise` nats (0.25, as loss_spike's)
/// in all, with each of them at least `elevated` above the median of the losses before the
/// climb, and with at most `max_last_share` (0.8) of the rise in its last step (a climb, not
/// one outlier batch after two steps that happened to rise by 2%: a healthy small table went
/// 0.0074, 0.0077, 0.256), and to a loss above every one of the `baseline_window`
/// losses before the climb (a level the loss has not visited: hard batches that stray and
/// return do not make a climb) (warning; BigScience 104B experiment 2 climbed 6.37 -> 10.24 at the
/// end of warm-up, while healthy runs' outliers recover on the next step); and an fp16 loss scale that halves `halvings` times within the
/// last `window` observations (warning; 104B embed-norm experiment 7 halved 1048576 -> 32768
/// over six iterations before its loss went NaN).
/// And harm that keeps growing, however it climbs: the mean of the last `best_window` (20)
/// losses at least `above_best` (4) times the lowest such mean of the run and `min_rise` above
/// it (a warning; critical at `above_best_critical`, 10x), reported when it starts and once
/// more when it turns critical, never once per step (gradients never zeroed took a LibTorch
/// MNIST run from 2.3 to 84 with no finding after its first). What a declared change
/// restarts: `on_change`.
class divergence {
 public:
  struct config {
    std::size_t halvings = 3;
    std::size_t window = 10;
    std::size_t rise_steps = 3;
    double rise_fraction = 0.3;
    double min_rise = 0.25;  // absolute (nats), as loss_spike's: near-zero losses climb by large ratios harmlessly
    double elevated = 0.1;
    double min_step_rise = 0.02;
    std::size_t baseline_window = 50;
    double min_mads = 10.0;  ///< the end of the climb at least this many MADs above the baseline median
    double max_last_share = 0.8;
    /// Whether a climb of the loss is judged (the sustained increase). Off when the loss is not
    /// a progress measure (task::objective): the monitor sets it; the other two checks stay.
    bool loss_is_progress = true;
    /// The loss has a lower bound, so its climbs read as ratios of its level. Off for
    /// `task::loss_floor = no_lower_bound` (the monitor sets it): the climb and the far-above-best
    /// checks stand aside, the lost loss value and the scaler's halvings stay.
    bool bounded_loss = true;
    std::size_t best_window = 20;
    double above_best = 4.0;
    double above_best_critical = 10.0;
    /// After a declared change, the climb is judged once this many losses before it form the
    /// new baseline (a climb above one or two losses is a climb above chance).
    std::size_t settle = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"halvings", &config::halvings},
          field<config>{"window", &config::window},
          field<config>{"rise_steps", &config::rise_steps},
          field<config>{"rise_fraction", &config::rise_fraction},
          field<config>{"elevated", &config::elevated},
          field<config>{"min_step_rise", &config::min_step_rise},
          field<config>{"baseline_window", &config::baseline_window},
          field<config>{"min_rise", &config::min_rise},
          field<config>{"min_mads", &config::min_mads},
          field<config>{"max_last_share", &config::max_last_share},
          field<config>{"loss_is_progress", &config::loss_is_progress},
          field<config>{"bounded_loss", &config::bounded_loss},
          field<config>{"best_window", &config::best_window},
          field<config>{"above_best", &config::above_best},
          field<config>{"above_best_critical", &config::above_best_critical},
          field<config>{"settle", &config::settle}};
    }
  };
  divergence() : divergence(config{}) {}
  explicit divergence(config c)
      : c_(c), scales_(c.window + 1), losses_(c.rise_steps + 1), baseline_(c.baseline_window),
        recent_(std::max<std::size_t>(c.best_window, 1)) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"divergence", question::convergence, {symptoms::missing_loss_value, symptoms::sustained_loss_increase, symptoms::loss_scale_halving, symptoms::loss_far_above_best}, "a lost loss value, a sustained climb of the loss, an fp16 loss scale that keeps halving", {.restarts_on_change = true, .consequence = "the climb itself, or the loss far above its best (the progress measure worsened); a lost loss value at once; the scale halving halvings times"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  /// A declared change (any kind) starts it again, and the climb's new baseline judges a climb
  /// only once it holds `settle` losses: a restart's rise measured against one or two losses is
  /// no evidence (docs/accuracy.md#divergence). The best loss restarts too.
  void on_change(mldiag::change) {
    const bool seen = seen_loss_;
    *this = divergence(c_);
    restarted_ = true;
    seen_loss_ = seen;
  }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.loss) seen_loss_ = true;
    // A training line without its loss (Megatron's "missing lm loss"): the step logged other
    // values. A step with only a validation loss, or nothing, is an evaluation or a gap.
    const bool logged_other = s.lr || s.grad_norm || s.loss_scale || !s.gradients.empty() || !s.parameters.empty();
    if (!s.loss && seen_loss_ && logged_other && !s.val_loss) {
      out.push_back(make(o, symptoms::missing_loss_value, {.unambiguous = true, .note = "the step logged other values but no loss"},
                         {{"steps_with_loss_before", 1.0}}));
      return;
    }
    if (s.loss && std::isfinite(*s.loss) && c_.loss_is_progress && c_.bounded_loss) {
      if (losses_.full()) baseline_.push(losses_[0]);  // what leaves the recent run joins the baseline
      losses_.push(*s.loss);
      if (losses_.full() && !baseline_.empty() && (!restarted_ || baseline_.size() >= c_.settle)) {
        const double base = baseline_.median();
        bool climbing = true;
        for (std::size_t i = 1; climbing && i < losses_.size(); ++i) {
          climbing = losses_[i] >= (1.0 + c_.min_step_rise) * losses_[i - 1] &&
                     losses_[i] >= (1.0 + c_.elevated) * base;
        }
        const double rise = losses_.back() / losses_[0] - 1.0;
        // Above the baseline's own noise too: batch-64 losses climb three times in a row by
        // chance; a divergence leaves the noise band (robust z, as loss_spike's).
        const double noise = c_.min_mads > 0.0 ? baseline_.mad() : 0.0;
        const double total = losses_.back() - losses_[0];
        const double last = losses_.back() - losses_[losses_.size() - 2];
        const double highest = std::max(base, baseline_.max());
        if (climbing && rise >= c_.rise_fraction && total >= c_.min_rise && last <= c_.max_last_share * total &&
            losses_.back() - base >= c_.min_mads * noise && losses_.back() > highest) {
          out.push_back(make(o, symptoms::sustained_loss_increase,
                             {.harm = true, .note = "the loss climbed to a level it had not visited"},
                             {{"rise_fraction", rise}, {"baseline_median", base}, {"loss", *s.loss}}));
        }
      }
    }
    if (s.loss && std::isfinite(*s.loss) && c_.loss_is_progress && c_.bounded_loss) above_best(o, *s.loss, out);
    if (!s.loss_scale || !std::isfinite(*s.loss_scale)) return;
    scales_.push(*s.loss_scale);
    std::size_t halved = 0;
    for (std::size_t i = 1; i < scales_.size(); ++i) halved += scales_[i] < scales_[i - 1] ? 1u : 0u;
    if (halved >= c_.halvings) {
      out.push_back(make(o, symptoms::loss_scale_halving,
                         {.held = halved, .horizon = std::max<std::size_t>(c_.halvings, 1), .note = "the scaler keeps finding overflows"},
                         {{"halvings_in_window", static_cast<double>(halved)}, {"loss_scale", *s.loss_scale},
                          {"loss_scale_window_start", scales_[0]}}));
    }
  }

 private:
  void above_best(const observation& o, double loss, std::vector<finding>& out) {
    recent_.push(loss);
    if (!recent_.full()) return;
    const double now = recent_.mean();
    best_ = std::min(best_, now);
    const double ratio = best_ > 0.0 ? now / best_ : 0.0;
    const bool far = best_ > 0.0 && ratio >= c_.above_best && now - best_ >= c_.min_rise;
    if (!far) {
      above_reported_ = severity::info;
      above_active_ = false;
      return;
    }
    const grounds g{.harm = true, .magnitude = ratio, .critical_at = c_.above_best_critical,
                    .note = "the loss keeps far above the best it reached"};
    if (above_active_ && decide(g) <= above_reported_) return;
    above_active_ = true;
    above_reported_ = decide(g);
    out.push_back(make(o, symptoms::loss_far_above_best, g,
                       {{"recent_mean", now}, {"best_mean", best_}, {"ratio_to_best", ratio}}));
  }

  finding make(const observation& o, mldiag::symptom symptom, const grounds& g,
               std::vector<std::pair<std::string, double>> evidence) const {
    return escalate(make_finding(question::convergence, symptom, severity::info, o.now.step, name(), std::move(evidence)), g);
  }

  config c_;
  signals::window scales_, losses_, baseline_, recent_;
  bool seen_loss_ = false;
  double best_ = std::numeric_limits<double>::infinity();
  severity above_reported_ = severity::info;
  bool above_active_ = false;
  bool restarted_ = false;  // a declared change restarted the climb's baseline (on_change)
};

}  // namespace mldiag::detectors
