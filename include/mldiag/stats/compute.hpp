// SPDX-License-Identifier: Apache-2.0
/// `compute_stats`: one pass over a contiguous range of floating-point elements on the host.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>  // std::min, std::max
#include <bit>        // std::bit_cast
#include <cmath>      // std::ldexp, std::frexp
#include <cstddef>    // std::size_t
#include <cstdint>
#include <span>
#include <type_traits>

namespace mldiag {
namespace detail {

// The fixed chunk: results depend on it (it sets the merge tree), never on thread counts.
// 4096 elements = 16 KiB of fp32, small enough that a chunk's second look stays in L1.
inline constexpr std::size_t stats_chunk_elems = 4096;

// The smallest e with |x| < 2^e for every |x| <= max_abs (0 when max_abs is 0).
inline int scale_exponent(double max_abs) noexcept {
  if (max_abs == 0.0) return 0;
  int e = 0;
  (void)std::frexp(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
  return e;
}

template <class T>
struct ieee_bits;
template <>
struct ieee_bits<float> {
  using uint = std::uint32_t;
  static constexpr uint abs_mask = 0x7fffffffu;
  static constexpr uint inf = 0x7f800000u;
};
template <>
struct ieee_bits<double> {
  using uint = std::uint64_t;
  static constexpr uint abs_mask = 0x7fffffffffffffffull;
  static constexpr uint inf = 0x7ff0000000000000ull;
};

// Statistics of one chunk. NaN, Inf and zero are told apart by bit pattern, so the answer
// does not change under -ffast-math. Moments use sums shifted by the chunk's first finite
// value (one pass; the shift keeps cancellation small). float64 values are scaled by
// 2^-e, with e from the chunk's largest magnitude, so that squares cannot overflow.
template <class T>
tensor_stats chunk_stats(const T* x, std::size_t n) noexcept {
  using bits = ieee_bits<T>;
  tensor_stats s;
  s.count = n;
  double lo = s.min, hi = s.max, amax = 0.0;
  std::uint64_t finite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = std::bit_cast<typename bits::uint>(x[i]) & bits::abs_mask;
    if (a >= bits::inf) {
      if (a > bits::inf)
        ++s.nan;
      else if (std::bit_cast<typename bits::uint>(x[i]) == bits::inf)
        ++s.pos_inf;
      else
        ++s.neg_inf;
      continue;
    }
    const double v = static_cast<double>(x[i]);
    s.zeros += (a == 0);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    amax = std::max(amax, std::bit_cast<T>(a) * 1.0);
    ++finite;
  }
  if (finite == 0) return s;
  s.min = lo;
  s.max = hi;
  s.max_abs = amax;
  s.scale_exp = scale_exponent(amax);

  // Second look at the chunk, from cache: shifted, scaled sums of the finite values.
  const int e = std::is_same_v<T, double> ? s.scale_exp : 0;
  double shift = 0.0;
  bool have_shift = false;
  double sum = 0.0, sum_sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = std::bit_cast<typename bits::uint>(x[i]) & bits::abs_mask;
    if (a >= bits::inf) continue;
    const double v = std::ldexp(static_cast<double>(x[i]), -e);
    if (!have_shift) {
      shift = v;
      have_shift = true;
    }
    const double d = v - shift;
    sum += d;
    sum_sq += d * d;
  }
  const double nf = static_cast<double>(finite);
  const double m2 = std::max(0.0, sum_sq - sum * (sum / nf));
  s.mean = std::ldexp(shift + sum / nf, e);
  s.m2_scaled = std::ldexp(m2, 2 * (e - s.scale_exp));
  return s;
}

template <class T>
tensor_stats compute_stats_impl(const T* x, std::size_t n) noexcept {
  tensor_stats total;
  for (std::size_t begin = 0; begin < n; begin += stats_chunk_elems) {
    total.merge(chunk_stats(x + begin, std::min(stats_chunk_elems, n - begin)));
  }
  return total;
}

}  // namespace detail

/// Statistics of a contiguous range of `float` or `double` on the host, in one pass.
///
/// **Example**
/// ```cpp
/// std::vector<float> w(1024, 0.5f);
/// auto s = mldiag::compute_stats(std::span<const float>(w));
/// // s.count == 1024, s.l2_norm() == 16
/// ```
template <class T>
requires std::is_same_v<T, float> || std::is_same_v<T, double>
[[nodiscard]] tensor_stats compute_stats(std::span<const T> x) {
  if (x.data() == nullptr && !x.empty()) {
    throw error("compute_stats: null pointer with a non-zero size; pass an empty span instead");
  }
  return detail::compute_stats_impl(x.data(), x.size());
}

}  // namespace mldiag
