// SPDX-License-Identifier: Apache-2.0
/// Q2 `parameter_drift`: parameters that have drifted as far from their initialization as their own norm.
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

/// Q2: parameter drift from initialization — a tensor's relative drift
/// ||theta - theta0|| / ||theta0|| (from a drift_tracker, evidence/drift.hpp) above
/// `max_relative_drift` (1.0: it has moved as far as its own initial norm). A heuristic
/// default that no measured run has chosen yet. Reports onsets per tensor.
class parameter_drift {
 public:
  struct config {
    double max_relative_drift = 1.0;
    std::size_t persist = 100;  ///< observations above the line before it is a warning without a consequence
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_relative_drift", &config::max_relative_drift},
          field<config>{"persist", &config::persist}};
    }
  };
  parameter_drift() : parameter_drift(config{}) {}
  explicit parameter_drift(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"parameter_drift", question::early_anomaly, {symptoms::parameter_drift}, "parameters that have drifted as far from their initialization as their own norm", {.consequence = "info until harm follows within 500 steps (the loss or validation worsens, or the loss turns non-finite) or it lasts persist (100) observations"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (fired_.size() < o.names.size()) fired_.resize(o.names.size()), lasting_.resize(o.names.size());  // new names only
    for (const auto& [id, drift] : o.now.drift) {
      const bool above = drift > c_.max_relative_drift;
      const bool starts = fired_[id].rise(above), lasted = lasting_[id].reached(above, c_.persist);
      if (starts || lasted) {
        finding f = make_finding(question::early_anomaly, symptoms::parameter_drift, severity::info,
                                 o.now.step, name(), {{"relative_drift", drift}, {"threshold", c_.max_relative_drift}});
        f.where.emplace_back(location(role::parameter, o.names[id]), drift);
        f.first_step = o.now.step - static_cast<std::int64_t>(lasting_[id].held()) + 1;
        out.push_back(escalate(std::move(f), {.awaits_consequence = true, .held = lasting_[id].held(), .horizon = c_.persist}));
      }
    }
  }

 private:
  config c_;
  std::vector<edge> fired_;
  std::vector<persistence_line> lasting_;
};

}  // namespace mldiag::detectors
