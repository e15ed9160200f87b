// SPDX-License-Identifier: Apache-2.0
/// Row entropy of probabilities or logits (attention, router, output distributions).
#pragma once

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/config.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/guided_units.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>
#include <new>  // placement new, std::launder
#include <string>
#include <utility>  // std::index_sequence

namespace mldiag {

class host_engine;  // stats/host_engine.hpp: included by whoever has one

/// Entropy of the rows of a tensor, in nats, summarized: mean, min and max over rows, and the
/// same for the entropy normalized by log(support) (1 = uniform, 0 = one-hot). Mergeable:
/// rows add, sums add, extrema combine.
///
/// Support is the row length for probabilities and the number of entries that are not -inf
/// (masked) for logits; a row whose support is 1 has normalized entropy 0.
/// Rows that cannot have an entropy are counted in `invalid_rows` and left out of the rest:
/// NaN or +Inf anywhere, a negative or infinite probability, a probability row summing to 0,
/// a logit row that is entirely -inf.
struct entropy_stats {
  std::uint64_t rows = 0;          ///< rows with an entropy
  std::uint64_t invalid_rows = 0;  ///< rows without one (see above)
  double sum = 0.0;                ///< sum of the rows' entropies
  double min = HUGE_VAL;
  double max = -HUGE_VAL;
  double normalized_sum = 0.0;
  double normalized_min = HUGE_VAL;
  double normalized_max = -HUGE_VAL;

  MLDIAG_HOST_DEVICE [[nodiscard]] double mean() const noexcept {
    return rows == 0 ? 0.0 : sum / static_cast<double>(rows);
  }
  MLDIAG_HOST_DEVICE [[nodiscard]] double normalized_mean() const noexcept {
    return rows == 0 ? 0.0 : normalized_sum / static_cast<double>(rows);
  }

  /// Adds one row's entropy `h` with support `n`.
  MLDIAG_HOST_DEVICE void add_row(double h, std::uint64_t n) noexcept {
    add_row(h, n, n > 1 ? std::log(static_cast<double>(n)) : 0.0);
  }
  /// The same with log(n) given (rows of one length share it: one log per tensor).
  MLDIAG_HOST_DEVICE void add_row(double h, std::uint64_t n, double log_n) noexcept {
    const double norm = n > 1 ? h / log_n : 0.0;
    ++rows;
    sum += h;
    min = detail::lesser(min, h);
    max = detail::greater(max, h);
    normalized_sum += norm;
    normalized_min = detail::lesser(normalized_min, norm);
    normalized_max = detail::greater(normalized_max, norm);
  }

  MLDIAG_HOST_DEVICE entropy_stats& merge(const entropy_stats& o) noexcept {
    rows += o.rows;
    invalid_rows += o.invalid_rows;
    sum += o.sum;
    min = detail::lesser(min, o.min);
    max = detail::greater(max, o.max);
    normalized_sum += o.normalized_sum;
    normalized_min = detail::lesser(normalized_min, o.normalized_min);
    normalized_max = detail::greater(normalized_max, o.normalized_max);
    return *this;
  }

  friend bool operator==(const entropy_stats&, const entropy_stats&) = default;
};

[[nodiscard]] MLDIAG_HOST_DEVICE inline entropy_stats merge(entropy_stats a,
                                                          const entropy_stats& b) noexcept {
  return a.merge(b);
}

/// Which rows of a tensor of rows the row entropy reads, and on which steps: every
/// `row_stride`-th row, starting at a row that rotates with the step so that every row is
/// read once in `row_stride` sampled steps, on every `every`-th step. The default reads every
/// row on every step. The mean over a sample estimates the mean over all rows without bias;
/// the sampled min and max lie inside the true ones.
///
/// **Example**
/// ```cpp
/// mldiag::entropy_sampling s{.row_stride = 4, .every = 2};
/// if (s.due(step)) rec.record_entropy("attn.3", mldiag::entropy_from_logits(scores, 32, s, step));
/// ```
struct entropy_sampling {
  std::uint32_t row_stride = 1;  ///< read rows first, first + stride, ... (1: all)
  std::uint32_t every = 1;       ///< read on steps divisible by this (1: every step)
  /// Whether step `step` is one the policy reads (false for a zero `every`: an invalid policy
  /// reads nothing rather than divide by zero; `entropy_from_logits` refuses it with a message).
  [[nodiscard]] constexpr bool due(std::int64_t step) const noexcept {
    return every != 0 && step % static_cast<std::int64_t>(every) == 0;
  }
  /// The first row read at step `step`: (step / every) mod row_stride, so that consecutive
  /// sampled steps read consecutive offsets.
  [[nodiscard]] constexpr std::uint64_t first_row(std::int64_t step) const noexcept {
    if (row_stride <= 1 || every == 0) return 0;
    const std::int64_t k = step / static_cast<std::int64_t>(every);
    const auto stride = static_cast<std::int64_t>(row_stride);
    return static_cast<std::uint64_t>(((k % stride) + stride) % stride);
  }
};

/// The state of an online log-sum-exp over a row of logits: running max `m`,
/// S = sum e^(x - m), U = sum (x - m) e^(x - m); the entropy of softmax(row) is
/// log S - U / S. Two states of parts of one row merge exactly (`merge`), so a row can be read
/// in pieces and no probability is ever materialized. The host's scalar row path uses it; the
/// device entropy keeps float sums of its own (`cuda/device_entropy.cuh`).
struct logit_row_state {
  double m = -HUGE_VAL;
  double s = 0.0;
  double u = 0.0;
  std::uint64_t support = 0;  ///< entries that are not -inf

