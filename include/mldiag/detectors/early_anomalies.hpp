// SPDX-License-Identifier: Apache-2.0
/// Early-anomaly detectors (Q2): loss spikes, attention and router entropy, residual writes, embedding growth, drift from init.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::detectors {

/// Q2: the loss rises above `factor` times its robust running baseline (median of the last
/// `window` losses that did not fire) for `sustain` observations in a row. Defaults: factor
/// 1.5, sustain 2, window 50 — real LLM spikes are 1.8-3x the running mean and persist for
/// tens to hundreds of iterations, while healthy runs have single-batch outliers up to 1.86x
/// that recover on the next step (../shared/data/real-runs/README.md). Critical at
/// `critical_factor` (2.5). The rise must also be at least `min_rise` (0.25) in absolute terms:
/// the losses of a nearly separable task sit near zero, where harmless batches differ by large
/// ratios (the examples' MLP on the digits: 0.017 -> 0.14 with one misclassified image in a
/// batch of 64; LLM spikes rise by 1.6 nats and more). It must also leave the baseline's noise:
/// at least `min_mads` (10) robust standard deviations (MAD) above the median, so that small,
/// noisy batches do not spike by chance (batch losses are skewed: a gamma-shaped loss of median
/// 0.064 and MAD 0.064 reached 6 MADs twice in a row once in 5000 steps; 10 never did),
/// while LLM spikes sit tens of MADs out. A single observation at `immediate_factor` (10, the
/// method's table rule) times the median and `immediate_min_rise` (1 nat) above it is critical
/// at once, where it is also `immediate_factor` times the window's largest loss and no
/// excursion came within the window: evidence that needs no second look, which a short log
/// may end on. (1 nat, not
/// `min_rise`: a batch of 8 with one confidently wrong row on a nearly separable table goes
/// 0.006 -> 0.6 and back on the next step, 10-100x, while LLM spikes rise by 1.6 nats and more;
/// the zoo's small tables, 4 healthy runs.) Intermittent or consistent, as the method's
/// phase 2 asks: once a run of outliers has recovered before it was reported (an excursion)
/// within the last `window` observations, the loss is one whose batches stray, and a spike must
/// hold for `noisy_sustain` (5) observations, not `sustain`: two hard batches in a row are then
/// chance (one batch in 30 holds a confidently wrong row on the zoo's small tables), while real
/// spikes hold for tens of iterations. In training's first `settle` (5) steps (step numbers
/// below it; a log excerpt that starts later is judged on its first points), until the
/// baseline holds `settle` losses, only the one-observation verdict decides and every other
/// loss joins the baseline: the robust spread of two or three batch losses is chance (a
/// batch-8 Gaussian NLL went 0.45, 0.49, 0.76, 0.78, 1.6x a median of two, and an AdamW
/// warm-up 0.71, 0.68, 0.68, 1.16, 1.02: the zoo's held-out round 7, two healthy runs warned at
/// steps 3-4). `method_rule()` is the method's
/// table rule alone: loss > 10x the moving average, on one observation.
class loss_spike {
 public:
  struct config {
    double factor = 1.5;
    std::size_t sustain = 2;
    std::size_t window = 50;
    std::size_t min_history = 2;
    double critical_factor = 2.5;
    double min_rise = 0.25;  // absolute (nats): near-zero losses swing by large ratios harmlessly
    double min_mads = 10.0;
    double immediate_factor = 10.0;
    double immediate_min_rise = 1.0;  // absolute (nats), for the one-observation verdict
    std::size_t noisy_sustain = 5;
    std::size_t settle = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"factor", &config::factor},
          field<config>{"sustain", &config::sustain},
          field<config>{"window", &config::window},
          field<config>{"min_history", &config::min_history},
          field<config>{"critical_factor", &config::critical_factor},
          field<config>{"min_rise", &config::min_rise},
          field<config>{"min_mads", &config::min_mads},
          field<config>{"immediate_factor", &config::immediate_factor},
          field<config>{"immediate_min_rise", &config::immediate_min_rise},
          field<config>{"noisy_sustain", &config::noisy_sustain},
          field<config>{"settle", &config::settle}};
    }
  };
  loss_spike() : loss_spike(config{}) {}
  explicit loss_spike(config c) : c_(c), baseline_(c.window) {
    if (c.factor <= 1.0 || c.sustain == 0) throw error("loss_spike: need factor > 1 and sustain >= 1");
  }
  static loss_spike method_rule() { return loss_spike(config{10.0, 1, 50, 2, 10.0, 0.0, 0.0, 10.0, 0.0, 1, 0}); }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"loss_spike", question::early_anomaly, {symptoms::loss_spike}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (!s.has_loss || !std::isfinite(s.loss)) return;
    ++seen_;
    if (baseline_.size() < c_.min_history) {
      baseline_.push(s.loss);
      return;
    }
    const double median = baseline_.median();
    const double ratio = s.loss / median;
    const double noise = c_.min_mads > 0.0 ? baseline_.mad() : 0.0;
    if (!(median > 0.0) || ratio < c_.factor || s.loss - median < c_.min_rise || s.loss - median < c_.min_mads * noise) {
      if (run_ > 0 && !reported_) last_excursion_ = seen_;
      baseline_.push(s.loss);
      run_ = 0;
      reported_ = false;
      return;
    }
    const bool noisy = last_excursion_ > 0 && seen_ - last_excursion_ <= c_.window;
    // One observation is unmistakable only at immediate_factor times anything the window holds
    // too, and where the batches have not strayed: one confidently wrong row in a batch of 8
    // lifts its mean by up to ~2 nats (0.14 -> 1.8, 13x the median, 2-4x the window's largest
    // batch: the zoo's round 6, batch-8 runs of 1500-2000 steps), and then waits like any other.
    const bool immediate = ratio >= c_.immediate_factor && s.loss - median >= c_.immediate_min_rise && !noisy &&
                           s.loss >= c_.immediate_factor * baseline_.max();
    // Training's first `settle` steps (step numbers below it): a baseline of two or three
    // batch losses has no noise estimate (their MAD is chance); only the one-observation
    // verdict decides, and the loss joins it. An excerpt of a log that starts later is judged
    // on its first points (the BigScience logbook's 13B spike is its excerpt's third line).
    if (baseline_.size() < c_.settle && s.step < static_cast<std::int64_t>(c_.settle) && !immediate) {
      baseline_.push(s.loss);
      run_ = 0;
      reported_ = false;
      return;
    }
    if (run_++ == 0) run_start_ = s.step;
    peak_ = run_ == 1 ? ratio : std::max(peak_, ratio);
    if (run_ < (noisy ? std::max(c_.sustain, c_.noisy_sustain) : c_.sustain) && !immediate) return;
    reported_ = true;
    finding f;
    f.question = question::early_anomaly;
    f.symptom = symptoms::loss_spike;
    f.severity = peak_ >= c_.critical_factor || immediate ? severity::critical : severity::warning;
    f.first_step = run_start_;
    f.last_step = s.step;
    f.detector = std::string(name());
    f.evidence = {{"loss", s.loss}, {"baseline_median", median}, {"ratio_to_median", ratio},
                  {"peak_ratio", peak_}, {"observations_above", static_cast<double>(run_)},
                  {"mads_above", noise > 0.0 ? (s.loss - median) / noise : std::numeric_limits<double>::infinity()}};
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window baseline_;
  std::size_t run_ = 0, seen_ = 0, last_excursion_ = 0;
  std::int64_t run_start_ = -1;
  double peak_ = 0.0;
  bool reported_ = false;
};


