// SPDX-License-Identifier: Apache-2.0
/// Time-series signals over a bounded window: mean, spread, robust location and scale, trend.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::signals {

namespace detail {

// A double-double, hi + lo: the window's running sums, about 104 bits, so that adding a value
// and later taking it out again leaves the sum of the others (issue 18: running sums instead of
// re-summing the window at every step).
struct wide {
  double hi = 0.0, lo = 0.0;
};

// a + b = s + e exactly (Knuth's two-sum; additions only, so no FMA contraction can change it).
inline void two_sum(double a, double b, double& s, double& e) noexcept {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// a * b = p + e exactly, for products that neither overflow nor underflow (the window keeps its
// running sums only while every value lies within 2^-400..2^400 of 0, or is 0).
inline void two_prod(double a, double b, double& p, double& e) noexcept {
  p = a * b;
#ifdef FP_FAST_FMA
  e = std::fma(a, b, -p);
#else
  // Dekker's product: without a fused multiply-add unit there is nothing to contract it into.
  constexpr double split = 134217729.0;  // 2^27 + 1
  const double ta = split * a, a_hi = ta - (ta - a), a_lo = a - a_hi;
  const double tb = split * b, b_hi = tb - (tb - b), b_lo = b - b_hi;
  e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
#endif
}

inline void add(wide& w, double hi, double lo) noexcept {
  double s = 0.0, e = 0.0;
  two_sum(w.hi, hi, s, e);
  two_sum(s, e + (w.lo + lo), w.hi, w.lo);
}
[[nodiscard]] inline wide minus(wide a, wide b) noexcept {
  add(a, -b.hi, -b.lo);
  return a;
}
[[nodiscard]] inline wide times(wide a, wide b) noexcept {
  wide r;
  double e = 0.0;
  two_prod(a.hi, b.hi, r.hi, e);
  two_sum(r.hi, e + (a.hi * b.lo + a.lo * b.hi), r.hi, r.lo);
  return r;
}
[[nodiscard]] inline wide over(wide a, double d) noexcept {
  const double q = a.hi / d;
  double p = 0.0, e = 0.0;
  two_prod(q, d, p, e);
  wide r;
  two_sum(q, (((a.hi - p) - e) + a.lo) / d, r.hi, r.lo);
  return r;
}

// What the free functions slope() and sign_change_rate() read of a window's running state.
struct trend_access;

}  // namespace detail

/// The last `capacity` values of a series, oldest first. Memory is allocated once, at
/// construction; `push` never allocates. Statistics skip nothing: push only finite values
/// if the series may hold NaN (detectors do).
///
/// Statistics cost O(1) or O(log n) from the second time they are asked for (issue 18: the
/// detectors ask at every step). The window then keeps running sums for mean(), stddev() and
/// slope() (double-double sums of the deviations from one of its values, exact products;
/// re-summed every `capacity` pushes and when the values left hold far less than those that
/// went, so no rounding drifts), a sorted copy for median(), mad() and max(), and its count of
/// sign changes. median(), mad(), max() and sign_change_rate() are exactly what a plain sort or
/// count of the values gives (up to the sign of a zero result); mean(), stddev() and slope() are
/// within an ulp or two of the exact values, where the textbook passes are not (a level 1e9
/// times its noise); equal values give a stddev, slope and t-statistic of exactly 0. A window
/// that holds NaN, +-Inf, or a value of magnitude outside [2^-400, 2^400] other than 0
/// computes the textbook way while it does; one that holds NaN, its median and MAD by
/// nth_element, as before.
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
    if (counted_) track(x);  // only a window whose statistics were asked for
    if (size_ < data_.size()) {
      data_[slot(size_++)] = x;
    } else {
      data_[start_] = x;  // the oldest value's slot holds the newest
      start_ = start_ + 1 == data_.size() ? 0 : start_ + 1;
    }
  }
  void clear() noexcept {
    start_ = size_ = 0;
    counted_ = sorted_ = turns_ = false;
    moments_ = 0;
    asked_ = false;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return data_.size(); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] bool full() const noexcept { return size_ == data_.size(); }
  /// The i-th value, oldest first.
  [[nodiscard]] double operator[](std::size_t i) const noexcept { return data_[slot(i)]; }
  [[nodiscard]] double back() const noexcept { return (*this)[size_ - 1]; }

  /// Arithmetic mean (NaN when empty).
  [[nodiscard]] double mean() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    if (!moments(1)) {
      double s = 0.0;
      for (std::size_t i = 0; i < size_; ++i)
        s += (*this)[i];
      return s / static_cast<double>(size_);
    }
    return shift_plus(detail::over(sum_, static_cast<double>(size_)));
  }
  /// Largest value (NaN when empty).
  [[nodiscard]] double max() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    if (sorted_) {
      idle_ = 0;
      return scratch_[size_ - 1];
    }
    double m = (*this)[0];
    for (std::size_t i = 1; i < size_; ++i) m = std::max(m, (*this)[i]);
    return m;
  }
  /// Sample standard deviation (NaN below two values).
  [[nodiscard]] double stddev() const noexcept {
    if (size_ < 2) return std::numeric_limits<double>::quiet_NaN();
    if (!moments(2)) {
      const double m = mean();
      double q = 0.0;
      for (std::size_t i = 0; i < size_; ++i)
        q += ((*this)[i] - m) * ((*this)[i] - m);
      return std::sqrt(q / static_cast<double>(size_ - 1));
    }
    const double q = std::max(0.0, value(squared_deviations()));
    return std::sqrt(q / static_cast<double>(size_ - 1));
  }
  /// Median (NaN when empty). No allocation: the sorted copy or the scratch copy it uses was
  /// allocated with the window.
  [[nodiscard]] double median() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    if (!sort_if_asked_again()) {
      copy_to_scratch();
      return median_of_scratch(size_);
    }
    const std::size_t mid = size_ / 2;
    return size_ % 2 == 1 ? scratch_[mid] : 0.5 * (scratch_[mid - 1] + scratch_[mid]);
  }
  /// Median absolute deviation from the median, times 1.4826 (a consistent estimate of the
  /// standard deviation for normal data, robust to outliers).
  [[nodiscard]] double mad() const noexcept {
    if (size_ == 0) return std::numeric_limits<double>::quiet_NaN();
    const double med = median();
    if (!sorted_ || !std::isfinite(med)) {
      // Deviations from an infinite median hold NaN, whose place after nth_element depends on
      // the order of the values: computed the one way on the values in window order.
      sorted_ = false;
      for (std::size_t i = 0; i < size_; ++i)
        scratch_[i] = std::fabs((*this)[i] - med);
      return 1.4826 * median_of_scratch(size_);
    }
    return 1.4826 * sorted_deviation_median(med);
  }

  friend struct detail::trend_access;

 private:
  // --- the ring -------------------------------------------------------------------------
  [[nodiscard]] std::size_t slot(std::size_t i) const noexcept {
    const std::size_t j = start_ + i;  // no modulo per element: start_ + i < 2 * capacity
    return j < data_.size() ? j : j - data_.size();
  }
  // A value the running sums cannot hold exactly (see the class comment).
  [[nodiscard]] static bool wild(double x) noexcept {
    const double a = std::fabs(x);
    return x != 0.0 && !(a >= 0x1p-400 && a <= 0x1p400);
  }

  // What push() keeps up to date once a statistic was asked for (before the ring moves on).
  void track(double x) const noexcept {
    const bool full_now = full();
    const double old = data_[start_];
    if (turns_) {
      if (full_now && size_ >= 3) count_turn(old, (*this)[1], (*this)[2], false);
      if (size_ - (full_now ? 1 : 0) >= 2)
        count_turn((*this)[size_ - 2], (*this)[size_ - 1], x, true);
    }
    if (moments_ > 0) {
      // Re-summed when next asked for: after a value that the sums cannot hold, and when the
      // value they are taken from (the newest at the last re-summation) leaves, `capacity`
      // pushes on. While that value is in the window, |mean - shift| is at most the spread, so
      // sum d^2 - (sum d)^2 / n cancels at most n + 1 to 1.
      if (wild(x) || ++pushes_ >= capacity()) {
        moments_ = 0;
      } else {
        if (full_now) absorb(old, first_pos_++, -1.0);
        absorb(x, first_pos_ + size_ - (full_now ? 1 : 0), 1.0);
      }
    }
    if (sorted_) {
      // Let go of a copy that nobody reads: a window asked once in a while takes nth_element
      // again rather than moving its sorted copy at every push.
      if (std::isnan(x) || ++idle_ > capacity())
        drop_sorted();
      else if (full_now)
        replace_sorted(old, x);
      else
        insert_sorted(x);
    }
    if (full_now) {
      nan_ -= std::isnan(old) ? 1 : 0;
      wild_ -= wild(old) ? 1 : 0;
    }
    nan_ += std::isnan(x) ? 1 : 0;
    wild_ += wild(x) ? 1 : 0;
  }
  // Counts what track() keeps, from the values, the first time a statistic is asked for.
  void count() const noexcept {
    if (counted_) return;
    nan_ = wild_ = 0;
    for (std::size_t i = 0; i < size_; ++i) {
      nan_ += std::isnan((*this)[i]) ? 1 : 0;
      wild_ += wild((*this)[i]) ? 1 : 0;
    }
    counted_ = true;
  }

  // --- running sums: of d = x - shift_ (exact as a pair), p * d (p the value's position
  // since the last re-summation) and d^2 -----------------------------------------------------
  void absorb(double x, std::size_t position, double sign) const noexcept {
    double d = 0.0, d_lo = 0.0;
    detail::two_sum(x, -shift_, d, d_lo);
    detail::add(sum_, sign * d, sign * d_lo);
    held_ += sign * std::fabs(d);
    absorbed_ += std::fabs(d);
    if (moments_ < 2) return;
    double q = 0.0, q_lo = 0.0, r = 0.0, r_lo = 0.0;
    detail::two_prod(d, d, q, q_lo);
    q_lo += 2.0 * d * d_lo;
    detail::add(sum_sq_, sign * q, sign * q_lo);
    absorbed_sq_ += q;
    const double p = static_cast<double>(position);
    detail::two_prod(p, d, r, r_lo);
    detail::add(sum_pos_, sign * r, sign * (r_lo + p * d_lo));
  }
  // Whether the running sums (of at least `level`: 1 the mean, 2 the second moments and the
  // slope) can answer; re-sums them when they are off or when cancellation may have eaten
  // their digits (the values left hold less than 2^-30 of what went through the sums).
  bool moments(int level) const noexcept {
    count();
    if (wild_ > 0) return false;
    const bool fresh = moments_ >= level && held_ >= 0x1p-30 * absorbed_ &&
                       (level < 2 || sum_sq_.hi >= 0x1p-30 * absorbed_sq_);
    if (fresh) return true;
    moments_ = level;
    pushes_ = 0;
    first_pos_ = 0;
    // The newest value: it stays in the window until the next re-summation (see track()), so
    // equal values give deviations, and sums, of exactly 0.
    shift_ = back();
    sum_ = sum_pos_ = sum_sq_ = {};
    held_ = absorbed_ = absorbed_sq_ = 0.0;
    for (std::size_t i = 0; i < size_; ++i)
      absorb((*this)[i], i, 1.0);
    held_ = absorbed_;  // the same sum: no rounding difference can trigger a re-summation
    return true;
  }
  [[nodiscard]] static double value(detail::wide w) noexcept { return w.hi + w.lo; }
  [[nodiscard]] double shift_plus(detail::wide w) const noexcept {
    double s = 0.0, e = 0.0;
    detail::two_sum(shift_, w.hi, s, e);
    return s + (e + w.lo);
  }
  // sum (x - mean)^2, from the running sums
  [[nodiscard]] detail::wide squared_deviations() const noexcept {
    return detail::minus(sum_sq_,
                         detail::times(sum_, detail::over(sum_, static_cast<double>(size_))));
  }

  // --- sign changes ---------------------------------------------------------------------
  void count_turn(double a0, double a1, double a2, bool in) const noexcept {
    const double a = a1 - a0, b = a2 - a1;
    if (a == 0.0 || b == 0.0) return;
    const std::size_t change = (a > 0.0) != (b > 0.0) ? 1 : 0;
    if (in)
      pairs_ += 1, changes_ += change;
    else
      pairs_ -= 1, changes_ -= change;
  }
  void count_turns() const noexcept {
    if (turns_) return;
    count();
    pairs_ = changes_ = 0;
    for (std::size_t i = 2; i < size_; ++i)
      count_turn((*this)[i - 2], (*this)[i - 1], (*this)[i], true);
    turns_ = true;
  }

  // --- the sorted copy (in scratch_, while sorted_) --------------------------------------
  // True when scratch_ holds the values sorted: built at the second robust statistic asked for
  // since construction or clear() (a window refilled for each question keeps nth_element).
  bool sort_if_asked_again() const noexcept {
    idle_ = 0;
    if (sorted_) return true;
    count();
    if (nan_ > 0) return false;
    if (!asked_) {
      asked_ = true;
      return false;
    }
    copy_to_scratch();
    std::sort(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(size_));
    sorted_ = true;
    return true;
  }
  void drop_sorted() const noexcept {
    sorted_ = false;
    asked_ = false;
  }
  void insert_sorted(double x) const noexcept {
    const auto end = scratch_.begin() + static_cast<std::ptrdiff_t>(size_);
    const auto at = std::upper_bound(scratch_.begin(), end, x);
    std::copy_backward(at, end, end + 1);
    *at = x;
  }
  // `old` leaves and `x` joins, moving only the values between the two places.
  void replace_sorted(double old, double x) const noexcept {
    const auto begin = scratch_.begin(), end = begin + static_cast<std::ptrdiff_t>(size_);
    // Any value equal to `old` will do (+0 and -0 too: no statistic can tell them apart but
    // by the sign of a zero result, which nth_element does not fix either).
    const auto at = std::lower_bound(begin, end, old);
    if (at == end || !(*at == old)) {  // only where NaN got past std::isnan (-ffast-math)
      drop_sorted();
      return;
    }
    if (!(x < old)) {
      const auto to = std::upper_bound(at + 1, end, x);
      std::copy(at + 1, to, at);
      *(to - 1) = x;
    } else {
      const auto to = std::upper_bound(begin, at, x);
      std::copy_backward(to, at, at + 1);
      *to = x;
    }
  }
  // The median of |x - med| over the sorted values, without a copy: the deviations below the
  // median, read outward from it, and those above it are two sorted runs, and the one or two
  // middle order statistics of their union come from a binary search over how many of the
  // smallest come from the lower run. The same values as nth_element over a copy: exact.
  [[nodiscard]] double sorted_deviation_median(double med) const noexcept {
    const std::size_t n = size_, m = n / 2;  // scratch_[0, m) <= med <= scratch_[m, n)
    const std::size_t n_low = m, n_high = n - m;
    const auto low = [&](std::size_t j) { return std::fabs(scratch_[m - 1 - j] - med); };
    const auto high = [&](std::size_t j) { return std::fabs(scratch_[m + j] - med); };
    const std::size_t c = n / 2 + 1;  // the c smallest deviations: i from low, c - i from high
    std::size_t lo = c > n_high ? c - n_high : 0, hi = std::min(c, n_low);
    while (lo < hi) {
      const std::size_t i = lo + (hi - lo) / 2;
      if (high(c - i - 1) > low(i))
        lo = i + 1;
      else
        hi = i;
    }
    const std::size_t i = lo, j = c - lo;
    // The largest two of the c smallest are among the last two taken from each run.
    double first = -1.0, second = -1.0;
    const auto offer = [&](double v) {
      if (v > first)
        second = first, first = v;
      else if (v > second)
        second = v;
    };
    for (std::size_t k = 1; k <= 2; ++k) {
      if (i >= k) offer(low(i - k));
      if (j >= k) offer(high(j - k));
    }
    return n % 2 == 1 ? first : 0.5 * (second + first);
  }

  void copy_to_scratch() const noexcept {
    sorted_ = false;
    const std::size_t head = std::min(size_, data_.size() - start_);
    std::copy(data_.begin() + static_cast<std::ptrdiff_t>(start_),
              data_.begin() + static_cast<std::ptrdiff_t>(start_ + head), scratch_.begin());
    std::copy(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(size_ - head),
              scratch_.begin() + static_cast<std::ptrdiff_t>(head));
  }
  double median_of_scratch(std::size_t n) const noexcept {
    const auto mid = static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(scratch_.begin(), scratch_.begin() + mid, scratch_.begin() + static_cast<std::ptrdiff_t>(n));
    const double upper = scratch_[n / 2];
    if (n % 2 == 1) return upper;
    const double lower = *std::max_element(scratch_.begin(), scratch_.begin() + mid);
    return 0.5 * (lower + upper);
  }

  std::vector<double> data_;
  // The sorted copy while sorted_, else scratch space for median() and mad().
  mutable std::vector<double> scratch_;
  std::size_t start_ = 0, size_ = 0;
  // Kept while counted_ (from the first statistic asked for): NaN values held, and values the
  // running sums cannot hold.
  mutable bool counted_ = false;
  mutable std::size_t nan_ = 0, wild_ = 0;
  // The running sums (see moments()): 0 off, 1 the mean, 2 also second moments and positions.
  mutable int moments_ = 0;
  mutable std::size_t pushes_ = 0, first_pos_ = 0;
  mutable double shift_ = 0.0;
  mutable detail::wide sum_, sum_pos_, sum_sq_;
  mutable double held_ = 0.0, absorbed_ = 0.0, absorbed_sq_ = 0.0;
  mutable bool sorted_ = false, turns_ = false;
  mutable bool asked_ = false;    // a robust statistic was asked for without the sorted copy
  mutable std::size_t idle_ = 0;  // pushes since the sorted copy was last read
  mutable std::size_t pairs_ = 0, changes_ = 0;
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

