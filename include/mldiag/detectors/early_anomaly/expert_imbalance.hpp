// SPDX-License-Identifier: Apache-2.0
/// Q2 `expert_imbalance`: a mixture-of-experts router that collapses, starves or overloads its experts.
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

/// Q2: mixture-of-experts imbalance, three ways, each held for some steps in a row (a small
/// batch routed top-1 swings for a step or two in healthy runs — the examples' transformer,
/// 256 tokens over 4 experts — while a collapsed router stays collapsed):
/// - a **collapse**: normalized load entropy below `min_normalized_entropy` (0.5, the method's
///   threshold) for `sustain` (10) steps: a warning;
/// - **dead experts** (zero load) for `dead_sustain` (50) steps: a warning. Not 10: healthy
///   small MoEs leave one or two experts empty for tens of steps after the warm-up and
///   revive them (docs/accuracy.md#expert_imbalance); an expert
///   empty for as long as the warm-up lasted is not coming back on its own;
/// - a busiest expert above `max_over_mean` (2.0: tokens beyond a capacity factor of 2 are
///   dropped in Switch-style routing) for `sustain` steps: info, since the monitor is not told
///   whether the layer drops tokens at all.
/// The dead-expert and busiest-expert rules need `min_load_per_expert` (16) tokens an expert
/// on average; the entropy rule always applies. Not during the first `warmup` (50)
/// observations of the router: a freshly initialized router is imbalanced (its random
/// projection favours some experts) until the load-balancing loss and the learning rate,
/// often still warming up, have had steps to act (docs/accuracy.md#expert_imbalance). Reports
/// onsets; the evidence `rule` says which decided (1 collapse, 2 dead experts, 3 busiest expert).
class expert_imbalance {
 public:
  struct config {
    double min_normalized_entropy = 0.5;
    double max_over_mean = 2.0;
    std::size_t sustain = 10;
    double min_load_per_expert = 16.0;
    std::size_t warmup = 50;
    std::size_t dead_sustain = 50;
    std::size_t persist = 100;  ///< observations rule 1 or 2 holds before it is a warning without a consequence
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_normalized_entropy", &config::min_normalized_entropy},
          field<config>{"max_over_mean", &config::max_over_mean},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_load_per_expert", &config::min_load_per_expert},
          field<config>{"warmup", &config::warmup},
          field<config>{"dead_sustain", &config::dead_sustain},
          field<config>{"persist", &config::persist}};
    }
  };
  expert_imbalance() : expert_imbalance(config{}) {}
  explicit expert_imbalance(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"expert_imbalance", question::early_anomaly, {symptoms::expert_load_imbalance}, "a mixture-of-experts router that collapses, starves or overloads its experts", {.consequence = "info until harm follows within 500 steps (the loss or validation worsens, or the loss turns non-finite) or it lasts persist (100) observations"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.routers.empty() && seen_ < c_.warmup) {
      ++seen_;
      return;
    }
    const router_evidence *collapsed = nullptr, *dead = nullptr, *busy = nullptr;
    for (const auto& r : o.now.routers) {
      if (r.experts < 2) continue;
      // With few tokens a step, an empty expert or a busiest one at 2x the mean is chance: 16
      // tokens over 8 balanced experts leave some expert empty in 63% of steps.
      const bool enough = !(r.total_load > 0.0) || r.total_load / static_cast<double>(r.experts) >= c_.min_load_per_expert;
      if (r.normalized_entropy < c_.min_normalized_entropy && (collapsed == nullptr || r.normalized_entropy < collapsed->normalized_entropy))
        collapsed = &r;
      if (enough && r.dead > 0 && (dead == nullptr || r.dead > dead->dead)) dead = &r;
      if (enough && r.max_over_mean > c_.max_over_mean && (busy == nullptr || r.max_over_mean > busy->max_over_mean)) busy = &r;
    }
    collapsed_.observe(collapsed != nullptr, c_.sustain);
    dead_.observe(dead != nullptr, c_.dead_sustain);
    busy_.observe(busy != nullptr, c_.sustain);
    const bool warn_collapse = collapsed_.run() >= c_.sustain, warn_dead = dead_.run() >= std::max<std::size_t>(c_.dead_sustain, 1);
    const bool warn = warn_collapse || warn_dead;
    const bool note = !warn && busy_.run() >= c_.sustain;
    const bool new_warning = warned_.rise(warn), new_note = noted_.rise(note);
    const bool lasted = lasting_.reached(warn, std::max({c_.persist, c_.sustain, c_.dead_sustain}));
    if (!new_warning && !new_note && !lasted) return;
    const router_evidence* worst = warn_collapse ? collapsed : warn_dead ? dead : busy;
    const std::size_t held = warn_collapse ? collapsed_.run() : warn_dead ? dead_.run() : busy_.run();
    finding f = make_finding(question::early_anomaly, symptoms::expert_load_imbalance, severity::info,
                             o.now.step, name(),
                             {{"normalized_entropy", worst->normalized_entropy},
                              {"dead_experts", static_cast<double>(worst->dead)},
                              {"max_over_mean", worst->max_over_mean}, {"experts", static_cast<double>(worst->experts)},
                              {"rule", warn_collapse ? 1.0 : warn_dead ? 2.0 : 3.0},
                              {"steps_held", static_cast<double>(held)}});
    f.first_step = o.now.step - static_cast<std::int64_t>(held) + 1;
    f.where.emplace_back(std::string(o.names[worst->id]), worst->normalized_entropy);
    for (const auto& r : o.now.routers)
      if (&r != worst && r.experts >= 2 && r.normalized_entropy < c_.min_normalized_entropy)
        f.where.emplace_back(std::string(o.names[r.id]), r.normalized_entropy);
    out.push_back(escalate(std::move(f), new_warning || lasted
                                             ? grounds{.awaits_consequence = true, .held = held,
                                                       .horizon = std::max({c_.persist, c_.sustain, c_.dead_sustain})}
                                             : grounds{.note = "the monitor is not told whether the layer drops tokens"}));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  onset collapsed_, dead_, busy_;  // the runs of each rule (their lengths set the severity)
  edge warned_, noted_;
  persistence_line lasting_;  // how long rule 1 or 2 has held: a warning at `persist` without a consequence
};

}  // namespace mldiag::detectors
