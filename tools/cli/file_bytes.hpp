// SPDX-License-Identifier: Apache-2.0
/// Reading untrusted file bytes: errors naming the file, little-endian fields, checked sizes,
/// and what unknown content looks like.
#pragma once

#include "mldiag/core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace mldiag::cli {

namespace detail {

[[noreturn]] inline void fail_file(std::string_view file, std::string_view message) {
  throw error(std::string(file) + ": " + std::string(message));
}

inline std::uint64_t load_le(std::span<const std::byte> b, std::uint64_t at, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | static_cast<std::uint8_t>(b[static_cast<std::size_t>(at) + static_cast<std::size_t>(k)]);
  return v;
}

// a * b, or nullopt when it overflows 64 bits.
inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

// What the first bytes of a file look like, for messages ("looks like a zip archive").
inline std::string_view describe_content(std::span<const std::byte> b) noexcept {
  auto starts = [&](std::string_view magic) {
    if (b.size() < magic.size()) return false;
    for (std::size_t i = 0; i < magic.size(); ++i)
      if (static_cast<char>(b[i]) != magic[i]) return false;
    return true;
  };
  if (b.empty()) return "an empty file";
  if (starts("\x93NUMPY")) return "a .npy array";
  if (starts("PK\x03\x04") || starts("PK\x05\x06")) return "a zip archive (.npz, or a PyTorch .pt/.bin file)";
  if (starts("\x1f\x8b")) return "a gzip stream";
  if (starts("\x89HDF")) return "an HDF5 file (Keras .h5?)";
  if (starts("GGUF")) return "a GGUF file";
  if (b.size() >= 2 && static_cast<std::uint8_t>(b[0]) == 0x80 && static_cast<std::uint8_t>(b[1]) >= 2 &&
      static_cast<std::uint8_t>(b[1]) <= 5)
    return "a Python pickle (a legacy PyTorch checkpoint?)";
  if (b.size() >= 9 && static_cast<char>(b[8]) == '{') return "a safetensors file";
  const std::size_t look = std::min<std::size_t>(b.size(), 512);
  bool text = true;
  for (std::size_t i = 0; i < look && text; ++i) {
    const auto c = static_cast<std::uint8_t>(b[i]);
    text = c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c != 0x7f);
  }
  return text ? "text" : "binary data of an unknown format";
}

}  // namespace detail

}  // namespace mldiag::cli
