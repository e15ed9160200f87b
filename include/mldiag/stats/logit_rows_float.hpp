// SPDX-License-Identifier: Apache-2.0
/// The row entropy of logits in float lanes, one row at a time (logit_rows_float, issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/block_stats_float.hpp"  // float_vectors, fold_to_double; MLDIAG_HOST_VECTORS
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/entropy_rows.hpp"  // entropy_class
#include "mldiag/stats/entropy_stats.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>

namespace mldiag::inline MLDIAG_ABI::detail {

#ifdef MLDIAG_HOST_VECTORS
// ---- Row entropy of logits in float lanes (issue 18) ----
// logit_row_state's log-sum-exp costs one double exp per element (about 8 ns: the monitor's
// largest cost on the example transformer, docs/benchmarks.md). Here a row is read twice
// from L1: its maximum m and its classes first, then e = exp(x - m) in float lanes with the
// polynomial below, S = Σe and U = Σ(x - m)e in float over runs of `float_run_groups`
// vectors folded into double, and H = log S - U/S in double once per row. The error bound
// (tests/stats/entropy_test.cpp checks it against long double softmax): each e within 2 ulp
// of e^(x - m) (x - m itself rounded once), runs adding (R - 1) u, so S and U within about
// 12 u = 7e-7 relative; H = log S - U/S is then within 7e-7 + 1.4e-6 |U/S| nats, which is at
// most 2e-6 (1 + log n) nats for a row of support n. Float64 logits keep the exact path.

// e^x in float lanes for x <= 0 (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-7
// polynomial for e^r, 2^n from the exponent bits; at most 2 ulp). Below -87.3 (or -inf)
// the result is 0, where e^x is below float's normal range: at most 1e-38 of a row whose
// largest term is 1.
// (Vectors by reference: no function here takes or returns one by value, so no ABI depends
// on the target.)
template <std::size_t L>
[[gnu::always_inline]] inline void exp_nonpositive(const typename float_vectors<L>::f32& x,
                                                   typename float_vectors<L>::f32& result) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  const f32 zero = {};
  const i32 underflow = x < -87.3f;
  const f32 xc = underflow ? zero : x;  // keeps -inf and tiny x out of the arithmetic
  constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const f32 t = xc * 1.44269504088896341f + round_magic;
  const f32 n = t - round_magic;  // round(x / ln 2), in [-126, 0]
  const f32 r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts
  f32 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const f32 er = p * (r * r) + r + 1.0f;
  const i32 bits = (__builtin_bit_cast(i32, t) - __builtin_bit_cast(std::int32_t, round_magic) + 127) << 23;
  const f32 e = er * __builtin_bit_cast(f32, bits);
  result = underflow ? zero : e;
}

// Lane reductions as a fixed tree (lane j with lane j + w, w halving): independent operations
// at each level, so the compiler vectorizes them, where a lane-by-lane chain of dependent
// double adds cost about 64 cycles a row — half of a 32-entry row's time.
// Each level has a constant width, so that it is unrolled (a loop over the width was not).
template <std::size_t W, class T, std::size_t L, class Op>
[[gnu::always_inline]] inline void tree_level(std::array<T, L>& a, Op op) noexcept {
  if constexpr (W >= 1) {
    for (std::size_t j = 0; j < W; ++j) a[j] = op(a[j], a[j + W]);
    tree_level<W / 2>(a, op);
  }
}
template <class T, std::size_t L, class Op>
[[gnu::always_inline]] inline T tree_reduce(std::array<T, L>& a, Op op) noexcept {
  tree_level<L / 2>(a, op);
  return a[0];
}

// log(k) for the support of a masked row (under a causal mask every row has its own), from a
// table filled once per process for k < 1024, std::log beyond: the same value as std::log,
// without a log call per row (glibc's log, for S and for the support, was a quarter of a
// 32-logit row's profile, issue 18).
inline double log_of_count(std::uint64_t k) noexcept {
  constexpr std::size_t size = 1024;
  static const std::array<double, size> table = [] {
    std::array<double, size> a{};
    for (std::size_t i = 1; i < size; ++i) a[i] = std::log(static_cast<double>(i));
    return a;
  }();
  return k < size ? table[k] : std::log(static_cast<double>(k));
}

