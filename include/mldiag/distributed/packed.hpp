// SPDX-License-Identifier: Apache-2.0
/// The merge of `tensor_stats` and `entropy_stats` across ranks as three elementwise
/// all-reduces (MIN, SUM, SUM) over packed float64 buffers: the algebra the NCCL merge runs.
#pragma once

#include "mldiag/core/config.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <cmath>    // std::ldexp
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <span>     // the host helpers

namespace mldiag::inline MLDIAG_ABI::distributed {

/// Sizes and offsets, in doubles, of the three buffers that merge `tensors` tensor_stats and
/// `entropies` entropy_stats per rank. Every rank of a merge must use the same (N, M) and the
/// same order: element k of every rank's list describes the same tensor.
///
/// ```
/// round A, MIN:  [N][min, -max, -max_abs]  [M][min, -max, normalized_min, -normalized_max]
/// round B, SUM:  [N][count, nan, pos_inf, neg_inf, zeros, n * mean]  [M][rows, invalid_rows, sum,
/// normalized_sum] round C, SUM:  [N][M2 + n * (mean - global mean)^2]
/// ```
/// Means and M2 in rounds B and C are scaled to the global exponent (2^e with e from the
/// global max_abs of round A), as `tensor_stats` stores them.
///
/// Bytes per rank per merge (the payload of each all-reduce): A 8 * (3N + 4M), B 8 * (6N + 4M),
/// C 8 * N; in all 8 * (10N + 8M), e.g. 40000 bytes for 500 tensors.
struct packed_layout {
  std::size_t tensors = 0;
  std::size_t entropies = 0;

