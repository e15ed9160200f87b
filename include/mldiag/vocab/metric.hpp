// SPDX-License-Identifier: Apache-2.0
/// `scalar`: the per-step numbers a training loop logs besides its tensors, and their metric names.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only: the recorder, the reports and the log readers name scalars here.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// A number a training step logs, by what it measures. A value recorded as NaN or Inf is
/// evidence (a loss that blew up); a value not recorded is absent.
enum class scalar : std::uint8_t {
  loss,           ///< the training loss of the step
  val_loss,       ///< a validation loss measured at the step
  learning_rate,  ///< the learning rate the optimizer used
  loss_scale,     ///< an fp16 loss scaler's scale
  grad_norm,      ///< the global gradient norm as the trainer computed it (clip_grad_norm_'s return)
};

/// Every scalar, in the order reports list them.
inline constexpr std::array<scalar, 5> all_scalars{scalar::loss, scalar::val_loss, scalar::learning_rate, scalar::loss_scale,
                                                   scalar::grad_norm};

/// The metric name of a scalar in JSON Lines and the tool's log readers (docs/formats.md).
[[nodiscard]] constexpr std::string_view metric_name(scalar s) noexcept {
  switch (s) {
    case scalar::loss: return "loss";
    case scalar::val_loss: return "val_loss";
    case scalar::learning_rate: return "lr";
    case scalar::loss_scale: return "loss_scale";
    case scalar::grad_norm: return "grad/global_norm";
  }
  return "?";
}

/// The scalar a metric name stands for, or nullopt.
[[nodiscard]] constexpr std::optional<scalar> scalar_named(std::string_view metric) noexcept {
  for (const scalar s : all_scalars)
    if (metric_name(s) == metric) return s;
  return std::nullopt;
}

}  // namespace mldiag
