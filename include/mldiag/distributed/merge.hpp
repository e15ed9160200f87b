// SPDX-License-Identifier: Apache-2.0
/// The algebra of merging snapshots and findings across ranks, without the transport: cells
/// that merge in rank order, the snapshot layout the ranks agree on, and finding dedup.
/// `distributed/mpi.hpp` moves these bytes with MPI; everything here is plain C++.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag::distributed {

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

/// Where each piece of a snapshot goes in the merged buffer, agreed by all ranks: a fixed
/// header (step, loss, learning rate, timings, memory, efficiency) and one cell per
/// (kind, name) that any rank has observed, in the order the ranks first showed them (rank 0's
/// first). Layouts only grow: a tensor a rank does not have this step is an empty cell.
class snapshot_layout {
 public:
  /// What a keyed cell holds: the roles (0-6), then drift, attention entropy, routers, layer times.
  static constexpr std::uint8_t role_slots = static_cast<std::uint8_t>(all_roles.size());
  enum class slot : std::uint8_t { drift = role_slots, attention, router, layer_time };
  static constexpr std::size_t slots = role_slots + 4u;

  // The header cells.
  enum header_cell : std::size_t {
    h_step, h_unknown, h_loss, h_val_loss, h_lr, h_loss_scale, h_grad_norm, h_grad_cosine, h_grad_increment_cosine,
    h_data_wait, h_forward, h_backward, h_optimizer, h_communication, h_total,
    h_memory, h_efficiency, header_cells
  };

  struct key {
    std::uint8_t slot;  ///< a role (0-6) or a snapshot_layout::slot
    std::string name;
  };

  [[nodiscard]] std::size_t size() const noexcept { return header_cells + keys_.size(); }
  [[nodiscard]] std::span<const key> keys() const noexcept { return keys_; }
  [[nodiscard]] std::span<const sharding> shardings() const noexcept { return sharding_; }

  /// Adds `k` (if new) and returns its cell index. `names` gets the name interned, so that
  /// a rank that never saw this tensor can hold its merged statistics under a local id.
  std::size_t add(const key& k, name_table& names, const merge_options& options) {
    const std::uint32_t id = names.intern(k.name);
    auto& ids = index_[k.slot];
    if (ids.size() <= id) ids.resize(id + 1, npos);
    if (ids[id] != npos) return ids[id];
    ids[id] = size();
    keys_.push_back(k);
    ids_.push_back(id);
    sharding s = sharding::sharded;
    if (k.slot < role_slots) {
      const auto r = static_cast<role>(k.slot);
      s = options.roles[k.slot];
      if (options.per_tensor)
        if (const auto o = options.per_tensor(r, k.name)) s = *o;
    }
    sharding_.push_back(s);
    return ids[id];
  }
  /// The cell of local name id `id` in `slot`, or npos when the layout lacks it.
  [[nodiscard]] std::size_t find(std::uint8_t slot_index, std::uint32_t id) const noexcept {
    const auto& ids = index_[slot_index];
    return id < ids.size() ? ids[id] : npos;
  }
  /// The local name id of keyed cell `c` (c >= header_cells).
  [[nodiscard]] std::uint32_t local_id(std::size_t c) const noexcept { return ids_[c - header_cells]; }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  std::vector<key> keys_;
  std::vector<std::uint32_t> ids_;
  std::vector<sharding> sharding_;
  std::array<std::vector<std::size_t>, slots> index_;
};

