// SPDX-License-Identifier: Apache-2.0
/// Per-layer fingerprints and the first divergent layer. An engine under test and a reference
/// (the same model in fp32, another engine) each record a compact fingerprint of every tapped
/// row — one token position of one tensor: counts, NaN/Inf, amax, mean, L2, and a linear sketch
/// from which the distance and cosine between two rows can be read without the rows — and
/// `compare` finds the first (position, layer) whose difference is past what the formats
/// involved explain, and classifies the cause from the evidence.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/inference/format.hpp"
#include "mldiag/inference/tap.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::inference {

/// Buckets of the sketch. A count sketch s(x)_b = sum of sign(i) x_i over the i hashed to b is
/// linear, so s(a) - s(b) = s(a - b), and |s(v)|^2 estimates |v|^2 without bias with a relative
/// spread near sqrt(2 / buckets) (0.18 at 64): enough to tell an error of 1e-2 from one of 1e-3.
inline constexpr std::size_t sketch_buckets = 64;

/// One row (token position) of one tapped tensor.
struct fingerprint {
  std::string name;
  std::int32_t request = 0;
  std::int64_t position = 0;
  inference::phase phase = inference::phase::decode;
  std::uint32_t order = 0;  ///< the tap's place in its step (forward order)
  storage_format format{};
  std::uint64_t count = 0, nan = 0, inf = 0;
  double amax = 0.0, mean = 0.0, l2 = 0.0;
  std::array<float, sketch_buckets> sketch{};
};

namespace detail {
// splitmix64: a fixed hash of the element's column, the same in every run, on every machine and
// on the device (kernels/mldiag/cuda/inference.cuh).
[[nodiscard]] MLDIAG_HOST_DEVICE constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace detail

namespace detail {
// Which row of which tap a fingerprint is; its numbers are the caller's (the host's loop below,
// or the device's, kernels/mldiag/cuda/inference.cuh).
[[nodiscard]] inline fingerprint fingerprint_of(const tap& t, std::size_t row, std::uint32_t order) {
  fingerprint f;
  f.name = std::string(t.name);
  f.request = t.request;
  f.position = t.position + static_cast<std::int64_t>(row);
  f.phase = t.phase;
  f.order = order;
  f.format = t.format;
  f.count = t.cols;
  return f;
}
// The mean and L2 norm from the finite values' sum and sum of squares (nan and inf counted).
inline void finish_moments(fingerprint& f, double sum, double sum_squares) noexcept {
  const auto finite = f.count - f.nan - f.inf;
  f.mean = finite ? sum / static_cast<double>(finite) : 0.0;
  f.l2 = std::sqrt(sum_squares);
}
}  // namespace detail

/// The fingerprint of row `row` of a tap.
[[nodiscard]] inline fingerprint make_fingerprint(const tap& t, std::size_t row, std::uint32_t order) {
  if (row >= t.rows || t.values.size() != t.rows * t.cols) {
    throw error("make_fingerprint: row " + std::to_string(row) + " of tap '" + std::string(t.name) + "' with " +
                std::to_string(t.rows) + " x " + std::to_string(t.cols) + " values; pass a row of the tap");
  }
  fingerprint f = detail::fingerprint_of(t, row, order);
  double sum = 0.0, sq = 0.0;
  std::array<double, sketch_buckets> s{};
  const auto values = t.values.subspan(row * t.cols, t.cols);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (std::isnan(v)) {
      ++f.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++f.inf;
      continue;
    }
    const double x = v;
    sum += x;
    sq += x * x;
    f.amax = std::max(f.amax, std::fabs(x));
    const std::uint64_t h = detail::mix(i);
    s[h % sketch_buckets] += (h >> 63) ? -x : x;
  }
  detail::finish_moments(f, sum, sq);
  for (std::size_t b = 0; b < sketch_buckets; ++b) f.sketch[b] = static_cast<float>(s[b]);
  return f;
}