/// Q2: attention entropy collapse — a recorded attention tensor whose mean normalized row
/// entropy falls below `min_normalized_entropy` (the method's 0.1: rows nearly one-hot).
/// Reports onsets; the location ranks tensors by lowest entropy. Once reported, the collapse
/// lasts until the lowest entropy is back above twice the threshold (halfway to 1 for a
/// threshold above 1/3): an entropy that hovers
/// around the line is one episode, not a delivery each time it crosses (the fault suite's
/// transformer with its attention scores x50, seed 1: 0.046-0.108 for 100 steps after the
/// onset, delivered 7 times reading every fifth row and 3 times reading every row; the
/// sampled mean moves by at most 0.042 with the rotation, and the lowest healthy mean in the
/// zoo is 0.45; docs/detectors.md).
class attention_collapse {
 public:
  struct config {
    double min_normalized_entropy = 0.1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_normalized_entropy", &config::min_normalized_entropy}};
    }
  };
  attention_collapse() : attention_collapse(config{}) {}
  explicit attention_collapse(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"attention_collapse", question::early_anomaly, {symptoms::attention_entropy_collapse}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double lowest = 1.0;
    for (const auto& a : o.now.attention)
      if (a.stats.rows > 0) lowest = a.stats.normalized_mean() < lowest ? a.stats.normalized_mean() : lowest;
    // The release line: twice the threshold, or halfway to 1 for thresholds above 1/3 (a
    // normalized entropy never exceeds 1).
    // fired_ is active while a reported collapse lasts.
    const double line = c_.min_normalized_entropy;
    if (!fired_.rise(fired_.active() ? lowest < line + std::min(line, 0.5 * (1.0 - line)) : lowest < line)) return;
    finding f = make_finding(question::early_anomaly, symptoms::attention_entropy_collapse, severity::warning, o.now.step,
                             name(), {{"lowest_normalized_entropy", lowest}, {"threshold", c_.min_normalized_entropy}});
    for (const auto& a : o.now.attention)
      if (a.stats.rows > 0 && a.stats.normalized_mean() < c_.min_normalized_entropy)
        f.where.emplace_back(std::string(o.names[a.id]), a.stats.normalized_mean());
    std::sort(f.where.begin(), f.where.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    out.push_back(std::move(f));
  }

 private:
  config c_;
  edge fired_;
};

