// SPDX-License-Identifier: Apache-2.0
/// Q1 `lr_sanity`: a learning rate that cannot work: not finite, zero, absurdly large, jumping.
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

/// Q1: a learning rate that cannot work: not finite or negative (critical), zero for
/// `zero_steps` steps in a row before it was ever positive (warning; schedules may start at
/// exactly 0 for a step or two, and llm.c's decays to exactly 0 at the end, which is info), or
/// above `max_lr` (warning; 5: plain SGD at 1 with gradient clipping is a classic recipe for
/// recurrent language models, Zaremba et al. 2014, and trains healthy ones;
/// docs/accuracy.md#lr_sanity),
/// or that rises by more than `max_jump` (10x) from one step to the next (warning: a scheduler
/// restored with the wrong state, a factor applied twice). A drop by as much is info: step
/// decay by 0.1 is an ordinary schedule (docs/accuracy.md#lr_sanity). Reports onsets.
class lr_sanity {
 public:
  struct config {
    std::size_t zero_steps = 10;
    double max_lr = thresholds::max_learning_rate;
    double max_jump = 10.0;  ///< a change by more than this factor in one step (a rise warns, a drop is info)
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"zero_steps", &config::zero_steps},
          field<config>{"max_lr", &config::max_lr},
          field<config>{"max_jump", &config::max_jump}};
    }
  };
  lr_sanity() : lr_sanity(config{}) {}
  explicit lr_sanity(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"lr_sanity", question::convergence, {symptoms::lr_not_finite_or_negative, symptoms::lr_reached_zero, symptoms::lr_is_zero, symptoms::lr_absurdly_large, symptoms::lr_jumped, symptoms::lr_dropped}, "a learning rate that cannot work: not finite, zero, absurdly large, jumping", {.restarts_on_change = true}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.lr) return;
    const double lr = *o.now.lr;
    const bool was_positive = seen_positive_;
    seen_positive_ = seen_positive_ || lr > 0.0;
    if (invalid_.rise(!std::isfinite(lr) || lr < 0.0)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::lr_not_finite_or_negative, severity::info,
                                          o.now.step, name(), {{"lr", lr}}),
                             {.unambiguous = true, .note = "no optimizer steps with such a rate"}));
    }
    if (zero_.observe(lr == 0.0, c_.zero_steps)) {
      out.push_back(escalate(make_finding(question::convergence, was_positive ? symptoms::lr_reached_zero : symptoms::lr_is_zero,
                                          severity::info, o.now.step, name(),
                                          {{"lr", lr}, {"steps_at_zero", static_cast<double>(zero_.run())}}),
                             was_positive ? grounds{.expected = true, .note = "a schedule that decays to zero"}
                                          : grounds{.held = zero_.run(), .horizon = std::max<std::size_t>(c_.zero_steps, 1),
                                                    .note = "a rate of zero from the start trains nothing"}));
    }
    if (large_.rise(std::isfinite(lr) && lr > c_.max_lr)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::lr_absurdly_large, severity::info, o.now.step,
                                          name(), {{"lr", lr}, {"max_lr", c_.max_lr}}),
                             {.horizon = 1, .note = "above any rate known to train"}));
    }
    // A schedule moves smoothly (warm-up, decay); a jump by 10x in one step is a bug — a
    // scheduler restored with the wrong state on resume, a group given the wrong factor.
    const bool valid = previous_ > 0.0 && lr > 0.0 && std::isfinite(lr);
    if (jump_.rise(valid && lr > c_.max_jump * previous_)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::lr_jumped, severity::info, o.now.step, name(),
                                          {{"lr", lr}, {"previous_lr", previous_}, {"factor", lr / previous_}}),
                             {.horizon = 1, .note = "a schedule moves smoothly"}));
    }
    if (drop_.rise(valid && previous_ >= c_.max_jump * lr * (1.0 - 1e-9))) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::lr_dropped, severity::info, o.now.step, name(),
                                          {{"lr", lr}, {"previous_lr", previous_}, {"factor", lr / previous_}}),
                             {.expected = true, .note = "step decay is an ordinary schedule"}));
    }
    previous_ = std::isfinite(lr) ? lr : previous_;
  }

 private:
  config c_;
  bool seen_positive_ = false;
  double previous_ = 0.0;
  edge invalid_, zero_, large_, jump_, drop_;
};

}  // namespace mldiag::detectors
