// SPDX-License-Identifier: Apache-2.0
/// Text for the HTML report: escaping for HTML text and attributes, numbers for people.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// Appends text escaped for HTML text and attribute values (quotes included); control
// characters other than tab and newline become spaces, which HTML would reject or drop.
inline void escape_to(std::string& out, std::string_view text) {
  for (const char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {
        const auto u = static_cast<unsigned char>(ch);
        out += (u < 0x20 && ch != '\t' && ch != '\n') || u == 0x7f ? ' ' : ch;
      }
    }
  }
}

[[nodiscard]] inline std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  escape_to(out, text);
  return out;
}

// A number for people: NaN and infinities spelled out, 4 significant digits otherwise.
[[nodiscard]] inline std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  return fmt::format("{:.4g}", v);
}

}  // namespace mldiag::report::detail::html
