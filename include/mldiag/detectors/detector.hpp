// SPDX-License-Identifier: Apache-2.0
/// The detector concept, combinators, and static and run-time detector sets.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/detectors/symptoms.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace mldiag {

/// What a detector sees at each step: the newest snapshot, the history and the names.
struct observation {
  const snapshot& now;
  const history& past;
  const name_table& names;
};

}  // namespace mldiag

namespace mldiag::detectors {

/// A detector is a small stateful value: `observe` reads one step's evidence and appends the
/// findings it has (usually none) to `out`; `name` says which detector it is. Observing a
/// step where nothing fires must not allocate once the detector is warm.
template <class D>
concept detector = requires(D& d, const observation& o, std::vector<finding>& out) {
  d.observe(o, out);
  { d.name() } -> std::convertible_to<std::string_view>;
};

/// A named, settable parameter of a detector's config: a double or a count. Each config lists
/// its own in `static constexpr auto fields()`, beside the defaults, so the names are written
/// once.
template <class C>
struct field {
  std::string_view name;
  std::variant<double C::*, std::size_t C::*> at;
};

/// What a detector says about itself, once: its name (the key of `make_detector`), the question
/// it answers and the symptoms its findings name. The catalogue, the default set and the
/// documentation tests read it.
struct detector_info {
  std::string_view name;
  mldiag::question question = mldiag::question::convergence;
  std::array<symptom, 6> symptoms{};
  [[nodiscard]] constexpr bool raises(symptom s) const noexcept {
    for (const symptom x : symptoms)
      if (!x.empty() && x == s) return true;
    return false;
  }
};

/// A finding with the common fields filled.
[[nodiscard]] inline finding make_finding(question q, mldiag::symptom symptom, severity level, std::int64_t step,
                                         std::string_view detector_name,
                                         std::vector<std::pair<std::string, double>> evidence = {}) {
  finding f;
  f.question = q;
  f.symptom = std::string(symptom.text);
  f.severity = level;
  f.first_step = f.last_step = step;
  f.detector = std::string(detector_name);
  f.evidence = std::move(evidence);
  return f;
}

/// The onset of a lasting condition: the one primitive for warm-up, sustain and "report the
/// start, not every step". `observe(state, sustain)` counts consecutive observations of one
/// non-zero state and is true on the observation where that run reaches `sustain`, then not
/// again until the state changes or stops (0 is "nothing to report"; a bool is a state of 1).
/// `rise(condition)` is `observe(condition, 1)`: true on the step a condition starts to hold.
/// `run()` says for how many observations it has held; `start(step)` when the run began.
///
/// **Example**: `if (onset_.observe(rms < line, c_.sustain)) report(onset_.start(o.now.step));`
class onset {
 public:
  bool observe(int state, std::size_t sustain) noexcept {
    run_ = state != 0 && state == state_ ? run_ + 1 : (state != 0 ? 1 : 0);
    state_ = state;
    const bool held = run_ >= sustain;
    const bool rise = held && !reported_;
    reported_ = held;
    return rise;
  }
  bool observe(bool condition, std::size_t sustain) noexcept { return observe(condition ? 1 : 0, sustain); }
  bool rise(bool condition) noexcept { return observe(condition, 1); }
  void reset() noexcept { run_ = 0, state_ = 0, reported_ = false; }
  [[nodiscard]] std::size_t run() const noexcept { return run_; }
  [[nodiscard]] bool active() const noexcept { return state_ != 0; }
  [[nodiscard]] std::int64_t start(std::int64_t step) const noexcept { return step - static_cast<std::int64_t>(run_) + 1; }

 private:
  std::size_t run_ = 0;
  int state_ = 0;
  bool reported_ = false;
};

/// An edge trigger is an onset with a sustain of 1 (`rise`).
using edge = onset;

/// An episode of a lasting condition, for detectors whose finding names places: `report`
/// is true on the step the condition starts, and again while it holds whenever the severity
/// rises above the highest reported or a place not reported before joins — a second layer
/// dying, a layer going from 99% to 100% zeros. A condition that stops and starts again is a
/// new episode. Allocates only when a new place joins.
class episode {
 public:
  bool report(bool condition, severity level, const std::vector<std::pair<std::string, double>>& where) {
    if (!condition) {
      active_ = false;
      return false;
    }
    bool news = false;
    if (!active_) {
      places_.clear();
      reported_ = level;
      news = true;
    } else if (level > reported_) {
      reported_ = level;
      news = true;
    }
    for (const auto& place : where) {
      if (std::find(places_.begin(), places_.end(), place.first) != places_.end()) continue;
      places_.push_back(place.first);
      news = true;
    }
    active_ = true;
    return news;
  }
  [[nodiscard]] bool active() const noexcept { return active_; }

