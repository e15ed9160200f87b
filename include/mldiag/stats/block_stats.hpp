// SPDX-License-Identifier: Apache-2.0
/// The host workers behind every statistics entry point: one block of elements -> tensor_stats.
#pragma once

#include "mldiag/core/dtype.hpp"
#include "mldiag/core/element_types.hpp"
#include "mldiag/core/layout.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/host_isa.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <bit>      // std::bit_cast
#include <cmath>    // std::ldexp, std::frexp
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <type_traits>

#ifdef MLDIAG_HOST_DISPATCH
#include <immintrin.h>  // the AVX-512 passes around 0 (bf16_centred_pass, f32_centred_pass)
#endif

namespace mldiag::detail {

// Statistics are computed over fixed blocks of logical elements, merged in order into fixed
// units, merged in order into tensors. Results depend on these two constants only — never on
// the number of threads — so they are bit-identical run to run.
// 4096 elements: 16 KiB of fp32, so a block's gather buffer and lanes stay in L1.
inline constexpr std::size_t block_elems = 4096;
// 16 blocks = 65536 elements per unit of work handed to a thread: large enough that the
// per-unit cost (an atomic increment, a merge, a store) is under 1% of the reading time.
inline constexpr std::size_t blocks_per_unit = 16;
inline constexpr std::size_t unit_elems = block_elems * blocks_per_unit;

// Accumulator lanes: one native vector of floats (4 with SSE2 or NEON, 8 with AVX, 16 with
// AVX-512), so the accumulators of one block fit the register file without spilling (16 lanes
// on SSE2 spilled and ran at 0.6 GB/s, bench/host_stats_bench 2026-11-30). Lane sums are
// merged in lane order, so results depend on the target: compile every translation unit
// that includes mldiag with the same target flags (as with Eigen).
#if defined(__AVX512F__)
#define MLDIAG_HOST_LANES 16
#elif defined(__AVX__)
#define MLDIAG_HOST_LANES 8
#else
#define MLDIAG_HOST_LANES 4
#endif
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
// then one exact multiply by a power of two. The vector path below spells out the same steps.
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

#if defined(__GNUC__) && !defined(MLDIAG_NO_HOST_VECTORS)  // GCC and Clang
#define MLDIAG_HOST_VECTORS 1
#ifndef MLDIAG_PREFETCH_BYTES
#define MLDIAG_PREFETCH_BYTES 8192
#endif
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

#ifdef MLDIAG_HOST_VECTORS
// ---- The float-accumulating kernel (issue 18) ----
// The kernel above widens every element to double and keeps two double accumulators per
// lane: exact to 1e-12, and compute-bound (0.35-0.62 of the read rate for fp32, 0.13-0.22 for
// bf16 on AVX-512, bench/host_stats_bench 2026-12-03). This one keeps d = x - c and d^2 in
// float lanes over runs of `float_run_groups` vectors and folds each run into double lanes,
// so a run's rounding error never grows with the block. The bounds, for the moments'
// contract of docs/stats.md (u = 2^-24): each d is rounded once (u|d|), each square once
// (u d^2), a run of R sums adds (R - 1) u of its terms, so Σd is off by at most R u Σ|d| and
// Σd^2 by (R + 2) u Σd^2 relative; the double folds add nothing that matters. M2 = Σd^2 -
// (Σd)^2/n amplifies Σd^2's error by Σd^2 / M2 = 1 + ((mean - c) / sd)^2, which the kernel
// holds at most `float_reshift_ratio` (else a second pass around the mean, from L1). With
// R = 8 and ratio 2: variance within 20 u = 1.2e-6, standard deviation 6e-7, mean 8 u √2 sd =
// 6.7e-7 sd, L2 norm 6e-7 — inside the 1e-6 contract with room for the folds.
inline constexpr std::size_t float_run_groups = 8;
inline constexpr double float_reshift_ratio = 1.5;
// Squares in float must neither overflow nor underflow: a float sum that overflows reads as
// non-finite and sends the block to the exact kernel, and a block whose largest |x - c| is
// below 2^-40 (squares below 2^-80, where flushed or denormal squares of its smaller
// deviations would matter) goes there too. Vanishing gradients of 1e-12 pay the exact price.
inline constexpr double float_min_deviation = 0x1p-40;

template <std::size_t L>
struct float_vectors {
  typedef float f32 __attribute__((vector_size(L * 4)));
  typedef float f32h __attribute__((vector_size(L * 2)));
  typedef std::int32_t i32 __attribute__((vector_size(L * 4)));
  typedef double f64h __attribute__((vector_size(L * 4)));
  typedef std::uint16_t u16 __attribute__((vector_size(L * 2)));
  typedef std::int16_t i16x2 __attribute__((vector_size(L * 4)));  // 2L 16-bit lanes
  typedef std::uint8_t u8 __attribute__((vector_size(L)));
};

// A run's float sums into double lanes: lanes 0 .. L/2-1 into lo_half, the rest into hi_half.
// GCC 12 builds an 8-float to 8-double convert in an AVX-512 function as four 4-wide converts
// and two inserts, but a 16-wide convert as two full-width ones (the fold fell from 40
// instructions to 10, and bf16 in L1 went from 11.6-12.5 to 14.2-14.6 G elements/s, issue
// 18); for AVX2 and SSE2 the halves are the better code (a 16-wide convert there went
// through memory).
template <std::size_t L>
[[gnu::always_inline]] inline void fold_to_double(const typename float_vectors<L>::f32& v,
                                                  typename float_vectors<L>::f64h& lo_half,
                                                  typename float_vectors<L>::f64h& hi_half) noexcept {
  using f64h = typename float_vectors<L>::f64h;
  if constexpr (L == 16) {
    typedef double f64w __attribute__((vector_size(L * 8)));
    const f64w w = __builtin_convertvector(v, f64w);
    f64h a, b;
    std::memcpy(&a, &w, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&w) + sizeof a, sizeof b);
    lo_half += a;
    hi_half += b;
  } else {
    using f32h = typename float_vectors<L>::f32h;
    f32h a, b;
    std::memcpy(&a, &v, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    lo_half += __builtin_convertvector(a, f64h);
    hi_half += __builtin_convertvector(b, f64h);
  }
}

struct float_pass_sums {
  float lo = 0.0f, hi = 0.0f;  // extrema (seeded with the block's first element)
  std::uint64_t zeros = 0;
  double s = 0.0, q = 0.0;  // Σd, Σd^2 with d = x - c
};

// A float pass's last step: false when a sum is not finite (a NaN or Inf element, or a float
// sum that overflowed, leaves one; read by bits, so exact under -ffast-math too), else its
// results into `out`.
inline bool finish_pass(float lo, float hi, double s, double q, float_pass_sums& out) noexcept {
  constexpr std::uint64_t exp_mask = 0x7ff0000000000000ull;
  if ((std::bit_cast<std::uint64_t>(s) & exp_mask) == exp_mask ||
      (std::bit_cast<std::uint64_t>(q) & exp_mask) == exp_mask) {
    return false;
  }
  out.lo = lo;
  out.hi = hi;
  out.s = s;
  out.q = q;
  return true;
}

// One pass over a block around the float shift `c`. Returns false when the block holds a
// non-finite element or a float sum overflowed; the caller then takes the exact kernel.
// bf16 is read two elements per 32-bit lane (the high one is a float once its low half is
// cleared, the low one once shifted up), which saves the widening of each element; the two
// halves keep accumulators of their own (so a run still sums R terms per lane, and the adds
// form two chains), and zeros are counted in 16-bit lanes, both halves by one compare.
template <class F, std::size_t L>
[[gnu::always_inline]] inline bool float_pass(const typename F::element* x, std::size_t n, float c,
                                              float_pass_sums& out) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  using f64h = typename V::f64h;
  using storage = typename F::storage;
  constexpr bool pairs = std::is_same_v<F, fmt_bf16>;
  constexpr std::size_t per_group = pairs ? 2 * L : L;  // elements per vector load
  constexpr auto abs_mask = static_cast<std::int32_t>(F::abs_mask);
  constexpr auto sign_bit = static_cast<std::int32_t>(F::abs_mask + 1u);
  constexpr auto inf_bits = static_cast<std::int32_t>(F::inf);
  const float first = value_of<F>(F::bits(x[0]));
  f32 lo = f32{} + first, hi = lo;
  const f32 cv = f32{} + c;
  i32 zero = {}, bad = {};
  using i16x2 = typename V::i16x2;
  i16x2 zero16 = {};  // bf16: per 16-bit lane, at most block_elems / (2 L) <= 2048
  f64h s0 = {}, s1 = {}, q0 = {}, q1 = {};
  auto take = [&](const f32& v, f32& s, f32& q) {
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    const f32 d = v - cv;
    s += d;
    q += d * d;
  };
  auto fold = [&](const f32& s, const f32& q) {
    fold_to_double<L>(s, s0, s1);
    fold_to_double<L>(q, q0, q1);
  };
  const std::size_t groups = n / per_group;
  for (std::size_t g = 0; g < groups;) {
    const std::size_t run_end = std::min(groups, g + float_run_groups);
    f32 s = {}, q = {}, s2 = {}, q2 = {};
    for (; g < run_end; ++g) {
      const auto* p = x + g * per_group;
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes);
      i32 u;
      if constexpr (pairs || sizeof(storage) == 4) {
        std::memcpy(&u, p, sizeof u);
      } else if constexpr (sizeof(storage) == 2) {
        typename V::u16 raw;
        std::memcpy(&raw, p, sizeof raw);
        u = __builtin_convertvector(raw, i32);
      } else {
        typename V::u8 raw;
        std::memcpy(&raw, p, sizeof raw);
        u = __builtin_convertvector(raw, i32);
      }
      if constexpr (pairs) {  // non-finite bf16 widen to non-finite floats: caught by the sums
        zero16 -= (__builtin_bit_cast(i16x2, u) & static_cast<std::int16_t>(abs_mask)) == 0;
        take(__builtin_bit_cast(f32, u & static_cast<std::int32_t>(0xffff0000u)), s, q);
        take(__builtin_bit_cast(f32, u << 16), s2, q2);
      } else {
        const i32 a = u & abs_mask;
        if constexpr (!F::widens_non_finite) {
          if constexpr (F::has_inf) bad |= a >= inf_bits;
          else bad |= a == inf_bits;
        }
        zero -= a == 0;
        f32 v;
        if constexpr (F::sign_shift == F::mag_shift) {
          v = __builtin_bit_cast(f32, u << F::mag_shift);
        } else {
          v = __builtin_bit_cast(f32, ((u & sign_bit) << F::sign_shift) | (a << F::mag_shift));
        }
        if constexpr (F::scale != 1.0f) v *= F::scale;
        take(v, s, q);
      }
    }
    fold(s, q);
    if constexpr (pairs) fold(s2, q2);
  }
  // The tail (fewer than one vector): in double, element by element.
  float tlo = first, thi = first;
  double ts = 0.0, tq = 0.0;
  for (std::size_t i = groups * per_group; i < n; ++i) {
    const std::uint32_t u = F::bits(x[i]);
    const auto a = static_cast<storage>(u & F::abs_mask);
    if (!is_finite_bits<F>(a)) return false;
    out.zeros += static_cast<std::uint64_t>(a == 0);
    const float v = value_of<F>(u);
    tlo = v < tlo ? v : tlo;
    thi = v > thi ? v : thi;
    const double d = static_cast<double>(v) - static_cast<double>(c);
    ts += d;
    tq += d * d;
  }
  std::array<std::int32_t, L> bad_l, zero_l;
  std::memcpy(bad_l.data(), &bad, sizeof bad);
  std::memcpy(zero_l.data(), &zero, sizeof zero);
  std::array<std::int16_t, 2 * L> zero16_l;
  std::memcpy(zero16_l.data(), &zero16, sizeof zero16);
  for (auto z : zero16_l) out.zeros += static_cast<std::uint16_t>(z);
  std::array<float, L> lo_l, hi_l;
  std::memcpy(lo_l.data(), &lo, sizeof lo);
  std::memcpy(hi_l.data(), &hi, sizeof hi);
  std::array<double, L> s_l, q_l;
  std::memcpy(s_l.data(), &s0, sizeof s0);
  std::memcpy(s_l.data() + L / 2, &s1, sizeof s1);
  std::memcpy(q_l.data(), &q0, sizeof q0);
  std::memcpy(q_l.data() + L / 2, &q1, sizeof q1);
  double s = 0.0, q = 0.0;
  for (std::size_t j = 0; j < L; ++j) {  // fixed order
    if (bad_l[j] != 0) return false;
    out.zeros += static_cast<std::uint32_t>(zero_l[j]);
    tlo = lo_l[j] < tlo ? lo_l[j] : tlo;
    thi = hi_l[j] > thi ? hi_l[j] : thi;
    s += s_l[j];
    q += q_l[j];
  }
  return finish_pass(tlo, thi, s + ts, q + tq, out);
}

