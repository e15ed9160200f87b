// SPDX-License-Identifier: Apache-2.0
/// The detector catalogue (so far): non-finite values, exploding gradients, divergence (Q1)
/// and loss spikes (Q2). docs/detectors.md gives each one's defaults and their sources.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::detectors {

/// Q1: NaN or Inf in the loss, or in a gradient, activation or parameter tensor. The
/// location is the first tensor, in recording (layer) order, that holds one; the others
/// follow by count. Critical. No parameters; stateless.
class non_finite {
 public:
  [[nodiscard]] std::string_view name() const { return "non_finite"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool bad_loss = s.has_loss && !std::isfinite(s.loss);
    std::uint64_t tensors = 0, nan = 0, inf = 0;
    for (role r : {role::gradient, role::activation, role::parameter}) {
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() == 0) continue;
        ++tensors;
        nan += t.stats.nan;
        inf += t.stats.pos_inf + t.stats.neg_inf;
      }
    }
    if (!bad_loss && tensors == 0 && !std::isinf(s.grad_norm)) return;
    finding f;
    f.question = question::convergence;
    f.symptom = bad_loss ? "non-finite loss" : "non-finite values in tensors";
    f.severity = severity::critical;
    f.first_step = f.last_step = s.step;
    f.detector = std::string(name());
    for (role r : {role::gradient, role::activation, role::parameter}) {
      const char* prefix = r == role::gradient ? "grad/" : r == role::activation ? "act/" : "param/";
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() > 0) {
          f.where.emplace_back(prefix + std::string(o.names[t.id]), static_cast<double>(t.stats.non_finite()));
        }
      }
    }
    // The first in layer order stays first; the rest by count.
    if (f.where.size() > 2) {
      std::stable_sort(f.where.begin() + 1, f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    }
    if (bad_loss) f.evidence.emplace_back("loss", s.loss);
    if (std::isinf(s.grad_norm)) f.evidence.emplace_back("grad_norm", s.grad_norm);
    f.evidence.emplace_back("tensors_with_non_finite", static_cast<double>(tensors));
    f.evidence.emplace_back("nan", static_cast<double>(nan));
    f.evidence.emplace_back("inf", static_cast<double>(inf));
    out.push_back(std::move(f));
  }
};

/// Q1: the global gradient norm jumps far above its robust running baseline (the median of
/// the last `window` norms that did not fire). Warning at `warn_ratio`, critical at
/// `critical_ratio`. Defaults: window 100, min_history 1, warn_ratio 10, critical_ratio 100 —
/// healthy llm.c GPT-2 jumps reach 7.6x and recover (../shared/data/real-runs/README.md);
/// BLOOM-176B's explosion goes 0.24 -> 15.9 (66x) -> 960 (4000x).
class exploding_gradients {
 public:
  struct config {
    std::size_t window = 100;
    std::size_t min_history = 1;
    double warn_ratio = 10.0;
    double critical_ratio = 100.0;
  };
  exploding_gradients() : exploding_gradients(config{}) {}
  explicit exploding_gradients(config c) : c_(c), baseline_(c.window) {
    if (c.warn_ratio <= 1.0 || c.critical_ratio < c.warn_ratio) {
      throw error("exploding_gradients: need 1 < warn_ratio <= critical_ratio");
    }
  }
  [[nodiscard]] std::string_view name() const { return "exploding_gradients"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const double norm = o.now.global_grad_norm();
    if (!std::isfinite(norm)) return;  // non_finite's business
    if (baseline_.size() < c_.min_history) {
      baseline_.push(norm);
      return;
    }
    const double median = baseline_.median();
    const double ratio = median > 0.0 ? norm / median : 0.0;
    if (ratio < c_.warn_ratio) {
      baseline_.push(norm);
      return;
    }
    finding f;
    f.question = question::convergence;
    f.symptom = "exploding gradients";
    f.severity = ratio >= c_.critical_ratio ? severity::critical : severity::warning;
    f.first_step = f.last_step = o.now.step;
    f.detector = std::string(name());
    f.evidence = {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio}};
    for (const auto& g : o.now.gradients) f.where.emplace_back("grad/" + std::string(o.names[g.id]), g.stats.l2_norm());
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (f.where.size() > 5) f.where.resize(5);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window baseline_;
};

