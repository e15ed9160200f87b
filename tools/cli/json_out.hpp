// SPDX-License-Identifier: Apache-2.0
/// The `--json` documents of the mldiag tool: a small streaming writer of strict JSON.
#pragma once

#include "mldiag/report/json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::cli {

// Writes strict JSON (RFC 8259) into a string, commas and nesting handled: `--json` output
// is read by jq and every JSON parser, so a non-finite number is written as `null` (the
// documents carry counts of NaN and Inf where it matters; docs/cli.md).
class json_out {
 public:
  json_out& begin_object() { return open('{'); }
  json_out& end_object() { return close('}'); }
  json_out& begin_array() { return open('['); }
  json_out& end_array() { return close(']'); }

  json_out& key(std::string_view k) {
    separator();
    string(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  json_out& value(std::string_view s) {
    separator();
    string(s);
    return *this;
  }
  json_out& value(const char* s) { return value(std::string_view(s)); }
  json_out& value(bool b) {
    separator();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_out& value(double v) {
    separator();
    if (std::isfinite(v)) fmt::format_to(std::back_inserter(out_), "{}", v);
    else out_ += "null";
    return *this;
  }
  json_out& value(std::int64_t v) {
    separator();
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  json_out& value(std::uint64_t v) {
    separator();
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  json_out& value(int v) { return value(static_cast<std::int64_t>(v)); }
  json_out& value(unsigned v) { return value(static_cast<std::uint64_t>(v)); }
  template <class T>
  json_out& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  [[nodiscard]] const std::string& str() const noexcept { return out_; }

 private:
  json_out& open(char c) {
    separator();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  json_out& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  void separator() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  void string(std::string_view s) { report::json::append_quoted(out_, s); }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace mldiag::cli
