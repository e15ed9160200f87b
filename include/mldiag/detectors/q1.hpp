// SPDX-License-Identifier: Apache-2.0
/// Q1 detectors: why isn't it converging. docs/detectors.md gives each one's defaults and sources.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::detectors {

/// Q1: NaN or Inf in the loss, or in a gradient, activation or parameter tensor. The
/// location is the first tensor, in recording (layer) order, that holds one; the others
/// follow by count. Critical. No parameters; stateless.
class non_finite {
 public:
  [[nodiscard]] std::string_view name() const { return "non_finite"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool bad_loss = s.has_loss && !std::isfinite(s.loss);
    std::uint64_t tensors = 0, nan = 0, inf = 0;
    for (role r : {role::gradient, role::activation, role::parameter}) {
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() == 0) continue;
        ++tensors;
        nan += t.stats.nan;
        inf += t.stats.pos_inf + t.stats.neg_inf;
      }
    }
    if (!bad_loss && tensors == 0 && !std::isinf(s.grad_norm)) return;
    finding f;
    f.question = question::convergence;
    f.symptom = bad_loss ? "non-finite loss" : "non-finite values in tensors";
    f.severity = severity::critical;
    f.first_step = f.last_step = s.step;
    f.detector = std::string(name());
    for (role r : {role::gradient, role::activation, role::parameter}) {
      const char* prefix = r == role::gradient ? "grad/" : r == role::activation ? "act/" : "param/";
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() > 0) {
          f.where.emplace_back(prefix + std::string(o.names[t.id]), static_cast<double>(t.stats.non_finite()));
        }
      }
    }
    // The first in layer order stays first; the rest by count.
    if (f.where.size() > 2) {
      std::stable_sort(f.where.begin() + 1, f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    }
    if (bad_loss) f.evidence.emplace_back("loss", s.loss);
    if (std::isinf(s.grad_norm)) f.evidence.emplace_back("grad_norm", s.grad_norm);
    f.evidence.emplace_back("tensors_with_non_finite", static_cast<double>(tensors));
    f.evidence.emplace_back("nan", static_cast<double>(nan));
    f.evidence.emplace_back("inf", static_cast<double>(inf));
    out.push_back(std::move(f));
  }
};

/// Q1: the global gradient norm jumps far above its robust running baseline (the median of
/// the last `window` norms that did not fire). Warning at `warn_ratio`, critical at
/// `critical_ratio`. Defaults: window 100, min_history 1, warn_ratio 10, critical_ratio 100 —
/// healthy llm.c GPT-2 jumps reach 7.6x and recover (../shared/data/real-runs/README.md);
/// BLOOM-176B's explosion goes 0.24 -> 15.9 (66x) -> 960 (4000x).
class exploding_gradients {
 public:
  struct config {
    std::size_t window = 100;
    std::size_t min_history = 1;
    double warn_ratio = 10.0;
    double critical_ratio = 100.0;
  };
  exploding_gradients() : exploding_gradients(config{}) {}
  explicit exploding_gradients(config c) : c_(c), baseline_(c.window) {
    if (c.warn_ratio <= 1.0 || c.critical_ratio < c.warn_ratio) {
      throw error("exploding_gradients: need 1 < warn_ratio <= critical_ratio");
    }
  }
  [[nodiscard]] std::string_view name() const { return "exploding_gradients"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const double norm = o.now.global_grad_norm();
    if (!std::isfinite(norm)) return;  // non_finite's business
    if (baseline_.size() < c_.min_history) {
      baseline_.push(norm);
      return;
    }
    const double median = baseline_.median();
    const double ratio = median > 0.0 ? norm / median : 0.0;
    if (ratio < c_.warn_ratio) {
      baseline_.push(norm);
      return;
    }
    finding f;
    f.question = question::convergence;
    f.symptom = "exploding gradients";
    f.severity = ratio >= c_.critical_ratio ? severity::critical : severity::warning;
    f.first_step = f.last_step = o.now.step;
    f.detector = std::string(name());
    f.evidence = {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio}};
    for (const auto& g : o.now.gradients) f.where.emplace_back("grad/" + std::string(o.names[g.id]), g.stats.l2_norm());
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (f.where.size() > 5) f.where.resize(5);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window baseline_;
};

