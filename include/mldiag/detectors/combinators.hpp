// SPDX-License-Identifier: Apache-2.0
/// Detectors made of detectors: warm-up, sustain, one per tensor, the first that fires, a
/// static set.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/detector.hpp"

#include <concepts>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Lets the inner detector build its state for the first `steps` steps, and drops what it
/// reports meanwhile.
template <detector D>
class after_warmup {
 public:
  after_warmup(std::size_t steps, D inner) : steps_(steps), inner_(std::move(inner)) {}
  void observe(const observation& o, std::vector<finding>& out) {
    const std::size_t before = out.size();
    inner_.observe(o, out);
    if (seen_++ < steps_) out.resize(before);
  }
  [[nodiscard]] std::string_view name() const { return inner_.name(); }
  D& inner() noexcept { return inner_; }

 private:
  std::size_t steps_, seen_ = 0;
  D inner_;
};

/// Reports only when the inner detector has fired on `steps` consecutive observed steps; the
/// finding's first_step is where the run began.
template <detector D>
class sustained {
 public:
  sustained(std::size_t steps, D inner) : steps_(steps), inner_(std::move(inner)) {}
  void observe(const observation& o, std::vector<finding>& out) {
    const std::size_t before = out.size();
    inner_.observe(o, out);
    (void)run_.observe(out.size() > before, steps_);
    if (out.size() == before) return;
    if (run_.run() < steps_) {
      out.resize(before);
      return;
    }
    for (std::size_t i = before; i < out.size(); ++i) out[i].first_step = run_.start(o.now.step);
  }
  [[nodiscard]] std::string_view name() const { return inner_.name(); }

 private:
  std::size_t steps_;
  onset run_;
  D inner_;
};

/// What `per_tensor` runs: a detector of one tensor's statistics, with state of its own.
template <class T>
concept tensor_detector = std::copy_constructible<T> &&
    requires(T& d, const observation& o, std::string_view tensor, const tensor_stats& s, std::vector<finding>& out) {
      d.observe(o, tensor, s, out);
      { d.name() } -> std::convertible_to<std::string_view>;
    };

/// Runs a tensor detector for every tensor of a role, each tensor with its own copy of the
/// prototype (its own state). New tensors allocate a state once; a step allocates nothing.
template <tensor_detector T>
class per_tensor {
 public:
  per_tensor(role r, T prototype) : role_(r), prototype_(std::move(prototype)) {}
  void observe(const observation& o, std::vector<finding>& out) {
    for (const auto& t : o.now.of(role_)) {
      while (states_.size() <= t.id) states_.push_back(prototype_);
      states_[t.id].observe(o, o.names[t.id], t.stats, out);
    }
  }
  [[nodiscard]] std::string_view name() const { return prototype_.name(); }

 private:
  role role_;
  T prototype_;
  std::vector<T> states_;  // by name id
};

/// Observes every detector; reports the findings of the first one (in order) that fired,
/// so one symptom seen by several detectors is reported once.
template <detector... Ds>
class any_of {
 public:
  explicit any_of(Ds... ds) : all_(std::move(ds)...) {}
  void observe(const observation& o, std::vector<finding>& out) {
    const std::size_t before = out.size();
    std::size_t keep = 0;
    std::apply([&](auto&... d) {
      ((d.observe(o, out), keep = (keep == 0 && out.size() > before) ? out.size() : keep), ...);
    }, all_);
    if (keep != 0) out.resize(keep);
  }
  [[nodiscard]] std::string_view name() const { return "any_of"; }

 private:
  std::tuple<Ds...> all_;
};

/// A detector set fixed at compile time (a tuple): no virtual calls.
template <detector... Ds>
class static_set {
 public:
  explicit static_set(Ds... ds) : all_(std::move(ds)...) {}
  void observe(const observation& o, std::vector<finding>& out) {
    std::apply([&](auto&... d) { (d.observe(o, out), ...); }, all_);
  }
  [[nodiscard]] std::string_view name() const { return "static_set"; }
  template <std::size_t I>
  auto& get() noexcept { return std::get<I>(all_); }

 private:
  std::tuple<Ds...> all_;
};

}  // namespace mldiag::detectors