  /// Adds a finite logit (callers skip -inf, the masked entries).
  //
  // x - m can overflow for float64 logits (x = 1e308, m = -1e308: -Inf) and then e = 0 and
  // d * e would be NaN. Where e underflows to 0 the terms it multiplies are below the double
  // range too (|d| e^d < 1e-300 once d < -745), so they are dropped, which is their value.
  MLDIAG_HOST_DEVICE void add(double x) noexcept {
    ++support;
    if (s == 0.0) {  // first entry
      m = x;
      s = 1.0;
      return;
    }
    if (x <= m) {
      const double d = x - m;
      const double e = std::exp(d);
      if (e == 0.0) return;  // far below the maximum: contributes nothing representable
      s += e;
      u += d * e;
    } else {  // new maximum: rescale what is there to it
      const double d = m - x;
      const double e = std::exp(d);
      if (e == 0.0) {  // everything so far is far below the new maximum
        u = 0.0;
        s = 1.0;
      } else {
        u = (u + d * s) * e;
        s = s * e + 1.0;
      }
      m = x;
    }
  }
  MLDIAG_HOST_DEVICE void merge(const logit_row_state& o) noexcept {
    if (o.s == 0.0) return;
    if (s == 0.0) {
      *this = o;
      return;
    }
    const double mm = detail::greater(m, o.m);
    u = rescaled_u(u, s, m - mm) + rescaled_u(o.u, o.s, o.m - mm);
    s = rescaled_s(s, m - mm) + rescaled_s(o.s, o.m - mm);
    m = mm;
    support += o.support;
  }
  /// Entropy in nats; 0 for a single entry. NaN only for a state no finite row produces.
  MLDIAG_HOST_DEVICE [[nodiscard]] double entropy() const noexcept {
    const double h = std::log(s) - u / s;
    return h < 0.0 ? 0.0 : h;  // rounding below 0 is 0; a NaN stays a NaN
  }

 private:
  // A part's (S, U) brought from its maximum to a maximum d = m_part - m higher (d <= 0,
  // possibly -Inf when the difference overflows): e^d times, dropped where e^d underflows.
  MLDIAG_HOST_DEVICE static double rescaled_s(double s, double d) noexcept {
    const double e = std::exp(d);
    return e == 0.0 ? 0.0 : s * e;
  }
  MLDIAG_HOST_DEVICE static double rescaled_u(double u, double s, double d) noexcept {
    const double e = std::exp(d);
    return e == 0.0 ? 0.0 : (u + d * s) * e;
  }
};

namespace detail {

enum class entropy_input { probabilities, logits };

// Classifies an element by bits: 0 finite, 1 NaN or +Inf, 2 -Inf.
template <class F>
int entropy_class(typename F::storage u) noexcept {
  const auto a = static_cast<typename F::storage>(u & F::abs_mask);
  if (is_finite_bits<F>(a)) return 0;
  if (F::has_inf && a == F::inf && u != a) return 2;
  return 1;
}

// H of a row of probabilities normalized to sum 1: log S - T / S with S = sum p and
// T = sum p log p (0 log 0 = 0), both over p * 2^-k, where 2^k is above the row's largest p
// so far (exact scaling, redone when a larger p arrives; H does not depend on the scale).
// Unscaled, float64 rows at the range's edge overflow: {1e308, 1e308} gave S = +Inf and
// H = NaN (issue 16); rows of denormals keep their digits too.
struct probability_row_sums {
  double s = 0.0, t = 0.0;
  double bound = 0.0;  // 2^k: every p so far is below it (0 before the first)
  double inv = 1.0;    // 2^-k
  int k = 0;

