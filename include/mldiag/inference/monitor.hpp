// SPDX-License-Identifier: Apache-2.0
/// `inference::monitor`: mldiag inside an inference engine. A decode step is a step; the engine
/// hands it the tensors it taps (`tap`) and each request's logits row, and gets findings: the
/// first non-finite value with its layer, token, phase, request and rank; values past or near
/// the storage format's range and values it flushes; outlier channels of the residual stream;
/// non-finite KV-cache padding; logits rows that are unusable, near uniform or collapsed.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/inference/range_stats.hpp"
#include "mldiag/inference/tap.hpp"
#include "mldiag/vocab/finding.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::inference {

namespace symptoms {
inline constexpr symptom first_non_finite{"first non-finite value in inference"};
inline constexpr symptom logits_row_non_finite{"logits row non-finite: the request cannot be sampled"};
inline constexpr symptom values_overflowed{"values past the storage format's range"};
inline constexpr symptom headroom_low{"values near the storage format's limit"};
inline constexpr symptom headroom_shrinking{"headroom to the storage format's limit shrinking"};
inline constexpr symptom values_flushed{"values flushed to zero by the storage format"};
inline constexpr symptom outlier_channels{"outlier channels in the residual stream"};
inline constexpr symptom kv_padding_non_finite{"non-finite values in KV-cache padding slots"};
inline constexpr symptom output_near_uniform{"output distribution near uniform"};
inline constexpr symptom output_collapsed{"output collapsed to one repeated token"};
inline constexpr symptom seeds_ignored{"identical outputs for different seeds"};
/// Every symptom the inference monitor raises.
inline constexpr std::array all{first_non_finite,   logits_row_non_finite, values_overflowed,
                                headroom_low,       headroom_shrinking,    values_flushed,
                                outlier_channels,   kv_padding_non_finite, output_near_uniform,
                                output_collapsed,   seeds_ignored};
}  // namespace symptoms

/// Where a non-finite value first appeared: the step, the tap's order within it, and the tap.
struct site {
  std::int64_t step = -1;
  std::size_t order = 0;  ///< the tap's index in its step (forward order)
  std::string name;
  inference::phase phase = inference::phase::decode;
  std::int64_t position = 0;  ///< the token position of the first row holding one
  std::int32_t request = 0;
  std::int32_t rank = 0;
  std::uint64_t nan = 0, inf = 0;
};

/// The inference monitor's lines; each default's reason is beside it (docs/inference.md).
struct monitor_config {
  /// Full statistics (range, flush, outliers) and the output checks' entropy on every
  /// `sample_every`-th step; the non-finite sentinel and the unusable-row check run every step.
  /// 8 by default, for serving: on the example engine's 65 us decode step the residual stream
  /// and the logits then cost 0.70% (docs/benchmarks.md). Give 1 when hunting a fault: every
  /// step, every tap (the example engine's fault splits were measured so).
  std::size_t sample_every = 8;
  /// A warning when the largest value is within this many bits of the format's limit: at 1,
  /// doubling it overflows (an fp16 residual stream at 33k of 65504).
  double headroom_bits = 1.0;
  /// Headroom shrinking: over the last `trend_points` sampled steps its least-squares line
  /// crosses `headroom_bits` within `trend_horizon` steps, and it has lost at least
  /// `trend_min_loss` bits since the first of them (a slope that noise alone does not make).
  std::size_t trend_points = 16;
  double trend_horizon = 64.0;
  double trend_min_loss = 2.0;
  /// ... and only within this many bits of the limit: a 16-step line says nothing about 16
  /// bits away (fp16 attention probabilities, bounded by 1, swing 3 bits from step to step:
  /// the example engine's calibration split).
  double trend_within_bits = 6.0;
  /// A clamping format (int8, E4M3) whose scale was set from an amax puts its largest value at
  /// the limit by design; more than this share of the values there is clipping: a warning.
  double saturated_fraction = 0.01;
  /// ... and at least this many values: one value of a 64-wide decode row at the limit is 1.6%
  /// (the example engine's held-out int8 run, healthy, warned on exactly that).
  std::uint64_t min_saturated = 8;
  /// Values flushed to zero: a warning above this share of the non-zero values. Rounding to
  /// int8 flushes some by design: a Gaussian tensor whose scale fits its amax (about 4 sigma)
  /// loses 1.3%; a scale 4x too large (an outlier channel 16 sigma out, a calibration batch
  /// unlike the traffic) 5%, 100x too large most.
  double flushed_fraction = 0.05;
  /// Outlier channels: a column whose largest magnitude is this many times the median column's
  /// (massive activations are 100-1000x in open LLMs; ordinary channels vary 2-5x).
  double outlier_ratio = 20.0;
  /// Output near uniform: the normalized entropy H / ln V at or above this for
  /// `uniform_steps` decode steps in a row (a trained model's next-token entropy sits far below).
  double uniform_entropy = 0.95;
  std::size_t uniform_steps = 4;
  /// Output collapsed: the same greedy token `repeat_tokens` times in a row with the
  /// normalized entropy below `collapse_entropy` on each.
  std::size_t repeat_tokens = 16;
  double collapse_entropy = 0.02;
  /// Identical outputs for different seeds: two sampled requests of the same prompt, with
  /// different seeds, that produced the same `seed_min_tokens` or more tokens while the mean
  /// normalized entropy of their rows was at least `seed_min_entropy` (choices were there to
  /// make: at 0.2 ln V two independent draws agree on 8 tokens with a probability far below 1e-3).
  std::size_t seed_min_tokens = 8;
  double seed_min_entropy = 0.2;
};

