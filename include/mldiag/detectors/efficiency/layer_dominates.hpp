// SPDX-License-Identifier: Apache-2.0
/// Q3 `layer_dominates`: one layer that takes most of the step.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
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

/// Q3: one layer dominates the step — among the layers timed in a step (at least three), one
/// takes more than `max_share` (0.5) of their summed time and more than `min_ratio` (4) times
/// the median layer's, for `sustain` steps in a row. The location is that layer. A model whose
/// layers differ by design (a huge vocabulary head) can raise this honestly: the finding is
/// where the time goes, phase 2 decides whether that is wrong. Reports onsets.
class layer_dominates {
 public:
  struct config {
    double max_share = 0.5;
    double min_ratio = 4.0;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"sustain", &config::sustain}};
    }
  };
  layer_dominates() : layer_dominates(config{}) {}
  explicit layer_dominates(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"layer_dominates", question::efficiency, {symptoms::layer_dominates}, "one layer that takes most of the step", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& lt = o.now.layer_times;
    if (lt.size() < 3) {
      onset_.reset();
      return;
    }
    double total = 0.0;
    std::size_t top = 0;
    times_.clear();
    for (std::size_t i = 0; i < lt.size(); ++i) {
      total += lt[i].seconds;
      times_.push_back(lt[i].seconds);
      if (lt[i].seconds > lt[top].seconds) top = i;
    }
    const double median = median_of(times_);
    const double share = total > 0.0 ? lt[top].seconds / total : 0.0;
    const double ratio = median > 0.0 ? lt[top].seconds / median : 0.0;
    const bool dominating = share > c_.max_share && ratio > c_.min_ratio;
    // The state is the dominating layer (id + 1): another layer dominating is a new run.
    if (onset_.observe(dominating ? static_cast<int>(lt[top].id) + 1 : 0, c_.sustain)) {
      finding f = make_finding(question::efficiency, symptoms::layer_dominates, severity::info, o.now.step,
                               name(), {{"share_of_layer_time", share}, {"ratio_to_median_layer", ratio},
                                        {"layer_s", lt[top].seconds}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(std::string(o.names[lt[top].id]), share);
      out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1)}));
    }
  }

 private:
  static double median_of(std::vector<double>& v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (v.size() % 2 == 1) return *mid;
    const double upper = *mid;
    const double lower = *std::max_element(v.begin(), mid);
    return 0.5 * (lower + upper);
  }

  config c_;
  onset onset_;
  std::vector<double> times_;  // scratch: grows to the number of layers once
};

}  // namespace mldiag::detectors
