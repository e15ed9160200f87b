// SPDX-License-Identifier: Apache-2.0
/// The one exception type mldiag throws for bad input: its message starts with "mldiag:".
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <stdexcept>  // std::invalid_argument
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// Thrown when a caller passes something mldiag cannot work with (a null pointer with a
/// non-zero size, a view whose strides overrun, ...). `what()` starts with `mldiag:`, says
/// what was wrong and what to do instead.
///
/// **Example**
/// ```cpp
/// try { auto s = mldiag::compute_stats(std::span<const float>{}); }
/// catch (const mldiag::error& e) { std::puts(e.what()); }
/// ```
class error : public std::invalid_argument {
 public:
  explicit error(std::string_view message)
      : std::invalid_argument(std::string(prefix) + std::string(message)) {}

  static constexpr std::string_view prefix = "mldiag: ";
};

}  // namespace mldiag