// The checks after a block's first float pass around `c` (a deviation too small for float
// squares, a shift too far from the mean) and the block's tensor_stats.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats finish_float_block(const typename F::element* x,
                                                              std::size_t n, float c,
                                                              float_pass_sums r) noexcept {
  const double nf = static_cast<double>(n);
  const double deviation = std::max(static_cast<double>(r.hi) - c, c - static_cast<double>(r.lo));
  if (deviation != 0.0 && deviation < float_min_deviation) return block_stats_narrow<F>(x, n);
  if (needs_reshift(r.s, r.q, nf, float_reshift_ratio)) {
    c = static_cast<float>(static_cast<double>(c) + r.s / nf);
    float_pass_sums again;
    if (!float_pass<F, L>(x, n, c, again) || needs_reshift(again.s, again.q, nf, float_reshift_ratio)) {
      return block_stats_narrow<F>(x, n);
    }
    r.s = again.s;
    r.q = again.q;
  }
  tensor_stats out;
  out.count = n;
  out.zeros = r.zeros;
  finish_from_shifted_sums(out, r.lo, r.hi, c, r.s, r.q, n);
  return out;
}

// The float pass around the shift `c`, then, if the shift lay too far from the mean, a second
// one around the mean (from L1); blocks neither can take go to the exact kernel.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats block_stats_float_around(const typename F::element* x,
                                                                    std::size_t n, float c) noexcept {
  float_pass_sums r;
  if (!float_pass<F, L>(x, n, c, r)) return block_stats_narrow<F>(x, n);
  return finish_float_block<F, L>(x, n, c, r);
}

