// SPDX-License-Identifier: Apache-2.0
/// Q1 `input_scale`: inputs that are not normalized.
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

/// Q1: inputs that are not normalized, the first of the method's obvious checks: a recorded
/// input batch (`role::input`) whose root mean square is above `max_rms` (10). Standardized
/// features have an RMS of 1, images scaled to [0, 1] less (Fashion-MNIST 0.45, the UCI digits
/// over 16 0.48); raw 0-255 pixels have 116 (Fashion-MNIST's training set; the digits x255:
/// 124), and unscaled tabular features (areas in the hundreds) as much. The UCI digits on their
/// own 0-16 scale (RMS 7.7) stay below the line. 10 leaves a standardized table's heavy tails
/// (a few values at 10-30) far below the line, since it reads the mean square of the batch.
/// Warning, once per onset, at the inputs above the line (largest RMS first). Token ids are
/// not inputs in this sense: record what the first layer multiplies, not what it looks up.
class input_scale {
 public:
  struct config {
    double max_rms = 10.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_rms", &config::max_rms}};
    }
  };
  input_scale() : input_scale(config{}) {}
  explicit input_scale(config c) : c_(c) {
    if (!(c.max_rms > 0.0)) throw error("input_scale: max_rms must be > 0 (the RMS above which inputs count as unnormalized)");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"input_scale", question::convergence, {symptoms::inputs_not_normalized}, "inputs that are not normalized", {.consequence = "a configuration error: at once"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    // A step that recorded no input says nothing (inputs recorded every k steps stay one onset).
    if (o.now.inputs.empty()) return;
    const tensor_evidence* top = nullptr;
    for (const auto& t : o.now.inputs)
      if (t.stats.finite() > 0 && (top == nullptr || t.stats.rms() > top->stats.rms())) top = &t;
    if (!fired_.rise(top != nullptr && top->stats.rms() > c_.max_rms)) return;
    finding f = make_finding(question::convergence, symptoms::inputs_not_normalized, severity::info, o.now.step, name(),
                             {{"input_rms", top->stats.rms()}, {"max_rms", c_.max_rms}, {"mean", top->stats.mean()},
                              {"std", top->stats.stddev()}, {"max_abs", top->stats.max_abs}});
    for (const auto& t : o.now.inputs)
      if (t.stats.finite() > 0 && t.stats.rms() > c_.max_rms)
        f.where.emplace_back(location(role::input, o.names[t.id]), t.stats.rms());
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(escalate(std::move(f), {.horizon = 1, .note = "the rates that fit normalized inputs do not fit these"}));
  }

 private:
  config c_;
  edge fired_;
};

}  // namespace mldiag::detectors
