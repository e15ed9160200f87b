// SPDX-License-Identifier: Apache-2.0
/// Q1 `dead_activations`: activations that are (almost) all exact zeros.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1: dead activations — an activation tensor whose fraction of exact zeros exceeds
/// `max_zero_fraction` (default 0.99: dead ReLUs): at once where the tensor was seen alive
/// before, and on `patience` (2) observations in a row where it never was. Not lower: healthy ReLU feed-forward layers of transformers are sparse — about 97%
/// zeros in trained T5 ("The Lazy Neuron Phenomenon", Li et al. 2022), and 95-97% in the
/// examples' transformer after 200 steps at AdamW 3e-3. Critical
/// when a tensor is entirely zero (nothing passes through it), on as many observations. Reports onsets; `first_step` is where the streak began; the location ranks the
/// tensors by zero fraction.
///
/// Why a streak for a tensor never seen alive: a dead layer stays dead, because no gradient
/// reaches what feeds it; a layer that starts at zero comes alive with the first update. A
/// tensor that was alive and is now over the line has died: no wait. word2vec's zero-initialized output
/// vectors give scores that are all zero at step 0 and 36% zero at step 1 (a streak of 1
/// called every healthy skip-gram run dead: docs/accuracy.md#dead_activations); so do LoRA's B = 0,
/// zero-initialized residual branches (Fixup, SkipInit) and zero BatchNorm gammas.
class dead_activations {
 public:
  struct config {
    double max_zero_fraction = 0.99;
    std::size_t patience = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_zero_fraction", &config::max_zero_fraction},
          field<config>{"patience", &config::patience}};
    }
  };
  dead_activations() : dead_activations(config{}) {}
  explicit dead_activations(config c) : c_(c) {
    if (c.patience == 0) throw error("dead_activations: patience must be at least 1 observation");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"dead_activations", question::convergence, {symptoms::dead_activations}, "activations that are (almost) all exact zeros", {.consequence = "units that pass nothing on, held patience steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (streaks_.size() < o.names.size()) streaks_.resize(o.names.size());  // new names only
    where_.clear();
    double worst = 0.0;
    bool all_zero = false;
    std::int64_t start = -1, zero_start = -1;
    for (const auto& a : o.now.activations) {
      if (a.stats.count == 0) continue;
      const double z = static_cast<double>(a.stats.zeros) / static_cast<double>(a.stats.count);
      streak& t = streaks_[a.id];
      const std::size_t needed = t.alive ? 1 : c_.patience;
      if (z > c_.max_zero_fraction) {
        if (t.over++ == 0) t.start = o.now.step;
      } else {
        t.over = 0;
        t.alive = true;
      }
      if (z >= 1.0) {
        if (t.zero++ == 0) t.zero_start = o.now.step;
      } else {
        t.zero = 0;
      }
      if (t.over < needed) continue;
      where_.emplace_back(location(role::activation, o.names[a.id]), z);
      worst = std::max(worst, z);
      start = std::max(start, t.start);
      if (t.zero >= needed) {
        all_zero = true;
        zero_start = std::max(zero_start, t.zero_start);
      }
    }
    // A tensor with no non-zero value at all is a layer that passes nothing on: critical.
    // Each tensor has held over the line for its patience already.
    const grounds g{.unambiguous = all_zero, .horizon = 1,
                    .note = all_zero ? "a layer passes nothing on" : "a layer passes almost nothing on"};
    // Delivered again when a second layer dies or one goes from 99% to 100% zeros.
    if (!episode_.report(!where_.empty(), decide(g), where_)) return;
    finding f = make_finding(question::convergence, symptoms::dead_activations, severity::info, o.now.step, name(), {{"max_zero_fraction", worst}});
    f.first_step = all_zero ? std::max(start, zero_start) : start;
    f.where = where_;
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(escalate(std::move(f), g));
  }

 private:
  struct streak {
    std::size_t over = 0, zero = 0;  // observations in a row over the line / entirely zero
    std::int64_t start = -1, zero_start = -1;
    bool alive = false;  // seen under the line once
  };
  config c_;
  episode episode_;
  std::vector<streak> streaks_;  // by name id
  std::vector<std::pair<std::string, double>> where_;
};

}  // namespace mldiag::detectors