// Sixteen elements spread over a block: their mean is the float pass's shift (its error is a
// quarter of the spread on Gaussian data, so the second pass that a shift more than one sd
// from the mean needs runs for about 1 block in 16000), and their variance tells the bf16 dot
// kernel whether the block is centred near zero. False when a sample is not finite (the
// exact kernel then) or the block has fewer than 16 elements.
struct block_sample {
  double mean = 0.0, variance = 0.0;
};
template <class F>
[[gnu::always_inline]] inline bool sample_block(const typename F::element* x, std::size_t n,
                                                block_sample& out) noexcept {
  using storage = typename F::storage;
  constexpr std::size_t samples = 16;
  if (n < samples) return false;
  double sum = 0.0, sum_sq = 0.0;
  for (std::size_t k = 0; k < samples; ++k) {
    const std::uint32_t u = F::bits(x[k * (n / samples)]);
    if (!is_finite_bits<F>(static_cast<storage>(u & F::abs_mask))) return false;
    const auto v = static_cast<double>(value_of<F>(u));
    sum += v;
    sum_sq += v * v;
  }
  out.mean = sum / samples;
  out.variance = std::max(0.0, sum_sq / samples - out.mean * out.mean);
  return true;
}

// One block of a format of 32 bits or fewer with the float-accumulating pass; blocks it
// cannot take (a non-finite element, a float overflow, deviations below 2^-40, a mean that a
// second pass cannot centre) go to block_stats_narrow, the exact kernel.
template <class F, std::size_t L>
[[gnu::always_inline]] inline tensor_stats block_stats_float(const typename F::element* x,
                                                             std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<F>(x, n, sample)) return block_stats_narrow<F>(x, n);
  return block_stats_float_around<F, L>(x, n, static_cast<float>(sample.mean));
}

