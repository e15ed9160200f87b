// SPDX-License-Identifier: Apache-2.0
/// Checkpoint readers (.safetensors, .npy, .npz) and the streaming statistics and diff behind
/// `mldiag stats` and `mldiag diff`.
#pragma once

// Standard library, POSIX, mldiag and (behind MLDIAG_CLI_HAS_ZLIB) zlib only: the fuzzer
// (fuzz/fuzz_checkpoint.cpp) builds this header with plain clang, without {fmt}.
#include "cli/mapped_file.hpp"
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/element_types.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/report/json.hpp"
#include "mldiag/stats/block_stats.hpp"  // detail::unit_elems: the units stats_plan uses
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/host_engine.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#if MLDIAG_CLI_HAS_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>  // std::endian, std::byteswap-free swaps
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <exception>  // std::exception_ptr: a worker's error, rethrown on the caller
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::cli {

// ---------------------------------------------------------------------------------------------
// Element types

/// The element types the readers accept. Names follow safetensors (`dtype_name`); numpy's
/// `descr` maps onto them: `f8`->F64, `f4`->F32, `f2`->F16, `i1`..`i8`->I8..I64,
/// `u1`..`u8`->U8..U64, `b1`->BOOL. BF16 and the FP8 formats exist in safetensors only.
enum class value_type : std::uint8_t { f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

namespace detail {
struct value_type_info {
  value_type type;
  std::string_view name;
  std::size_t size;
};
inline constexpr std::array<value_type_info, 15> value_types = {{
    {value_type::f64, "F64", 8},     {value_type::f32, "F32", 4},         {value_type::f16, "F16", 2},
    {value_type::bf16, "BF16", 2},   {value_type::f8_e4m3, "F8_E4M3", 1}, {value_type::f8_e5m2, "F8_E5M2", 1},
    {value_type::i8, "I8", 1},       {value_type::i16, "I16", 2},         {value_type::i32, "I32", 4},
    {value_type::i64, "I64", 8},     {value_type::u8, "U8", 1},           {value_type::u16, "U16", 2},
    {value_type::u32, "U32", 4},     {value_type::u64, "U64", 8},         {value_type::boolean, "BOOL", 1},
}};
inline constexpr std::string_view supported_dtypes =
    "F64, F32, F16, BF16, F8_E4M3 (alias F8_E4M3FN), F8_E5M2, I8, I16, I32, I64, U8, U16, U32, U64, BOOL";
}  // namespace detail

/// The safetensors spelling of a value type: "F32", "BF16", "F8_E4M3", "BOOL", ...
[[nodiscard]] constexpr std::string_view dtype_name(value_type t) noexcept {
  return detail::value_types[static_cast<std::size_t>(t)].name;
}
/// Bytes per element.
[[nodiscard]] constexpr std::size_t size_of(value_type t) noexcept {
  return detail::value_types[static_cast<std::size_t>(t)].size;
}
/// The mldiag dtype of a floating-point value type (the statistics kernels read these in
/// place); nullopt for integers and BOOL, which are converted to double first.
[[nodiscard]] constexpr std::optional<mldiag::dtype> float_dtype(value_type t) noexcept {
  switch (t) {
    case value_type::f64: return mldiag::dtype::f64;
    case value_type::f32: return mldiag::dtype::f32;
    case value_type::f16: return mldiag::dtype::f16;
    case value_type::bf16: return mldiag::dtype::bf16;
    case value_type::f8_e4m3: return mldiag::dtype::f8_e4m3;
    case value_type::f8_e5m2: return mldiag::dtype::f8_e5m2;
    default: return std::nullopt;
  }
}
/// The value type a safetensors dtype string names, or nullopt.
[[nodiscard]] constexpr std::optional<value_type> parse_dtype_name(std::string_view s) noexcept {
  if (s == "F8_E4M3FN") return value_type::f8_e4m3;  // PyTorch's name for the same format
  for (const auto& i : detail::value_types)
    if (i.name == s) return i.type;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

enum class checkpoint_format : std::uint8_t { safetensors, npy, npz };

[[nodiscard]] constexpr std::string_view format_name(checkpoint_format f) noexcept {
  switch (f) {
    case checkpoint_format::safetensors: return "safetensors";
    case checkpoint_format::npy: return "npy";
    case checkpoint_format::npz: return "npz";
  }
  return "unknown";
}

/// One tensor of a checkpoint: what it is and where its bytes are.
struct tensor_entry {
  enum class storage : std::uint8_t {
    in_place,  ///< `nbytes` bytes at file offset `offset`
    deflated,  ///< an .npz member compressed with deflate: `compressed_size` bytes at `offset`
  };

  std::string name;     ///< safetensors key; .npz member without ".npy"; .npy file stem
  value_type type = value_type::f32;
  std::vector<std::uint64_t> shape;  ///< empty for a 0-d scalar
  std::uint64_t numel = 1;           ///< product of `shape` (1 for a scalar)
  std::uint64_t nbytes = 0;          ///< numel * size_of(type)
  bool little_endian = true;         ///< .npy '>' descr: false (byte-swapped on reading)
  bool fortran_order = false;        ///< .npy column-major data (statistics ignore order)
  storage where = storage::in_place;
  std::uint64_t offset = 0;
  std::uint64_t compressed_size = 0;  ///< deflated only
  std::uint64_t header_bytes = 0;     ///< deflated only: .npy header before the data, inflated
  std::uint32_t crc32 = 0;            ///< deflated only: CRC-32 of the whole inflated member

  /// The safetensors spelling of the dtype ("F32", "BF16", ...).
  [[nodiscard]] std::string_view dtype() const noexcept { return dtype_name(type); }
};

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

inline std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline bool ends_with(std::string_view s, std::string_view tail) noexcept {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
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

// ---- .npy header: a Python dict literal, parsed by hand ---------------------------------------

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

// ---- zlib -------------------------------------------------------------------------------------

#if MLDIAG_CLI_HAS_ZLIB
// Raw deflate from a span in the map into caller buffers, in bounded pieces.
class inflater {
 public:
  inflater(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {
    if (inflateInit2(&z_, -MAX_WBITS) != Z_OK) fail_file(what_, "zlib could not start (out of memory?)");
  }
  inflater(const inflater&) = delete;
  inflater& operator=(const inflater&) = delete;
  ~inflater() { inflateEnd(&z_); }

  // Fills out[0, n) unless the stream ends first; returns the bytes written.
  std::size_t read(std::byte* out, std::size_t n) {
    std::size_t done = 0;
    while (done < n && !ended_) {
      if (z_.avail_in == 0 && used_ < in_.size()) {
        const std::size_t piece = std::min<std::size_t>(in_.size() - used_, 1u << 24);
        // zlib's next_in is not const-qualified (unless ZLIB_CONST); it never writes through it.
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in_.data() + used_));
        z_.avail_in = static_cast<uInt>(piece);
        used_ += piece;
      }
      const std::size_t want = std::min<std::size_t>(n - done, 1u << 30);
      z_.next_out = reinterpret_cast<Bytef*>(out + done);
      z_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      const std::size_t got = want - z_.avail_out;
      crc_ = static_cast<std::uint32_t>(::crc32(crc_, reinterpret_cast<const Bytef*>(out + done), static_cast<uInt>(got)));
      done += got;
      if (rc == Z_STREAM_END) { ended_ = true; break; }
      if (rc == Z_BUF_ERROR && z_.avail_in == 0 && used_ >= in_.size()) {
        fail_file(what_, "compressed data ends early (truncated archive); copy or save it again");
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail_file(what_, std::string("corrupt compressed data (zlib: ") + (z_.msg ? z_.msg : "error") + "); the archive is damaged");
      }
    }
    return done;
  }
  [[nodiscard]] bool ended() const noexcept { return ended_; }
  [[nodiscard]] std::uint32_t crc() const noexcept { return crc_; }
  // Compressed bytes handed to zlib so far (pages before them may be released).
  [[nodiscard]] std::size_t consumed() const noexcept { return used_ - z_.avail_in; }

 private:
  std::span<const std::byte> in_;
  std::string what_;
  z_stream z_{};
  std::size_t used_ = 0;
  bool ended_ = false;
  std::uint32_t crc_ = 0;
};
#endif

}  // namespace detail

/// A checkpoint file, mapped and indexed: its tensors with dtype, shape and where their bytes
/// are. Opening reads only the headers (and, for compressed .npz members, the first bytes of
/// each); `checkpoint_stats` and `diff_checkpoints` read the data.
///
/// The format is recognised by content, not by name; a file named `.safetensors`, `.npy` or
/// `.npz` whose content is something else is refused with a message saying what it looks
/// like. Every size, offset and shape is validated against the file before anything is read:
/// bad input throws `mldiag::error` naming the file and the problem.
///
/// **Example**
/// ```cpp
/// auto ckpt = mldiag::cli::checkpoint::open("model.safetensors");
/// for (const auto& t : ckpt.tensors()) std::printf("%s %s\n", t.name.c_str(), t.dtype().data());
/// ```
class checkpoint {
 public:
  /// Maps and indexes the file at `path`.
  [[nodiscard]] static checkpoint open(const std::string& path) {
    checkpoint c;
    c.map_ = std::make_unique<mapped_file>(path);
    c.map_->advise_sequential();
    c.path_ = path;
    c.bytes_ = c.map_->bytes();
    c.index();
    return c;
  }
  /// Indexes bytes already in memory (they must outlive the checkpoint); `name` stands for the
  /// file name in messages and its extension is checked like a file's (the fuzzer's entry).
  [[nodiscard]] static checkpoint from_memory(std::span<const std::byte> bytes, std::string name) {
    checkpoint c;
    c.path_ = std::move(name);
    c.bytes_ = bytes;
    c.index();
    return c;
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] checkpoint_format format() const noexcept { return format_; }
  /// Tensors in file order (safetensors: by data offset; npz: archive order).
  [[nodiscard]] std::span<const tensor_entry> tensors() const noexcept { return tensors_; }
  /// The tensor with this name, or nullptr.
  [[nodiscard]] const tensor_entry* find(const std::string& name) const noexcept {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
  }
  /// .npz members that are not .npy arrays (listed, not read).
  [[nodiscard]] const std::vector<std::string>& skipped_members() const noexcept { return skipped_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// Lets the pages of [offset, offset + length) go (mapped files only; a hint).
  void release(std::uint64_t offset, std::uint64_t length) const noexcept {
    if (map_) map_->release(offset, length);
  }
  /// Asks for the pages of [offset, offset + length) to be read ahead (mapped files only; a hint).
  void prefetch(std::uint64_t offset, std::uint64_t length, bool now = false) const noexcept {
    if (map_) map_->will_need(offset, length, now);
  }

 private:
  checkpoint() = default;

  void index() {
    const std::string_view looks = detail::describe_content(bytes_);
    const bool is_npy = looks == std::string_view("a .npy array");
    const bool is_zip = looks.substr(0, 13) == std::string_view("a zip archive");
    const bool is_st = looks == std::string_view("a safetensors file");
    auto refuse = [&](std::string_view expected, std::string_view advice) {
      detail::fail_file(path_, "expected " + std::string(expected) + " but the content looks like " + std::string(looks) +
                                   "; " + std::string(advice));
    };
    if (bytes_.empty()) {
      detail::fail_file(path_, "the file is empty (0 bytes); a checkpoint that was not written to the end? save it again");
    }
    if (detail::ends_with(path_, ".safetensors") && bytes_.size() < 9) {
      detail::fail_file(path_, "truncated: " + std::to_string(bytes_.size()) +
                                   " bytes, shorter than a safetensors header length and header");
    }
    if (detail::ends_with(path_, ".safetensors") && !is_st) {
      refuse("a safetensors file (8-byte header length, then a JSON header)", "check the file, or rename it after its content");
    }
    if (detail::ends_with(path_, ".npy") && !is_npy) refuse("a .npy array (written by numpy.save)", "check the file, or rename it after its content");
    if (detail::ends_with(path_, ".npz") && !is_zip) refuse("a .npz zip archive (written by numpy.savez)", "check the file, or rename it after its content");
    if (is_npy) parse_npy();
    else if (is_zip) parse_npz();
    else if (is_st) parse_safetensors();
    else {
      detail::fail_file(path_, "not a checkpoint mldiag reads: the content looks like " + std::string(looks) +
                                   "; mldiag reads .safetensors, .npy and .npz files");
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
  }

  // Names seen while parsing: a name twice is an error.
  void add_name(const std::string& name, std::string_view where) {
    if (!seen_.emplace(name, 0).second) detail::fail_file(path_, "tensor '" + name + "' appears twice in the " + std::string(where));
  }

  // ---- safetensors ----
  void parse_safetensors() {
    format_ = checkpoint_format::safetensors;
    const std::uint64_t size = bytes_.size();
    if (size < 8) detail::fail_file(path_, "truncated: shorter than the 8-byte safetensors header length");
    const std::uint64_t n = detail::load_le(bytes_, 0, 8);
    if (n > size - 8) {
      detail::fail_file(path_, "safetensors header length " + std::to_string(n) + " is beyond the end of the file (" +
                                   std::to_string(size) + " bytes): the file is truncated or not safetensors");
    }
    if (n > 100'000'000) {
      detail::fail_file(path_, "safetensors header of " + std::to_string(n) + " bytes exceeds the 100 MB limit safetensors itself sets");
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes_.data()) + 8, static_cast<std::size_t>(n));
    const auto header = report::json::parse(text, path_ + ": safetensors header");
    if (!header.is_object()) detail::fail_file(path_, "the safetensors header is JSON but not an object");
    const std::uint64_t data_begin = 8 + n;
    const std::uint64_t data_size = size - data_begin;
    for (const auto& [key, v] : header.members()) {
      if (key == "__metadata__") continue;
      const std::string who = "tensor '" + key + "'";
      add_name(key, "safetensors header");
      if (!v.is_object()) detail::fail_file(path_, who + ": expected an object with dtype, shape and data_offsets");
      const auto* dt = v.find("dtype");
      const auto* sh = v.find("shape");
      const auto* off = v.find("data_offsets");
      if (dt == nullptr || !dt->is_string()) detail::fail_file(path_, who + ": missing or non-string \"dtype\"");
      if (sh == nullptr || !sh->is_array()) detail::fail_file(path_, who + ": missing or non-array \"shape\"");
      if (off == nullptr || !off->is_array() || off->items().size() != 2) {
        detail::fail_file(path_, who + ": \"data_offsets\" must be an array [begin, end]");
      }
      tensor_entry t;
      t.name = key;
      const auto type = parse_dtype_name(dt->string());
      if (!type) {
        detail::fail_file(path_, who + " has dtype '" + dt->string() + "', which mldiag does not read; supported: " +
                                     std::string(detail::supported_dtypes));
      }
      t.type = *type;
      for (const auto& d : sh->items()) {
        const std::uint64_t e = whole_number(d, who + ": shape");
        const auto nn = detail::checked_mul(t.numel, e);
        if (!nn) detail::fail_file(path_, who + ": the element count of its shape overflows 64 bits");
        t.numel = *nn;
        t.shape.push_back(e);
      }
      const auto nb = detail::checked_mul(t.numel, size_of(t.type));
      if (!nb) detail::fail_file(path_, who + ": the byte size of its shape overflows 64 bits");
      t.nbytes = *nb;
      const std::uint64_t begin = whole_number(off->items()[0], who + ": data_offsets");
      const std::uint64_t end = whole_number(off->items()[1], who + ": data_offsets");
      if (begin > end) {
        detail::fail_file(path_, who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] end before they begin");
      }
      if (end > data_size) {
        detail::fail_file(path_, who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                     "] out of range: the data area has " + std::to_string(data_size) +
                                     " bytes (truncated file?)");
      }
      if (end - begin != t.nbytes) {
        detail::fail_file(path_, who + ": size mismatch: data_offsets span " + std::to_string(end - begin) + " bytes but " +
                                     std::string(t.dtype()) + " " + detail::shape_text(t.shape) + " needs " +
                                     std::to_string(t.nbytes));
      }
      t.offset = data_begin + begin;
      tensors_.push_back(std::move(t));
    }
    std::stable_sort(tensors_.begin(), tensors_.end(), [](const tensor_entry& a, const tensor_entry& b) { return a.offset < b.offset; });
    check_no_overlap();
  }

  std::uint64_t whole_number(const report::json::value& v, const std::string& where) const {
    // JSON numbers arrive as doubles: integers up to 2^53 are exact, far beyond any file.
    if (!v.is_number() || !(v.number() >= 0.0) || v.number() > 9007199254740992.0 || std::floor(v.number()) != v.number()) {
      detail::fail_file(path_, where + " must hold non-negative whole numbers (below 2^53)");
    }
    return static_cast<std::uint64_t>(v.number());
  }

  void check_no_overlap() const {
    const tensor_entry* prev = nullptr;
    for (const auto& t : tensors_) {  // sorted by offset
      if (t.nbytes == 0 && t.where == tensor_entry::storage::in_place) continue;
      if (prev != nullptr) {
        const std::uint64_t prev_end = prev->offset + (prev->where == tensor_entry::storage::in_place ? prev->nbytes : prev->compressed_size);
        if (prev_end > t.offset) {
          detail::fail_file(path_, "tensors '" + prev->name + "' and '" + t.name + "' overlap in the file; the file is damaged or crafted");
        }
      }
      prev = &t;
    }
  }

  // ---- npy ----
  void parse_npy() {
    format_ = checkpoint_format::npy;
    const auto h = detail::parse_npy_header(bytes_, path_);
    if (bytes_.size() - h.data_offset != h.nbytes) {
      detail::fail_file(path_, "size mismatch: " + std::string(dtype_name(h.type)) + " " + detail::shape_text(h.shape) + " needs " +
                                   std::to_string(h.nbytes) + " data bytes but the file has " +
                                   std::to_string(bytes_.size() - h.data_offset) +
                                   (bytes_.size() - h.data_offset < h.nbytes ? " (truncated)" : " (trailing bytes)"));
    }
    tensor_entry t = from_header(h);
    std::string stem = path_.substr(path_.find_last_of('/') == std::string::npos ? 0 : path_.find_last_of('/') + 1);
    if (detail::ends_with(stem, ".npy")) stem.resize(stem.size() - 4);
    t.name = stem;
    t.offset = h.data_offset;
    tensors_.push_back(std::move(t));
  }

  static tensor_entry from_header(const detail::npy_header& h) {
    tensor_entry t;
    t.type = h.type;
    t.shape = h.shape;
    t.numel = h.numel;
    t.nbytes = h.nbytes;
    t.little_endian = h.little_endian;
    t.fortran_order = h.fortran_order;
    return t;
  }

  // ---- npz (zip) ----
  void parse_npz() {
    format_ = checkpoint_format::npz;
    const std::uint64_t size = bytes_.size();
    auto need = [&](std::uint64_t at, std::uint64_t len, std::string_view what) {
      if (at > size || len > size - at) {
        detail::fail_file(path_, "corrupt zip: " + std::string(what) + " lies beyond the end of the file (truncated archive?)");
      }
    };
    auto u16 = [&](std::uint64_t at) { return detail::load_le(bytes_, at, 2); };
    auto u32 = [&](std::uint64_t at) { return detail::load_le(bytes_, at, 4); };
    auto u64 = [&](std::uint64_t at) { return detail::load_le(bytes_, at, 8); };
    // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes.
    std::optional<std::uint64_t> eocd;
    if (size >= 22) {
      const std::uint64_t lowest = size - 22 > 65535 ? size - 22 - 65535 : 0;
      for (std::uint64_t p = size - 22 + 1; p-- > lowest;) {
        if (u32(p) == 0x06054b50u) { eocd = p; break; }
      }
    }
    if (!eocd) {
      detail::fail_file(path_, "corrupt zip: no end-of-central-directory record (the archive is truncated); copy or save it again");
    }
    std::uint64_t entries = u16(*eocd + 10);
    std::uint64_t cd_size = u32(*eocd + 12);
    std::uint64_t cd_offset = u32(*eocd + 16);
    std::uint64_t cd_limit = *eocd;
    if (u16(*eocd + 4) != 0 || u16(*eocd + 6) != 0) {
      detail::fail_file(path_, "a multi-disk (split) zip archive is not supported; join the parts into one file");
    }
    if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      // Zip64: a locator just before the EOCD points at the 64-bit record.
      if (*eocd < 20 || u32(*eocd - 20) != 0x07064b50u) {
        detail::fail_file(path_, "corrupt zip: Zip64 markers without a Zip64 locator");
      }
      const std::uint64_t rec = u64(*eocd - 20 + 8);
      need(rec, 56, "the Zip64 end-of-central-directory record");
      if (u32(rec) != 0x06064b50u || rec > *eocd - 20) detail::fail_file(path_, "corrupt zip: bad Zip64 end-of-central-directory record");
      entries = u64(rec + 32);
      cd_size = u64(rec + 40);
      cd_offset = u64(rec + 48);
      cd_limit = rec;
    }
    if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
      detail::fail_file(path_, "corrupt zip: the central directory (offset " + std::to_string(cd_offset) + ", " +
                                   std::to_string(cd_size) + " bytes) lies outside the archive");
    }
    if (entries > cd_size / 46) detail::fail_file(path_, "corrupt zip: " + std::to_string(entries) + " entries cannot fit the central directory");
    std::uint64_t p = cd_offset;
    const std::uint64_t cd_end = cd_offset + cd_size;
    for (std::uint64_t k = 0; k < entries; ++k) {
      if (p + 46 > cd_end || u32(p) != 0x02014b50u) {
        detail::fail_file(path_, "corrupt zip: central directory entry " + std::to_string(k) + " is damaged");
      }
      const auto flags = u16(p + 8);
      const auto method = u16(p + 10);
      const auto crc = static_cast<std::uint32_t>(u32(p + 16));
      std::uint64_t csize = u32(p + 20);
      std::uint64_t usize = u32(p + 24);
      const auto name_len = u16(p + 28);
      const auto extra_len = u16(p + 30);
      const auto comment_len = u16(p + 32);
      std::uint64_t local = u32(p + 42);
      if (p + 46 + name_len + extra_len + comment_len > cd_end) {
        detail::fail_file(path_, "corrupt zip: central directory entry " + std::to_string(k) + " runs past the directory");
      }
      const std::string name(reinterpret_cast<const char*>(bytes_.data()) + p + 46, static_cast<std::size_t>(name_len));
      // Zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in this order.
      for (std::uint64_t e = p + 46 + name_len, e_end = e + extra_len; e + 4 <= e_end;) {
        const auto id = u16(e);
        const auto len = u16(e + 2);
        if (e + 4 + len > e_end) break;
        if (id == 1) {
          std::uint64_t q = e + 4;
          auto take = [&](std::uint64_t& field) {
            if (field != 0xFFFFFFFF) return;
            if (q + 8 > e + 4 + len) detail::fail_file(path_, "corrupt zip: member '" + name + "' has a short Zip64 field");
            field = u64(q);
            q += 8;
          };
          take(usize);
          take(csize);
          take(local);
        }
        e += 4 + len;
      }
      p += 46 + name_len + extra_len + comment_len;
      if (detail::ends_with(name, "/")) continue;  // a directory
      if (!detail::ends_with(name, ".npy")) {
        skipped_.push_back(name);
        continue;
      }
      const std::string who = "member '" + name + "'";
      if (flags & 1u) detail::fail_file(path_, who + " is encrypted; decrypt the archive first");
      if (method != 0 && method != 8) {
        detail::fail_file(path_, who + " uses zip compression method " + std::to_string(method) +
                                     "; mldiag reads stored (numpy.savez) and deflated (numpy.savez_compressed) members");
      }
      need(local, 30, who + "'s local header");
      if (u32(local) != 0x04034b50u) detail::fail_file(path_, "corrupt zip: " + who + " has no local header where the directory says");
      const std::uint64_t data = local + 30 + u16(local + 26) + u16(local + 28);
      if (data > cd_offset || csize > cd_offset - data) {
        detail::fail_file(path_, "corrupt zip: " + who + "'s data (" + std::to_string(csize) + " bytes) runs into the central directory or past the file");
      }
      const std::string_view local_name(reinterpret_cast<const char*>(bytes_.data()) + local + 30,
                                        static_cast<std::size_t>(std::min<std::uint64_t>(u16(local + 26), size - local - 30)));
      if (local_name != name) detail::fail_file(path_, "corrupt zip: " + who + "'s local header names '" + std::string(local_name) + "'");
      const std::string what = path_ + ": " + who;
      tensor_entry t;
      if (method == 0) {
        if (csize != usize) detail::fail_file(path_, "corrupt zip: stored " + who + " has different compressed and plain sizes");
        const auto h = detail::parse_npy_header(bytes_.subspan(static_cast<std::size_t>(data), static_cast<std::size_t>(usize)), what);
        t = from_header(h);
        if (usize - h.data_offset != h.nbytes) {
          detail::fail_file(what, "size mismatch: " + std::string(dtype_name(h.type)) + " " + detail::shape_text(h.shape) + " needs " +
                                      std::to_string(h.nbytes) + " data bytes but the member has " + std::to_string(usize - h.data_offset));
        }
        t.offset = data + h.data_offset;
      } else {
#if MLDIAG_CLI_HAS_ZLIB
        detail::inflater z(bytes_.subspan(static_cast<std::size_t>(data), static_cast<std::size_t>(csize)), what);
        std::vector<std::byte> head(12);
        head.resize(z.read(head.data(), head.size()));
        const std::uint64_t hs = detail::npy_header_size(head, what);
        if (hs > head.size()) {
          const std::size_t have = head.size();
          head.resize(static_cast<std::size_t>(hs));
          head.resize(have + z.read(head.data() + have, static_cast<std::size_t>(hs) - have));
        }
        const auto h = detail::parse_npy_header(head, what);
        t = from_header(h);
        if (usize < h.data_offset || usize - h.data_offset != h.nbytes) {
          detail::fail_file(what, "size mismatch: " + std::string(dtype_name(h.type)) + " " + detail::shape_text(h.shape) + " needs " +
                                      std::to_string(h.nbytes) + " data bytes but the member has " +
                                      std::to_string(usize < h.data_offset ? 0 : usize - h.data_offset));
        }
        t.where = tensor_entry::storage::deflated;
        t.offset = data;
        t.compressed_size = csize;
        t.header_bytes = h.data_offset;
        t.crc32 = crc;
#else
        (void)crc;
        detail::fail_file(what, "is compressed (numpy.savez_compressed) and this mldiag was built without zlib; "
                                "rebuild with zlib (apt-get install zlib1g-dev) or re-save with numpy.savez");
#endif
      }
      t.name = name.substr(0, name.size() - 4);
      add_name(t.name, "archive");
      tensors_.push_back(std::move(t));
    }
    if (tensors_.empty() && !skipped_.empty()) {
      detail::fail_file(path_, "a zip archive without .npy members (it holds '" + skipped_.front() +
                                   "'; a PyTorch checkpoint?); convert it to safetensors first");
    }
    // Members sorted by position must not share bytes (a crafted archive could alias them).
    std::vector<tensor_entry> by_offset = tensors_;
    std::stable_sort(by_offset.begin(), by_offset.end(), [](const tensor_entry& a, const tensor_entry& b) { return a.offset < b.offset; });
    std::swap(by_offset, tensors_);
    check_no_overlap();
    std::swap(by_offset, tensors_);
  }

  std::unique_ptr<mapped_file> map_;  // null for from_memory
  std::string path_;
  std::span<const std::byte> bytes_;
  checkpoint_format format_ = checkpoint_format::safetensors;
  std::vector<tensor_entry> tensors_;
  std::vector<std::string> skipped_;
  std::unordered_map<std::string, std::size_t> by_name_;
  std::unordered_map<std::string, int> seen_;
};

// ---------------------------------------------------------------------------------------------
// Streaming: a tensor's bytes in bounded windows

/// Bytes of a tensor read per step (per tensor in a diff): bounds the memory a reader holds
/// (the mapped pages of one window, or one inflated window) whatever the file size.
// 64 MiB: 256 units of 65536 fp32 per step keep 16 threads busy; the RSS test of a 13 GiB
// file stays under 1 GB with it (tests/tools/checkpoint_test.cpp, "big").
inline constexpr std::size_t default_window_bytes = std::size_t{64} << 20;

namespace detail {

// Successive windows of one tensor's data bytes, each a whole number of elements.
class tensor_source {
 public:
  tensor_source(const checkpoint& c, const tensor_entry& t, std::size_t window_bytes)
      : c_(c), t_(t), window_(window_bytes) {
#if MLDIAG_CLI_HAS_ZLIB
    if (t.where == tensor_entry::storage::deflated) {
      z_ = std::make_unique<inflater>(c.bytes().subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.compressed_size)),
                                      c.path() + ": member '" + t.name + ".npy'");
      buffer_.resize(std::min<std::uint64_t>(window_, t.nbytes));
      std::vector<std::byte> head(static_cast<std::size_t>(t.header_bytes));
      if (z_->read(head.data(), head.size()) != head.size()) truncated();
    }
#endif
  }

  // The next window (at most window_bytes); empty at the end.
  std::span<const std::byte> next() {
    const std::uint64_t left = t_.nbytes - done_;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, window_));
    if (t_.where == tensor_entry::storage::in_place) {
      if (done_ > 0) c_.release(t_.offset + done_ - last_, last_);  // the window just processed
      const auto w = c_.bytes().subspan(static_cast<std::size_t>(t_.offset + done_), n);
      c_.prefetch(t_.offset + done_, n, true);               // this window: map it now
      c_.prefetch(t_.offset + done_ + n, std::min<std::uint64_t>(left - n, window_));  // the next: read ahead
      done_ += n;
      last_ = n;
      if (n == 0 && t_.nbytes > 0) c_.release(t_.offset, t_.nbytes);
      return w;
    }
