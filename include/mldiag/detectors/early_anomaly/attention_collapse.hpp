// SPDX-License-Identifier: Apache-2.0
/// Q2 `attention_collapse`: attention rows that are nearly one-hot.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"

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

/// Q2: attention entropy collapse — a recorded attention tensor whose mean normalized row
/// entropy falls below `min_normalized_entropy` (the method's 0.1: rows nearly one-hot).
/// Reports onsets; the location ranks tensors by lowest entropy. Once reported, the collapse
/// lasts until the lowest entropy is back above twice the threshold (halfway to 1 for a
/// threshold above 1/3): an entropy that hovers
/// around the line is one episode, not a delivery each time it crosses (a transformer with its
/// attention scores x50 sat at 0.046-0.108 for 100 steps after the onset and was delivered 7
/// times reading every fifth row; the sampled mean moves by at most 0.042 with the rotation,
/// and healthy runs' lowest mean is 0.45: docs/accuracy.md#attention_collapse).
class attention_collapse {
 public:
  struct config {
    double min_normalized_entropy = 0.1;
    std::size_t persist = 100;  ///< observations a collapse lasts before it is a warning without a consequence
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_normalized_entropy", &config::min_normalized_entropy},
          field<config>{"persist", &config::persist}};
    }
  };
  attention_collapse() : attention_collapse(config{}) {}
  explicit attention_collapse(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"attention_collapse", question::early_anomaly, {symptoms::attention_entropy_collapse}, "attention rows that are nearly one-hot", {.consequence = "info until harm follows within 500 steps (the loss or validation worsens, or the loss turns non-finite) or it lasts persist (100) observations"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double lowest = 1.0;
    for (const auto& a : o.now.attention)
      if (a.stats.rows > 0) lowest = a.stats.normalized_mean() < lowest ? a.stats.normalized_mean() : lowest;
    // The release line: twice the threshold, or halfway to 1 for thresholds above 1/3 (a
    // normalized entropy never exceeds 1).
    // fired_ is active while a reported collapse lasts.
    const double line = c_.min_normalized_entropy;
    const bool collapsed = fired_.active() ? lowest < line + std::min(line, 0.5 * (1.0 - line)) : lowest < line;
    const bool starts = fired_.rise(collapsed), lasted = lasting_.reached(collapsed, c_.persist);
    if (!starts && !lasted) return;
    finding f = make_finding(question::early_anomaly, symptoms::attention_entropy_collapse, severity::info, o.now.step,
                             name(), {{"lowest_normalized_entropy", lowest}, {"threshold", c_.min_normalized_entropy}});
    for (const auto& a : o.now.attention)
      if (a.stats.rows > 0 && a.stats.normalized_mean() < c_.min_normalized_entropy)
        f.where.emplace_back(std::string(o.names[a.id]), a.stats.normalized_mean());
    std::sort(f.where.begin(), f.where.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    f.first_step = o.now.step - static_cast<std::int64_t>(lasting_.held()) + 1;
    out.push_back(escalate(std::move(f), {.awaits_consequence = true, .held = lasting_.held(), .horizon = c_.persist,
                                          .note = "rows nearly one-hot"}));
  }

 private:
  config c_;
  edge fired_;
  persistence_line lasting_;
};

}  // namespace mldiag::detectors
