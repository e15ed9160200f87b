// SPDX-License-Identifier: Apache-2.0
/// The detector catalogue: every detector by name with named parameters, and the default set.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/q1.hpp"
#include "mldiag/detectors/q2.hpp"
#include "mldiag/detectors/q3.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <variant>
#include <string>
#include <string_view>

namespace mldiag::detectors {


namespace detail {

// A named, settable field of a detector's config (double or count).
template <class C>
struct field {
  std::string_view name;
  std::variant<double C::*, std::size_t C::*> at;
};

// D built from its default config with the named parameters applied; an unknown parameter is
// an error that lists D's parameters.
template <class D, std::size_t N>
any_detector configured(std::string_view detector_name, const parameters& p,
                        const std::array<field<typename D::config>, N>& fields) {
  typename D::config c;
  for (const auto& [key, value] : p) {
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.name == key; });
    if (it == fields.end()) {
      std::string list;
      for (const auto& f : fields) list += (list.empty() ? "" : ", ") + std::string(f.name);
      throw error("make_detector '" + std::string(detector_name) + "': unknown parameter '" + key +
                  "'; its parameters are: " + (list.empty() ? "none" : list));
    }
    std::visit([&](auto member) {
      using T = std::remove_reference_t<decltype(c.*member)>;
      if constexpr (std::is_same_v<T, std::size_t>) {
        if (!(value >= 0.0) || value != std::floor(value)) {
          throw error("make_detector '" + std::string(detector_name) + "': parameter '" + key + "' is a count; give a whole number >= 0");
        }
      }
      c.*member = static_cast<T>(value);
    }, it->at);
  }
  return any_detector(D(c));
}

}  // namespace detail

/// Every detector the catalogue has, in the default set's order.
inline constexpr std::string_view detector_names[] = {
    "non_finite", "exploding_gradients", "persistent_gradients", "loss_spike", "divergence", "lr_sanity", "configured_lr", "input_scale", "initial_loss",
    "chance_level", "constant_loss", "train_val_gap", "vanishing_gradients", "loss_not_decreasing", "plateau", "oscillation", "dead_activations",
    "saturation", "frozen_parameters", "update_ratio", "attention_collapse", "expert_imbalance",
    "residual_write_ratio", "embedding_growth", "parameter_drift", "probabilities_as_logits",
    "input_starvation", "layer_dominates", "low_mfu", "throughput_below_target", "communication_overhead",
    "memory_pressure", "memory_fragmentation", "memory_growth", "step_time_outliers", "straggler"};

