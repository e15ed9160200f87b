// SPDX-License-Identifier: Apache-2.0
/// `task`: what the monitor cannot see in the numbers and is told once — the number of classes,
/// where the run starts, the optimizer's settings, how the data and the hardware are used.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/vocab/declarations.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace mldiag::inline MLDIAG_ABI {

/// The task a run trains on, as its author knows it. Every field is optional; each one given
/// lets a check run before the first step (detectors::check_configuration) or a detector judge
/// what it could not otherwise tell apart. `monitor_config::task` holds it.
///
/// **Example**: `mldiag::monitor mon({.task = {.classes = 10, .learning_rate = 3e-4, .max_grad_norm = 1.0}});`
struct task {
  /// Classes of a cross-entropy task (0 = not one, or unknown): the first loss is then judged
  /// against ln(classes) (initial_loss) and a loss that stays there (chance_level).
  std::size_t classes = 0;
  /// The run starts from trained weights (fine-tuning a checkpoint, a resumed run): its first
  /// loss is not a uniform guess's, so initial_loss leaves the default set and the phase-1
  /// summary does not judge the first loss against ln(classes). A fine-tuned head answering
  /// its old classes starts above ln C, a resumed run far below it. chance_level stays: a loss
  /// still at ln C after training is as wrong from a checkpoint as from scratch.
  bool from_checkpoint = false;
  /// The peak learning rate of the schedule: checked before the first step, and the line
  /// configured_lr holds the rate in use to.
  std::optional<double> learning_rate = {};
  /// The bound the global gradient norm is clipped to (`clip_grad_norm_`'s `max_norm`); unset
  /// when gradients are not clipped. exploding_gradients then knows that a jump above it was
  /// bounded before the optimizer applied it.
  std::optional<double> max_grad_norm = {};
  /// Every step reads the whole training set (full-batch gradient descent, L-BFGS): the same
  /// input batch every step is then meant, and repeated_batch says so as info.
  bool full_batch = false;
  /// What the training loss is (vocab/declarations.hpp): minimized toward a floor (the
  /// default), or not a progress measure (an adversarial objective, a policy-gradient
  /// surrogate). With `objective::not_progress` the detectors that read the loss as progress
  /// stand aside and the convergence verdicts read `monitor::observe_metric`'s metrics.
  mldiag::objective objective = mldiag::objective::minimized;
  /// Validation is drawn unlike training (balanced validation for long-tailed training,
  /// another domain): train_val_gap judges the gap's trend, not its level.
  bool validation_unlike_training = false;
  /// The loss of an uninformed model when it is not ln(classes): ln(batch) for an in-batch
  /// contrastive loss, any other declared level. initial_loss and chance_level judge against it.
  std::optional<double> chance_loss = {};
  /// The lowest loss the objective can reach when it is not 0 (label smoothing, mixup's soft
  /// targets): loss_not_decreasing measures progress toward it. `no_lower_bound` for a loss
  /// that has none (learned uncertainty weights, a Gaussian log-likelihood, a Wasserstein
  /// estimate): the loss may then cross 0, and the checks that read a rise as a ratio to the
  /// loss's level (loss_spike, the harm that escalates early signals) read it in the loss's
  /// own noise and in the share of its progress instead.
  std::optional<double> loss_floor = {};
  /// The optimizer evaluates the loss several times a step and stops moving once it meets its
  /// tolerance (L-BFGS, any line search): the monitor keeps the first loss observed in a step
  /// (the loss at the step's parameters, what `LBFGS::step` returns), and
  /// every parameter unchanged at once (frozen_parameters), or no weight matrix moving
  /// (update_ratio), is the optimizer's convergence, not a frozen tensor or a rate too small.
  bool line_search = false;
  /// The labels' range in the data, checked against `classes`.
  std::optional<std::int64_t> label_min = {}, label_max = {};
  bool fp16 = false;
  bool loss_scaling = true;
  std::optional<int> data_loader_workers = {};
  /// Tokens (or samples) one device processes per step (micro-batch x sequence length).
  std::optional<std::int64_t> tokens_per_step = {};
  // 4096: a GEMM of a d=768 layer fills one wave of an H100's 132 SMs with 128x128 tiles only
  // from M = 132 / (768 / 128) x 128 = 2816 rows; below ~4k tokens the kernels are too small.
  std::int64_t min_tokens_per_step = 4096;
  /// Whether fused (flash) attention is on; unset = not known.
  std::optional<bool> fused_attention = {};
  /// The dtype the matmuls actually run in, and whether mixed precision (bf16/fp16 autocast)
  /// was meant: f32 compute with mixed precision meant is the "fp32 where bf16 was meant" fault.
  std::optional<dtype> compute_dtype = {};
  bool mixed_precision = false;
};

}  // namespace mldiag
