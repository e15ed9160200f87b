// SPDX-License-Identifier: Apache-2.0
/// The exact host kernel for one block of a format of 32 bits or fewer (block_stats_narrow).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy

namespace mldiag::inline MLDIAG_ABI::detail {

// Per-lane accumulators of the narrow kernel. Lane j sees elements i with i % lanes == j, in
// order; the lanes are combined in lane order.
struct narrow_lanes {
  std::array<float, lanes> lo, hi;
  std::array<std::uint32_t, lanes> zero{};
  std::array<double, lanes> sum{}, sum_sq{};

  explicit narrow_lanes(float shift) noexcept {
    lo.fill(shift);
    hi.fill(shift);
  }
};

// The careful step: non-finite elements are replaced by the shift (no effect on any
// accumulator) and counted. Used for the tail of every block and for whole blocks that
// hold a non-finite element.
template <class F>
inline void narrow_scalar_step(narrow_lanes& l, std::size_t j, std::uint32_t u,
                               std::uint32_t shift_bits, double shift_d,
                               std::uint64_t& non_finite) noexcept {
  const std::uint32_t a = u & F::abs_mask;
  const bool fin = is_finite_bits<F>(static_cast<typename F::storage>(a));
  const float v = value_of<F>(fin ? u : shift_bits);
  non_finite += static_cast<std::uint64_t>(!fin);
  l.zero[j] += static_cast<std::uint32_t>(a == 0);
  l.lo[j] = v < l.lo[j] ? v : l.lo[j];
  l.hi[j] = v > l.hi[j] ? v : l.hi[j];
  const double d = static_cast<double>(v) - shift_d;
  l.sum[j] += d;
  l.sum_sq[j] += d * d;
}

#ifdef MLDIAG_HOST_VECTORS  // GCC and Clang (core/config.hpp)
inline constexpr std::size_t prefetch_bytes = MLDIAG_PREFETCH_BYTES;
// Explicit generic vectors because GCC 12 vectorizes the scalar loop only sometimes ("control
// flow in loop", depending on the code around it; seen with -fopt-info-vec). No function
// takes or returns a vector (builtins only), so no ABI depends on the target.
namespace vec {
typedef float f32v __attribute__((vector_size(lanes * 4)));
typedef std::int32_t i32v __attribute__((vector_size(lanes * 4)));
typedef double f64v __attribute__((vector_size(lanes * 8)));
typedef double f64h __attribute__((vector_size(lanes * 4)));
typedef std::uint16_t u16v __attribute__((vector_size(lanes * 2)));
typedef std::uint8_t u8v __attribute__((vector_size(lanes)));
}  // namespace vec

// The fast path over groups [0, groups) of `lanes` elements, for blocks without a non-finite
// element: no selects, only a running "saw a non-finite bit pattern" mask. Returns false
// (and leaves `l` untouched) when the block has one; the caller then takes the careful path.
// The operations per lane are those of narrow_scalar_step on finite input.
template <class F>
inline bool narrow_vector_groups(const typename F::element* x, std::size_t groups,
                                 narrow_lanes& l, double shift_d) noexcept {
  using namespace vec;
  using storage = typename F::storage;
  static_assert(sizeof(typename F::element) == sizeof(storage));
  // Integer work is signed: magnitudes are below 2^31 and SSE2 compares signed 32-bit only.
  constexpr auto abs_mask = static_cast<std::int32_t>(F::abs_mask);
  constexpr auto sign_bit = static_cast<std::int32_t>(F::abs_mask + 1u);
  constexpr auto inf_bits = static_cast<std::int32_t>(F::inf);
  f32v lo, hi;
  i32v zero, bad = {};
  // Sums in two native-width halves: a double vector of `lanes` is twice the register width,
  // and GCC keeps such oversized vectors in memory (a load and a store per use).
  f64h sum0, sum1, sq0, sq1;
  std::memcpy(&lo, l.lo.data(), sizeof lo);
  std::memcpy(&hi, l.hi.data(), sizeof hi);
  std::memcpy(&zero, l.zero.data(), sizeof zero);
  std::memcpy(&sum0, l.sum.data(), sizeof sum0);
  std::memcpy(&sum1, l.sum.data() + lanes / 2, sizeof sum1);
  std::memcpy(&sq0, l.sum_sq.data(), sizeof sq0);
  std::memcpy(&sq1, l.sum_sq.data() + lanes / 2, sizeof sq1);
  const f64v shift_v = f64v{} + shift_d;
  for (std::size_t g = 0; g < groups; ++g) {
    // Ask for memory well ahead: the loop body is long, so the core alone keeps too few
    // cache lines in flight to stream at the memory's rate.
    __builtin_prefetch(reinterpret_cast<const char*>(x + g * lanes) + prefetch_bytes);
    i32v u;
    if constexpr (sizeof(storage) == 4) {
      std::memcpy(&u, x + g * lanes, sizeof u);
    } else if constexpr (sizeof(storage) == 2) {
      u16v raw;
      std::memcpy(&raw, x + g * lanes, sizeof raw);
      u = __builtin_convertvector(raw, i32v);
    } else {
      u8v raw;
      std::memcpy(&raw, x + g * lanes, sizeof raw);
      u = __builtin_convertvector(raw, i32v);
    }
    const i32v a = u & abs_mask;
    // Formats whose non-finite values widen to non-finite floats (fp32, bf16) need no test
    // here: an Inf or NaN makes its lane's sum of squares non-finite, checked once below.
    // The others widen Inf/NaN patterns to finite floats and are tested element by element.
    if constexpr (!F::widens_non_finite) {
      if constexpr (F::has_inf) bad |= a >= inf_bits;
      else bad |= a == inf_bits;
    }
    zero -= a == 0;  // a true comparison is -1
    f32v v;
    if constexpr (F::sign_shift == F::mag_shift) {  // fp32, bf16: the bits are already in place
      v = __builtin_bit_cast(f32v, u << F::mag_shift);
    } else {
      v = __builtin_bit_cast(f32v, ((u & sign_bit) << F::sign_shift) | (a << F::mag_shift));
    }
    if constexpr (F::scale != 1.0f) v *= F::scale;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    const f64v d = __builtin_convertvector(v, f64v) - shift_v;
#if MLDIAG_HOST_LANES == 4
    const f64h d0 = __builtin_shufflevector(d, d, 0, 1), d1 = __builtin_shufflevector(d, d, 2, 3);
#elif MLDIAG_HOST_LANES == 8
    const f64h d0 = __builtin_shufflevector(d, d, 0, 1, 2, 3),
               d1 = __builtin_shufflevector(d, d, 4, 5, 6, 7);
#else
    const f64h d0 = __builtin_shufflevector(d, d, 0, 1, 2, 3, 4, 5, 6, 7),
               d1 = __builtin_shufflevector(d, d, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
    sum0 += d0;
    sum1 += d1;
    sq0 += d0 * d0;
    sq1 += d1 * d1;
  }
  std::array<std::int32_t, lanes> seen;
  std::memcpy(seen.data(), &bad, sizeof bad);
  for (auto b : seen)
    if (b != 0) return false;
  if constexpr (F::widens_non_finite) {
    std::array<std::uint64_t, lanes> sq_bits;  // by bits: exact under -ffast-math too
    std::memcpy(sq_bits.data(), &sq0, sizeof sq0);
    std::memcpy(sq_bits.data() + lanes / 2, &sq1, sizeof sq1);
    for (auto b : sq_bits)
      if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return false;
  }
  std::memcpy(l.lo.data(), &lo, sizeof lo);
  std::memcpy(l.hi.data(), &hi, sizeof hi);
  std::memcpy(l.zero.data(), &zero, sizeof zero);
  std::memcpy(l.sum.data(), &sum0, sizeof sum0);
  std::memcpy(l.sum.data() + lanes / 2, &sum1, sizeof sum1);
  std::memcpy(l.sum_sq.data(), &sq0, sizeof sq0);
  std::memcpy(l.sum_sq.data() + lanes / 2, &sq1, sizeof sq1);
  return true;
}
#endif

// The bits of the median of x[0], x[n/2], x[n-1] when all three are finite, else of
// x[first] (the first finite element).
template <class F>
std::uint32_t median_of_3_bits(const typename F::element* x, std::size_t n, std::size_t first) noexcept {
  using storage = typename F::storage;
  const std::uint32_t a = F::bits(x[first]);
  if (first != 0 || n < 3) return a;
  const std::uint32_t b = F::bits(x[n / 2]), c = F::bits(x[n - 1]);
  if (!is_finite_bits<F>(static_cast<storage>(b & F::abs_mask)) ||
      !is_finite_bits<F>(static_cast<storage>(c & F::abs_mask))) {
    return a;
  }
  const float va = value_of<F>(a), vb = value_of<F>(b), vc = value_of<F>(c);
  const float m = std::max(std::min(va, vb), std::min(std::max(va, vb), vc));
  return m == va ? a : m == vb ? b : c;
}

// The sums of d = x - c and d^2 over the finite elements of a block again, around a better
// shift `c` (a double: the block's mean from the first pass). The rare path of
// block_stats_narrow (see needs_reshift): a block whose shift lies far from its mean.
// `all_finite` blocks take the vector loop (the same operations as the first pass); the others
// a scalar loop that skips non-finite elements.
template <class F>
void narrow_resum(const typename F::element* x, std::size_t n, float first, double c,
                  bool all_finite, double& s, double& q) noexcept {
  narrow_lanes l(first);
  std::size_t i = 0;
#ifdef MLDIAG_HOST_VECTORS
  if (all_finite && narrow_vector_groups<F>(x, n / lanes, l, c)) i = n / lanes * lanes;
#endif
  for (std::size_t j = i % lanes; i < n; ++i, j = (j + 1) % lanes) {
    const std::uint32_t u = F::bits(x[i]);
    if (!is_finite_bits<F>(static_cast<typename F::storage>(u & F::abs_mask))) continue;
    const double d = static_cast<double>(value_of<F>(u)) - c;
    l.sum[j] += d;
    l.sum_sq[j] += d * d;
  }
  s = 0.0;
  q = 0.0;
  for (std::size_t j = 0; j < lanes; ++j) {  // fixed order
    s += l.sum[j];
    q += l.sum_sq[j];
  }
}

// One block (at most block_elems elements) of a format of 32 bits or fewer. The values are
// exact in float; their differences from the shift and the squares of those are formed in
// double, where no square overflows or underflows (float's range squared fits a double's),
// and the sums in double keep every bit that matters.
template <class F>
tensor_stats block_stats_narrow(const typename F::element* x, std::size_t n) noexcept {
  using storage = typename F::storage;
  tensor_stats out;
  out.count = n;
  // The shift is an element near the middle of the block's values: it keeps the one-pass
  // variance free of cancellation and stands in for non-finite elements in the careful path
  // (where it changes nothing). The median of the first, middle and last elements, so that
  // one outlier in a fixed column (every 4096th element) is never the shift; the first
  // finite value where one of the three is not finite. needs_reshift catches the rest.
  std::size_t first = 0;
  while (first < n && !is_finite_bits<F>(static_cast<storage>(F::bits(x[first]) & F::abs_mask))) ++first;
  if (first == n) {
    count_non_finite<F>(x, n, out);
    return out;
  }
  const std::uint32_t shift_bits = median_of_3_bits<F>(x, n, first);
  const float shift = value_of<F>(shift_bits);
  const double shift_d = shift;

  narrow_lanes l(shift);
  std::uint64_t non_finite = 0;
  std::size_t i = 0;
#ifdef MLDIAG_HOST_VECTORS
  if (first == 0 && narrow_vector_groups<F>(x, n / lanes, l, shift_d)) i = n / lanes * lanes;
#endif
  for (std::size_t j = i % lanes; i < n; ++i, j = (j + 1) % lanes) {
    narrow_scalar_step<F>(l, j, F::bits(x[i]), shift_bits, shift_d, non_finite);
  }

  float lo = shift, hi = shift;
  double s = 0.0, q = 0.0;
  for (std::size_t j = 0; j < lanes; ++j) {  // fixed order
    out.zeros += l.zero[j];
    lo = std::min(lo, l.lo[j]);
    hi = std::max(hi, l.hi[j]);
    s += l.sum[j];
    q += l.sum_sq[j];
  }
  if (non_finite > 0) count_non_finite<F>(x, n, out);
  const std::uint64_t finite = n - non_finite;
  double c = shift_d;
  if (needs_reshift(s, q, static_cast<double>(finite))) {
    c = shift_d + s / static_cast<double>(finite);
    narrow_resum<F>(x, n, shift, c, non_finite == 0, s, q);
  }
  finish_from_shifted_sums(out, lo, hi, c, s, q, finite);
  return out;
}

}  // namespace mldiag::detail
