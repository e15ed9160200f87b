// SPDX-License-Identifier: Apache-2.0
/// Q2 `embedding_growth`: embedding norms growing without bound.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
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

/// Q2: embedding norms growing without bound — for parameters whose name contains `tag`
/// ("embed"), the norm over the last `window` recorded steps rises with a t-statistic above
/// `min_t` and by more than `min_growth` (50%) across the window, and keeps its pace: its rise
/// over the window's last quarter is at least `min_pace_kept` (0.5) of its largest rise over a
/// quarter of the window. Reports onsets per tensor.
///
/// Why the pace: a tensor initialized small grows to the scale training gives it, and then
/// settles. word2vec's input vectors start at +-0.5/d and grow 15-100x in 200 steps while the
/// loss falls 4.16 -> 2.6, their last quarter adding 0-46% of their fastest quarter's rise
/// (without this line every healthy skip-gram run warned: docs/accuracy.md#embedding_growth).
/// Growth without bound
/// keeps its pace: linear growth keeps all of it, exponential more, an Adam random walk at
/// 100x the learning rate (the examples' `embedding_lr_100x`) about 0.7. A tensor taking off
/// from a small initialization still has its pace (its loss leaving a plateau as it grows);
/// docs/limits.md.
class embedding_growth {
 public:
  struct config {
    std::string tag = "embed";
    std::size_t window = 200;
    double min_growth = 0.5;
    double min_t = 5.0;
    double min_pace_kept = 0.5;
    std::size_t persist = 100;  ///< observations the growth holds before it is a warning without a consequence
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_growth", &config::min_growth},
          field<config>{"min_t", &config::min_t},
          field<config>{"min_pace_kept", &config::min_pace_kept},
          field<config>{"persist", &config::persist}};
    }
  };
  embedding_growth() : embedding_growth(config{}) {}
  explicit embedding_growth(config c) : c_(std::move(c)), embedding_(c_.tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"embedding_growth", question::early_anomaly, {symptoms::embedding_norm_growing}, "embedding norms growing without bound", {.restarts_on_change = true, .consequence = "info until harm follows within 500 steps (the loss or validation worsens, or the loss turns non-finite) or it lasts persist (100) observations"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    for (const auto& p : o.now.parameters) {
      if (!embedding_(o.names, p.id)) continue;
      auto it = std::find_if(series_.begin(), series_.end(), [&](const auto& s) { return s.id == p.id; });
      if (it == series_.end()) it = series_.insert(series_.end(), {p.id, signals::window(c_.window), edge{}, persistence_line{}});  // once per tensor
      it->norms.push(p.stats.l2_norm());
      if (!it->norms.full()) continue;
      const auto t = signals::slope(it->norms);
      const double growth = it->norms.back() / it->norms[0] - 1.0;
      const double pace = pace_kept(it->norms);
      const bool grows = t.t_stat > c_.min_t && growth > c_.min_growth && pace >= c_.min_pace_kept;
      const bool starts = it->fired.rise(grows), lasted = it->lasting.reached(grows, c_.persist);
      if (starts || lasted) {
        finding f = make_finding(question::early_anomaly, symptoms::embedding_norm_growing, severity::info, o.now.step,
                                 name(), {{"growth_over_window", growth}, {"trend_t_stat", t.t_stat}, {"norm", it->norms.back()},
                                          {"pace_kept", pace}});
        f.where.emplace_back(location(role::parameter, o.names[p.id]), growth);
        f.first_step = o.now.step - static_cast<std::int64_t>(it->lasting.held()) + 1;
        out.push_back(escalate(std::move(f), {.awaits_consequence = true, .held = it->lasting.held(), .horizon = c_.persist,
                                              .note = "it keeps its pace over the window"}));
      }
    }
  }

 private:
  /// The rise over the window's last quarter as a fraction of its largest rise over a quarter
  /// (1 where no quarter rose).
  [[nodiscard]] static double pace_kept(const signals::window& w) {
    const std::size_t q = w.size() / 4;
    if (q == 0) return 1.0;
    double largest = 0.0, last = 0.0;
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t end = k == 3 ? w.size() - 1 : (k + 1) * q;
      last = w[end] - w[k * q];
      largest = std::max(largest, last);
    }
    return largest > 0.0 ? last / largest : 1.0;
  }

  struct series {
    std::uint32_t id;
    signals::window norms;
    edge fired;
    persistence_line lasting;
  };
  config c_;
  name_tag embedding_;
  std::vector<series> series_;
};

}  // namespace mldiag::detectors