/// Q1: divergence signs other than a spike: a loss value that goes missing after losses were
/// logged (critical); a loss that rose by at least `min_step_rise` on each of the last
/// `rise_steps` observations, by `rise_fraction` and by `min_rise` nats (0.25, as loss_spike's)
/// in all, with each of them at least `elevated` above the median of the losses before the
/// climb (warning; BigScience 104B experiment 2 climbed 6.37 -> 10.24 at the
/// end of warm-up, while healthy runs' outliers recover on the next step); and an fp16 loss scale that halves `halvings` times within the
/// last `window` observations (warning; 104B embed-norm experiment 7 halved 1048576 -> 32768
/// over six iterations before its loss went NaN).
class divergence {
 public:
  struct config {
    std::size_t halvings = 3;
    std::size_t window = 10;
    std::size_t rise_steps = 3;
    double rise_fraction = 0.3;
    double min_rise = 0.25;  // absolute (nats), as loss_spike's: near-zero losses climb by large ratios harmlessly
    double elevated = 0.1;
    double min_step_rise = 0.02;
    std::size_t baseline_window = 50;
  };
  divergence() : divergence(config{}) {}
  explicit divergence(config c)
      : c_(c), scales_(c.window + 1), losses_(c.rise_steps + 1), baseline_(c.baseline_window) {}
  [[nodiscard]] std::string_view name() const { return "divergence"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.has_loss) seen_loss_ = true;
    if (!s.has_loss && seen_loss_) {
      out.push_back(make(o, "missing loss value", severity::critical, {{"steps_with_loss_before", 1.0}}));
      return;
    }
    if (s.has_loss && std::isfinite(s.loss)) {
      if (losses_.full()) baseline_.push(losses_[0]);  // what leaves the recent run joins the baseline
      losses_.push(s.loss);
      if (losses_.full() && !baseline_.empty()) {
        const double base = baseline_.median();
        bool climbing = true;
        for (std::size_t i = 1; climbing && i < losses_.size(); ++i) {
          climbing = losses_[i] >= (1.0 + c_.min_step_rise) * losses_[i - 1] &&
                     losses_[i] >= (1.0 + c_.elevated) * base;
        }
        const double rise = losses_.back() / losses_[0] - 1.0;
        if (climbing && rise >= c_.rise_fraction && losses_.back() - losses_[0] >= c_.min_rise) {
          out.push_back(make(o, "sustained loss increase", severity::warning,
                             {{"rise_fraction", rise}, {"baseline_median", base}, {"loss", s.loss}}));
        }
      }
    }
    if (!s.has_loss_scale || !std::isfinite(s.loss_scale)) return;
    scales_.push(s.loss_scale);
    std::size_t halved = 0;
    for (std::size_t i = 1; i < scales_.size(); ++i) halved += scales_[i] < scales_[i - 1] ? 1u : 0u;
    if (halved >= c_.halvings) {
      out.push_back(make(o, "loss scale halving step after step", severity::warning,
                         {{"halvings_in_window", static_cast<double>(halved)}, {"loss_scale", s.loss_scale},
                          {"loss_scale_window_start", scales_[0]}}));
    }
  }

 private:
  finding make(const observation& o, std::string symptom, severity level,
               std::vector<std::pair<std::string, double>> evidence) const {
    finding f;
    f.question = question::convergence;
    f.symptom = std::move(symptom);
    f.severity = level;
    f.first_step = f.last_step = o.now.step;
    f.evidence = std::move(evidence);
    f.detector = std::string(name());
    return f;
  }

  config c_;
  signals::window scales_, losses_, baseline_;
  bool seen_loss_ = false;
};


