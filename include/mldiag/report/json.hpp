// SPDX-License-Identifier: Apache-2.0
/// A small JSON reader for what training tools write: RFC 8259 plus the bare `NaN`,
/// `Infinity` and `-Infinity` that Python's json module writes for non-finite floats.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only (the log readers' fuzzers include it). nlohmann/json rejects bare
// NaN, which Python's json.dump writes for a NaN loss, so the CLI reads with this instead.
#include "mldiag/core/error.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>  // std::strtod
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::json {

/// A parsed JSON value. Objects keep their members in file order (duplicates kept; `find`
/// returns the first).
class value {
 public:
  enum class kind : std::uint8_t { null, boolean, number, string, array, object };

  value() = default;
  [[nodiscard]] kind type() const noexcept { return kind_; }
  [[nodiscard]] bool is_null() const noexcept { return kind_ == kind::null; }
  [[nodiscard]] bool is_number() const noexcept { return kind_ == kind::number; }
  [[nodiscard]] bool is_string() const noexcept { return kind_ == kind::string; }
  [[nodiscard]] bool is_array() const noexcept { return kind_ == kind::array; }
  [[nodiscard]] bool is_object() const noexcept { return kind_ == kind::object; }
  [[nodiscard]] bool is_bool() const noexcept { return kind_ == kind::boolean; }

  [[nodiscard]] double number() const noexcept { return number_; }
  [[nodiscard]] bool boolean() const noexcept { return number_ != 0.0; }
  [[nodiscard]] const std::string& string() const noexcept { return string_; }
  [[nodiscard]] const std::vector<value>& items() const noexcept { return items_; }
  [[nodiscard]] const std::vector<std::pair<std::string, value>>& members() const noexcept { return members_; }

  /// The first member with this key, or nullptr (also when this is not an object).
  [[nodiscard]] const value* find(std::string_view key) const noexcept {
    for (const auto& [k, v] : members_)
      if (k == key) return &v;
    return nullptr;
  }

  static value make_number(double d) { value v; v.kind_ = kind::number; v.number_ = d; return v; }
  static value make_bool(bool b) { value v; v.kind_ = kind::boolean; v.number_ = b ? 1.0 : 0.0; return v; }
  static value make_string(std::string s) { value v; v.kind_ = kind::string; v.string_ = std::move(s); return v; }
  static value make_array(std::vector<value> items) { value v; v.kind_ = kind::array; v.items_ = std::move(items); return v; }
  static value make_object(std::vector<std::pair<std::string, value>> m) {
    value v; v.kind_ = kind::object; v.members_ = std::move(m); return v;
  }

 private:
  kind kind_ = kind::null;
  double number_ = 0.0;
  std::string string_;
  std::vector<value> items_;
  std::vector<std::pair<std::string, value>> members_;
};

namespace detail {

class parser {
 public:
  parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  value document() {
    value v = any(0);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  // Nesting deeper than this is refused rather than recursed into (a fuzzer's stack).
  static constexpr int max_depth = 256;

  [[noreturn]] void fail(std::string_view what) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') { ++line; col = 1; }
      else ++col;
    }
    throw error(std::string(what_) + ": invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(col) +
                ": " + std::string(what));
  }
  void skip_space() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool literal(std::string_view word) noexcept {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  value any(int depth) {
    if (depth > max_depth) fail("nested deeper than 256 levels");
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[i_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return value::make_string(string());
    if (literal("true")) return value::make_bool(true);
    if (literal("false")) return value::make_bool(false);
    if (literal("null")) return value{};
    if (literal("NaN")) return value::make_number(std::numeric_limits<double>::quiet_NaN());
    if (literal("Infinity")) return value::make_number(std::numeric_limits<double>::infinity());
    if (literal("-Infinity")) return value::make_number(-std::numeric_limits<double>::infinity());
    if (c == '-' || (c >= '0' && c <= '9')) return value::make_number(number());
    fail(std::string("unexpected character '") + c + "'");
  }

  value object(int depth) {
    ++i_;  // {
    std::vector<std::pair<std::string, value>> members;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') { ++i_; return value::make_object(std::move(members)); }
    for (;;) {
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
      std::string key = string();
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':' after a key");
      ++i_;
      members.emplace_back(std::move(key), any(depth + 1));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
      if (i_ < s_.size() && s_[i_] == '}') { ++i_; return value::make_object(std::move(members)); }
      fail("expected ',' or '}' in an object");
    }
  }

  value array(int depth) {
    ++i_;  // [
    std::vector<value> items;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') { ++i_; return value::make_array(std::move(items)); }
    for (;;) {
      items.push_back(any(depth + 1));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
      if (i_ < s_.size() && s_[i_] == ']') { ++i_; return value::make_array(std::move(items)); }
      fail("expected ',' or ']' in an array");
    }
  }

  double number() {
    // Validate the JSON grammar first, then convert the validated span (strtod alone would
    // accept hex, "inf" and leading '+').
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - d;
    };
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else if (digits() == 0) fail("a number needs digits");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("a number needs digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("a number needs digits in its exponent");
    }
    const std::string text(s_.substr(start, i_ - start));
    return std::strtod(text.c_str(), nullptr);  // out of range: +/-HUGE_VAL or 0, as JSON readers do
  }

  void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("a \\u escape needs four hex digits");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else fail("a \\u escape needs four hex digits");
    }
    return v;
  }

  std::string string() {
    ++i_;  // "
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') { out += c; continue; }
      if (i_ >= s_.size()) fail("unterminated escape");
      switch (const char e = s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(i_, 2) == "\\u") {
            i_ += 2;
            const std::uint32_t low = hex4();
            if (low >= 0xDC00 && low < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            else fail("a high surrogate not followed by a low one");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  std::string_view what_;
  std::size_t i_ = 0;
};

}  // namespace detail

/// Appends `s` to `out` as a JSON string: quoted, with `"`, `\\` and control characters
/// escaped (the writers of mldiag's JSON Lines and of the tool's `--json` documents share it).
inline void append_quoted(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += hex[(static_cast<unsigned char>(c) >> 4) & 0xF];
          out += hex[static_cast<unsigned char>(c) & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

/// The spelling of a non-finite number: `NaN`, `Infinity` or `-Infinity` ("" for a finite
/// one). Strict mldiag JSON Lines write it as a JSON string in place of the number; the legacy
/// style writes it bare (docs/formats.md). It is what JavaScript's `String(x)` gives, and
/// what Python's `float()`, JavaScript's `Number()` and C's `strtod` read back.
[[nodiscard]] inline std::string_view non_finite_name(double v) noexcept {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return {};
}

/// Reads a string that is exactly `NaN`, `Infinity` or `-Infinity` (case-sensitive, as
/// `non_finite_name` writes them) into `out`; false, `out` untouched, for any other string.
[[nodiscard]] inline bool non_finite_from_string(std::string_view s, double& out) noexcept {
  if (s == "NaN")
    out = std::numeric_limits<double>::quiet_NaN();
  else if (s == "Infinity")
    out = std::numeric_limits<double>::infinity();
  else if (s == "-Infinity")
    out = -std::numeric_limits<double>::infinity();
  else
    return false;
  return true;
}

/// Parses one JSON document. `what` names the input in the error (a file name and line, say):
/// on bad input this throws mldiag::error "mldiag: <what>: invalid JSON at line L, column C: ...".
///
/// **Example**
/// ```cpp
/// const auto v = mldiag::report::json::parse(R"({"loss": NaN, "step": 3})", "run.jsonl:1");
/// double loss = v.find("loss")->number();  // NaN
/// ```
[[nodiscard]] inline value parse(std::string_view text, std::string_view what) {
  return detail::parser(text, what).document();
}

}  // namespace mldiag::report::json
