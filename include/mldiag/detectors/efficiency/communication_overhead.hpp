// SPDX-License-Identifier: Apache-2.0
/// Q3 `communication_overhead`: collectives that take a large share of the step.
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

/// Q3: communication overhead — `timings.communication / timings.total` above `max_share`
/// (0.25) for `sustain` (10) observations after `warmup` (10); or, when the step's bytes and
/// the link's bandwidth are given (`record_communication`), an achieved bandwidth (bytes /
/// communication time) below `min_bandwidth_fraction` (0.5) of the link's while communication
/// takes at least `min_share` (0.1) of the step. Give as `communication` the time the step
/// waits for collectives (not the part hidden behind backward); the achieved bandwidth then
/// counts waiting as transfer and errs low. Location `communication`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe(t);                               // t.communication, t.total
/// mon.observe(mldiag::efficiency_evidence{.communication_bytes = grad_bytes * 2.0, .link_bandwidth = 400e9});   // ring all-reduce, NVLink-class link
/// ```
class communication_overhead {
 public:
  struct config {
    // A quarter of the step waiting on the network: data-parallel training that overlaps its
    // gradient all-reduce with backward exposes a few percent.
    double max_share = 0.25;
    // Half the link's nominal rate: NCCL's ring all-reduce reaches 70-90% of it on large
    // messages (nccl-tests "busbw"), so below half something else is wrong.
    double min_bandwidth_fraction = 0.5;
    double min_share = 0.1;  // a slow link matters only where the step waits for it
    std::size_t warmup = 10;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"min_bandwidth_fraction", &config::min_bandwidth_fraction},
          field<config>{"min_share", &config::min_share},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  communication_overhead() : communication_overhead(config{}) {}
  explicit communication_overhead(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"communication_overhead", question::efficiency, {symptoms::communication_overhead}, "collectives that take a large share of the step", {.consequence = "held sustain steps after the warm-up"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.timings;
    const auto& e = o.now.efficiency;
    if (!t.communication || !t.total || !(*t.total > 0.0) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const double communication = *t.communication, total = *t.total;
    const double share = communication / total;
    const double bandwidth = communication > 0.0 && e.communication_bytes ? *e.communication_bytes / communication
                                                                          : std::numeric_limits<double>::quiet_NaN();
    const double link = e.link_bandwidth.value_or(std::numeric_limits<double>::quiet_NaN());
    const double fraction = link > 0.0 ? bandwidth / link : std::numeric_limits<double>::quiet_NaN();
    const bool overhead = share > c_.max_share || (fraction < c_.min_bandwidth_fraction && share >= c_.min_share);
    if (!onset_.observe(overhead ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::communication_overhead, severity::info, o.now.step, name(),
                             {{"communication_share", share}, {"communication_s", communication}, {"step_s", total},
                              {"max_share", c_.max_share}});
    if (!std::isnan(bandwidth)) f.evidence.emplace_back("achieved_bandwidth", bandwidth);
    if (!std::isnan(fraction)) {
      f.evidence.emplace_back("link_bandwidth", link);
      f.evidence.emplace_back("bandwidth_fraction", fraction);
    }
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("communication", share);
    out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1)}));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  onset onset_;
};

}  // namespace mldiag::detectors
