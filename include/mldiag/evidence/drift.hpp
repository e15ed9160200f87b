// SPDX-License-Identifier: Apache-2.0
/// `drift_tracker`: how far each parameter has moved from its initialization, exactly or
/// from an O(k) sketch.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/sketch.hpp"
#include "mldiag/stats/tensor_stats.hpp"  // detail::scale_exponent

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

// A sum of squares that neither overflows nor underflows for any finite float64 input:
// values are scaled by 2^-e, with 2^e above the largest |v| so far (the exponent of
// tensor_stats, clamped to +-1000 so that 2^-e is normal); a larger value rescales the sum
// (exact, by a power of two). A plain sum of v * v is +Inf for parameters of 1e200 and 0 for
// parameters of 1e-170 (issue 16). The common step is a compare, a multiply and an add.
class scaled_sum_sq {
 public:
  void add(double v) noexcept {
    const double a = std::fabs(v);
    if (!(a < bound_)) grow(a);
    const double x = v * inv_;
    sum_ += x * x;
  }
  // sqrt(sum v^2) / 2^exp(): the norm, still scaled.
  [[nodiscard]] double scaled_norm() const noexcept { return std::sqrt(sum_); }
  [[nodiscard]] int exp() const noexcept { return e_; }
  // sqrt(sum v^2); +Inf only where it exceeds the double range.
  [[nodiscard]] double norm() const noexcept { return std::ldexp(scaled_norm(), e_); }

 private:
  void grow(double a) noexcept {
    if (a == 0.0) return;  // the first values may be zeros: nothing to scale yet
    if (!(a <= max_double)) {  // NaN or Inf: the sum says so
      sum_ += a * a;
      bound_ = HUGE_VAL;
      return;
    }
    const int e = scale_exponent(a);
    if (sum_ > 0.0 && e > e_) sum_ = std::ldexp(sum_, 2 * (e_ - e));
    if (e > e_ || sum_ == 0.0) e_ = e;
    inv_ = std::ldexp(1.0, -e_);
    bound_ = e_ >= 1000 ? HUGE_VAL : std::ldexp(1.0, e_);  // 2^1000 is the clamp: no growing past it
  }

  double sum_ = 0.0;
  double bound_ = 0.0;  // values below it need no rescale (0 before the first non-zero)
  double inv_ = 1.0;    // 2^-e
  int e_ = 0;
};

}  // namespace detail

/// Relative drift ||theta - theta0|| / ||theta0|| per named parameter.
///
/// `exact` keeps a float64 copy of theta0 (memory: the tensor's size in doubles). `sketch`
/// keeps a CountSketch of theta0 with `k` buckets instead (memory O(k) per tensor): each
/// element adds +-x to one bucket chosen by a hash of its index, so the sketch is linear and
/// ||S(theta) - S(theta0)||^2 estimates ||theta - theta0||^2 without bias, with a relative
/// standard error of about sqrt(2 / k) on the square (k = 4096: about 2%).
/// `observe` allocates nothing after a tensor's first call.
///
/// **Example**
/// ```cpp
/// mldiag::drift_tracker drift(mldiag::drift_tracker::mode::sketch, 4096);
/// drift.start("layers.0.w", w0);                 // at initialization
/// rec.observe(mldiag::parameter_drift_of{"layers.0.w", drift.observe("layers.0.w", w)});  // every step
/// ```
class drift_tracker {
 public:
  enum class mode { exact, sketch };

  explicit drift_tracker(mode m = mode::sketch, std::size_t k = 4096, std::uint64_t seed = 0x5eed) : mode_(m), k_(k), seed_(seed) {
    if (m == mode::sketch && k == 0) throw error("drift_tracker: a sketch needs k > 0 buckets");
  }

