// SPDX-License-Identifier: Apache-2.0
/// The exact row entropy, one row at a time in double, for logits and probabilities of any format.
#pragma once

#include "mldiag/core/config.hpp"
#include "mldiag/stats/element_formats.hpp"
#include "mldiag/stats/entropy_stats.hpp"
#include "mldiag/stats/tensor_stats.hpp"  // detail::greater

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mldiag::inline MLDIAG_ABI {

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

}  // namespace detail
}  // namespace mldiag
