// SPDX-License-Identifier: Apache-2.0
/// Q3 `straggler`: one rank slower than the others.
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

/// Q3: straggler — across ranks (`observe(rank_step_times)`), the slowest rank's time over the
/// median rank's above `min_ratio` (1.15), the same rank for `sustain` (20) steps in a row.
/// Location `rank <r>`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe(mldiag::rank_step_times{all_gathered_seconds});  // rank r at index r
/// ```
class straggler {
 public:
  struct config {
    // Healthy ranks of one job differ by a few percent (boost clocks, sequence lengths); a
    // rank 15% slower costs every other rank 15% at each synchronizing collective.
    double min_ratio = 1.15;
    std::size_t sustain = 20;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"sustain", &config::sustain}};
    }
  };
  straggler() : straggler(config{}) {}
  explicit straggler(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"straggler", question::efficiency, {symptoms::straggler}, "one rank slower than the others", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.rank_step_times;
    if (t.size() < 2) {
      onset_.reset();
      return;
    }
    scratch_.assign(t.begin(), t.end());  // grows once, to the rank count
    const auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.end());
    const double median = scratch_.size() % 2 == 1 ? *mid : 0.5 * (*std::max_element(scratch_.begin(), mid) + *mid);
    const auto slowest = static_cast<std::size_t>(std::max_element(t.begin(), t.end()) - t.begin());
    const double ratio = median > 0.0 ? t[slowest] / median : 0.0;
    // The state is the rank (+1): a different rank being slowest restarts the run.
    if (!onset_.observe(ratio > c_.min_ratio ? static_cast<int>(slowest) + 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::straggler, severity::info, o.now.step, name(),
                             {{"ratio_to_median_rank", ratio}, {"rank", static_cast<double>(slowest)},
                              {"rank_s", t[slowest]}, {"median_rank_s", median}, {"ranks", static_cast<double>(t.size())}});
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("rank " + std::to_string(slowest), ratio);
    out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1),
                                          .note = "every rank waits for the slowest"}));
  }

 private:
  config c_;
  onset onset_;
  std::vector<double> scratch_;
};

}  // namespace mldiag::detectors
