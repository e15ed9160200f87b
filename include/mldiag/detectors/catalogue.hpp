// SPDX-License-Identifier: Apache-2.0
/// The detector catalogue: every detector by name with named parameters, and the default set.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/q1.hpp"
#include "mldiag/detectors/q2.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

namespace mldiag::detectors {

/// Every detector the catalogue has, in the default set's order.
inline constexpr std::string_view detector_names[] = {
    "non_finite", "exploding_gradients", "loss_spike", "divergence", "lr_sanity", "initial_loss",
    "vanishing_gradients", "loss_not_decreasing", "plateau", "oscillation", "dead_activations",
    "saturation", "frozen_parameters", "update_ratio", "attention_collapse", "expert_imbalance",
    "residual_write_ratio", "embedding_growth", "parameter_drift"};

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
    check_keys({"factor", "sustain", "window", "min_history", "critical_factor", "min_rise"});
    loss_spike::config c;
    c.min_rise = param(p, "min_rise", c.min_rise);
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
    c.halvings = static_cast<std::size_t>(param(p, "halvings", static_cast<double>(c.halvings)));
    c.window = static_cast<std::size_t>(param(p, "window", static_cast<double>(c.window)));
    c.rise_steps = static_cast<std::size_t>(param(p, "rise_steps", static_cast<double>(c.rise_steps)));
    c.rise_fraction = param(p, "rise_fraction", c.rise_fraction);
    c.elevated = param(p, "elevated", c.elevated);
    c.min_step_rise = param(p, "min_step_rise", c.min_step_rise);
    c.baseline_window = static_cast<std::size_t>(param(p, "baseline_window", static_cast<double>(c.baseline_window)));
    return any_detector(divergence(c));
  }
  auto size = [&](std::string_view key, std::size_t fallback) {
    return static_cast<std::size_t>(param(p, key, static_cast<double>(fallback)));
  };
  if (detector_name == "lr_sanity") {
    check_keys({"zero_steps", "max_lr"});
    lr_sanity::config c;
    c.zero_steps = size("zero_steps", c.zero_steps);
    c.max_lr = param(p, "max_lr", c.max_lr);
    return any_detector(lr_sanity(c));
  }
  if (detector_name == "initial_loss") {
    check_keys({"classes", "tolerance"});
    initial_loss::config c;
    c.classes = param(p, "classes", c.classes);
    c.tolerance = param(p, "tolerance", c.tolerance);
    return any_detector(initial_loss(c));
  }
  if (detector_name == "vanishing_gradients") {
    check_keys({"min_rms", "layer_ratio", "sustain"});
    vanishing_gradients::config c;
    c.min_rms = param(p, "min_rms", c.min_rms);
    c.layer_ratio = param(p, "layer_ratio", c.layer_ratio);
    c.sustain = size("sustain", c.sustain);
    return any_detector(vanishing_gradients(c));
  }
  if (detector_name == "loss_not_decreasing") {
    check_keys({"warmup", "window", "min_improvement", "t_critical", "start_window"});
    loss_not_decreasing::config c;
    c.start_window = size("start_window", c.start_window);
    c.warmup = size("warmup", c.warmup);
    c.window = size("window", c.window);
    c.min_improvement = param(p, "min_improvement", c.min_improvement);
    c.t_critical = param(p, "t_critical", c.t_critical);
    return any_detector(loss_not_decreasing(c));
  }
  if (detector_name == "plateau") {
    check_keys({"window", "min_improvement", "stall_change", "t_critical"});
    plateau::config c;
    c.window = size("window", c.window);
    c.min_improvement = param(p, "min_improvement", c.min_improvement);
    c.stall_change = param(p, "stall_change", c.stall_change);
    c.t_critical = param(p, "t_critical", c.t_critical);
    return any_detector(plateau(c));
  }
  if (detector_name == "oscillation") {
    check_keys({"window", "min_sign_changes", "min_spread"});
    oscillation::config c;
    c.window = size("window", c.window);
    c.min_sign_changes = param(p, "min_sign_changes", c.min_sign_changes);
    c.min_spread = param(p, "min_spread", c.min_spread);
    return any_detector(oscillation(c));
  }
  if (detector_name == "dead_activations") {
    check_keys({"max_zero_fraction"});
    dead_activations::config c;
    c.max_zero_fraction = param(p, "max_zero_fraction", c.max_zero_fraction);
    return any_detector(dead_activations(c));
  }
  if (detector_name == "saturation") {
    check_keys({"min_saturated"});
    saturation::config c;
    c.min_saturated = param(p, "min_saturated", c.min_saturated);
    return any_detector(saturation(c));
  }
  if (detector_name == "frozen_parameters") {
    check_keys({"steps"});
    frozen_parameters::config c;
    c.steps = size("steps", c.steps);
    return any_detector(frozen_parameters(c));
  }
  if (detector_name == "update_ratio") {
    check_keys({"min_ratio", "max_ratio", "sustain"});
    update_ratio::config c;
    c.min_ratio = param(p, "min_ratio", c.min_ratio);
    c.max_ratio = param(p, "max_ratio", c.max_ratio);
    c.sustain = size("sustain", c.sustain);
    return any_detector(update_ratio(c));
  }
  if (detector_name == "attention_collapse") {
    check_keys({"min_normalized_entropy"});
    attention_collapse::config c;
    c.min_normalized_entropy = param(p, "min_normalized_entropy", c.min_normalized_entropy);
    return any_detector(attention_collapse(c));
  }
  if (detector_name == "expert_imbalance") {
    check_keys({"min_normalized_entropy", "max_over_mean"});
    expert_imbalance::config c;
    c.min_normalized_entropy = param(p, "min_normalized_entropy", c.min_normalized_entropy);
    c.max_over_mean = param(p, "max_over_mean", c.max_over_mean);
    return any_detector(expert_imbalance(c));
  }
  if (detector_name == "residual_write_ratio") {
    check_keys({"max_ratio", "sustain"});
    residual_write_ratio::config c;
    c.max_ratio = param(p, "max_ratio", c.max_ratio);
    c.sustain = size("sustain", c.sustain);
    return any_detector(residual_write_ratio(c));
  }
  if (detector_name == "embedding_growth") {
    check_keys({"window", "min_growth", "min_t"});
    embedding_growth::config c;
    c.window = size("window", c.window);
    c.min_growth = param(p, "min_growth", c.min_growth);
    c.min_t = param(p, "min_t", c.min_t);
    return any_detector(embedding_growth(c));
  }
  if (detector_name == "parameter_drift") {
    check_keys({"max_relative_drift"});
    parameter_drift::config c;
    c.max_relative_drift = param(p, "max_relative_drift", c.max_relative_drift);
    return any_detector(parameter_drift(c));
  }
  std::string list;
  for (auto n : detector_names) list += (list.empty() ? "" : ", ") + std::string(n);
  throw error("make_detector: no detector named '" + std::string(detector_name) + "'; there are: " + list);
}

/// The default set: every detector with its defaults, in `detector_names` order
/// (initial_loss stays silent until it is given the number of classes).
[[nodiscard]] inline dynamic_set default_set() {
  dynamic_set set;
  for (auto n : detector_names) set.add(make_detector(n));
  return set;
}

}  // namespace mldiag::detectors
