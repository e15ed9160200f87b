// SPDX-License-Identifier: Apache-2.0
/// One value merged across ranks: sharding, merge_options, merge_report, `cell` and `combine`.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"
#include "mldiag/vocab/role.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::distributed {

/// How a tensor's statistics combine across ranks.
enum class sharding : std::uint8_t {
  /// Each rank holds a different part (a shard of a weight in tensor parallelism or FSDP, a
  /// slice of the global batch for activations): the statistics merge into those of the
  /// whole tensor.
  sharded,
  /// Each rank holds the whole tensor (data parallelism after the gradient all-reduce): the
  /// lowest rank's statistics are kept, and ranks whose statistics differ bitwise are
  /// reported (`merge_report::replica_mismatches`): replicas that drift apart are a bug.
  replicated,
};

/// What the snapshot merge does with each role. Presets for the common layouts; the
/// per-tensor override is asked once per tensor name (when the ranks agree on a layout),
/// never per step.
struct merge_options {
  /// Indexed by `role` (gradient, parameter, activation, residual_input, block_output, update,
  /// input). Inputs are each rank's own batch: shards of the global one.
  std::array<sharding, all_roles.size()> roles{sharding::replicated, sharding::replicated, sharding::sharded,
                                               sharding::sharded,    sharding::sharded,    sharding::replicated,
                                               sharding::sharded};
  /// Optional: a different sharding for one tensor (e.g. the replicated LayerNorm weights of
  /// a tensor-parallel block); std::nullopt keeps the role's.
  std::function<std::optional<sharding>(role, std::string_view)> per_tensor;
  /// All-gather each rank's step time into `snapshot::rank_step_times` (for the straggler
  /// detector): the rank's `timings.total` minus `timings.communication` when both are
  /// recorded, else `timings.total` (see docs/distributed.md for why the wait must be left out).
  bool gather_step_times = true;
  /// -1: every rank gets the merged snapshot (one MPI_Allreduce). A rank r >= 0: only rank r
  /// does (one 24-byte MPI_Allreduce that checks the steps and the layout, then MPI_Reduce to
  /// r); the other ranks keep their own snapshot, and their detectors see local evidence.
  int root = -1;

  /// Data parallel: weights, gradients (after their all-reduce) and updates are replicas;
  /// activations are slices of the global batch.
  [[nodiscard]] static merge_options data_parallel() { return {}; }
  /// Tensor parallel (Megatron): weights, gradients and updates are shards; activations are
  /// merged as shards too (column-parallel outputs are; row-parallel outputs after their
  /// all-reduce are replicas: override them with `per_tensor`).
  [[nodiscard]] static merge_options tensor_parallel() {
    merge_options o;
    o.roles[static_cast<std::size_t>(role::gradient)] = sharding::sharded;
    o.roles[static_cast<std::size_t>(role::parameter)] = sharding::sharded;
    o.roles[static_cast<std::size_t>(role::update)] = sharding::sharded;
    return o;
  }
  /// FSDP / ZeRO-3: weights, gradients and updates are flat shards (see flat_shard_pieces);
  /// activations are slices of the global batch.
  [[nodiscard]] static merge_options fully_sharded() { return tensor_parallel(); }
};

/// What one merge found besides the statistics: replicated tensors whose ranks disagree and
/// scalars that should be equal on every rank but are not (learning rate, loss scale).
struct merge_report {
  std::vector<std::pair<role, std::string>> replica_mismatches;
  std::vector<std::string> scalar_mismatches;
  std::size_t cells = 0;        ///< cells in the merged buffer this step
  bool renegotiated = false;    ///< the ranks agreed on a new layout this step
  void clear() noexcept {
    replica_mismatches.clear();
    scalar_mismatches.clear();
    cells = 0;
    renegotiated = false;
  }
};

/// One unit of the merged buffer: a tagged value that merges with the same cell of a higher
/// rank. Trivially copyable, 104 bytes; MPI moves arrays of them as bytes.
struct cell {
  enum class kind : std::uint16_t {
    empty = 0,   ///< this rank has no value: the other side wins
    stats,       ///< tensor_stats, merged (sharded tensors)
    replica,     ///< tensor_stats, lowest rank kept, differences flagged
    entropy,     ///< entropy_stats, merged
    mean,        ///< a[0] = sum, key = number of ranks
    agree,       ///< a[0] = lowest rank's value, a[1] = min, a[2] = max
    maximum,     ///< a[0] = max
    count,       ///< u = sum
    argmax,      ///< the payload of the rank with the largest key (ties: lowest rank)
    router,      ///< a[0] experts, a[1] dead (max), a[2] normalized entropy (min), a[3] max/mean (max), a[4] total load (min)
  };
  kind type = kind::empty;
  std::uint16_t flags = 0;  ///< bit 0: ranks disagreed
  std::int32_t rank = -1;   ///< replica/argmax/agree: the rank whose payload is kept
  double key = 0.0;
  alignas(8) unsigned char payload[sizeof(tensor_stats)] = {};