// One kernel per ISA: the same source, compiled for each vector width. GCC and Clang inline
// the always_inline workers into these, so every loop is built for the function's target.
template <class F>
tensor_stats block_stats_portable(const typename F::element* x, std::size_t n) noexcept {
  return block_stats_float<F, lanes>(x, n);
}
#ifdef MLDIAG_HOST_DISPATCH
template <class F>
__attribute__((target("avx2,fma"))) tensor_stats block_stats_avx2(const typename F::element* x,
                                                                  std::size_t n) noexcept {
  return block_stats_float<F, 8>(x, n);
}
template <class F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) tensor_stats block_stats_avx512(
    const typename F::element* x, std::size_t n) noexcept {
  return block_stats_float<F, 16>(x, n);
}

// ---- bf16 and fp32 around zero with AVX-512 (issue 18) ----
// The kernel above spends 20 instructions on 32 bf16 elements (two unpacks, and per half a
// subtract, an add, an FMA, a min and a max). A block whose 16 samples look centred near zero
// (mean^2 at most `centred_ratio` times their variance) is summed around the shift 0 instead,
// which needs no subtraction: 11 instructions for 32 bf16 (bf16_centred_pass), 6 for 16 fp32
// (f32_centred_pass). Blocks that the samples show far from zero-centred (LayerNorm weights,
// post-ReLU activations) take the shifted kernel above, and a block that turns out
// off-centre after the pass takes its second pass there too. The float sums keep the
// contract's analysis with c = 0: two accumulators per sum take alternate vectors (the add's
// latency), and a run of `float_run_groups` vectors puts 8 terms in each lane before the two
// are added and folded into double (R = 8, docs/stats.md).
inline constexpr double centred_ratio = 0.25;

// The end of a pass around 0 (bf16_centred_pass, f32_centred_pass): the 16 double lanes of Σx
// and Σx² summed in a fixed order, then the tail (fewer elements than one step of the loop)
// in double, element by element; false at a non-finite tail element.
[[gnu::always_inline]] inline void sum_lanes16(const float_vectors<16>::f64h& s0, const float_vectors<16>::f64h& s1,
                                               const float_vectors<16>::f64h& q0, const float_vectors<16>::f64h& q1,
                                               double& s, double& q) noexcept {
  std::array<double, 16> s_l, q_l;
  std::memcpy(s_l.data(), &s0, sizeof s0);
  std::memcpy(s_l.data() + 8, &s1, sizeof s1);
  std::memcpy(q_l.data(), &q0, sizeof q0);
  std::memcpy(q_l.data() + 8, &q1, sizeof q1);
  s = 0.0;
  q = 0.0;
  for (std::size_t j = 0; j < 16; ++j) {  // fixed order
    s += s_l[j];
    q += q_l[j];
  }
}
template <class F>
[[gnu::always_inline]] inline bool centred_tail(const typename F::element* x, std::size_t from, std::size_t n,
                                                float& lo, float& hi, double& s, double& q,
                                                std::uint64_t& zeros) noexcept {
  using storage = typename F::storage;
  for (std::size_t i = from; i < n; ++i) {
    const std::uint32_t u = F::bits(x[i]);
    const auto a = static_cast<storage>(u & F::abs_mask);
    if (!is_finite_bits<F>(a)) return false;
    zeros += static_cast<std::uint64_t>(a == 0);
    const float v = value_of<F>(u);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    s += static_cast<double>(v);
    q += static_cast<double>(v) * static_cast<double>(v);
  }
  return true;
}

