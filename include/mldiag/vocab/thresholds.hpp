// SPDX-License-Identifier: Apache-2.0
/// The lines that more than one layer judges by: a detector at run time, the L0 configuration
/// check before the first step, and the phase-1 summary of a diagnosis draw them here once.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only: the protocol and the configuration check read these without a
// detector's body.
#include <algorithm>  // std::max
#include <cmath>      // std::log, std::fabs

namespace mldiag::inline MLDIAG_ABI::thresholds {

/// The largest learning rate that is not absurd: 5. Plain SGD at 1 with gradient clipping is
/// a classic recipe for recurrent language models and runs healthy at up to 5 (docs/accuracy.md).
/// lr_sanity's `max_lr` default, the configuration check's and the phase-1 check's line.
inline constexpr double max_learning_rate = 5.0;

/// How far a first cross-entropy loss may lie from ln(classes), the loss of a uniform guess:
/// `chance_tolerance` of ln C, and at least `chance_min_difference` nats (docs/detectors.md,
/// initial_loss). initial_loss's defaults and the phase-1 check's line.
inline constexpr double chance_tolerance = 0.25;
inline constexpr double chance_min_difference = 0.5;

/// Whether a first loss is what a uniform guess over `classes` gives, by those lines.
[[nodiscard]] inline bool near_chance(double loss, double classes, double tolerance = chance_tolerance,
                                      double min_difference = chance_min_difference) {
  const double expected = std::log(classes);
  return std::fabs(loss - expected) <= std::max(tolerance * expected, min_difference);
}

}  // namespace mldiag::thresholds