namespace detail {

// `present`: the value was observed on this rank. A NaN that was observed (a loss, a gradient
// norm) is evidence and travels; timings and memory use NaN for "not measured".
inline cell scalar_cell(cell::kind k, double v, int rank, bool present) noexcept {
  cell c;
  if (!present) return c;
  c.type = k;
  c.rank = rank;
  std::array<double, 11> a{};
  a[0] = a[1] = a[2] = v;
  c.key = 1.0;
  c.set(a);
  return c;
}

// Absent values travel as NaN: the wire holds doubles, and the fixed 104-byte cell has no
// room for optional's flags (a memory record is 8 values).
inline double to_wire(const std::optional<double>& v) noexcept { return v.value_or(std::numeric_limits<double>::quiet_NaN()); }
inline std::optional<double> from_wire(double v) noexcept { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }
inline std::array<double, 8> to_wire(const memory_evidence& m) noexcept {
  return {to_wire(m.allocated), to_wire(m.reserved), to_wire(m.peak), to_wire(m.capacity),
          to_wire(m.largest_free_block), to_wire(m.used), to_wire(m.host_rss), to_wire(m.host_rss_peak)};
}
inline memory_evidence memory_from_wire(const std::array<double, 8>& a) noexcept {
  return {from_wire(a[0]), from_wire(a[1]), from_wire(a[2]), from_wire(a[3]),
          from_wire(a[4]), from_wire(a[5]), from_wire(a[6]), from_wire(a[7])};
}
inline std::array<double, 6> to_wire(const efficiency_evidence& e) noexcept {
  return {to_wire(e.mfu), to_wire(e.tensor_core_activity), to_wire(e.throughput), to_wire(e.throughput_target),
          to_wire(e.communication_bytes), to_wire(e.link_bandwidth)};
}
inline efficiency_evidence efficiency_from_wire(const std::array<double, 6>& a) noexcept {
  return {from_wire(a[0]), from_wire(a[1]), from_wire(a[2]), from_wire(a[3]), from_wire(a[4]), from_wire(a[5])};
}
template <std::size_t N>
inline bool all_nan(const std::array<double, N>& v) noexcept {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

// The key that ranks a rank's whole record: larger is worse. NaN ranks last.
inline double worst_key(double v) noexcept { return std::isnan(v) ? -HUGE_VAL : v; }

}  // namespace detail

/// The names (slot, name) in `s` that `layout` lacks, each once, in snapshot order.
[[nodiscard]] inline std::vector<snapshot_layout::key> missing_keys(const snapshot& s, const name_table& names,
                                                                  const snapshot_layout& layout) {
  std::vector<snapshot_layout::key> out;
  auto note = [&](std::uint8_t slot, std::uint32_t id) {
    if (layout.find(slot, id) != snapshot_layout::npos) return;
    for (const auto& k : out)
      if (k.slot == slot && k.name == names[id]) return;
    out.push_back({slot, std::string(names[id])});
  };
  for (std::uint8_t r = 0; r < snapshot_layout::role_slots; ++r)
    for (const auto& t : s.of(static_cast<role>(r))) note(r, t.id);
  for (const auto& [id, v] : s.drift) note(static_cast<std::uint8_t>(snapshot_layout::slot::drift), id);
  for (const auto& e : s.attention) note(static_cast<std::uint8_t>(snapshot_layout::slot::attention), e.id);
  for (const auto& r : s.routers) note(static_cast<std::uint8_t>(snapshot_layout::slot::router), r.id);
  for (const auto& l : s.layer_times) note(static_cast<std::uint8_t>(snapshot_layout::slot::layer_time), l.id);
  return out;
}

/// Packs this rank's snapshot into `out` (resized to the layout). Returns the number of
/// pieces the layout lacks (also stored in the h_unknown cell, so that after the merge every
/// rank knows whether any rank needs a new layout).
inline std::uint64_t pack(const snapshot& s, int rank, const snapshot_layout& layout,
                          std::vector<cell>& out) {
  using k = cell::kind;
  using L = snapshot_layout;
  out.assign(layout.size(), cell{});
  std::uint64_t unknown = 0;
  // The step is always present (-1 included) so that ranks at different steps show.
  out[L::h_step] = detail::scalar_cell(k::agree, static_cast<double>(s.step), rank, true);
  const auto value_cell = [&](cell::kind kind, const std::optional<double>& v) {
    return detail::scalar_cell(kind, v.value_or(0.0), rank, v.has_value());
  };
  out[L::h_loss] = value_cell(k::mean, s.loss);
  out[L::h_val_loss] = value_cell(k::mean, s.val_loss);
  out[L::h_lr] = value_cell(k::agree, s.lr);
  out[L::h_loss_scale] = value_cell(k::agree, s.loss_scale);
  // The gradient norm a framework reports (clip_grad_norm_'s return value, Megatron's) is the
  // global one on every rank, sharded or not: it must agree. The norm of sharded gradients
  // observed as tensors comes from the merged tensors (snapshot::global_grad_norm).
  out[L::h_grad_norm] = value_cell(k::agree, s.grad_norm);
  // The cosine between consecutive steps' gradients: equal on every data-parallel replica;
  // with sharded gradients each rank sees its shard's, and the mean stands for the whole.
  out[L::h_grad_cosine] = value_cell(k::mean, s.grad_cosine);
  out[L::h_grad_increment_cosine] = value_cell(k::mean, s.grad_increment_cosine);
  const auto& t = s.timings;
  std::size_t h = L::h_data_wait;
  for (const auto* v : {&t.data_wait, &t.forward, &t.backward, &t.optimizer, &t.communication, &t.total})
    out[h++] = value_cell(k::maximum, *v);
  if (const auto m = detail::to_wire(s.memory); !detail::all_nan(m)) {
    cell& c = out[L::h_memory];
    c.type = k::argmax;
    c.rank = rank;
    c.key = detail::worst_key(detail::to_wire(s.memory.fill()));
    c.set(m);
  }
  if (const auto e = detail::to_wire(s.efficiency); !detail::all_nan(e)) {
    cell& c = out[L::h_efficiency];
    c.type = k::argmax;
    c.rank = rank;
    c.key = detail::worst_key(-detail::to_wire(s.efficiency.mfu));  // the least utilized rank's record
    c.set(e);
  }
  auto place = [&](std::uint8_t slot, std::uint32_t id) -> cell* {
    const std::size_t i = layout.find(slot, id);
    if (i == L::npos) {
      ++unknown;
      return nullptr;
    }
    return &out[i];
  };
  for (std::uint8_t r = 0; r < snapshot_layout::role_slots; ++r) {
    for (const auto& te : s.of(static_cast<role>(r))) {
      cell* c = place(r, te.id);
      if (c == nullptr) continue;
      const std::size_t i = static_cast<std::size_t>(c - out.data());
      const bool sharded = layout.shardings()[i - L::header_cells] == sharding::sharded;
      if (c->type == k::stats && sharded) {  // observed twice in one step: both parts count
        tensor_stats merged = c->get<tensor_stats>();
        merged.merge(te.stats);
        c->set(merged);
        continue;
      }
      c->type = sharded ? k::stats : k::replica;
      c->rank = rank;
      c->set(te.stats);
    }
  }
  for (const auto& [id, v] : s.drift)
    if (cell* c = place(static_cast<std::uint8_t>(L::slot::drift), id)) *c = detail::scalar_cell(k::maximum, v, rank, true);
  for (const auto& a : s.attention) {
    if (cell* c = place(static_cast<std::uint8_t>(L::slot::attention), a.id)) {
      entropy_stats merged = c->type == k::entropy ? c->get<entropy_stats>() : entropy_stats{};
      merged.merge(a.stats);
      c->type = k::entropy;
      c->rank = rank;
      c->set(merged);
    }
  }
  for (const auto& r : s.routers) {
    if (cell* c = place(static_cast<std::uint8_t>(L::slot::router), r.id)) {
      c->type = k::router;
      c->rank = rank;
      c->set(std::array<double, 5>{static_cast<double>(r.experts), static_cast<double>(r.dead), r.normalized_entropy,
                                   r.max_over_mean, r.total_load});
    }
  }
  for (const auto& l : s.layer_times)
    if (cell* c = place(static_cast<std::uint8_t>(L::slot::layer_time), l.id)) *c = detail::scalar_cell(k::maximum, l.seconds, rank, true);
  out[L::h_unknown].type = k::count;
  out[L::h_unknown].set(unknown);
  return unknown;
}

/// Writes the merged cells back into `s` (every rank gets the same snapshot). Throws
/// mldiag::error when the ranks merged different steps.
inline void unpack(std::span<const cell> merged, const snapshot_layout& layout, snapshot& s, const name_table& names,
                   merge_report& report) {
  using k = cell::kind;
  using L = snapshot_layout;
  const auto value = [&](std::size_t h) { return merged[h].values()[0]; };
  const cell& step = merged[L::h_step];
  if ((step.flags & cell::disagreed) != 0) {
    const auto v = step.values();
    throw error("distributed merge: ranks are at different steps (" + std::to_string(static_cast<std::int64_t>(v[1])) +
                " to " + std::to_string(static_cast<std::int64_t>(v[2])) +
                "); every rank must end the same step together (one merge per step, on all ranks)");
  }
  const auto mean_of = [&](std::size_t h, std::optional<double>& v) {
    v.reset();
    if (merged[h].type == k::mean) v = value(h) / merged[h].key;
  };
  mean_of(L::h_loss, s.loss);
  mean_of(L::h_val_loss, s.val_loss);
  mean_of(L::h_grad_cosine, s.grad_cosine);
  mean_of(L::h_grad_increment_cosine, s.grad_increment_cosine);
  const auto agreed = [&](std::size_t h, const char* what, std::optional<double>& v) {
    const bool has = merged[h].type == k::agree;
    v.reset();
    if (has) v = value(h);
    if (has && (merged[h].flags & cell::disagreed) != 0) {
      const auto a = merged[h].values();
      report.scalar_mismatches.push_back(std::string(what) + " differs across ranks (" + std::to_string(a[1]) + " to " +
                                         std::to_string(a[2]) + ")");
    }
  };
  agreed(L::h_lr, "learning rate", s.lr);
  agreed(L::h_loss_scale, "loss scale", s.loss_scale);
  agreed(L::h_grad_norm, "gradient norm", s.grad_norm);
  const auto max_of = [&](std::size_t h) {
    return merged[h].type == k::maximum ? std::optional<double>(value(h)) : std::nullopt;
  };
  s.timings = {max_of(L::h_data_wait), max_of(L::h_forward),       max_of(L::h_backward),
               max_of(L::h_optimizer), max_of(L::h_communication), max_of(L::h_total)};
  s.memory = merged[L::h_memory].type == k::argmax
                 ? detail::memory_from_wire(merged[L::h_memory].get<std::array<double, 8>>())
                 : memory_evidence{};
  s.efficiency = merged[L::h_efficiency].type == k::argmax
                     ? detail::efficiency_from_wire(merged[L::h_efficiency].get<std::array<double, 6>>())
                     : efficiency_evidence{};

  for (std::uint8_t r = 0; r < snapshot_layout::role_slots; ++r) s.of(static_cast<role>(r)).clear();
  s.drift.clear();
  s.attention.clear();
  s.routers.clear();
  s.layer_times.clear();
  const auto keys = layout.keys();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::size_t c = L::header_cells + i;
    const cell& x = merged[c];
    if (x.type == k::empty) continue;
    const std::uint32_t id = layout.local_id(c);
    const std::uint8_t slot = keys[i].slot;
    if (slot < L::role_slots) {
      if (x.type != k::stats && x.type != k::replica) continue;
      s.of(static_cast<role>(slot)).push_back({id, x.get<tensor_stats>()});
      // A stats cell flagged: ranks sent different kinds (merge_options differ by rank).
      if ((x.flags & cell::disagreed) != 0)
        report.replica_mismatches.emplace_back(static_cast<role>(slot), std::string(names[id]));
    } else if (slot == static_cast<std::uint8_t>(L::slot::drift) && x.type == k::maximum) {
      s.drift.emplace_back(id, x.values()[0]);
    } else if (slot == static_cast<std::uint8_t>(L::slot::attention) && x.type == k::entropy) {
      s.attention.push_back({id, x.get<entropy_stats>()});
    } else if (slot == static_cast<std::uint8_t>(L::slot::router) && x.type == k::router) {
      const auto a = x.values();
      router_evidence r;
      r.id = id;
      r.experts = static_cast<std::uint32_t>(a[0]);
      r.dead = static_cast<std::uint32_t>(a[1]);
      r.normalized_entropy = a[2];
      r.max_over_mean = a[3];
      r.total_load = a[4];
      s.routers.push_back(r);
    } else if (slot == static_cast<std::uint8_t>(L::slot::layer_time) && x.type == k::maximum) {
      s.layer_times.push_back({id, x.values()[0]});
    }
  }
  report.cells = merged.size();
}