  void add(double p) noexcept {  // p > 0, finite
    if (!(p < bound)) grow(p);
    const double x = p * inv;
    if (x == 0.0) return;  // 2^1022 times below the largest p: nothing it can change
    s += x;
    t += x * std::log(x);
  }
  void grow(double p) noexcept {
    int e = 0;
    (void)std::frexp(p, &e);                  // p < 2^e
    e = std::min(std::max(e, -1021), 1024);  // 2^-e normal or exactly 2^-1024
    if (bound > 0.0) {  // rescale by f = 2^(k - e): T = f (T + S log f)
      const double log_f = static_cast<double>(k - e) * 0.69314718055994530942;
      t = std::ldexp(t + s * log_f, k - e);
      s = std::ldexp(s, k - e);
    }
    k = e;
    inv = std::ldexp(1.0, -e);
    bound = e >= 1024 ? HUGE_VAL : std::ldexp(1.0, e);
  }
  [[nodiscard]] double entropy() const noexcept {
    const double h = std::log(s) - t / s;
    return h < 0.0 ? 0.0 : h;  // rounding below 0 is 0; a NaN stays a NaN
  }
};

template <class F, class Fetch>
void entropy_rows_typed(entropy_input kind, std::uint64_t rows, std::uint64_t row_len,
                        Fetch&& fetch, entropy_stats& out) noexcept {
  for (std::uint64_t r = 0; r < rows; ++r) {
    bool invalid = false;
    if (kind == entropy_input::logits) {
      logit_row_state st;
      for (std::uint64_t i = 0; i < row_len; ++i) {
        const auto u = F::bits(fetch());
        const int c = entropy_class<F>(u);
        if (c == 0) st.add(finite_value<F>(u));
        else if (c == 1) invalid = true;  // keep reading: the fetcher walks the row
      }
      const double h = invalid || st.support == 0 ? 0.0 : st.entropy();
      // A row whose entropy is not a number is counted invalid, never clamped to a valid 0.
      if (invalid || st.support == 0 || !(h >= 0.0)) ++out.invalid_rows;
      else out.add_row(h, st.support);
    } else {
      probability_row_sums row;
      for (std::uint64_t i = 0; i < row_len; ++i) {
        const auto u = F::bits(fetch());
        if (entropy_class<F>(u) != 0) {
          invalid = true;
          continue;
        }
        const double p = finite_value<F>(u);
        if (p < 0.0) invalid = true;
        else if (p > 0.0) row.add(p);
      }
      const double h = invalid || row.s == 0.0 ? 0.0 : row.entropy();
      if (invalid || row.s == 0.0 || !(h >= 0.0)) ++out.invalid_rows;
      else out.add_row(h, row_len);
    }
  }
}

#ifdef MLDIAG_HOST_VECTORS
// ---- Row entropy of logits in float lanes (issue 18) ----
// The online log-sum-exp above costs one double exp per element (about 8 ns: the monitor's
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
// double adds cost about 64 cycles a row — half of a 32-entry row's time (2026-12-03).
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
      // slower than AVX2 with `v != v`, 2026-12-03), never an integer max.
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

// (Not in nvcc's host pass: its front end does not expand a pack inside the builtin.)
#if defined(__has_builtin) && !defined(__CUDACC__)
#if __has_builtin(__builtin_shufflevector)
#define MLDIAG_COLUMN_ENTROPY 1
#endif
#endif

#ifdef MLDIAG_COLUMN_ENTROPY
// ---- Short rows, one row a lane ----
// A row of 32 logits is two AVX-512 vectors: the row kernel above spends most of its time on
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
    // Pass 1: each row's largest value, whether it has a NaN or +Inf (by bits, as above), and
    // one past its last entry that is not -inf.
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
    // instead measured slower: 31 against 24 ns a 32-logit row, 2026-12-03.)
    for (std::size_t k = 0; k < here; ++k) {
      if (bad[k] != 0 || !(h[k] == h[k])) ++out.invalid_rows;  // NaN: no finite row gives one
      else out.add_row(h[k] < 0.0 ? 0.0 : h[k], static_cast<std::uint64_t>(n[k]), ln[k]);
    }
  }
}
#endif  // MLDIAG_COLUMN_ENTROPY

