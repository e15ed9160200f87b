// SPDX-License-Identifier: Apache-2.0
/// The HTML report's x axis: steps grouped into buckets, and a metric's envelope per bucket.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/report/run_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// Steps [first, last] in `count` buckets of `width` steps each; bucket b holds steps
// [begin(b), end(b)] (both included).
struct step_buckets {
  std::int64_t first = 0;
  std::int64_t last = -1;
  std::uint64_t width = 1;
  std::size_t count = 0;

  // Unsigned differences: last - first may not fit in int64 (e.g. steps at both extremes).
  [[nodiscard]] static std::uint64_t distance(std::int64_t from, std::int64_t to) noexcept {
    return static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
  }
  // The bucket of a step, clamped into [0, count - 1]; count must be > 0.
  [[nodiscard]] std::size_t of(std::int64_t step) const noexcept {
    if (step <= first) return 0;
    if (step >= last) return count - 1;
    return static_cast<std::size_t>(distance(first, step) / width);
  }
  [[nodiscard]] std::int64_t begin(std::size_t b) const noexcept {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(first) + b * width);
  }
  [[nodiscard]] std::int64_t end(std::size_t b) const noexcept {
    if (b + 1 >= count) return last;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(begin(b)) + width - 1);
  }
};

// The smallest bucket width that fits the run's step range into `max_columns` buckets.
[[nodiscard]] inline step_buckets make_buckets(std::span<const std::int64_t> steps,
                                               std::size_t max_columns) {
  if (max_columns == 0) throw error("html report: max_columns is 0; ask for at least one column");
  step_buckets b;
  if (steps.empty()) return b;
  const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
  b.first = *lo;
  b.last = *hi;
  const std::uint64_t d = step_buckets::distance(b.first, b.last);
  // ceil((d + 1) / c) written as d / c + 1, which cannot overflow.
  b.width = d / max_columns + 1;
  b.count = static_cast<std::size_t>(d / b.width + 1);
  return b;
}

// One bucket of one metric: the envelope of its finite values and its non-finite count.
struct envelope_cell {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  std::size_t finite = 0;
  std::size_t nan = 0;
  std::size_t pos_inf = 0;
  std::size_t neg_inf = 0;
  std::int64_t first_nonfinite_step = 0;  // valid when nonfinite() > 0
  double first_nonfinite_value = 0.0;

  [[nodiscard]] std::size_t nonfinite() const noexcept { return nan + pos_inf + neg_inf; }
  [[nodiscard]] double mean() const noexcept {
    return finite ? sum / static_cast<double>(finite) : std::numeric_limits<double>::quiet_NaN();
  }
};

// Every logged value of a column in its bucket; absent values (run_log::absent) are skipped,
// NaN and +/-Inf counted. `out` is resized to the bucket count (reused between columns).
inline void envelope(const step_buckets& buckets, std::span<const std::int64_t> steps,
                     std::span<const double> values, std::vector<envelope_cell>& out) {
  out.assign(buckets.count, envelope_cell{});
  const std::size_t n = std::min(steps.size(), values.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double v = values[i];
    if (run_log::is_absent(v)) continue;
    auto& c = out[buckets.of(steps[i])];
    if (std::isfinite(v)) {
      c.min = std::min(c.min, v);
      c.max = std::max(c.max, v);
      c.sum += v;
      ++c.finite;
      continue;
    }
    if (c.nonfinite() == 0 || steps[i] < c.first_nonfinite_step) {
      c.first_nonfinite_step = steps[i];
      c.first_nonfinite_value = v;
    }
    if (std::isnan(v))
      ++c.nan;
    else if (v > 0)
      ++c.pos_inf;
    else
      ++c.neg_inf;
  }
}

}  // namespace mldiag::report::detail::html
