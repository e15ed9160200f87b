// SPDX-License-Identifier: Apache-2.0
/// Q1 `vanishing_gradients`: gradients too small to train, or dying from the output back to the input.
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

/// Q1: vanishing gradients — the RMS of all gradient elements below `min_rms` (default 1e-9),
/// or the input side's gradient RMS below `layer_ratio` (default 1e-3) times the last recorded
/// gradient's, for `sustain` steps in a row. Recording order is taken as layer order, and the
/// input side is the first layer: the largest RMS among the first `input_tensors` (2) recorded
/// gradients, a weight and its bias, or LoRA's A and B. A gradient that vanishes through depth
/// leaves both small; one tensor whose gradient passes through a factor that starts at zero
/// has none while its partner's is normal (PEFT initializes lora_B to 0, so lora_A's gradient
/// B^T delta is exactly 0 at first and tiny for tens of steps: first-to-last ratios of
/// 6e-5..6e-4 with one tensor in healthy runs; docs/accuracy.md#vanishing_gradients). A step
/// whose gradients are all exactly 0 while its loss is exactly 0 does not count: the batch is
/// fit (a triplet or hinge loss met its margin), whereas a dead network's loss stays up.
class vanishing_gradients {
 public:
  struct config {
    double min_rms = 1e-9;
    double layer_ratio = 1e-3;
    std::size_t sustain = 5;
    std::size_t input_tensors = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_rms", &config::min_rms},
          field<config>{"layer_ratio", &config::layer_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"input_tensors", &config::input_tensors}};
    }
  };
  vanishing_gradients() : vanishing_gradients(config{}) {}
  explicit vanishing_gradients(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"vanishing_gradients", question::convergence, {symptoms::vanishing_gradients}, "gradients too small to train, or dying from the output back to the input", {.restarts_on_change = true, .consequence = "held sustain steps: gradients too small to move what they reach"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& g = o.now.gradients;
    if (g.empty()) return;
    // Counts and the largest magnitude decide most steps; the merged statistics of every
    // gradient (4 us for 300 tensors, issue 18) are computed only where they decide, below.
    std::uint64_t non_finite = 0, finite = 0;
    double largest = 0.0;
    for (const auto& t : g) {
      non_finite += t.stats.non_finite();
      finite += t.stats.finite();
      largest = std::max(largest, t.stats.max_abs);
    }
    const auto merged_rms = [&] {
      tensor_stats all;
      for (const auto& t : g)
        all.merge(t.stats);
      return all.rms();
    };
    // Gradients that hold NaN or Inf say nothing about vanishing (their few finite elements
    // are what is left of a blow-up): non_finite's business.
    if (non_finite > 0) {
      fired_.reset();
      return;
    }
    // The input side: the first layer's largest gradient (see the class comment). The last
    // tensor stays the output side's, even where fewer than input_tensors + 1 are recorded.
    const std::size_t input_side = std::min(std::max<std::size_t>(c_.input_tensors, 1), std::max<std::size_t>(g.size() - 1, 1));
    double first = 0.0;
    for (std::size_t i = 0; i < input_side; ++i) first = std::max(first, g[i].stats.rms());
    const double last = g.back().stats.rms();
    const double ratio = last > 0.0 ? first / last : 1.0;
    // Each element's square is in the mean square, so the RMS is at least the largest |g| over
    // sqrt(elements): at twice the line (rounding moves the merged RMS by far less) it is above.
    const bool above_line = largest / std::sqrt(static_cast<double>(finite)) > 2.0 * c_.min_rms;
    // Every gradient exactly 0 with the loss exactly 0 is a batch the model fits (a margin or
    // hinge loss met: the zoo's triplet runs at batch 8), not a signal lost on its way back.
    const bool batch_fit = largest == 0.0 && o.now.loss && *o.now.loss == 0.0;
    const bool vanishing = finite > 0 && !batch_fit &&
                           ((g.size() > 1 && ratio < c_.layer_ratio) || (!above_line && merged_rms() < c_.min_rms));
    if (fired_.observe(vanishing, c_.sustain)) {
      finding f = make_finding(
          question::convergence, symptoms::vanishing_gradients, severity::info, o.now.step,
          name(), {{"grad_rms", merged_rms()}, {"first_to_last_layer_rms_ratio", ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(location(role::gradient, o.names[g.front().id]), first);
      out.push_back(escalate(std::move(f), {.held = fired_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1), .note = "too small to move what they reach"}));
    }
  }

 private:
  config c_;
  edge fired_;
};

}  // namespace mldiag::detectors