// Short rows in columns where the compiler has the shuffles, the rest row by row.
template <class F, std::size_t L>
[[gnu::always_inline]] inline void logit_rows_any(const typename F::element* x, std::uint64_t rows,
                                                  std::uint64_t row_len, std::uint64_t pitch,
                                                  entropy_stats& out) noexcept {
#ifdef MLDIAG_COLUMN_ENTROPY
  // Not for 4 lanes (SSE2): 82 against 73 ns a 32-logit row there, where AVX2 went from 48
  // to 42 and AVX-512 from 64 to 24 (2026-12-03, one thread of a Xeon, in L1).
  if (L >= 8 && row_len <= column_kernel_max_len) {
    logit_rows_columns<F, L>(x, rows, row_len, pitch, out);
    return;
  }
#endif
  logit_rows_float<F, L>(x, rows, row_len, pitch, out);
}

template <class F>
void logit_rows_portable(const typename F::element* x, std::uint64_t rows, std::uint64_t row_len,
                         std::uint64_t pitch, entropy_stats& out) noexcept {
  logit_rows_any<F, lanes>(x, rows, row_len, pitch, out);
}
#ifdef MLDIAG_HOST_DISPATCH
template <class F>
__attribute__((target("avx2,fma"))) void logit_rows_avx2(const typename F::element* x, std::uint64_t rows,
                                                         std::uint64_t row_len, std::uint64_t pitch,
                                                         entropy_stats& out) noexcept {
  logit_rows_any<F, 8>(x, rows, row_len, pitch, out);
}
template <class F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void logit_rows_avx512(
    const typename F::element* x, std::uint64_t rows, std::uint64_t row_len, std::uint64_t pitch,
    entropy_stats& out) noexcept {
  logit_rows_any<F, 16>(x, rows, row_len, pitch, out);
}
#endif

// The float-lane path where it applies (contiguous fp32, bf16 or fp16 logits); false elsewhere.
template <class F>
bool logit_rows_fast(const typename F::element* x, std::uint64_t rows, std::uint64_t row_len, std::uint64_t pitch,
                     entropy_stats& out) noexcept {
  if constexpr (std::is_same_v<F, fmt_f32> || std::is_same_v<F, fmt_bf16> || std::is_same_v<F, fmt_f16>) {
#ifdef MLDIAG_HOST_DISPATCH
    switch (active_host_isa()) {
      case host_isa::avx512_bf16:  // the logits have no dot-product kernel of their own
      case host_isa::avx512: logit_rows_avx512<F>(x, rows, row_len, pitch, out); return true;
      case host_isa::avx2: logit_rows_avx2<F>(x, rows, row_len, pitch, out); return true;
      case host_isa::portable: break;
    }
#endif
    logit_rows_portable<F>(x, rows, row_len, pitch, out);
    return true;
  } else {
    (void)x, (void)rows, (void)row_len, (void)pitch, (void)out;
    return false;
  }
}
#endif  // MLDIAG_HOST_VECTORS

// The selected rows (first_row, first_row + row_stride, ...) are cut into at most
// `entropy_chunks` chunks by their count alone; each chunk's rows are summed in order and the
// chunks merged in order, so the result is the same on the calling thread and on any number
// of an engine's threads (the partials live on the stack: 256 x 64 bytes, no allocation).
// A chunk holds at least `entropy_chunk_rows` rows and starts at a multiple of 16, so that
// the column kernel takes whole groups of rows (chunks of 4 rows, as 1024 rows once made,
// left it nothing).
inline constexpr std::uint64_t entropy_chunks = 256;
inline constexpr std::uint64_t entropy_chunk_rows = 64;

// The first selected row of chunk k of `chunks` over `selected` rows.
inline std::uint64_t entropy_chunk_begin(std::uint64_t selected, std::uint64_t chunks, std::uint64_t k) noexcept {
  if (k >= chunks) return selected;
  return (selected / chunks * k + selected % chunks * k / chunks) / 16 * 16;  // selected * k / chunks, no overflow
}

