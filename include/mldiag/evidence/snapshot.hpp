// SPDX-License-Identifier: Apache-2.0
/// The evidence of one training step: loss, learning rate, per-tensor statistics by role,
/// timings, memory and efficiency.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"
#include "mldiag/vocab/declarations.hpp"
#include "mldiag/vocab/metric.hpp"
#include "mldiag/vocab/role.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>  // std::as_const
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// The L2 norm of a tensor as `torch.linalg.norm` reports it: NaN when any element is NaN,
/// +Inf when any is infinite, else the norm of the elements. (tensor_stats::l2_norm() is the
/// norm of the finite elements alone: a different question, and 0 for an all-NaN tensor.)
[[nodiscard]] inline double norm_of(const tensor_stats& s) noexcept {
  if (s.nan > 0) return std::numeric_limits<double>::quiet_NaN();
  if (s.pos_inf + s.neg_inf > 0) return std::numeric_limits<double>::infinity();
  return s.l2_norm();
}

/// Stable small integers for tensor names: interned once (allocation), looked up after that
/// without allocating (heterogeneous lookup by string_view).
class name_table {
 public:
  std::uint32_t intern(std::string_view name) {
    if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.emplace_back(name);
    ids_.emplace(names_.back(), id);
    return id;
  }
  [[nodiscard]] std::string_view operator[](std::uint32_t id) const noexcept { return names_[id]; }
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }

 private:
  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t, hash, std::equal_to<>> ids_;
};

/// A tensor's statistics in a snapshot: `id` indexes the recorder's name_table.
struct tensor_evidence {
  std::uint32_t id;
  tensor_stats stats;
};

/// Entropy of rows (attention probabilities or logits, router distributions) of one tensor.
struct entropy_evidence {
  std::uint32_t id;
  entropy_stats stats;
};

/// Load of the experts of one mixture-of-experts router over a step.
struct router_evidence {
  std::uint32_t id;
  std::uint32_t experts = 0;
  std::uint32_t dead = 0;              ///< experts with zero load
  double normalized_entropy = 0.0;     ///< entropy of the load distribution / log(experts)
  double max_over_mean = 0.0;          ///< the busiest expert's load over the mean load
  double total_load = 0.0;             ///< the loads' sum (tokens routed; 0 when not known)
};

/// A progress metric's value at a step (progress_metric), by name id.
struct metric_evidence {
  std::uint32_t id;
  double value = 0.0;
  bool higher_is_better = true;
};

/// Step-phase timings, in seconds; a phase that was not measured is absent.
struct step_timings {
  std::optional<double> data_wait = {}, forward = {}, backward = {}, optimizer = {}, communication = {}, total = {};
  friend bool operator==(const step_timings&, const step_timings&) = default;
};

/// Time spent in one named layer during a step (forward, or forward and backward where the
/// caller marks both), in seconds.
struct layer_time {
  std::uint32_t id;
  double seconds;
};

/// Memory evidence, in bytes; what was not measured is absent. A caching allocator (LibTorch's,
/// or one of the user's) reports `allocated` (held by live tensors), `reserved` (held by the
/// allocator: allocated plus its cached free blocks), `peak` and, where it can,
/// `largest_free_block`; the driver reports `capacity` and `used` (`cudaMemGetInfo`: total and
/// total - free, every process and the context included); on the host, `host_rss` and
/// `host_rss_peak` (efficiency/memory.hpp reads them).
struct memory_evidence {
  std::optional<double> allocated = {}, reserved = {}, peak = {}, capacity = {};
  /// The largest contiguous free block the allocator could hand out without asking the driver.
  std::optional<double> largest_free_block = {};
  std::optional<double> used = {}, host_rss = {}, host_rss_peak = {};

