// SPDX-License-Identifier: Apache-2.0
/// `recorder`: fills a step's snapshot from named tensors and keeps a bounded history.
#pragma once

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/entropy.hpp"

#include <cmath>
#include <concepts>  // std::integral
#include <cstddef>
#include <cstdint>
#include <functional>  // std::function (the step hook)
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag {

/// The last `capacity` snapshots, oldest first. The ring is allocated at construction; a
/// push copies into a slot, whose vectors keep their capacity, so memory stops growing once
/// the largest step has been seen and never grows with the length of the run. The first push
/// reserves every slot for a step like it, so that later steps of the same shape allocate
/// nothing — from the second step on, not only once every slot has been used (issue 18).
class history {
 public:
  explicit history(std::size_t capacity) : ring_(capacity) {
    if (capacity == 0) throw error("history: capacity 0; keep at least one step");
  }
  void push(const snapshot& s) {
    if (!reserved_) {
      for (auto& slot : ring_) slot.reserve_like(s);
      reserved_ = true;
    }
    ring_[(start_ + size_) % ring_.size()] = s;
    if (size_ < ring_.size()) ++size_;
    else start_ = (start_ + 1) % ring_.size();
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.size(); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The i-th snapshot, oldest first.
  [[nodiscard]] const snapshot& operator[](std::size_t i) const noexcept { return ring_[(start_ + i) % ring_.size()]; }
  [[nodiscard]] const snapshot& back() const noexcept { return (*this)[size_ - 1]; }
  /// The kept snapshot of `step`, or nullptr when it is not (or no longer) kept.
  [[nodiscard]] snapshot* find(std::int64_t step) noexcept {
    for (std::size_t i = size_; i-- > 0;) {
      snapshot& s = ring_[(start_ + i) % ring_.size()];
      if (s.step == step) return &s;
      if (s.step < step) break;  // steps increase
    }
    return nullptr;
  }

 private:
  std::vector<snapshot> ring_;
  std::size_t start_ = 0, size_ = 0;
  bool reserved_ = false;
};

/// Records one step at a time: `begin_step`, then any of the `record_*` calls, then
/// `end_step`, which appends the snapshot to the history and returns it. Tensor names are
/// interned on first sight (the only allocation for a name); after the first steps, a
/// step allocates nothing (tests/evidence checks it with an allocation counter).
///
/// **Example**
/// ```cpp
/// mldiag::recorder rec;
/// rec.begin_step(step);
/// rec.record_loss(loss);
/// rec.record_lr(lr);
/// for (auto& [name, g] : grads) rec.record(mldiag::role::gradient, name, g);
/// const mldiag::snapshot& now = rec.end_step();
/// ```
class recorder {
 public:
  explicit recorder(std::size_t history_capacity = 512) : history_(history_capacity) {}

  void begin_step(std::int64_t step) {
    if (open_) throw error("recorder::begin_step: step " + std::to_string(current_.step) + " was not ended; call end_step() first");
    if (!history_.empty() && step <= history_.back().step) {
      throw error("recorder::begin_step: step " + std::to_string(step) + " does not come after step " +
                  std::to_string(history_.back().step) + "; steps must increase");
    }
    current_.clear(step);
    open_ = true;
  }

  void record_loss(double loss) { require_open("record_loss"); current_.has_loss = true; current_.loss = loss; }
  void record_val_loss(double v) { require_open("record_val_loss"); current_.has_val_loss = true; current_.val_loss = v; }
  void record_lr(double lr) { require_open("record_lr"); current_.has_lr = true; current_.lr = lr; }
  void record_loss_scale(double s) { require_open("record_loss_scale"); current_.has_loss_scale = true; current_.loss_scale = s; }
  /// A global gradient norm computed elsewhere (e.g. by the optimizer's clipping).
  void record_grad_norm(double norm) {
    require_open("record_grad_norm");
    current_.has_grad_norm = true;
    current_.grad_norm = norm;
  }
  /// The cosine between this step's gradients and the previous step's, and optionally the
  /// cosine between their consecutive increments (gradient_persistence::finish_step()).
  void record_grad_cosine(double cosine, std::optional<double> increments = std::nullopt) {
    require_open("record_grad_cosine");
    const auto check = [](double c) {
      if (!(c >= -1.0 - 1e-9 && c <= 1.0 + 1e-9)) {
        throw error("recorder::record_grad_cosine: " + std::to_string(c) +
                    " is not a cosine in [-1, 1]; record gradient_persistence::finish_step()'s values");
      }
    };
    check(cosine);
    if (increments) check(*increments);
    current_.has_grad_cosine = true;
    current_.grad_cosine = cosine;
    current_.has_grad_increment_cosine = increments.has_value();
    current_.grad_increment_cosine = increments.value_or(std::numeric_limits<double>::quiet_NaN());
  }
  void record_timings(const step_timings& t) { require_open("record_timings"); current_.timings = t; }
  /// Memory evidence; every known value must be >= 0 and allocated must not exceed reserved
  /// (reserved includes allocated in every caching allocator).
  void record_memory(const memory_evidence& m) {
    require_open("record_memory");
    const std::pair<const char*, double> fields[] = {
        {"allocated", m.allocated}, {"reserved", m.reserved}, {"peak", m.peak}, {"capacity", m.capacity},
        {"largest_free_block", m.largest_free_block}, {"used", m.used}, {"host_rss", m.host_rss},
        {"host_rss_peak", m.host_rss_peak}};
    for (const auto& [field, v] : fields) {
      if (!std::isnan(v) && !(v >= 0.0 && std::isfinite(v))) {
        throw error(std::string("recorder::record_memory: ") + field + " is " + std::to_string(v) +
                    "; give bytes >= 0, or NaN when unknown");
      }
    }
    if (m.allocated > m.reserved) {
      throw error("recorder::record_memory: allocated " + std::to_string(m.allocated) + " > reserved " +
                  std::to_string(m.reserved) + "; reserved counts the allocator's whole pool, allocated blocks included");
    }
    current_.memory = m;
  }
  /// Efficiency evidence all at once (each field as its own record_* call checks it).
  void record_efficiency(const efficiency_evidence& e) {
    require_open("record_efficiency");
    if (!std::isnan(e.mfu)) record_mfu(e.mfu);
    if (!std::isnan(e.tensor_core_activity)) record_tensor_core_activity(e.tensor_core_activity);
    if (!std::isnan(e.throughput) || !std::isnan(e.throughput_target)) record_throughput(e.throughput, e.throughput_target);
    if (!std::isnan(e.communication_bytes) || !std::isnan(e.link_bandwidth)) {
      record_communication(e.communication_bytes, e.link_bandwidth);
    }
  }
  /// Model FLOPs utilization, a fraction in [0, 1] (efficiency/mfu.hpp computes it).
  void record_mfu(double mfu) {
    require_open("record_mfu");
    require_fraction("record_mfu", "MFU", mfu, "above 1 means the FLOP count or the peak is wrong");
    current_.efficiency.mfu = mfu;
  }
  /// Tensor-core activity (the active fraction DCGM or Nsight reports), in [0, 1].
  void record_tensor_core_activity(double tca) {
    require_open("record_tensor_core_activity");
    require_fraction("record_tensor_core_activity", "tensor-core activity", tca, "give the active fraction, not a percentage");
    current_.efficiency.tensor_core_activity = tca;
  }
  /// Achieved throughput and the user's target, in the same units per second (tokens/s,
  /// samples/s); NaN target = none.
  void record_throughput(double achieved, double target = std::numeric_limits<double>::quiet_NaN()) {
    require_open("record_throughput");
    require_rate("record_throughput", "throughput", achieved);
    require_rate("record_throughput", "target", target);
    current_.efficiency.throughput = achieved;
    current_.efficiency.throughput_target = target;
  }
  /// Bytes the step's collectives moved and the bandwidth the link should give (bytes/s; NaN
  /// = not known), judged against `step_timings::communication`.
  void record_communication(double bytes, double link_bandwidth = std::numeric_limits<double>::quiet_NaN()) {
    require_open("record_communication");
    require_rate("record_communication", "bytes", bytes);
    require_rate("record_communication", "link bandwidth", link_bandwidth);
    current_.efficiency.communication_bytes = bytes;
    current_.efficiency.link_bandwidth = link_bandwidth;
  }
  /// Each rank's step time in seconds, by rank (rank r at index r): its time up to the step's
  /// synchronizing collective. The vector keeps its capacity, so this allocates only while the
  /// rank count is new.
  void record_rank_step_times(std::span<const double> seconds) {
    require_open("record_rank_step_times");
    for (std::size_t r = 0; r < seconds.size(); ++r) {
      if (!(seconds[r] >= 0.0) || !std::isfinite(seconds[r])) {
        throw error("recorder::record_rank_step_times: rank " + std::to_string(r) + " has time " +
                    std::to_string(seconds[r]) + "; give seconds >= 0 for every rank");
      }
    }
    current_.rank_step_times.assign(seconds.begin(), seconds.end());
  }
  /// Seconds one named layer took in this step (record layers in model order).
  void record_layer_time(std::string_view layer, double seconds) {
    require_open("record_layer_time");
    if (!(seconds >= 0.0) || !std::isfinite(seconds)) {
      throw error("recorder::record_layer_time '" + std::string(layer) + "': time " + std::to_string(seconds) +
                  " is negative or not finite; give seconds >= 0");
    }
    current_.layer_times.push_back({names_.intern(layer), seconds});
  }

  /// Statistics already computed (e.g. by a stats_plan or the CUDA kernels).
  void record(role r, std::string_view name, const tensor_stats& s) {
    require_open("record");
    current_.of(r).push_back({names_.intern(name), s});
  }
  /// Computes the statistics of a host tensor and records them.
  template <tensor V>
  void record(role r, std::string_view name, const V& x) {
    record(r, name, compute_stats(x));
  }
  /// Not a tensor: this overload exists to say why, at compile time.
  template <class V>
    requires(!tensor<V> && !std::is_same_v<V, tensor_stats>)
  void record(role, std::string_view, const V&) {
    detail::explain_not_a_tensor<V>();
  }
  /// Relative drift of a parameter from its initialization (see drift_tracker).
  void record_drift(std::string_view name, double relative_drift) {
    require_open("record_drift");
    current_.drift.emplace_back(names_.intern(name), relative_drift);
  }
  /// Row entropy of attention (or any) probabilities or logits.
  void record_entropy(std::string_view name, const entropy_stats& e) {
    require_open("record_entropy");
    current_.attention.push_back({names_.intern(name), e});
  }
  /// Expert loads of a router over the step (token counts or summed probabilities).
  void record_router_load(std::string_view name, std::span<const double> loads) {
    require_open("record_router_load");
    router_evidence r{names_.intern(name)};
    r.experts = static_cast<std::uint32_t>(loads.size());
    double total = 0.0, top = 0.0;
    for (double l : loads) {
      if (!(l >= 0.0) || !std::isfinite(l)) {
        throw error("recorder::record_router_load '" + std::string(name) + "': a load is negative or not finite");
      }
      total += l;
      top = l > top ? l : top;
      r.dead += l == 0.0 ? 1u : 0u;
    }
    r.total_load = total;
    if (total > 0.0 && loads.size() > 1) {
      double h = 0.0;
      for (double l : loads)
        if (l > 0.0) h -= (l / total) * std::log(l / total);
      r.normalized_entropy = h / std::log(static_cast<double>(loads.size()));
      r.max_over_mean = top / (total / static_cast<double>(loads.size()));
    }
    current_.routers.push_back(r);
  }
  /// The expert load counted from a router's assignments: each token's expert index in
  /// [0, experts) (top-k routing gives k indices per token, in any order), so no framework
  /// call is needed to count them (the example transformer's two `torch::bincount` calls cost
  /// about 20 µs a step; issue 18). Throws `mldiag::error` for an index outside the range.
  template <std::integral I>
  void record_router_assignments(std::string_view name, std::span<const I> assignments, std::size_t experts) {
    require_open("record_router_assignments");
    if (experts == 0) {
      throw error("recorder::record_router_assignments '" + std::string(name) +
                  "': 0 experts; pass the number of experts the router chooses from");
    }
    expert_counts_.assign(experts, 0.0);  // keeps its capacity: no allocation after the first step
    for (const I a : assignments) {
      bool outside = static_cast<std::uint64_t>(a) >= experts;
      if constexpr (std::is_signed_v<I>) outside = outside || a < 0;
      if (outside) {
        throw error("recorder::record_router_assignments '" + std::string(name) + "': expert index " +
                    std::to_string(a) + " is outside [0, " + std::to_string(experts) +
                    "); pass the router's chosen expert indices and its number of experts");
      }
      expert_counts_[static_cast<std::size_t>(a)] += 1.0;
    }
    record_router_load(name, expert_counts_);
  }

  /// Closes the step: the snapshot joins the history; the reference stays valid until the
  /// next begin_step.
  const snapshot& end_step() {
    require_open("end_step");
    open_ = false;  // first: a hook that throws leaves the step closed (not in the history)
    if (hook_) hook_(current_, names_);
    history_.push(current_);
    return current_;
  }

  /// An evaluation of a closed step (a validation loss measured after it): sets the val_loss
  /// of its snapshot in the history and returns the snapshot. Throws mldiag::error while a
  /// step is open (record the open step's with record_val_loss) or when `step` is not kept.
  const snapshot& record_evaluation(std::int64_t step, double val_loss) {
    if (open_) {
      throw error("recorder::record_evaluation: step " + std::to_string(current_.step) +
                  " is open; record an evaluation after end_step(), or the open step's with record_val_loss");
    }
    snapshot* s = history_.find(step);
    if (s == nullptr) {
      throw error("recorder::record_evaluation: step " + std::to_string(step) +
                  " is not in the history (" +
                  (history_.empty() ? std::string("no step closed yet")
                                    : "it keeps steps " + std::to_string(history_[0].step) + " to " +
                                          std::to_string(history_.back().step)) +
                  "); record evaluations at a closed step that is still kept");
    }
    s->has_val_loss = true;
    s->val_loss = val_loss;
    if (current_.step == step) {
      current_.has_val_loss = true;
      current_.val_loss = val_loss;
    }
    return *s;
  }

  /// Runs `hook` on each finished snapshot before it joins the history (and before the
  /// monitor's detectors see it); the distributed merge uses it (distributed/mpi.hpp). The
  /// hook may add names. An empty function removes it.
  void set_step_hook(std::function<void(snapshot&, name_table&)> hook) { hook_ = std::move(hook); }

  [[nodiscard]] const mldiag::history& past() const noexcept { return history_; }
  [[nodiscard]] const name_table& names() const noexcept { return names_; }
  [[nodiscard]] const snapshot& current() const noexcept { return current_; }

 private:
  void require_open(const char* who) const {
    if (!open_) throw error(std::string("recorder::") + who + ": no step is open; call begin_step(step) first");
  }
  static void require_fraction(const char* who, const char* what, double v, const char* hint) {
    if (!(v >= 0.0 && v <= 1.0)) {
      throw error(std::string("recorder::") + who + ": " + what + " " + std::to_string(v) + " is outside [0, 1]; " + hint);
    }
  }
  // NaN passes: it means "not measured".
  static void require_rate(const char* who, const char* what, double v) {
    if (!std::isnan(v) && !(v >= 0.0 && std::isfinite(v))) {
      throw error(std::string("recorder::") + who + ": " + what + " " + std::to_string(v) + " is negative or infinite");
    }
  }

  name_table names_;
  history history_;
  std::function<void(snapshot&, name_table&)> hook_;
  snapshot current_;
  std::vector<double> expert_counts_;  // record_router_assignments' counts
  bool open_ = false;
};

}  // namespace mldiag
