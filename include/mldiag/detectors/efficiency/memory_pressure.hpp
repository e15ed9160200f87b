// SPDX-License-Identifier: Apache-2.0
/// Q3 `memory_pressure`: memory near the device's capacity.
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

/// Q3: memory pressure — the fullest of allocated, reserved and used over capacity
/// (`memory_evidence::fill`) above `max_fill` (0.95) for `sustain` (5) observations. Needs
/// capacity. Location `device_memory`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe(mldiag::cuda::device_memory(0));  // kernels/mldiag/cuda/memory.cuh
/// ```
class memory_pressure {
 public:
  struct config {
    // Runs tuned for memory sit at 85-90% of capacity; above 95% a longer sequence or a
    // larger activation OOMs, and the caching allocator starts flushing its cache and retrying
    // (cudaFree synchronizes the device).
    double max_fill = 0.95;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_fill", &config::max_fill},
          field<config>{"sustain", &config::sustain}};
    }
  };
  memory_pressure() : memory_pressure(config{}) {}
  explicit memory_pressure(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_pressure", question::efficiency, {symptoms::memory_pressure}, "memory near the device's capacity", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const auto filled = m.fill();
    if (!filled) {
      onset_.reset();
      return;
    }
    const double fill = *filled;
    if (!onset_.observe(fill > c_.max_fill ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::memory_pressure, severity::info, o.now.step, name(),
                             {{"fill", fill}, {"capacity", *m.capacity}, {"max_fill", c_.max_fill}});
    for (const auto& [key, v] : {std::pair{"allocated", m.allocated}, std::pair{"reserved", m.reserved}, std::pair{"used", m.used}})
      if (v) f.evidence.emplace_back(key, *v);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("device_memory", fill);
    out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1)}));
  }

 private:
  config c_;
  onset onset_;
};

}  // namespace mldiag::detectors
