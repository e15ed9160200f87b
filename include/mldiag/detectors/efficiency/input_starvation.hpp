// SPDX-License-Identifier: Apache-2.0
/// Q3 `input_starvation`: a step that waits for its data.
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

/// Q3: input starvation — the step waits for data: the median of data_wait / total over the
/// last `window` (20) steps above `max_share` (0.3: the method's "GPU idle while the loader
/// works"; a healthy loader that prefetches keeps it near 0) for `sustain` (5) steps in a row.
/// Judged once the window is full (a run's first batches load cold). Needs `step_timings`
/// with data_wait and total. Reports onsets.
class input_starvation {
 public:
  struct config {
    double max_share = 0.3;
    std::size_t sustain = 5;
    std::size_t window = 20;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"sustain", &config::sustain},
          field<config>{"window", &config::window}};
    }
  };
  input_starvation() : input_starvation(config{}) {}
  explicit input_starvation(config c) : c_(c), shares_(c.window == 0 ? 1 : c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"input_starvation", question::efficiency, {symptoms::input_starvation}, "a step that waits for its data", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.timings;
    if (!t.data_wait || !t.total || !(*t.total > 0.0)) return;
    const double share = *t.data_wait / *t.total;
    shares_.push(share);
    // The typical step of the window, not a run of unlucky ones: another process that loads
    // the machine for a few steps stretches the loader's wait with it (the LibTorch
    // MNIST example, healthy, warned while a compile ran beside it).
    const double typical = shares_.full() ? shares_.median() : 0.0;
    if (onset_.observe(typical > c_.max_share, c_.sustain)) {
      finding f = make_finding(question::efficiency, symptoms::input_starvation, severity::info, o.now.step, name(),
                               {{"data_wait_share", share}, {"median_share_in_window", typical}, {"data_wait_s", *t.data_wait},
                                {"step_s", *t.total}, {"max_share", c_.max_share}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain + c_.window / 2) + 1;
      f.where.emplace_back("data_loading", typical);
      out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1),
                                            .note = "the device waits for data"}));
    }
  }

 private:
  config c_;
  signals::window shares_;
  onset onset_;
};

}  // namespace mldiag::detectors