/// Records the fingerprints of every row of every tap, in the order the engine taps them.
class fingerprint_recorder {
 public:
  void begin_step() { order_ = 0; }
  /// A KV-cache tap's padding rows (from `valid_rows` on) hold no token: they are recorded at
  /// negative positions, -1 - (position + row), so that they meet the reference's padding and
  /// never the token a later step writes at that position.
  void observe(const tap& t) {
    const auto order = order_++;
    const std::size_t valid = t.kind == tap_kind::kv_cache ? std::min(t.valid_rows, t.rows) : t.rows;
    for (std::size_t r = 0; r < t.rows; ++r) {
      rows_.push_back(make_fingerprint(t, r, order));
      if (r >= valid) rows_.back().position = -1 - (t.position + static_cast<std::int64_t>(r));
    }
  }
  [[nodiscard]] const std::vector<fingerprint>& rows() const noexcept { return rows_; }
  /// One JSON object per line (the file `mldiag compare` reads).
  void write_jsonl(std::ostream& out) const {
    char buf[64];
    const auto num = [&](double x) {
      std::snprintf(buf, sizeof buf, "%.17g", x);
      return std::string(std::isfinite(x) ? buf : "null");
    };
    for (const auto& f : rows_) {
      out << "{\"name\":\"" << escape(f.name) << "\",\"request\":" << f.request << ",\"position\":" << f.position
          << ",\"phase\":\"" << name(f.phase) << "\",\"order\":" << f.order << ",\"format\":\"" << name(f.format.format)
          << "\",\"scale\":" << num(f.format.scale) << ",\"block\":" << f.format.block << ",\"count\":" << f.count
          << ",\"nan\":" << f.nan << ",\"inf\":" << f.inf << ",\"amax\":" << num(f.amax) << ",\"mean\":" << num(f.mean)
          << ",\"l2\":" << num(f.l2) << ",\"sketch\":[";
      for (std::size_t b = 0; b < sketch_buckets; ++b) out << (b ? "," : "") << num(f.sketch[b]);
      out << "]}\n";
    }
  }

 private:
  static std::string escape(std::string_view s) {
    std::string o;
    for (const char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;  // tap names are identifiers
      o += c;
    }
    return o;
  }
  std::uint32_t order_ = 0;
  std::vector<fingerprint> rows_;
};

/// What a difference is most likely from, read from the two fingerprints and their neighbours.
enum class divergence_cause : std::uint8_t {
  overflow,          ///< the test's values passed its format's range (Inf, then NaN)
  nan_origin,        ///< NaN appeared with values in range (0 x Inf, Inf - Inf, a NaN read in)
  underflow,         ///< the test's values collapsed toward 0 where the reference's are tiny
  scale_mismatch,    ///< the same direction, another length: a scale applied wrongly
  capture_point,     ///< the test's row matches the reference's neighbouring tap (before/after a norm)
  position_or_kv,    ///< prefill agreed and the first decode position diverged
  computation        ///< none of the above: other weights, another kernel, a wrong formula
};

[[nodiscard]] constexpr std::string_view name(divergence_cause c) noexcept {
  switch (c) {
    case divergence_cause::overflow: return "overflow";
    case divergence_cause::nan_origin: return "NaN origin";
    case divergence_cause::underflow: return "underflow";
    case divergence_cause::scale_mismatch: return "scale mismatch";
    case divergence_cause::capture_point: return "tensor captured at another point";
    case divergence_cause::position_or_kv: return "position or KV-cache mismatch after prefill";
    case divergence_cause::computation: return "computation differs (weights, kernel or formula)";
  }
  return "?";
}

/// One matched row: the estimated relative error |test - ref| / |ref|, the cosine, and the
/// tolerance the formats give it. It holds copies: the result outlives the runs compared.
struct row_difference {
  fingerprint reference;
  fingerprint test;
  double relative_error = 0.0;
  double cosine = 1.0;
  double norm_ratio = 1.0;  ///< |test| / |ref|
  double tolerance = 0.0;
  [[nodiscard]] bool diverged() const noexcept { return !(relative_error <= tolerance); }
};

/// compare's result: the first divergent row (by position, then forward order) and its cause.
struct divergence {
  std::size_t matched = 0;       ///< rows found in both
  std::size_t unmatched = 0;     ///< rows of the test without a reference row (and the reverse)
  std::size_t diverged_rows = 0;
  std::optional<row_difference> first;
  divergence_cause cause = divergence_cause::computation;
  std::string explanation;
  std::vector<row_difference> per_layer;  ///< the worst row of each layer (name), forward order
};

