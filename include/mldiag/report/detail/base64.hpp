// SPDX-License-Identifier: Apache-2.0
/// Base64 (RFC 4648, padded): binary data inlined as a `data:` URI.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::report::detail {

[[nodiscard]] inline std::string base64(std::string_view bytes) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6)
      out += alphabet[(v >> static_cast<unsigned>(s)) & 63U];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    const std::uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0U);
    out += alphabet[(v >> 18) & 63U];
    out += alphabet[(v >> 12) & 63U];
    out += rest == 2 ? alphabet[(v >> 6) & 63U] : '=';
    out += '=';
  }
  return out;
}

}  // namespace mldiag::report::detail
