// SPDX-License-Identifier: Apache-2.0
/// `recorder`: fills a step's snapshot from named tensors and keeps a bounded history.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/concepts.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/observations.hpp"
#include "mldiag/evidence/observer.hpp"
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

namespace mldiag::inline MLDIAG_ABI {

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

/// Records one step at a time: `begin_step`, then any of the `observe` calls, then
/// `end_step`, which appends the snapshot to the history and returns it. Tensor names are
/// interned on first sight (the only allocation for a name); after the first steps, a
/// step allocates nothing (tests/evidence checks it with an allocation counter).
///
/// **Example**
/// ```cpp
/// mldiag::recorder rec;
/// rec.begin_step(step);
/// rec.observe(mldiag::scalar::loss, loss);
/// rec.observe(mldiag::scalar::learning_rate, lr);
/// for (auto& [name, g] : grads) rec.observe(mldiag::role::gradient, name, g);
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

  /// A scalar of the step (`scalar::loss`, `learning_rate`, ...). NaN and Inf are recorded as
  /// they are: a loss that blew up is evidence.
  void observe(scalar s, double value) {
    require_open("observe");
    current_.of(s) = value;
  }

  /// Statistics already computed (e.g. by a stats_plan or the CUDA kernels).
  void observe(role r, std::string_view name, const tensor_stats& s) {
    require_open("observe");
    current_.of(r).push_back({names_.intern(name), s});
  }
  /// Computes the statistics of a host tensor and records them.
  template <tensor V>
  void observe(role r, std::string_view name, const V& x) {
    observe(r, name, compute_stats(x));
  }
  /// Not a tensor: this overload exists to say why, at compile time.
  template <class V>
    requires(!tensor<V> && !std::is_same_v<V, tensor_stats>)
  void observe(role, std::string_view, const V&) {
    detail::explain_not_a_tensor<V>();
  }

