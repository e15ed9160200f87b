// SPDX-License-Identifier: Apache-2.0
/// The row entropy of short rows of logits, one row a float lane (logit_rows_columns, issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/block_stats_float.hpp"  // float_vectors, fold_to_double; MLDIAG_HOST_VECTORS
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/entropy_rows.hpp"  // entropy_class
#include "mldiag/stats/entropy_stats.hpp"
#include "mldiag/stats/logit_rows_float.hpp"  // exp_nonpositive, load_logits

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>
#include <utility>  // std::index_sequence

namespace mldiag::inline MLDIAG_ABI::detail {

#ifdef MLDIAG_HOST_VECTORS
// (Not in nvcc's host pass: its front end does not expand a pack inside the builtin.)
#if defined(__has_builtin) && !defined(__CUDACC__)
#if __has_builtin(__builtin_shufflevector)
#define MLDIAG_COLUMN_ENTROPY 1
#endif
#endif

#ifdef MLDIAG_COLUMN_ENTROPY
// ---- Short rows, one row a lane ----
// A row of 32 logits is two AVX-512 vectors: logit_rows_float spends most of its time on
// what is per row, not per element — six reductions across lanes, a call to log, the
// scalar tail (64 ns a 32-logit row in L1 on a Xeon; the example transformer's attention
// was 37% of the monitor's cost, issue 18). Here L rows at a time are transposed in
// registers so that lane j holds row j: maxima, classes, S, U and the support are then sums
// down the columns, and log S is one vector log for L rows. Rows of at most `column_kernel_max_len` logits, L at a time (the
// last group padded).
inline constexpr std::size_t column_kernel_max_len = 256;

// Swaps the off-diagonal B x B blocks of the rows a and b (= a's row + B) of an L x L matrix,
// one stage of the recursive transpose.
template <std::size_t B, class T, std::size_t... J>
[[gnu::always_inline]] inline void swap_off_diagonal(T& a, T& b, std::index_sequence<J...>) noexcept {
  constexpr std::size_t L = sizeof...(J);
  const T lo = __builtin_shufflevector(a, b, ((J & B) == 0 ? J : L + J - B)...);
  const T hi = __builtin_shufflevector(a, b, ((J & B) == 0 ? J + B : L + J)...);
  a = lo;
  b = hi;
}

// v[i][j] becomes v[j][i]: log2 L stages of L two-source shuffles (64 for L = 16).
template <std::size_t L, std::size_t B = L / 2, class T>
[[gnu::always_inline]] inline void transpose_lanes(T (&v)[L]) noexcept {
  if constexpr (B >= 1) {
    for (std::size_t i = 0; i < L; ++i)
      if ((i & B) == 0) swap_off_diagonal<B>(v[i], v[i + B], std::make_index_sequence<L>{});
    transpose_lanes<L, B / 2>(v);
  }
}

// log x in float lanes for normal x > 0 (Cephes' logf: x = 2^e m, m in [sqrt(1/2), sqrt 2),
// a degree-8 polynomial for log m, ln 2 in two parts; within 1 ulp plus 2^-24 |e ln 2|
// relative to the result's magnitude). Used for S >= 1 and supports >= 1.
template <std::size_t L>
[[gnu::always_inline]] inline void log_positive(const typename float_vectors<L>::f32& x,
                                                typename float_vectors<L>::f32& result) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  const i32 bits = __builtin_bit_cast(i32, x);
  i32 e = (bits >> 23) - 126;
  const f32 m = __builtin_bit_cast(f32, (bits & 0x7fffff) | 0x3f000000);  // in [0.5, 1)
  const i32 small = m < 0.707106781186547524f;
  e += small;  // -1 where m < sqrt(1/2): then m is doubled
  const f32 t = (small ? m + m : m) - 1.0f;
  const f32 z = t * t;
  f32 y = t * 7.0376836292e-2f - 1.1514610310e-1f;
  y = y * t + 1.1676998740e-1f;
  y = y * t - 1.2420140846e-1f;
  y = y * t + 1.4249322787e-1f;
  y = y * t - 1.6668057665e-1f;
  y = y * t + 2.0000714765e-1f;
  y = y * t - 2.4999993993e-1f;
  y = y * t + 3.3333331174e-1f;
  y = y * t * z;
  const f32 ef = __builtin_convertvector(e, f32);
  y += ef * -2.12194440e-4f;
  y -= 0.5f * z;
  result = t + y + ef * 0.693359375f;
}

