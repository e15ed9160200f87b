// SPDX-License-Identifier: Apache-2.0
/// Time-series signals over a bounded window: mean, spread, robust location and scale, trend.
#pragma once

#include "mldiag/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace mldiag::signals {

/// The last `capacity` values of a series, oldest first. Memory is allocated once, at
/// construction; `push` never allocates. Statistics skip nothing: push only finite values
/// if the series may hold NaN (detectors do).
///
/// **Example**
/// ```cpp
/// mldiag::signals::window w(100);
/// for (double loss : losses) w.push(loss);
/// auto trend = mldiag::signals::slope(w);  // least squares, with a t-statistic
/// ```
class window {
 public:
  explicit window(std::size_t capacity) : data_(capacity), scratch_(capacity) {
    if (capacity == 0) throw error("signals::window: capacity 0; give the number of values to keep");
  }

  void push(double x) noexcept {
    data_[(start_ + size_) % data_.size()] = x;
    if (size_ < data_.size()) ++size_;
    else start_ = (start_ + 1) % data_.size();
  }
  void clear() noexcept { start_ = size_ = 0; }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return data_.size(); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] bool full() const noexcept { return size_ == data_.size(); }
  /// The i-th value, oldest first.
  [[nodiscard]] double operator[](std::size_t i) const noexcept { return data_[(start_ + i) % data_.size()]; }
  [[nodiscard]] double back() const noexcept { return (*this)[size_ - 1]; }

  /// Arithmetic mean (NaN when empty).
  [[nodiscard]] double mean() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    double s = 0.0;
    for (std::size_t i = 0; i < size_; ++i) s += (*this)[i];
    return s / static_cast<double>(size_);
  }
  /// Largest value (NaN when empty).
  [[nodiscard]] double max() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    double m = (*this)[0];
    for (std::size_t i = 1; i < size_; ++i) m = std::max(m, (*this)[i]);
    return m;
  }
  /// Sample standard deviation (two passes; NaN below two values).
  [[nodiscard]] double stddev() const noexcept {
    if (size_ < 2) return std::numeric_limits<double>::quiet_NaN();
    const double m = mean();
    double q = 0.0;
    for (std::size_t i = 0; i < size_; ++i) q += ((*this)[i] - m) * ((*this)[i] - m);
    return std::sqrt(q / static_cast<double>(size_ - 1));
  }
  /// Median (NaN when empty). Uses a preallocated scratch copy: no allocation.
  [[nodiscard]] double median() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    for (std::size_t i = 0; i < size_; ++i) scratch_[i] = (*this)[i];
    return median_of_scratch(size_);
  }
  /// Median absolute deviation from the median, times 1.4826 (a consistent estimate of the
  /// standard deviation for normal data, robust to outliers).
  [[nodiscard]] double mad() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    const double med = median();
    for (std::size_t i = 0; i < size_; ++i) scratch_[i] = std::fabs((*this)[i] - med);
    return 1.4826 * median_of_scratch(size_);
  }

 private:
  double median_of_scratch(std::size_t n) const noexcept {
    const auto mid = static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(scratch_.begin(), scratch_.begin() + mid, scratch_.begin() + static_cast<std::ptrdiff_t>(n));
    const double upper = scratch_[n / 2];
    if (n % 2 == 1) return upper;
    const double lower = *std::max_element(scratch_.begin(), scratch_.begin() + mid);
    return 0.5 * (lower + upper);
  }

  std::vector<double> data_;
  mutable std::vector<double> scratch_;
  std::size_t start_ = 0, size_ = 0;
};

/// Exponential moving average: value = alpha * x + (1 - alpha) * value; the first value
/// starts it. `alpha` = 2 / (span + 1) matches pandas' `ewm(span=...)` with adjust=False.
class ema {
 public:
  explicit ema(double alpha) : alpha_(alpha) {
    if (!(alpha > 0.0 && alpha <= 1.0)) {
      throw error("signals::ema: alpha " + std::to_string(alpha) + " is outside (0, 1]");
    }
  }
  static ema with_span(double span) { return ema(2.0 / (span + 1.0)); }
  void push(double x) noexcept {
    value_ = count_ == 0 ? x : alpha_ * x + (1.0 - alpha_) * value_;
    ++count_;
  }
  [[nodiscard]] double value() const noexcept {
    return count_ == 0 ? std::numeric_limits<double>::quiet_NaN() : value_;
  }
  [[nodiscard]] std::size_t count() const noexcept { return count_; }

 private:
  double alpha_;
  double value_ = 0.0;
  std::size_t count_ = 0;
};

/// A least-squares line through (i, w[i]), i = 0..n-1, and the t-statistic of its slope
/// (slope / standard error; +-inf for a perfect fit, NaN below three points).
struct trend {
  double slope = std::numeric_limits<double>::quiet_NaN();
  double intercept = std::numeric_limits<double>::quiet_NaN();
  double t_stat = std::numeric_limits<double>::quiet_NaN();
  std::size_t n = 0;
};

[[nodiscard]] inline trend slope(const window& w) noexcept {
  trend r;
  r.n = w.size();
  if (r.n < 2) return r;
  const double n = static_cast<double>(r.n);
  const double x_mean = (n - 1.0) / 2.0;
  const double y_mean = w.mean();
  double sxy = 0.0, sxx = 0.0;
  for (std::size_t i = 0; i < r.n; ++i) {
    const double dx = static_cast<double>(i) - x_mean;
    sxy += dx * (w[i] - y_mean);
    sxx += dx * dx;
  }
  r.slope = sxy / sxx;
  r.intercept = y_mean - r.slope * x_mean;
  if (r.n < 3) return r;
  double sse = 0.0;
  for (std::size_t i = 0; i < r.n; ++i) {
    const double e = w[i] - (r.intercept + r.slope * static_cast<double>(i));
    sse += e * e;
  }
  const double se = std::sqrt(sse / (n - 2.0) / sxx);
  r.t_stat = se > 0.0 ? r.slope / se
                      : (r.slope == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), r.slope));
  return r;
}

/// Fraction of consecutive differences that change sign (0 for a monotone series, near 1 for
/// a zig-zag; about 2/3 for white noise). NaN below three values.
[[nodiscard]] inline double sign_change_rate(const window& w) noexcept {
  if (w.size() < 3) return std::numeric_limits<double>::quiet_NaN();
  std::size_t changes = 0, pairs = 0;
  for (std::size_t i = 2; i < w.size(); ++i) {
    const double a = w[i - 1] - w[i - 2], b = w[i] - w[i - 1];
    if (a == 0.0 || b == 0.0) continue;
    ++pairs;
    if ((a > 0.0) != (b > 0.0)) ++changes;
  }
  return pairs == 0 ? 0.0 : static_cast<double>(changes) / static_cast<double>(pairs);
}

/// x over the window's mean (the method's "loss > 10x moving average" test uses this).
[[nodiscard]] inline double ratio_to_mean(double x, const window& w) noexcept { return x / w.mean(); }

}  // namespace mldiag::signals
