// SPDX-License-Identifier: Apache-2.0
/// Q1 `repeated_batch`: the same input batch every step.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

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

/// Q1: the same input batch every step — a data pipeline that hands out one batch (a loader
/// created anew inside the loop, the first batch of an iterator taken each step, an index that
/// never advances): every recorded input (`role::input`) has the statistics of the previous
/// step's — elements, zeros and non-finite count exactly, smallest and largest value and L2 norm
/// within `tolerance` (1e-5) of it relatively, the mean within `tolerance` of the data's scale
/// (the larger of |mean| and the standard deviation) — for
/// `sustain` (20) steps in a row. Two different batches of real data agree on all of them
/// essentially never (no healthy mini-batch run that records its inputs did for two steps in
/// a row: docs/accuracy.md#repeated_batch); the same batch does on every step. A warning;
/// info where `full_batch` (1) says that every step reads the whole training set (full-batch
/// gradient descent, L-BFGS: the monitor sets it from `task::full_batch`), which looks the
/// same and is meant. Not seen: token ids that are not recorded as an input, and one batch
/// augmented afresh each step (random crops, noise), whose inputs differ. Reports onsets;
/// `first_step` is the first step that repeated its predecessor.
class repeated_batch {
 public:
  struct config {
    std::size_t sustain = 20;
    // 1e-5: ten times the statistics' accuracy contract, which is what the same elements in
    // another order may differ by (1e-9 until issue 18: the host kernel sums fp32 and bf16 in
    // float lanes now, and a full batch shuffled anew each step moved its mean by 1.3e-6).
    // Two different batches differ far more: a mini-batch's mean moves by about sd / sqrt(n)
    // (1e-3 relative for 50,000 elements) and its zero count almost always.
    double tolerance = 1e-5;
    bool full_batch = false;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"full_batch", &config::full_batch}};
    }
  };
  repeated_batch() : repeated_batch(config{}) {}
  explicit repeated_batch(config c) : c_(c) {
    if (!(c.tolerance >= 0.0) || c.sustain == 0)
      throw error("repeated_batch: need tolerance >= 0 (relative) and sustain >= 1 (steps in a row)");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"repeated_batch", question::convergence, {symptoms::same_input_batch}, "the same input batch every step", {.restarts_on_change = true, .consequence = "the same batch for sustain steps; declared full-batch: expected (info)"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    // A step that recorded no input says nothing (inputs recorded every k steps compare with
    // the last step that recorded them).
    if (o.now.inputs.empty()) return;
    bool same = o.now.inputs.size() == last_.size();
    for (std::size_t i = 0; same && i < last_.size(); ++i)
      same = last_[i].first == o.now.inputs[i].id && alike(last_[i].second, o.now.inputs[i].stats);
    last_.resize(o.now.inputs.size());  // allocates only when the number of inputs grows
    for (std::size_t i = 0; i < last_.size(); ++i) last_[i] = {o.now.inputs[i].id, o.now.inputs[i].stats};
    if (!repeated_.observe(same, c_.sustain)) return;
    finding f = make_finding(question::convergence, symptoms::same_input_batch, severity::info, o.now.step, name(),
                             {{"steps_identical", static_cast<double>(repeated_.run())},
                              {"elements", static_cast<double>(o.now.inputs.front().stats.count)},
                              {"full_batch", c_.full_batch ? 1.0 : 0.0}});
    f.first_step = repeated_.start(o.now.step);
    for (const auto& t : o.now.inputs) f.where.emplace_back(location(role::input, o.names[t.id]), static_cast<double>(t.stats.count));
    out.push_back(escalate(std::move(f), {.expected = c_.full_batch, .held = repeated_.run(), .horizon = std::max<std::size_t>(c_.sustain, 1),
                                          .note = c_.full_batch ? "full-batch training reads the whole set every step" : ""}));
  }

 private:
  [[nodiscard]] bool near(double a, double b) const noexcept {
    return a == b || std::fabs(a - b) <= c_.tolerance * std::max(std::fabs(a), std::fabs(b));
  }
  [[nodiscard]] bool alike(const tensor_stats& a, const tensor_stats& b) const noexcept {
    // The mean on the data's scale: a mean near 0 has no relative accuracy of its own.
    const double scale = std::max({std::fabs(a.mean()), std::fabs(b.mean()), a.stddev(), b.stddev()});
    const bool means = a.mean() == b.mean() || std::fabs(a.mean() - b.mean()) <= c_.tolerance * scale;
    return a.count > 0 && a.count == b.count && a.zeros == b.zeros && a.non_finite() == b.non_finite() &&
           near(a.min, b.min) && near(a.max, b.max) && means && near(a.l2_norm(), b.l2_norm());
  }

  config c_;
  std::vector<std::pair<std::uint32_t, tensor_stats>> last_;
  onset repeated_;
};

}  // namespace mldiag::detectors
