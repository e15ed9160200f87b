// SPDX-License-Identifier: Apache-2.0
/// Which part of which tensor a rank holds: FSDP flat shards and even row/column splits.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::distributed {

/// One tensor's elements inside a rank's flat shard: elements [begin, begin + length) of
/// tensor `tensor` (in its flattened order) sit at [local_offset, local_offset + length) of
/// the rank's shard buffer.
struct shard_piece {
  std::size_t tensor = 0;
  std::int64_t begin = 0;
  std::int64_t length = 0;
  std::int64_t local_offset = 0;
  friend bool operator==(const shard_piece&, const shard_piece&) = default;
};

/// The pieces of FSDP's flat parameter that rank `rank` of `world` holds. FSDP (PyTorch's
/// FullyShardedDataParallel, and ZeRO-3 alike) concatenates the flattened tensors of a unit,
/// pads the total to a multiple of `world` and gives rank r the elements
/// [r * S, (r + 1) * S) with S = ceil(total / world). The padding is not part of any tensor
/// and is left out here, so statistics of the pieces merge across ranks into the statistics
/// of the unsharded tensors (padding zeros would inflate `count` and `zeros`).
///
/// **Example**
/// ```cpp
/// // tensors of 6 and 3 elements over 2 ranks: S = 5 (9 padded to 10)
/// auto p = mldiag::distributed::flat_shard_pieces(std::vector<std::int64_t>{6, 3}, 1, 2);
/// // p = {{tensor 0, begin 5, length 1, local 0}, {tensor 1, begin 0, length 3, local 1}}
/// ```
[[nodiscard]] inline std::vector<shard_piece> flat_shard_pieces(std::span<const std::int64_t> numels, int rank,
                                                                int world) {
  if (world <= 0) throw error("flat_shard_pieces: world size " + std::to_string(world) + "; pass the number of ranks (>= 1)");
  if (rank < 0 || rank >= world)
    throw error("flat_shard_pieces: rank " + std::to_string(rank) + " outside [0, " + std::to_string(world) +
                "); pass this rank's index in the sharding group");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] < 0)
      throw error("flat_shard_pieces: tensor " + std::to_string(i) + " has " + std::to_string(numels[i]) +
                  " elements; pass each tensor's element count (>= 0)");
    total += numels[i];
  }
  const std::int64_t w = world;
  const std::int64_t shard = (total + w - 1) / w;
  const std::int64_t lo = shard * rank;
  const std::int64_t hi = lo + shard;
  std::vector<shard_piece> out;
  std::int64_t start = 0;  // of tensor i in the flat parameter
  for (std::size_t i = 0; i < numels.size(); start += numels[i], ++i) {
    const std::int64_t a = start > lo ? start : lo;
    const std::int64_t end = start + numels[i];
    const std::int64_t b = end < hi ? end : hi;
    if (a < b) out.push_back({i, a - start, b - a, a - lo});
  }
  return out;
}

/// The part [begin, end) of `n` items (rows, columns, heads) that rank `rank` of `world`
/// holds when they are split evenly and in rank order: the first n % world ranks hold one
/// more. Tensor parallelism usually requires n % world == 0, where this is n / world each.
struct index_range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const noexcept { return end - begin; }
};
[[nodiscard]] inline index_range even_split(std::int64_t n, int rank, int world) {
  if (world <= 0 || rank < 0 || rank >= world || n < 0)
    throw error("even_split: need n >= 0 and 0 <= rank < world (got n " + std::to_string(n) + ", rank " +
                std::to_string(rank) + ", world " + std::to_string(world) + ")");
  const std::int64_t w = world;
  const std::int64_t base = n / w;
  const std::int64_t extra = n % w;
  const std::int64_t begin = rank * base + (rank < extra ? rank : extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace mldiag::distributed