#if MLDIAG_CLI_HAS_ZLIB
    const std::size_t got = z_->read(buffer_.data(), n);
    if (got != n) truncated();
    done_ += n;
    c_.release(t_.offset, z_->consumed());
    if (done_ == t_.nbytes) finish();
    return {buffer_.data(), n};
#else
    return {};
#endif
  }

 private:
#if MLDIAG_CLI_HAS_ZLIB
  [[noreturn]] void truncated() const {
    fail_file(c_.path(), "member '" + t_.name + ".npy': the compressed data ends before the array does; the archive is damaged");
  }
  void finish() {
    std::byte extra{};
    if (z_->read(&extra, 1) != 0 || !z_->ended()) {
      fail_file(c_.path(), "member '" + t_.name + ".npy': more data than its header's shape says; the archive is damaged");
    }
    if (z_->crc() != t_.crc32) fail_file(c_.path(), "member '" + t_.name + ".npy': CRC-32 mismatch; the archive is damaged");
  }
  std::unique_ptr<inflater> z_;
#endif
  const checkpoint& c_;
  const tensor_entry& t_;
  std::uint64_t window_;
  std::uint64_t done_ = 0;
  std::uint64_t last_ = 0;
  std::vector<std::byte> buffer_;
};

// A window of `unit_elems` elements times a whole number, about `window_bytes` long.
inline std::size_t window_for(std::size_t item_size, std::size_t window_bytes) noexcept {
  const std::size_t unit_bytes = mldiag::detail::unit_elems * item_size;
  return std::max<std::size_t>(1, window_bytes / unit_bytes) * unit_bytes;
}

