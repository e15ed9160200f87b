// SPDX-License-Identifier: Apache-2.0
/// `gradient_persistence`: the cosine between this step's gradients and the previous step's,
/// from an O(k) sketch; the evidence that gradients are never zeroed.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/observations.hpp"  // gradient_cosines
#include "mldiag/evidence/sketch.hpp"

#include <algorithm>  // std::clamp
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// The cosines between the gradients of consecutive steps, and between their increments, over
/// every gradient added in a step: the evidence that gradients are never zeroed.
///
/// Why two: a gradient that is never zeroed is the sum of every step's, so consecutive ones
/// are nearly parallel (0.95-1.0 from the first steps on, clipped or not, but a ViT clipped far
/// below its gradient norm reaches 0.65; docs/accuracy.md#persistent_gradients) — but so are
/// a healthy run's when one direction dominates every batch's gradient (an autoencoder pulled
/// toward the mean image: 0.9-1.0 for hundreds of steps). The increments tell them apart:
/// with mini-batch noise n_t, a healthy increment is n_t - n_{t-1}, and two consecutive ones
/// share -n_{t-1}, so their cosine is about -0.5 (healthy autoencoders: median -0.50); a
/// never-zeroed gradient's increment is the fresh gradient itself, and two fresh gradients
/// have a cosine of 0 or more (0.05-0.99). Norms alone cannot tell: Adam divides the growing
/// scale away and `clip_grad_norm_` caps it.
///
/// How: a sketch with `k` buckets (sample j of a tensor adds +-x to bucket (first + j) mod k,
/// `first` from a hash of the tensor's name, the sign from a hash of the name and j), which is
/// linear, so inner products of sketches (and of their differences) estimate those of the
/// gradients without bias (standard error of a cosine about sqrt(2 / k): k = 4096, 0.02). A
/// tensor larger than `max_per_tensor` elements is sampled on a fixed stride (the same
/// elements every step), each sample weighted by the stride so a tensor counts by its norm.
/// Names must be the same from step to step: add the same tensors every step.
///
/// Cost: at most `max_per_tensor` (4096) signed adds per tensor and step, in vectors; memory
/// 3k doubles for the whole model. `add` and `finish_step` allocate nothing.
///
/// **Example**
/// ```cpp
/// mldiag::gradient_persistence persist;
/// for (auto& [name, g] : grads) persist.add(name, std::span<const float>(g));  // every step
/// if (auto c = persist.finish_step()) mon.observe(*c);
/// ```
class gradient_persistence {
 public:
  explicit gradient_persistence(std::size_t k = 4096, std::size_t max_per_tensor = 4096, std::uint64_t seed = 0x9e55)
      : k_(k), max_per_tensor_(max_per_tensor), seed_(seed), current_(k, 0.0), previous_(k, 0.0), before_(k, 0.0) {
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
    const std::size_t samples = (values.size() + stride - 1) / stride;
    if (stride == 1) {
      accumulate(name, samples, stride, [&](std::size_t j0, std::size_t, T*) { return values.data() + j0; });
      return;
    }
    // Strided samples are gathered a chunk at a time into a buffer that the sketch then reads
    // in order (a strided load does not vectorize on every target).
    accumulate(name, samples, stride, [&](std::size_t j0, std::size_t m, T* buffer) {
      for (std::size_t j = 0; j < m; ++j) buffer[j] = values[(j0 + j) * stride];
      return static_cast<const T*>(buffer);
    });
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
    accumulate(name, sample.size(), stride, [&](std::size_t j0, std::size_t, T*) { return sample.data() + j0; });
  }

