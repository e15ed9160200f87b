// SPDX-License-Identifier: Apache-2.0
/// Q3 detectors: why isn't it fast enough — from the step-phase and per-layer timings of the
/// snapshot. docs/detectors.md gives each one's defaults and sources.
#pragma once

#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::detectors {

/// Q3: input starvation — the step waits for data: data_wait / total above `max_share` (0.3:
/// the method's "GPU idle while the loader works"; a healthy loader that prefetches keeps it
/// near 0) for `sustain` steps in a row. Needs `step_timings` with data_wait and total.
/// Reports onsets.
class input_starvation {
 public:
  struct config {
    double max_share = 0.3;
    std::size_t sustain = 5;
  };
  input_starvation() : input_starvation(config{}) {}
  explicit input_starvation(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "input_starvation"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.timings;
    if (std::isnan(t.data_wait) || !(t.total > 0.0)) {
      run_ = 0;
      return;
    }
    const double share = t.data_wait / t.total;
    run_ = share > c_.max_share ? run_ + 1 : 0;
    if (fired_.rise(run_ >= c_.sustain)) {
      finding f = make_finding(question::efficiency, "input starvation", severity::warning, o.now.step, name(),
                               {{"data_wait_share", share}, {"data_wait_s", t.data_wait}, {"step_s", t.total},
                                {"max_share", c_.max_share}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("data_loading", share);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  std::size_t run_ = 0;
  edge fired_;
};

/// Q3: one layer dominates the step — among the layers timed in a step (at least three), one
/// takes more than `max_share` (0.5) of their summed time and more than `min_ratio` (4) times
/// the median layer's, for `sustain` steps in a row. The location is that layer. A model whose
/// layers differ by design (a huge vocabulary head) can raise this honestly: the finding is
/// where the time goes, phase 2 decides whether that is wrong. Reports onsets.
class layer_dominates {
 public:
  struct config {
    double max_share = 0.5;
    double min_ratio = 4.0;
    std::size_t sustain = 5;
  };
  layer_dominates() : layer_dominates(config{}) {}
  explicit layer_dominates(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "layer_dominates"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& lt = o.now.layer_times;
    if (lt.size() < 3) {
      run_ = 0;
      return;
    }
    double total = 0.0;
    std::size_t top = 0;
    times_.clear();
    for (std::size_t i = 0; i < lt.size(); ++i) {
      total += lt[i].seconds;
      times_.push_back(lt[i].seconds);
      if (lt[i].seconds > lt[top].seconds) top = i;
    }
    const double median = median_of(times_);
    const double share = total > 0.0 ? lt[top].seconds / total : 0.0;
    const double ratio = median > 0.0 ? lt[top].seconds / median : 0.0;
    const bool dominating = share > c_.max_share && ratio > c_.min_ratio;
    run_ = dominating && (run_ == 0 || lt[top].id == run_id_) ? run_ + 1 : (dominating ? 1 : 0);
    run_id_ = lt[top].id;
    if (fired_.rise(run_ >= c_.sustain)) {
      finding f = make_finding(question::efficiency, "one layer dominates step time", severity::warning, o.now.step,
                               name(), {{"share_of_layer_time", share}, {"ratio_to_median_layer", ratio},
                                        {"layer_s", lt[top].seconds}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(std::string(o.names[lt[top].id]), share);
      out.push_back(std::move(f));
    }
  }

 private:
  static double median_of(std::vector<double>& v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (v.size() % 2 == 1) return *mid;
    const double upper = *mid;
    const double lower = *std::max_element(v.begin(), mid);
    return 0.5 * (lower + upper);
  }

  config c_;
  std::size_t run_ = 0;
  std::uint32_t run_id_ = 0;
  edge fired_;
  std::vector<double> times_;  // scratch: grows to the number of layers once
};

}  // namespace mldiag::detectors