inline bool needs_swap(const tensor_entry& t) noexcept {
  return size_of(t.type) > 1 && (t.little_endian != (std::endian::native == std::endian::little));
}

inline void swap_bytes(std::byte* p, std::size_t n, std::size_t size) noexcept {
  for (std::size_t i = 0; i < n; ++i) std::reverse(p + i * size, p + (i + 1) * size);
}

// Per-worker buffers for one unit (8-byte aligned: std::vector<double>).
struct unit_scratch {
  std::vector<double> raw = std::vector<double>(mldiag::detail::unit_elems);
  std::vector<double> values = std::vector<double>(mldiag::detail::unit_elems);
};

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The values of n elements at p (already in native order) as doubles.
inline void to_double(value_type t, const std::byte* p, std::size_t n, double* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* e = p + i * size_of(t);
    switch (t) {
      case value_type::f64: out[i] = load<double>(e); break;
      case value_type::f32: out[i] = static_cast<double>(load<float>(e)); break;
      case value_type::f16: out[i] = static_cast<double>(mldiag::half::from_bits(load<std::uint16_t>(e))); break;
      case value_type::bf16: out[i] = static_cast<double>(mldiag::bfloat16::from_bits(load<std::uint16_t>(e))); break;
      case value_type::f8_e4m3: out[i] = static_cast<double>(mldiag::float8_e4m3::from_bits(load<std::uint8_t>(e))); break;
      case value_type::f8_e5m2: out[i] = static_cast<double>(mldiag::float8_e5m2::from_bits(load<std::uint8_t>(e))); break;
      case value_type::i8: out[i] = load<std::int8_t>(e); break;
      case value_type::i16: out[i] = load<std::int16_t>(e); break;
      case value_type::i32: out[i] = load<std::int32_t>(e); break;
      // 64-bit integers above 2^53 round to the nearest double.
      case value_type::i64: out[i] = static_cast<double>(load<std::int64_t>(e)); break;
      case value_type::u8: out[i] = load<std::uint8_t>(e); break;
      case value_type::u16: out[i] = load<std::uint16_t>(e); break;
      case value_type::u32: out[i] = load<std::uint32_t>(e); break;
      case value_type::u64: out[i] = static_cast<double>(load<std::uint64_t>(e)); break;
      case value_type::boolean: out[i] = load<std::uint8_t>(e) != 0 ? 1.0 : 0.0; break;
    }
  }
}

