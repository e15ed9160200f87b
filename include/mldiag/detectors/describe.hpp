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
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// One parameter of a detector's config: its name, its kind ("number", "count" or "flag") and
/// its default (a flag as 0 or 1).
struct parameter_description {
  std::string_view name;
  std::string_view kind;
  double value = 0.0;
};

/// A detector as it describes itself: `about` and its config's parameters with their defaults.
struct detector_description {
  std::string_view name;
  mldiag::question question = mldiag::question::convergence;
  std::vector<std::string_view> symptoms;
  std::string_view summary;
  std::vector<parameter_description> parameters;
};

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
detector_description describe_one() {
  const detector_info& a = D::about;
  detector_description d{a.name, a.question, {}, a.summary, {}};
  for (const symptom s : a.symptoms)
    if (!s.empty()) d.symptoms.push_back(s.text);
  if constexpr (requires { D::config::fields(); }) {
    static const typename D::config defaults{};  // static: GCC 12 misreads a local through a member pointer as uninitialized
    for (const auto& f : D::config::fields()) {
      std::visit(
          [&](auto member) {
            using T = std::remove_cvref_t<decltype(defaults.*member)>;
            parameter_description p{f.name, {}, 0.0};
            if constexpr (std::is_same_v<T, bool>) {
              p.kind = "flag";
              p.value = defaults.*member ? 1.0 : 0.0;
            } else if constexpr (std::is_same_v<T, double>) {
              p.kind = "number";
              p.value = defaults.*member;
            } else {
              p.kind = "count";
              p.value = static_cast<double>(defaults.*member);
            }
            d.parameters.push_back(p);
          },
          f.at);
    }
  }
  return d;
}

}  // namespace detail

/// The detectors of `list`, each as it describes itself (`about`) with its parameters'
/// defaults, in the list's order: what `describe_markdown` prints and `mldiag detectors --json`
/// writes.
template <class... Ds>
[[nodiscard]] std::vector<detector_description> describe(detector_list<Ds...>) {
  return {detail::describe_one<Ds>()...};
}

/// A parameter's default as text: `true`/`false`, a whole number, or the shortest decimal that
/// reads back as the same double.
[[nodiscard]] inline std::string default_text(const parameter_description& p) {
  if (p.kind == "flag") return p.value != 0.0 ? "true" : "false";
  if (p.kind == "count") return std::to_string(static_cast<unsigned long long>(p.value));
  return detail::format_default(p.value);
}

/// The detectors of `list` as a Markdown table (one row each, in the list's order): name,
/// question, the symptoms it can raise, what it finds, and its parameters with their
/// defaults. For your own list: `describe_markdown(all_detectors::with<my_detector>{})`.
template <class... Ds>
[[nodiscard]] std::string describe_markdown(detector_list<Ds...> list) {
  std::string out =
      "| detector | question | symptoms it raises | what it finds | parameters (defaults) |\n"
      "|---|---|---|---|---|\n";
  for (const detector_description& d : describe(list)) {
    out += "| `" + std::string(d.name) + "` | " + std::string(name(d.question)) + " | ";
    for (std::size_t i = 0; i < d.symptoms.size(); ++i)
      out += (i ? " · " : "") + detail::cell(d.symptoms[i]);  // symptoms hold commas and semicolons themselves
    out += " | " + detail::cell(d.summary) + " | ";
    for (std::size_t i = 0; i < d.parameters.size(); ++i)
      out += (i ? ", `" : "`") + std::string(d.parameters[i].name) + "` " + default_text(d.parameters[i]);
    if (d.parameters.empty()) out += "—";
    out += " |\n";
  }
  return out;
}

}  // namespace mldiag::detectors
