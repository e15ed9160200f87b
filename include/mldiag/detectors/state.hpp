// SPDX-License-Identifier: Apache-2.0
/// The small pieces of state a detector keeps: the onset of a lasting condition, an episode
/// with its places, a tag looked up once per tensor name.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/evidence/snapshot.hpp"  // name_table
#include "mldiag/vocab/finding.hpp"      // severity

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

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

/// How long an early signal has lasted: `reached(holds, persist)` is true once, on the
/// observation where a run of `holds` reaches `persist` (0: never). An early signal is info at
/// its onset and a warning once it has lasted that long without a consequence showing first
/// (detectors/escalation.hpp).
class persistence_line {
 public:
  bool reached(bool holds, std::size_t persist) noexcept {
    held_ = holds ? held_ + 1 : 0;
    return persist > 0 && held_ == persist;
  }
  [[nodiscard]] std::size_t held() const noexcept { return held_; }

 private:
  std::size_t held_ = 0;
};

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

}  // namespace mldiag::detectors
