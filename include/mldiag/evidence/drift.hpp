// SPDX-License-Identifier: Apache-2.0
/// `drift_tracker`: how far each parameter has moved from its initialization, exactly or
/// from an O(k) sketch.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/evidence/sketch.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace mldiag {

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
/// rec.record_drift("layers.0.w", drift.observe("layers.0.w", w));  // every step
/// ```
class drift_tracker {
 public:
  enum class mode { exact, sketch };

  explicit drift_tracker(mode m = mode::sketch, std::size_t k = 4096, std::uint64_t seed = 0x5eed) : mode_(m), k_(k), seed_(seed) {
    if (m == mode::sketch && k == 0) throw error("drift_tracker: a sketch needs k > 0 buckets");
  }

  /// Remembers `theta0` for `name` (contiguous values of any arithmetic or mldiag element type).
  template <class T>
  void start(std::string_view name, std::span<const T> theta0) {
    auto& e = entries_[std::string(name)];
    e.size = theta0.size();
    e.reference.assign(mode_ == mode::exact ? theta0.size() : k_, 0.0);
    e.scratch.assign(mode_ == mode::exact ? 0 : k_, 0.0);
    double norm2 = 0.0;
    for (std::size_t i = 0; i < theta0.size(); ++i) {
      const double v = static_cast<double>(theta0[i]);
      norm2 += v * v;
      if (mode_ == mode::exact) e.reference[i] = v;
      else add(e.reference, i, v);
    }
    e.norm0 = std::sqrt(norm2);
  }
  template <class Range>
  void start(std::string_view name, const Range& theta0) {
    start(name, std::span(theta0));
  }

  /// ||theta - theta0|| / ||theta0|| (or the absolute drift where theta0 is all zeros).
  template <class T>
  [[nodiscard]] double observe(std::string_view name, std::span<const T> theta) {
    const auto it = find(name);
    auto& e = it->second;
    if (theta.size() != e.size) {
      throw error("drift_tracker::observe '" + std::string(name) + "': " + std::to_string(theta.size()) +
                  " values but the start had " + std::to_string(e.size));
    }
    double d2 = 0.0;
    if (mode_ == mode::exact) {
      for (std::size_t i = 0; i < theta.size(); ++i) {
        const double d = static_cast<double>(theta[i]) - e.reference[i];
        d2 += d * d;
      }
    } else {
      for (auto& b : e.scratch) b = 0.0;
      for (std::size_t i = 0; i < theta.size(); ++i) add(e.scratch, i, static_cast<double>(theta[i]));
      for (std::size_t b = 0; b < k_; ++b) {
        const double d = e.scratch[b] - e.reference[b];
        d2 += d * d;
      }
    }
    const double drift = std::sqrt(d2);
    return e.norm0 > 0.0 ? drift / e.norm0 : drift;
  }
  template <class Range>
  [[nodiscard]] double observe(std::string_view name, const Range& theta) {
    return observe(name, std::span(theta));
  }

 private:
  struct entry {
    std::size_t size = 0;
    double norm0 = 0.0;
    std::vector<double> reference, scratch;
  };
  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  auto find(std::string_view name) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw error("drift_tracker::observe '" + std::string(name) + "': no start() for this name; call start(name, theta0) first");
    }
    return it;
  }

  void add(std::vector<double>& buckets, std::size_t i, double v) const noexcept {
    detail::sketch_add(buckets, seed_, static_cast<std::uint64_t>(i), v);
  }

  mode mode_;
  std::size_t k_;
  std::uint64_t seed_;
  std::unordered_map<std::string, entry, hash, std::equal_to<>> entries_;
};

}  // namespace mldiag