// The entropy of the selected rows [j0, j1) of a tensor of format F.
template <class F>
void entropy_chunk(const tensor_ref& t, entropy_input kind, std::uint64_t row_len, std::uint64_t first_row,
                   std::uint64_t row_stride, std::uint64_t j0, std::uint64_t j1, entropy_stats& out) noexcept {
  using element = typename F::element;
  const auto* base = static_cast<const element*>(t.data());
#ifdef MLDIAG_HOST_VECTORS
  // Contiguous logits: every selected row in one call, the sampled ones `row_stride` rows
  // apart (one call per sampled row cost a dispatch and a log(row_len) each, so sampling
  // every 4th row of 32 logits saved no time, issue 18).
  if (kind == entropy_input::logits && t.is_contiguous() &&
      logit_rows_fast<F>(base + (first_row + j0 * row_stride) * row_len, j1 - j0, row_len,
                         row_stride * row_len, out)) {
    return;
  }
#endif
  // Consecutive rows in one call when every row is read, one call per sampled row otherwise.
  const std::uint64_t per_call = row_stride == 1 ? j1 - j0 : 1;
  for (std::uint64_t j = j0; j < j1; j += per_call) {
    const std::uint64_t r = first_row + j * row_stride;
    if (t.is_contiguous()) {
      const element* row = base + r * row_len;
      std::uint64_t i = 0;
      entropy_rows_typed<F>(kind, per_call, row_len, [&] { return row[i++]; }, out);
    } else {
      strided_cursor cursor(t.layout(), r * row_len);
      entropy_rows_typed<F>(kind, per_call, row_len, [&] {
        const element e = base[cursor.offset()];
        cursor.next();
        return e;
      }, out);
    }
  }
}

// `run(job)` runs job(worker) on every worker of an engine (host_engine::run), or on the
// calling thread alone; `threads` says how many that is.
template <class F, class Runner>
entropy_stats entropy_typed(const tensor_ref& t, entropy_input kind, std::uint64_t row_len, std::uint64_t first_row,
                            std::uint64_t row_stride, Runner&& run, unsigned threads) {
  const std::uint64_t rows = t.numel() / row_len;
  const std::uint64_t selected = first_row < rows ? (rows - first_row + row_stride - 1) / row_stride : 0;
  const std::uint64_t chunks = std::clamp<std::uint64_t>(selected / entropy_chunk_rows, selected == 0 ? 0 : 1, entropy_chunks);
  // Storage for the partials, not initialized: a call with 4 chunks should not construct 256
  // of them (16 KiB of stores); each chunk's job constructs its own.
  struct slot {
    alignas(entropy_stats) unsigned char bytes[sizeof(entropy_stats)];
  };
  static_assert(std::is_trivially_destructible_v<entropy_stats>);
  std::array<slot, entropy_chunks> parts;
  guided_units units(static_cast<std::size_t>(chunks), threads);
  auto job = [&](unsigned) {
    std::size_t begin = 0, end = 0;
    while (units.take(begin, end)) {
      for (std::uint64_t k = begin; k < end; ++k) {
        auto* part = ::new (static_cast<void*>(parts[k].bytes)) entropy_stats{};
        entropy_chunk<F>(t, kind, row_len, first_row, row_stride, entropy_chunk_begin(selected, chunks, k),
                         entropy_chunk_begin(selected, chunks, k + 1), *part);
      }
    }
  };
  run(job);
  entropy_stats out;
  for (std::uint64_t k = 0; k < chunks; ++k) out.merge(*std::launder(reinterpret_cast<entropy_stats*>(parts[k].bytes)));
  return out;
}

template <class Runner>
entropy_stats entropy_dispatch(const tensor_ref& t, std::int64_t row_len, entropy_input kind, std::string_view who,
                               const entropy_sampling& sampling, std::int64_t step, Runner&& run,
                               unsigned threads) {
  require_host(t, who);
  if (sampling.row_stride == 0 || sampling.every == 0) {
    fail(who, t.name(), "entropy_sampling with row_stride " + std::to_string(sampling.row_stride) +
                            " and every " + std::to_string(sampling.every) +
                            ": both must be at least 1 (1 and 1 read every row on every step)");
  }
  if (row_len <= 0) {
    fail(who, t.name(), "row length " + std::to_string(row_len) + " is not positive");
  }
  const auto len = static_cast<std::uint64_t>(row_len);
  if (t.numel() % len != 0) {
    fail(who, t.name(), std::to_string(t.numel()) + " elements do not divide into rows of " +
                            std::to_string(row_len) + "; pass the length of the last dimension");
  }
  return with_format(t.dtype(), [&](auto tag) {
    return entropy_typed<typename decltype(tag)::type>(t, kind, len, sampling.first_row(step),
                                                       sampling.row_stride, run, threads);
  });
}

