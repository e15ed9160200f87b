// SPDX-License-Identifier: Apache-2.0
/// Q3 `step_time_outliers`: steps far slower than the typical one.
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

/// Q3: step-time outliers — a step whose `timings.total` exceeds the median of the last
/// `window` (200) steps by more than `mads` (6) scaled MADs and by `min_ratio` (1.5x), at least
/// `min_outliers` (3) times within the window, judged once `min_history` (50) steps are in it.
/// Intermittent slow steps (garbage collection, checkpoints, evaluation, a host sync, another
/// process) are an info finding: phase 2 lines them up with what the run does then. Location
/// `step` with the worst ratio. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::step_time_outliers d({.mads = 8.0});
/// ```
class step_time_outliers {
 public:
  struct config {
    std::size_t window = 200;
    std::size_t min_history = 50;
    // 6 scaled MADs: a normal series passes it once in ~10^9 steps; host scheduling jitter on
    // a shared machine reaches it, hence also the 1.5x ratio and several outliers.
    double mads = 6.0;
    double min_ratio = 1.5;
    std::size_t min_outliers = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_history", &config::min_history},
          field<config>{"mads", &config::mads},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"min_outliers", &config::min_outliers}};
    }
  };
  step_time_outliers() : step_time_outliers(config{}) {}
  explicit step_time_outliers(config c) : c_(c), times_(c.window), flags_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"step_time_outliers", question::efficiency, {symptoms::step_time_outliers}, "steps far slower than the typical one", {.consequence = "min_outliers slow steps within the window"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.timings.total) return;
    const double t = *o.now.timings.total;
    if (!(t > 0.0) || !std::isfinite(t)) return;
    bool outlier = false;
    double median = std::numeric_limits<double>::quiet_NaN(), mad = median;
    if (times_.size() >= c_.min_history) {
      median = times_.median();
      mad = times_.mad();
      outlier = t > median + c_.mads * mad && t > c_.min_ratio * median;
    }
    times_.push(t);
    flags_.push(outlier ? t / median : 0.0);
    std::size_t count = 0, first = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < flags_.size(); ++i) {
      if (flags_[i] == 0.0) continue;
      if (count++ == 0) first = i;
      worst = flags_[i] > worst ? flags_[i] : worst;
    }
    const bool intermittent = count >= c_.min_outliers;
    const bool rise = intermittent && !fired_;
    fired_ = intermittent;
    if (!rise) return;
    finding f = make_finding(question::efficiency, symptoms::step_time_outliers, severity::info, o.now.step, name(),
                             {{"outliers_in_window", static_cast<double>(count)}, {"worst_ratio_to_median", worst},
                              {"step_s", t}, {"median_s", median}, {"mad_s", mad}});
    f.first_step = o.now.step - static_cast<std::int64_t>(flags_.size() - 1 - first);
    f.where.emplace_back("step", worst);
    out.push_back(escalate(std::move(f), {.note = "intermittent: work outside the step"}));
  }

 private:
  config c_;
  signals::window times_, flags_;  // flags_: the ratio to the median of each outlier, else 0
  bool fired_ = false;
};

}  // namespace mldiag::detectors
