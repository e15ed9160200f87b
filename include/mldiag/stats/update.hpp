// SPDX-License-Identifier: Apache-2.0
/// `update_stats`: the statistics of a parameter's update over a step, fused with keeping the
/// previous value (issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
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

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

// d = current - previous and previous = current over one block, in vectors of L floats. The
// subtraction is one IEEE rounding in any width, so every ISA gives the same bits.
template <std::size_t L>
[[gnu::always_inline]] inline void difference_and_keep(float* previous, const float* current, float* d,
                                                       std::size_t m) noexcept {
  std::size_t i = 0;
#ifdef MLDIAG_HOST_VECTORS
  typedef float v __attribute__((vector_size(L * 4)));
  for (; i + L <= m; i += L) {
    v c, p;
    std::memcpy(&c, current + i, sizeof c);
    std::memcpy(&p, previous + i, sizeof p);
    const v r = c - p;
    std::memcpy(d + i, &r, sizeof r);
    std::memcpy(previous + i, &c, sizeof c);
  }
#endif
  for (; i < m; ++i) {
    d[i] = current[i] - previous[i];
    previous[i] = current[i];
  }
}
#ifdef MLDIAG_HOST_DISPATCH
[[gnu::target("avx2,fma")]] inline void difference_and_keep_avx2(float* previous, const float* current, float* d,
                                                                 std::size_t m) noexcept {
  difference_and_keep<8>(previous, current, d, m);
}
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline void difference_and_keep_avx512(
    float* previous, const float* current, float* d, std::size_t m) noexcept {
  difference_and_keep<16>(previous, current, d, m);
}
#endif

// One block's difference into `d` (float; double for float64 parameters), and previous =
// current. float goes through the widest vector unit (the plain loop is built for the
// compile target, SSE2 in a default x86-64 build; issue 18); the narrow formats widen element
// by element, and their difference is exact in float.
template <class T, class Wide>
inline void block_difference(T* previous, const T* current, Wide* d, std::size_t m) noexcept {
  if constexpr (std::is_same_v<T, float>) {
#ifdef MLDIAG_HOST_DISPATCH
    switch (active_host_isa()) {
      case host_isa::avx512_bf16:
      case host_isa::avx512: difference_and_keep_avx512(previous, current, d, m); return;
      case host_isa::avx2: difference_and_keep_avx2(previous, current, d, m); return;
      case host_isa::portable: break;
    }
#endif
    difference_and_keep<lanes>(previous, current, d, m);
  } else {
    for (std::size_t i = 0; i < m; ++i) d[i] = static_cast<Wide>(current[i]) - static_cast<Wide>(previous[i]);
    std::memcpy(previous, current, m * sizeof(T));
  }
}

inline void require_same_size(std::size_t previous, std::size_t current, const char* who) {
  if (previous != current) {
    throw error(std::string(who) + ": the previous values hold " + std::to_string(previous) +
                " elements and the current ones " + std::to_string(current) +
                "; keep a copy of the parameter of the same size (rebuild it when the model changes)");
  }
}

// The statistics of current - previous, computed in float (double for float64 parameters) one
// block at a time through a buffer on the stack, with previous = current as it goes; and, when
// `current_total` is given, the statistics of current too, from the same pass (each block is
// read from memory once, and its second reading comes from L1). Blocks and units are merged as
// compute_stats merges them, so the current's statistics are compute_stats(current) bit for
// bit, and for float and double the update's are compute_stats of the difference tensor a
// framework's `sub` would produce.
template <class T>
tensor_stats update_stats_typed(T* previous, const T* current, std::size_t n,
                                tensor_stats* current_total = nullptr) noexcept {
  using wide = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using F = std::conditional_t<std::is_same_v<T, double>, fmt_f64, fmt_f32>;
  using G = std::conditional_t<
      std::is_same_v<T, double>, fmt_f64,
      std::conditional_t<std::is_same_v<T, float>, fmt_f32, std::conditional_t<std::is_same_v<T, bfloat16>, fmt_bf16, fmt_f16>>>;
  std::array<wide, block_elems> d;  // 16 KiB (32 for float64): stays in L1
  tensor_stats total;
  for (std::size_t unit = 0; unit < n; unit += unit_elems) {
    tensor_stats u, c;
    const std::size_t unit_end = std::min(n, unit + unit_elems);
    for (std::size_t b = unit; b < unit_end; b += block_elems) {
      const std::size_t m = std::min(block_elems, unit_end - b);
      if (current_total != nullptr) c.merge(block_stats<G>(current + b, m));
      block_difference(previous + b, current + b, d.data(), m);
      u.merge(block_stats<F>(d.data(), m));
    }
    total.merge(u);
    if (current_total != nullptr) current_total->merge(c);
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
  detail::require_same_size(previous.size(), current.size(), "update_stats");
  return detail::update_stats_typed(previous.data(), current.data(), current.size());
}

/// A parameter's statistics and its update's over a step, from one pass over memory: what
/// `compute_stats(current)` and `update_stats(previous, current)` return, bit for bit, with
/// `current` read from memory once instead of twice (the example transformer's 80 parameters,
/// out of cache: 149 µs against 174 for the two calls; docs/benchmarks.md, issue 18).
struct parameter_update_stats {
  tensor_stats parameter;  ///< compute_stats(current)
  tensor_stats update;     ///< the statistics of current - previous
};

/// `compute_stats(current)` and `update_stats(previous, current)` in one pass, and then
/// `previous = current`. Throws `mldiag::error` when the sizes differ.
///
/// **Example**
/// ```cpp
/// const auto s = mldiag::parameter_and_update_stats(std::span(previous), std::span<const float>(w));
/// mon.observe(mldiag::role::parameter, "w", s.parameter);
/// mon.observe(mldiag::role::update, "w", s.update);
/// ```
template <class T>
  requires std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16> ||
           std::is_same_v<T, half>
[[nodiscard]] parameter_update_stats parameter_and_update_stats(std::span<T> previous, std::span<const T> current) {
  detail::require_same_size(previous.size(), current.size(), "parameter_and_update_stats");
  parameter_update_stats out;
  out.update = detail::update_stats_typed(previous.data(), current.data(), current.size(), &out.parameter);
  return out;
}

}  // namespace mldiag