/// The step time a rank contributes to the straggler detector: its own work, without the
/// time it spent in communication (where it also waits for the slowest rank).
[[nodiscard]] inline std::optional<double> own_step_time(const step_timings& t) noexcept {
  if (t.total && t.communication) return *t.total - *t.communication;
  return t.total;
}

// ---------------------------------------------------------------------------------------------
// Findings across ranks.

/// A finding and the ranks that reported it (ascending).
struct ranked_finding {
  mldiag::finding finding;
  std::vector<int> ranks;
};

namespace detail {

inline void put_bytes(std::vector<char>& out, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  out.insert(out.end(), c, c + n);
}
template <class T>
void put(std::vector<char>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
inline void put_string(std::vector<char>& out, std::string_view s) {
  put<std::uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

class byte_reader {
 public:
  explicit byte_reader(std::span<const char> b) : b_(b) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    need(n);
    std::string s(b_.data() + at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return s;
  }
  [[nodiscard]] bool done() const noexcept { return at_ == b_.size(); }

 private:
  void need(std::uint64_t n) const {
    if (n > b_.size() - at_)
      throw error("read_findings: the buffer ends early (byte " + std::to_string(at_) + " of " + std::to_string(b_.size()) +
                  "); pass the bytes write_findings produced");
  }
  std::span<const char> b_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// Findings as bytes (to move them between ranks) and back.
inline void write_findings(std::span<const finding> findings, std::vector<char>& out) {
  detail::put<std::uint64_t>(out, findings.size());
  for (const auto& f : findings) {
    detail::put<std::uint8_t>(out, static_cast<std::uint8_t>(f.question));
    detail::put<std::uint8_t>(out, static_cast<std::uint8_t>(f.severity));
    detail::put<std::int64_t>(out, f.first_step);
    detail::put<std::int64_t>(out, f.last_step);
    detail::put_string(out, f.symptom);
    detail::put_string(out, f.detector);
    for (const auto* list : {&f.where, &f.evidence}) {
      detail::put<std::uint64_t>(out, list->size());
      for (const auto& [name, v] : *list) {
        detail::put_string(out, name);
        detail::put<double>(out, v);
      }
    }
  }
}
[[nodiscard]] inline std::vector<finding> read_findings(std::span<const char> bytes) {
  detail::byte_reader in(bytes);
  const auto n = in.get<std::uint64_t>();
  std::vector<finding> out;
  for (std::uint64_t i = 0; i < n; ++i) {
    finding f;
    const auto q = in.get<std::uint8_t>();
    const auto sev = in.get<std::uint8_t>();
    if (q < 1 || q > 3 || sev > 2)
      throw error("read_findings: finding " + std::to_string(i) +
                  " has an unknown question or severity; pass exactly what write_findings produced");
    f.question = static_cast<question>(q);
    f.severity = static_cast<severity>(sev);
    f.first_step = in.get<std::int64_t>();
    f.last_step = in.get<std::int64_t>();
    f.symptom = in.get_string();
    f.detector = in.get_string();
    for (auto* list : {&f.where, &f.evidence}) {
      const auto m = in.get<std::uint64_t>();
      for (std::uint64_t j = 0; j < m; ++j) {
        std::string name = in.get_string();
        list->emplace_back(std::move(name), in.get<double>());
      }
    }
    out.push_back(std::move(f));
  }
  if (!in.done()) throw error("read_findings: bytes left after the last finding; pass exactly what write_findings produced");
  return out;
}

/// One entry per problem: findings of different ranks with the same question, symptom,
/// detector and set of locations are one problem. The merged entry spans the earliest first
/// step to the latest last step, has the highest severity, the locations each with its largest
/// score (highest first) and the evidence of the lowest rank with that severity. Entries
/// come in the order their problem first appears (rank 0's findings first).
///
/// **Example**
/// ```cpp
/// // per_rank[r] = the findings rank r produced
/// auto merged = mldiag::distributed::deduplicate(per_rank);
/// for (const auto& m : merged) fmt::print("{} on ranks {}\n", m.finding.symptom, fmt::join(m.ranks, ","));
/// ```
[[nodiscard]] inline std::vector<ranked_finding> deduplicate(std::span<const std::vector<finding>> per_rank) {
  std::vector<ranked_finding> out;
  std::vector<std::string> keys;
  std::vector<std::string> places;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    for (const auto& f : per_rank[r]) {
      places.clear();
      for (const auto& w : f.where) places.push_back(w.first);
      std::sort(places.begin(), places.end());
      places.erase(std::unique(places.begin(), places.end()), places.end());
      std::string key;
      key.push_back(static_cast<char>(f.question));
      for (const std::string_view part : {std::string_view(f.symptom), std::string_view(f.detector)}) {
        key += std::to_string(part.size());
        key.push_back(':');
        key += part;
      }
      for (const auto& p : places) {
        key += std::to_string(p.size());
        key.push_back(':');
        key += p;
      }
      const auto it = std::find(keys.begin(), keys.end(), key);
      const int rank = static_cast<int>(r);
      if (it == keys.end()) {
        keys.push_back(std::move(key));
        out.push_back({f, {rank}});
        continue;
      }
      auto& m = out[static_cast<std::size_t>(it - keys.begin())];
      if (m.ranks.back() != rank) m.ranks.push_back(rank);
      m.finding.first_step = std::min(m.finding.first_step, f.first_step);
      m.finding.last_step = std::max(m.finding.last_step, f.last_step);
      if (f.severity > m.finding.severity) {
        m.finding.severity = f.severity;
        m.finding.evidence = f.evidence;
      }
      for (const auto& [place, score] : f.where) {  // the same places, by the key
        auto w = std::find_if(m.finding.where.begin(), m.finding.where.end(), [&](const auto& x) { return x.first == place; });
        if (w == m.finding.where.end()) m.finding.where.emplace_back(place, score);
        else w->second = std::max(w->second, score);
      }
      std::stable_sort(m.finding.where.begin(), m.finding.where.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });  // highest score first
    }
  }
  return out;
}

}  // namespace mldiag::distributed