// A float vector as two vectors of doubles (lanes 0 .. L/2-1, then the rest).
template <std::size_t L>
[[gnu::always_inline]] inline void to_double_halves(const typename float_vectors<L>::f32& v,
                                                    typename float_vectors<L>::f64h& lo,
                                                    typename float_vectors<L>::f64h& hi) noexcept {
  lo = typename float_vectors<L>::f64h{};
  hi = lo;
  fold_to_double<L>(v, lo, hi);
}

// The entropy of `rows` rows (pitch apart) of at most column_kernel_max_len logits, as
// logit_rows_float computes it: lanes hold rows, `L` rows at a time. Rows are added to `out`
// in order, so the result differs from the row kernel's only by the float log (within the
// same bound, docs/stats.md).
template <class F, std::size_t L>
[[gnu::always_inline]] inline void logit_rows_columns(const typename F::element* x, std::uint64_t rows,
                                                      std::uint64_t row_len, std::uint64_t pitch,
                                                      entropy_stats& out) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  using f64h = typename V::f64h;
  const std::size_t len = static_cast<std::size_t>(row_len);
  const std::size_t blocks = (len + L - 1) / L;
  const f32 neg_inf = f32{} - HUGE_VALF;
  typedef float f32q __attribute__((vector_size(L * 2)));  // L/2 floats
  f32 columns[column_kernel_max_len];  // [len][L]: column c of the L rows, row k in lane k
  for (std::uint64_t row = 0; row < rows; row += L, x += L * pitch) {
    // The last group may hold fewer than L rows: its other lanes read its first row again
    // and are dropped below. Every row is computed in a lane of its own, by the same
    // operations whatever its neighbours, so a row's entropy does not depend on where it
    // falls in a group: shards of a tensor merge to the whole tensor's result (up to the
    // order of the sum), as tests/distributed checks.
    const std::size_t here = static_cast<std::size_t>(std::min<std::uint64_t>(L, rows - row));
    // Transpose the L rows into `columns`, L columns at a time; a last partial block is
    // filled with -inf (masked: it adds nothing, not even support).
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t c0 = b * L, n = std::min(L, len - c0);
      f32 v[L];
      for (std::size_t k = 0; k < L; ++k) {
        const auto* p = x + (k < here ? k : 0) * pitch + c0;
        if (n == L) {
          i32 a;
          load_logits<F, L>(p, v[k], a);
        } else {
          std::array<float, L> part;
          part.fill(-HUGE_VALF);
          for (std::size_t i = 0; i < n; ++i) {
            const auto u = F::bits(p[i]);
            const int c = entropy_class<F>(u);
            part[i] = c == 0 ? value_of<F>(u) : c == 2 ? -HUGE_VALF : __builtin_nanf("");
          }
          std::memcpy(&v[k], part.data(), sizeof v[k]);
        }
      }
      transpose_lanes<L>(v);
      for (std::size_t c = 0; c < n; ++c) columns[c0 + c] = v[c];
    }
    // Pass 1: each row's largest value, whether it has a NaN or +Inf (by bits, as in
    // logit_rows_float), and one past its last entry that is not -inf.
    f32 mx = neg_inf;
    i32 top_bits = i32{} + std::numeric_limits<std::int32_t>::min(), top_abs = {}, live_end = {};
    for (std::size_t c = 0; c < len; ++c) {
      const f32 v = columns[c];
      const i32 fb = __builtin_bit_cast(i32, v);
      const i32 fa = fb & 0x7fffffff;
      top_bits = fb > top_bits ? fb : top_bits;
      top_abs = fa > top_abs ? fa : top_abs;
      mx = v > mx ? v : mx;
      live_end = v != neg_inf ? i32{} + static_cast<std::int32_t>(c + 1) : live_end;
    }
    const i32 invalid = (top_bits >= 0x7f800000) | (top_abs > 0x7f800000) | (mx == neg_inf);
    // Pass 2 stops after the group's last column with an entry that is not -inf: the columns
    // after it add exactly +0 to S and U and nothing to the support, so the result is the same
    // bit for bit. Under a causal mask the first rows of a head end early: for 32 keys, the
    // group of rows 0-15 ends at column 16, and pass 2 does 3/4 of the work.
    std::size_t end = 0;
    {
      std::array<std::int32_t, L> ends;
      std::memcpy(ends.data(), &live_end, sizeof live_end);
      for (std::size_t k = 0; k < L; ++k) end = std::max(end, static_cast<std::size_t>(ends[k]));
    }
    // Pass 2: S, U and the support, runs of float_run_groups columns folded into double.
    f64h s0 = {}, s1 = {}, u0 = {}, u1 = {};
    i32 support = {};
    for (std::size_t c = 0; c < end;) {
      const std::size_t run_end = std::min(end, c + float_run_groups);
      f32 sf = {}, uf = {};
      for (; c < run_end; ++c) {
        const f32 v = columns[c];
        support -= v != neg_inf;
        const f32 d = v - mx;
        f32 e;
        exp_nonpositive<L>(d, e);
        sf += e;
        uf += (e == 0.0f ? f32{} : d) * e;
      }
      fold_to_double<L>(sf, s0, s1);
      fold_to_double<L>(uf, u0, u1);
    }
    // H = log S - U / S; S >= 1 in every valid lane (the largest entry adds e^0 = 1).
    f32 sf;
    {
      const f32q a = __builtin_convertvector(s0, f32q), b = __builtin_convertvector(s1, f32q);
      std::memcpy(&sf, &a, sizeof a);
      std::memcpy(reinterpret_cast<char*>(&sf) + sizeof a, &b, sizeof b);
    }
    sf = invalid ? f32{} + 1.0f : sf;
    f32 log_s, log_n;
    log_positive<L>(sf, log_s);
    log_positive<L>(__builtin_convertvector(support, f32), log_n);
    f64h ls0, ls1, ln0, ln1;
    to_double_halves<L>(log_s, ls0, ls1);
    to_double_halves<L>(log_n, ln0, ln1);
    std::array<double, L> h, ln;
    const f64h h0 = ls0 - u0 / s0, h1 = ls1 - u1 / s1;
    std::memcpy(h.data(), &h0, sizeof h0);
    std::memcpy(h.data() + L / 2, &h1, sizeof h1);
    std::memcpy(ln.data(), &ln0, sizeof ln0);
    std::memcpy(ln.data() + L / 2, &ln1, sizeof ln1);
    std::array<std::int32_t, L> bad, n;
    std::memcpy(bad.data(), &invalid, sizeof invalid);
    std::memcpy(n.data(), &support, sizeof support);
    // In row order, as the row kernel adds them. (Sums and extrema kept per lane in vectors
    // instead measured slower: 31 against 24 ns a 32-logit row; docs/benchmarks.md.)
    for (std::size_t k = 0; k < here; ++k) {
      if (bad[k] != 0 || !(h[k] == h[k])) ++out.invalid_rows;  // NaN: no finite row gives one
      else out.add_row(h[k] < 0.0 ? 0.0 : h[k], static_cast<std::uint64_t>(n[k]), ln[k]);
    }
  }
}
#endif  // MLDIAG_COLUMN_ENTROPY
#endif  // MLDIAG_HOST_VECTORS

}  // namespace mldiag::detail
