// SPDX-License-Identifier: Apache-2.0
/// `role`: what a tensor is to the model, and the one way its metrics and locations are named.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only: the evidence, the detectors, the reports, the distributed merge and
// the tool all name tensors through this file.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// What a tensor is to the model; detectors read the roles they are about.
/// `update` is the optimizer's step for a parameter (new minus old value), recorded under the
/// parameter's name. `input` is a batch of what the model reads (features, pixels, spectra;
/// not token ids), for the first check of the method: are the inputs normalized?
enum class role : std::uint8_t { gradient, parameter, activation, residual_input, block_output, update, input };

/// Every role, in the order reports list them.
inline constexpr std::array<role, 7> all_roles{role::gradient,     role::parameter,    role::activation, role::residual_input,
                                               role::block_output, role::update,       role::input};

/// The role's prefix in metric names and finding locations: `grad/<tensor>/norm` in a JSON
/// Lines step, `grad/<tensor>` in a finding's `where`.
[[nodiscard]] constexpr std::string_view prefix(role r) noexcept {
  switch (r) {
    case role::gradient: return "grad";
    case role::parameter: return "param";
    case role::activation: return "act";
    case role::residual_input: return "residual_in";
    case role::block_output: return "block_out";
    case role::update: return "update";
    case role::input: return "input";
  }
  return "tensor";  // unreachable for a valid role; a name, not an index, so nothing reads out of bounds
}

/// The role in words ("residual input"), as a report prints it.
[[nodiscard]] constexpr std::string_view name(role r) noexcept {
  switch (r) {
    case role::gradient: return "gradient";
    case role::parameter: return "parameter";
    case role::activation: return "activation";
    case role::residual_input: return "residual input";
    case role::block_output: return "block output";
    case role::update: return "update";
    case role::input: return "input";
  }
  return "tensor";
}

/// A tensor as a finding locates it: `grad/blocks.1.qkv.weight`.
[[nodiscard]] inline std::string location(role r, std::string_view tensor) {
  std::string s(prefix(r));
  s += '/';
  s += tensor;
  return s;
}

/// A metric of a tensor as JSON Lines and the HTML report name it: `grad/blocks.1.qkv.weight/norm`
/// (docs/formats.md lists the statistics).
[[nodiscard]] inline std::string metric_name(role r, std::string_view tensor, std::string_view statistic) {
  std::string s = location(r, tensor);
  s += '/';
  s += statistic;
  return s;
}

/// The role and tensor of a location (`grad/x` -> gradient, `x`); nullopt when it names no role.
struct located {
  mldiag::role role;
  std::string_view tensor;
};
[[nodiscard]] constexpr std::optional<located> parse_location(std::string_view where) noexcept {
  for (const role r : all_roles) {
    const auto p = prefix(r);
    if (where.size() > p.size() && where.substr(0, p.size()) == p && where[p.size()] == '/' &&
        where.size() > p.size() + 1)  // "grad/" names no tensor: not a location
      return located{r, where.substr(p.size() + 1)};
  }
  return std::nullopt;
}

}  // namespace mldiag
