// SPDX-License-Identifier: Apache-2.0
/// Q3 `memory_growth`: memory that grows step after step: a leak.
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

/// Q3: memory growth (a leak) — over the last `window` (200) observations after `warmup` (20),
/// split into `segments` (8) equal parts, at least `min_rising` (7) of the consecutive
/// segment medians rise (each by at least a quarter of the mean rise), and the last
/// segment's median exceeds the first's by at least `min_growth_fraction` (2%) of it and
/// `min_growth_bytes` (1 MiB). Medians ignore noise and
/// single spikes; needing nearly every segment to rise rejects the staircase of a caching
/// allocator that grows a few times (a new longest sequence) and then holds. Reads allocated,
/// else reserved, else host RSS (the first known; the window restarts when that changes).
/// The rate is (last median - first median) / the steps between their centres. Location: the
/// quantity read. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::memory_growth d({.window = 100});  // a shorter window: earlier, noisier
/// ```
class memory_growth {
 public:
  struct config {
    std::size_t window = 200;
    std::size_t segments = 8;
    std::size_t min_rising = 7;
    double min_growth_fraction = 0.02;
    double min_growth_bytes = 1024.0 * 1024.0;
    std::size_t warmup = 20;  // allocators and optimizers allocate their state in the first steps
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"segments", &config::segments},
          field<config>{"min_rising", &config::min_rising},
          field<config>{"min_growth_fraction", &config::min_growth_fraction},
          field<config>{"min_growth_bytes", &config::min_growth_bytes},
          field<config>{"warmup", &config::warmup}};
    }
  };
  memory_growth() : memory_growth(config{}) {}
  explicit memory_growth(config c) : c_(c), values_(c.window), segment_(c.window), medians_(c.segments) {
    if (c.segments < 2 || c.window < 2 * c.segments || c.min_rising >= c.segments) {
      throw error("memory_growth: window " + std::to_string(c.window) + ", segments " + std::to_string(c.segments) +
                  ", min_rising " + std::to_string(c.min_rising) +
                  "; need segments >= 2, window >= 2 x segments and min_rising < segments");
    }
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_growth", question::efficiency, {symptoms::memory_growth}, "memory that grows step after step: a leak", {.consequence = "memory rising through its whole window"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const int source = m.allocated ? 1 : m.reserved ? 2 : m.host_rss ? 3 : 0;
    if (source != source_) {
      values_.clear();
      seen_ = 0;
      fired_ = false;
      source_ = source;
    }
    if (source == 0 || seen_++ < c_.warmup) return;
    values_.push(source == 1 ? *m.allocated : source == 2 ? *m.reserved : *m.host_rss);
    if (!values_.full()) return;
    const std::size_t len = c_.window / c_.segments;
    const std::size_t skip = c_.window - len * c_.segments;  // the oldest values that do not fill a segment
    for (std::size_t k = 0; k < c_.segments; ++k) {
      for (std::size_t i = 0; i < len; ++i) segment_[i] = values_[skip + k * len + i];
      medians_[k] = median_of(len);
    }
    const double growth = medians_.back() - medians_.front();
    // A rise counts when it is at least a quarter of the mean rise: in a staircase (a few big
    // jumps, flat between) the flat stretches rise only by noise, far below the mean.
    const double min_rise = 0.25 * growth / static_cast<double>(c_.segments - 1);
    std::size_t rising = 0;
    for (std::size_t k = 1; k < c_.segments; ++k) rising += medians_[k] - medians_[k - 1] >= min_rise ? 1 : 0;
    const bool leaking = rising >= c_.min_rising && growth >= c_.min_growth_bytes &&
                         growth >= c_.min_growth_fraction * medians_.front();
    const bool rise = leaking && !fired_;
    fired_ = leaking;
    if (!rise) return;
    const double rate = growth / static_cast<double>((c_.segments - 1) * len);
    finding f = make_finding(question::efficiency, symptoms::memory_growth, severity::info, o.now.step, name(),
                             {{"bytes_per_step", rate}, {"growth_over_window", growth}, {"start_bytes", medians_.front()},
                              {"end_bytes", medians_.back()}, {"rising_segments", static_cast<double>(rising)}});
    f.first_step = o.now.step - static_cast<std::int64_t>(c_.window) + 1;
    f.where.emplace_back(source == 1 ? "allocated" : source == 2 ? "reserved" : "host_rss", rate);
    out.push_back(escalate(std::move(f), {.harm = true, .note = "memory rose through the whole window"}));
  }

 private:
  double median_of(std::size_t n) noexcept {
    const auto first = segment_.begin();
    const auto mid = first + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(first, mid, first + static_cast<std::ptrdiff_t>(n));
    if (n % 2 == 1) return *mid;
    return 0.5 * (*std::max_element(first, mid) + *mid);
  }

  config c_;
  signals::window values_;
  std::vector<double> segment_, medians_;  // scratch, sized at construction
  std::size_t seen_ = 0;
  int source_ = 0;
  bool fired_ = false;
};

}  // namespace mldiag::detectors