// n elements at p in native order, in aligned memory: p itself, or a copy in s.raw.
inline const std::byte* native_unit(const tensor_entry& t, const std::byte* p, std::size_t n, unit_scratch& s) noexcept {
  const std::size_t size = size_of(t.type);
  const bool swap = needs_swap(t);
  if (!swap && reinterpret_cast<std::uintptr_t>(p) % size == 0) return p;
  auto* raw = reinterpret_cast<std::byte*>(s.raw.data());
  std::memcpy(raw, p, n * size);
  if (swap) swap_bytes(raw, n, size);
  return raw;
}

// Statistics of one unit (at most unit_elems elements at p): floats read in place by mldiag's
// kernels (so a tensor's result equals mldiag::compute_stats of it); integers as doubles.
inline tensor_stats unit_stats(const tensor_entry& t, const std::byte* p, std::size_t n, unit_scratch& s) {
  const std::byte* x = native_unit(t, p, n, s);
  const auto count = static_cast<std::int64_t>(n);
  if (const auto f = float_dtype(t.type)) return compute_stats(tensor_ref({}, x, count, *f));
  to_double(t.type, x, n, s.values.data());
  return compute_stats(tensor_ref({}, s.values.data(), count, mldiag::dtype::f64));
}

inline unsigned resolve_threads(unsigned threads) noexcept {
  if (threads != 0) return std::min(threads, 1024u);
  return std::max(1u, std::min(std::thread::hardware_concurrency(), 1024u));
}

