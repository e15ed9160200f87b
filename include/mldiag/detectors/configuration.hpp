// SPDX-License-Identifier: Apache-2.0
/// The L0 checks: a task checked before the first step.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/task.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/vocab/symptom.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

namespace detectors {

/// What the L0 checks are, as a detector describes itself: their findings' `detector` is
/// "configuration".
inline constexpr detector_info configuration_checks{
    "configuration", question::convergence,
    {symptoms::lr_not_finite_or_negative, symptoms::lr_absurdly_large, symptoms::labels_out_of_range,
     symptoms::fp16_without_loss_scaling, symptoms::input_starvation, symptoms::low_mfu}};

/// L0: checks a task before the first step. Each field that is set is checked; the findings
/// (step -1) map to the method's questions (docs/method.md). The learning-rate line is
/// lr_sanity's at run time: one policy, not two (vocab/thresholds.hpp).
///
/// **Example**: `check_configuration({.classes = 10, .learning_rate = 3e-4, .label_min = 0, .label_max = 9})`
/// is empty; `.label_max = 10` gives "labels out of range" (critical).
[[nodiscard]] inline std::vector<finding> check_configuration(const task& c) {
  std::vector<finding> out;
  auto add = [&](question q, mldiag::symptom symptom, severity s, std::vector<std::pair<std::string, double>> ev) {
    out.push_back(make_finding(q, symptom, s, -1, configuration_checks.name, std::move(ev)));
  };
  if (c.learning_rate && (!std::isfinite(*c.learning_rate) || *c.learning_rate <= 0.0)) {
    add(question::convergence, symptoms::lr_not_finite_or_negative, severity::critical, {{"lr", *c.learning_rate}});
  } else if (const double max_lr = thresholds::max_learning_rate; c.learning_rate && *c.learning_rate > max_lr) {
    // The same line as lr_sanity's at run time: a VAE trained with SGD at 4 must not be
    // "absurd" here and sane there. Info, as there: before any step nothing has been harmed,
    // and lr_sanity makes it a warning when the run's progress worsens (issue 38).
    add(question::convergence, symptoms::lr_absurdly_large, severity::info,
        {{"lr", *c.learning_rate}, {"max_lr", max_lr}});
    out.back() = escalate(std::move(out.back()), {.note = "lr_sanity watches the run; above the rates known to train"});
  }
  if (c.classes > 0 && c.label_min && c.label_max &&
      (*c.label_min < 0 || *c.label_max >= static_cast<std::int64_t>(c.classes))) {
    add(question::convergence, symptoms::labels_out_of_range, severity::critical,
        {{"label_min", static_cast<double>(*c.label_min)}, {"label_max", static_cast<double>(*c.label_max)},
         {"classes", static_cast<double>(c.classes)}});
  }
  if (c.fp16 && !c.loss_scaling) {
    add(question::convergence, symptoms::fp16_without_loss_scaling, severity::warning, {});
  }
  if (c.data_loader_workers && *c.data_loader_workers == 0) {
    add(question::efficiency, symptoms::input_starvation, severity::info, {{"data_loader_workers", 0.0}});
  }
  // The efficiency settings predict "low MFU"; info where the setting can be deliberate (a
  // small fine-tuning batch, an attention mask flash kernels do not support), warning where
  // the configuration contradicts itself.
  if (c.tokens_per_step && *c.tokens_per_step < c.min_tokens_per_step) {
    const auto tokens = static_cast<double>(*c.tokens_per_step);
    add(question::efficiency, symptoms::low_mfu, severity::info,
        {{"tokens_per_step", tokens}, {"min_tokens_per_step", static_cast<double>(c.min_tokens_per_step)}});
    out.back().where.emplace_back("tokens_per_step", tokens);
  }
  if (c.fused_attention && !*c.fused_attention) {
    add(question::efficiency, symptoms::low_mfu, severity::info, {{"fused_attention", 0.0}});
    out.back().where.emplace_back("fused_attention", 0.0);
  }
  if (c.mixed_precision && c.compute_dtype && (*c.compute_dtype == dtype::f32 || *c.compute_dtype == dtype::f64)) {
    add(question::efficiency, symptoms::low_mfu, severity::warning,
        {{"compute_dtype_bytes", static_cast<double>(size_of(*c.compute_dtype))}, {"mixed_precision", 1.0}});
    out.back().where.emplace_back("compute_dtype", static_cast<double>(size_of(*c.compute_dtype)));
  }
  return out;
}

}  // namespace detectors
}  // namespace mldiag
