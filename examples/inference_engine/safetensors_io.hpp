// SPDX-License-Identifier: Apache-2.0
/// Writing and reading the safetensors files of the inference-engine example: an 8-byte
/// little-endian header length, a JSON header (dtype, shape, data_offsets per tensor, string
/// metadata), then the tensors' bytes back to back. Standard library and mldiag's JSON reader only.
#pragma once

#include <mldiag/report/json.hpp>

#include <bit>  // std::bit_cast
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace examples::inference::safetensors {

/// One tensor to write: its safetensors dtype name ("F32", "U8"), shape and little-endian bytes.
struct tensor_out {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

/// A float32 tensor; the bytes are written little-endian whatever the host's order.
inline tensor_out f32(std::string name, std::vector<std::int64_t> shape,
                      std::span<const float> values) {
  tensor_out t{std::move(name), "F32", std::move(shape), {}};
  t.bytes.reserve(values.size() * 4);
  for (float v : values) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (int i = 0; i < 4; ++i)
      t.bytes.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xffu));
  }
  return t;
}

inline tensor_out u8(std::string name, std::span<const std::uint8_t> values) {
  tensor_out t{std::move(name), "U8", {static_cast<std::int64_t>(values.size())}, {}};
  for (auto v : values)
    t.bytes.push_back(static_cast<std::byte>(v));
  return t;
}

namespace detail {
// "2,3": appended piece by piece (GCC 12 misreads `"," + std::to_string(x)` as overlapping copies).
inline std::string dims_text(const std::vector<std::int64_t>& shape) {
  std::string out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) out += ',';
    out += std::to_string(shape[d]);
  }
  return out;
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}
}  // namespace detail

/// Writes `tensors` in the order given (their data back to back, as the safetensors library
/// requires: no gaps, no overlap) with string `metadata` under "__metadata__".
inline void write(const std::string& path, const std::vector<tensor_out>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += detail::json_string(k) + ":" + detail::json_string(v);
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (i > 0 || !metadata.empty()) header += ',';
    header += detail::json_string(t.name) + ":{\"dtype\":" + detail::json_string(t.dtype) +
              ",\"shape\":[";
    header += detail::dims_text(t.shape);
    const std::uint64_t end = offset + t.bytes.size();
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  // Spaces pad the header so the data starts 8-byte aligned, as the reference writer does.
  while (header.size() % 8 != 0)
    header += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw std::runtime_error("mldiag: cannot write " + path +
                             "; check that its folder exists and is writable");
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((n >> (8 * i)) & 0xffu));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  if (!out.flush()) throw std::runtime_error("mldiag: writing " + path + " failed (disk full?)");
}

/// A safetensors file read whole into memory, with its header checked: every tensor's byte
/// range inside the data area and as long as its dtype and shape say.
class file {
 public:
  struct entry {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::size_t begin = 0;  // into bytes_
    std::size_t size = 0;
  };

  explicit file(const std::string& path) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("mldiag: cannot read the weights file " + path);
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (bytes_.size() < 8) fail("shorter than the 8-byte header length");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(bytes_[static_cast<std::size_t>(i)]);
    if (n > bytes_.size() - 8)
      fail("header length " + std::to_string(n) + " runs past the end of the file");
    const auto header = mldiag::report::json::parse(
        std::string_view(bytes_).substr(8, static_cast<std::size_t>(n)), path);
    if (!header.is_object()) fail("the header is not a JSON object");
    const std::size_t data = 8 + static_cast<std::size_t>(n);
    for (const auto& [name, v] : header.members()) {
      if (name == "__metadata__") {
        for (const auto& [k, s] : v.members())
          if (s.is_string()) metadata_[k] = s.string();
        continue;
      }
      const auto* dt = v.find("dtype");
      const auto* sh = v.find("shape");
      const auto* off = v.find("data_offsets");
      if (!dt || !dt->is_string() || !sh || !sh->is_array() || !off || !off->is_array() ||
          off->items().size() != 2) {
        fail("tensor '" + name + "' needs dtype, shape and data_offsets [begin, end]");
      }
      entry e;
      e.dtype = dt->string();
      std::size_t count = 1;
      for (const auto& d : sh->items()) {
        if (!d.is_number() || d.number() < 0 || d.number() > 1e12)
          fail("tensor '" + name + "' has a bad shape");
        e.shape.push_back(static_cast<std::int64_t>(d.number()));
        count *= static_cast<std::size_t>(d.number());
      }
      const double b = off->items()[0].number(), end = off->items()[1].number();
      if (!(b >= 0 && end >= b && end <= static_cast<double>(bytes_.size() - data))) {
        fail("tensor '" + name + "' has data_offsets outside the data area");
      }
      e.begin = data + static_cast<std::size_t>(b);
      e.size = static_cast<std::size_t>(end - b);
      const std::size_t width = e.dtype == "F32" ? 4 : e.dtype == "U8" ? 1 : 0;
      if (width == 0)
        fail("tensor '" + name + "' has dtype " + e.dtype + "; this example reads F32 and U8");
      if (count * width != e.size)
        fail("tensor '" + name + "': its shape and dtype need " + std::to_string(count * width) +
             " bytes, data_offsets give " + std::to_string(e.size));
      entries_[name] = std::move(e);
    }
  }

  [[nodiscard]] const std::map<std::string, entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return metadata_;
  }

  /// The F32 tensor `name`, checked against the shape the caller expects.
  [[nodiscard]] std::vector<float> f32(const std::string& name,
                                       const std::vector<std::int64_t>& shape) const {
    const entry& e = find(name, "F32", shape);
    std::vector<float> out(e.size / 4);
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint32_t bits = 0;
      for (int k = 3; k >= 0; --k)
        bits = (bits << 8) |
               static_cast<unsigned char>(bytes_[e.begin + 4 * i + static_cast<std::size_t>(k)]);
      out[i] = std::bit_cast<float>(bits);
    }
    return out;
  }

  [[nodiscard]] std::vector<std::uint8_t> u8(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end() || it->second.dtype != "U8") fail("no U8 tensor '" + name + "'");
    std::vector<std::uint8_t> out(it->second.size);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<std::uint8_t>(bytes_[it->second.begin + i]);
    return out;
  }

  /// Metadata value `key`, or an error naming it.
  [[nodiscard]] const std::string& meta(const std::string& key) const {
    const auto it = metadata_.find(key);
    if (it == metadata_.end())
      fail("no \"" + key + "\" in __metadata__; was it written by mldiag_inference_train?");
    return it->second;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("mldiag: " + path_ + ": " + why);
  }

  const entry& find(const std::string& name, const std::string& dtype,
                    const std::vector<std::int64_t>& shape) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) fail("no tensor '" + name + "'");
    if (it->second.dtype != dtype)
      fail("tensor '" + name + "' is " + it->second.dtype + ", expected " + dtype);
    if (it->second.shape != shape) {
      fail("tensor '" + name + "' has shape [" + detail::dims_text(it->second.shape) +
           "], expected [" + detail::dims_text(shape) + "]");
    }
    return it->second;
  }

  std::string path_;
  std::string bytes_;
  std::map<std::string, entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace examples::inference::safetensors