  /// The cosine between this step's gradients and the previous step's, and between their
  /// consecutive increments where known (gradient_persistence::finish_step()).
  void observe(const gradient_cosines& c) {
    require_open("observe");
    const auto check = [](double x) {
      if (!(x >= -1.0 - 1e-9 && x <= 1.0 + 1e-9)) {
        throw error("recorder::observe(gradient_cosines): " + std::to_string(x) +
                    " is not a cosine in [-1, 1]; record gradient_persistence::finish_step()'s values");
      }
    };
    check(c.consecutive);
    if (c.increments) check(*c.increments);
    current_.grad_cosine = c.consecutive;
    current_.grad_increment_cosine = c.increments;
  }
  /// Step-phase timings; each phase given must be seconds >= 0.
  void observe(const step_timings& t) {
    require_open("observe");
    for (const auto& [phase, v] : {std::pair{"data_wait", t.data_wait}, {"forward", t.forward}, {"backward", t.backward},
                                   {"optimizer", t.optimizer}, {"communication", t.communication}, {"total", t.total}}) {
      if (v && !(*v >= 0.0 && std::isfinite(*v))) {
        throw error(std::string("recorder::observe(step_timings): ") + phase + " is " + std::to_string(*v) +
                    "; give seconds >= 0, or leave the phase unset when it was not measured");
      }
    }
    current_.timings = t;
  }
  /// Memory evidence; every value given must be bytes >= 0 and allocated must not exceed
  /// reserved (reserved includes allocated in every caching allocator).
  void observe(const memory_evidence& m) {
    require_open("observe");
    for (const auto& [field, v] : {std::pair{"allocated", m.allocated}, {"reserved", m.reserved}, {"peak", m.peak},
                                   {"capacity", m.capacity}, {"largest_free_block", m.largest_free_block}, {"used", m.used},
                                   {"host_rss", m.host_rss}, {"host_rss_peak", m.host_rss_peak}}) {
      if (v && !(*v >= 0.0 && std::isfinite(*v))) {
        throw error(std::string("recorder::observe(memory_evidence): ") + field + " is " + std::to_string(*v) +
                    "; give bytes >= 0, or leave it unset when it was not measured");
      }
    }
    if (m.allocated && m.reserved && *m.allocated > *m.reserved) {
      throw error("recorder::observe(memory_evidence): allocated " + std::to_string(*m.allocated) + " > reserved " +
                  std::to_string(*m.reserved) + "; reserved counts the allocator's whole pool, allocated blocks included");
    }
    current_.memory = m;
  }
  /// Efficiency evidence: the values given join what the step has (a later call may add the
  /// throughput to an MFU recorded before). MFU and tensor-core activity are fractions in
  /// [0, 1] (efficiency/mfu.hpp computes MFU); throughput and its target are in the same
  /// units per second (tokens/s, samples/s); the bytes the step's collectives moved and the
  /// bandwidth the link should give (bytes/s) are judged against `step_timings::communication`.
  void observe(const efficiency_evidence& e) {
    require_open("observe");
    if (e.mfu) require_fraction("MFU", *e.mfu, "above 1 means the FLOP count or the peak is wrong");
    if (e.tensor_core_activity)
      require_fraction("tensor-core activity", *e.tensor_core_activity, "give the active fraction, not a percentage");
    require_rate("throughput", e.throughput);
    require_rate("throughput target", e.throughput_target);
    require_rate("communication bytes", e.communication_bytes);
    require_rate("link bandwidth", e.link_bandwidth);
    auto& to = current_.efficiency;
    for (auto [from, into] : {std::pair{&e.mfu, &to.mfu}, {&e.tensor_core_activity, &to.tensor_core_activity},
                              {&e.throughput, &to.throughput}, {&e.throughput_target, &to.throughput_target},
                              {&e.communication_bytes, &to.communication_bytes}, {&e.link_bandwidth, &to.link_bandwidth}})
      if (*from) *into = *from;
  }
  /// Each rank's step time. The vector keeps its capacity, so this allocates only while the
  /// rank count is new.
  void observe(const rank_step_times& t) {
    require_open("observe");
    for (std::size_t r = 0; r < t.seconds.size(); ++r) {
      if (!(t.seconds[r] >= 0.0) || !std::isfinite(t.seconds[r])) {
        throw error("recorder::observe(rank_step_times): rank " + std::to_string(r) + " has time " +
                    std::to_string(t.seconds[r]) + "; give seconds >= 0 for every rank");
      }
    }
    current_.rank_step_times.assign(t.seconds.begin(), t.seconds.end());
  }
  /// A progress metric of the step. NaN and Inf are recorded as they are (evidence); a name
  /// given twice in a step keeps the last value.
  void observe(const progress_metric& m) {
    require_open("observe");
    if (m.name.empty()) throw error("recorder::observe(progress_metric): the metric has no name; name it (\"return\", \"accuracy\")");
    const std::uint32_t id = names_.intern(m.name);
    for (auto& x : current_.metrics) {
      if (x.id == id) {
        x = {id, m.value, m.higher_is_better};
        return;
      }
    }
    current_.metrics.push_back({id, m.value, m.higher_is_better});
  }
  /// One parameter group's learning rate (NaN and Inf recorded as they are: evidence). A group
  /// given twice in a step keeps the last value.
  void observe(const group_learning_rate& g) {
    require_open("observe");
    if (g.group.empty()) throw error("recorder::observe(group_learning_rate): the group has no name; name it (\"encoder/0\")");
    const std::uint32_t id = names_.intern(g.group);
    for (auto& [x, lr] : current_.group_lrs) {
      if (x == id) {
        lr = g.lr;
        return;
      }
    }
    current_.group_lrs.emplace_back(id, g.lr);
  }
  /// A change made on purpose at this step.
  void observe(const regime_change& c) {
    require_open("observe");
    current_.change = c.kind;
  }
  /// Seconds one named layer took in this step.
  void observe(const layer_timing& t) {
    require_open("observe");
    if (!(t.seconds >= 0.0) || !std::isfinite(t.seconds)) {
      throw error("recorder::observe(layer_timing) '" + std::string(t.layer) + "': time " + std::to_string(t.seconds) +
                  " is negative or not finite; give seconds >= 0");
    }
    current_.layer_times.push_back({names_.intern(t.layer), t.seconds});
  }
  /// A parameter's relative drift from its initialization (see drift_tracker).
  void observe(const parameter_drift_of& d) {
    require_open("observe");
    current_.drift.emplace_back(names_.intern(d.parameter), d.relative);
  }
  /// Row entropies of attention (or any) probabilities or logits.
  void observe(const row_entropy& e) {
    require_open("observe");
    current_.attention.push_back({names_.intern(e.tensor), e.stats});
  }
  /// A router's expert loads over the step.
  void observe(const router_load& l) {
    require_open("observe");
    router_evidence r{names_.intern(l.router)};
    r.experts = static_cast<std::uint32_t>(l.loads.size());
    double total = 0.0, top = 0.0;
    for (double x : l.loads) {
      if (!(x >= 0.0) || !std::isfinite(x)) {
        throw error("recorder::observe(router_load) '" + std::string(l.router) + "': a load is negative or not finite");
      }
      total += x;
      top = x > top ? x : top;
      r.dead += x == 0.0 ? 1u : 0u;
    }
    r.total_load = total;
    if (total > 0.0 && l.loads.size() > 1) {
      double h = 0.0;
      for (double x : l.loads)
        if (x > 0.0) h -= (x / total) * std::log(x / total);
      r.normalized_entropy = h / std::log(static_cast<double>(l.loads.size()));
      r.max_over_mean = top / (total / static_cast<double>(l.loads.size()));
    }
    current_.routers.push_back(r);
  }
  /// A router's load counted from its assignments, so no framework call is needed to count
  /// them (the example transformer's two `torch::bincount` calls cost about 20 µs a step).
  /// Throws `mldiag::error` for an index outside [0, experts).
  template <std::integral I>
  void observe(const router_assignments<I>& a) {
    require_open("observe");
    if (a.experts == 0) {
      throw error("recorder::observe(router_assignments) '" + std::string(a.router) +
                  "': 0 experts; pass the number of experts the router chooses from");
    }
    expert_counts_.assign(a.experts, 0.0);  // keeps its capacity: no allocation after the first step
    for (const I e : a.chosen) {
      bool outside = static_cast<std::uint64_t>(e) >= a.experts;
      if constexpr (std::is_signed_v<I>) outside = outside || e < 0;
      if (outside) {
        throw error("recorder::observe(router_assignments) '" + std::string(a.router) + "': expert index " +
                    std::to_string(e) + " is outside [0, " + std::to_string(a.experts) +
                    "); pass the router's chosen expert indices and its number of experts");
      }
      expert_counts_[static_cast<std::size_t>(e)] += 1.0;
    }
    observe(router_load{a.router, expert_counts_});
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
  /// step is open (record the open step's as scalar::val_loss) or when `step` is not kept.
  const snapshot& record_evaluation(std::int64_t step, double val_loss) {
    if (open_) {
      throw error("recorder::record_evaluation: step " + std::to_string(current_.step) +
                  " is open; record an evaluation after end_step(), or the open step's as observe(scalar::val_loss, v)");
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
    s->val_loss = val_loss;
    if (current_.step == step) current_.val_loss = val_loss;
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
  static void require_fraction(const char* what, double v, const char* hint) {
    if (!(v >= 0.0 && v <= 1.0)) {
      throw error(std::string("recorder::observe(efficiency_evidence): ") + what + " " + std::to_string(v) +
                  " is outside [0, 1]; " + hint);
    }
  }
  static void require_rate(const char* what, const std::optional<double>& v) {
    if (v && !(*v >= 0.0 && std::isfinite(*v))) {
      throw error(std::string("recorder::observe(efficiency_evidence): ") + what + " " + std::to_string(*v) +
                  " is negative or not finite; leave it unset when it was not measured");
    }
  }

  name_table names_;
  history history_;
  std::function<void(snapshot&, name_table&)> hook_;
  snapshot current_;
  std::vector<double> expert_counts_;  // observe(router_assignments)'s counts
  bool open_ = false;
};

static_assert(observer<recorder>);

}  // namespace mldiag