struct compare_options {
  /// Tolerance = factor x (unit roundoff of the reference's format + the test's, or the path's
  /// compute_roundoff where larger): a row past it carries more error than those formats
  /// explain. 32: on the example engine's calibration split the healthy paths' worst rows sit at
  /// 8.5 (bf16), 4.5 (fp16) and 22 (int8, by layer 3) of their roundoff, and the int8 scale fault
  /// at 53 (docs/accuracy.md#inference).
  double tolerance_factor = 32.0;
  /// A floor on the tolerance for fp32 against fp32 (summation order alone differs by ~1e-6).
  double min_tolerance = 1e-4;
  /// The unit roundoff of the narrowest format the test path computes with when its tapped
  /// tensors are stored wider (int8 weights and activations feeding fp32 outputs: 1/254):
  /// the tolerance is the larger of the two. 0: the taps' formats alone.
  double compute_roundoff = 0.0;
  /// Cosine above which a difference in length alone is a scale mismatch.
  double same_direction = 0.999;
};

namespace detail {
[[nodiscard]] inline double sketch_dot(const fingerprint& a, const fingerprint& b) noexcept {
  double d = 0.0;
  for (std::size_t i = 0; i < sketch_buckets; ++i) d += static_cast<double>(a.sketch[i]) * b.sketch[i];
  return d;
}
[[nodiscard]] inline row_difference difference(const fingerprint& r, const fingerprint& t, const compare_options& o) {
  row_difference d;
  d.reference = r;
  d.test = t;
  d.tolerance = std::max(o.min_tolerance, o.tolerance_factor * std::max(r.format.unit_roundoff() + t.format.unit_roundoff(),
                                                                        o.compute_roundoff));
  if (t.nan + t.inf > r.nan + r.inf) {
    d.relative_error = std::numeric_limits<double>::infinity();
    d.cosine = std::numeric_limits<double>::quiet_NaN();
    d.norm_ratio = std::numeric_limits<double>::quiet_NaN();
    return d;
  }
  double diff = 0.0;
  for (std::size_t i = 0; i < sketch_buckets; ++i) {
    const double x = static_cast<double>(t.sketch[i]) - r.sketch[i];
    diff += x * x;
  }
  const double ss_r = sketch_dot(r, r), ss_t = sketch_dot(t, t);
  d.relative_error = r.l2 > 0.0 ? std::sqrt(diff) / r.l2 : (t.l2 > 0.0 ? std::numeric_limits<double>::infinity() : 0.0);
  d.cosine = ss_r > 0.0 && ss_t > 0.0 ? sketch_dot(r, t) / std::sqrt(ss_r * ss_t) : (ss_r == ss_t ? 1.0 : 0.0);
  d.norm_ratio = r.l2 > 0.0 ? t.l2 / r.l2 : (t.l2 > 0.0 ? std::numeric_limits<double>::infinity() : 1.0);
  return d;
}
}  // namespace detail