// Runs fn(unit, worker) for units 0..count-1 on the engine; the first exception is rethrown.
template <class Fn>
void for_each_unit(host_engine& engine, std::size_t count, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  auto job = [&](unsigned w) noexcept {
    for (;;) {
      const std::size_t u = next.fetch_add(1, std::memory_order_relaxed);
      if (u >= count) return;
      try {
        fn(u, w);
      } catch (...) {
        if (!failed.exchange(true)) first = std::current_exception();
      }
    }
  };
  if (count <= 1) job(0u);  // one unit: no hand-off
  else engine.run(job);
  if (first) std::rethrow_exception(first);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Statistics

/// One tensor's statistics, with what identifies it.
struct tensor_report {
  std::string name;
  std::string dtype;                 ///< "F32", "BF16", ... (safetensors spelling)
  std::vector<std::uint64_t> shape;  ///< empty for a 0-d scalar
  mldiag::tensor_stats stats;        ///< count, nan, inf, zeros, min/max/max_abs, mean, variance, L2
};

/// Statistics of every tensor of `c`, in `c.tensors()` order, on `threads` threads (0: one per
/// hardware thread). The file is read once, front to back, in windows of about
/// `window_bytes` whose pages are released after use, so resident memory stays bounded
/// (about window_bytes + what the kernel reads ahead) whatever the file size. Compressed .npz
/// members are inflated one window at a time.
///
/// Each tensor is cut into units of 65536 elements merged in order (as `mldiag::stats_plan`
/// does), so results are bit-identical for every thread count and window size, and equal to
/// `mldiag::compute_stats` on the tensor for the floating-point dtypes. Integers and BOOL
/// are converted to double (64-bit integers above 2^53 round). Throws `mldiag::error` for a
/// damaged compressed member.
///
/// **Example**
/// ```cpp
/// auto ckpt = mldiag::cli::checkpoint::open("model.safetensors");
/// for (const auto& r : mldiag::cli::checkpoint_stats(ckpt, 0))
///   if (r.stats.non_finite() > 0) std::printf("%s has NaN/Inf\n", r.name.c_str());
/// ```
[[nodiscard]] inline std::vector<tensor_report> checkpoint_stats(const checkpoint& c, unsigned threads = 0,
                                                                 std::size_t window_bytes = default_window_bytes) {
  host_engine engine(detail::resolve_threads(threads));
  std::vector<detail::unit_scratch> scratch(engine.threads());
  std::vector<tensor_stats> units;
  std::vector<tensor_report> out;
  out.reserve(c.tensors().size());
  for (const auto& t : c.tensors()) {
    tensor_report r{t.name, std::string(t.dtype()), t.shape, {}};
    const std::size_t size = size_of(t.type);
    detail::tensor_source src(c, t, detail::window_for(size, window_bytes));
    for (auto w = src.next(); !w.empty(); w = src.next()) {
      const std::size_t elems = w.size() / size;
      const std::size_t count = (elems + mldiag::detail::unit_elems - 1) / mldiag::detail::unit_elems;
      units.assign(count, tensor_stats{});
      detail::for_each_unit(engine, count, [&](std::size_t u, unsigned worker) {
        const std::size_t begin = u * mldiag::detail::unit_elems;
        const std::size_t n = std::min(mldiag::detail::unit_elems, elems - begin);
        units[u] = detail::unit_stats(t, w.data() + begin * size, n, scratch[worker]);
      });
      for (const auto& s : units) r.stats.merge(s);  // fixed order
    }
    out.push_back(std::move(r));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Diff

/// How tensor B differs from tensor A (same name, same shape).
struct tensor_diff {
  std::string name;
  std::string dtype_a, dtype_b;
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 0;       ///< elements compared
  std::uint64_t non_finite = 0;  ///< positions where A or B is NaN or +-Inf: left out of the norms
  double norm_a = 0.0;           ///< ||A||_2 over the positions where both are finite
  double norm_b = 0.0;           ///< ||B||_2 over the same positions
  double norm_diff = 0.0;        ///< ||B - A||_2 over the same positions
  /// norm_diff / norm_a; when norm_a == 0 it is 0 if norm_diff == 0 too, +Inf otherwise.
  double relative = 0.0;
  double max_abs_diff = 0.0;  ///< max |B - A| over the same positions (0 when there are none)
};

/// A tensor in both checkpoints with different shapes (not compared).
struct reshaped_tensor {
  std::string name;
  std::vector<std::uint64_t> shape_a, shape_b;
};

/// A tensor in both with the same shape that could not be compared, and why.
struct uncompared_tensor {
  std::string name;
  std::string reason;
};

/// The difference of two checkpoints.
struct checkpoint_diff {
  std::vector<tensor_diff> common;            ///< in A's order
  std::vector<std::string> added;             ///< only in B, in B's order
  std::vector<std::string> removed;           ///< only in A, in A's order
  std::vector<reshaped_tensor> reshaped;      ///< in A's order
  std::vector<uncompared_tensor> uncompared;  ///< e.g. Fortran order in one file only
};

namespace detail {

// Sums of squares kept as ssq * 2^(2 * exp): exact power-of-two scaling, so no square
// overflows or underflows for any finite input.
struct scaled_ssq {
  bool any = false;
  int exp = 0;
  double ssq_a = 0.0, ssq_b = 0.0, ssq_d = 0.0;

  void merge(const scaled_ssq& o) noexcept {
    if (!o.any) return;
    if (!any) { *this = o; return; }
    const int e = std::max(exp, o.exp);
    auto at = [e](double v, int from) { return std::ldexp(v, 2 * (from - e)); };
    ssq_a = at(ssq_a, exp) + at(o.ssq_a, o.exp);
    ssq_b = at(ssq_b, exp) + at(o.ssq_b, o.exp);
    ssq_d = at(ssq_d, exp) + at(o.ssq_d, o.exp);
    exp = e;
  }
  [[nodiscard]] double norm(double ssq) const noexcept { return any ? std::ldexp(std::sqrt(ssq), exp) : 0.0; }
};

struct diff_unit {
  std::uint64_t non_finite = 0;
  double max_abs_diff = 0.0;
  scaled_ssq sums;
};

inline diff_unit diff_values(const double* a, const double* b, std::size_t n) noexcept {
  diff_unit r;
  double big = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) { ++r.non_finite; continue; }
    big = std::max({big, std::fabs(a[i]), std::fabs(b[i])});
    r.max_abs_diff = std::max(r.max_abs_diff, std::fabs(b[i] - a[i]));  // may be +Inf: |B-A| > DBL_MAX
  }
  if (r.non_finite == n) return r;
  r.sums.any = true;
  int e = 0;
  if (big > 0.0) (void)std::frexp(big, &e);  // big < 2^e
  r.sums.exp = std::clamp(e, -1000, 1000);
  const double scale = std::ldexp(1.0, -r.sums.exp);
  double sa = 0.0, sb = 0.0, sd = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) continue;
    const double x = a[i] * scale, y = b[i] * scale;
    sa += x * x;
    sb += y * y;
    sd += (y - x) * (y - x);
  }
  r.sums.ssq_a = sa;
  r.sums.ssq_b = sb;
  r.sums.ssq_d = sd;
  return r;
}