/// Q1: a learning rate that cannot work: not finite or negative (critical), zero for
/// `zero_steps` steps in a row before it was ever positive (warning; schedules may start at
/// exactly 0 for a step or two, and llm.c's decays to exactly 0 at the end, which is info), or
/// above `max_lr` (warning; 1.0 is already far above Adam's usual 1e-4..1e-2 and SGD's
/// 0.01..0.5), or that changes by more than `max_jump` (10x) from one step to the next
/// (warning; schedules move smoothly). Reports onsets.
class lr_sanity {
 public:
  struct config {
    std::size_t zero_steps = 10;
    double max_lr = 1.0;
    double max_jump = 10.0;  ///< a change by more than this factor in one step (either way)
  };
  lr_sanity() : lr_sanity(config{}) {}
  explicit lr_sanity(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "lr_sanity"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_lr) return;
    const double lr = o.now.lr;
    zero_run_ = lr == 0.0 ? zero_run_ + 1 : 0;
    const bool was_positive = seen_positive_;
    seen_positive_ = seen_positive_ || lr > 0.0;
    if (invalid_.rise(!std::isfinite(lr) || lr < 0.0)) {
      out.push_back(make_finding(question::convergence, "learning rate not finite or negative", severity::critical,
                                 o.now.step, name(), {{"lr", lr}}));
    }
    if (zero_.rise(zero_run_ >= c_.zero_steps)) {
      out.push_back(make_finding(question::convergence, was_positive ? "learning rate reached zero" : "learning rate is zero",
                                 was_positive ? severity::info : severity::warning, o.now.step, name(),
                                 {{"lr", lr}, {"steps_at_zero", static_cast<double>(zero_run_)}}));
    }
    if (large_.rise(std::isfinite(lr) && lr > c_.max_lr)) {
      out.push_back(make_finding(question::convergence, "learning rate absurdly large", severity::warning, o.now.step,
                                 name(), {{"lr", lr}, {"max_lr", c_.max_lr}}));
    }
    // A schedule moves smoothly (warm-up, decay); a jump by 10x in one step is a bug — a
    // scheduler restored with the wrong state on resume, a group given the wrong factor.
    const bool jumped = previous_ > 0.0 && lr > 0.0 && std::isfinite(lr) &&
                        (lr > c_.max_jump * previous_ || previous_ > c_.max_jump * lr);
    if (jump_.rise(jumped)) {
      out.push_back(make_finding(question::convergence, "learning rate jumped", severity::warning, o.now.step, name(),
                                 {{"lr", lr}, {"previous_lr", previous_}, {"factor", lr / previous_}}));
    }
    previous_ = std::isfinite(lr) ? lr : previous_;
  }

 private:
  config c_;
  std::size_t zero_run_ = 0;
  bool seen_positive_ = false;
  double previous_ = 0.0;
  edge invalid_, zero_, large_, jump_;
};

/// Q1: the first recorded loss of a cross-entropy classifier far from ln(classes), the loss of
/// a uniform guess (wrong loss function, labels or initialization scale). Off unless
/// `classes` > 1. Warning when |loss - ln C| > `tolerance` * ln C (default 0.25; llm.c
/// GPT-2 starts at 11.009 against ln 50257 = 10.825, 1.7% off).
class initial_loss {
 public:
  struct config {
    double classes = 0;
    double tolerance = 0.25;
  };
  initial_loss() : initial_loss(config{}) {}
  explicit initial_loss(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "initial_loss"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (done_ || c_.classes <= 1.0 || !o.now.has_loss || !std::isfinite(o.now.loss)) return;
    done_ = true;
    const double expected = std::log(c_.classes);
    const double off = std::fabs(o.now.loss - expected) / expected;
    if (off > c_.tolerance) {
      out.push_back(make_finding(question::convergence, "initial loss far from ln(classes)", severity::warning,
                                 o.now.step, name(),
                                 {{"loss", o.now.loss}, {"ln_classes", expected}, {"relative_difference", off}}));
    }
  }

 private:
  config c_;
  bool done_ = false;
};