// On the calling thread.
inline entropy_stats entropy_dispatch(const tensor_ref& t, std::int64_t row_len, entropy_input kind,
                                      std::string_view who, const entropy_sampling& sampling = {},
                                      std::int64_t step = 0) {
  return entropy_dispatch(t, row_len, kind, who, sampling, step, [](auto& job) { job(0u); }, 1u);
}

}  // namespace detail

/// Entropy of each row of probabilities (rows of `row_len` consecutive logical elements):
/// -sum p log p of the row normalized to sum 1, with 0 log 0 = 0.
///
/// **Example**
/// ```cpp
/// std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f, 1.0f, 0.0f, 0.0f, 0.0f};
/// auto e = mldiag::entropy_from_probs(p, 4);  // rows 2: log 4 and 0; normalized 1 and 0
/// ```
[[nodiscard]] inline entropy_stats entropy_from_probs(const tensor_ref& t, std::int64_t row_len) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::probabilities,
                                  "entropy_from_probs");
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_probs(const V& x, std::int64_t row_len) {
  return entropy_from_probs(as_tensor_ref({}, x), row_len);
}

/// Entropy of softmax of each row of logits, in one pass with an online log-sum-exp (no
/// probabilities are formed; stable for logits like 10000..10003). -inf entries are masked.
///
/// **Example**
/// ```cpp
/// std::vector<double> z = {-1, 0, 1};
/// auto e = mldiag::entropy_from_logits(z, 3);  // e.mean() == 0.832396 nats
/// ```
[[nodiscard]] inline entropy_stats entropy_from_logits(const tensor_ref& t, std::int64_t row_len) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::logits,
                                  "entropy_from_logits");
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_logits(const V& x, std::int64_t row_len) {
  return entropy_from_logits(as_tensor_ref({}, x), row_len);
}

/// The same over the rows that `sampling` selects at step `step` (every `row_stride`-th row,
/// rotating with the step). It does not look at `sampling.every`: ask `sampling.due(step)`
/// before calling, and record nothing on the steps in between (`monitor::observe_logits`
/// does both). Throws `mldiag::error` for a stride or period of 0.
[[nodiscard]] inline entropy_stats entropy_from_logits(const tensor_ref& t, std::int64_t row_len,
                                                       const entropy_sampling& sampling, std::int64_t step) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::logits, "entropy_from_logits",
                                  sampling, step);
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_logits(const V& x, std::int64_t row_len, const entropy_sampling& sampling,
                                                std::int64_t step) {
  return entropy_from_logits(as_tensor_ref({}, x), row_len, sampling, step);
}

/// The same on `engine`'s threads (`<mldiag/stats/host_engine.hpp>`): rows are cut into at
/// most 256 chunks by their count alone and merged in order, so the result is bit-identical
/// to the calling thread's and for any number of threads. No allocation.
///
/// **Example**: `auto e = mldiag::entropy_from_logits(engine, scores, context);`
template <class Engine, tensor V>
  requires std::same_as<Engine, host_engine>
[[nodiscard]] entropy_stats entropy_from_logits(Engine& engine, const V& x, std::int64_t row_len,
                                                const entropy_sampling& sampling = {}, std::int64_t step = 0) {
  return detail::entropy_dispatch(as_tensor_ref({}, x), row_len, detail::entropy_input::logits,
                                  "entropy_from_logits", sampling, step, [&](auto& job) { engine.run(job); },
                                  engine.threads());
}
/// Entropy of probability rows on `engine`'s threads, as `entropy_from_logits(engine, ...)`.
template <class Engine, tensor V>
  requires std::same_as<Engine, host_engine>
[[nodiscard]] entropy_stats entropy_from_probs(Engine& engine, const V& x, std::int64_t row_len) {
  return detail::entropy_dispatch(as_tensor_ref({}, x), row_len, detail::entropy_input::probabilities,
                                  "entropy_from_probs", {}, 0, [&](auto& job) { engine.run(job); },
                                  engine.threads());
}

}  // namespace mldiag