/// Q2: the loss rises above `factor` times its robust running baseline (median of the last
/// `window` losses that did not fire) for `sustain` observations in a row. Defaults: factor
/// 1.5, sustain 2, window 50 — real LLM spikes are 1.8-3x the running mean and persist for
/// tens to hundreds of iterations, while healthy runs have single-batch outliers up to 1.86x
/// that recover on the next step (../shared/data/real-runs/README.md). Critical at
/// `critical_factor` (2.5). `method_rule()` is the method's table rule: loss > 10x the moving
/// average, on one observation.
class loss_spike {
 public:
  struct config {
    double factor = 1.5;
    std::size_t sustain = 2;
    std::size_t window = 50;
    std::size_t min_history = 2;
    double critical_factor = 2.5;
  };
  loss_spike() : loss_spike(config{}) {}
  explicit loss_spike(config c) : c_(c), baseline_(c.window) {
    if (c.factor <= 1.0 || c.sustain == 0) throw error("loss_spike: need factor > 1 and sustain >= 1");
  }
  static loss_spike method_rule() { return loss_spike(config{10.0, 1, 50, 2, 10.0}); }
  [[nodiscard]] std::string_view name() const { return "loss_spike"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (!s.has_loss || !std::isfinite(s.loss)) return;
    if (baseline_.size() < c_.min_history) {
      baseline_.push(s.loss);
      return;
    }
    const double median = baseline_.median();
    const double ratio = s.loss / median;
    if (!(median > 0.0) || ratio < c_.factor) {
      baseline_.push(s.loss);
      run_ = 0;
      return;
    }
    if (run_++ == 0) run_start_ = s.step;
    peak_ = run_ == 1 ? ratio : std::max(peak_, ratio);
    if (run_ < c_.sustain) return;
    finding f;
    f.question = question::early_anomaly;
    f.symptom = "loss spike";
    f.severity = peak_ >= c_.critical_factor ? severity::critical : severity::warning;
    f.first_step = run_start_;
    f.last_step = s.step;
    f.detector = std::string(name());
    f.evidence = {{"loss", s.loss}, {"baseline_median", median}, {"ratio_to_median", ratio},
                  {"peak_ratio", peak_}, {"observations_above", static_cast<double>(run_)}};
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window baseline_;
  std::size_t run_ = 0;
  std::int64_t run_start_ = -1;
  double peak_ = 0.0;
};

/// Q1: divergence signs other than a spike: a loss value that goes missing after losses were
/// logged (critical); a loss that rose by at least `min_step_rise` on each of the last
/// `rise_steps` observations, by `rise_fraction` in all, with each of them at least `elevated` above the median of the
/// losses before the climb (warning; BigScience 104B experiment 2 climbed 6.37 -> 10.24 at the
/// end of warm-up, while healthy runs' outliers recover on the next step); and an fp16 loss scale that halves `halvings` times within the
/// last `window` observations (warning; 104B embed-norm experiment 7 halved 1048576 -> 32768
/// over six iterations before its loss went NaN).
class divergence {
 public:
  struct config {
    std::size_t halvings = 3;
    std::size_t window = 10;
    std::size_t rise_steps = 3;
    double rise_fraction = 0.3;
    double elevated = 0.1;
    double min_step_rise = 0.02;
    std::size_t baseline_window = 50;
  };
  divergence() : divergence(config{}) {}
  explicit divergence(config c)
      : c_(c), scales_(c.window + 1), losses_(c.rise_steps + 1), baseline_(c.baseline_window) {}
  [[nodiscard]] std::string_view name() const { return "divergence"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.has_loss) seen_loss_ = true;
    if (!s.has_loss && seen_loss_) {
      out.push_back(make(o, "missing loss value", severity::critical, {{"steps_with_loss_before", 1.0}}));
      return;
    }
    if (s.has_loss && std::isfinite(s.loss)) {
      if (losses_.full()) baseline_.push(losses_[0]);  // what leaves the recent run joins the baseline
      losses_.push(s.loss);
      if (losses_.full() && !baseline_.empty()) {
        const double base = baseline_.median();
        bool climbing = true;
        for (std::size_t i = 1; climbing && i < losses_.size(); ++i) {
          climbing = losses_[i] >= (1.0 + c_.min_step_rise) * losses_[i - 1] &&
                     losses_[i] >= (1.0 + c_.elevated) * base;
        }
        const double rise = losses_.back() / losses_[0] - 1.0;
        if (climbing && rise >= c_.rise_fraction) {
          out.push_back(make(o, "sustained loss increase", severity::warning,
                             {{"rise_fraction", rise}, {"baseline_median", base}, {"loss", s.loss}}));
        }
      }
    }
    if (!s.has_loss_scale || !std::isfinite(s.loss_scale)) return;
    scales_.push(s.loss_scale);
    std::size_t halved = 0;
    for (std::size_t i = 1; i < scales_.size(); ++i) halved += scales_[i] < scales_[i - 1] ? 1u : 0u;
    if (halved >= c_.halvings) {
      out.push_back(make(o, "loss scale halving step after step", severity::warning,
                         {{"halvings_in_window", static_cast<double>(halved)}, {"loss_scale", s.loss_scale},
                          {"loss_scale_window_start", scales_[0]}}));
    }
  }