/// A finished sampled request, for the seed check (`monitor::end_request`).
struct sampled_output {
  std::uint64_t prompt_key = 0;  ///< the same for the same prompt (a hash of its tokens)
  std::uint64_t seed = 0;
  std::span<const int> tokens;
};

/// The monitor. Not thread-safe: one per engine thread, or a lock around `observe`.
///
/// **Example**
/// ```cpp
/// mldiag::inference::monitor mon;
/// mon.begin_step(step);
/// mon.observe({.name = "blocks.0.mlp.fc1", .phase = phase::decode, .position = pos, .cols = 256,
///              .values = h, .format = {number_format::fp16}});
/// if (!mon.observe_logits(request, logits)) abort_request(request);  // a row of NaN
/// for (const auto& f : mon.take_findings()) report(f);
/// ```
class monitor {
 public:
  monitor() : monitor(monitor_config{}) {}
  explicit monitor(monitor_config c) : c_(c) {
    if (c_.sample_every == 0) throw error("inference::monitor_config::sample_every is 0; give 1 to sample every step");
    if (c_.trend_points < 3) throw error("inference::monitor_config::trend_points must be at least 3");
  }

  /// Starts a step (a prefill pass or one decode step); taps are numbered from 0 in it.
  void begin_step(std::int64_t step) {
    step_ = step;
    order_ = 0;
    sampled_ = step_ % static_cast<std::int64_t>(c_.sample_every) == 0;
  }
  [[nodiscard]] std::int64_t step() const noexcept { return step_; }

  /// Reads one tapped tensor. Throws `mldiag::error` for a span whose size is not rows x cols.
  void observe(const tap& t) {
    if (t.values.size() != t.rows * t.cols) {
      throw error("tap '" + std::string(t.name) + "' has " + std::to_string(t.values.size()) + " values for " +
                  std::to_string(t.rows) + " x " + std::to_string(t.cols) + "; pass rows and cols of the span");
    }
    const std::size_t order = order_++;
    const std::size_t valid = t.kind == tap_kind::kv_cache ? std::min(t.valid_rows, t.rows) : t.rows;
    const auto written = t.values.first(valid * t.cols);
    if (t.kind == tap_kind::kv_cache && valid < t.rows) padding(t, t.values.subspan(valid * t.cols));
    if (!sampled_) {
      sentinel(t, order, written);
      return;
    }
    const range_stats r = measure(written, t.format);
    ++sampled_taps_;
    if (r.non_finite() > 0) sentinel(t, order, written);
    range(t, r);
    if (t.kind == tap_kind::residual && t.cols > 1 && t.rows > 0) outliers(t, written);
  }