// bf16 around 0: a 64-byte vector holds 32 elements, two per 32-bit lane; the high one is a
// float once the lane's low half is cleared, the low one once shifted up (two instructions,
// where widening each element costs two more). Σx: two adds, Σx²: two FMAs, zeros: one test
// of the 16-bit magnitudes into a mask and one masked add, extrema: three 16-bit integer
// max/min on the raw bits (the float order follows from them, below): 11 instructions.
// On the Emerald Rapids Xeon, in L1: 15.5 G elements/s, where the AVX-512 BF16 dot product
// (Σx and Σx² by one vdpbf16ps each, the kernel of the second session) ran at 13.6-14.4 and,
// with the block's other steps, 64 MiB bf16 reached 0.60-0.63 of the read ceiling against
// 0.67-0.72 now (bench/host_stats_bench, 2026-12-04). That kernel ran at 25-28 G/s on Zen 5,
// where this one has not been measured (docs/benchmarks.md).
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline bool bf16_centred_pass(const bfloat16* x, std::size_t n,
                                                                                 float_pass_sums& out) noexcept {
  using f32 = float_vectors<16>::f32;
  using f64 = float_vectors<16>::f64h;
  using i32 = float_vectors<16>::i32;
  const __m512i high16 = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512i abs16 = _mm512_set1_epi16(0x7fff), one16 = _mm512_set1_epi16(1);
  __m512i max_s = _mm512_set1_epi16(INT16_MIN), min_s = _mm512_set1_epi16(INT16_MAX);  // the bits as signed ...
  __m512i max_u = _mm512_setzero_si512();                                              // ... and the largest unsigned
  __m512i zeros = _mm512_setzero_si512();  // per 16-bit lane, at most block_elems / 32 = 128
  f64 s0 = {}, s1 = {}, q0 = {}, q1 = {};
  const auto* bytes = reinterpret_cast<const char*>(x);
  const std::size_t vectors = n / 32;  // 32 elements a vector
  for (std::size_t v = 0; v < vectors;) {
    const std::size_t run_end = std::min(vectors, v + float_run_groups);
    __m512 sa = _mm512_setzero_ps(), sb = sa, qa = sa, qb = sa;
    for (; v < run_end; ++v) {
      const char* p = bytes + v * 64;
      __builtin_prefetch(p + prefetch_bytes);
      const __m512i u = _mm512_loadu_si512(p);
      // The high element of a 32-bit lane is a float once the low half is cleared, the low one
      // once shifted up (a generic vector shift: GCC 12 warns falsely inside _mm512_slli_epi32).
      const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(u, high16));
      const __m512 lo = __builtin_bit_cast(__m512, __builtin_bit_cast(i32, u) << 16);
      sa = _mm512_add_ps(sa, hi);
      qa = _mm512_fmadd_ps(hi, hi, qa);
      sb = _mm512_add_ps(sb, lo);
      qb = _mm512_fmadd_ps(lo, lo, qb);
      zeros = _mm512_mask_add_epi16(zeros, _mm512_testn_epi16_mask(u, abs16), zeros, one16);
      max_s = _mm512_max_epi16(max_s, u);
      min_s = _mm512_min_epi16(min_s, u);
      max_u = _mm512_max_epu16(max_u, u);
    }
    fold_to_double<16>(__builtin_bit_cast(f32, sa) + __builtin_bit_cast(f32, sb), s0, s1);
    fold_to_double<16>(__builtin_bit_cast(f32, qa) + __builtin_bit_cast(f32, qb), q0, q1);
  }
  // Extrema from the bits: a positive maximum is the largest signed value; with none (all
  // negative), the maximum is the negative of smallest magnitude, which is then also the
  // smallest signed value. A negative minimum is the largest unsigned value; with none, the
  // smallest signed value. (A fourth running value, the smallest unsigned, is not needed.)
  std::array<std::int16_t, 32> ms, ns;
  std::array<std::uint16_t, 32> mu, zl;
  std::memcpy(ms.data(), &max_s, sizeof ms);
  std::memcpy(ns.data(), &min_s, sizeof ns);
  std::memcpy(mu.data(), &max_u, sizeof mu);
  std::memcpy(zl.data(), &zeros, sizeof zl);
  std::int16_t top_s = INT16_MIN, low_s = INT16_MAX;
  std::uint16_t top_u = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    top_s = std::max(top_s, ms[j]);
    low_s = std::min(low_s, ns[j]);
    top_u = std::max(top_u, mu[j]);
    out.zeros += zl[j];
  }
  const auto value = [](std::uint32_t bits16) { return std::bit_cast<float>(bits16 << 16); };
  const std::size_t head = vectors * 32;
  const auto low_bits = static_cast<std::uint16_t>(low_s);
  float lo = head == 0 ? value(x[0].bits) : value(top_u >= 0x8000u ? top_u : low_bits);
  float hi = head == 0 ? lo : value(top_s >= 0 ? static_cast<std::uint16_t>(top_s) : low_bits);
  double s, q;
  sum_lanes16(s0, s1, q0, q1, s, q);
  if (!centred_tail<fmt_bf16>(x, head, n, lo, hi, s, q, out.zeros)) return false;
  return finish_pass(lo, hi, s, q, out);
}