 private:
  bool active_ = false;
  severity reported_ = severity::info;
  std::vector<std::string> places_;
};

/// Whether a tensor's name contains a tag ("embed", "logits", "tanh"), decided once per name:
/// a name id stands for the same name for the whole run (name_table), so a detector that picks
/// its tensors by name searches each name once, not at every step (issue 18: searching 300
/// names a step cost 1.7 us). Allocates only when names are new.
class name_tag {
 public:
  explicit name_tag(std::string tag) : tag_(std::move(tag)) {}
  [[nodiscard]] bool operator()(const name_table& names, std::uint32_t id) {
    if (id < known_.size() && known_[id] != unknown) return known_[id] == yes;
    return learn(names, id);
  }

 private:
  bool learn(const name_table& names, std::uint32_t id) {
    if (id >= known_.size()) known_.resize(names.size(), unknown);
    known_[id] = names[id].find(tag_) != std::string_view::npos ? yes : no;
    return known_[id] == yes;
  }

  enum : std::uint8_t { unknown, no, yes };
  std::string tag_;
  std::vector<std::uint8_t> known_;  // by name id
};

/// How many loss observations a detector needs before it can judge at all (its warm-up or
/// window); detectors that read the loss over a window say so with `needs_losses()`, so that a
/// short log is answered "too few points to judge" instead of silence.
template <class D>
[[nodiscard]] std::size_t needs_losses(const D& d) {
  if constexpr (requires { { d.needs_losses() } -> std::convertible_to<std::size_t>; }) return d.needs_losses();
  else return 0;
}

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

/// Any detector behind one type, for sets configured at run time.
/// A detector that also reads evaluations (a validation loss recorded after its step closed,
/// `monitor::observe_evaluation`): it has `observe_evaluation(observation, findings)`.
template <class D>
concept evaluates = requires(D& d, const observation& o, std::vector<finding>& out) { d.observe_evaluation(o, out); };

class any_detector {
 public:
  template <detector D>
  explicit any_detector(D d) : self_(std::make_unique<model<D>>(std::move(d))) {}
  void observe(const observation& o, std::vector<finding>& out) { self_->observe(o, out); }
  /// An evaluation recorded at a closed step (`o.now` is that step, with its val_loss).
  void observe_evaluation(const observation& o, std::vector<finding>& out) { self_->observe_evaluation(o, out); }
  [[nodiscard]] std::string_view name() const { return self_->name(); }
  [[nodiscard]] std::size_t needs_losses() const { return self_->needs_losses(); }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual void observe(const observation& o, std::vector<finding>& out) = 0;
    virtual void observe_evaluation(const observation& o, std::vector<finding>& out) = 0;
    [[nodiscard]] virtual std::string_view name() const = 0;
    [[nodiscard]] virtual std::size_t needs_losses() const = 0;
  };
  template <class D>
  struct model final : concept_t {
    explicit model(D d) : detector(std::move(d)) {}
    void observe(const observation& o, std::vector<finding>& out) override { detector.observe(o, out); }
    void observe_evaluation(const observation& o, std::vector<finding>& out) override {
      if constexpr (evaluates<D>) detector.observe_evaluation(o, out);
    }
    [[nodiscard]] std::string_view name() const override { return detector.name(); }
    [[nodiscard]] std::size_t needs_losses() const override { return detectors::needs_losses(detector); }
    D detector;
  };
  std::unique_ptr<concept_t> self_;
};

/// Named parameters of a detector configured at run time.
using parameters = std::map<std::string, double, std::less<>>;

/// Reads parameter `key` or its default; the registry rejects unknown keys.
[[nodiscard]] inline double param(const parameters& p, std::string_view key, double fallback) {
  const auto it = p.find(key);
  return it == p.end() ? fallback : it->second;
}

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
  void observe(const observation& o, std::vector<finding>& out) {
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
