// SPDX-License-Identifier: Apache-2.0
/// The chunk table: a list of tensors cut into fixed chunks, grouped by dtype (host and CUDA).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detail {

// Logical elements [begin, end) of tensor `tensor`. Plain data: the CUDA plan copies an
// array of these to the device as it is.
struct chunk {
  std::uint32_t tensor;
  std::uint32_t reserved;  // keeps the layout the same on host and device (24 bytes)
  std::uint64_t begin;
  std::uint64_t end;
};
static_assert(sizeof(chunk) == 24);

// Every tensor of a list cut into chunks of `chunk_elems` elements (the last one shorter),
// grouped by dtype so that one launch (or one loop) serves a dtype group. Within a group
// chunks follow the list order, then index order, so each tensor's chunks are contiguous:
// merging them in table order is the fixed merge order.
struct chunk_table {
  std::vector<chunk> chunks;
  // Chunks of dtype d are [group_begin[d], group_begin[d + 1]).
  std::array<std::size_t, dtype_count + 1> group_begin{};
  // Tensor i's chunks are [first[i], first[i] + count[i]) (count 0 for an empty tensor).
  std::vector<std::size_t> first, count;

  [[nodiscard]] std::size_t group_size(dtype d) const noexcept {
    const auto k = static_cast<std::size_t>(d);
    return group_begin[k + 1] - group_begin[k];
  }
};

inline chunk_table make_chunk_table(std::span<const tensor_ref> tensors, std::uint64_t chunk_elems) {
  if (tensors.size() > UINT32_MAX) {
    throw error("chunk table: more than 2^32 tensors in one list; split the list");
  }
  chunk_table table;
  table.first.assign(tensors.size(), 0);
  table.count.assign(tensors.size(), 0);
  std::size_t total = 0;
  for (const auto& t : tensors) total += static_cast<std::size_t>((t.numel() + chunk_elems - 1) / chunk_elems);
  table.chunks.reserve(total);
  for (int d = 0; d < dtype_count; ++d) {
    table.group_begin[static_cast<std::size_t>(d)] = table.chunks.size();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (static_cast<int>(tensors[i].dtype()) != d) continue;
      table.first[i] = table.chunks.size();
      for (std::uint64_t b = 0; b < tensors[i].numel(); b += chunk_elems) {
        const std::uint64_t e = tensors[i].numel() - b < chunk_elems ? tensors[i].numel() : b + chunk_elems;
        table.chunks.push_back({static_cast<std::uint32_t>(i), 0, b, e});
      }
      table.count[i] = table.chunks.size() - table.first[i];
    }
  }
  table.group_begin[dtype_count] = table.chunks.size();
  return table;
}

}  // namespace mldiag::detail