/// Q2: mixture-of-experts imbalance, three ways, each held for some steps in a row (a small
/// batch routed top-1 swings for a step or two in healthy runs — the examples' transformer,
/// 256 tokens over 4 experts — while a collapsed router stays collapsed):
/// - a **collapse**: normalized load entropy below `min_normalized_entropy` (0.5, the method's
///   threshold) for `sustain` (10) steps: a warning;
/// - **dead experts** (zero load) for `dead_sustain` (50) steps: a warning. Not 10: the zoo's
///   healthy MoEs had one or two experts empty for tens of steps after the warm-up and
///   revived them (4 of 50 held-out zoo runs warned at entropy 0.68-0.79); an expert
///   empty for as long as the warm-up lasted is not coming back on its own;
/// - a busiest expert above `max_over_mean` (2.0: tokens beyond a capacity factor of 2 are
///   dropped in Switch-style routing) for `sustain` steps: info, since the monitor is not told
///   whether the layer drops tokens at all.
/// The dead-expert and busiest-expert rules need `min_load_per_expert` (16) tokens an expert
/// on average; the entropy rule always applies. Not during the first `warmup` (50)
/// observations of the router: a freshly initialized router is imbalanced (its random
/// projection favours some experts) until the load-balancing loss and the learning rate,
/// often still warming up, have had steps to act — 9 of the zoo's 50 healthy MoE runs were
/// warned about at step 9 for exactly that. Reports onsets; the evidence `rule` says which
/// decided (1 collapse, 2 dead experts, 3 busiest expert).
class expert_imbalance {
 public:
  struct config {
    double min_normalized_entropy = 0.5;
    double max_over_mean = 2.0;
    std::size_t sustain = 10;
    double min_load_per_expert = 16.0;
    std::size_t warmup = 50;
    std::size_t dead_sustain = 50;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_normalized_entropy", &config::min_normalized_entropy},
          field<config>{"max_over_mean", &config::max_over_mean},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_load_per_expert", &config::min_load_per_expert},
          field<config>{"warmup", &config::warmup},
          field<config>{"dead_sustain", &config::dead_sustain}};
    }
  };
  expert_imbalance() : expert_imbalance(config{}) {}
  explicit expert_imbalance(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"expert_imbalance", question::early_anomaly, {symptoms::expert_load_imbalance}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.routers.empty() && seen_ < c_.warmup) {
      ++seen_;
      return;
    }
    const router_evidence *collapsed = nullptr, *dead = nullptr, *busy = nullptr;
    for (const auto& r : o.now.routers) {
      if (r.experts < 2) continue;
      // With few tokens a step, an empty expert or a busiest one at 2x the mean is chance: 16
      // tokens over 8 balanced experts leave some expert empty in 63% of steps.
      const bool enough = !(r.total_load > 0.0) || r.total_load / static_cast<double>(r.experts) >= c_.min_load_per_expert;
      if (r.normalized_entropy < c_.min_normalized_entropy && (collapsed == nullptr || r.normalized_entropy < collapsed->normalized_entropy))
        collapsed = &r;
      if (enough && r.dead > 0 && (dead == nullptr || r.dead > dead->dead)) dead = &r;
      if (enough && r.max_over_mean > c_.max_over_mean && (busy == nullptr || r.max_over_mean > busy->max_over_mean)) busy = &r;
    }
    collapsed_.observe(collapsed != nullptr, c_.sustain);
    dead_.observe(dead != nullptr, c_.dead_sustain);
    busy_.observe(busy != nullptr, c_.sustain);
    const bool warn_collapse = collapsed_.run() >= c_.sustain, warn_dead = dead_.run() >= std::max<std::size_t>(c_.dead_sustain, 1);
    const bool warn = warn_collapse || warn_dead;
    const bool note = !warn && busy_.run() >= c_.sustain;
    const bool new_warning = warned_.rise(warn), new_note = noted_.rise(note);
    if (!new_warning && !new_note) return;
    const router_evidence* worst = warn_collapse ? collapsed : warn_dead ? dead : busy;
    const std::size_t held = warn_collapse ? collapsed_.run() : warn_dead ? dead_.run() : busy_.run();
    finding f = make_finding(question::early_anomaly, symptoms::expert_load_imbalance, new_warning ? severity::warning : severity::info,
                             o.now.step, name(),
                             {{"normalized_entropy", worst->normalized_entropy},
                              {"dead_experts", static_cast<double>(worst->dead)},
                              {"max_over_mean", worst->max_over_mean}, {"experts", static_cast<double>(worst->experts)},
                              {"rule", warn_collapse ? 1.0 : warn_dead ? 2.0 : 3.0},
                              {"steps_held", static_cast<double>(held)}});
    f.first_step = o.now.step - static_cast<std::int64_t>(held) + 1;
    f.where.emplace_back(std::string(o.names[worst->id]), worst->normalized_entropy);
    for (const auto& r : o.now.routers)
      if (&r != worst && r.experts >= 2 && r.normalized_entropy < c_.min_normalized_entropy)
        f.where.emplace_back(std::string(o.names[r.id]), r.normalized_entropy);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  onset collapsed_, dead_, busy_;  // the runs of each rule (their lengths set the severity)
  edge warned_, noted_;
};