// Loads L elements of format F at p as their float values (fp16's infinities as infinities,
// its NaNs as NaN) and their magnitude bits.
template <class F, std::size_t L>
[[gnu::always_inline]] inline void load_logits(const typename F::element* p, typename float_vectors<L>::f32& v,
                                               typename float_vectors<L>::i32& a) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  using storage = typename F::storage;
  constexpr auto abs_mask = static_cast<std::int32_t>(F::abs_mask);
  constexpr auto sign_bit = static_cast<std::int32_t>(F::abs_mask + 1u);
  constexpr auto inf_bits = static_cast<std::int32_t>(F::inf);
  i32 u;
  if constexpr (sizeof(storage) == 4) {
    std::memcpy(&u, p, sizeof u);
  } else {
    typename V::u16 raw;
    std::memcpy(&raw, p, sizeof raw);
    u = __builtin_convertvector(raw, i32);
  }
  a = u & abs_mask;
  if constexpr (F::sign_shift == F::mag_shift) {
    v = __builtin_bit_cast(f32, u << F::mag_shift);
  } else {
    v = __builtin_bit_cast(f32, ((u & sign_bit) << F::sign_shift) | (a << F::mag_shift));
    if constexpr (F::scale != 1.0f) v *= F::scale;
    // fp16's infinities widen to finite floats: make them infinities again, so that the
    // classes below and the masking of -inf work on the float alone.
    const f32 inf = f32{} + HUGE_VALF;
    v = a == inf_bits ? (v < 0.0f ? -inf : inf) : v;
    v = a > inf_bits ? f32{} + __builtin_nanf("") : v;
  }
}

