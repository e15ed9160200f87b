// SPDX-License-Identifier: Apache-2.0
/// Q3 `throughput_below_target`: throughput below the user's target while the hardware is busy.
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

/// Q3: throughput below target while the hardware is busy — `efficiency.throughput` below
/// `min_fraction` (0.9) of `throughput_target` for `sustain` (10) observations after `warmup`
/// (20), with MFU unknown or at least `busy_mfu` (0.4). The method's table expects this of a
/// memory-bound model: an info finding (the target may be what is wrong). With MFU below
/// `busy_mfu`, `low_mfu` speaks instead. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe(mldiag::efficiency_evidence{.throughput = tokens / seconds, .throughput_target = 250'000.0});  // achieved, target (tokens/s)
/// ```
class throughput_below_target {
 public:
  struct config {
    double min_fraction = 0.9;  // 10%: steps of one run vary by a few percent
    double busy_mfu = 0.4;      // low_mfu's upper band edge
    std::size_t warmup = 20;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_fraction", &config::min_fraction},
          field<config>{"busy_mfu", &config::busy_mfu},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  throughput_below_target() : throughput_below_target(config{}) {}
  explicit throughput_below_target(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"throughput_below_target", question::efficiency, {symptoms::throughput_below_target}, "throughput below the user's target while the hardware is busy", {.consequence = "held sustain steps after the warm-up"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& e = o.now.efficiency;
    if (!e.throughput || !e.throughput_target || !(*e.throughput_target > 0.0) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const double ratio = *e.throughput / *e.throughput_target;
    const bool slow = ratio < c_.min_fraction && !(e.mfu && *e.mfu < c_.busy_mfu);
    if (!onset_.observe(slow ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::throughput_below_target, severity::info, o.now.step, name(),
                             {{"throughput_fraction", ratio}, {"throughput", *e.throughput}, {"target", *e.throughput_target}});
    if (e.mfu) f.evidence.emplace_back("mfu", *e.mfu);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("step", ratio);
    out.push_back(escalate(std::move(f), {.note = "the hardware is busy: the target may be above what the model allows"}));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  onset onset_;
};

}  // namespace mldiag::detectors
