// SPDX-License-Identifier: Apache-2.0
/// The .npy format: its header (a Python dict literal, parsed by hand) and a file of one array.
#pragma once

#include "cli/file_bytes.hpp"
#include "cli/tensor_entry.hpp"
#include "cli/value_type.hpp"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::cli {

namespace detail {

struct npy_header {
  value_type type = value_type::f32;
  bool little_endian = true;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  std::uint64_t numel = 1;
  std::uint64_t nbytes = 0;
  std::uint64_t data_offset = 0;  // bytes of magic, version, length and dict
};

// Headers larger than this are refused: numpy itself refuses above 10000 bytes by default.
inline constexpr std::uint64_t max_npy_header = 1u << 20;

// Bytes needed before the header text can be read: 0 when `prefix` is too short to know.
inline std::uint64_t npy_header_size(std::span<const std::byte> prefix, std::string_view what) {
  if (prefix.size() < 10) return 0;
  if (describe_content(prefix) != std::string_view("a .npy array")) {
    fail_file(what, "not a .npy array (no \\x93NUMPY magic; it looks like " + std::string(describe_content(prefix)) +
                        "); pass a file written by numpy.save");
  }
  const auto major = static_cast<std::uint8_t>(prefix[6]);
  if (major < 1 || major > 3) {
    fail_file(what, ".npy format version " + std::to_string(major) + "." +
                        std::to_string(static_cast<std::uint8_t>(prefix[7])) +
                        " is not supported (1.0, 2.0 and 3.0 are); re-save with numpy.save");
  }
  if (major == 1) return 10 + load_le(prefix, 8, 2);
  if (prefix.size() < 12) return 0;
  const std::uint64_t len = load_le(prefix, 8, 4);
  if (len > max_npy_header) {
    fail_file(what, "broken .npy header: header length " + std::to_string(len) + " bytes exceeds the 1 MiB mldiag accepts");
  }
  return 12 + len;
}

class py_literal {
 public:
  py_literal(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  npy_header parse() {
    npy_header h;
    bool has_descr = false, has_order = false, has_shape = false;
    std::string descr;
    space();
    expect('{');
    for (;;) {
      space();
      if (peek() == '}') { ++i_; break; }
      const std::string key = string_literal();
      space();
      expect(':');
      space();
      if (key == "descr") {
        if (has_descr) fail("'descr' appears twice");
        has_descr = true;
        if (peek() == '[') {
          fail_file(what_, "structured dtype (a record array with named fields) is not supported; save each field as its own array");
        }
        descr = string_literal();
      } else if (key == "fortran_order") {
        if (has_order) fail("'fortran_order' appears twice");
        has_order = true;
        if (word("True")) h.fortran_order = true;
        else if (word("False")) h.fortran_order = false;
        else fail("'fortran_order' must be True or False");
      } else if (key == "shape") {
        if (has_shape) fail("'shape' appears twice");
        has_shape = true;
        expect('(');
        for (;;) {
          space();
          if (peek() == ')') { ++i_; break; }
          h.shape.push_back(integer());
          space();
          if (peek() == ',') { ++i_; continue; }
          if (peek() == ')') { ++i_; break; }
          fail("expected ',' or ')' in 'shape'");
        }
      } else {
        fail("unexpected key '" + key + "'");
      }
      space();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == '}') { ++i_; break; }
      fail("expected ',' or '}'");
    }
    space();
    if (i_ != s_.size()) fail("unexpected text after the dict");
    if (!has_descr || !has_order || !has_shape) fail("the dict needs the keys 'descr', 'fortran_order' and 'shape'");
    set_descr(h, descr);
    for (const auto d : h.shape) {
      const auto n = checked_mul(h.numel, d);
      if (!n) fail_file(what_, "broken .npy header: the element count of shape " + shape_text(h.shape) + " overflows 64 bits");
      h.numel = *n;
    }
    const auto nb = checked_mul(h.numel, size_of(h.type));
    if (!nb) fail_file(what_, "broken .npy header: the byte size of shape " + shape_text(h.shape) + " overflows 64 bits");
    h.nbytes = *nb;
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& m) const {
    fail_file(what_, "broken .npy header (" + m + " at character " + std::to_string(i_) +
                         "); the file is damaged or not written by numpy.save");
  }
  char peek() const noexcept { return i_ < s_.size() ? s_[i_] : '\0'; }
  void space() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(std::string_view w) noexcept {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a string");
    ++i_;
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == q) return out;
      if (c == '\\') {
        if (i_ >= s_.size()) fail("unterminated string");
        out += s_[i_++];
        continue;
      }
      out += c;
    }
  }
  std::uint64_t integer() {
    const std::size_t start = i_;
    std::uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(s_[i_] - '0');
      if (v > (static_cast<std::uint64_t>(INT64_MAX) - digit) / 10) fail("a dimension too large");
      v = v * 10 + digit;
      ++i_;
    }
    if (i_ == start) fail("expected a non-negative integer dimension");
    if (peek() == 'L') ++i_;  // Python 2 long literal
    return v;
  }
  void set_descr(npy_header& h, std::string_view d) const {
    const std::string shown = "'" + std::string(d) + "'";
    std::size_t k = 0;
    char order = '|';
    if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) order = d[k++];
    if (k >= d.size()) fail("empty dtype");
    const char kind = d[k++];
    const std::string_view digits = d.substr(k);
    std::size_t bytes = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9' || bytes > 1000) { bytes = 0; break; }
      bytes = bytes * 10 + static_cast<std::size_t>(c - '0');
    }
    auto unsupported = [&](std::string_view why) {
      fail_file(what_, "dtype " + shown + " (" + std::string(why) + ") is not supported; mldiag reads float16/32/64, "
                       "int8..int64, uint8..uint64 and bool arrays: convert with arr.astype(numpy.float32)");
    };
    if (kind == 'O') unsupported("object array: pickled Python objects");
    if (kind == 'V') unsupported("raw or structured void data; bfloat16/float8 from ml_dtypes are saved this way");
    if (kind == 'c') unsupported("complex");
    if (kind == 'U' || kind == 'S' || kind == 'a') unsupported("strings");
    if (kind == 'M' || kind == 'm') unsupported("datetime");
    std::optional<value_type> t;
    if (kind == 'f' && bytes == 2) t = value_type::f16;
    else if (kind == 'f' && bytes == 4) t = value_type::f32;
    else if (kind == 'f' && bytes == 8) t = value_type::f64;
    else if (kind == 'i' && bytes == 1) t = value_type::i8;
    else if (kind == 'i' && bytes == 2) t = value_type::i16;
    else if (kind == 'i' && bytes == 4) t = value_type::i32;
    else if (kind == 'i' && bytes == 8) t = value_type::i64;
    else if (kind == 'u' && bytes == 1) t = value_type::u8;
    else if (kind == 'u' && bytes == 2) t = value_type::u16;
    else if (kind == 'u' && bytes == 4) t = value_type::u32;
    else if (kind == 'u' && bytes == 8) t = value_type::u64;
    else if (kind == 'b' && bytes == 1) t = value_type::boolean;
    if (!t) unsupported("unknown kind or size");
    h.type = *t;
    // '=' is the writer's native order; numpy writes '<' or '>' explicitly, and the machines
    // that write checkpoints today are little-endian.
    h.little_endian = order != '>';
  }

  std::string_view s_;
  std::string_view what_;
  std::size_t i_ = 0;
};

