// SPDX-License-Identifier: Apache-2.0
/// The detector registry's entry points — a detector by name, the default set — without the
/// detectors themselves: what the monitor needs, cheap to include.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/compiled.hpp"
#include "mldiag/detectors/dynamic_set.hpp"

#include <span>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// The detectors configured by name, with named parameters (unknown names and parameters are
/// errors that list what exists). The parameters are the fields of each detector's config.
///
/// **Example**: `auto d = mldiag::detectors::make_detector("loss_spike", {{"factor", 4}});`
[[nodiscard]] MLDIAG_COMPILED_INLINE any_detector make_detector(std::string_view name, const parameters& p = {});

/// The default set: every detector with its defaults, in `default_detector_names()` order
/// (initial_loss and chance_level stay silent until they are given the number of classes).
[[nodiscard]] MLDIAG_COMPILED_INLINE dynamic_set default_set();

/// Every detector's name, in the default set's order (`detector_names` in catalogue.hpp, as a
/// span).
[[nodiscard]] MLDIAG_COMPILED_INLINE std::span<const std::string_view> default_detector_names() noexcept;

/// Whether detector `name` has the parameter `parameter` (a field of its config).
[[nodiscard]] MLDIAG_COMPILED_INLINE bool has_parameter(std::string_view name, std::string_view parameter) noexcept;

}  // namespace mldiag::detectors

// Header-only: the definitions (core/compiled.hpp).
#if MLDIAG_DEFINE_COMPILED
#include "mldiag/detectors/catalogue.hpp"
#endif