namespace detail {

struct trend_access {
  static trend slope(const window& w) noexcept {
    trend r;
    r.n = w.size();
    if (r.n < 2) return r;
    const double n = static_cast<double>(r.n);
    const double x_mean = (n - 1.0) / 2.0;
    if (!w.moments(2)) return direct(w);
    // sum (i - x_mean)^2 = (n - 1) n (n + 1) / 12: a multiple of 1/2, exact below n = 2^17 (the
    // sum the direct computation adds up is exact there too)
    const auto nn = static_cast<std::uint64_t>(r.n);
    const double sxx = nn < (std::uint64_t{1} << 17)
                           ? static_cast<double>((nn - 1) * nn * (nn + 1)) / 12.0
                           : n * (n * n - 1.0) / 12.0;
    // sum (p - p_mean) d over positions p = first_pos_ + i
    const detail::wide sxy = detail::minus(
        w.sum_pos_, detail::times(w.sum_, {static_cast<double>(w.first_pos_) + x_mean, 0.0}));
    r.slope = window::value(sxy) / sxx;
    r.intercept = w.mean() - r.slope * x_mean;
    if (r.n < 3) return r;
    const double sse =
        std::max(0.0, window::value(detail::minus(w.squared_deviations(),
                                                  detail::over(detail::times(sxy, sxy), sxx))));
    const double se = std::sqrt(sse / (n - 2.0) / sxx);
    r.t_stat = se > 0.0 ? r.slope / se
                        : (r.slope == 0.0
                               ? 0.0
                               : std::copysign(std::numeric_limits<double>::infinity(), r.slope));
    return r;
  }
  // The two-pass textbook computation, for a window that holds values the sums cannot.
  static trend direct(const window& w) noexcept {
    trend r;
    r.n = w.size();
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
                        : (r.slope == 0.0
                               ? 0.0
                               : std::copysign(std::numeric_limits<double>::infinity(), r.slope));
    return r;
  }
  static double sign_change_rate(const window& w) noexcept {
    if (w.size() < 3) return std::numeric_limits<double>::quiet_NaN();
    w.count_turns();
    return w.pairs_ == 0 ? 0.0 : static_cast<double>(w.changes_) / static_cast<double>(w.pairs_);
  }
};

}  // namespace detail

/// The least-squares trend of the window's values against their positions.
[[nodiscard]] inline trend slope(const window& w) noexcept {
  return detail::trend_access::slope(w);
}

/// Fraction of consecutive differences that change sign (0 for a monotone series, near 1 for
/// a zig-zag; about 2/3 for white noise). NaN below three values.
[[nodiscard]] inline double sign_change_rate(const window& w) noexcept {
  return detail::trend_access::sign_change_rate(w);
}

/// x over the window's mean (the method's "loss > 10x moving average" test uses this).
[[nodiscard]] inline double ratio_to_mean(double x, const window& w) noexcept { return x / w.mean(); }

}  // namespace mldiag::signals
