// SPDX-License-Identifier: Apache-2.0
/// Q3 `low_mfu`: model FLOPs utilization in the method's low bands.
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

/// Q3: low MFU — the method's efficiency table by band: MFU below `low` (0.2) is a warning
/// (input-bound or the wrong backend: unfused attention, fp32 math); from `low` to `moderate`
/// (0.4) an info finding (memory-bound kernels or poor overlap) — published large runs sit
/// there (GPT-3 21%, Gopher 32%, MT-NLG 30%, by the PaLM paper's count; PaLM 46%), so it is
/// not an alarm. Reads `efficiency.mfu`, else `efficiency.tensor_core_activity` (TCA counts
/// partly used tensor pipes as active, so it reads at or above MFU: judging it by the same
/// bands errs towards silence). Skips the first `warmup` (20) observations (compilation,
/// autotuning, allocator growth) and needs the same band for `sustain` (10) in a row (MFU of
/// one step jitters with its data). The finding's evidence has the band's bounds. Reports
/// onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::low_mfu d;          // or make_detector("low_mfu", {{"low", 0.25}})
/// mon.observe(mldiag::efficiency_evidence{.mfu = model_flops_utilization(flops_per_step, seconds, peak).mfu});  // efficiency/mfu.hpp
/// ```
class low_mfu {
 public:
  struct config {
    double low = 0.2;       // the method's table: < 20% is input-bound or the wrong backend
    double moderate = 0.4;  // 20-40%: memory-bound or poor overlap; above: the hardware is busy
    std::size_t warmup = 20;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"low", &config::low},
          field<config>{"moderate", &config::moderate},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  low_mfu() : low_mfu(config{}) {}
  explicit low_mfu(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"low_mfu", question::efficiency, {symptoms::low_mfu}, "model FLOPs utilization in the method's low bands", {.consequence = "held sustain steps after the warm-up"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& e = o.now.efficiency;
    const bool from_mfu = e.mfu.has_value();
    const std::optional<double> value = from_mfu ? e.mfu : e.tensor_core_activity;
    if (!value || std::isnan(*value) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const double v = *value;
    const int band = v < c_.low ? 1 : (v < c_.moderate ? 2 : 0);
    if (!onset_.observe(band, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::low_mfu, severity::info, o.now.step,
                             name(), {{from_mfu ? "mfu" : "tensor_core_activity", v},
                                      {"band_low", band == 1 ? 0.0 : c_.low},
                                      {"band_high", band == 1 ? c_.low : c_.moderate}});
    if (from_mfu && e.tensor_core_activity) f.evidence.emplace_back("tensor_core_activity", *e.tensor_core_activity);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("step", v);
    // The middle band is where published large runs sit: a statement, not harm.
    out.push_back(escalate(std::move(f), band == 1 ? grounds{.held = onset_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1),
                                                            .note = "below the method's lowest band"}
                                                   : grounds{.note = "memory-bound kernels or poor overlap; large runs sit here too"}));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  onset onset_;
};

}  // namespace mldiag::detectors