  /// Reads one request's logits row (vocabulary V = row.size()) and returns whether it can be
  /// sampled: false for a row with any NaN or Inf (a row of NaN sampled by argmax gives token 0,
  /// a valid-looking token; abort the request instead). Decode rows feed the output checks.
  bool observe_logits(std::int32_t request, std::span<const float> row, inference::phase p = inference::phase::decode) {
    if (row.empty()) throw error("observe_logits got an empty row; pass the request's V logits");
    // Every step: one vectorized pass for NaN/Inf (sentinel's bit test), counted only when found.
    std::uint32_t worst = 0;
    for (const float v : row) worst = std::max(worst, std::bit_cast<std::uint32_t>(v) & 0x7fffffffu);
    std::uint64_t bad = 0;
    if (worst >= 0x7f800000u)
      for (const float v : row) bad += std::isfinite(v) ? 0 : 1;
    auto& o = outputs_[request];
    if (bad > 0) {
      // Once per request (the engine is told every time by the return value): a request that
      // goes on decoding NaN would otherwise repeat it every step.
      ++o.non_finite_rows;
      if (o.non_finite_rows > 1) return false;
      finding f = make_finding(question::convergence, symptoms::logits_row_non_finite, severity::critical, step_,
                               "inference.output", {{"request", static_cast<double>(request)},
                                                    {"non_finite", static_cast<double>(bad)},
                                                    {"vocabulary", static_cast<double>(row.size())}});
      f.where.emplace_back("logits", static_cast<double>(bad) / static_cast<double>(row.size()));
      if (first_ && first_->step <= step_) {
        f.consequence_of = std::string(symptoms::first_non_finite.text);
        f.consequence_of_step = first_->step;
      }
      out_.push_back(std::move(f));
      o.uniform_run = o.repeat_run = 0;
      return false;
    }
    // The output checks read the entropy, which costs an exp per logit: on sampled steps only
    // (their runs then count sampled steps), so that the every-step part stays a pass of compares.
    if (p != inference::phase::decode || !sampled_) return true;
    float top = -std::numeric_limits<float>::infinity();
    std::size_t arg = 0;
    for (std::size_t i = 0; i < row.size(); ++i)
      if (row[i] > top) top = row[i], arg = i;
    // The entropy of softmax(row) in double: log-sum-exp from the maximum, then H = log s - E[x - m].
    double s = 0.0, first_moment = 0.0;
    for (const float v : row) {
      const double z = static_cast<double>(v) - static_cast<double>(top);
      const double e = std::exp(z);
      s += e;
      first_moment += e * z;
    }
    const double h = std::log(s) - first_moment / s;
    const double normalized = row.size() > 1 ? h / std::log(static_cast<double>(row.size())) : 0.0;
    o.entropy_sum += normalized;
    ++o.rows;
    o.uniform_run = normalized >= c_.uniform_entropy ? o.uniform_run + 1 : 0;
    if (o.uniform_run == c_.uniform_steps) {
      out_.push_back(make_finding(question::convergence, symptoms::output_near_uniform, severity::warning, step_,
                                  "inference.output", {{"request", static_cast<double>(request)},
                                                       {"normalized_entropy", normalized},
                                                       {"steps", static_cast<double>(o.uniform_run)}}));
      out_.back().first_step = step_ - static_cast<std::int64_t>(c_.uniform_steps) + 1;
    }
    const bool low = normalized < c_.collapse_entropy;
    o.repeat_run = low && o.repeat_run > 0 && o.last_token == arg ? o.repeat_run + 1 : (low ? 1 : 0);
    o.last_token = arg;
    if (o.repeat_run == c_.repeat_tokens) {
      out_.push_back(make_finding(question::convergence, symptoms::output_collapsed, severity::warning, step_,
                                  "inference.output", {{"request", static_cast<double>(request)},
                                                       {"token", static_cast<double>(arg)},
                                                       {"repeats", static_cast<double>(o.repeat_run)},
                                                       {"normalized_entropy", normalized}}));
      out_.back().first_step = step_ - static_cast<std::int64_t>(c_.repeat_tokens) + 1;
    }
    return true;
  }