/// The first divergent layer of `test` against `reference`: rows are matched by (request,
/// position, layer name), layers are taken in forward order (the order of their first row in
/// the reference), and the first layer with a row past its tolerance is the answer, at its
/// earliest (request, position). A fault in one layer changes every position there and no layer
/// before it; a later layer at an earlier position is downstream, not first. Throws
/// `mldiag::error` when nothing matches (the two runs tapped different names or tokens).
[[nodiscard]] inline divergence compare(const std::vector<fingerprint>& reference, const std::vector<fingerprint>& test,
                                        const compare_options& o = {}) {
  using key = std::tuple<std::int32_t, std::int64_t, std::string>;
  std::map<key, const fingerprint*> ref;
  for (const auto& f : reference) ref.emplace(key{f.request, f.position, f.name}, &f);
  std::vector<row_difference> rows;
  divergence out;
  for (const auto& t : test) {
    const auto it = ref.find(key{t.request, t.position, t.name});
    if (it == ref.end()) {
      ++out.unmatched;
      continue;
    }
    rows.push_back(detail::difference(*it->second, t, o));
  }
  out.matched = rows.size();
  out.unmatched += reference.size() - std::min(reference.size(), rows.size());
  if (rows.empty()) {
    throw error("compare: no row of the test matches the reference by request, position and layer name; "
                "record both runs with the same tap names and prompts");
  }
  std::map<std::string, std::size_t, std::less<>> rank;  // a layer's place in the forward order
  for (const auto& f : reference) rank.emplace(f.name, rank.size());
  std::stable_sort(rows.begin(), rows.end(), [&](const row_difference& a, const row_difference& b) {
    return std::tuple(rank.at(a.test.name), a.test.request, a.test.position) <
           std::tuple(rank.at(b.test.name), b.test.request, b.test.position);
  });
  std::map<std::string, std::size_t> worst;  // per layer name, its worst row, in first-seen order
  for (const auto& d : rows) {
    if (d.diverged()) ++out.diverged_rows;
    auto [it, fresh] = worst.emplace(d.test.name, out.per_layer.size());
    if (fresh) {
      out.per_layer.push_back(d);
    } else if (!(out.per_layer[it->second].relative_error >= d.relative_error)) {
      out.per_layer[it->second] = d;
    }
    if (!out.first && d.diverged()) out.first = d;
  }
  if (!out.first) {
    out.explanation = "no row diverged: every matched row is within its formats' tolerance";
    return out;
  }
  const auto& d = *out.first;
  const fingerprint& r = d.reference;
  const fingerprint& t = d.test;
  // Neighbouring reference taps of the same row (before/after a norm, a residual add).
  const auto neighbour_matches = [&] {
    for (const auto& f : reference) {
      if (f.request != t.request || f.position != t.position || f.name == t.name) continue;
      if (f.order + 1 != r.order && f.order != r.order + 1) continue;
      if (detail::difference(f, t, o).relative_error <= d.tolerance) return f.name;
    }
    return std::string();
  };
  // Did every prefill row of this request agree, in every layer, and is this its first decode
  // position?
  const auto first_decode_after_clean_prefill = [&] {
    if (t.phase != inference::phase::decode) return false;
    bool saw_prefill = false;
    for (const auto& x : rows) {
      if (x.test.request != t.request) continue;
      if (x.test.phase == inference::phase::prefill) {
        saw_prefill = true;
        if (x.diverged()) return false;
      }
      if (x.test.phase == inference::phase::decode && x.test.position >= 0 && x.test.position < t.position) return false;
    }
    return saw_prefill;
  };
  char buf[256];
  if (t.nan + t.inf > r.nan + r.inf) {
    const bool over = t.inf > r.inf || r.amax > 0.5 * t.format.max_finite();
    out.cause = over && t.format.overflows_to_inf() ? divergence_cause::overflow : divergence_cause::nan_origin;
    std::snprintf(buf, sizeof buf, "%llu NaN and %llu Inf where the reference has %llu and %llu; reference amax %.4g, %s holds %.4g",
                  static_cast<unsigned long long>(t.nan), static_cast<unsigned long long>(t.inf),
                  static_cast<unsigned long long>(r.nan), static_cast<unsigned long long>(r.inf), r.amax,
                  std::string(name(t.format.format)).c_str(), t.format.max_finite());
  } else if (const auto n = neighbour_matches(); !n.empty()) {
    out.cause = divergence_cause::capture_point;
    std::snprintf(buf, sizeof buf, "the test's row matches the reference's '%s' within tolerance", n.c_str());
  } else if (first_decode_after_clean_prefill()) {
    out.cause = divergence_cause::position_or_kv;
    std::snprintf(buf, sizeof buf, "every prefill row agreed; position %lld is the first decode position and the first to diverge",
                  static_cast<long long>(t.position));
  } else if (d.norm_ratio < 0.5 && r.amax < 64.0 * t.format.min_nonzero() * 1024.0) {
    out.cause = divergence_cause::underflow;
    std::snprintf(buf, sizeof buf, "the test's norm is %.3g of the reference's, whose values (amax %.3g) sit near %s's smallest",
                  d.norm_ratio, r.amax, std::string(name(t.format.format)).c_str());
  } else if (d.cosine >= o.same_direction) {
    out.cause = divergence_cause::scale_mismatch;
    std::snprintf(buf, sizeof buf, "cosine %.5f with a length ratio of %.4g: the same values scaled", d.cosine, d.norm_ratio);
  } else {
    out.cause = divergence_cause::computation;
    std::snprintf(buf, sizeof buf, "relative error %.3g against a tolerance of %.3g, cosine %.4f, length ratio %.4g",
                  d.relative_error, d.tolerance, d.cosine, d.norm_ratio);
  }
  out.explanation = buf;
  return out;
}

}  // namespace mldiag::inference
