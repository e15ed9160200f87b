// SPDX-License-Identifier: Apache-2.0
/// A snapshot as merge cells and back: snapshot_layout, missing_keys, pack, unpack.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/distributed/cell.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::distributed {

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

}  // namespace mldiag::distributed