// Parses a complete .npy header at the start of `b` (which may hold more: the data).
inline npy_header parse_npy_header(std::span<const std::byte> b, std::string_view what) {
  const std::uint64_t size = npy_header_size(b, what);
  if (size == 0 || size > b.size()) {
    fail_file(what, "truncated .npy header (" + std::to_string(b.size()) + " bytes, the header needs " +
                        (size == 0 ? std::string("at least 10") : std::to_string(size)) +
                        "); the file was cut short: copy or save it again");
  }
  const std::size_t text_at = static_cast<std::uint8_t>(b[6]) == 1 ? 10 : 12;
  const std::string_view text(reinterpret_cast<const char*>(b.data()) + text_at, static_cast<std::size_t>(size) - text_at);
  npy_header h = py_literal(text, what).parse();
  h.data_offset = size;
  return h;
}

// The entry of an array from its header (name and offset are the caller's).
inline tensor_entry entry_from_header(const npy_header& h) {
  tensor_entry t;
  t.type = h.type;
  t.shape = h.shape;
  t.numel = h.numel;
  t.nbytes = h.nbytes;
  t.little_endian = h.little_endian;
  t.fortran_order = h.fortran_order;
  return t;
}

// The one array of a .npy file, named after the file's stem.
inline checkpoint_index index_npy(std::span<const std::byte> bytes, const std::string& path) {
  checkpoint_index out{checkpoint_format::npy, {}, {}};
  const auto h = parse_npy_header(bytes, path);
  if (bytes.size() - h.data_offset != h.nbytes) {
    fail_file(path, "size mismatch: " + std::string(dtype_name(h.type)) + " " + shape_text(h.shape) + " needs " +
                        std::to_string(h.nbytes) + " data bytes but the file has " +
                        std::to_string(bytes.size() - h.data_offset) +
                        (bytes.size() - h.data_offset < h.nbytes ? " (truncated)" : " (trailing bytes)"));
  }
  tensor_entry t = entry_from_header(h);
  std::string stem = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (stem.ends_with(".npy")) stem.resize(stem.size() - 4);
  t.name = stem;
  t.offset = h.data_offset;
  out.tensors.push_back(std::move(t));
  return out;
}

}  // namespace detail

}  // namespace mldiag::cli