// fp32 around 0 (third session): on a CPU with two 512-bit vector ports (Intel's server
// cores) the shifted kernel's eight operations per 16 fp32 elements (and, compare, subtract
// for the zero count; min, max; subtract the shift, add, FMA) bound it at 4 cycles a vector:
// 7.2-7.8 G elements/s in L1 on an Emerald Rapids Xeon, where 64 MiB from its L3 arrives at
// 8 G/s. Around 0: Σx by one add, Σx² by one FMA, zeros by one test into a mask and one
// masked add, min and max: six operations.
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline bool f32_centred_pass(const float* x, std::size_t n,
                                                                                float_pass_sums& out) noexcept {
  using f32 = float_vectors<16>::f32;
  using f64 = float_vectors<16>::f64h;
  const __m512i abs32 = _mm512_set1_epi32(0x7fffffff), one32 = _mm512_set1_epi32(1);
  f32 lo = f32{} + HUGE_VALF, hi = f32{} - HUGE_VALF;
  __m512i zeros = _mm512_setzero_si512();  // per lane, at most block_elems / 16
  f64 s0 = {}, s1 = {}, q0 = {}, q1 = {};
  const std::size_t pairs_of_vectors = n / 32;
  for (std::size_t v = 0; v < pairs_of_vectors;) {
    const std::size_t run_end = std::min(pairs_of_vectors, v + float_run_groups / 2);
    __m512 sa = _mm512_setzero_ps(), sb = sa, qa = sa, qb = sa;
    for (; v < run_end; ++v) {
      const float* p = x + v * 32;
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes);
      __builtin_prefetch(reinterpret_cast<const char*>(p) + prefetch_bytes + 64);
      const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
      const __m512i ua = _mm512_castps_si512(a), ub = _mm512_castps_si512(b);
      zeros = _mm512_mask_add_epi32(zeros, _mm512_testn_epi32_mask(ua, abs32), zeros, one32);
      zeros = _mm512_mask_add_epi32(zeros, _mm512_testn_epi32_mask(ub, abs32), zeros, one32);
      // Generic vectors for the extrema: GCC 12 warns falsely inside _mm512_min_ps.
      const f32 fa = __builtin_bit_cast(f32, a), fb = __builtin_bit_cast(f32, b);
      lo = fa < lo ? fa : lo;
      hi = fa > hi ? fa : hi;
      lo = fb < lo ? fb : lo;
      hi = fb > hi ? fb : hi;
      sa = _mm512_add_ps(sa, a);
      qa = _mm512_fmadd_ps(a, a, qa);
      sb = _mm512_add_ps(sb, b);
      qb = _mm512_fmadd_ps(b, b, qb);
    }
    fold_to_double<16>(__builtin_bit_cast(f32, sa) + __builtin_bit_cast(f32, sb), s0, s1);
    fold_to_double<16>(__builtin_bit_cast(f32, qa) + __builtin_bit_cast(f32, qb), q0, q1);
  }
  // A NaN or Inf leaves a non-finite Σx², which finish_pass refuses (the extrema then go unused).
  std::array<float, 16> lo_l, hi_l;
  std::array<std::uint32_t, 16> zl;
  std::memcpy(lo_l.data(), &lo, sizeof lo_l);
  std::memcpy(hi_l.data(), &hi, sizeof hi_l);
  std::memcpy(zl.data(), &zeros, sizeof zl);
  float tlo = x[0], thi = x[0];
  for (std::size_t j = 0; j < 16; ++j) {
    tlo = lo_l[j] < tlo ? lo_l[j] : tlo;
    thi = hi_l[j] > thi ? hi_l[j] : thi;
    out.zeros += zl[j];
  }
  double s, q;
  sum_lanes16(s0, s1, q0, q1, s, q);
  if (!centred_tail<fmt_f32>(x, pairs_of_vectors * 32, n, tlo, thi, s, q, out.zeros)) return false;
  return finish_pass(tlo, thi, s, q, out);
}

