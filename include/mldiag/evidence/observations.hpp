// SPDX-License-Identifier: Apache-2.0
/// What a training loop hands the recorder besides tensors and scalars, each as a small named
/// value: a layer's time, a router's load, row entropies, a parameter's drift, every rank's
/// step time, the cosines of consecutive gradients.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/entropy.hpp"
#include "mldiag/vocab/declarations.hpp"

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// Seconds one named layer took in the step (forward, or forward and backward where the caller
/// marks both). Record layers in model order.
///
/// **Example**: `mon.observe(mldiag::layer_timing{"blocks.3", 2.1e-3});`
struct layer_timing {
  std::string_view layer;
  double seconds = 0.0;
};

/// The expert loads of a mixture-of-experts router over the step (token counts or summed
/// probabilities), by expert.
struct router_load {
  std::string_view router;
  std::span<const double> loads;
};

/// A router's choices over the step: each token's expert index in [0, experts) (top-k routing
/// gives k per token, in any order); the loads are counted from them.
///
/// **Example**: `mon.observe(mldiag::router_assignments{"blocks.1.router", std::span<const std::int64_t>(choice), 8});`
template <std::integral I>
struct router_assignments {
  std::string_view router;
  std::span<const I> chosen;
  std::size_t experts = 0;
};
template <std::integral I>
router_assignments(std::string_view, std::span<const I>, std::size_t) -> router_assignments<I>;

/// Row entropies already computed (`entropy_from_logits`, the CUDA kernels) for a tensor of
/// attention probabilities or logits, router distributions.
struct row_entropy {
  std::string_view tensor;
  entropy_stats stats;
};

/// A parameter's relative drift from its initialization, ||theta - theta0|| / ||theta0||
/// (drift_tracker, evidence/drift.hpp).
struct parameter_drift_of {
  std::string_view parameter;
  double relative = 0.0;
};

/// Every rank's step time in seconds, by rank (rank r at index r): its time up to the step's
/// synchronizing collective, not the synchronized step (which is equal everywhere).
struct rank_step_times {
  std::span<const double> seconds;
};

/// A progress metric of the step (a return, an accuracy, a score), the way it improves, under
/// a name: what the convergence verdicts read when the loss is not a progress measure
/// (task::objective, `monitor::observe_metric`), and a consequence everywhere else.
///
/// **Example**: `mon.observe(mldiag::progress_metric{"return", episode_return, true});`
struct progress_metric {
  std::string_view name;
  double value = 0.0;
  bool higher_is_better = true;
};

/// The learning rate one parameter group of one optimizer used at this step, under a name
/// ("generator/0", "backbone"): two optimizers in one loop, or discriminative fine-tuning rates.
/// Read from the optimizer itself (the LibTorch adapter's `observe_learning_rates`), so that a
/// schedule the program computes but never writes into the optimizer is seen.
///
/// **Example**: `mon.observe(mldiag::group_learning_rate{"discriminator/0", 2e-4});`
struct group_learning_rate {
  std::string_view group;
  double lr = 0.0;
};

/// A change made on purpose at this step (a curriculum stage, fine-tuning, unfreezing, a new
/// optimizer): the detectors that hold a baseline of a stationary run start it again here.
///
/// **Example**: `mon.observe(mldiag::regime_change{mldiag::change::data});`
struct regime_change {
  mldiag::change kind = mldiag::change::data;
};

/// What gradient_persistence (evidence/persistence.hpp) measures at the end of a step.
struct gradient_cosines {
  /// cos(g_t, g_{t-1}): the cosine between this step's gradients and the previous step's.
  double consecutive = 0.0;
  /// cos(g_t - g_{t-1}, g_{t-1} - g_{t-2}): the cosine between consecutive increments; absent
  /// until three steps in a row have gradients.
  std::optional<double> increments;
};

}  // namespace mldiag
