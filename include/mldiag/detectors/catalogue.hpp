// SPDX-License-Identifier: Apache-2.0
/// The detector catalogue: every detector by name with named parameters, and the default set.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/dynamic_set.hpp"
#include "mldiag/detectors/registry.hpp"
#include "mldiag/detectors/convergence/chance_level.hpp"
#include "mldiag/detectors/convergence/configured_lr.hpp"
#include "mldiag/detectors/convergence/constant_loss.hpp"
#include "mldiag/detectors/convergence/dead_activations.hpp"
#include "mldiag/detectors/convergence/divergence.hpp"
#include "mldiag/detectors/convergence/exploding_gradients.hpp"
#include "mldiag/detectors/convergence/frozen_parameters.hpp"
#include "mldiag/detectors/convergence/initial_loss.hpp"
#include "mldiag/detectors/convergence/input_scale.hpp"
#include "mldiag/detectors/convergence/loss_not_decreasing.hpp"
#include "mldiag/detectors/convergence/metric_not_improving.hpp"
#include "mldiag/detectors/convergence/lr_sanity.hpp"
#include "mldiag/detectors/convergence/non_finite.hpp"
#include "mldiag/detectors/convergence/oscillation.hpp"
#include "mldiag/detectors/convergence/persistent_gradients.hpp"
#include "mldiag/detectors/convergence/plateau.hpp"
#include "mldiag/detectors/convergence/probabilities_as_logits.hpp"
#include "mldiag/detectors/convergence/repeated_batch.hpp"
#include "mldiag/detectors/convergence/saturation.hpp"
#include "mldiag/detectors/convergence/train_val_gap.hpp"
#include "mldiag/detectors/convergence/update_ratio.hpp"
#include "mldiag/detectors/convergence/vanishing_gradients.hpp"
#include "mldiag/detectors/early_anomaly/attention_collapse.hpp"
#include "mldiag/detectors/early_anomaly/embedding_growth.hpp"
#include "mldiag/detectors/early_anomaly/expert_imbalance.hpp"
#include "mldiag/detectors/early_anomaly/loss_spike.hpp"
#include "mldiag/detectors/early_anomaly/parameter_drift.hpp"
#include "mldiag/detectors/early_anomaly/residual_write_ratio.hpp"
#include "mldiag/detectors/efficiency/communication_overhead.hpp"
#include "mldiag/detectors/efficiency/input_starvation.hpp"
#include "mldiag/detectors/efficiency/layer_dominates.hpp"
#include "mldiag/detectors/efficiency/low_mfu.hpp"
#include "mldiag/detectors/efficiency/memory_fragmentation.hpp"
#include "mldiag/detectors/efficiency/memory_growth.hpp"
#include "mldiag/detectors/efficiency/memory_pressure.hpp"
#include "mldiag/detectors/efficiency/step_time_outliers.hpp"
#include "mldiag/detectors/efficiency/straggler.hpp"
#include "mldiag/detectors/efficiency/throughput_below_target.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <type_traits>
#include <variant>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// A list of detectors: a catalogue. `all_detectors` is the library's; a project's own is one
/// line, `using mine = all_detectors::with<my_detector>;`, and `make_detector(mine{}, ...)`,
/// `default_set(mine{})`, `detector_names_of(mine{})` read it as the library's functions read
/// `all_detectors`.
template <class... Ds>
struct detector_list {
  static constexpr std::size_t size = sizeof...(Ds);
  /// This list and `More...` after it.
  template <class... More>
  using with = detector_list<Ds..., More...>;
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
                                    metric_not_improving,
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

// D built from its default config with the named parameters applied; an unknown parameter, or
// a value of another kind than its field's, is an error that says what the field takes.
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
    const auto refuse = [&](const char* takes) {
      throw error("make_detector '" + std::string(detector_name) + "': parameter '" + key + "' is " + takes);
    };
    std::visit([&](auto member) {
      using T = std::remove_reference_t<decltype(c.*member)>;
      if constexpr (std::is_same_v<T, bool>) {
        const auto w = value.whole();
        if (value.what() == parameter_value::kind::number || !w || (*w != 0 && *w != 1)) refuse("a flag; give true or false");
        c.*member = *w != 0;
      } else if constexpr (std::is_same_v<T, std::size_t>) {
        const auto w = value.whole();
        if (value.what() == parameter_value::kind::flag || !w || *w < 0) refuse("a count; give a whole number >= 0");
        c.*member = static_cast<std::size_t>(*w);
      } else {
        if (value.what() == parameter_value::kind::flag) refuse("a number; give one, not a flag");
        c.*member = value.number();
      }
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

/// The names of a list's detectors, in its order.
template <class... Ds>
[[nodiscard]] constexpr std::array<std::string_view, sizeof...(Ds)> detector_names_of(detector_list<Ds...> l) noexcept {
  return detail::names_of(l);
}
/// The descriptions of a list's detectors, in its order.
template <class... Ds>
[[nodiscard]] constexpr std::array<detector_info, sizeof...(Ds)> detector_infos_of(detector_list<Ds...> l) noexcept {
  return detail::infos_of(l);
}
/// Whether detector `name` of the list has the parameter `parameter`.
template <class... Ds>
[[nodiscard]] constexpr bool has_parameter(detector_list<Ds...> l, std::string_view name, std::string_view parameter) noexcept {
  return detail::has_parameter_of(l, name, parameter);
}
/// A detector of the list by name, with named parameters: unknown names and parameters are
/// errors that list what the list has (`make_detector(name, p)` is this for `all_detectors`).
template <class... Ds>
[[nodiscard]] any_detector make_detector(detector_list<Ds...> l, std::string_view n, const parameters& p = {}) {
  if (auto d = detail::make_named(l, n, p)) return std::move(*d);
  std::string list;
  for (auto name : detail::names_of(l)) list += (list.empty() ? "" : ", ") + std::string(name);
  throw error("make_detector: no detector named '" + std::string(n) + "'; there are: " + list);
}
/// Every detector of the list with its defaults, in the list's order.
template <class... Ds>
[[nodiscard]] dynamic_set default_set(detector_list<Ds...> l) {
  dynamic_set set;
  for (auto n : detail::names_of(l)) set.add(make_detector(l, n));
  return set;
}

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