struct diff_scratch {
  unit_scratch a, b;
};

inline tensor_diff diff_tensor(const checkpoint& ca, const tensor_entry& ta, const checkpoint& cb, const tensor_entry& tb,
                               host_engine& engine, std::vector<diff_scratch>& scratch, std::size_t window_bytes) {
  tensor_diff d;
  d.name = ta.name;
  d.dtype_a = ta.dtype();
  d.dtype_b = tb.dtype();
  d.shape = ta.shape;
  d.count = ta.numel;
  const std::size_t size_a = size_of(ta.type), size_b = size_of(tb.type);
  // The same number of elements per window from both (whole units).
  const std::size_t elems = window_for(std::max(size_a, size_b), window_bytes) / std::max(size_a, size_b);
  tensor_source sa(ca, ta, elems * size_a), sb(cb, tb, elems * size_b);
  scaled_ssq sums;
  std::vector<diff_unit> units;
  for (auto wa = sa.next(); !wa.empty(); wa = sa.next()) {
    const auto wb = sb.next();
    const std::size_t n_elems = wa.size() / size_a;
    const std::size_t count = (n_elems + mldiag::detail::unit_elems - 1) / mldiag::detail::unit_elems;
    units.assign(count, diff_unit{});
    for_each_unit(engine, count, [&](std::size_t u, unsigned w) {
      const std::size_t begin = u * mldiag::detail::unit_elems;
      const std::size_t n = std::min(mldiag::detail::unit_elems, n_elems - begin);
      auto& s = scratch[w];
      to_double(ta.type, native_unit(ta, wa.data() + begin * size_a, n, s.a), n, s.a.values.data());
      to_double(tb.type, native_unit(tb, wb.data() + begin * size_b, n, s.b), n, s.b.values.data());
      units[u] = diff_values(s.a.values.data(), s.b.values.data(), n);
    });
    for (const auto& u : units) {  // fixed order
      d.non_finite += u.non_finite;
      d.max_abs_diff = std::max(d.max_abs_diff, u.max_abs_diff);
      sums.merge(u.sums);
    }
  }
  (void)sb.next();  // releases B's last window
  d.norm_a = sums.norm(sums.ssq_a);
  d.norm_b = sums.norm(sums.ssq_b);
  d.norm_diff = sums.norm(sums.ssq_d);
  d.relative = d.norm_a > 0.0 ? d.norm_diff / d.norm_a : (d.norm_diff == 0.0 ? 0.0 : HUGE_VAL);
  return d;
}

