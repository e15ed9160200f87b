// SPDX-License-Identifier: Apache-2.0
/// A checkpoint's tensors as the readers index them: name, dtype, shape, where the bytes are.
#pragma once

#include "cli/file_bytes.hpp"
#include "cli/value_type.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace mldiag::cli {

enum class checkpoint_format : std::uint8_t { safetensors, npy, npz };

[[nodiscard]] constexpr std::string_view format_name(checkpoint_format f) noexcept {
  switch (f) {
    case checkpoint_format::safetensors: return "safetensors";
    case checkpoint_format::npy: return "npy";
    case checkpoint_format::npz: return "npz";
  }
  return "unknown";
}

// One tensor of a checkpoint: what it is and where its bytes are.
struct tensor_entry {
  enum class storage : std::uint8_t {
    in_place,  // `nbytes` bytes at file offset `offset`
    deflated,  // an .npz member compressed with deflate: `compressed_size` bytes at `offset`
  };

  std::string name;     // safetensors key; .npz member without ".npy"; .npy file stem
  value_type type = value_type::f32;
  std::vector<std::uint64_t> shape;  // empty for a 0-d scalar
  std::uint64_t numel = 1;           // product of `shape` (1 for a scalar)
  std::uint64_t nbytes = 0;          // numel * size_of(type)
  bool little_endian = true;         // .npy '>' descr: false (byte-swapped on reading)
  bool fortran_order = false;        // .npy column-major data (statistics ignore order)
  storage where = storage::in_place;
  std::uint64_t offset = 0;
  std::uint64_t compressed_size = 0;  // deflated only
  std::uint64_t header_bytes = 0;     // deflated only: .npy header before the data, inflated
  std::uint32_t crc32 = 0;            // deflated only: CRC-32 of the whole inflated member

  // The safetensors spelling of the dtype ("F32", "BF16", ...).
  [[nodiscard]] std::string_view dtype() const noexcept { return dtype_name(type); }
};

namespace detail {

inline std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// What a reader finds in a file: its tensors and the .npz members it does not read.
struct checkpoint_index {
  checkpoint_format format = checkpoint_format::safetensors;
  std::vector<tensor_entry> tensors;  // safetensors: by data offset; npz: archive order
  std::vector<std::string> skipped;
};

// Names seen while indexing: a name twice is an error.
inline void add_name(std::unordered_set<std::string>& seen, const std::string& name, const std::string& path,
                     std::string_view where) {
  if (!seen.emplace(name).second) fail_file(path, "tensor '" + name + "' appears twice in the " + std::string(where));
}

// Entries sorted by offset must not share bytes (a crafted file could alias them).
inline void check_no_overlap(const std::vector<tensor_entry>& by_offset, const std::string& path) {
  const tensor_entry* prev = nullptr;
  for (const auto& t : by_offset) {  // sorted by offset
    if (t.nbytes == 0 && t.where == tensor_entry::storage::in_place) continue;
    if (prev != nullptr) {
      const std::uint64_t prev_end = prev->offset + (prev->where == tensor_entry::storage::in_place ? prev->nbytes : prev->compressed_size);
      if (prev_end > t.offset) {
        fail_file(path, "tensors '" + prev->name + "' and '" + t.name + "' overlap in the file; the file is damaged or crafted");
      }
    }
    prev = &t;
  }
}

}  // namespace detail

}  // namespace mldiag::cli
