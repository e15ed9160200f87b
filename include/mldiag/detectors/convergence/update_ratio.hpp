// SPDX-License-Identifier: Apache-2.0
/// Q1 `update_ratio`: an update too large or too small for its parameter.
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

/// Q1: update ratio ||delta theta|| / ||theta|| out of range for a parameter (its update
/// recorded with role::update under the same name): above `max_ratio` (1) or below
/// `min_ratio` (1e-7) for `sustain` steps. A rule of thumb puts healthy SGD values near 1e-3
/// (Karpathy, CS231n notes), but Adam moves every element by about the learning rate whatever
/// its size, so small-initialized matrices see about 0.1 early in healthy runs (the examples'
/// transformer, residual projections at std 0.02/sqrt(2L): 0.13 at step 10 with AdamW 3e-3,
/// 0.08 at step 20 with its final 1e-3).
/// The upper bound is therefore an update as large as the tensor itself. The rule is about weight matrices: tensors with fewer than `min_elements` (256)
/// elements — biases, norm gains — are skipped, because a bias that starts at zero has a
/// ratio near 1 for its first steps and an output bias keeps a large one (the examples'
/// healthy MLP runs: 0.1-0.25 on 10- and 64-element biases; docs/accuracy.md). Reports onsets.
///
/// Too small means the optimizer made the step small, not the gradient: where the step recorded
/// gradients, a tensor counts only if no weight matrix moved at `min_ratio` (a learning rate too
/// small for all), or if its step per unit of gradient, ||delta theta|| / ||g||, is below
/// `rate_fraction` (0.1) times the median tensor's (a parameter group with its own tiny rate, a
/// tensor left out of the optimizer). A tensor stepped at the others' rate whose gradient is
/// tiny is a gradient matter: a residual branch behind a ReZero gate that starts at 0 gets
/// gate x delta, so SGD moves it by 1e-8 of itself for its first steps
/// (docs/accuracy.md#update_ratio).
///
/// Where the optimizer stops at a tolerance (`stops_at_tolerance`, told by the monitor for
/// `task::line_search`), no weight matrix moving at `min_ratio` is its convergence: L-BFGS's
/// steps after it met its tolerance move every parameter by almost nothing (info). One tensor
/// left behind while others move is judged as before.
class update_ratio {
 public:
  struct config {
    double min_ratio = 1e-7;
    double max_ratio = 1.0;
    std::size_t sustain = 5;
    std::size_t min_elements = 256;
    double rate_fraction = 0.1;
    /// The optimizer stops moving once it meets its tolerance (L-BFGS; the monitor sets it from
    /// `task::line_search`): no weight matrix moving is its convergence (info).
    bool stops_at_tolerance = false;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"max_ratio", &config::max_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_elements", &config::min_elements},
          field<config>{"rate_fraction", &config::rate_fraction},
          field<config>{"stops_at_tolerance", &config::stops_at_tolerance}};
    }
  };
  update_ratio() : update_ratio(config{}) {}
  explicit update_ratio(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"update_ratio", question::convergence, {symptoms::update_ratio_too_large, symptoms::update_ratio_too_small}, "an update too large or too small for its parameter", {.restarts_on_change = true, .consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0, worst_ratio = 0.0;
    std::uint32_t worst_id = 0;
    bool any = false;
    if (params_.size() < o.names.size()) {  // new names only
      params_.resize(o.names.size());
      norms_.resize(o.names.size());
      rates_.reserve(o.names.size());
    }
    // Norms only for the tensors updated this step: the statistics are kept (a copy costs a
    // third of a norm) for an update recorded at a later step than its parameter.
    for (const auto& p : o.now.parameters)
      params_[p.id] = p.stats;
    if (o.now.updates.empty()) {  // nothing to judge
      (void)fired_.observe(false, c_.sustain);
      return;
    }
    for (const auto& u : o.now.updates)
      norms_[u.id] = params_[u.id].l2_norm();
    if (grads_.size() < o.names.size()) grads_.resize(o.names.size());
    // Where the step recorded gradients, a parameter without one got none (LibTorch leaves the
    // .grad() of an expert that no token reached undefined); where it recorded none, unknown.
    for (auto& g : grads_) g = o.now.gradients.empty() ? -1.0 : 0.0;
    for (const auto& g : o.now.gradients) grads_[g.id] = g.stats.l2_norm();
    // The optimizer's step per unit of gradient, tensor by tensor, and its median; whether any
    // weight matrix moved at min_ratio (see the class comment).
    rates_.clear();
    bool any_moved = false;
    for (const auto& u : o.now.updates) {
      const double norm = norms_[u.id];
      if (u.stats.count < c_.min_elements || !(norm > 0.0)) continue;
      const double step = u.stats.l2_norm();
      any_moved = any_moved || step >= c_.min_ratio * norm;
      if (grads_[u.id] > 0.0) rates_.push_back(step / grads_[u.id]);
    }
    double median_rate = -1.0;  // unknown
    if (!rates_.empty()) {
      const auto mid = rates_.begin() + static_cast<std::ptrdiff_t>(rates_.size() / 2);
      std::nth_element(rates_.begin(), mid, rates_.end());
      median_rate = *mid;
    }
    for (const auto& u : o.now.updates) {
      // norms_ and grads_ are the parameter's and the gradient's of the same id.
      const double norm = norms_[u.id];
      if (u.stats.count < c_.min_elements || !(norm > 0.0)) continue;
      const double step = u.stats.l2_norm(), grad = grads_[u.id];
      const double r = step / norm;
      // A tensor no gradient reached this step (an expert that got no tokens, a bias before
      // BatchNorm) is not updated too little: it was not asked to move
      // (docs/accuracy.md#update_ratio).
      const bool reached = grad < 0.0 || grad > 1e-6 * norm;
      // Stepped at the others' rate: its small step is its small gradient's.
      const bool at_rate = any_moved && grad > 0.0 && median_rate > 0.0 && step / grad >= c_.rate_fraction * median_rate;
      const double badness = r > c_.max_ratio ? r / c_.max_ratio
                             : (r < c_.min_ratio && reached && !at_rate) ? c_.min_ratio / (r > 0 ? r : 1e-300)
                                                                         : 0.0;
      if (badness > worst) {
        worst = badness;
        worst_ratio = r;
        worst_id = u.id;
        any = true;
      }
    }
    if (fired_.observe(any, c_.sustain)) {
      finding f = make_finding(question::convergence,
                               worst_ratio > c_.max_ratio ? symptoms::update_ratio_too_large : symptoms::update_ratio_too_small,
                               severity::info, o.now.step, name(),
                               {{"update_ratio", worst_ratio}, {"min_ratio", c_.min_ratio}, {"max_ratio", c_.max_ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(location(role::parameter, o.names[worst_id]), worst_ratio);
      const bool converged = c_.stops_at_tolerance && !any_moved && worst_ratio <= c_.max_ratio;
      out.push_back(escalate(std::move(f), converged ? grounds{.expected = true, .note = "no weight matrix moved: the line-search optimizer met its tolerance (task::line_search)"}
                                                     : grounds{.held = fired_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1)}));
    }
  }

 private:
  config c_;
  edge fired_;
  std::vector<tensor_stats> params_;  // last parameter statistics by id
  std::vector<double> norms_;         // their norms, for this step's updates, by id
  std::vector<double> grads_;  // this step's gradient norm by id (-1: the step recorded no gradients)
  std::vector<double> rates_;  // scratch: this step's ||update|| / ||gradient|| per weight matrix
};

}  // namespace mldiag::detectors
