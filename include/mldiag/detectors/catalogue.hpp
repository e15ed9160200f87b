// SPDX-License-Identifier: Apache-2.0
/// The detector catalogue: every detector by name with named parameters, and the default set.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/registry.hpp"
#include "mldiag/detectors/convergence.hpp"
#include "mldiag/detectors/early_anomalies.hpp"
#include "mldiag/detectors/efficiency.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <type_traits>
#include <variant>
#include <string>
#include <string_view>

namespace mldiag::detectors {

template <class... Ds>
struct detector_list {
  static constexpr std::size_t size = sizeof...(Ds);
};

/// Every detector of the catalogue, in the default set's order: the one list that
/// `detector_names`, `make_detector` and `default_set` come from. Each detector describes
/// itself (`D::about`: name, question, symptoms; `D::config::fields()`: its parameters).
using all_detectors = detector_list<non_finite,
                                    exploding_gradients,
                                    persistent_gradients,
                                    loss_spike,
                                    divergence,
                                    lr_sanity,
                                    configured_lr,
                                    input_scale,
                                    initial_loss,
                                    chance_level,
                                    constant_loss,
                                    train_val_gap,
                                    repeated_batch,
                                    vanishing_gradients,
                                    loss_not_decreasing,
                                    plateau,
                                    oscillation,
                                    dead_activations,
                                    saturation,
                                    frozen_parameters,
                                    update_ratio,
                                    attention_collapse,
                                    expert_imbalance,
                                    residual_write_ratio,
                                    embedding_growth,
                                    parameter_drift,
                                    probabilities_as_logits,
                                    input_starvation,
                                    layer_dominates,
                                    low_mfu,
                                    throughput_below_target,
                                    communication_overhead,
                                    memory_pressure,
                                    memory_fragmentation,
                                    memory_growth,
                                    step_time_outliers,
                                    straggler>;

namespace detail {

// D built from its default config with the named parameters applied; an unknown parameter is
// an error that lists D's parameters.
template <class D>
any_detector configured(const parameters& p) {
  typename D::config c;
  constexpr auto fields = D::config::fields();
  const std::string_view detector_name = D::about.name;
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

template <class... Ds>
constexpr auto names_of(detector_list<Ds...>) {
  return std::array<std::string_view, sizeof...(Ds)>{Ds::about.name...};
}
template <class... Ds>
constexpr auto infos_of(detector_list<Ds...>) {
  return std::array<detector_info, sizeof...(Ds)>{Ds::about...};
}

template <class... Ds>
std::optional<any_detector> make_named(detector_list<Ds...>, std::string_view n, const parameters& p) {
  std::optional<any_detector> out;
  ((!out && Ds::about.name == n ? (void)out.emplace(configured<Ds>(p)) : void()), ...);
  return out;
}

}  // namespace detail

/// Every detector's name, in the default set's order.
inline constexpr auto detector_names = detail::names_of(all_detectors{});
/// Every detector's description (name, question, symptoms), in the same order.
inline constexpr auto detector_infos = detail::infos_of(all_detectors{});

namespace detail {
constexpr bool names_unique() {
  for (std::size_t i = 0; i < detector_names.size(); ++i)
    for (std::size_t j = i + 1; j < detector_names.size(); ++j)
      if (detector_names[i] == detector_names[j]) return false;
  return true;
}
}  // namespace detail
static_assert(detail::names_unique(), "mldiag: two detectors of the catalogue have the same name");

namespace detail {
template <class... Ds>
constexpr bool has_parameter_of(detector_list<Ds...>, std::string_view n, std::string_view parameter) noexcept {
  bool found = false;
  const auto check = [&](std::string_view name, const auto& fields) {
    if (name != n) return;
    for (const auto& f : fields) found = found || f.name == parameter;
  };
  (check(Ds::about.name, Ds::config::fields()), ...);
  return found;
}
}  // namespace detail

// The registry's definitions (declared in registry.hpp): inline, or compiled once.
#if MLDIAG_DEFINE_COMPILED
MLDIAG_COMPILED_INLINE any_detector make_detector(std::string_view n, const parameters& p) {
  if (auto d = detail::make_named(all_detectors{}, n, p)) return std::move(*d);
  std::string list;
  for (auto name : detector_names) list += (list.empty() ? "" : ", ") + std::string(name);
  throw error("make_detector: no detector named '" + std::string(n) + "'; there are: " + list);
}

MLDIAG_COMPILED_INLINE dynamic_set default_set() {
  dynamic_set set;
  for (auto n : detector_names) set.add(make_detector(n));
  return set;
}

MLDIAG_COMPILED_INLINE std::span<const std::string_view> default_detector_names() noexcept { return detector_names; }

MLDIAG_COMPILED_INLINE bool has_parameter(std::string_view name, std::string_view parameter) noexcept {
  return detail::has_parameter_of(all_detectors{}, name, parameter);
}
#endif

}  // namespace mldiag::detectors
