// SPDX-License-Identifier: Apache-2.0
/// Q1 `constant_loss`: a loss that cannot measure learning: constant from the start, or exactly zero.
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

/// Q1: a loss that cannot be a measurement of learning: the first `steps` (5) recorded losses
/// all within `tolerance` (1e-4) relative of the first (the model is not being trained at all:
/// no optimizer step, a detached graph, a loss of a constant), or a loss of exactly 0 after
/// non-zero losses for `zero_sustain` (2) observations in a row (a mask that drops every
/// target, an empty batch; a float cross-entropy or MSE of real data is never exactly 0).
/// Warnings; evidence a short log shows on its face (seven epoch lines suffice). A loss that
/// comes back from an exact 0 before that reaches 0 on some batches — a hinge or margin loss
/// (a triplet loss: single zeros first, runs of up to 14 later in 1500 batch-8 steps;
/// docs/accuracy.md#constant_loss) — is info, once,
/// and its later zeros are not reported. A run that converges to a flat loss later is
/// plateau's case.
///
/// Where gradients and parameter updates are recorded, "not trained at all" is checked
/// against them: if, in one of those steps, a tensor had a non-zero gradient and a non-zero
/// update, the loss depends on the parameters and the optimizer moves them; the loss is only
/// insensitive to the first moves. That is info, with the largest update-to-parameter ratio
/// seen. word2vec's zero-initialized output vectors keep the loss at 6 ln 2 to six digits
/// for five steps while they move by their whole norm (docs/accuracy.md#constant_loss), and a
/// SimCLR encoder at its collapsed start keeps NT-Xent at ln 63 while a warm-up moves it by
/// 4e-5 to 2e-4 of its norm. Each cause named above leaves the gradient zero (a detached
/// graph, a constant) or the update zero (no step, no learning rate, the wrong parameters
/// given to the optimizer); weight decay alone moves a tensor whose gradient is zero.
class constant_loss {
 public:
  struct config {
    std::size_t steps = 5;
    double tolerance = 1e-4;
    std::size_t zero_sustain = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"steps", &config::steps},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"zero_sustain", &config::zero_sustain}};
    }
  };
  constant_loss() : constant_loss(config{}) {}
  explicit constant_loss(config c) : c_(c) {
    if (c.steps < 2 || c.zero_sustain == 0) throw error("constant_loss: steps must be at least 2 and zero_sustain at least 1");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"constant_loss", question::convergence, {symptoms::loss_constant_from_start, symptoms::loss_exactly_zero}, "a loss that cannot measure learning: constant from the start, or exactly zero", {.restarts_on_change = true, .consequence = "nothing trained for steps steps; a loss of 0 that comes back is expected (info)"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (seen_ < c_.steps) moved_ = std::max(moved_, largest_update_ratio(o.now));
    if (!o.now.loss || !std::isfinite(*o.now.loss)) return;
    const double loss = *o.now.loss;
    if (seen_ == 0) first_ = loss;
    if (seen_ < c_.steps) {
      same_ = same_ && std::fabs(loss - first_) <= c_.tolerance * std::fabs(first_);
      if (++seen_ == c_.steps && same_) {
        const bool trained = moved_ > 0.0;
        finding f = make_finding(question::convergence, symptoms::loss_constant_from_start,
                                 severity::info, o.now.step, name(),
                                 {{"loss", loss}, {"first_loss", first_}, {"steps", static_cast<double>(c_.steps)}});
        if (moved_ >= 0.0) f.evidence.emplace_back("largest_update_ratio", moved_);
        out.push_back(escalate(std::move(f),
                               trained ? grounds{.expected = true, .note = "the optimizer moves what its gradient reaches"}
                                       : grounds{.held = c_.steps, .horizon = c_.steps, .note = "nothing is being trained"}));
      }
    }
    const bool zero = loss == 0.0 && nonzero_;
    if (zero) {
      if (++zero_run_ == c_.zero_sustain && !intermittent_) {
        finding f = make_finding(question::convergence, symptoms::loss_exactly_zero, severity::info, o.now.step, name(),
                                 {{"loss", loss}, {"last_nonzero_loss", last_nonzero_},
                                  {"zero_steps", static_cast<double>(zero_run_)}});
        f.first_step = o.now.step - static_cast<std::int64_t>(zero_run_) + 1;
        out.push_back(escalate(std::move(f), {.held = zero_run_, .horizon = c_.zero_sustain,
                                              .note = "a loss of real data is never exactly 0"}));
      }
    } else if (zero_run_ > 0) {
      // The loss came back from an exact 0: one that reaches 0 on some batches (a hinge or
      // margin loss), said once, as info; its zeros are not a dropped target from then on.
      if (!intermittent_ && zero_run_ < c_.zero_sustain) {
        finding f = make_finding(question::convergence, symptoms::loss_exactly_zero, severity::info, o.now.step, name(),
                                 {{"loss", loss}, {"last_nonzero_loss", last_nonzero_},
                                  {"zero_steps", static_cast<double>(zero_run_)}, {"came_back", 1.0}});
        f.first_step = o.now.step - static_cast<std::int64_t>(zero_run_);
        out.push_back(escalate(std::move(f), {.expected = true, .note = "it came back: a margin loss reaches 0 on some batches"}));
      }
      intermittent_ = true;
      zero_run_ = 0;
    }
    if (loss != 0.0) {
      nonzero_ = true;
      last_nonzero_ = loss;
    }
  }

 private:
  /// The largest update-to-parameter norm ratio of the step over the tensors whose gradient
  /// was non-zero (a tensor that moved from 0: +inf); -1 when no such tensor recorded both.
  [[nodiscard]] static double largest_update_ratio(const snapshot& s) {
    double r = -1.0;
    for (const auto& u : s.updates) {
      const auto id = [&](const auto& q) { return q.id == u.id; };
      const auto g = std::find_if(s.gradients.begin(), s.gradients.end(), id);
      const auto p = std::find_if(s.parameters.begin(), s.parameters.end(), id);
      if (g == s.gradients.end() || p == s.parameters.end() || !(g->stats.l2_norm() > 0.0)) continue;
      const double un = u.stats.l2_norm(), pn = p->stats.l2_norm();
      if (!std::isfinite(un) || !std::isfinite(pn)) continue;
      r = std::max(r, pn > 0.0 ? un / pn : un > 0.0 ? std::numeric_limits<double>::infinity() : 0.0);
    }
    return r;
  }

  config c_;
  std::size_t seen_ = 0;
  double first_ = 0.0, last_nonzero_ = 0.0;
  double moved_ = -1.0;  // the largest update ratio of a tensor its gradient reached, over the first `steps` steps; -1: none
  bool same_ = true, nonzero_ = false, intermittent_ = false;
  std::size_t zero_run_ = 0;  // exact zeros in a row, after a non-zero loss
};

}  // namespace mldiag::detectors
