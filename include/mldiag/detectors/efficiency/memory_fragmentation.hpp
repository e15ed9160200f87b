// SPDX-License-Identifier: Apache-2.0
/// Q3 `memory_fragmentation`: a caching allocator whose free memory is fragmented.
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

/// Q3: memory fragmentation — near capacity (fill above `near_capacity`, 0.8), either
/// 1 - allocated/reserved above `max_fragmentation` (0.3), or the largest free block below
/// `min_block_fraction` (0.1) of the allocator's cached free memory (reserved - allocated,
/// when that is at least 5% of reserved), for `sustain` (5) observations. Far from capacity
/// fragmentation costs nothing, so it is not judged there; without capacity, not at all.
/// Location `allocator`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::memory_evidence m;
/// m.allocated = 50e9; m.reserved = 76e9; m.capacity = 80e9;  // 1 - 50/76 = 0.34, fill 0.95
/// mon.observe(m);
/// ```
class memory_fragmentation {
 public:
  struct config {
    // A third of the pool cached but unusable: with steady shapes a caching allocator keeps
    // a few percent cached-free; OOMs "with memory free" come from this.
    double max_fragmentation = 0.3;
    double near_capacity = 0.8;
    // The largest block a tenth of the cached free memory: the free memory is in splinters.
    double min_block_fraction = 0.1;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_fragmentation", &config::max_fragmentation},
          field<config>{"near_capacity", &config::near_capacity},
          field<config>{"min_block_fraction", &config::min_block_fraction},
          field<config>{"sustain", &config::sustain}};
    }
  };
  memory_fragmentation() : memory_fragmentation(config{}) {}
  explicit memory_fragmentation(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_fragmentation", question::efficiency, {symptoms::memory_fragmentation}, "a caching allocator whose free memory is fragmented", {.consequence = "held sustain steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const auto filled = m.fill();
    const auto fragmented_share = m.fragmentation();
    if (!filled || !fragmented_share) {
      onset_.reset();
      return;
    }
    const double fill = *filled, frag = *fragmented_share;
    const double cached_free = *m.reserved - *m.allocated;  // both known: fragmentation() is
    const double block_fraction = cached_free > 0.05 * *m.reserved && m.largest_free_block
                                      ? *m.largest_free_block / cached_free
                                      : std::numeric_limits<double>::quiet_NaN();
    const bool fragmented = fill > c_.near_capacity && (frag > c_.max_fragmentation || block_fraction < c_.min_block_fraction);
    if (!onset_.observe(fragmented ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::memory_fragmentation, severity::info, o.now.step, name(),
                             {{"fragmentation", frag}, {"fill", fill}, {"cached_free", cached_free},
                              {"max_fragmentation", c_.max_fragmentation}});
    if (!std::isnan(block_fraction)) {
      f.evidence.emplace_back("largest_free_block", *m.largest_free_block);
      f.evidence.emplace_back("block_fraction", block_fraction);
    }
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("allocator", frag);
    out.push_back(escalate(std::move(f), {.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1)}));
  }

 private:
  config c_;
  onset onset_;
};

}  // namespace mldiag::detectors