/// The detectors configured by name, with named parameters (unknown names and parameters are
/// errors that list what exists). The parameters are the fields of each detector's config.
[[nodiscard]] inline any_detector make_detector(std::string_view n, const parameters& p = {}) {
  using detail::configured;
  using detail::field;
  if (n == "non_finite") {
    using C = non_finite::config;
    return configured<non_finite>(n, p, std::array{field<C>{"sustain", &C::sustain}});
  }
  if (n == "configured_lr") {
    using C = configured_lr::config;
    return configured<configured_lr>(n, p, std::array{field<C>{"peak", &C::peak}, field<C>{"max_factor", &C::max_factor}});
  }
  if (n == "constant_loss") {
    using C = constant_loss::config;
    return configured<constant_loss>(n, p, std::array{field<C>{"steps", &C::steps}, field<C>{"tolerance", &C::tolerance}});
  }
  if (n == "train_val_gap") {
    using C = train_val_gap::config;
    return configured<train_val_gap>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_ratio", &C::min_ratio},
                                                      field<C>{"min_gap", &C::min_gap}});
  }
  if (n == "persistent_gradients") {
    using C = persistent_gradients::config;
    return configured<persistent_gradients>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_cosine", &C::min_cosine},
                                                             field<C>{"min_increment_cosine", &C::min_increment_cosine},
                                                             field<C>{"sustain", &C::sustain},
                                                             field<C>{"min_loss_rises", &C::min_loss_rises}});
  }
  if (n == "exploding_gradients") {
    using C = exploding_gradients::config;
    return configured<exploding_gradients>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_history", &C::min_history},
                                                            field<C>{"warn_ratio", &C::warn_ratio}, field<C>{"critical_ratio", &C::critical_ratio},
                                                            field<C>{"loss_rise", &C::loss_rise},
                                                            field<C>{"rebase_improvement", &C::rebase_improvement},
                                                            field<C>{"growth_window", &C::growth_window},
                                                            field<C>{"sustain", &C::sustain},
                                                            field<C>{"min_jitter_z", &C::min_jitter_z},
                                                            field<C>{"loss_up_steps", &C::loss_up_steps},
                                                            field<C>{"growth_sustain", &C::growth_sustain},
                                                            field<C>{"decisive_factor", &C::decisive_factor},
                                                            field<C>{"decisive_rise", &C::decisive_rise}});
  }
  if (n == "loss_spike") {
    using C = loss_spike::config;
    return configured<loss_spike>(n, p, std::array{field<C>{"factor", &C::factor}, field<C>{"sustain", &C::sustain},
                                                   field<C>{"window", &C::window}, field<C>{"min_history", &C::min_history},
                                                   field<C>{"critical_factor", &C::critical_factor}, field<C>{"min_rise", &C::min_rise},
                                                   field<C>{"min_mads", &C::min_mads},
                                                   field<C>{"immediate_factor", &C::immediate_factor},
                                                   field<C>{"immediate_min_rise", &C::immediate_min_rise},
                                                   field<C>{"noisy_sustain", &C::noisy_sustain}});
  }
  if (n == "divergence") {
    using C = divergence::config;
    return configured<divergence>(n, p, std::array{field<C>{"halvings", &C::halvings}, field<C>{"window", &C::window},
                                                   field<C>{"rise_steps", &C::rise_steps}, field<C>{"rise_fraction", &C::rise_fraction},
                                                   field<C>{"elevated", &C::elevated}, field<C>{"min_step_rise", &C::min_step_rise},
                                                   field<C>{"baseline_window", &C::baseline_window},
                                                   field<C>{"min_rise", &C::min_rise}, field<C>{"min_mads", &C::min_mads},
                                                   field<C>{"max_last_share", &C::max_last_share}});
  }
  if (n == "lr_sanity") {
    using C = lr_sanity::config;
    return configured<lr_sanity>(n, p, std::array{field<C>{"zero_steps", &C::zero_steps}, field<C>{"max_lr", &C::max_lr},
                                                  field<C>{"max_jump", &C::max_jump}});
  }
  if (n == "input_scale") {
    using C = input_scale::config;
    return configured<input_scale>(n, p, std::array{field<C>{"max_rms", &C::max_rms}});
  }
  if (n == "initial_loss") {
    using C = initial_loss::config;
    return configured<initial_loss>(n, p, std::array{field<C>{"classes", &C::classes}, field<C>{"tolerance", &C::tolerance},
                                                     field<C>{"min_difference", &C::min_difference}});
  }
  if (n == "chance_level") {
    using C = chance_level::config;
    return configured<chance_level>(n, p, std::array{field<C>{"classes", &C::classes}, field<C>{"warmup", &C::warmup},
                                                     field<C>{"window", &C::window}, field<C>{"tolerance", &C::tolerance}});
  }
  if (n == "vanishing_gradients") {
    using C = vanishing_gradients::config;
    return configured<vanishing_gradients>(n, p, std::array{field<C>{"min_rms", &C::min_rms}, field<C>{"layer_ratio", &C::layer_ratio},
                                                            field<C>{"sustain", &C::sustain}});
  }
  if (n == "loss_not_decreasing") {
    using C = loss_not_decreasing::config;
    return configured<loss_not_decreasing>(n, p, std::array{field<C>{"warmup", &C::warmup}, field<C>{"window", &C::window},
                                                            field<C>{"min_improvement", &C::min_improvement},
                                                            field<C>{"t_critical", &C::t_critical}, field<C>{"start_window", &C::start_window}});
  }
  if (n == "plateau") {
    using C = plateau::config;
    return configured<plateau>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_improvement", &C::min_improvement},
                                                 field<C>{"stall_change", &C::stall_change}, field<C>{"t_critical", &C::t_critical}});
  }
  if (n == "oscillation") {
    using C = oscillation::config;
    return configured<oscillation>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_sign_changes", &C::min_sign_changes},
                                                    field<C>{"min_spread", &C::min_spread}});
  }
  if (n == "dead_activations") {
    using C = dead_activations::config;
    return configured<dead_activations>(n, p, std::array{field<C>{"max_zero_fraction", &C::max_zero_fraction}});
  }
  if (n == "saturation") {
    using C = saturation::config;
    return configured<saturation>(n, p, std::array{field<C>{"min_saturated", &C::min_saturated}});
  }
  if (n == "frozen_parameters") {
    using C = frozen_parameters::config;
    return configured<frozen_parameters>(n, p, std::array{field<C>{"steps", &C::steps}, field<C>{"min_gradient", &C::min_gradient}});
  }
  if (n == "update_ratio") {
    using C = update_ratio::config;
    return configured<update_ratio>(n, p, std::array{field<C>{"min_ratio", &C::min_ratio}, field<C>{"max_ratio", &C::max_ratio},
                                                     field<C>{"sustain", &C::sustain},
                                                     field<C>{"min_elements", &C::min_elements}});
  }
  if (n == "attention_collapse") {
    using C = attention_collapse::config;
    return configured<attention_collapse>(n, p, std::array{field<C>{"min_normalized_entropy", &C::min_normalized_entropy}});
  }
  if (n == "expert_imbalance") {
    using C = expert_imbalance::config;
    return configured<expert_imbalance>(n, p, std::array{field<C>{"min_normalized_entropy", &C::min_normalized_entropy},
                                                         field<C>{"max_over_mean", &C::max_over_mean},
                                                         field<C>{"sustain", &C::sustain},
                                                         field<C>{"min_load_per_expert", &C::min_load_per_expert},
                                                         field<C>{"warmup", &C::warmup},
                                                         field<C>{"dead_sustain", &C::dead_sustain}});
  }
  if (n == "residual_write_ratio") {
    using C = residual_write_ratio::config;
    return configured<residual_write_ratio>(n, p, std::array{field<C>{"max_ratio", &C::max_ratio}, field<C>{"sustain", &C::sustain},
                                                            field<C>{"skip_first", &C::skip_first}});
  }
  if (n == "embedding_growth") {
    using C = embedding_growth::config;
    return configured<embedding_growth>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_growth", &C::min_growth},
                                                         field<C>{"min_t", &C::min_t}});
  }
  if (n == "parameter_drift") {
    using C = parameter_drift::config;
    return configured<parameter_drift>(n, p, std::array{field<C>{"max_relative_drift", &C::max_relative_drift}});
  }
  if (n == "probabilities_as_logits") {
    using C = probabilities_as_logits::config;
    return configured<probabilities_as_logits>(n, p, std::array{field<C>{"sustain", &C::sustain}});
  }
  if (n == "input_starvation") {
    using C = input_starvation::config;
    return configured<input_starvation>(n, p, std::array{field<C>{"max_share", &C::max_share}, field<C>{"sustain", &C::sustain},
                                                         field<C>{"window", &C::window}});
  }
  if (n == "layer_dominates") {
    using C = layer_dominates::config;
    return configured<layer_dominates>(n, p, std::array{field<C>{"max_share", &C::max_share}, field<C>{"min_ratio", &C::min_ratio},
                                                        field<C>{"sustain", &C::sustain}});
  }
  if (n == "low_mfu") {
    using C = low_mfu::config;
    return configured<low_mfu>(n, p, std::array{field<C>{"low", &C::low}, field<C>{"moderate", &C::moderate},
                                                field<C>{"warmup", &C::warmup}, field<C>{"sustain", &C::sustain}});
  }
  if (n == "throughput_below_target") {
    using C = throughput_below_target::config;
    return configured<throughput_below_target>(n, p, std::array{field<C>{"min_fraction", &C::min_fraction},
                                                                field<C>{"busy_mfu", &C::busy_mfu},
                                                                field<C>{"warmup", &C::warmup}, field<C>{"sustain", &C::sustain}});
  }
  if (n == "communication_overhead") {
    using C = communication_overhead::config;
    return configured<communication_overhead>(n, p, std::array{field<C>{"max_share", &C::max_share},
                                                               field<C>{"min_bandwidth_fraction", &C::min_bandwidth_fraction},
                                                               field<C>{"min_share", &C::min_share},
                                                               field<C>{"warmup", &C::warmup}, field<C>{"sustain", &C::sustain}});
  }
  if (n == "memory_pressure") {
    using C = memory_pressure::config;
    return configured<memory_pressure>(n, p, std::array{field<C>{"max_fill", &C::max_fill}, field<C>{"sustain", &C::sustain}});
  }
  if (n == "memory_fragmentation") {
    using C = memory_fragmentation::config;
    return configured<memory_fragmentation>(n, p, std::array{field<C>{"max_fragmentation", &C::max_fragmentation},
                                                             field<C>{"near_capacity", &C::near_capacity},
                                                             field<C>{"min_block_fraction", &C::min_block_fraction},
                                                             field<C>{"sustain", &C::sustain}});
  }
  if (n == "memory_growth") {
    using C = memory_growth::config;
    return configured<memory_growth>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"segments", &C::segments},
                                                      field<C>{"min_rising", &C::min_rising},
                                                      field<C>{"min_growth_fraction", &C::min_growth_fraction},
                                                      field<C>{"min_growth_bytes", &C::min_growth_bytes},
                                                      field<C>{"warmup", &C::warmup}});
  }
  if (n == "step_time_outliers") {
    using C = step_time_outliers::config;
    return configured<step_time_outliers>(n, p, std::array{field<C>{"window", &C::window}, field<C>{"min_history", &C::min_history},
                                                           field<C>{"mads", &C::mads}, field<C>{"min_ratio", &C::min_ratio},
                                                           field<C>{"min_outliers", &C::min_outliers}});
  }
  if (n == "straggler") {
    using C = straggler::config;
    return configured<straggler>(n, p, std::array{field<C>{"min_ratio", &C::min_ratio}, field<C>{"sustain", &C::sustain}});
  }
  std::string list;
  for (auto name : detector_names) list += (list.empty() ? "" : ", ") + std::string(name);
  throw error("make_detector: no detector named '" + std::string(n) + "'; there are: " + list);
}

/// The default set: every detector with its defaults, in `detector_names` order
/// (initial_loss and chance_level stay silent until they are given the number of classes).
[[nodiscard]] inline dynamic_set default_set() {
  dynamic_set set;
  for (auto n : detector_names) set.add(make_detector(n));
  return set;
}

}  // namespace mldiag::detectors
