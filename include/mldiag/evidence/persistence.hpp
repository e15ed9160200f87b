// SPDX-License-Identifier: Apache-2.0
/// `gradient_persistence`: the cosine between this step's gradients and the previous step's,
/// from an O(k) sketch; the evidence that gradients are never zeroed.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/evidence/sketch.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mldiag {

/// The cosine between the gradients of consecutive steps, over every gradient added in a step.
///
/// Why it is evidence: two mini-batches give gradients whose cosine is small (0.1-0.3 in the
/// zoo's healthy runs, at most 0.74 as a median of 20 steps away from the first 20), while a
/// gradient that is never zeroed is the sum of every step's, so consecutive ones are nearly
/// parallel (0.95-1.0 from the first steps on, in every family of the zoo, clipped or not;
/// docs/accuracy.md). Norms alone cannot tell: Adam divides the growing scale away and
/// `clip_grad_norm_` caps it.
///
/// How: a CountSketch with `k` buckets (each element adds +-x to one bucket chosen by a hash of
/// the tensor's name and the element's index), which is linear, so <S(a), S(b)> estimates
/// <a, b> without bias (standard error of the cosine about sqrt(2 / k): k = 4096, 0.02). A
/// tensor larger than `max_per_tensor` elements is sampled on a fixed stride (the same
/// elements every step), each sample weighted by the stride so a tensor counts by its norm.
/// Names must be the same from step to step; a tensor first seen this step adds to the sketch
/// and the estimate stays unbiased for the tensors both steps share only up to that tensor's
/// share, so add the same tensors every step.
///
/// Cost: at most `max_per_tensor` (4096) hashed adds per tensor and step; memory 2k doubles
/// for the whole model. `add` and `finish_step` allocate nothing after the first step.
///
/// **Example**
/// ```cpp
/// mldiag::gradient_persistence persist;
/// for (auto& [name, g] : grads) persist.add(name, std::span<const float>(g));  // every step
/// if (auto c = persist.finish_step()) mon.observe_grad_cosine(*c);
/// ```
class gradient_persistence {
 public:
  explicit gradient_persistence(std::size_t k = 4096, std::size_t max_per_tensor = 4096, std::uint64_t seed = 0x9e55)
      : k_(k), max_per_tensor_(max_per_tensor), seed_(seed), current_(k, 0.0), previous_(k, 0.0) {
    if (k == 0) throw error("gradient_persistence: a sketch needs k > 0 buckets");
    if (max_per_tensor == 0) throw error("gradient_persistence: max_per_tensor must be at least 1");
  }

  /// The stride `add` samples a tensor of `n` elements on (odd, so a row-major matrix is not
  /// read down one column). For callers that gather the samples themselves (on a GPU).
  [[nodiscard]] std::size_t stride_for(std::size_t n) const noexcept {
    if (n <= max_per_tensor_) return 1;
    std::size_t s = (n + max_per_tensor_ - 1) / max_per_tensor_;
    return s % 2 == 0 ? s + 1 : s;
  }

  /// Adds one gradient tensor of this step (contiguous values, any arithmetic type or mldiag
  /// element type convertible to double). Non-finite values make the step's cosine absent.
  template <class T>
  void add(std::string_view name, std::span<const T> values) {
    const std::size_t stride = stride_for(values.size());
    accumulate(name, (values.size() + stride - 1) / stride, stride, [&](std::size_t j) { return values[j * stride]; });
  }
  template <class Range>
  void add(std::string_view name, const Range& values) {
    add(name, std::span(values));
  }

  /// Adds a gathered sample: `sample[j]` is element `j * stride` of a tensor of `n` elements
  /// (the elements `add` would read; `stride` from `stride_for(n)`).
  template <class T>
  void add_sampled(std::string_view name, std::span<const T> sample, std::size_t stride, std::size_t n) {
    if (stride != stride_for(n) || sample.size() != (n + stride - 1) / stride) {
      throw error("gradient_persistence::add_sampled '" + std::string(name) + "': " + std::to_string(sample.size()) +
                  " samples on stride " + std::to_string(stride) + " do not match a tensor of " + std::to_string(n) +
                  " elements; gather elements 0, s, 2s, ... with s = stride_for(n)");
    }
    accumulate(name, sample.size(), stride, [&](std::size_t j) { return sample[j]; });
  }

  /// Ends the step: the cosine between this step's sketch and the previous step's. Absent on
  /// the first step, when either step added nothing or only zeros, and when this step held a
  /// NaN or Inf (non_finite's business).
  [[nodiscard]] std::optional<double> finish_step() noexcept {
    std::optional<double> out;
    if (added_ && finite_ && had_previous_) {
      double dot = 0.0, a2 = 0.0, b2 = 0.0;
      for (std::size_t b = 0; b < k_; ++b) {
        dot += current_[b] * previous_[b];
        a2 += current_[b] * current_[b];
        b2 += previous_[b] * previous_[b];
      }
      if (a2 > 0.0 && b2 > 0.0) out = dot / std::sqrt(a2 * b2);
    }
    had_previous_ = added_ && finite_;
    current_.swap(previous_);
    for (auto& b : current_) b = 0.0;
    added_ = false;
    finite_ = true;
    return out;
  }

  /// Forgets the previous step (after a checkpoint reload or a change of the model).
  void reset() noexcept {
    for (auto& b : current_) b = 0.0;
    had_previous_ = added_ = false;
    finite_ = true;
  }

 private:
  template <class Get>
  void accumulate(std::string_view name, std::size_t samples, std::size_t stride, Get get) {
    const std::uint64_t key = detail::splitmix64(seed_ ^ detail::fnv1a(name));
    // Each sample stands for `stride` elements: weighted by sqrt(stride), the sampled squared
    // norm estimates the tensor's.
    const double w = std::sqrt(static_cast<double>(stride));
    for (std::size_t j = 0; j < samples; ++j) {
      const double v = static_cast<double>(get(j));
      if (!std::isfinite(v)) {
        finite_ = false;
        continue;
      }
      detail::sketch_add(current_, key, static_cast<std::uint64_t>(j * stride), w * v);
    }
    added_ = true;
  }
  std::size_t k_, max_per_tensor_;
  std::uint64_t seed_;
  std::vector<double> current_, previous_;
  bool added_ = false, finite_ = true, had_previous_ = false;
};

}  // namespace mldiag
