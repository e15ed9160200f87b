// SPDX-License-Identifier: Apache-2.0
/// `stats_plan`: statistics of every tensor in a list, plus their total, on a host_engine.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/chunk_table.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/guided_units.hpp"
#include "mldiag/stats/host_engine.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// A plan for the statistics of a fixed list of host tensors (hundreds of them, any sizes
/// and dtypes): built once, it validates the tensors, copies their names, cuts them into fixed
/// units of work and allocates every result. `compute()` then allocates nothing.
///
/// Determinism: each tensor is cut into units of 65536 elements and blocks of 4096; a unit
/// merges its blocks in order, a tensor its units in order, the total its tensors in list
/// order. Threads only decide who computes a unit, so the results are bit-identical for any
/// number of threads, run to run, and equal to `compute_stats` of each tensor alone.
///
/// The plan refers to the tensors' memory; `rebind()` points a tensor at new memory of the
/// same dtype and size (a buffer that moved between steps) without building a new plan.
///
/// **Example**
/// ```cpp
/// std::vector<mldiag::tensor_ref> grads = ...;   // name, pointer, count, dtype
/// mldiag::stats_plan plan(grads);                  // once
/// mldiag::host_engine engine(2);                   // once
/// for (;;) {                                       // every step
///   plan.compute(engine);
///   double norm = plan.total().l2_norm();          // the global gradient norm
///   for (std::size_t i = 0; i < plan.size(); ++i)
///     if (plan[i].non_finite() > 0) report(plan.name(i), plan[i]);
/// }
/// ```
class stats_plan {
 public:
  explicit stats_plan(std::span<const tensor_ref> tensors) {
    tensors_.reserve(tensors.size());
    names_.reserve(tensors.size());
    for (const auto& t : tensors) {
      detail::require_host(t, "stats_plan");
      names_.emplace_back(t.name());
    }
    // The tensor_refs keep views of the caller's names; point them at our copies instead.
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      tensors_.push_back(remade(tensors[i], names_[i], tensors[i].data()));
    }
    table_ = detail::make_chunk_table(tensors_, detail::unit_elems);
    unit_results_.resize(table_.chunks.size());
    results_.resize(tensors_.size());
  }
  stats_plan(std::initializer_list<tensor_ref> tensors)
      : stats_plan(std::span<const tensor_ref>(tensors.begin(), tensors.size())) {}
  // Moving keeps the names where they are (a vector's move keeps its elements); a copy would
  // leave the copied tensor_refs naming the original's strings.
  stats_plan(stats_plan&&) noexcept = default;
  stats_plan& operator=(stats_plan&&) noexcept = default;
  stats_plan(const stats_plan&) = delete;
  stats_plan& operator=(const stats_plan&) = delete;

  /// Computes every tensor's statistics and the total on `engine`'s threads. No allocation,
  /// no thread started; results are ready when it returns.
  void compute(host_engine& engine) noexcept {
    detail::guided_units units(table_.chunks.size(), engine.threads());
    auto job = [&](unsigned) {
      std::size_t begin = 0, end = 0;
      while (units.take(begin, end)) {
        for (std::size_t u = begin; u < end; ++u) {
          const auto& c = table_.chunks[u];
          unit_results_[u] = detail::range_stats(tensors_[c.tensor], c.begin, c.end);
        }
      }
    };
    engine.run(job);
    total_ = {};
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      tensor_stats s;
      for (std::size_t k = 0; k < table_.count[i]; ++k) s.merge(unit_results_[table_.first[i] + k]);
      results_[i] = s;
      total_.merge(s);
    }
  }

  /// Points tensor `i` at new memory holding the same number of elements of the same dtype
  /// and layout. Throws `mldiag::error` for a null pointer with elements.
  void rebind(std::size_t i, const void* data) {
    if (i >= tensors_.size()) {
      throw error("stats_plan::rebind: index " + std::to_string(i) + " but the plan has " +
                  std::to_string(tensors_.size()) + " tensors");
    }
    tensors_[i] = remade(tensors_[i], names_[i], data);
  }

  [[nodiscard]] std::size_t size() const noexcept { return tensors_.size(); }
  /// Statistics of tensor `i` after the last `compute()`.
  [[nodiscard]] const tensor_stats& operator[](std::size_t i) const noexcept { return results_[i]; }
  [[nodiscard]] std::span<const tensor_stats> per_tensor() const noexcept { return results_; }
  /// All tensors merged, in list order (e.g. the global gradient norm).
  [[nodiscard]] const tensor_stats& total() const noexcept { return total_; }
  [[nodiscard]] std::string_view name(std::size_t i) const noexcept { return names_[i]; }
  [[nodiscard]] const tensor_ref& tensor(std::size_t i) const noexcept { return tensors_[i]; }
  /// Units of work (the plan's chunk table): about numel / 65536 per tensor, at least one
  /// per non-empty tensor.
  [[nodiscard]] std::size_t unit_count() const noexcept { return table_.chunks.size(); }

 private:
  // The same tensor with another name and pointer (validated again).
  static tensor_ref remade(const tensor_ref& t, std::string_view name, const void* data) {
    if (t.is_contiguous()) {
      return tensor_ref(name, data, static_cast<std::int64_t>(t.numel()), t.dtype(), t.device());
    }
    const auto& l = t.layout();
    const auto r = static_cast<std::size_t>(l.rank);
    return tensor_ref(name, data, t.dtype(), std::span<const std::int64_t>(l.extents.data(), r),
                      std::span<const std::int64_t>(l.strides.data(), r), -1, t.device());
  }

  std::vector<tensor_ref> tensors_;
  std::vector<std::string> names_;
  detail::chunk_table table_;
  std::vector<tensor_stats> unit_results_;
  std::vector<tensor_stats> results_;
  tensor_stats total_;
};

}  // namespace mldiag
