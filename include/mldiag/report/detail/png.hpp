// SPDX-License-Identifier: Apache-2.0
/// An 8-bit indexed-colour PNG encoder (stored deflate blocks, no zlib): the heatmap's pixels.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail {

[[nodiscard]] inline std::uint32_t crc32(std::span<const unsigned char> bytes,
                                         std::uint32_t crc = 0) noexcept {
  static constexpr auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = (c & 1U) ? 0xedb88320U ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (const unsigned char b : bytes)
    crc = table[(crc ^ b) & 0xffU] ^ (crc >> 8);
  return ~crc;
}

[[nodiscard]] inline std::uint32_t adler32(std::span<const unsigned char> bytes) noexcept {
  // 5552: the most bytes whose sums cannot overflow 32 bits before the modulo (zlib's bound).
  std::uint32_t a = 1, b = 0;
  for (std::size_t i = 0; i < bytes.size();) {
    const std::size_t end = std::min(bytes.size(), i + 5552);
    for (; i < end; ++i) {
      a += bytes[i];
      b += a;
    }
    a %= 65521U;
    b %= 65521U;
  }
  return (b << 16) | a;
}

using rgb = std::array<unsigned char, 3>;

// An 8-bit indexed-colour PNG of `width` x `height` palette indices (row-major). The zlib
// stream uses stored (uncompressed) deflate blocks: no zlib dependency, and the pixels of a
// 800 x 500 heatmap cost 400 kB before base64, which the report's size budget allows.
[[nodiscard]] inline std::string png_indexed(std::size_t width, std::size_t height,
                                             std::span<const rgb> palette,
                                             std::span<const unsigned char> pixels) {
  if (width == 0 || height == 0 || pixels.size() != width * height || palette.empty() ||
      palette.size() > 256)
    throw error("html report: PNG needs width*height pixels and 1-256 palette entries");
  std::string png("\x89PNG\r\n\x1a\n", 8);
  const auto put32 = [](std::string& s, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      s += static_cast<char>((v >> static_cast<unsigned>(shift)) & 0xffU);
  };
  const auto chunk = [&](std::string_view type, std::string_view data) {
    put32(png, static_cast<std::uint32_t>(data.size()));
    const std::size_t start = png.size();
    png += type;
    png += data;
    const auto* p = reinterpret_cast<const unsigned char*>(png.data() + start);
    put32(png, crc32({p, png.size() - start}));
  };
  std::string ihdr;
  put32(ihdr, static_cast<std::uint32_t>(width));
  put32(ihdr, static_cast<std::uint32_t>(height));
  ihdr += std::string_view("\x08\x03\x00\x00\x00",
                           5);  // 8 bits, palette, deflate, filter 0, no interlace
  chunk("IHDR", ihdr);
  std::string plte;
  for (const auto& c : palette)
    for (const unsigned char v : c)
      plte += static_cast<char>(v);
  chunk("PLTE", plte);

  // Raw scanlines: filter byte 0 (none), then the row's indices.
  std::vector<unsigned char> raw;
  raw.reserve(height * (width + 1));
  for (std::size_t r = 0; r < height; ++r) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + static_cast<std::ptrdiff_t>(r * width),
               pixels.begin() + static_cast<std::ptrdiff_t>((r + 1) * width));
  }
  std::string z("\x78\x01", 2);             // zlib header: deflate, 32 kB window, no dictionary
  constexpr std::size_t max_block = 65535;  // a stored block's LEN is 16 bits
  for (std::size_t off = 0; off < raw.size() || off == 0; off += max_block) {
    const std::size_t len = std::min(max_block, raw.size() - off);
    z += static_cast<char>(off + len >= raw.size() ? 1 : 0);  // BFINAL, BTYPE 00
    const auto len16 = static_cast<std::uint16_t>(len);
    const auto nlen16 = static_cast<std::uint16_t>(~len16);
    z += static_cast<char>(len16 & 0xffU);
    z += static_cast<char>(len16 >> 8);
    z += static_cast<char>(nlen16 & 0xffU);
    z += static_cast<char>(nlen16 >> 8);
    z.append(reinterpret_cast<const char*>(raw.data() + off), len);
    if (raw.empty()) break;
  }
  put32(z, adler32(raw));
  chunk("IDAT", z);
  chunk("IEND", {});
  return png;
}

}  // namespace mldiag::report::detail