  /// Remembers `theta0` for `name`: contiguous values of any arithmetic or mldiag element
  /// type, as `std::span<T>` or `std::span<const T>` or anything a `std::span` is made from
  /// (`std::vector`, `std::array`, ...).
  template <class Range>
  void start(std::string_view name, const Range& theta0) {
    start_values(name, const_span(theta0));
  }

  /// ||theta - theta0|| / ||theta0|| (or the absolute drift where theta0 is all zeros), for
  /// the same kinds of ranges as `start`. The norms are sums of squares scaled by a power of
  /// two, so the drift is accurate for parameters of any finite float64 magnitude.
  template <class Range>
  [[nodiscard]] double observe(std::string_view name, const Range& theta) {
    return observe_values(name, const_span(theta));
  }

 private:
  struct entry {
    std::size_t size = 0;
    double norm0_scaled = 0.0;  // ||theta0|| / 2^norm0_exp
    int norm0_exp = 0;
    std::vector<double> reference, scratch;
  };

  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using entry_map = std::unordered_map<std::string, entry, hash, std::equal_to<>>;

  // A named return type: callers above its definition (the workers) need it (Clang).
  entry_map::iterator find(std::string_view name) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw error("drift_tracker::observe '" + std::string(name) + "': no start() for this name; call start(name, theta0) first");
    }
    return it;
  }

  // Any contiguous range as a span of const elements. A std::span<T> handed to a template
  // that only takes std::span<const T> does not deduce T, and an overload that re-wrapped it
  // as std::span(x) called itself forever (issue 16): every public entry comes through here
  // to one worker per element type instead.
  template <class Range>
  static auto const_span(const Range& r) {
    using element = std::remove_cv_t<typename decltype(std::span(r))::element_type>;
    return std::span<const element>(std::span(r));
  }

  template <class T>
  void start_values(std::string_view name, std::span<const T> theta0) {
    auto& e = entries_[std::string(name)];
    e.size = theta0.size();
    e.reference.assign(mode_ == mode::exact ? theta0.size() : k_, 0.0);
    e.scratch.assign(mode_ == mode::exact ? 0 : k_, 0.0);
    detail::scaled_sum_sq norm2;
    for (std::size_t i = 0; i < theta0.size(); ++i) {
      const double v = static_cast<double>(theta0[i]);
      norm2.add(v);
      if (mode_ == mode::exact) e.reference[i] = v;
      else add(e.reference, i, v);
    }
    e.norm0_scaled = norm2.scaled_norm();
    e.norm0_exp = norm2.exp();
  }

  template <class T>
  double observe_values(std::string_view name, std::span<const T> theta) {
    const auto it = find(name);
    auto& e = it->second;
    if (theta.size() != e.size) {
      throw error("drift_tracker::observe '" + std::string(name) + "': " + std::to_string(theta.size()) +
                  " values but the start had " + std::to_string(e.size));
    }
    detail::scaled_sum_sq d2;
    if (mode_ == mode::exact) {
      for (std::size_t i = 0; i < theta.size(); ++i) d2.add(static_cast<double>(theta[i]) - e.reference[i]);
    } else {
      for (auto& b : e.scratch) b = 0.0;
      for (std::size_t i = 0; i < theta.size(); ++i) add(e.scratch, i, static_cast<double>(theta[i]));
      for (std::size_t b = 0; b < k_; ++b) d2.add(e.scratch[b] - e.reference[b]);
    }
    // The ratio of the two scaled norms, then one power of two: finite even where both
    // norms exceed the double range.
    if (e.norm0_scaled > 0.0) return std::ldexp(d2.scaled_norm() / e.norm0_scaled, d2.exp() - e.norm0_exp);
    return d2.norm();
  }

  void add(std::vector<double>& buckets, std::size_t i, double v) const noexcept {
    detail::sketch_add(buckets, seed_, static_cast<std::uint64_t>(i), v);
  }

  mode mode_;
  std::size_t k_;
  std::uint64_t seed_;
  entry_map entries_;
};

}  // namespace mldiag
