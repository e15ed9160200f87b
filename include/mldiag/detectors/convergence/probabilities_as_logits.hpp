// SPDX-License-Identifier: Apache-2.0
/// Q1 `probabilities_as_logits`: probabilities fed to a loss that expects logits.
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

/// Q1: wrong loss — the tensor fed to a cross-entropy loss as logits holds probabilities:
/// every value of an activation whose name contains `tag` ("logits") lies in [0, 1] for
/// `sustain` steps in a row. Real logits of a classifier take both signs within a few steps
/// of initialization; values confined to [0, 1] mean a softmax (or sigmoid) was applied before
/// a loss that applies its own — the classic "softmax twice" bug, which caps what the loss can
/// learn. Reports onsets.
class probabilities_as_logits {
 public:
  struct config {
    std::string tag = "logits";
    std::size_t sustain = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain}};
    }
  };
  probabilities_as_logits() : probabilities_as_logits(config{}) {}
  explicit probabilities_as_logits(config c) : c_(std::move(c)), logits_(c_.tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"probabilities_as_logits", question::convergence, {symptoms::probabilities_as_logits}, "probabilities fed to a loss that expects logits", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const tensor_evidence* hit = nullptr;
    for (const auto& a : o.now.activations) {
      if (!logits_(o.names, a.id) || a.stats.finite() < 2) continue;
      if (a.stats.min >= 0.0 && a.stats.max <= 1.0) hit = &a;
    }
    if (fired_.observe(hit != nullptr, c_.sustain)) {
      finding f = make_finding(question::convergence, symptoms::probabilities_as_logits, severity::info,
                               o.now.step, name(), {{"min", hit->stats.min}, {"max", hit->stats.max}, {"mean", hit->stats.mean()}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(location(role::activation, o.names[hit->id]), hit->stats.max);
      out.push_back(escalate(std::move(f), {.held = fired_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1),
                                            .note = "a loss that applies its own softmax caps what it can learn"}));
    }
  }

 private:
  config c_;
  name_tag logits_;
  edge fired_;
};

}  // namespace mldiag::detectors