  /// Ends the step: the cosines between this step's sketch and the previous step's, and
  /// between their increments. Absent on the first step, when either step added nothing or
  /// only zeros, and when this step held a NaN or Inf (non_finite's business).
  [[nodiscard]] std::optional<gradient_cosines> finish_step() noexcept {
    std::optional<gradient_cosines> out;
    const bool valid = added_ && finite_;
    if (valid && had_previous_) {
      // The six inner products of the last three sketches give both cosines.
      double cc = 0.0, cp = 0.0, pp = 0.0, cb = 0.0, pb = 0.0, bb = 0.0;
      for (std::size_t b = 0; b < k_; ++b) {
        const double c = current_[b], p = previous_[b], q = before_[b];
        cc += c * c;
        cp += c * p;
        pp += p * p;
        cb += c * q;
        pb += p * q;
        bb += q * q;
      }
      if (cc > 0.0 && pp > 0.0) {
        out = gradient_cosines{cp / std::sqrt(cc * pp), std::nullopt};
        if (had_before_) {
          // d_t = c - p, d_{t-1} = p - q.
          const double dd = cp - cb - pp + pb;
          const double n1 = cc - 2.0 * cp + pp, n0 = pp - 2.0 * pb + bb;
          if (n1 > 0.0 && n0 > 0.0) out->increments = std::clamp(dd / std::sqrt(n1 * n0), -1.0, 1.0);
        }
        out->consecutive = std::clamp(out->consecutive, -1.0, 1.0);
      }
    }
    had_before_ = valid && had_previous_;
    had_previous_ = valid;
    // before <- previous <- current, and current starts empty (no allocation: three buffers turn).
    before_.swap(previous_);
    previous_.swap(current_);
    for (auto& b : current_) b = 0.0;
    added_ = false;
    finite_ = true;
    return out;
  }

  /// Forgets the previous step (after a checkpoint reload or a change of the model).
  void reset() noexcept {
    for (auto& b : current_) b = 0.0;
    had_previous_ = had_before_ = added_ = false;
    finite_ = true;
  }

 private:
  // Sample j of a tensor adds +-sqrt(stride) x_j to bucket (first + j) mod k, where `first`
  // comes from a hash of the name and the sign from a hash of the name and j. Within a tensor
  // of at most k samples no two samples share a bucket; tensors meet with independent random
  // signs, which is all an unbiased inner product needs. Consecutive buckets and a 32-bit
  // sign hash vectorize, where the CountSketch's hashed bucket per element (a scattered add)
  // made gradient_cosines_of 60% of the monitor's time (issue 18; docs/benchmarks.md).
  // `fetch(j0, m, buffer)` returns the samples j0 .. j0 + m - 1 in order (in place, or
  // gathered into `buffer`, which holds `chunk` of them).
  static constexpr std::size_t chunk = 512;
  template <class Fetch>
  void accumulate(std::string_view name, std::size_t samples, std::size_t stride, Fetch fetch) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(fetch(std::size_t{}, std::size_t{}, nullptr))>>;
    const std::uint64_t key = detail::splitmix64(seed_ ^ detail::fnv1a(name));
    const auto sign_key = static_cast<std::uint32_t>(key >> 32);
    // Each sample stands for `stride` elements: weighted by sqrt(stride), the sampled squared
    // norm estimates the tensor's.
    const double w = std::sqrt(static_cast<double>(stride));
    std::size_t bucket = static_cast<std::size_t>(key % k_);
    std::uint64_t bad = 0;  // non-finite samples (left out of the sketch)
    T buffer[chunk];
    for (std::size_t j0 = 0; j0 < samples;) {
      // A run ends at the chunk's end or at the last bucket.
      const std::size_t run = std::min({samples - j0, chunk, k_ - bucket});
      const T* x = fetch(j0, run, buffer);
      bad += detail::signed_run(current_.data() + bucket, x, run, w, sign_key, static_cast<std::uint32_t>(j0));
      j0 += run;
      bucket = bucket + run == k_ ? 0 : bucket + run;
    }
    finite_ = finite_ && bad == 0;
    added_ = true;
  }
  std::size_t k_, max_per_tensor_;
  std::uint64_t seed_;
  std::vector<double> current_, previous_, before_;
  bool added_ = false, finite_ = true, had_previous_ = false, had_before_ = false;
};

}  // namespace mldiag
