// SPDX-License-Identifier: Apache-2.0
/// Q1 `non_finite`: NaN or Inf in the loss, a logged gradient norm or a tensor, located at its origin.
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

/// Q1: NaN or Inf in the loss, in a logged gradient norm, or in a gradient, activation or
/// parameter tensor. Critical, except a non-finite gradient norm alone:
/// - with a loss scale lowered at the same step it is an fp16 loss scaler's skipped step
///   (dynamic loss scaling probes its scale by overflowing now and then): info;
/// - with a finite loss and no loss scale it is a warning that says the loss stayed finite (a
///   skipped step, or a NaN averaged into a logging window), and critical once it holds for
///   `sustain` (3) observations in a row.
/// The location is the origin, not the first tensor recorded: a recorded input batch that
/// holds a NaN or Inf (the data, before the model); else the earliest activation in
/// forward (recording) order that holds one; else the gradient that backward computes
/// first, i.e. the last in recording order; else the first parameter. The evidence
/// `origin_rule` says which decided (1 forward activation, 2 backward gradient, 3 parameter,
/// 4 input data).
class non_finite {
 public:
  struct config {
    std::size_t sustain = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain}};
    }
  };
  non_finite() : non_finite(config{}) {}
  explicit non_finite(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"non_finite", question::convergence, {symptoms::non_finite_loss, symptoms::non_finite_tensors, symptoms::skipped_step_overflow, symptoms::non_finite_grad_norm}, "NaN or Inf in the loss, a logged gradient norm or a tensor, located at its origin", {.consequence = "none needed: a NaN or Inf loss or tensor is critical at once; a loss scaler's skipped step is info"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool bad_loss = s.loss && !std::isfinite(*s.loss);
    const bool bad_norm = s.grad_norm && !std::isfinite(*s.grad_norm);
    const bool scale_known = s.loss_scale && std::isfinite(*s.loss_scale);
    const bool scale_lowered = scale_known && last_scale_ > 0.0 && *s.loss_scale < last_scale_;
    if (scale_known) last_scale_ = *s.loss_scale;
    std::uint64_t tensors = 0, nan = 0, inf = 0;
    for (role r : {role::input, role::activation, role::gradient, role::parameter}) {
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() == 0) continue;
        ++tensors;
        nan += t.stats.nan;
        inf += t.stats.pos_inf + t.stats.neg_inf;
      }
    }
    norm_run_.observe(bad_norm, c_.sustain);
    if (!bad_loss && tensors == 0 && !bad_norm) return;
    grounds g;
    mldiag::symptom symptom = symptoms::non_finite_grad_norm;
    if (bad_loss) {
      symptom = symptoms::non_finite_loss;
      g = {.unambiguous = true, .note = "the loss is not finite"};
    } else if (tensors > 0) {
      symptom = symptoms::non_finite_tensors;
      g = {.unambiguous = true, .note = "a tensor holds NaN or Inf"};
    } else if (scale_lowered) {
      symptom = symptoms::skipped_step_overflow;
      g = {.expected = true, .note = "the loss scale was lowered at this step: a loss scaler's skipped step"};
    } else {
      // A NaN norm with a finite loss: a skipped step or a NaN averaged into a logging window
      // once; the update itself poisoned when it lasts.
      g = {.unambiguous = norm_run_.run() >= c_.sustain, .harm = true,
           .note = "the gradient norm is not finite while the loss stayed finite"};
    }
    finding f = make_finding(question::convergence, symptom, severity::info, s.step, name());
    double rule = 0.0;  // the rule of the first place listed: the origin
    const auto add = [&](role r, const tensor_evidence& t, double origin_rule) {
      if (t.stats.non_finite() == 0) return;
      f.where.emplace_back(location(r, o.names[t.id]), static_cast<double>(t.stats.non_finite()));
      if (rule == 0.0) rule = origin_rule;
    };
    for (const auto& t : s.inputs) add(role::input, t, 4.0);
    for (const auto& t : s.activations) add(role::activation, t, 1.0);
    for (auto it = s.gradients.rbegin(); it != s.gradients.rend(); ++it) add(role::gradient, *it, 2.0);
    for (const auto& t : s.parameters) add(role::parameter, t, 3.0);
    if (bad_loss) f.evidence.emplace_back("loss", *s.loss);
    if (s.grad_norm) f.evidence.emplace_back("grad_norm", *s.grad_norm);
    if (bad_norm && s.loss) f.evidence.emplace_back("loss_finite", std::isfinite(*s.loss) ? 1.0 : 0.0);
    if (bad_norm) f.evidence.emplace_back("non_finite_norm_steps_in_a_row", static_cast<double>(norm_run_.run()));
    if (s.loss_scale) f.evidence.emplace_back("loss_scale", *s.loss_scale);
    f.evidence.emplace_back("tensors_with_non_finite", static_cast<double>(tensors));
    f.evidence.emplace_back("nan", static_cast<double>(nan));
    f.evidence.emplace_back("inf", static_cast<double>(inf));
    if (rule > 0.0) f.evidence.emplace_back("origin_rule", rule);
    out.push_back(escalate(std::move(f), g));
  }

 private:
  config c_;
  onset norm_run_;  // steps in a row with a non-finite gradient norm
  double last_scale_ = 0.0;
};

}  // namespace mldiag::detectors