  static constexpr std::uint16_t disagreed = 1;

  template <class T>
  [[nodiscard]] T get() const noexcept {
    static_assert(sizeof(T) <= sizeof(payload) && std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, payload, sizeof(T));
    return v;
  }
  template <class T>
  void set(const T& v) noexcept {
    static_assert(sizeof(T) <= sizeof(payload) && std::is_trivially_copyable_v<T>);
    std::memcpy(payload, &v, sizeof(T));
  }
  [[nodiscard]] std::array<double, 11> values() const noexcept { return get<std::array<double, 11>>(); }
};
static_assert(std::is_trivially_copyable_v<cell>);
static_assert(sizeof(cell) == 104, "the wire format of the snapshot merge is 104 bytes a cell");

namespace detail {

inline bool same_bits(double a, double b) noexcept { return std::memcmp(&a, &b, sizeof(double)) == 0; }
// Field by field (memcmp of the whole struct would compare its padding), and doubles by their
// bits, so that replicas compare equal exactly when they are identical (-0 and 0 differ).
inline bool same_bits(const tensor_stats& a, const tensor_stats& b) noexcept {
  return a.count == b.count && a.nan == b.nan && a.pos_inf == b.pos_inf && a.neg_inf == b.neg_inf &&
         a.zeros == b.zeros && same_bits(a.min, b.min) && same_bits(a.max, b.max) && same_bits(a.max_abs, b.max_abs) &&
         same_bits(a.mean_scaled, b.mean_scaled) && same_bits(a.m2_scaled, b.m2_scaled) && a.scale_exp == b.scale_exp;
}

}  // namespace detail

/// Merges `lo` (the lower ranks) into `hi` (the higher ranks): the result is left in `hi`,
/// as MPI's non-commutative user operations expect (`inoutvec = invec op inoutvec`).
inline void combine(const cell& lo, cell& hi) noexcept {
  using k = cell::kind;
  if (lo.type == k::empty) return;
  if (hi.type == k::empty) {
    hi = lo;
    return;
  }
  if (lo.type != hi.type) {  // cannot happen with an agreed layout; keep the lower rank's
    hi = lo;
    hi.flags |= cell::disagreed;
    return;
  }
  const auto a = lo.values();
  auto b = hi.values();
  hi.flags = static_cast<std::uint16_t>(hi.flags | lo.flags);
  switch (lo.type) {
    case k::empty: break;
    case k::stats: {
      tensor_stats s = lo.get<tensor_stats>();
      s.merge(hi.get<tensor_stats>());
      hi.set(s);
      break;
    }
    case k::replica:
      if (!detail::same_bits(lo.get<tensor_stats>(), hi.get<tensor_stats>())) hi.flags |= cell::disagreed;
      hi.set(lo.get<tensor_stats>());
      hi.rank = lo.rank;
      break;
    case k::entropy: {
      entropy_stats e = lo.get<entropy_stats>();
      e.merge(hi.get<entropy_stats>());
      hi.set(e);
      break;
    }
    case k::mean:
      b[0] = a[0] + b[0];
      hi.key = lo.key + hi.key;
      hi.set(b);
      break;
    case k::agree:
      if (std::memcmp(&a[0], &b[0], sizeof(double)) != 0) hi.flags |= cell::disagreed;
      b[0] = a[0];
      b[1] = std::min(a[1], b[1]);
      b[2] = std::max(a[2], b[2]);
      hi.rank = lo.rank;
      hi.set(b);
      break;
    case k::maximum:
      b[0] = std::max(a[0], b[0]);
      hi.set(b);
      break;
    case k::count: hi.set(lo.get<std::uint64_t>() + hi.get<std::uint64_t>()); break;
    case k::argmax:
      if (lo.key >= hi.key) {
        const auto f = hi.flags;
        hi = lo;
        hi.flags = f;
      }
      break;
    case k::router:
      b[0] = std::max(a[0], b[0]);
      b[1] = std::max(a[1], b[1]);
      b[2] = std::min(a[2], b[2]);
      b[3] = std::max(a[3], b[3]);
      b[4] = std::min(a[4], b[4]);
      hi.set(b);
      break;
  }
}

/// Merges arrays of cells: `hi[i] = lo[i] op hi[i]`.
inline void combine(std::span<const cell> lo, std::span<cell> hi) noexcept {
  for (std::size_t i = 0; i < lo.size() && i < hi.size(); ++i) combine(lo[i], hi[i]);
}

}  // namespace mldiag::distributed
