// SPDX-License-Identifier: Apache-2.0
/// Row entropy of probabilities or logits (attention, router, output distributions).
#pragma once

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/config.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/compute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace mldiag {

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
    const double norm = n > 1 ? h / std::log(static_cast<double>(n)) : 0.0;
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

/// The state of an online log-sum-exp over a row of logits: running max `m`,
/// S = sum e^(x - m), U = sum (x - m) e^(x - m); the entropy of softmax(row) is
/// log S - U / S. Two states of parts of one row merge exactly, so a long row can be split
/// across threads or CUDA blocks and no probability is ever materialized.
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

template <class F>
entropy_stats entropy_typed(const tensor_ref& t, entropy_input kind, std::uint64_t row_len) {
  using element = typename F::element;
  entropy_stats out;
  const std::uint64_t rows = t.numel() / row_len;
  const auto* base = static_cast<const element*>(t.data());
  if (t.is_contiguous()) {
    std::uint64_t i = 0;
    entropy_rows_typed<F>(kind, rows, row_len, [&] { return base[i++]; }, out);
  } else {
    strided_cursor cursor(t.layout(), 0);
    entropy_rows_typed<F>(kind, rows, row_len, [&] {
      const element e = base[cursor.offset()];
      cursor.next();
      return e;
    }, out);
  }
  return out;
}

inline entropy_stats entropy_dispatch(const tensor_ref& t, std::int64_t row_len,
                                      entropy_input kind, std::string_view who) {
  require_host(t, who);
  if (row_len <= 0) {
    fail(who, t.name(), "row length " + std::to_string(row_len) + " is not positive");
  }
  const auto len = static_cast<std::uint64_t>(row_len);
  if (t.numel() % len != 0) {
    fail(who, t.name(), std::to_string(t.numel()) + " elements do not divide into rows of " +
                            std::to_string(row_len) + "; pass the length of the last dimension");
  }
  return with_format(t.dtype(), [&](auto tag) {
    return entropy_typed<typename decltype(tag)::type>(t, kind, len);
  });
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

}  // namespace mldiag
