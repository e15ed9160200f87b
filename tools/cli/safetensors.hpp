// SPDX-License-Identifier: Apache-2.0
/// The safetensors format: an 8-byte header length, a JSON header, then the tensors' bytes.
#pragma once

#include "cli/file_bytes.hpp"
#include "cli/tensor_entry.hpp"
#include "cli/value_type.hpp"
#include "mldiag/report/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mldiag::cli {

namespace detail {

// A JSON number that is a whole non-negative count or offset.
inline std::uint64_t whole_number(const report::json::value& v, const std::string& path, const std::string& where) {
  // JSON numbers arrive as doubles: integers up to 2^53 are exact, far beyond any file.
  if (!v.is_number() || !(v.number() >= 0.0) || v.number() > 9007199254740992.0 || std::floor(v.number()) != v.number()) {
    fail_file(path, where + " must hold non-negative whole numbers (below 2^53)");
  }
  return static_cast<std::uint64_t>(v.number());
}

// The tensors of a safetensors file, by data offset.
inline checkpoint_index index_safetensors(std::span<const std::byte> bytes, const std::string& path) {
  checkpoint_index out{checkpoint_format::safetensors, {}, {}};
  std::vector<tensor_entry>& tensors = out.tensors;
  std::unordered_set<std::string> seen;
  const std::uint64_t size = bytes.size();
  if (size < 8) fail_file(path, "truncated: shorter than the 8-byte safetensors header length");
  const std::uint64_t n = load_le(bytes, 0, 8);
  if (n > size - 8) {
    fail_file(path, "safetensors header length " + std::to_string(n) + " is beyond the end of the file (" +
                        std::to_string(size) + " bytes): the file is truncated or not safetensors");
  }
  if (n > 100'000'000) {
    fail_file(path, "safetensors header of " + std::to_string(n) + " bytes exceeds the 100 MB limit safetensors itself sets");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n));
  const auto header = report::json::parse(text, path + ": safetensors header");
  if (!header.is_object()) fail_file(path, "the safetensors header is JSON but not an object");
  const std::uint64_t data_begin = 8 + n;
  const std::uint64_t data_size = size - data_begin;
  for (const auto& [key, v] : header.members()) {
    if (key == "__metadata__") continue;
    const std::string who = "tensor '" + key + "'";
    add_name(seen, key, path, "safetensors header");
    if (!v.is_object()) fail_file(path, who + ": expected an object with dtype, shape and data_offsets");
    const auto* dt = v.find("dtype");
    const auto* sh = v.find("shape");
    const auto* off = v.find("data_offsets");
    if (dt == nullptr || !dt->is_string()) fail_file(path, who + ": missing or non-string \"dtype\"");
    if (sh == nullptr || !sh->is_array()) fail_file(path, who + ": missing or non-array \"shape\"");
    if (off == nullptr || !off->is_array() || off->items().size() != 2) {
      fail_file(path, who + ": \"data_offsets\" must be an array [begin, end]");
    }
    tensor_entry t;
    t.name = key;
    const auto type = parse_dtype_name(dt->string());
    if (!type) {
      fail_file(path, who + " has dtype '" + dt->string() + "', which mldiag does not read; supported: " +
                          std::string(supported_dtypes));
    }
    t.type = *type;
    for (const auto& d : sh->items()) {
      const std::uint64_t e = whole_number(d, path, who + ": shape");
      const auto nn = checked_mul(t.numel, e);
      if (!nn) fail_file(path, who + ": the element count of its shape overflows 64 bits");
      t.numel = *nn;
      t.shape.push_back(e);
    }
    const auto nb = checked_mul(t.numel, size_of(t.type));
    if (!nb) fail_file(path, who + ": the byte size of its shape overflows 64 bits");
    t.nbytes = *nb;
    const std::uint64_t begin = whole_number(off->items()[0], path, who + ": data_offsets");
    const std::uint64_t end = whole_number(off->items()[1], path, who + ": data_offsets");
    if (begin > end) {
      fail_file(path, who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] end before they begin");
    }
    if (end > data_size) {
      fail_file(path, who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                          "] out of range: the data area has " + std::to_string(data_size) +
                          " bytes (truncated file?)");
    }
    if (end - begin != t.nbytes) {
      fail_file(path, who + ": size mismatch: data_offsets span " + std::to_string(end - begin) + " bytes but " +
                          std::string(t.dtype()) + " " + shape_text(t.shape) + " needs " +
                          std::to_string(t.nbytes));
    }
    t.offset = data_begin + begin;
    tensors.push_back(std::move(t));
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const tensor_entry& a, const tensor_entry& b) { return a.offset < b.offset; });
  check_no_overlap(tensors, path);
  return out;
}

}  // namespace detail

}  // namespace mldiag::cli
