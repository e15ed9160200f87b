// SPDX-License-Identifier: Apache-2.0
/// The method's pattern tables as data: evidence signature -> likely cause -> first action.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/symptom.hpp"

#include <array>
#include <span>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::protocol {

/// One row: the symptoms (finding.symptom) that make up its evidence signature, the likely
/// cause it points to, and the first action the method prescribes. Likely causes rank
/// candidate hypotheses in phase 2; first actions are handed out only in phase 4.
struct pattern_row {
  std::string_view table;
  std::array<symptom, 6> signature;  // any of these symptoms matches (empty = unused)
  std::string_view cause;
  std::string_view variable;  // the one thing a hypothesis for this cause changes
  std::string_view first_action;
};

/// Loss not decreasing (10 rows), efficiency (11 rows), architecture anomalies (4 rows).
inline constexpr std::array<pattern_row, 25> pattern_tables{{
    {"loss not decreasing", {symptoms::loss_not_decreasing, symptoms::plateau, symptoms::progress_not_improving}, "learning rate too low", "learning_rate",
     "raise the learning rate 3-10x (an LR range test finds the edge)"},
    {"loss not decreasing", {symptoms::loss_oscillation, symptoms::sustained_loss_increase, symptoms::loss_spike, symptoms::lr_absurdly_large, symptoms::lr_jumped, symptoms::lr_above_configured_peak},
     "learning rate too high",
     "learning_rate", "lower the learning rate 3-10x and add or lengthen warm-up"},
    {"loss not decreasing", {symptoms::non_finite_loss, symptoms::non_finite_tensors, symptoms::exploding_gradients, symptoms::non_finite_grad_norm, symptoms::loss_far_above_best},
     "numerical instability", "gradient_clipping",
     "clip the global gradient norm (e.g. 1.0), check fp16 loss scaling, find the first non-finite tensor"},
    {"loss not decreasing", {symptoms::vanishing_gradients, symptoms::dead_activations, symptoms::saturated_activations},
     "gradients do not reach early layers", "initialization",
     "check initialization scale and activations; add normalization or residual connections"},
    {"loss not decreasing", {symptoms::initial_loss_far_from_chance, symptoms::loss_at_chance_level, symptoms::probabilities_as_logits, symptoms::loss_exactly_zero},
     "wrong loss function or labels", "loss_function",
     "check the loss against the task and the labels' range on one batch by hand"},
    // Inputs on their raw scale (0-255 pixels, unscaled features): the first layer's
    // pre-activations are 100x too large, and the learning rates that fit normalized data do not.
    {"loss not decreasing", {symptoms::inputs_not_normalized, symptom{}, symptom{}}, "inputs are not normalized", "input_normalization",
     "standardize the inputs with the training set's mean and standard deviation (images: divide by 255, then normalize "
     "per channel), the same way for training and validation"},
    {"loss not decreasing", {symptoms::frozen_parameters, symptoms::update_ratio_too_small, symptoms::lr_is_zero, symptoms::loss_constant_from_start},
     "parameters are not updated", "optimizer_setup",
     "check that every parameter is in the optimizer, requires grad, and that the schedule is not zero"},
    // Gradients that agree step after step though the batches differ: .grad is summed into,
    // never reset (persistent_gradients finds it through the cosine between consecutive gradients).
    {"loss not decreasing", {symptoms::gradients_persist, symptom{}, symptom{}},
     "gradients accumulate across steps: zero_grad() is missing or misplaced", "gradient_zeroing",
     "call zero_grad() once per optimizer step, after step() and before the next backward (with gradient accumulation: "
     "after the last micro-batch's step)"},
    // A training loss that leaves the validation loss far behind: the model memorizes what it
    // is trained on (the same batch every step) or the two data sets differ.
    {"loss not decreasing", {symptoms::train_far_below_val, symptom{}, symptom{}}, "the model memorizes its training data",
     "data_pipeline",
     "check that batches change every step and that validation data goes through the same preprocessing as training data"},
    // From the distributed merge (distributed/mpi.hpp): data-parallel replicas that differ
    // train different models; the loss of the average stalls or wanders.
    {"loss not decreasing", {symptoms::replicas_out_of_sync, symptoms::ranks_disagree, symptom{}}, "ranks out of sync", "gradient_synchronization",
     "check that every rank all-reduces every gradient each step (no rank skips a bucket or an unused parameter) and "
     "starts from the same weights, learning rate and loss scale"},
    // Q3. "low MFU" is in three rows, most likely cause first (the method: below 20% input-bound
    // or the wrong backend, 20-40% memory-bound or poor overlap); a finding that comes with it
    // (input starvation, communication overhead) ranks its own row higher.
    {"efficiency", {symptoms::input_starvation, symptoms::low_mfu, symptom{}}, "the input pipeline cannot keep up", "data_loader_workers",
     "add loader workers, prefetch and pin memory; move decoding off the training process"},
    {"efficiency", {symptoms::low_mfu, symptom{}, symptom{}}, "the wrong backend: unfused attention or fp32 math", "attention_backend",
     "turn on fused (flash) attention and bf16 autocast; check in a profiler that the intended kernels run"},
    {"efficiency", {symptoms::low_mfu, symptoms::communication_overhead, symptom{}}, "memory-bound kernels or poor overlap", "batch_size",
     "raise the micro-batch, fuse elementwise kernels, overlap communication and transfers with compute"},
    {"efficiency", {symptoms::throughput_below_target, symptom{}, symptom{}}, "a memory-bound model near the hardware's limit (expected)",
     "throughput_target", "check the target against FLOPs/token and peak; more speed needs lower precision or more devices"},
    {"efficiency", {symptoms::layer_dominates, symptom{}, symptom{}}, "one layer is slow", "layer_implementation",
     "profile that layer forward and backward; look for an unfused kernel, a debug path or a host sync"},
    {"efficiency", {symptoms::communication_overhead, symptom{}, symptom{}}, "communication not overlapped", "gradient_bucketing",
     "overlap communication with backward (bucketing), check the link's bandwidth with nccl-tests"},
    {"efficiency", {symptoms::straggler, symptom{}, symptom{}}, "one rank is slower than the others", "slow_rank",
     "compare the slow rank's step phases, clocks, data shard and link with the others'; replace or rebalance it"},
    {"efficiency", {symptoms::memory_pressure, symptoms::memory_fragmentation, symptom{}}, "memory pressure", "activation_checkpointing",
     "checkpoint activations, shrink the micro-batch, tune the caching allocator"},
    {"efficiency", {symptoms::memory_fragmentation, symptom{}, symptom{}}, "the caching allocator fragments", "allocator_settings",
     "use expandable segments or a max split size; allocate variable-size buffers once at their largest size"},
    {"efficiency", {symptoms::memory_growth, symptom{}, symptom{}}, "a leak: tensors kept alive across steps", "retained_references",
     "find what keeps tensors alive across steps (a loss summed with its graph, stored outputs, caches); detach or free"},
    {"efficiency", {symptoms::step_time_outliers, symptom{}, symptom{}}, "intermittent stalls from work outside the step", "background_work",
     "line the slow steps up with checkpoints, evaluation, logging and garbage collection; make them asynchronous"},
    {"architecture", {symptoms::attention_entropy_collapse, symptom{}, symptom{}}, "attention logits grow too large", "qk_normalization",
     "normalize queries and keys (QK-norm) or lower the learning rate of attention"},
    {"architecture", {symptoms::expert_load_imbalance, symptom{}, symptom{}}, "the router collapses onto few experts", "load_balancing_loss",
     "add or raise the load-balancing loss (and a router z-loss)"},
    {"architecture", {symptoms::residual_write_ratio_too_large, symptom{}, symptom{}}, "blocks overwrite the residual stream",
     "residual_scaling", "use pre-norm blocks or scale residual branches down at initialization"},
    {"architecture", {symptoms::embedding_norm_growing, symptoms::parameter_drift, symptom{}},
     "embeddings grow without bound", "embedding_weight_decay",
     "apply weight decay (or a norm) to the embeddings"},
}};

/// Whether a finding's symptom is in a row's signature.
[[nodiscard]] constexpr bool matches(const pattern_row& row, std::string_view symptom) noexcept {
  for (const mldiag::symptom s : row.signature)
    if (!s.empty() && s.text == symptom) return true;
  return false;
}

}  // namespace mldiag::protocol
