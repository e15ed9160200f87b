// SPDX-License-Identifier: Apache-2.0
/// The symptoms findings name, as typed constants shared by detectors, pattern rows and reports.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <array>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// A symptom: what a finding says is wrong, in words ("loss spike"). Detectors, the L0
/// configuration checks, the distributed merge and the pattern tables all name symptoms through
/// the constants in `mldiag::symptoms`, so a misspelt symptom is a compile error instead of a
/// pattern row that never matches. `finding::symptom` holds the text (reports and log readers
/// read and write the words).
struct symptom {
  std::string_view text;
  constexpr operator std::string_view() const noexcept { return text; }  // NOLINT: implicit by design
  [[nodiscard]] constexpr bool empty() const noexcept { return text.empty(); }
  friend constexpr bool operator==(symptom, symptom) = default;
  /// `finding.symptom == symptoms::loss_spike`.
  friend constexpr bool operator==(symptom a, std::string_view b) noexcept { return a.text == b; }
};

namespace symptoms {
inline constexpr symptom non_finite_loss{"non-finite loss"};
inline constexpr symptom non_finite_tensors{"non-finite values in tensors"};
inline constexpr symptom non_finite_grad_norm{"non-finite gradient norm"};
inline constexpr symptom skipped_step_overflow{"skipped step: gradient overflow under loss scaling"};
inline constexpr symptom exploding_gradients{"exploding gradients"};
inline constexpr symptom grad_norm_grew_loss_fell{"gradient norm grew while the loss fell"};
inline constexpr symptom grad_norm_jumped_unanswered{"gradient norm jumped; the loss has not answered yet"};
inline constexpr symptom first_steps_overshot{"first steps overshot: gradient norm and loss jumped, then recovered"};
inline constexpr symptom grad_norm_jump_recovered{"gradient norm jumped with the loss; the loss came back"};
inline constexpr symptom gradients_persist{"gradients persist across steps"};
inline constexpr symptom gradients_nearly_identical{"gradients nearly identical step to step (full-batch training?)"};
inline constexpr symptom missing_loss_value{"missing loss value"};
inline constexpr symptom sustained_loss_increase{"sustained loss increase"};
inline constexpr symptom loss_far_above_best{"loss far above its best"};
inline constexpr symptom loss_scale_halving{"loss scale halving step after step"};
inline constexpr symptom lr_not_finite_or_negative{"learning rate not finite or negative"};
inline constexpr symptom lr_reached_zero{"learning rate reached zero"};
inline constexpr symptom lr_is_zero{"learning rate is zero"};
inline constexpr symptom lr_absurdly_large{"learning rate absurdly large"};
inline constexpr symptom lr_jumped{"learning rate jumped"};
inline constexpr symptom lr_dropped{"learning rate dropped"};
inline constexpr symptom lr_not_applied{"learning rate schedule not applied to the optimizer"};
inline constexpr symptom lr_above_configured_peak{"learning rate above the configured peak"};
inline constexpr symptom initial_loss_far_from_chance{"initial loss far from ln(classes)"};
inline constexpr symptom inputs_not_normalized{"inputs not normalized"};
inline constexpr symptom loss_at_chance_level{"loss stuck at chance level"};
inline constexpr symptom vanishing_gradients{"vanishing gradients"};
inline constexpr symptom loss_not_decreasing{"loss not decreasing"};
inline constexpr symptom plateau{"plateau"};
inline constexpr symptom progress_not_improving{"progress metric not improving"};
inline constexpr symptom progress_worsening{"progress metric worsening"};
inline constexpr symptom loss_oscillation{"loss oscillation"};
inline constexpr symptom dead_activations{"dead activations"};
inline constexpr symptom saturated_activations{"saturated activations"};
inline constexpr symptom frozen_parameters{"frozen parameters"};
inline constexpr symptom update_ratio_too_large{"update ratio too large"};
inline constexpr symptom update_ratio_too_small{"update ratio too small"};
inline constexpr symptom probabilities_as_logits{"loss input looks like probabilities"};
inline constexpr symptom loss_constant_from_start{"loss constant from the start"};
inline constexpr symptom loss_exactly_zero{"loss exactly zero"};
inline constexpr symptom same_input_batch{"the same input batch every step"};
inline constexpr symptom train_far_below_val{"training loss far below validation loss"};
inline constexpr symptom tensor_norm_jump{"tensor norm jump"};
inline constexpr symptom loss_spike{"loss spike"};
inline constexpr symptom attention_entropy_collapse{"attention entropy collapse"};
inline constexpr symptom expert_load_imbalance{"expert load imbalance"};
inline constexpr symptom residual_write_ratio_too_large{"residual write ratio too large"};
inline constexpr symptom embedding_norm_growing{"embedding norm growing"};
inline constexpr symptom parameter_drift{"parameter drift from initialization"};
inline constexpr symptom input_starvation{"input starvation"};
inline constexpr symptom layer_dominates{"one layer dominates step time"};
inline constexpr symptom low_mfu{"low MFU"};
inline constexpr symptom throughput_below_target{"throughput below target"};
inline constexpr symptom communication_overhead{"communication overhead"};
inline constexpr symptom memory_pressure{"memory pressure"};
inline constexpr symptom memory_fragmentation{"memory fragmentation"};
inline constexpr symptom memory_growth{"memory growth"};
inline constexpr symptom step_time_outliers{"step-time outliers"};
inline constexpr symptom straggler{"straggler"};
inline constexpr symptom labels_out_of_range{"labels out of range"};
inline constexpr symptom fp16_without_loss_scaling{"fp16 without loss scaling"};
inline constexpr symptom replicas_out_of_sync{"replicas out of sync"};
inline constexpr symptom ranks_disagree{"ranks disagree"};

/// Every symptom mldiag raises.
inline constexpr std::array all{
    non_finite_loss,
    non_finite_tensors,
    non_finite_grad_norm,
    skipped_step_overflow,
    exploding_gradients,
    grad_norm_grew_loss_fell,
    grad_norm_jumped_unanswered,
    first_steps_overshot,
    grad_norm_jump_recovered,
    gradients_persist,
    gradients_nearly_identical,
    missing_loss_value,
    sustained_loss_increase,
    loss_far_above_best,
    loss_scale_halving,
    lr_not_finite_or_negative,
    lr_reached_zero,
    lr_is_zero,
    lr_absurdly_large,
    lr_jumped,
    lr_dropped,
    lr_not_applied,
    lr_above_configured_peak,
    initial_loss_far_from_chance,
    inputs_not_normalized,
    loss_at_chance_level,
    vanishing_gradients,
    loss_not_decreasing,
    plateau,
    progress_not_improving,
    progress_worsening,
    loss_oscillation,
    dead_activations,
    saturated_activations,
    frozen_parameters,
    update_ratio_too_large,
    update_ratio_too_small,
    probabilities_as_logits,
    loss_constant_from_start,
    loss_exactly_zero,
    same_input_batch,
    train_far_below_val,
    tensor_norm_jump,
    loss_spike,
    attention_entropy_collapse,
    expert_load_imbalance,
    residual_write_ratio_too_large,
    embedding_norm_growing,
    parameter_drift,
    input_starvation,
    layer_dominates,
    low_mfu,
    throughput_below_target,
    communication_overhead,
    memory_pressure,
    memory_fragmentation,
    memory_growth,
    step_time_outliers,
    straggler,
    labels_out_of_range,
    fp16_without_loss_scaling,
    replicas_out_of_sync,
    ranks_disagree};

/// The symptoms of a run that broke — a NaN or Inf, a loss that stopped being logged — and of
/// the near miss a loss scaler handles (a skipped fp16 step). The monitor marks findings that
/// follow a critical one of these as its consequences (finding::consequence_of), and never
/// these themselves.
inline constexpr std::array run_breaking{non_finite_loss, non_finite_tensors, non_finite_grad_norm, skipped_step_overflow,
                                         missing_loss_value};

/// The constant whose text is `text`, or an empty symptom.
[[nodiscard]] constexpr symptom find(std::string_view text) noexcept {
  for (const symptom s : all)
    if (s.text == text) return s;
  return {};
}

}  // namespace symptoms
}  // namespace mldiag