 private:
  finding make(const observation& o, std::string symptom, severity level,
               std::vector<std::pair<std::string, double>> evidence) const {
    finding f;
    f.question = question::convergence;
    f.symptom = std::move(symptom);
    f.severity = level;
    f.first_step = f.last_step = o.now.step;
    f.evidence = std::move(evidence);
    f.detector = std::string(name());
    return f;
  }

  config c_;
  signals::window scales_, losses_, baseline_;
  bool seen_loss_ = false;
};

/// The detectors configured by name, with named parameters (unknown names and parameters are
/// errors that list what exists).
[[nodiscard]] inline any_detector make_detector(std::string_view detector_name, const parameters& p = {}) {
  auto check_keys = [&](std::initializer_list<std::string_view> known) {
    for (const auto& [key, value] : p) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        throw error("make_detector '" + std::string(detector_name) + "': unknown parameter '" + key +
                    "'; its parameters are: " + (list.empty() ? "none" : list));
      }
    }
  };
  if (detector_name == "non_finite") {
    check_keys({});
    return any_detector(non_finite{});
  }
  if (detector_name == "exploding_gradients") {
    check_keys({"window", "min_history", "warn_ratio", "critical_ratio"});
    exploding_gradients::config c;
    c.window = static_cast<std::size_t>(param(p, "window", static_cast<double>(c.window)));
    c.min_history = static_cast<std::size_t>(param(p, "min_history", static_cast<double>(c.min_history)));
    c.warn_ratio = param(p, "warn_ratio", c.warn_ratio);
    c.critical_ratio = param(p, "critical_ratio", c.critical_ratio);
    return any_detector(exploding_gradients(c));
  }
  if (detector_name == "loss_spike") {
    check_keys({"factor", "sustain", "window", "min_history", "critical_factor"});
    loss_spike::config c;
    c.factor = param(p, "factor", c.factor);
    c.sustain = static_cast<std::size_t>(param(p, "sustain", static_cast<double>(c.sustain)));
    c.window = static_cast<std::size_t>(param(p, "window", static_cast<double>(c.window)));
    c.min_history = static_cast<std::size_t>(param(p, "min_history", static_cast<double>(c.min_history)));
    c.critical_factor = param(p, "critical_factor", c.critical_factor);
    return any_detector(loss_spike(c));
  }
  if (detector_name == "divergence") {
    check_keys({"halvings", "window", "rise_steps", "rise_fraction", "elevated", "min_step_rise", "baseline_window"});
    divergence::config c;
    c.rise_steps = static_cast<std::size_t>(param(p, "rise_steps", static_cast<double>(c.rise_steps)));
    c.rise_fraction = param(p, "rise_fraction", c.rise_fraction);
    c.elevated = param(p, "elevated", c.elevated);
    c.min_step_rise = param(p, "min_step_rise", c.min_step_rise);
    c.baseline_window = static_cast<std::size_t>(param(p, "baseline_window", static_cast<double>(c.baseline_window)));
    c.halvings = static_cast<std::size_t>(param(p, "halvings", static_cast<double>(c.halvings)));
    c.window = static_cast<std::size_t>(param(p, "window", static_cast<double>(c.window)));
    return any_detector(divergence(c));
  }
  throw error("make_detector: no detector named '" + std::string(detector_name) +
              "'; there are: non_finite, exploding_gradients, loss_spike, divergence");
}

/// The default set, in this order: non_finite, exploding_gradients, loss_spike, divergence.
[[nodiscard]] inline dynamic_set default_set() {
  dynamic_set set;
  for (const char* n : {"non_finite", "exploding_gradients", "loss_spike", "divergence"}) set.add(make_detector(n));
  return set;
}

}  // namespace mldiag::detectors
