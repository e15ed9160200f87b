// SPDX-License-Identifier: Apache-2.0
/// The library's version; CMake reads it from here, so this is the one place it is written.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#define MLDIAG_VERSION_MAJOR 0
#define MLDIAG_VERSION_MINOR 1
#define MLDIAG_VERSION_PATCH 0

namespace mldiag::inline MLDIAG_ABI {

/// The version as `major * 10000 + minor * 100 + patch`, for `static_assert` and `if constexpr`.
inline constexpr int version =
    MLDIAG_VERSION_MAJOR * 10000 + MLDIAG_VERSION_MINOR * 100 + MLDIAG_VERSION_PATCH;

}  // namespace mldiag
