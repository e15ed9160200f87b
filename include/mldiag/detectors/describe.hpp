// SPDX-License-Identifier: Apache-2.0
/// A detector list described as a Markdown table: each detector's `about` and its config's
/// fields with their defaults. docs/detectors.md's catalogue table is this text for
/// `all_detectors` (`mldiag detectors --markdown`), and a test fails when the two differ.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/catalogue.hpp"

#include <cstdio>
#include <cstdlib>  // std::strtod
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace mldiag::inline MLDIAG_ABI::detectors {

namespace detail {

// Shortest text that reads back as the same double (%.17g would print 0.1 as 0.10000000000000001).
inline std::string format_default(double v) {
  char buffer[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  return buffer;
}

// A table cell may not hold a '|'.
inline std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

template <class D>
void describe_row(std::string& out) {
  const detector_info& a = D::about;
  out += "| `" + std::string(a.name) + "` | " + std::string(name(a.question)) + " | ";
  bool first = true;
  for (const symptom s : a.symptoms) {
    if (s.empty()) continue;
    out += (first ? "" : " · ") + cell(s.text);  // symptoms hold commas and semicolons themselves
    first = false;
  }
  out += " | " + cell(a.summary) + " | ";
  if constexpr (requires { D::config::fields(); }) {
    static const typename D::config defaults{};  // static: GCC 12 misreads a local through a member pointer as uninitialized
    first = true;
    for (const auto& f : D::config::fields()) {
      out += (first ? "`" : ", `") + std::string(f.name) + "` ";
      first = false;
      std::visit(
          [&](auto member) {
            using T = std::remove_cvref_t<decltype(defaults.*member)>;
            if constexpr (std::is_same_v<T, bool>) out += defaults.*member ? "true" : "false";
            else if constexpr (std::is_same_v<T, double>) out += format_default(defaults.*member);
            else out += std::to_string(defaults.*member);
          },
          f.at);
    }
    if (first) out += "—";
  } else {
    out += "—";
  }
  out += " |\n";
}

}  // namespace detail

/// The detectors of `list` as a Markdown table (one row each, in the list's order): name,
/// question, the symptoms it can raise, what it finds, and its parameters with their
/// defaults. For your own list: `describe_markdown(all_detectors::with<my_detector>{})`.
template <class... Ds>
[[nodiscard]] std::string describe_markdown(detector_list<Ds...>) {
  std::string out =
      "| detector | question | symptoms it raises | what it finds | parameters (defaults) |\n"
      "|---|---|---|---|---|\n";
  (detail::describe_row<Ds>(out), ...);
  return out;
}

}  // namespace mldiag::detectors
