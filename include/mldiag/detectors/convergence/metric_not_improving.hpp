// SPDX-License-Identifier: Apache-2.0
/// Q1 `metric_not_improving`: a progress metric the run records that does not improve, or
/// loses what it gained.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/escalation.hpp"
#include "mldiag/detectors/state.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1, read from the progress metrics the user records (`monitor::observe_metric`: a return,
/// an accuracy, a score), each oriented by its `higher_is_better`. The convergence verdict
/// where the loss is not a progress measure (`task::objective`), and a second opinion where
/// it is. Two findings, each the harm itself, so a warning:
/// - **not improving**: after `warmup` (200) values, the mean of the last `window` (50) has not
///   gained `min_improvement` (5%) of the first `start_window` (10) values' scale (their mean's
///   magnitude, or their spread when larger) over their mean, and the window shows no rise
///   of `t_critical` (2) standard errors, and no window before it ever gained that much (a
///   metric that gained and fell back is worsening, below). Once reported, it counts as stalled until it has
///   gained twice that (one episode, not one per crossing).
/// - **worsening**: the window's mean has fallen from the best window mean seen by at least
///   `min_worsening` (a fifth) of what was gained from the start to that best, and by
///   `min_standard_errors` (4) of the window's standard errors (the best of many overlapping
///   windows sits about 3 above the truth by chance). Critical when everything gained is lost;
///   a loss that deepens to that is reported again then, once.
class metric_not_improving {
 public:
  struct config {
    std::size_t warmup = 200;
    std::size_t window = 50;
    std::size_t start_window = 10;
    double min_improvement = 0.05;
    double t_critical = 2.0;
    double min_worsening = 0.2;
    double min_standard_errors = 4.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"warmup", &config::warmup},
          field<config>{"window", &config::window},
          field<config>{"start_window", &config::start_window},
          field<config>{"min_improvement", &config::min_improvement},
          field<config>{"t_critical", &config::t_critical},
          field<config>{"min_worsening", &config::min_worsening},
          field<config>{"min_standard_errors", &config::min_standard_errors}};
    }
  };
  metric_not_improving() : metric_not_improving(config{}) {}
  explicit metric_not_improving(config c) : c_(c) {
    c_.window = std::max<std::size_t>(c_.window, 3);
    c_.start_window = std::max<std::size_t>(c_.start_window, 1);
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"metric_not_improving", question::convergence,
                                       {symptoms::progress_not_improving, symptoms::progress_worsening},
                                       "a progress metric the run records that does not improve, or loses what it gained",
                                       {.restarts_on_change = true, .consequence = "the progress metric not improving, or losing its gain: the harm itself"}};
  [[nodiscard]] std::string_view name() const { return about.name; }

  void observe(const observation& o, std::vector<finding>& out) {
    for (const auto& m : o.now.metrics) {
      if (!std::isfinite(m.value)) continue;  // a non-finite metric is no progress reading
      track& t = of(m.id);
      const double v = m.higher_is_better ? m.value : -m.value;  // oriented: higher is better
      if (!t.first.full()) t.first.push(v);
      t.recent.push(v);
      if (++t.seen < c_.warmup || !t.recent.full()) continue;
      judge(o, m, t, out);
    }
  }

 private:
  struct track {
    std::uint32_t id;
    signals::window first, recent;
    std::size_t seen = 0;
    double best = -std::numeric_limits<double>::infinity();
    edge stalled, worse;
    severity worse_reported = severity::info;
  };

  track& of(std::uint32_t id) {
    for (auto& t : tracks_)
      if (t.id == id) return t;
    tracks_.push_back({id, signals::window(c_.start_window), signals::window(c_.window)});
    return tracks_.back();
  }

  void judge(const observation& o, const metric_evidence& m, track& t, std::vector<finding>& out) {
    const double start = t.first.mean(), now = t.recent.mean();
    const double spread = t.first.size() > 1 ? t.first.stddev() : 0.0;
    const double scale = std::max({std::fabs(start), spread, std::numeric_limits<double>::min()});
    const double gain = now - start;
    t.best = std::max(t.best, now);
    const std::string metric(o.names[m.id]);
    const auto sign = [&](double x) { return m.higher_is_better ? x : -x; };  // back to the user's scale
    // A metric that once gained and then fell back is the worsening below, not a stall.
    const bool never_gained = t.best - start < c_.min_improvement * scale;
    const bool stalled = t.stalled.active() ? gain < 2.0 * c_.min_improvement * scale
                                            : never_gained && gain < c_.min_improvement * scale &&
                                                  !(signals::slope(t.recent).t_stat > c_.t_critical);
    if (t.stalled.rise(stalled)) {
      finding f = make_finding(question::convergence, symptoms::progress_not_improving, severity::info, o.now.step, name(),
                               {{"start_mean", sign(start)}, {"recent_mean", sign(now)}, {"gain_fraction", gain / scale}});
      f.where.emplace_back(metric, gain / scale);
      out.push_back(escalate(std::move(f), {.harm = true, .note = "the progress measure has not improved since the start"}));
    }
    const double gained = t.best - start, lost = t.best - now;
    const double standard_error = t.recent.stddev() / std::sqrt(static_cast<double>(t.recent.size()));
    const bool worse = gained >= c_.min_improvement * scale && lost >= c_.min_worsening * gained &&
                       lost >= c_.min_standard_errors * standard_error;
    // One report when it starts, and one more each time its severity rises (a loss of gains
    // that deepens into losing all of them), never one per step.
    const grounds g{.harm = true, .magnitude = gained > 0.0 ? lost / gained : 0.0, .critical_at = 1.0,
                    .note = "the progress measure lost what it had gained"};
    const bool starts = t.worse.rise(worse);
    if (worse && (starts || decide(g) > t.worse_reported)) {
      t.worse_reported = decide(g);
      finding f = make_finding(question::convergence, symptoms::progress_worsening, severity::info, o.now.step, name(),
                               {{"start_mean", sign(start)}, {"best_mean", sign(t.best)}, {"recent_mean", sign(now)},
                                {"lost_fraction_of_gain", lost / gained}});
      f.where.emplace_back(metric, lost / gained);
      out.push_back(escalate(std::move(f), g));
    }
  }

  config c_;
  std::vector<track> tracks_;
};

}  // namespace mldiag::detectors