  /// Ends a request: its output history and its sentinel are dropped (a new request with the
  /// same index starts fresh, and its first non-finite value is reported again).
  void end_request(std::int32_t request) {
    outputs_.erase(request);
    seen_requests_.erase(request);
  }

  /// Ends a sampled request and checks its seed: a warning when an earlier request of the same
  /// prompt with another seed produced the same tokens although its rows left choices (the
  /// seed never reached the sampler, or sampling fell back to greedy).
  void end_request(std::int32_t request, const sampled_output& s) {
    const auto it = outputs_.find(request);
    const double entropy = it != outputs_.end() && it->second.rows ? it->second.entropy_sum / static_cast<double>(it->second.rows) : 0.0;
    end_request(request);
    if (s.tokens.size() < c_.seed_min_tokens || entropy < c_.seed_min_entropy) return;
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the tokens
    for (const int t : s.tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ull;
    auto& seen = finished_[s.prompt_key];
    for (const auto& [seed, hash] : seen) {
      if (seed == s.seed || hash != h) continue;
      finding f = make_finding(question::convergence, symptoms::seeds_ignored, severity::warning, step_, "inference.output",
                               {{"request", static_cast<double>(request)},
                                {"seed", static_cast<double>(s.seed)},
                                {"other_seed", static_cast<double>(seed)},
                                {"tokens", static_cast<double>(s.tokens.size())},
                                {"mean_normalized_entropy", entropy}});
      f.why = "the rows left choices, and two seeds made the same ones";
      out_.push_back(std::move(f));
      break;
    }
    seen.emplace_back(s.seed, h);
  }

  /// The findings since the last call.
  [[nodiscard]] std::vector<finding> take_findings() { return std::exchange(out_, {}); }
  /// Where the first non-finite value appeared, if one did.
  [[nodiscard]] const std::optional<site>& first_non_finite() const noexcept { return first_; }
  /// Taps that got the full statistics (the others only the sentinel).
  [[nodiscard]] std::uint64_t sampled_taps() const noexcept { return sampled_taps_; }
  [[nodiscard]] const monitor_config& config() const noexcept { return c_; }

 private:
  struct output_state {
    std::size_t uniform_run = 0, repeat_run = 0, non_finite_rows = 0, rows = 0;
    double entropy_sum = 0.0;
    std::size_t last_token = static_cast<std::size_t>(-1);
  };
  // Per tap name and rank: the headroom's recent points and which findings were raised.
  struct trend_state {
    std::vector<std::pair<double, double>> points;  // (step, headroom bits), the last trend_points
    bool low = false, shrinking = false, overflowed = false, flushed = false, outliers = false;
    bool kv_padding_reported = false;
  };

  // The non-finite sentinel: the first (step, tap order) with a NaN or Inf, per request. The
  // first one in the run is critical; later ones in the same request are counted there.
  void sentinel(const tap& t, std::size_t order, std::span<const float> written) {
    // A clean tensor costs one branch-free pass: a float is NaN or +-Inf exactly when its bits
    // without the sign are at least 0x7f800000, and an integer maximum vectorizes (a float sum
    // would not, without -ffast-math); the counting pass below runs only when one is there.
    std::uint32_t top = 0;
    for (const float v : written) top = std::max(top, std::bit_cast<std::uint32_t>(v) & 0x7fffffffu);
    if (top < 0x7f800000u) return;
    std::uint64_t nan = 0, inf = 0;
    std::size_t first_row = t.rows;
    for (std::size_t i = 0; i < written.size(); ++i) {
      const float v = written[i];
      if (std::isnan(v)) ++nan;
      else if (std::isinf(v)) ++inf;
      else continue;
      if (first_row == t.rows) first_row = t.cols ? i / t.cols : 0;
    }
    if (nan + inf == 0) return;
    if (!seen_requests_.insert(t.request).second) return;
    site s{step_, order, std::string(t.name), t.phase, t.position + static_cast<std::int64_t>(first_row), t.request, t.rank, nan, inf};
    if (!first_) first_ = s;
    finding f = make_finding(question::convergence, symptoms::first_non_finite, severity::critical, step_,
                             "inference.sentinel",
                             {{"position", static_cast<double>(s.position)},
                              {"phase_decode", t.phase == inference::phase::decode ? 1.0 : 0.0},
                              {"request", static_cast<double>(t.request)},
                              {"rank", static_cast<double>(t.rank)},
                              {"tap_order", static_cast<double>(order)},
                              {"nan", static_cast<double>(nan)},
                              {"inf", static_cast<double>(inf)}});
    f.where.emplace_back(std::string(t.name), static_cast<double>(nan + inf));
    f.why = std::string("first at ") + std::string(t.name) + ", " + std::string(name(t.phase)) + " position " +
            std::to_string(s.position) + ", request " + std::to_string(t.request) + ", rank " + std::to_string(t.rank) +
            " (stored as " + t.format.describe() + ")";
    out_.push_back(std::move(f));
  }

  void padding(const tap& t, std::span<const float> pad) {
    std::uint64_t bad = 0;
    for (const float v : pad) bad += std::isfinite(v) ? 0 : 1;
    if (bad == 0) return;
    auto& tr = trend_of(t);
    if (tr.kv_padding_reported) return;
    tr.kv_padding_reported = true;
    finding f = make_finding(question::convergence, symptoms::kv_padding_non_finite, severity::warning, step_,
                             "inference.kv_cache", {{"non_finite", static_cast<double>(bad)},
                                                    {"padding_values", static_cast<double>(pad.size())},
                                                    {"request", static_cast<double>(t.request)}});
    f.where.emplace_back(std::string(t.name), static_cast<double>(bad));
    f.why = "harmless only while the mask selects (a masked score of -inf); a mask that multiplies makes 0 x NaN = NaN";
    out_.push_back(std::move(f));
  }

  void range(const tap& t, const range_stats& r) {
    auto& tr = trend_of(t);
    const double head = r.headroom_bits();
    // The evidence is built only for a finding: a tap that raises none allocates nothing.
    const auto emit = [&](mldiag::symptom s, severity level, std::vector<std::pair<std::string, double>> extra) {
      std::vector<std::pair<std::string, double>> ev = {
          {"amax", r.amax}, {"max_finite", r.max_finite}, {"headroom_bits", head}, {"position", static_cast<double>(t.position)}};
      ev.insert(ev.end(), extra.begin(), extra.end());
      finding f = make_finding(question::early_anomaly, s, level, step_, "inference.range", std::move(ev));
      f.where.emplace_back(std::string(t.name), r.amax);
      f.why = "stored as " + t.format.describe();
      out_.push_back(std::move(f));
    };
    const bool clamping = !r.overflows_to_inf;
    if (!tr.overflowed &&
        (r.clipped > 0 || (clamping && r.saturated >= c_.min_saturated && r.saturated_fraction() > c_.saturated_fraction))) {
      tr.overflowed = true;
      // Past the limit a float format gives Inf (the sentinel's NaN downstream); int8 and E4M3
      // clamp, and what they clamped sits at the limit.
      emit(symptoms::values_overflowed, clamping ? severity::warning : severity::critical,
           {{"clipped", static_cast<double>(r.clipped)}, {"clipped_fraction", r.clipped_fraction()},
            {"at_limit_fraction", r.saturated_fraction()}});
    } else if (!clamping && r.clipped == 0 && std::isfinite(head) && head < c_.headroom_bits && !tr.low) {
      // Near the limit matters where past it is Inf; a clamping format's scale puts its amax there.
      tr.low = true;
      emit(symptoms::headroom_low, severity::warning, {});
    }
    if (std::isfinite(head)) {
      tr.points.emplace_back(static_cast<double>(step_), head);
      if (tr.points.size() > c_.trend_points) tr.points.erase(tr.points.begin());
      if (!tr.shrinking && !tr.low && !tr.overflowed && tr.points.size() == c_.trend_points) {
        const auto [slope, at_last] = fit(tr.points);
        const double lost = tr.points.front().second - at_last;
        if (!clamping && slope < 0.0 && lost >= c_.trend_min_loss && at_last > c_.headroom_bits && at_last <= c_.trend_within_bits &&
            (at_last - c_.headroom_bits) / -slope <= c_.trend_horizon) {
          tr.shrinking = true;
          emit(symptoms::headroom_shrinking, severity::warning,
               {{"bits_lost", lost}, {"bits_per_step", slope}, {"steps_to_limit", (at_last - c_.headroom_bits) / -slope}});
        }
      }
    }
    if (r.flushed_fraction() > c_.flushed_fraction && !tr.flushed) {
      tr.flushed = true;
      emit(symptoms::values_flushed, severity::warning,
           {{"flushed_fraction", r.flushed_fraction()}, {"flushed", static_cast<double>(r.flushed + r.block_flushed)},
            {"nonzero", static_cast<double>(r.nonzero)}});
    }
  }

  // Columns (channels) whose largest magnitude over the rows is outlier_ratio x the median
  // column's: info with the channels named (massive activations are a trait of healthy LLMs;
  // what they cost is the format's business, above).
  void outliers(const tap& t, std::span<const float> written) {
    auto& tr = trend_of(t);
    if (tr.outliers) return;
    col_amax_.assign(t.cols, 0.0);
    const std::size_t rows = written.size() / t.cols;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < t.cols; ++c) {
        const float v = written[r * t.cols + c];
        if (std::isfinite(v)) col_amax_[c] = std::max(col_amax_[c], static_cast<double>(std::fabs(v)));
      }
    sorted_ = col_amax_;
    std::nth_element(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(sorted_.size() / 2), sorted_.end());
    const double median = sorted_[sorted_.size() / 2];
    if (!(median > 0.0)) return;
    std::vector<std::pair<std::string, double>> where;
    for (std::size_t c = 0; c < t.cols; ++c)
      if (col_amax_[c] >= c_.outlier_ratio * median)
        where.emplace_back(std::string(t.name) + "[" + std::to_string(c) + "]", col_amax_[c] / median);
    if (where.empty()) return;
    tr.outliers = true;
    std::sort(where.begin(), where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    const double top = where.front().second;
    const auto n = static_cast<double>(where.size());
    if (where.size() > 8) where.resize(8);
    finding f = make_finding(question::early_anomaly, symptoms::outlier_channels, severity::info, step_, "inference.outliers",
                             {{"channels", n}, {"largest_over_median", top}, {"median_channel_amax", median},
                              {"position", static_cast<double>(t.position)}});
    f.where = std::move(where);
    out_.push_back(std::move(f));
  }

  // Least squares of (step, headroom): the slope, and the line's value at the last point.
  [[nodiscard]] static std::pair<double, double> fit(const std::vector<std::pair<double, double>>& p) {
    double mx = 0.0, my = 0.0;
    for (const auto& [x, y] : p) mx += x, my += y;
    mx /= static_cast<double>(p.size());
    my /= static_cast<double>(p.size());
    double sxy = 0.0, sxx = 0.0;
    for (const auto& [x, y] : p) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
    const double slope = sxx > 0.0 ? sxy / sxx : 0.0;
    return {slope, my + slope * (p.back().first - mx)};
  }

  // Trends are per tap name and rank (a request's tensors share the layer's range); looked up
  // by string_view, so a known tap allocates nothing.
  trend_state& trend_of(const tap& t) {
    auto& by_name = trends_[t.rank];
    const auto it = by_name.find(t.name);
    if (it != by_name.end()) return it->second;
    return by_name.emplace(std::string(t.name), trend_state{}).first->second;
  }

  monitor_config c_;
  std::int64_t step_ = 0;
  std::size_t order_ = 0;
  bool sampled_ = true;
  std::uint64_t sampled_taps_ = 0;
  std::optional<site> first_;
  std::set<std::int32_t> seen_requests_;  // requests whose first non-finite value was reported
  std::map<std::int32_t, output_state> outputs_;
  std::map<std::uint64_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> finished_;  // prompt -> (seed, tokens hash)
  std::map<std::int32_t, std::map<std::string, trend_state, std::less<>>> trends_;
  std::vector<double> col_amax_, sorted_;
  std::vector<finding> out_;
};

}  // namespace mldiag::inference