/// Q2: residual write ratio ||block output|| / ||residual input|| above `max_ratio` for
/// `sustain` steps in a row. The method's line is 1.0 (a block writes more than the stream
/// carries); the default is 2.0 because small healthy models sit at 1: the examples'
/// 4-block transformer (d = 64, AdamW 1e-3) holds 1.0-1.16 in its middle blocks for tens of
/// steps, while a residual branch scaled 10x reaches about 10 (docs/accuracy.md); pass 1.0
/// for the method's strict line. A block is its role::residual_input and role::block_output
/// recorded under one name.
/// The first `skip_first` blocks in recording order (1) are not judged: the first block reads
/// the bare token embedding, and rewriting it is its known job (GPT-2's first MLP acts as an
/// extended embedding), so its ratio above 1 is healthy (the examples' transformer: 1.7 by
/// step 22 while it was calibrated with a 0.02-scale embedding, 1.08 at step 40 as shipped).
class residual_write_ratio {
 public:
  struct config {
    double max_ratio = 2.0;
    std::size_t sustain = 5;
    std::size_t skip_first = 1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_ratio", &config::max_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"skip_first", &config::skip_first}};
    }
  };
  residual_write_ratio() : residual_write_ratio(config{}) {}
  explicit residual_write_ratio(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"residual_write_ratio", question::early_anomaly, {symptoms::residual_write_ratio_too_large}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (inputs_.size() < o.names.size()) inputs_.resize(o.names.size());  // new names only
    for (const auto& in : o.now.residual_inputs) inputs_[in.id] = in.stats.l2_norm();
    double worst = 0.0;
    std::uint32_t worst_id = 0;
    for (std::size_t i = c_.skip_first; i < o.now.block_outputs.size(); ++i) {
      const auto& b = o.now.block_outputs[i];
      const double in = inputs_[b.id];
      if (!(in > 0.0)) continue;
      const double r = b.stats.l2_norm() / in;
      if (r > worst) {
        worst = r;
        worst_id = b.id;
      }
    }
    if (fired_.observe(worst > c_.max_ratio, c_.sustain)) {
      finding f = make_finding(question::early_anomaly, symptoms::residual_write_ratio_too_large, severity::warning, o.now.step,
                               name(), {{"write_ratio", worst}, {"max_ratio", c_.max_ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(std::string(o.names[worst_id]), worst);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  std::vector<double> inputs_;
  edge fired_;
};

/// Q2: embedding norms growing without bound — for parameters whose name contains `tag`
/// ("embed"), the norm over the last `window` recorded steps rises with a t-statistic above
/// `min_t` and by more than `min_growth` (50%) across the window, and keeps its pace: its rise
/// over the window's last quarter is at least `min_pace_kept` (0.5) of its largest rise over a
/// quarter of the window. Reports onsets per tensor.
///
/// Why the pace: a tensor initialized small grows to the scale training gives it, and then
/// settles. word2vec's input vectors start at +-0.5/d and grow 15-100x in 200 steps while the
/// loss falls 4.16 -> 2.6, their last quarter adding 0-46% of their fastest quarter's rise
/// (the zoo's round 5: 27 of 27 healthy runs warned without this line). Growth without bound
/// keeps its pace: linear growth keeps all of it, exponential more, an Adam random walk at
/// 100x the learning rate (the examples' `embedding_lr_100x`) about 0.7. A tensor taking off
/// from a small initialization still has its pace (its loss leaving a plateau as it grows);
/// docs/limits.md.
class embedding_growth {
 public:
  struct config {
    std::string tag = "embed";
    std::size_t window = 200;
    double min_growth = 0.5;
    double min_t = 5.0;
    double min_pace_kept = 0.5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_growth", &config::min_growth},
          field<config>{"min_t", &config::min_t},
          field<config>{"min_pace_kept", &config::min_pace_kept}};
    }
  };
  embedding_growth() : embedding_growth(config{}) {}
  explicit embedding_growth(config c) : c_(std::move(c)), embedding_(c_.tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"embedding_growth", question::early_anomaly, {symptoms::embedding_norm_growing}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    for (const auto& p : o.now.parameters) {
      if (!embedding_(o.names, p.id)) continue;
      auto it = std::find_if(series_.begin(), series_.end(), [&](const auto& s) { return s.id == p.id; });
      if (it == series_.end()) it = series_.insert(series_.end(), {p.id, signals::window(c_.window), edge{}});  // once per tensor
      it->norms.push(p.stats.l2_norm());
      if (!it->norms.full()) continue;
      const auto t = signals::slope(it->norms);
      const double growth = it->norms.back() / it->norms[0] - 1.0;
      const double pace = pace_kept(it->norms);
      if (it->fired.rise(t.t_stat > c_.min_t && growth > c_.min_growth && pace >= c_.min_pace_kept)) {
        finding f = make_finding(question::early_anomaly, symptoms::embedding_norm_growing, severity::warning, o.now.step,
                                 name(), {{"growth_over_window", growth}, {"trend_t_stat", t.t_stat}, {"norm", it->norms.back()},
                                          {"pace_kept", pace}});
        f.where.emplace_back("param/" + std::string(o.names[p.id]), growth);
        out.push_back(std::move(f));
      }
    }
  }

 private:
  /// The rise over the window's last quarter as a fraction of its largest rise over a quarter
  /// (1 where no quarter rose).
  [[nodiscard]] static double pace_kept(const signals::window& w) {
    const std::size_t q = w.size() / 4;
    if (q == 0) return 1.0;
    double largest = 0.0, last = 0.0;
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t end = k == 3 ? w.size() - 1 : (k + 1) * q;
      last = w[end] - w[k * q];
      largest = std::max(largest, last);
    }
    return largest > 0.0 ? last / largest : 1.0;
  }

  struct series {
    std::uint32_t id;
    signals::window norms;
    edge fired;
  };
  config c_;
  name_tag embedding_;
  std::vector<series> series_;
};

/// Q2: parameter drift from initialization — a tensor's relative drift
/// ||theta - theta0|| / ||theta0|| (from a drift_tracker, evidence/drift.hpp) above
/// `max_relative_drift` (1.0: it has moved as far as its own initial norm). A heuristic
/// default, not calibrated on real runs yet. Reports onsets per tensor.
class parameter_drift {
 public:
  struct config {
    double max_relative_drift = 1.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_relative_drift", &config::max_relative_drift}};
    }
  };
  parameter_drift() : parameter_drift(config{}) {}
  explicit parameter_drift(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"parameter_drift", question::early_anomaly, {symptoms::parameter_drift}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (fired_.size() < o.names.size()) fired_.resize(o.names.size());  // new names only
    for (const auto& [id, drift] : o.now.drift) {
      if (fired_[id].rise(drift > c_.max_relative_drift)) {
        finding f = make_finding(question::early_anomaly, symptoms::parameter_drift, severity::warning,
                                 o.now.step, name(), {{"relative_drift", drift}, {"threshold", c_.max_relative_drift}});
        f.where.emplace_back("param/" + std::string(o.names[id]), drift);
        out.push_back(std::move(f));
      }
    }
  }

 private:
  config c_;
  std::vector<edge> fired_;
};

}  // namespace mldiag::detectors