  /// 1 - allocated / reserved: the share of the allocator's memory that no tensor uses (absent
  /// unless both are known and reserved > 0).
  [[nodiscard]] std::optional<double> fragmentation() const noexcept {
    if (!reserved || !(*reserved > 0.0) || !allocated) return std::nullopt;
    return 1.0 - *allocated / *reserved;
  }
  /// The fullest of allocated, reserved and used, over capacity (absent unless capacity > 0
  /// and one of them are known).
  [[nodiscard]] std::optional<double> fill() const noexcept {
    std::optional<double> top;
    for (const auto& v : {allocated, reserved, used})
      if (v && !(top >= *v)) top = *v;
    if (!top || !capacity || !(*capacity > 0.0)) return std::nullopt;
    return *top / *capacity;
  }
  friend bool operator==(const memory_evidence&, const memory_evidence&) = default;
};

/// Efficiency evidence of a step (absent where not measured): model FLOPs utilization
/// and tensor-core activity as fractions (0..1), throughput and the user's target in the
/// same units per second (tokens/s, samples/s), and the bytes the step's collectives moved
/// with the bandwidth the user expects of the link (bytes/s), judged against
/// `step_timings::communication`.
struct efficiency_evidence {
  std::optional<double> mfu = {}, tensor_core_activity = {}, throughput = {}, throughput_target = {}, communication_bytes = {},
                        link_bandwidth = {};
  friend bool operator==(const efficiency_evidence&, const efficiency_evidence&) = default;
};

/// One step's evidence. What was not recorded is absent (`std::nullopt`); what was recorded as
/// NaN or Inf is evidence (a loss that blew up: `loss` holds NaN). One convention for every
/// value of the snapshot, the recorder, the reports and the log readers.
/// Vectors are cleared, not freed, between steps, so a reused snapshot stops allocating once
/// it has seen the largest step.
struct snapshot {
  std::int64_t step = -1;
  std::optional<double> loss, val_loss, lr, loss_scale;
  /// A global gradient norm given directly (logs often have only this, clip_grad_norm_
  /// returns it): a given NaN or Inf is evidence (a skipped fp16 step, or a real failure).
  std::optional<double> grad_norm;
  /// The cosine between this step's gradients and the previous step's (gradient_persistence,
  /// evidence/persistence.hpp): near 1 for long when gradients are never zeroed.
  std::optional<double> grad_cosine;
  /// The cosine between consecutive increments of the gradients (g_t - g_{t-1} against
  /// g_{t-1} - g_{t-2}): about -0.5 for mini-batch noise, 0 or more when gradients accumulate.
  std::optional<double> grad_increment_cosine;

  std::vector<tensor_evidence> gradients, parameters, activations, residual_inputs, block_outputs, updates, inputs;
  /// Relative drift from initialization, ||theta - theta0|| / ||theta0||, by parameter id
  /// (from a drift_tracker; see evidence/drift.hpp).
  std::vector<std::pair<std::uint32_t, double>> drift;
  std::vector<entropy_evidence> attention;
  std::vector<router_evidence> routers;
  step_timings timings;
  std::vector<layer_time> layer_times;
  memory_evidence memory;
  efficiency_evidence efficiency;
  /// Step time of every rank (seconds, by rank), for stragglers: each rank's time up to the
  /// step's synchronizing collective, not the synchronized step (which is equal everywhere).
  std::vector<double> rank_step_times;
  /// Progress metrics the user gave (a return, an accuracy), by name id.
  std::vector<metric_evidence> metrics;
  /// Learning rates by parameter group (group_learning_rate), by name id.
  std::vector<std::pair<std::uint32_t, double>> group_lrs;
  /// A change declared at this step (absent on every other step).
  std::optional<mldiag::change> change;

  /// Resets for a new step, keeping every vector's capacity.
  void clear(std::int64_t new_step) noexcept {
    step = new_step;
    for (auto* v : {&loss, &val_loss, &lr, &loss_scale, &grad_norm, &grad_cosine, &grad_increment_cosine}) v->reset();
    for (auto* v : {&gradients, &parameters, &activations, &residual_inputs, &block_outputs, &updates, &inputs}) v->clear();
    drift.clear();
    attention.clear();
    routers.clear();
    layer_times.clear();
    timings = {};
    memory = {};
    efficiency = {};
    rank_step_times.clear();
    metrics.clear();
    group_lrs.clear();
    change.reset();
  }