// True when the same shape in different memory orders still pairs equal positions.
inline bool same_order(const tensor_entry& a, const tensor_entry& b) noexcept {
  if (a.fortran_order == b.fortran_order) return true;
  int non_trivial = 0;
  for (const auto e : a.shape) non_trivial += e > 1 ? 1 : 0;
  return non_trivial <= 1;
}

}  // namespace detail

/// Compares checkpoint B with checkpoint A, tensor by tensor (matched by name): for each
/// tensor in both with the same shape, ||B - A||_2 / ||A||_2, max |B - A| and the positions
/// where either is non-finite (left out of the norms), computed in double from the values
/// (A and B may have different dtypes), streaming window by window on `threads` threads
/// (0: one per hardware thread), with results independent of the thread count. Also lists
/// the tensors added (only in B), removed (only in A) and reshaped.
///
/// **Example**
/// ```cpp
/// auto a = mldiag::cli::checkpoint::open("step1000.safetensors");
/// auto b = mldiag::cli::checkpoint::open("step2000.safetensors");
/// auto d = mldiag::cli::diff_checkpoints(a, b, 0);
/// for (const auto& t : d.common) std::printf("%s %.3g\n", t.name.c_str(), t.relative);
/// ```
[[nodiscard]] inline checkpoint_diff diff_checkpoints(const checkpoint& a, const checkpoint& b, unsigned threads = 0,
                                                      std::size_t window_bytes = default_window_bytes) {
  host_engine engine(detail::resolve_threads(threads));
  std::vector<detail::diff_scratch> scratch(engine.threads());
  checkpoint_diff out;
  for (const auto& ta : a.tensors()) {
    const tensor_entry* tb = b.find(ta.name);
    if (tb == nullptr) {
      out.removed.push_back(ta.name);
    } else if (ta.shape != tb->shape) {
      out.reshaped.push_back({ta.name, ta.shape, tb->shape});
    } else if (!detail::same_order(ta, *tb)) {
      out.uncompared.push_back({ta.name, "Fortran order in one file and C order in the other; re-save one with "
                                         "numpy.ascontiguousarray"});
    } else {
      out.common.push_back(detail::diff_tensor(a, ta, b, *tb, engine, scratch, window_bytes));
    }
  }
  for (const auto& tb : b.tensors())
    if (a.find(tb.name) == nullptr) out.added.push_back(tb.name);
  return out;
}

}  // namespace mldiag::cli