// The entropy of `rows` rows of `row_len` logits of format F (fp32, bf16, fp16), `pitch`
// elements apart, into `out`, as entropy_rows_typed does for logits: -inf entries masked, a
// row with a NaN or +Inf or with every entry -inf invalid.
template <class F, std::size_t L>
[[gnu::always_inline]] inline void logit_rows_float(const typename F::element* x, std::uint64_t rows,
                                                    std::uint64_t row_len, std::uint64_t pitch,
                                                    entropy_stats& out) noexcept {
  using V = float_vectors<L>;
  using f32 = typename V::f32;
  using i32 = typename V::i32;
  using f64h = typename V::f64h;
  const std::size_t len = static_cast<std::size_t>(row_len);
  const std::size_t groups = len / L;
  const double log_len = std::log(static_cast<double>(len));
  const auto load = [](const typename F::element* p, f32& v, i32& a) { load_logits<F, L>(p, v, a); };
  for (std::uint64_t row = 0; row < rows; ++row, x += pitch) {
    // Pass 1: the largest finite value, and whether anything is NaN or +Inf.
    f32 mx = f32{} - HUGE_VALF;
    i32 top_bits = i32{} + std::numeric_limits<std::int32_t>::min(), top_abs = {};
    for (std::size_t g = 0; g < groups; ++g) {
      f32 v;
      i32 a;
      load(x + g * L, v, a);
      // NaN or +Inf from the float's bits by two integer maxima (checked after the loop):
      // GCC 12 turns vector compares here into scalar ones for 16 lanes (AVX-512 ran 2.7x
      // slower than AVX2 with `v != v`), never an integer max.
      const i32 fb = __builtin_bit_cast(i32, v);
      const i32 fa = fb & 0x7fffffff;
      top_bits = fb > top_bits ? fb : top_bits;  // >= +Inf's bits: +Inf or a positive NaN
      top_abs = fa > top_abs ? fa : top_abs;     // > Inf's magnitude: a NaN of either sign
      mx = v > mx ? v : mx;
    }
    float m = -HUGE_VALF;
    bool invalid = false;
    {
      std::array<float, L> ml;
      std::array<std::int32_t, L> bl, al;
      std::memcpy(ml.data(), &mx, sizeof mx);
      std::memcpy(bl.data(), &top_bits, sizeof top_bits);
      std::memcpy(al.data(), &top_abs, sizeof top_abs);
      const auto larger = [](auto a, auto b) { return a > b ? a : b; };
      m = tree_reduce(ml, larger);
      invalid = tree_reduce(bl, larger) >= 0x7f800000 || tree_reduce(al, larger) > 0x7f800000;
    }
    for (std::size_t i = groups * L; i < len; ++i) {
      const auto u = F::bits(x[i]);
      const int c = entropy_class<F>(u);
      if (c == 1) invalid = true;
      else if (c == 0) m = std::max(m, value_of<F>(u));
    }
    if (invalid || m == -HUGE_VALF) {  // a NaN or +Inf, or every entry -inf
      ++out.invalid_rows;
      continue;
    }
    // Pass 2: S and U around m, and the support (entries above -inf).
    const f32 mv = f32{} + m;
    f64h s0 = {}, s1 = {}, u0 = {}, u1 = {};
    i32 masked = {};
    // A row of one run (up to 8 vectors: 128 logits on AVX-512) sums its lanes in float by
    // the same tree, and only the total becomes a double: the folds and the double tree were
    // a third of a 32-logit row's time. Its bound: 8 terms a lane and 4 tree levels, 12 u
    // as for the longer rows.
    const bool one_run = groups <= float_run_groups;
    float s_one = 0.0f, u_one = 0.0f;
    for (std::size_t g = 0; g < groups;) {
      const std::size_t run_end = std::min(groups, g + float_run_groups);
      f32 sf = {}, uf = {};
      for (; g < run_end; ++g) {
        f32 v;
        i32 a;
        load(x + g * L, v, a);
        masked -= v == -HUGE_VALF;
        const f32 d = v - mv;  // <= 0; -inf for masked entries
        f32 e;
        exp_nonpositive<L>(d, e);
        sf += e;
        uf += (e == 0.0f ? f32{} : d) * e;  // masked and underflowed entries add nothing
      }
      if (one_run) {
        std::array<float, L> sa, ua;
        std::memcpy(sa.data(), &sf, sizeof sf);
        std::memcpy(ua.data(), &uf, sizeof uf);
        s_one = tree_reduce(sa, [](float a, float b) { return a + b; });
        u_one = tree_reduce(ua, [](float a, float b) { return a + b; });
      } else {
        fold_to_double<L>(sf, s0, s1);
        fold_to_double<L>(uf, u0, u1);
      }
    }
    double S = s_one, U = u_one;
    std::uint64_t support = len;
    if (one_run) {
      std::array<std::int32_t, L> kl;
      std::memcpy(kl.data(), &masked, sizeof masked);
      support -= static_cast<std::uint64_t>(tree_reduce(kl, [](auto a, auto b) { return a + b; }));
    } else {
      std::array<double, L> sl, ul;
      std::array<std::int32_t, L> kl;
      std::memcpy(sl.data(), &s0, sizeof s0);
      std::memcpy(sl.data() + L / 2, &s1, sizeof s1);
      std::memcpy(ul.data(), &u0, sizeof u0);
      std::memcpy(ul.data() + L / 2, &u1, sizeof u1);
      std::memcpy(kl.data(), &masked, sizeof masked);
      const auto plus = [](auto a, auto b) { return a + b; };
      S = tree_reduce(sl, plus);  // a fixed order: deterministic
      U = tree_reduce(ul, plus);
      support -= static_cast<std::uint64_t>(tree_reduce(kl, plus));
    }
    for (std::size_t i = groups * L; i < len; ++i) {  // the tail, in double
      const auto u = F::bits(x[i]);
      if (entropy_class<F>(u) == 2) {
        --support;
        continue;
      }
      const double d = static_cast<double>(value_of<F>(u)) - static_cast<double>(m);
      const double e = std::exp(d);
      S += e;
      U += e == 0.0 ? 0.0 : d * e;
    }
    const double h = std::log(S) - U / S;
    if (!(h == h)) ++out.invalid_rows;  // NaN: no finite row gives one; counted, never clamped
    else if (support == len) out.add_row(h < 0.0 ? 0.0 : h, support, log_len);
    else out.add_row(h < 0.0 ? 0.0 : h, support, log_of_count(support));
  }
}
#endif  // MLDIAG_HOST_VECTORS

}  // namespace mldiag::detail