  /// Reserves room in every vector for as many entries as `o` holds (a history slot that has
  /// not been used yet, made ready for steps like `o`: issue 18's quiet path allocates
  /// nothing after the first step).
  void reserve_like(const snapshot& o) {
    gradients.reserve(o.gradients.size());
    parameters.reserve(o.parameters.size());
    activations.reserve(o.activations.size());
    residual_inputs.reserve(o.residual_inputs.size());
    block_outputs.reserve(o.block_outputs.size());
    updates.reserve(o.updates.size());
    inputs.reserve(o.inputs.size());
    drift.reserve(o.drift.size());
    attention.reserve(o.attention.size());
    routers.reserve(o.routers.size());
    layer_times.reserve(o.layer_times.size());
    rank_step_times.reserve(o.rank_step_times.size());
    metrics.reserve(o.metrics.size());
    group_lrs.reserve(o.group_lrs.size());
  }

  /// The tensors of a role.
  [[nodiscard]] const std::vector<tensor_evidence>& of(role r) const noexcept {
    switch (r) {
      case role::gradient: return gradients;
      case role::parameter: return parameters;
      case role::activation: return activations;
      case role::residual_input: return residual_inputs;
      case role::block_output: return block_outputs;
      case role::update: return updates;
      case role::input: return inputs;
    }
    return gradients;
  }
  [[nodiscard]] std::vector<tensor_evidence>& of(role r) noexcept {
    return const_cast<std::vector<tensor_evidence>&>(std::as_const(*this).of(r));
  }

  /// The value of a scalar, as recorded (absent when it was not).
  [[nodiscard]] const std::optional<double>& of(scalar s) const noexcept {
    switch (s) {
      case scalar::loss: return loss;
      case scalar::val_loss: return val_loss;
      case scalar::learning_rate: return lr;
      case scalar::loss_scale: return loss_scale;
      case scalar::grad_norm: return grad_norm;
    }
    return loss;
  }
  [[nodiscard]] std::optional<double>& of(scalar s) noexcept {
    return const_cast<std::optional<double>&>(std::as_const(*this).of(s));
  }

  /// The global gradient norm: `grad_norm` when given (NaN or Inf included), else the norm of
  /// every recorded gradient as a framework computes it: NaN when an element is NaN, +Inf when
  /// one is infinite (see `norm_of`). Absent when neither exists.
  //
  // The same value as norm_of of the gradients' merged statistics (within a few ulps: each
  // tensor's sum of squares, m2 + n mean^2, summed at the largest of their power-of-two scales,
  // so no square overflows), without the merge: Chan's merge is a division and two two-sums a
  // tensor, and 300 of them were half of the default detector set's time per step (issue 18).
  [[nodiscard]] std::optional<double> global_grad_norm() const noexcept {
    if (grad_norm || gradients.empty()) return grad_norm;
    bool nan = false, inf = false;
    int top = std::numeric_limits<int>::min();
    for (const auto& g : gradients) {
      nan = nan || g.stats.nan > 0;
      inf = inf || g.stats.pos_inf + g.stats.neg_inf > 0;
      if (g.stats.finite() > 0) top = detail::greater(top, g.stats.scale_exp);
    }
    if (nan) return std::numeric_limits<double>::quiet_NaN();
    if (inf) return std::numeric_limits<double>::infinity();
    if (top == std::numeric_limits<int>::min()) return 0.0;  // no finite element
    double sum = 0.0;
    for (const auto& g : gradients) {
      const tensor_stats& t = g.stats;
      const auto n = static_cast<double>(t.finite());
      if (n == 0.0) continue;
      sum += detail::times_pow2(t.m2_scaled + n * t.mean_scaled * t.mean_scaled, 2 * (t.scale_exp - top));
    }
    return detail::ldexp_saturated(std::sqrt(sum), top);
  }

};

}  // namespace mldiag
