// SPDX-License-Identifier: Apache-2.0
/// The block sizes, accumulator lanes and bit-level element formats the host workers share.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_HOST_LANES
#include "mldiag/core/element_types.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <bit>  // std::bit_cast
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace mldiag::inline MLDIAG_ABI::detail {

// Statistics are computed over fixed blocks of logical elements, merged in order into fixed
// units, merged in order into tensors. Results depend on these two constants only — never on
// the number of threads — so they are bit-identical run to run.
// 4096 elements: 16 KiB of fp32, so a block's gather buffer and lanes stay in L1.
inline constexpr std::size_t block_elems = 4096;
// 16 blocks = 65536 elements per unit of work handed to a thread: large enough that the
// per-unit cost (an atomic increment, a merge, a store) is under 1% of the reading time.
inline constexpr std::size_t blocks_per_unit = 16;
inline constexpr std::size_t unit_elems = block_elems * blocks_per_unit;

// Accumulator lanes (MLDIAG_HOST_LANES, core/config.hpp): one native vector of floats, so the
// accumulators of one block fit the register file without spilling (16 lanes on SSE2 spilled
// and ran at 0.6 GB/s, bench/host_stats_bench; docs/benchmarks.md). Lane sums are merged in
// lane order, so results depend on the target; the lane count is part of the namespace's name.
inline constexpr std::size_t lanes = MLDIAG_HOST_LANES;

// Bit-level description of each element format. `element` is the type the memory holds; it
// is read as that type and its bits taken with bit_cast (no aliasing through integer
// pointers). Narrow formats widen to float with two shifts and one exact multiply by a
// power of two (sign | magnitude << mag_shift, times 2^(127 - bias) - the same formula for
// one value and for a vector of them), valid for finite values only: callers select the
// shift's bits in place of non-finite ones first.
struct fmt_f32 {
  using element = float;
  using storage = std::uint32_t;
  static storage bits(float v) noexcept { return std::bit_cast<storage>(v); }
  static constexpr storage abs_mask = 0x7fffffffu, inf = 0x7f800000u;
  static constexpr bool has_inf = true;
  static constexpr bool widens_non_finite = true;
  static constexpr int sign_shift = 0, mag_shift = 0;
  static constexpr float scale = 1.0f;
};
struct fmt_bf16 {
  using element = bfloat16;
  using storage = std::uint16_t;
  static storage bits(bfloat16 v) noexcept { return v.bits; }
  static constexpr storage abs_mask = 0x7fffu, inf = 0x7f80u;
  static constexpr bool has_inf = true;
  static constexpr bool widens_non_finite = true;
  static constexpr int sign_shift = 16, mag_shift = 16;
  static constexpr float scale = 1.0f;
};
struct fmt_f16 {
  using element = half;
  using storage = std::uint16_t;
  static storage bits(half v) noexcept { return v.bits; }
  static constexpr storage abs_mask = 0x7fffu, inf = 0x7c00u;
  static constexpr bool has_inf = true;
  static constexpr bool widens_non_finite = false;
  static constexpr int sign_shift = 16, mag_shift = 13;
  static constexpr float scale = 0x1p112f;
};
struct fmt_e4m3 {
  using element = float8_e4m3;
  using storage = std::uint8_t;
  static storage bits(float8_e4m3 v) noexcept { return v.bits; }
  static constexpr storage abs_mask = 0x7fu, inf = 0x7fu;  // no infinities: 0x7f is NaN
  static constexpr bool has_inf = false;
  static constexpr bool widens_non_finite = false;
  static constexpr int sign_shift = 24, mag_shift = 20;
  static constexpr float scale = 0x1p120f;
};
struct fmt_e5m2 {
  using element = float8_e5m2;
  using storage = std::uint8_t;
  static storage bits(float8_e5m2 v) noexcept { return v.bits; }
  static constexpr storage abs_mask = 0x7fu, inf = 0x7cu;
  static constexpr bool has_inf = true;
  static constexpr bool widens_non_finite = false;
  static constexpr int sign_shift = 24, mag_shift = 21;
  static constexpr float scale = 0x1p112f;
};
struct fmt_f64 {
  using element = double;
  using storage = std::uint64_t;
  static storage bits(double v) noexcept { return std::bit_cast<storage>(v); }
  static constexpr storage abs_mask = 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull;
  static constexpr bool has_inf = true;
};

// Finite iff the magnitude bits are below the infinity pattern (E4M3: not the NaN pattern).
template <class F>
constexpr bool is_finite_bits(typename F::storage a) noexcept {
  if constexpr (F::has_inf) return a < F::inf;
  else return a != F::inf;
}

// The float value of a finite narrow value's bits: sign and magnitude shifted into place,
// then one exact multiply by a power of two. narrow_vector_groups spells out the same steps.
template <class F>
float value_of(std::uint32_t u) noexcept {
  const std::uint32_t sign = (u & (F::abs_mask + 1u)) << F::sign_shift;
  const std::uint32_t mag = (u & F::abs_mask) << F::mag_shift;
  const float f = std::bit_cast<float>(sign | mag);
  if constexpr (F::scale != 1.0f) return f * F::scale;
  else return f;
}

// The value of a finite element's bits, as a double (any format).
template <class F>
double finite_value(typename F::storage u) noexcept {
  if constexpr (std::is_same_v<F, fmt_f64>) return std::bit_cast<double>(u);
  else return static_cast<double>(value_of<F>(u));
}

// Exact NaN / +Inf / -Inf counts of a block that has non-finite elements (the rare path).
template <class F>
void count_non_finite(const typename F::element* x, std::size_t n, tensor_stats& s) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = F::bits(x[i]);
    const auto a = static_cast<typename F::storage>(u & F::abs_mask);
    if (is_finite_bits<F>(a)) continue;
    if (!F::has_inf || a != F::inf) ++s.nan;
    else if (u == F::inf) ++s.pos_inf;
    else ++s.neg_inf;
  }
}

}  // namespace mldiag::detail

namespace mldiag::inline MLDIAG_ABI {
/// Elements per unit of work the host statistics hand to a thread and merge in order: results
/// depend on this, never on the thread count. Public for tools that split work the same way
/// (the `mldiag checkpoint-diff` command).
inline constexpr std::size_t stats_unit_elements = detail::unit_elems;
}  // namespace mldiag
