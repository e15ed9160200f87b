// SPDX-License-Identifier: Apache-2.0
/// `update_stats`: the statistics of a parameter's update over a step, fused with keeping the
/// previous value (issue 18).
#pragma once

#include "mldiag/core/element_types.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>  // std::memcpy
#include <span>
#include <string>
#include <type_traits>

namespace mldiag {
namespace detail {

// The statistics of current - previous, computed in float (double for float64 parameters) one
// block at a time through a buffer on the stack, with previous = current as it goes. Blocks and
// units are merged as compute_stats merges them, so for float and double the result is bit for
// bit compute_stats of the difference tensor a framework's `sub` would produce.
template <class T>
tensor_stats update_stats_typed(T* previous, const T* current, std::size_t n) noexcept {
  using wide = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using F = std::conditional_t<std::is_same_v<T, double>, fmt_f64, fmt_f32>;
  std::array<wide, block_elems> d;  // 16 KiB (32 for float64): stays in L1
  tensor_stats total;
  for (std::size_t unit = 0; unit < n; unit += unit_elems) {
    tensor_stats u;
    const std::size_t unit_end = std::min(n, unit + unit_elems);
    for (std::size_t b = unit; b < unit_end; b += block_elems) {
      const std::size_t m = std::min(block_elems, unit_end - b);
      for (std::size_t i = 0; i < m; ++i) {
        d[i] = static_cast<wide>(current[b + i]) - static_cast<wide>(previous[b + i]);
      }
      std::memcpy(previous + b, current + b, m * sizeof(T));
      u.merge(block_stats<F>(d.data(), m));
    }
    total.merge(u);
  }
  return total;
}

}  // namespace detail

/// The statistics of `current - previous` — a parameter's update over a step — and then
/// `previous = current`, in one pass over both and without a third buffer: what a training loop
/// would otherwise do with a subtraction into a kept tensor and a copy (two framework calls per
/// parameter; on the examples' transformer those two cost more than every other statistic).
/// The difference is formed in float (double for float64 parameters), so for bf16 and fp16
/// parameters it is the exact difference rather than a rounded one. For float and double the
/// result equals `compute_stats` of the difference tensor, bit for bit. Throws `mldiag::error`
/// when the sizes differ.
///
/// **Example**
/// ```cpp
/// std::vector<float> previous = w;                 // once, at the start
/// ...                                              // the optimizer moves w
/// mon.observe(mldiag::role::update, "w", mldiag::update_stats(std::span(previous), std::span<const float>(w)));
/// ```
template <class T>
  requires std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16> ||
           std::is_same_v<T, half>
[[nodiscard]] tensor_stats update_stats(std::span<T> previous, std::span<const T> current) {
  if (previous.size() != current.size()) {
    throw error("update_stats: the previous values hold " + std::to_string(previous.size()) +
                " elements and the current ones " + std::to_string(current.size()) +
                "; keep a copy of the parameter of the same size (rebuild it when the model changes)");
  }
  return detail::update_stats_typed(previous.data(), current.data(), current.size());
}

}  // namespace mldiag
