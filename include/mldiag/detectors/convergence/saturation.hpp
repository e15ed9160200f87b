// SPDX-License-Identifier: Apache-2.0
/// Q1 `saturation`: saturated tanh or sigmoid outputs.
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

/// Q1: saturated tanh or sigmoid outputs, bounded from the statistics alone. For a tensor
/// whose name contains `tanh_tag` and whose values lie in [-1, 1], at least
/// (E[x^2] - 0.81) / 0.19 of it has |x| > 0.9; for one whose name contains `sigmoid_tag` and
/// whose values lie in [0, 1], at least 1 - E[x(1 - x)] / 0.09 of it lies outside [0.1, 0.9].
/// Warning when that lower bound exceeds `min_saturated` (0.5).
class saturation {
 public:
  struct config {
    std::string tanh_tag = "tanh";
    std::string sigmoid_tag = "sigmoid";
    double min_saturated = 0.5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_saturated", &config::min_saturated}};
    }
  };
  saturation() : saturation(config{}) {}
  explicit saturation(config c) : c_(std::move(c)), tanh_(c_.tanh_tag), sigmoid_(c_.sigmoid_tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"saturation", question::convergence, {symptoms::saturated_activations}, "saturated tanh or sigmoid outputs", {.consequence = "at once: saturated units pass almost no gradient"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0;
    std::uint32_t worst_id = 0;
    for (const auto& a : o.now.activations) {
      const double bound = saturated_bound(o.names, a.id, a.stats);
      if (bound > worst) {
        worst = bound;
        worst_id = a.id;
      }
    }
    if (!fired_.rise(worst > c_.min_saturated)) return;
    finding f = make_finding(question::convergence, symptoms::saturated_activations, severity::info, o.now.step, name(),
                             {{"saturated_fraction_at_least", worst}});
    f.where.emplace_back(location(role::activation, o.names[worst_id]), worst);
    out.push_back(escalate(std::move(f), {.horizon = 1, .note = "saturated units pass almost no gradient"}));
  }

 private:
  double saturated_bound(const name_table& names, std::uint32_t id, const tensor_stats& s) {
    if (s.finite() == 0) return 0.0;
    const bool tanh = tanh_(names, id) && s.min >= -1.0 && s.max <= 1.0;
    if (!tanh && !(sigmoid_(names, id) && s.min >= 0.0 && s.max <= 1.0)) return 0.0;
    const double mean = s.mean(), second = s.variance() + mean * mean;  // E[x^2]
    return tanh ? (second - 0.81) / 0.19 : 1.0 - (mean - second) / 0.09;
  }
  config c_;
  name_tag tanh_, sigmoid_;
  edge fired_;
};

}  // namespace mldiag::detectors