/// Q1: the loss of a cross-entropy classifier still at chance level, ln(classes), after
/// `warmup` steps: the mean of the last `window` losses above (1 - `tolerance`) ln C. Nothing
/// is being learned — labels that do not match the inputs (shuffled, misaligned, read from
/// the wrong column), a dead network, a learning rate of zero. Off unless `classes` > 1.
/// Defaults: warmup 50, window 20, tolerance 0.1 (a trainable model leaves chance within tens
/// of steps: the examples' MLP is at 0.3 of ln 10 by step 50, the transformer at 0.7 of ln V).
class chance_level {
 public:
  struct config {
    double classes = 0;
    std::size_t warmup = 50;
    std::size_t window = 20;
    double tolerance = 0.1;
  };
  chance_level() : chance_level(config{}) {}
  explicit chance_level(config c) : c_(c), recent_(c.window == 0 ? 1 : c.window) {}
  [[nodiscard]] std::string_view name() const { return "chance_level"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (c_.classes <= 1.0 || !o.now.has_loss || !std::isfinite(o.now.loss)) return;
    recent_.push(o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double chance = std::log(c_.classes), mean = recent_.mean();
    if (fired_.rise(mean > (1.0 - c_.tolerance) * chance)) {
      out.push_back(make_finding(question::convergence, "loss stuck at chance level", severity::warning, o.now.step,
                                 name(), {{"recent_mean", mean}, {"ln_classes", chance}, {"fraction_of_chance", mean / chance}}));
    }
  }

 private:
  config c_;
  signals::window recent_;
  std::size_t seen_ = 0;
  edge fired_;
};

/// Q1: vanishing gradients — the RMS of all gradient elements below `min_rms` (default 1e-9),
/// or the first recorded (input-side) gradient's RMS below `layer_ratio` (default 1e-3) times
/// the last one's, for `sustain` steps in a row. Recording order is taken as layer order.
class vanishing_gradients {
 public:
  struct config {
    double min_rms = 1e-9;
    double layer_ratio = 1e-3;
    std::size_t sustain = 5;
  };
  vanishing_gradients() : vanishing_gradients(config{}) {}
  explicit vanishing_gradients(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "vanishing_gradients"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& g = o.now.gradients;
    if (g.empty()) return;
    tensor_stats all;
    for (const auto& t : g) all.merge(t.stats);
    const double rms = all.rms();
    const double first = g.front().stats.rms(), last = g.back().stats.rms();
    const double ratio = last > 0.0 ? first / last : 1.0;
    const bool vanishing = all.finite() > 0 && (rms < c_.min_rms || (g.size() > 1 && ratio < c_.layer_ratio));
    run_ = vanishing ? run_ + 1 : 0;
    if (fired_.rise(run_ >= c_.sustain)) {
      finding f = make_finding(question::convergence, "vanishing gradients", severity::warning, o.now.step, name(),
                               {{"grad_rms", rms}, {"first_to_last_layer_rms_ratio", ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("grad/" + std::string(o.names[g.front().id]), first);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  std::size_t run_ = 0;
  edge fired_;
};

/// Q1: the loss has not come down since the start (mean of the last `window` losses within
/// `min_improvement` of the mean of the first `start_window`, and no significant downward trend)
/// after `warmup` steps, while gradients are finite and non-zero: learning rate too low,
/// wrong loss, frozen model. Defaults: warmup 200, window 100, min_improvement 0.05.
class loss_not_decreasing {
 public:
  struct config {
    std::size_t warmup = 200;
    std::size_t window = 100;
    double min_improvement = 0.05;
    double t_critical = 2.0;
    std::size_t start_window = 10;  // the first losses: a run that converges fast is not flat
  };
  loss_not_decreasing() : loss_not_decreasing(config{}) {}
  explicit loss_not_decreasing(config c) : c_(c), first_(c.start_window), recent_(c.window) {}
  [[nodiscard]] std::string_view name() const { return "loss_not_decreasing"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    if (!first_.full()) first_.push(o.now.loss);
    recent_.push(o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double start = first_.mean(), now = recent_.mean();
    const double improvement = (start - now) / std::fabs(start);
    const auto t = signals::slope(recent_);
    const double g = o.now.global_grad_norm();
    const bool gradients_normal = std::isnan(g) || (std::isfinite(g) && g > 0.0);
    if (fired_.rise(improvement < c_.min_improvement && !(t.t_stat < -c_.t_critical) && gradients_normal)) {
      out.push_back(make_finding(question::convergence, "loss not decreasing", severity::warning, o.now.step, name(),
                                 {{"initial_mean", start}, {"recent_mean", now}, {"improvement", improvement},
                                  {"trend_t_stat", t.t_stat}}));
    }
  }

 private:
  config c_;
  signals::window first_, recent_;
  std::size_t seen_ = 0;
  edge fired_;
};

/// Q1: the loss decreased (by more than `min_improvement` since the start) and then stalled:
/// no significant trend over the last `window` losses and less than `stall_change` relative
/// change across them. Info, not a warning: the end of a cool-down plateaus too (GPT-2 medium's
/// last six evaluations sit within 0.0001). Once reported it stays reported until the loss
/// shows a significant decrease again (no flicker on noisy runs).
class plateau {
 public:
  struct config {
    std::size_t window = 500;
    double min_improvement = 0.05;
    double stall_change = 0.005;
    double t_critical = 2.0;
  };
  plateau() : plateau(config{}) {}
  explicit plateau(config c) : c_(c), first_(c.window < 100 ? c.window : 100), recent_(c.window) {}
  [[nodiscard]] std::string_view name() const { return "plateau"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    if (!first_.full()) first_.push(o.now.loss);
    recent_.push(o.now.loss);
    if (!recent_.full() || !first_.full()) return;
    const double start = first_.mean(), now = recent_.mean();
    const auto t = signals::slope(recent_);
    const double change = std::fabs(t.slope * static_cast<double>(recent_.size())) / std::fabs(now);
    const bool stalled = (start - now) / std::fabs(start) > c_.min_improvement && std::fabs(t.t_stat) < c_.t_critical &&
                         change < c_.stall_change;
    if (active_) {
      active_ = !(t.t_stat < -c_.t_critical);  // re-armed by a significant decrease
      return;
    }
    if (stalled) {
      active_ = true;
      out.push_back(make_finding(question::convergence, "plateau", severity::info, o.now.step, name(),
                                 {{"recent_mean", now}, {"initial_mean", start}, {"relative_change_over_window", change}}));
    }
  }

 private:
  config c_;
  signals::window first_, recent_;
  bool active_ = false;
};

/// Q1: oscillation — the loss swings up and down around its trend with large amplitude:
/// over `window` losses, the sign-change rate of the differences above `min_sign_changes`
/// (white noise gives 2/3, with a standard error near 0.05 over 100 points: 0.85 is four of
/// them above) and the robust spread of the residuals around the least-squares line (MAD)
/// above `min_spread` of the median loss (healthy per-step noise is a few percent; the
/// 1.5B run's single-batch outliers do not move a MAD). Learning rate too high.
class oscillation {
 public:
  struct config {
    std::size_t window = 100;
    double min_sign_changes = 0.85;
    double min_spread = 0.1;
  };
  oscillation() : oscillation(config{}) {}
  explicit oscillation(config c) : c_(c), losses_(c.window), residuals_(c.window) {}
  [[nodiscard]] std::string_view name() const { return "oscillation"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    losses_.push(o.now.loss);
    if (!losses_.full()) return;
    const auto t = signals::slope(losses_);
    residuals_.clear();
    for (std::size_t i = 0; i < losses_.size(); ++i) {
      residuals_.push(losses_[i] - (t.intercept + t.slope * static_cast<double>(i)));
    }
    const double spread = residuals_.mad() / std::fabs(losses_.median());
    const double changes = signals::sign_change_rate(losses_);
    if (fired_.rise(changes > c_.min_sign_changes && spread > c_.min_spread)) {
      out.push_back(make_finding(question::convergence, "loss oscillation", severity::warning, o.now.step, name(),
                                 {{"sign_change_rate", changes}, {"relative_spread", spread}}));
    }
  }

 private:
  config c_;
  signals::window losses_, residuals_;
  edge fired_;
};

/// Q1: dead activations — an activation tensor whose fraction of exact zeros exceeds
/// `max_zero_fraction` (default 0.99: dead ReLUs). Not lower: healthy ReLU feed-forward layers
/// of transformers are sparse — about 97% zeros in trained T5 ("The Lazy Neuron Phenomenon",
/// Li et al. 2022), and 95-97% in the examples' transformer after 200 steps while it was being
/// calibrated (AdamW 3e-3). Critical when a
/// tensor is entirely zero (nothing passes through it). Reports onsets;
/// the location ranks the tensors by zero fraction.
class dead_activations {
 public:
  struct config {
    double max_zero_fraction = 0.99;
  };
  dead_activations() : dead_activations(config{}) {}
  explicit dead_activations(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "dead_activations"; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0;
    for (const auto& a : o.now.activations) {
      if (a.stats.count == 0) continue;
      const double z = static_cast<double>(a.stats.zeros) / static_cast<double>(a.stats.count);
      worst = z > worst ? z : worst;
    }
    if (!fired_.rise(worst > c_.max_zero_fraction)) return;
    // A tensor with no non-zero value at all is a layer that passes nothing on: critical.
    finding f = make_finding(question::convergence, "dead activations", worst >= 1.0 ? severity::critical : severity::warning,
                             o.now.step, name(), {{"max_zero_fraction", worst}});
    for (const auto& a : o.now.activations) {
      const double z = a.stats.count ? static_cast<double>(a.stats.zeros) / static_cast<double>(a.stats.count) : 0.0;
      if (z > c_.max_zero_fraction) f.where.emplace_back("act/" + std::string(o.names[a.id]), z);
    }
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(f));
  }

 private:
  config c_;
  edge fired_;
};

/// Q1: saturated tanh or sigmoid outputs, bounded from the statistics alone. For a tensor
/// whose name contains `tanh_tag` and whose values lie in [-1, 1], at least
/// (E[x^2] - 0.81) / 0.19 of it has |x| > 0.9; for one whose name contains `sigmoid_tag` and
/// whose values lie in [0, 1], at least 1 - E[x(1 - x)] / 0.09 of it lies outside [0.1, 0.9].
/// Warning when that lower bound exceeds `min_saturated` (0.5).
class saturation {
 public:
  struct config {
    std::string tanh_tag = "tanh";
    std::string sigmoid_tag = "sigmoid";
    double min_saturated = 0.5;
  };
  saturation() : saturation(config{}) {}
  explicit saturation(config c) : c_(std::move(c)) {}
  [[nodiscard]] std::string_view name() const { return "saturation"; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0;
    std::uint32_t worst_id = 0;
    for (const auto& a : o.now.activations) {
      const double bound = saturated_bound(o.names[a.id], a.stats);
      if (bound > worst) {
        worst = bound;
        worst_id = a.id;
      }
    }
    if (!fired_.rise(worst > c_.min_saturated)) return;
    finding f = make_finding(question::convergence, "saturated activations", severity::warning, o.now.step, name(),
                             {{"saturated_fraction_at_least", worst}});
    f.where.emplace_back("act/" + std::string(o.names[worst_id]), worst);
    out.push_back(std::move(f));
  }

 private:
  double saturated_bound(std::string_view tensor_name, const tensor_stats& s) const {
    if (s.finite() == 0) return 0.0;
    const double mean = s.mean(), second = s.variance() + mean * mean;  // E[x^2]
    if (tensor_name.find(c_.tanh_tag) != std::string_view::npos && s.min >= -1.0 && s.max <= 1.0) {
      return (second - 0.81) / 0.19;
    }
    if (tensor_name.find(c_.sigmoid_tag) != std::string_view::npos && s.min >= 0.0 && s.max <= 1.0) {
      return 1.0 - (mean - second) / 0.09;
    }
    return 0.0;
  }
  config c_;
  edge fired_;
};

/// Q1: parameters that do not change: a parameter tensor whose statistics are bit-identical
/// for `steps` consecutive snapshots while its gradient (same name) is non-zero — frozen by
/// mistake, or an optimizer that does not hold it. Reports onsets per tensor.
class frozen_parameters {
 public:
  struct config {
    std::size_t steps = 3;
  };
  frozen_parameters() : frozen_parameters(config{}) {}
  explicit frozen_parameters(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "frozen_parameters"; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (state_.size() < o.names.size()) state_.resize(o.names.size());  // new names only
    for (auto& st : state_) st.has_gradient = false;
    for (const auto& g : o.now.gradients) state_[g.id].has_gradient = g.stats.max_abs > 0.0;
    for (const auto& p : o.now.parameters) {
      auto& st = state_[p.id];
      const bool same = st.seen && st.last == p.stats;
      st.run = same ? st.run + 1 : 0;
      st.last = p.stats;
      st.seen = true;
      if (st.fired.rise(st.run + 1 >= c_.steps && st.has_gradient)) {
        finding f = make_finding(question::convergence, "frozen parameters", severity::warning, o.now.step, name(),
                                 {{"unchanged_steps", static_cast<double>(st.run + 1)}});
        f.where.emplace_back("param/" + std::string(o.names[p.id]), p.stats.l2_norm());
        out.push_back(std::move(f));
      }
    }
  }

 private:
  struct per_tensor {
    tensor_stats last;
    std::size_t run = 0;
    bool seen = false;
    bool has_gradient = false;
    edge fired;
  };
  config c_;
  std::vector<per_tensor> state_;
};

/// Q1: update ratio ||delta theta|| / ||theta|| out of range for a parameter (its update
/// recorded with role::update under the same name): above `max_ratio` (1) or below
/// `min_ratio` (1e-7) for `sustain` steps. A rule of thumb puts healthy SGD values near 1e-3
/// (Karpathy, CS231n notes), but Adam moves every element by about the learning rate whatever
/// its size, so small-initialized matrices see about 0.1 early in healthy runs (the examples'
/// transformer, residual projections at std 0.02/sqrt(2L): 0.13 at step 10 with AdamW 3e-3,
/// 0.08 at step 20 with its final 1e-3).
/// The upper bound is therefore an update as large as the tensor itself. The rule is about weight matrices: tensors with fewer than `min_elements` (256)
/// elements — biases, norm gains — are skipped, because a bias that starts at zero has a
/// ratio near 1 for its first steps and an output bias keeps a large one (the examples'
/// healthy MLP runs: 0.1-0.25 on 10- and 64-element biases; docs/accuracy.md). Reports onsets.
class update_ratio {
 public:
  struct config {
    double min_ratio = 1e-7;
    double max_ratio = 1.0;
    std::size_t sustain = 5;
    std::size_t min_elements = 256;
  };
  update_ratio() : update_ratio(config{}) {}
  explicit update_ratio(config c) : c_(c) {}
  [[nodiscard]] std::string_view name() const { return "update_ratio"; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0, worst_ratio = 0.0;
    std::uint32_t worst_id = 0;
    bool any = false;
    if (norms_.size() < o.names.size()) norms_.resize(o.names.size());  // new names only
    for (const auto& p : o.now.parameters) norms_[p.id] = p.stats.l2_norm();
    for (const auto& u : o.now.updates) {
      if (u.stats.count < c_.min_elements) continue;
      {
        const auto& p = u;  // the parameter of the same id
        const double norm = norms_[p.id];
        if (!(norm > 0.0)) continue;
        const double r = u.stats.l2_norm() / norm;
        const double badness = r > c_.max_ratio ? r / c_.max_ratio : (r < c_.min_ratio ? c_.min_ratio / (r > 0 ? r : 1e-300) : 0.0);
        if (badness > worst) {
          worst = badness;
          worst_ratio = r;
          worst_id = p.id;
          any = true;
        }
      }
    }
    run_ = any ? run_ + 1 : 0;
    if (fired_.rise(run_ >= c_.sustain)) {
      finding f = make_finding(question::convergence,
                               worst_ratio > c_.max_ratio ? "update ratio too large" : "update ratio too small",
                               severity::warning, o.now.step, name(),
                               {{"update_ratio", worst_ratio}, {"min_ratio", c_.min_ratio}, {"max_ratio", c_.max_ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("param/" + std::string(o.names[worst_id]), worst_ratio);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  std::size_t run_ = 0;
  edge fired_;
  std::vector<double> norms_;  // last parameter norm by id
};


/// Q1: wrong loss — the tensor fed to a cross-entropy loss as logits holds probabilities:
/// every value of an activation whose name contains `tag` ("logits") lies in [0, 1] for
/// `sustain` steps in a row. Real logits of a classifier take both signs within a few steps
/// of initialization; values confined to [0, 1] mean a softmax (or sigmoid) was applied before
/// a loss that applies its own — the classic "softmax twice" bug, which caps what the loss can
/// learn. Reports onsets.
class probabilities_as_logits {
 public:
  struct config {
    std::string tag = "logits";
    std::size_t sustain = 3;
  };
  probabilities_as_logits() : probabilities_as_logits(config{}) {}
  explicit probabilities_as_logits(config c) : c_(std::move(c)) {}
  [[nodiscard]] std::string_view name() const { return "probabilities_as_logits"; }
  void observe(const observation& o, std::vector<finding>& out) {
    const tensor_evidence* hit = nullptr;
    for (const auto& a : o.now.activations) {
      if (o.names[a.id].find(c_.tag) == std::string_view::npos || a.stats.finite() < 2) continue;
      if (a.stats.min >= 0.0 && a.stats.max <= 1.0) hit = &a;
    }
    run_ = hit != nullptr ? run_ + 1 : 0;
    if (fired_.rise(run_ >= c_.sustain)) {
      finding f = make_finding(question::convergence, "loss input looks like probabilities", severity::warning,
                               o.now.step, name(), {{"min", hit->stats.min}, {"max", hit->stats.max}, {"mean", hit->stats.mean()}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("act/" + std::string(o.names[hit->id]), hit->stats.max);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  std::size_t run_ = 0;
  edge fired_;
};

/// A tensor detector (for `per_tensor`): one tensor's L2 norm jumps above `ratio` times the
/// median of its own last `window` norms. `per_tensor(role::gradient, tensor_norm_jump{})`
/// localizes an explosion to the layers where it starts. Reports onsets.
class tensor_norm_jump {
 public:
  struct config {
    std::size_t window = 50;
    double ratio = 10.0;
  };
  tensor_norm_jump() : tensor_norm_jump(config{}) {}
  explicit tensor_norm_jump(config c) : c_(c), norms_(c.window) {}
  [[nodiscard]] std::string_view name() const { return "tensor_norm_jump"; }
  void observe(const observation& o, std::string_view tensor, const tensor_stats& s, std::vector<finding>& out) {
    const double norm = s.l2_norm();
    if (norms_.empty()) {
      norms_.push(norm);
      return;
    }
    const double median = norms_.median();
    const double r = median > 0.0 ? norm / median : 0.0;
    const bool jumped = r >= c_.ratio;
    if (!jumped) norms_.push(norm);
    if (fired_.rise(jumped)) {
      finding f = make_finding(question::convergence, "tensor norm jump", severity::warning, o.now.step, name(),
                               {{"norm", norm}, {"baseline_median", median}, {"ratio_to_median", r}});
      f.where.emplace_back(std::string(tensor), r);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  signals::window norms_;
  edge fired_;
};

}  // namespace mldiag::detectors