[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline tensor_stats block_stats_avx512_f32(const float* x,
                                                                                             std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<fmt_f32>(x, n, sample)) return block_stats_narrow<fmt_f32>(x, n);
  if (sample.mean * sample.mean > centred_ratio * sample.variance) {
    return block_stats_float_around<fmt_f32, 16>(x, n, static_cast<float>(sample.mean));
  }
  float_pass_sums r;
  if (!f32_centred_pass(x, n, r)) return block_stats_narrow<fmt_f32>(x, n);
  return finish_float_block<fmt_f32, 16>(x, n, 0.0f, r);
}

[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline tensor_stats block_stats_avx512_bf16(
    const bfloat16* x, std::size_t n) noexcept {
  block_sample sample;
  if (!sample_block<fmt_bf16>(x, n, sample)) return block_stats_narrow<fmt_bf16>(x, n);
  if (sample.mean * sample.mean > centred_ratio * sample.variance) {
    return block_stats_float_around<fmt_bf16, 16>(x, n, static_cast<float>(sample.mean));
  }
  float_pass_sums r;
  if (!bf16_centred_pass(x, n, r)) return block_stats_narrow<fmt_bf16>(x, n);
  return finish_float_block<fmt_bf16, 16>(x, n, 0.0f, r);
}
#endif
#endif  // MLDIAG_HOST_VECTORS

// One block of float64: a first look for the classes and the largest magnitude, then the
// moments of the values scaled by 2^-e (exact), so that no square overflows or underflows.
inline tensor_stats block_stats_f64(const double* x, std::size_t n) noexcept {
  using F = fmt_f64;
  constexpr std::size_t w = lanes / 2;  // one native vector of doubles
  tensor_stats out;
  out.count = n;
  std::size_t first = 0;
  while (first < n && !is_finite_bits<F>(F::bits(x[first]) & F::abs_mask)) ++first;
  if (first == n) {
    count_non_finite<F>(x, n, out);
    return out;
  }
  const double first_value = x[first];
  std::array<double, w> lo, hi;
  std::array<std::uint64_t, w> amax{};
  std::array<std::uint32_t, w> bad{}, zero{};
  lo.fill(first_value);
  hi.fill(first_value);
  auto look = [&](std::size_t j, std::uint64_t u) {
    const std::uint64_t a = u & F::abs_mask;
    const bool fin = is_finite_bits<F>(a);
    const double v = fin ? std::bit_cast<double>(u) : first_value;
    bad[j] += static_cast<std::uint32_t>(!fin);
    zero[j] += static_cast<std::uint32_t>(a == 0);
    lo[j] = v < lo[j] ? v : lo[j];
    hi[j] = v > hi[j] ? v : hi[j];
    const std::uint64_t af = fin ? a : 0;
    amax[j] = af > amax[j] ? af : amax[j];
  };
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    for (std::size_t j = 0; j < w; ++j) look(j, F::bits(x[i + j]));
  }
  for (std::size_t j = 0; i < n; ++i, ++j) look(j, F::bits(x[i]));
  std::uint64_t non_finite = 0;
  std::uint64_t am = 0;
  out.min = out.max = first_value;
  for (std::size_t j = 0; j < w; ++j) {
    non_finite += bad[j];
    out.zeros += zero[j];
    out.min = std::min(out.min, lo[j]);
    out.max = std::max(out.max, hi[j]);
    am = std::max(am, amax[j]);
  }
  if (non_finite > 0) count_non_finite<F>(x, n, out);
  out.max_abs = std::bit_cast<double>(am);
  out.scale_exp = scale_exponent(out.max_abs);

  const double scale = std::ldexp(1.0, -out.scale_exp);
  // Sums of d = x * 2^-e - shift and d^2 over the finite elements, in lane order.
  auto shifted_sums = [&](double shift, double& s, double& q) {
    std::array<double, w> sum{}, sum_sq{};
    auto moments = [&](std::size_t j, std::uint64_t u) {
      const bool fin = is_finite_bits<F>(u & F::abs_mask);
      const double d = fin ? std::bit_cast<double>(u) * scale - shift : 0.0;
      sum[j] += d;
      sum_sq[j] += d * d;
    };
    std::size_t k = 0;
    for (; k + w <= n; k += w) {
      for (std::size_t j = 0; j < w; ++j) moments(j, F::bits(x[k + j]));
    }
    for (std::size_t j = 0; k < n; ++k, ++j) moments(j, F::bits(x[k]));
    s = 0.0;
    q = 0.0;
    for (std::size_t j = 0; j < w; ++j) {
      s += sum[j];
      q += sum_sq[j];
    }
  };
  const double nf = static_cast<double>(n - non_finite);
  // The shift: the median of the first, middle and last elements where all three are finite
  // (as in block_stats_narrow), else the first finite one.
  double pivot = first_value;
  if (first == 0 && n >= 3 && is_finite_bits<F>(F::bits(x[n / 2]) & F::abs_mask) &&
      is_finite_bits<F>(F::bits(x[n - 1]) & F::abs_mask)) {
    const double a = x[0], b = x[n / 2], c = x[n - 1];
    pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
  }
  double shift = pivot * scale, s = 0.0, q = 0.0;
  shifted_sums(shift, s, q);
  if (needs_reshift(s, q, nf)) {  // the shift lies far from the mean: again around the mean
    shift += s / nf;
    shifted_sums(shift, s, q);
  }
  // The mean as a pair (see tensor_stats): shift + s/n keeps every digit of s/n.
  double mean_hi = 0.0, mean_lo = 0.0;
  two_sum(shift, s / nf, mean_hi, mean_lo);
  out.mean_scaled = mean_hi;
  out.mean_lo = static_cast<float>(mean_lo);
  out.m2_scaled = std::max(0.0, q - s * (s / nf));
  return out;
}

