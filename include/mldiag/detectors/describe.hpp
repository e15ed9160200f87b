// SPDX-License-Identifier: Apache-2.0
/// A detector list described as a Markdown table: each detector's `about` and its config's
/// fields with their defaults. docs/detectors.md's catalogue table is this text for
/// `all_detectors` (`mldiag detectors`), and a test fails when the two differ.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/catalogue.hpp"

#include <charconv>  // std::to_chars: the shortest text that reads back as the same double
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// One parameter of a detector's config: its name and its default, of the field's kind (a
/// number, a whole number for a count, a flag).
struct parameter_description {
  std::string_view name;
  parameter_value value = 0.0;
};

/// A detector as it describes itself: `about` and its config's parameters with their defaults.
struct detector_description {
  std::string_view name;
  mldiag::question question = mldiag::question::convergence;
  std::vector<std::string_view> symptoms;
  std::string_view summary;
  std::vector<parameter_description> parameters;
  /// How it stands to the user's declarations (detector_info::traits_t).
  detector_info::traits_t traits = {};
};

namespace detail {

// A table cell may not hold a '|'.
inline std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

template <class D>
detector_description describe_one() {
  const detector_info& a = D::about;
  detector_description d{a.name, a.question, {}, a.summary, {}, a.traits};
  for (const symptom s : a.symptoms)
    if (!s.empty()) d.symptoms.push_back(s.text);
  if constexpr (requires { D::config::fields(); }) {
    static const typename D::config defaults{};  // static: GCC 12 misreads a local through a member pointer as uninitialized
    for (const auto& f : D::config::fields()) {
      std::visit([&](auto member) { d.parameters.push_back({f.name, parameter_value(defaults.*member)}); }, f.at);
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
  switch (p.value.what()) {
    case parameter_value::kind::flag: return p.value.number() != 0.0 ? "true" : "false";
    case parameter_value::kind::whole: return std::to_string(*p.value.whole());
    case parameter_value::kind::number: break;
  }
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, p.value.number()).ptr;
  return std::string(buffer, end);
}

/// The detectors of `list` as a Markdown table (one row each, in the list's order): name,
/// question, the symptoms it can raise, what it finds, what earns its findings a warning
/// (`about.traits.consequence`), and its parameters with their defaults. For your own list: `describe_markdown(all_detectors::with<my_detector>{})`.
template <class... Ds>
[[nodiscard]] std::string describe_markdown(detector_list<Ds...> list) {
  std::string out =
      "| detector | question | symptoms it raises | what it finds | a warning takes | parameters (defaults) |\n"
      "|---|---|---|---|---|---|\n";
  for (const detector_description& d : describe(list)) {
    out += "| `" + std::string(d.name) + "` | " + std::string(name(d.question)) + " | ";
    for (std::size_t i = 0; i < d.symptoms.size(); ++i)
      out += (i ? " · " : "") + detail::cell(d.symptoms[i]);  // symptoms hold commas and semicolons themselves
    out += " | " + detail::cell(d.summary) + " | ";
    out += (d.traits.consequence.empty() ? std::string("—") : detail::cell(d.traits.consequence)) + " | ";
    for (std::size_t i = 0; i < d.parameters.size(); ++i)
      out += (i ? ", `" : "`") + std::string(d.parameters[i].name) + "` " + default_text(d.parameters[i]);
    if (d.parameters.empty()) out += "—";
    out += " |\n";
  }
  return out;
}

}  // namespace mldiag::detectors
