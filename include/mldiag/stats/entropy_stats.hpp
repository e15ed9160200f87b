// SPDX-License-Identifier: Apache-2.0
/// entropy_stats (the summary of a tensor's row entropies) and entropy_sampling (which rows).
#pragma once

#include "mldiag/core/config.hpp"
#include "mldiag/stats/tensor_stats.hpp"  // detail::lesser, detail::greater

#include <cmath>  // std::log, HUGE_VAL
#include <cstdint>

namespace mldiag::inline MLDIAG_ABI {

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
/// if (s.due(step)) rec.observe(mldiag::row_entropy{"attn.3", mldiag::entropy_from_logits(scores, 32, s, step)});
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

}  // namespace mldiag