template <class F>
tensor_stats block_stats(const typename F::element* x, std::size_t n) noexcept {
  if constexpr (std::is_same_v<F, fmt_f64>) {
    return block_stats_f64(x, n);
  } else {
#ifdef MLDIAG_HOST_VECTORS
#ifdef MLDIAG_HOST_DISPATCH
    switch (active_host_isa()) {
      case host_isa::avx512_bf16:
      case host_isa::avx512:
        if constexpr (std::is_same_v<F, fmt_bf16>) return block_stats_avx512_bf16(x, n);
        if constexpr (std::is_same_v<F, fmt_f32>) return block_stats_avx512_f32(x, n);
        return block_stats_avx512<F>(x, n);
      case host_isa::avx2: return block_stats_avx2<F>(x, n);
      case host_isa::portable: break;
    }
#endif
    return block_stats_portable<F>(x, n);
#else
    return block_stats_narrow<F>(x, n);
#endif
  }
}

// Walks a strided layout in logical (row-major) order from a starting index, one element at
// a time, carrying into outer dimensions: no division per element.
class strided_cursor {
 public:
  strided_cursor(const layout& l, std::uint64_t start) noexcept : layout_(l) {
    std::uint64_t index = start;
    for (int d = l.rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      const auto extent = static_cast<std::uint64_t>(l.extents[k]);
      index_[k] = static_cast<std::int64_t>(index % extent);
      offset_ += index_[k] * l.strides[k];
      index /= extent;
    }
  }
  [[nodiscard]] std::int64_t offset() const noexcept { return offset_; }
  void next() noexcept {
    for (int d = layout_.rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      offset_ += layout_.strides[k];
      if (++index_[k] < layout_.extents[k]) return;
      offset_ -= index_[k] * layout_.strides[k];
      index_[k] = 0;
    }
  }

 private:
  const layout& layout_;
  std::array<std::int64_t, max_rank> index_{};
  std::int64_t offset_ = 0;
};

// Statistics of the logical elements [begin, end) of a host tensor of format F, block by
// block (begin must be a multiple of block_elems), merged in order.
template <class F>
tensor_stats range_stats_typed(const tensor_ref& t, std::uint64_t begin,
                               std::uint64_t end) noexcept {
  using element = typename F::element;
  const auto* base = static_cast<const element*>(t.data());
  tensor_stats total;
  if (t.is_contiguous()) {
    for (std::uint64_t b = begin; b < end; b += block_elems) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(block_elems, end - b));
      total.merge(block_stats<F>(base + b, n));
    }
    return total;
  }
  // Strided: gather each block into a buffer on the stack (at most 32 KiB), then the same
  // block worker, so a strided view of row-major memory gives the contiguous result.
  std::array<element, block_elems> buffer;
  strided_cursor cursor(t.layout(), begin);
  for (std::uint64_t b = begin; b < end; b += block_elems) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(block_elems, end - b));
    for (std::size_t i = 0; i < n; ++i, cursor.next()) buffer[i] = base[cursor.offset()];
    total.merge(block_stats<F>(buffer.data(), n));
  }
  return total;
}

template <class F>
struct format_tag {
  using type = F;
};

// The one run-time dispatch on dtype: calls f(format_tag<fmt_...>{}) for the format of `t`, so
// that everything after it is typed. Host and CUDA entry points all go through here.
template <class Visitor>
decltype(auto) with_format(dtype t, Visitor&& f) {
  switch (t) {
    case dtype::f64: return f(format_tag<fmt_f64>{});
    case dtype::f32: return f(format_tag<fmt_f32>{});
    case dtype::f16: return f(format_tag<fmt_f16>{});
    case dtype::bf16: return f(format_tag<fmt_bf16>{});
    case dtype::f8_e4m3: return f(format_tag<fmt_e4m3>{});
    case dtype::f8_e5m2: break;
  }
  return f(format_tag<fmt_e5m2>{});  // tensor_ref validates its dtype: nothing else gets here
}

inline tensor_stats range_stats(const tensor_ref& t, std::uint64_t begin,
                                std::uint64_t end) noexcept {
  return with_format(t.dtype(), [&](auto tag) {
    return range_stats_typed<typename decltype(tag)::type>(t, begin, end);
  });
}

}  // namespace mldiag::detail
