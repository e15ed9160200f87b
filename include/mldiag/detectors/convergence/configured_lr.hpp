// SPDX-License-Identifier: Apache-2.0
/// Q1 `configured_lr`: a learning rate above the peak the configuration states.
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

/// Q1: the learning rate in use above the peak the configuration states (`peak`; 0 = not
/// known, silent) by more than `max_factor` (2): a schedule that starts at 10x its peak, a
/// scheduler restored with the wrong state, a learning rate multiplied twice. The monitor
/// adds it with the peak that check_configuration is told. Reports onsets.
class configured_lr {
 public:
  struct config {
    double peak = 0.0;
    double max_factor = 2.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"peak", &config::peak},
          field<config>{"max_factor", &config::max_factor}};
    }
  };
  configured_lr() : configured_lr(config{}) {}
  explicit configured_lr(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"configured_lr", question::convergence, {symptoms::lr_above_configured_peak}, "a learning rate above the peak the configuration states", {.consequence = "a configuration error: at once"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!(c_.peak > 0.0) || !o.now.lr || !std::isfinite(*o.now.lr)) return;
    const double lr = *o.now.lr;
    if (fired_.rise(lr > c_.max_factor * c_.peak)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::lr_above_configured_peak, severity::info,
                                          o.now.step, name(), {{"lr", lr}, {"configured_peak", c_.peak}, {"factor", lr / c_.peak}}),
                             {.horizon = 1, .note = "the schedule runs above the peak it was given"}));
    }
  }

 private:
  config c_;
  edge fired_;
};

}  // namespace mldiag::detectors
