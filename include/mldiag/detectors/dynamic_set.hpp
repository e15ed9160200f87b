// SPDX-License-Identifier: Apache-2.0
/// Detectors configured at run time: any detector behind one type, named parameters, and the
/// set the monitor runs.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/detector.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Any detector behind one type, for sets configured at run time.
/// A detector that also reads evaluations (a validation loss recorded after its step closed,
/// `monitor::observe_evaluation`): it has `observe_evaluation(observation, findings)`.
template <class D>
concept evaluates = requires(D& d, const observation& o, std::vector<finding>& out) { d.observe_evaluation(o, out); };

/// A detector that decides itself what a declared change means for it (`on_change(kind)`):
/// a schedule's restart leaves the task's scale and the best loss reached as they were, a new
/// data stage does not. Without it, a declared change puts the detector back as it was added.
template <class D>
concept answers_change = requires(D& d, mldiag::change k) { d.on_change(k); };

class any_detector {
 public:
  template <detector D>
  explicit any_detector(D d) : self_(std::make_unique<model<D>>(std::move(d))) {}
  void observe(const observation& o, std::vector<finding>& out) { self_->observe(o, out); }
  /// An evaluation recorded at a closed step (`o.now` is that step, with its val_loss).
  void observe_evaluation(const observation& o, std::vector<finding>& out) { self_->observe_evaluation(o, out); }
  [[nodiscard]] std::string_view name() const { return self_->name(); }
  [[nodiscard]] std::size_t needs_losses() const { return self_->needs_losses(); }
  /// What its `about` declares (a detector without one: no traits).
  [[nodiscard]] detector_info::traits_t traits() const { return self_->traits(); }
  /// A declared change of `kind`: the detector's own `on_change(kind)` where it has one,
  /// otherwise back to the state it was added in, configuration kept. A detector that has
  /// neither and cannot be copied keeps its state.
  void restart(mldiag::change kind) { self_->restart(kind); }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual void observe(const observation& o, std::vector<finding>& out) = 0;
    virtual void observe_evaluation(const observation& o, std::vector<finding>& out) = 0;
    [[nodiscard]] virtual std::string_view name() const = 0;
    [[nodiscard]] virtual std::size_t needs_losses() const = 0;
    [[nodiscard]] virtual detector_info::traits_t traits() const = 0;
    virtual void restart(mldiag::change kind) = 0;
  };
  template <class D>
  struct model final : concept_t {
    explicit model(D d) : detector(std::move(d)) {
      if constexpr (std::is_copy_constructible_v<D> && std::is_copy_assignable_v<D> && !answers_change<D>)
        if (traits().restarts_on_change) pristine = std::make_unique<D>(detector);
    }
    void observe(const observation& o, std::vector<finding>& out) override { detector.observe(o, out); }
    void observe_evaluation(const observation& o, std::vector<finding>& out) override {
      if constexpr (evaluates<D>) detector.observe_evaluation(o, out);
    }
    [[nodiscard]] std::string_view name() const override { return detector.name(); }
    [[nodiscard]] std::size_t needs_losses() const override { return detectors::needs_losses(detector); }
    [[nodiscard]] detector_info::traits_t traits() const override {
      if constexpr (requires { D::about.traits; }) return D::about.traits;
      else return {};
    }
    void restart(mldiag::change kind) override {
      if constexpr (answers_change<D>) detector.on_change(kind);
      else if constexpr (std::is_copy_assignable_v<D>)
        if (pristine) detector = *pristine;
    }
    D detector;
    std::unique_ptr<D> pristine;  // the state as added, kept only for a detector that restarts
  };
  std::unique_ptr<concept_t> self_;
};

/// Named parameters of a detector configured at run time (`{{"factor", 4}, {"window", 200}}`).
using parameters = std::map<std::string, parameter_value, std::less<>>;

/// A set of detectors configured at run time, observed in order.
class dynamic_set {
 public:
  void add(any_detector d) { all_.push_back(std::move(d)); }
  /// Puts `d` in place of the detector of the same name (keeping its place in the order), or
  /// adds it where the set has none.
  /// Whether a detector of this name is in the set.
  [[nodiscard]] bool contains(std::string_view name) const {
    for (const auto& x : all_)
      if (x.name() == name) return true;
    return false;
  }
  void replace(any_detector d) {
    for (auto& x : all_) {
      if (x.name() == d.name()) {
        x = std::move(d);
        return;
      }
    }
    add(std::move(d));
  }
  /// Runs every detector on the step; at a declared change (`snapshot::change`) the ones
  /// that hold a stationary baseline restart first, so the change's step opens their baseline.
  void observe(const observation& o, std::vector<finding>& out) {
    if (o.now.change)
      for (auto& d : all_)
        if (d.traits().restarts_on_change) d.restart(*o.now.change);
    for (auto& d : all_) d.observe(o, out);
  }
  void observe_evaluation(const observation& o, std::vector<finding>& out) {
    for (auto& d : all_) d.observe_evaluation(o, out);
  }
  [[nodiscard]] std::string_view name() const { return "dynamic_set"; }
  [[nodiscard]] std::size_t size() const noexcept { return all_.size(); }
  [[nodiscard]] const any_detector& operator[](std::size_t i) const { return all_.at(i); }

 private:
  std::vector<any_detector> all_;
};

}  // namespace mldiag::detectors
