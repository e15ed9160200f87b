// SPDX-License-Identifier: Apache-2.0
/// What a user declares about a run that the numbers cannot show: what the objective is, a
/// change made on purpose, which way a progress metric improves. Names shared by the monitor,
/// the reports and the tool's `--event`, `--objective` and `--metric` options.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only: the recorder, the reports and the tool read these names.
#include <array>
#include <cstdint>
#include <limits>  // no_lower_bound
#include <optional>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// What the training loss is. `minimized`: a loss minimized toward a floor, whose fall is the
/// run's progress (the default). `not_progress`: a loss that does not measure progress by
/// design — an adversarial objective hovering at its equilibrium, a policy-gradient surrogate
/// near 0 while the return climbs, any surrogate. The detectors that judge progress from the
/// loss then stand aside, and the convergence verdicts read the progress metrics the run
/// records (`monitor::observe_metric`).
enum class objective : std::uint8_t { minimized, not_progress };

/// `task::loss_floor` for a loss with no lower bound (learned uncertainty weights, a Gaussian
/// negative log-likelihood, a Wasserstein critic's estimate).
///
/// **Example**: `mldiag::monitor mon({.task = {.loss_floor = mldiag::no_lower_bound}});`
inline constexpr double no_lower_bound = -std::numeric_limits<double>::infinity();

[[nodiscard]] constexpr std::string_view name(objective o) noexcept {
  return o == objective::not_progress ? "not_progress" : "minimized";
}
[[nodiscard]] constexpr std::optional<objective> objective_named(std::string_view s) noexcept {
  if (s == "minimized") return objective::minimized;
  if (s == "not_progress") return objective::not_progress;
  return std::nullopt;
}

/// A change made on purpose at a step: the detectors whose baselines assume a stationary run
/// start them again from that step (detector_info::traits::restarts_on_change).
enum class change : std::uint8_t {
  data,         ///< a curriculum stage, a new data mixture, a new task
  fine_tuning,  ///< fine-tuning starts (new head, new data, new learning rate)
  unfreezing,   ///< frozen layers start training
  optimizer,    ///< the optimizer or its schedule changes (Adam to L-BFGS, a restart)
};

inline constexpr std::array<change, 4> all_changes{change::data, change::fine_tuning, change::unfreezing, change::optimizer};

/// The name of a change in JSON Lines (`change/<name>`) and in `mldiag scan --event STEP:NAME`.
[[nodiscard]] constexpr std::string_view name(change c) noexcept {
  switch (c) {
    case change::data: return "data";
    case change::fine_tuning: return "fine_tuning";
    case change::unfreezing: return "unfreezing";
    case change::optimizer: return "optimizer";
  }
  return "?";
}
[[nodiscard]] constexpr std::optional<change> change_named(std::string_view s) noexcept {
  for (const change c : all_changes)
    if (name(c) == s) return c;
  return std::nullopt;
}

}  // namespace mldiag