  static constexpr std::size_t a_per_tensor = 3, a_per_entropy = 4;
  static constexpr std::size_t b_per_tensor = 6, b_per_entropy = 4;
  static constexpr std::size_t c_per_tensor = 1;

  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t a_size() const noexcept {
    return a_per_tensor * tensors + a_per_entropy * entropies;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t b_size() const noexcept {
    return b_per_tensor * tensors + b_per_entropy * entropies;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t c_size() const noexcept {
    return c_per_tensor * tensors;
  }
  /// Where the entropy rows start in A and B (the tensor rows come first).
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t a_entropy_offset() const noexcept {
    return a_per_tensor * tensors;
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t b_entropy_offset() const noexcept {
    return b_per_tensor * tensors;
  }
  /// Bytes all three rounds move into each all-reduce, together: 8 * (10N + 8M).
  MLDIAG_HOST_DEVICE [[nodiscard]] constexpr std::size_t payload_bytes() const noexcept {
    return sizeof(double) * (a_size() + b_size() + c_size());
  }
};

// Counts travel as doubles: a sum of non-negative integers in float64 is exact, in any order,
// while the total stays below 2^53 (9.007e15), since every partial sum is then an integer
// that float64 represents. Above it the merged counts may be off by rounding. A tensor (or
// the total of a list) would need 2^53 elements over all ranks: 9 PB of bf16.
inline constexpr double exact_count_limit = 9007199254740992.0;  // 2^53

namespace detail {
MLDIAG_HOST_DEVICE inline std::uint64_t count_from_double(double c) noexcept {
  // Saturates instead of converting a value >= 2^64 (undefined behaviour).
  return c < 18446744073709551616.0 ? static_cast<std::uint64_t>(c) : ~std::uint64_t{0};
}
}  // namespace detail

// ---- one element: the pieces the kernels call, three doubles or so at a time ----------------

/// Round A of one tensor: `a` points at its 3 doubles.
MLDIAG_HOST_DEVICE inline void pack_a(const tensor_stats& s, double* a) noexcept {
  a[0] = s.min;       // +Inf when there is no finite element: MIN ignores it
  a[1] = -s.max;      // max = -min(-x): maxima ride in the same MIN all-reduce
  a[2] = -s.max_abs;  // -0 when empty
}

/// Round A of one entropy_stats: `a` points at its 4 doubles.
MLDIAG_HOST_DEVICE inline void pack_a(const entropy_stats& s, double* a) noexcept {
  a[0] = s.min;
  a[1] = -s.max;
  a[2] = s.normalized_min;
  a[3] = -s.normalized_max;
}

/// The global scale exponent, from the reduced round A of a tensor (no collective needed:
/// `scale_exponent` is monotone, so the exponent of the largest max_abs is the largest).
MLDIAG_HOST_DEVICE inline int global_scale_exp(const double* a_global) noexcept {
  return mldiag::detail::scale_exponent(-a_global[2]);
}

/// Round B of one tensor: `a_global` its 3 reduced doubles of round A, `b` its 6 doubles.
MLDIAG_HOST_DEVICE inline void pack_b(const tensor_stats& s, const double* a_global,
                                      double* b) noexcept {
  const int e = global_scale_exp(a_global);
  b[0] = static_cast<double>(s.count);
  b[1] = static_cast<double>(s.nan);
  b[2] = static_cast<double>(s.pos_inf);
  b[3] = static_cast<double>(s.neg_inf);
  b[4] = static_cast<double>(s.zeros);
  // n_i * mean_i at the global scale (0 when the shard has no finite element). |mean_scaled|
  // <= 1 at the global scale (2^24 when e is clamped at 1000), so the sum cannot overflow.
  const auto n = static_cast<double>(s.finite());
  b[5] = s.finite() == 0 ? 0.0 : n * std::ldexp(s.mean_scaled, s.scale_exp - e);
}

/// Round B of one entropy_stats: `b` its 4 doubles.
MLDIAG_HOST_DEVICE inline void pack_b(const entropy_stats& s, double* b) noexcept {
  b[0] = static_cast<double>(s.rows);
  b[1] = static_cast<double>(s.invalid_rows);
  b[2] = s.sum;
  b[3] = s.normalized_sum;
}

/// The global finite count and scaled mean from the reduced rounds A and B of a tensor.
MLDIAG_HOST_DEVICE inline double global_mean_scaled(const double* b_global,
                                                    std::uint64_t& finite) noexcept {
  const std::uint64_t count = detail::count_from_double(b_global[0]);
  const std::uint64_t non_finite = detail::count_from_double(b_global[1]) +
                                   detail::count_from_double(b_global[2]) +
                                   detail::count_from_double(b_global[3]);
  finite = count >= non_finite ? count - non_finite : 0;
  return finite == 0 ? 0.0 : b_global[5] / static_cast<double>(finite);
}

/// Round C of one tensor: M2_i + n_i * (mean_i - mean)^2 at the global scale, into `c[0]`.
//
// Why a third round: the textbook two-round version sums x^2 in round B and takes
// M2 = sum x^2 - n * mean^2. Both terms are about n * mean^2, so when |mean| >> std their
// difference loses log10(mean^2 / var) digits: at mean 1e6 and std 1 the 16 digits of
// float64 leave 4, and at mean 1e8 none (a negative variance). Here every term is
// non-negative (no cancellation), and an error d in the global mean enters only as n * d^2
// (the first-order term sum n_i * (mean_i - mean) vanishes). This is Chan's merge of k parts
// at once; the exponent (round A) and the mean (round B) must be known first, hence three
// dependent collectives.
MLDIAG_HOST_DEVICE inline void pack_c(const tensor_stats& s, const double* a_global,
                                      const double* b_global, double* c) noexcept {
  if (s.finite() == 0) {
    c[0] = 0.0;
    return;
  }
  const int e = global_scale_exp(a_global);
  std::uint64_t finite = 0;
  const double mean = global_mean_scaled(b_global, finite);
  const double d = std::ldexp(s.mean_scaled, s.scale_exp - e) - mean;
  c[0] = std::ldexp(s.m2_scaled, 2 * (s.scale_exp - e)) + static_cast<double>(s.finite()) * d * d;
}

/// The global tensor_stats from its reduced rounds A, B and C. A tensor with no finite
/// element anywhere keeps the defaults (min +Inf, max -Inf, moments 0), as tensor_stats::merge
/// does.
MLDIAG_HOST_DEVICE inline tensor_stats finish(const double* a_global, const double* b_global,
                                              const double* c_global) noexcept {
  tensor_stats out;
  out.count = detail::count_from_double(b_global[0]);
  out.nan = detail::count_from_double(b_global[1]);
  out.pos_inf = detail::count_from_double(b_global[2]);
  out.neg_inf = detail::count_from_double(b_global[3]);
  out.zeros = detail::count_from_double(b_global[4]);
  std::uint64_t finite = 0;
  const double mean = global_mean_scaled(b_global, finite);
  if (finite == 0) return out;
  out.min = a_global[0];
  out.max = -a_global[1];
  out.max_abs = -a_global[2];
  out.scale_exp = global_scale_exp(a_global);
  out.mean_scaled = mean;
  out.m2_scaled = c_global[0];
  return out;
}

/// The global entropy_stats from its reduced rounds A and B (no round C: sums and extrema
/// are all it has).
MLDIAG_HOST_DEVICE inline entropy_stats finish(const double* a_global,
                                               const double* b_global) noexcept {
  entropy_stats out;
  out.rows = detail::count_from_double(b_global[0]);
  out.invalid_rows = detail::count_from_double(b_global[1]);
  out.sum = b_global[2];
  out.normalized_sum = b_global[3];
  out.min = a_global[0];  // +Inf, -Inf when no rank has a row: the defaults, as merge keeps
  out.max = -a_global[1];
  out.normalized_min = a_global[2];
  out.normalized_max = -a_global[3];
  return out;
}

// ---- whole buffers, on the host: what the tests (and an MPI or gloo user) call --------------

/// Packs round A of a rank's lists into `a` (layout.a_size() doubles).
///
/// **Example** (one rank's part; an all-reduce of your choice does the MIN and SUMs)
/// ```cpp
/// const mldiag::distributed::packed_layout L{stats.size(), entropy.size()};
/// std::vector<double> a(L.a_size()), b(L.b_size()), c(L.c_size());
/// pack_round_a(stats, entropy, a);        all_reduce_min(a);
/// pack_round_b(stats, entropy, a, b);     all_reduce_sum(b);
/// pack_round_c(stats, a, b, c);           all_reduce_sum(c);
/// finish_rounds(a, b, c, stats, entropy); // stats, entropy: now the global ones
/// ```
inline void pack_round_a(std::span<const tensor_stats> stats,
                         std::span<const entropy_stats> entropy, std::span<double> a) noexcept {
  const packed_layout L{stats.size(), entropy.size()};
  for (std::size_t i = 0; i < stats.size(); ++i)
    pack_a(stats[i], a.data() + L.a_per_tensor * i);
  for (std::size_t j = 0; j < entropy.size(); ++j)
    pack_a(entropy[j], a.data() + L.a_entropy_offset() + L.a_per_entropy * j);
}

/// Packs round B into `b` (layout.b_size() doubles), given the reduced round A.
inline void pack_round_b(std::span<const tensor_stats> stats,
                         std::span<const entropy_stats> entropy, std::span<const double> a_global,
                         std::span<double> b) noexcept {
  const packed_layout L{stats.size(), entropy.size()};
  for (std::size_t i = 0; i < stats.size(); ++i)
    pack_b(stats[i], a_global.data() + L.a_per_tensor * i, b.data() + L.b_per_tensor * i);
  for (std::size_t j = 0; j < entropy.size(); ++j)
    pack_b(entropy[j], b.data() + L.b_entropy_offset() + L.b_per_entropy * j);
}

/// Packs round C into `c` (layout.c_size() doubles), given the reduced rounds A and B.
inline void pack_round_c(std::span<const tensor_stats> stats, std::span<const double> a_global,
                         std::span<const double> b_global, std::span<double> c) noexcept {
  const packed_layout L{stats.size(), 0};
  for (std::size_t i = 0; i < stats.size(); ++i)
    pack_c(stats[i], a_global.data() + L.a_per_tensor * i, b_global.data() + L.b_per_tensor * i,
           c.data() + L.c_per_tensor * i);
}

/// Writes the global statistics into `stats` and `entropy` (the sizes the rounds were packed for).
inline void finish_rounds(std::span<const double> a_global, std::span<const double> b_global,
                          std::span<const double> c_global, std::span<tensor_stats> stats,
                          std::span<entropy_stats> entropy) noexcept {
  const packed_layout L{stats.size(), entropy.size()};
  for (std::size_t i = 0; i < stats.size(); ++i)
    stats[i] = finish(a_global.data() + L.a_per_tensor * i, b_global.data() + L.b_per_tensor * i,
                      c_global.data() + L.c_per_tensor * i);
  for (std::size_t j = 0; j < entropy.size(); ++j)
    entropy[j] = finish(a_global.data() + L.a_entropy_offset() + L.a_per_entropy * j,
                        b_global.data() + L.b_entropy_offset() + L.b_per_entropy * j);
}

}  // namespace mldiag::distributed
