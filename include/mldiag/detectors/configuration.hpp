// SPDX-License-Identifier: Apache-2.0
/// The L0 checks: a training configuration checked before the first step.
#pragma once

#include "mldiag/core/dtype.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/detectors/convergence.hpp"  // lr_sanity: one line for the learning rate
#include "mldiag/detectors/symptoms.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mldiag {

/// The L0 checks: static configuration, before the first step. Each field that is set is
/// checked; findings map to the method's questions (see docs/method.md).
struct training_config {
  std::optional<double> learning_rate = {};
  /// The bound the global gradient norm is clipped to (`clip_grad_norm_`'s `max_norm`); unset
  /// when gradients are not clipped. The monitor's exploding_gradients then knows that a jump
  /// above it was bounded before the optimizer applied it.
  std::optional<double> max_grad_norm = {};
  std::optional<double> classes = {};
  /// Every step reads the whole training set (full-batch gradient descent, L-BFGS): the same
  /// input batch every step is then meant, and the monitor's repeated_batch says so as info.
  bool full_batch = false;
  std::optional<double> label_min = {}, label_max = {};  ///< the labels' range in the data
  bool fp16 = false;
  bool loss_scaling = true;
  std::optional<int> data_loader_workers = {};
  /// Tokens (or samples) one device processes per step (micro-batch x sequence length).
  std::optional<double> tokens_per_step = {};
  // 4096: a GEMM of a d=768 layer fills one wave of an H100's 132 SMs with 128x128 tiles only
  // from M = 132 / (768 / 128) x 128 = 2816 rows; below ~4k tokens the kernels are too small.
  double min_tokens_per_step = 4096;
  /// Whether fused (flash) attention is on; unset = not known.
  std::optional<bool> fused_attention = {};
  /// The dtype the matmuls actually run in, and whether mixed precision (bf16/fp16 autocast)
  /// was meant: f32 compute with mixed precision meant is the "fp32 where bf16 was meant" fault.
  std::optional<dtype> compute_dtype = {};
  bool mixed_precision = false;
};

namespace detectors {

/// What the L0 checks are, as a detector describes itself: their findings' `detector` is
/// "configuration".
inline constexpr detector_info configuration_checks{
    "configuration", question::convergence,
    {symptoms::lr_not_finite_or_negative, symptoms::lr_absurdly_large, symptoms::labels_out_of_range,
     symptoms::fp16_without_loss_scaling, symptoms::input_starvation, symptoms::low_mfu}};

/// L0: checks a static training configuration before the first step. Each field that is set is
/// checked; the findings (step -1) map to the method's questions (docs/method.md). The
/// learning-rate line is lr_sanity's at run time: one policy, not two.
///
/// **Example**: `check_configuration({.learning_rate = 3e-4, .classes = 10, .label_min = 0, .label_max = 9})`
/// is empty; `.label_max = 10` gives "labels out of range" (critical).
[[nodiscard]] inline std::vector<finding> check_configuration(const training_config& c) {
  std::vector<finding> out;
  auto add = [&](question q, mldiag::symptom symptom, severity s, std::vector<std::pair<std::string, double>> ev) {
    out.push_back(make_finding(q, symptom, s, -1, configuration_checks.name, std::move(ev)));
  };
  if (c.learning_rate && (!std::isfinite(*c.learning_rate) || *c.learning_rate <= 0.0)) {
    add(question::convergence, symptoms::lr_not_finite_or_negative, severity::critical, {{"lr", *c.learning_rate}});
  } else if (const double max_lr = lr_sanity::config{}.max_lr; c.learning_rate && *c.learning_rate > max_lr) {
    // The same line as lr_sanity's at run time: a VAE trained with SGD at 4 must not be
    // "absurd" here and sane there.
    add(question::convergence, symptoms::lr_absurdly_large, severity::warning,
        {{"lr", *c.learning_rate}, {"max_lr", max_lr}});
  }
  if (c.classes && c.label_min && c.label_max && (*c.label_min < 0 || *c.label_max >= *c.classes)) {
    add(question::convergence, symptoms::labels_out_of_range, severity::critical,
        {{"label_min", *c.label_min}, {"label_max", *c.label_max}, {"classes", *c.classes}});
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
    add(question::efficiency, symptoms::low_mfu, severity::info,
        {{"tokens_per_step", *c.tokens_per_step}, {"min_tokens_per_step", c.min_tokens_per_step}});
    out.back().where.emplace_back("tokens_per_step", *c.tokens_per_step);
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
