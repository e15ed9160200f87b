// SPDX-License-Identifier: Apache-2.0
/// Convergence detectors (Q1): the loss, the gradients, activations and updates, and the setup (learning rate, first loss, inputs).
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

/// Q1: NaN or Inf in the loss, in a logged gradient norm, or in a gradient, activation or
/// parameter tensor. Critical, except a non-finite gradient norm alone:
/// - with a loss scale lowered at the same step it is an fp16 loss scaler's skipped step
///   (dynamic loss scaling probes its scale by overflowing now and then): info;
/// - with a finite loss and no loss scale it is a warning that says the loss stayed finite (a
///   skipped step, or a NaN averaged into a logging window), and critical once it holds for
///   `sustain` (3) observations in a row.
/// The location is the origin, not the first tensor recorded: a recorded input batch that
/// holds a NaN or Inf (the data, before the model); else the earliest activation in
/// forward (recording) order that holds one; else the gradient that backward computes
/// first, i.e. the last in recording order; else the first parameter. The evidence
/// `origin_rule` says which decided (1 forward activation, 2 backward gradient, 3 parameter,
/// 4 input data).
class non_finite {
 public:
  struct config {
    std::size_t sustain = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain}};
    }
  };
  non_finite() : non_finite(config{}) {}
  explicit non_finite(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"non_finite", question::convergence, {symptoms::non_finite_loss, symptoms::non_finite_tensors, symptoms::skipped_step_overflow, symptoms::non_finite_grad_norm}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool bad_loss = s.has_loss && !std::isfinite(s.loss);
    const bool bad_norm = s.has_grad_norm && !std::isfinite(s.grad_norm);
    const bool scale_lowered = s.has_loss_scale && std::isfinite(s.loss_scale) && last_scale_ > 0.0 && s.loss_scale < last_scale_;
    if (s.has_loss_scale && std::isfinite(s.loss_scale)) last_scale_ = s.loss_scale;
    std::uint64_t tensors = 0, nan = 0, inf = 0;
    for (role r : {role::input, role::activation, role::gradient, role::parameter}) {
      for (const auto& t : s.of(r)) {
        if (t.stats.non_finite() == 0) continue;
        ++tensors;
        nan += t.stats.nan;
        inf += t.stats.pos_inf + t.stats.neg_inf;
      }
    }
    norm_run_.observe(bad_norm, c_.sustain);
    if (!bad_loss && tensors == 0 && !bad_norm) return;
    finding f;
    f.question = question::convergence;
    f.severity = severity::critical;
    f.first_step = f.last_step = s.step;
    f.detector = std::string(name());
    if (bad_loss) f.symptom = symptoms::non_finite_loss;
    else if (tensors > 0) f.symptom = symptoms::non_finite_tensors;
    else if (scale_lowered) {
      f.symptom = symptoms::skipped_step_overflow;
      f.severity = severity::info;
    } else {
      f.symptom = symptoms::non_finite_grad_norm;
      f.severity = norm_run_.run() >= c_.sustain ? severity::critical : severity::warning;
    }
    double rule = 0.0;  // the rule of the first place listed: the origin
    const auto add = [&](const char* prefix, const tensor_evidence& t, double r) {
      if (t.stats.non_finite() == 0) return;
      f.where.emplace_back(prefix + std::string(o.names[t.id]), static_cast<double>(t.stats.non_finite()));
      if (rule == 0.0) rule = r;
    };
    for (const auto& t : s.inputs) add("input/", t, 4.0);
    for (const auto& t : s.activations) add("act/", t, 1.0);
    for (auto it = s.gradients.rbegin(); it != s.gradients.rend(); ++it) add("grad/", *it, 2.0);
    for (const auto& t : s.parameters) add("param/", t, 3.0);
    if (bad_loss) f.evidence.emplace_back("loss", s.loss);
    if (s.has_grad_norm) f.evidence.emplace_back("grad_norm", s.grad_norm);
    if (bad_norm && s.has_loss) f.evidence.emplace_back("loss_finite", std::isfinite(s.loss) ? 1.0 : 0.0);
    if (bad_norm) f.evidence.emplace_back("non_finite_norm_steps_in_a_row", static_cast<double>(norm_run_.run()));
    if (s.has_loss_scale) f.evidence.emplace_back("loss_scale", s.loss_scale);
    f.evidence.emplace_back("tensors_with_non_finite", static_cast<double>(tensors));
    f.evidence.emplace_back("nan", static_cast<double>(nan));
    f.evidence.emplace_back("inf", static_cast<double>(inf));
    if (rule > 0.0) f.evidence.emplace_back("origin_rule", rule);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  onset norm_run_;  // steps in a row with a non-finite gradient norm
  double last_scale_ = 0.0;
};

/// Q1: exploding gradients, two ways, each judged with the loss where the loss is recorded
/// (a gradient norm that grows while the loss falls is a change of regime, not an explosion: a
/// network leaving its initial plateau grows its gradient norm 10-90x as its loss halves,
/// docs/accuracy.md):
/// - a **jump**: the norm at `warn_ratio` (10) times the median of the last `window` (100)
///   norms before the jump. Critical at `critical_ratio` (100) on its own. A warning when the
///   loss is non-finite or above (1 + `loss_rise`) times its recent median, when no loss is
///   recorded at all, or when the norm stays up for `sustain` (10) steps without the loss
///   falling by `rebase_improvement` (10%). If the loss does fall that much meanwhile, the jump
///   was a new regime: info, and the baseline restarts from the recent norms. Until one of these
///   decides, the jump is info, once. Findings of one jump carry its first step. Two
///   corroborations keep one hard batch from counting (the zoo's small tables and a
///   LeNet at the edge of stability): the jump must leave the baseline's own step-to-step
///   jitter, log10(ratio) at least `min_jitter_z` (5) times the robust spread (MAD) of the
///   baseline's consecutive log10 differences over sqrt 2 — a smooth growth has a tiny jitter,
///   a near-zero loss's norms swing over decades — and the loss must be up on
///   `loss_up_steps` (2) jump steps in a row, not on one, unless it rose decisively: to
///   `decisive_factor` (1.5) times its median, `decisive_rise` (0.25) above it and, once 5
///   losses are known, `decisive_mads` (10) robust standard deviations of the last 50 above
///   it — loss_spike's three lines for one observation out of the batch noise (the 104B's
///   3.11 -> 7.71, one step after its norm went up 20x, is hundreds of MADs out; a CNN at SGD
///   0.2 leaving its plateau went 1.2 -> 3.28 for one step against a median of 2.16 moving
///   down fast, 6 MADs, and trained to 0.05: the zoo, seed 1020). Healthy llm.c
///   GPT-2 jumps reach 7.6x and recover; BLOOM-176B's explosion goes 0.24 -> 15.9 (66x) -> 960
///   (4000x) while its loss doubles; the 104B's norm went up 20x one step before its loss did
///   (../shared/data/real-runs/README.md).
/// - a **growth**: the median of the last `growth_window` (10) norms at `warn_ratio` times an
///   anchor while the loss has not improved since that anchor: a slow explosion whose median
///   grows along with it (gradients never zeroed: 40x in 100 steps). The anchor is the larger
///   of two medians, the last `growth_window` norms' and the baseline's (the last `window`
///   outside jumps), when the loss (mean of its last 10) last made progress, so progress moves
///   it. The growth must hold for `growth_sustain` (5) steps in a row: a
///   burst of hard batches lifts a median of 10 for two or three.
///
/// **Progress** (for both rules) is a fall of the loss's mean of 10 by `rebase_improvement`
/// (10%) of itself, or by `progress_z` (3) times its batch noise (see `progressed`): a loss
/// whose floor is far above 0 (NT-Xent, negative sampling) or that leaves a plateau slowly
/// makes progress that a 10% line never sees. **The first `settle` (5) norms** form the
/// baseline whatever their size. A jump among them is decided at once only by a non-finite loss
/// or where no loss is recorded. In training's first `settle` steps (step numbers below it; a
/// logbook excerpt that starts at step 11440 is decided as before), decisive evidence within
/// a step of it (`critical_ratio`, a decisive loss) waits for the loss to answer: back within
/// `loss_rise` of its median before the jump (the median of the last three losses since, two
/// at least) is info, "first steps overshot" — Adagrad's and RMSprop's first updates move
/// every weight by about the learning rate (held-out round 7: losses 2.3 -> 23-40 at step 1
/// with norms 30-380x, back in 4-8 steps, trained; 3 healthy runs warned) — and not back
/// within `sustain` steps, or non-finite, is the jump's verdict from its first step, after
/// which decisive evidence decides at once. A jump without decisive evidence joins the
/// baseline. A critical jump decides alone only where the loss made no progress since the jump began, and a new regime's baseline forms again from the
/// jump's own norms (a SimCLR encoder leaving its collapsed start grows its norm 1000x in 8
/// steps while its loss falls 4.14 -> 3.68). At step 0 a layer that
/// starts at zero leaves the gradient of what feeds it zero (word2vec's first norm was a tenth
/// of its next), and a baseline of one step is no baseline.
///
/// Where the gradients are clipped (`clip_norm`, 0 = not clipped or not known; the monitor sets
/// it from `training_config::max_grad_norm`), a jump above the bound was bounded before the
/// optimizer applied it, so its size alone decides nothing: it needs the same corroboration
/// as a warning (the loss up, a decisive rise, or no recovery for `sustain` steps), and is then
/// critical at `critical_ratio`. Clipping is the fix the method names for exactly this jump;
/// an LSTM clipped at 5 whose norm jumped 142x once and recovered (the zoo) is info.
class exploding_gradients {
 public:
  struct config {
    std::size_t window = 100;
    std::size_t min_history = 1;
    double warn_ratio = 10.0;
    double critical_ratio = 100.0;
    double loss_rise = 0.05;
    double rebase_improvement = 0.1;
    std::size_t growth_window = 10;
    std::size_t sustain = 10;
    // 5: the zoo's healthy small tables and a batch-16 CNN jumped 10-60x at 1.3-4.2 (their
    // norms swing over decades near a zero loss); gradients never zeroed grow at 30-90, the
    // planted x255 inputs jump at 4-4.4 (found at step 0 by input_scale). docs/accuracy.md.
    double min_jitter_z = 5.0;
    std::size_t loss_up_steps = 2;
    std::size_t growth_sustain = 5;
    double decisive_factor = 1.5;
    double decisive_rise = 0.25;
    double decisive_mads = 10.0;  // loss_spike's min_mads: one observation out of the batch noise
    double progress_z = 3.0;
    double progress_min = 1e-3;
    std::size_t settle = 5;
    double clip_norm = 0.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_history", &config::min_history},
          field<config>{"warn_ratio", &config::warn_ratio},
          field<config>{"critical_ratio", &config::critical_ratio},
          field<config>{"loss_rise", &config::loss_rise},
          field<config>{"rebase_improvement", &config::rebase_improvement},
          field<config>{"growth_window", &config::growth_window},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_jitter_z", &config::min_jitter_z},
          field<config>{"loss_up_steps", &config::loss_up_steps},
          field<config>{"growth_sustain", &config::growth_sustain},
          field<config>{"decisive_factor", &config::decisive_factor},
          field<config>{"decisive_rise", &config::decisive_rise},
          field<config>{"decisive_mads", &config::decisive_mads},
          field<config>{"progress_z", &config::progress_z},
          field<config>{"progress_min", &config::progress_min},
          field<config>{"settle", &config::settle},
          field<config>{"clip_norm", &config::clip_norm}};
    }
  };
  exploding_gradients() : exploding_gradients(config{}) {}
  explicit exploding_gradients(config c)
      : c_(c), baseline_(c.window), jitter_(c.window), recent_(c.growth_window == 0 ? 1 : c.growth_window),
        losses_(50), recent_losses_(10), loss_steps_(50) {
    if (c.warn_ratio <= 1.0 || c.critical_ratio < c.warn_ratio) {
      throw error("exploding_gradients: need 1 < warn_ratio <= critical_ratio");
    }
    if (!std::isfinite(c.clip_norm) || c.clip_norm < 0.0) {
      throw error("exploding_gradients: clip_norm must be the clipping bound (> 0), or 0 when gradients are not clipped");
    }
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"exploding_gradients", question::convergence, {symptoms::grad_norm_grew_loss_fell, symptoms::grad_norm_jumped_unanswered, symptoms::first_steps_overshot, symptoms::exploding_gradients}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool loss_bad = s.has_loss && !std::isfinite(s.loss);
    const double loss_median = losses_.empty() ? std::numeric_limits<double>::quiet_NaN() : losses_.median();
    // A rise out of the batch noise too: late in training a batch of 64 sits 5% above the
    // median all the time (3 false alarms in the zoo's CNNs at losses near 0.02).
    const double mad = losses_.size() >= 5 ? losses_.mad() : 0.0;
    const bool loss_up = loss_bad || (s.has_loss && loss_median > 0.0 &&
                                      s.loss > loss_median + std::max(c_.loss_rise * loss_median, 3.0 * mad));
    const bool loss_decisive = loss_up && !loss_bad && s.loss >= c_.decisive_factor * loss_median &&
                               s.loss - loss_median >= std::max(c_.decisive_rise, c_.decisive_mads * mad);
    seen_loss_ = seen_loss_ || s.has_loss;
    if (s.has_loss && std::isfinite(s.loss)) {
      if (!losses_.empty()) loss_steps_.push(s.loss - losses_.back());
      losses_.push(s.loss);
      recent_losses_.push(s.loss);
      if (pending_) after_.push(s.loss);
    }
    const double loss_now = recent_losses_.empty() ? std::numeric_limits<double>::quiet_NaN() : recent_losses_.mean();
    if (!s.has_global_grad_norm()) return;
    const double norm = s.global_grad_norm();
    if (!std::isfinite(norm)) return;  // non_finite's business
    recent_.push(norm);
    if (baseline_.size() < c_.min_history) {
      push_baseline(norm);
      return;
    }
    const double median = baseline_.median();
    const double ratio = median > 0.0 ? norm / median : 0.0;
    if (pending_) {
      first_steps(o, norm, median, ratio, loss_bad, out);
      return;
    }
    // The baseline's jitter: the spread of its consecutive log10 differences (a difference
    // has sqrt 2 times one value's spread). Below 5 differences nothing is known: no bar.
    // (Computed only for a candidate jump: two medians over the window are the cost.)
    const auto out_of_noise = [&] {
      const double jitter = jitter_.size() >= 5 ? jitter_.mad() / std::sqrt(2.0) : 0.0;
      return std::log10(ratio) >= c_.min_jitter_z * jitter;
    };
    if (ratio >= c_.warn_ratio && out_of_noise()) {
      if (jump_start_ < 0) {
        jump_start_ = s.step;
        jump_steps_ = 0;
        loss_up_run_ = 0;
        jump_loss_ = loss_now;
        jump_ref_loss_ = loss_median;
      }
      ++jump_steps_;
      loss_up_run_ = loss_up ? loss_up_run_ + 1 : 0;
      const bool fell = progressed(jump_loss_, loss_now);
      const bool clipped = c_.clip_norm > 0.0 && norm > c_.clip_norm;
      // A baseline of its first `settle` norms is still forming: only decisive evidence decides.
      const bool settled = baseline_.size() >= c_.settle;
      // There, a decisive jump in training's first `settle` steps (step numbers: a log excerpt
      // that starts later is not a start) waits for the loss to answer (first_steps), unless
      // one already went unanswered.
      if (!settled && jump_start_ < static_cast<std::int64_t>(c_.settle) && seen_loss_ && !loss_bad && !unrecovered_ &&
          (loss_decisive || (ratio >= c_.critical_ratio && !clipped && !fell))) {
        pending_ = true;
        pending_steps_ = 0;
        pending_peak_ = ratio;
        after_.clear();
        return;
      }
      // A critical jump decides alone unless the loss made progress since the jump began: an
      // encoder leaving a collapsed start grows its norm 1000x in 8 steps as its loss falls.
      const bool decided = (ratio >= c_.critical_ratio && !clipped && !fell) || !seen_loss_ || loss_bad || loss_decisive ||
                           (settled && loss_up_run_ >= c_.loss_up_steps) ||
                           (settled && jump_steps_ >= c_.sustain && !fell);
      if (decided) {
        finding f = make(o, ratio >= c_.critical_ratio ? severity::critical : severity::warning,
                         {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                          {"loss_rose", loss_up ? 1.0 : 0.0}, {"steps_up", static_cast<double>(jump_steps_)}});
        if (clipped) f.evidence.emplace_back("clip_norm", c_.clip_norm);
        f.first_step = jump_start_;
        out.push_back(std::move(f));
        return;  // the baseline keeps the norms before the jump
      }
      if (!settled) {
        // A forming baseline waits one step for the loss to answer (the 104B's loss rose the
        // step after its norm did); a jump it did not answer becomes part of the baseline (a
        // zero-initialized layer's first steps).
        if (jump_steps_ >= 2) {
          for (std::size_t i = recent_.size() - std::min(recent_.size(), jump_steps_); i < recent_.size(); ++i)
            push_baseline(recent_[i]);
          jump_start_ = -1;
        }
      } else if (fell) {  // a new regime: the baseline restarts from it
        finding f = make(o, severity::info, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                                             {"loss_at_jump", jump_loss_}, {"loss_now", loss_now}});
        f.symptom = symptoms::grad_norm_grew_loss_fell;
        f.first_step = jump_start_;
        out.push_back(std::move(f));
        baseline_.clear();
        jitter_.clear();
        // From the norms of the new regime only (the jump's steps, at most `growth_window`): a
        // baseline of fewer than `settle` forms again, as at the start.
        const std::size_t from = recent_.size() - std::min(recent_.size(), jump_steps_);
        for (std::size_t i = from; i < recent_.size(); ++i) push_baseline(recent_[i]);
        jump_start_ = -1;
      } else if (jump_steps_ == 1) {
        finding f = make(o, severity::info, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio}});
        f.symptom = symptoms::grad_norm_jumped_unanswered;
        out.push_back(std::move(f));
      }
    } else {
      jump_start_ = -1;
      push_baseline(norm);
    }
    growth(o, loss_now, out);
  }

 private:
  /// A decisive jump while the baseline was forming (from `jump_start_`, against the loss
  /// median before it, `jump_ref_loss_`), one step later and on: the loss answers by coming back (the median of the losses since the jump, two at least, within `loss_rise`
  /// of the median before it): info, and the norm joins the baseline; or by not coming back
  /// within `sustain` steps, or going non-finite: the jump's verdict, from its first step.
  void first_steps(const observation& o, double norm, double median, double ratio, bool loss_bad,
                   std::vector<finding>& out) {
    ++pending_steps_;
    pending_peak_ = std::max(pending_peak_, ratio);
    const double after = after_.median();
    if (!loss_bad && after_.size() >= 2 && after <= (1.0 + c_.loss_rise) * jump_ref_loss_) {
      finding f = make(o, severity::info, {{"peak_ratio_to_median", pending_peak_}, {"baseline_median", median},
                                           {"loss_before", jump_ref_loss_}, {"loss_after", after},
                                           {"steps_to_recover", static_cast<double>(pending_steps_)}});
      f.symptom = symptoms::first_steps_overshot;
      f.first_step = jump_start_;
      out.push_back(std::move(f));
      pending_ = false;
      jump_start_ = -1;
      push_baseline(norm);
      return;
    }
    if (!loss_bad && pending_steps_ < c_.sustain) return;
    finding f = make(o, pending_peak_ >= c_.critical_ratio ? severity::critical : severity::warning,
                     {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                      {"peak_ratio_to_median", pending_peak_}, {"loss_before", jump_ref_loss_},
                      {"loss_after", after_.empty() ? std::numeric_limits<double>::quiet_NaN() : after},
                      {"steps_up", static_cast<double>(pending_steps_)}});
    f.first_step = jump_start_;
    out.push_back(std::move(f));
    pending_ = false;
    jump_start_ = -1;
    unrecovered_ = true;
  }

  void push_baseline(double norm) {
    if (!baseline_.empty() && baseline_.back() > 0.0 && norm > 0.0) jitter_.push(std::log10(norm / baseline_.back()));
    baseline_.push(norm);
  }

  /// Whether the loss (the mean of its last 10) made progress since `before` (such a mean too):
  /// it fell by `rebase_improvement` of itself, or by `progress_z` times the batch noise — the
  /// robust spread of the last 50 losses' step-to-step changes over sqrt 2, which a trend
  /// does not inflate. A difference of two means of 10 has 0.45 of that spread, so 3 is 6.7
  /// standard errors, and at least `progress_min` (0.1%) of itself (a loss repeating a few
  /// values has a robust spread of 0). The second line is for losses with a floor far above 0 and for a
  /// plateau left slowly: the zoo's word2vec runs fall 4.1589 -> 4.1229 (0.9%) while their
  /// zero-initialized output vectors grow the gradient 16x, with batch noise of 1e-5; an
  /// NT-Xent loss falls a few percent while the encoder leaves its collapsed start.
  [[nodiscard]] bool progressed(double before, double now) const {
    if (!(now < before)) return false;
    if (now < (1.0 - c_.rebase_improvement) * before) return true;
    if (loss_steps_.size() < 5 || !(c_.progress_z > 0.0)) return false;
    return before - now >= std::max(c_.progress_z * loss_steps_.mad() / std::sqrt(2.0), c_.progress_min * before);
  }

  void growth(const observation& o, double loss_now, std::vector<finding>& out) {
    // The anchor moves whenever the loss has made progress; without a loss there is no growth rule.
    if (!std::isfinite(loss_now)) return;
    if (!(anchor_ > 0.0) || progressed(anchor_loss_, loss_now)) {
      // The larger of the last growth_window norms' median and the baseline's (up to
      // `window`): progress is declared when a stretch of easy batches brings the loss's mean
      // down, and easy batches have small gradients, so the last ten norms at that moment sit
      // low by selection (batch-8 runs: an anchor of 0.05 where the norms' median was 0.4, then
      // "grown" 15x at a few hard batches; the zoo's round 6); while norms already rise as a
      // network leaves its plateau, the last ten are the level (a calibration MLP at SGD 0.2
      // warned at its plateau exit with the baseline's median alone).
      anchor_ = recent_.median();
      if (baseline_.size() >= recent_.capacity()) anchor_ = std::max(anchor_, baseline_.median());
      anchor_loss_ = loss_now;
      anchor_step_ = o.now.step;
    }
    if (!recent_.full() || !(anchor_ > 0.0)) return;
    const double g = recent_.median() / anchor_;
    const bool grown = g >= c_.warn_ratio && !progressed(anchor_loss_, loss_now);
    if (growth_.observe(grown, std::max<std::size_t>(c_.growth_sustain, 1))) {
      finding f = make(o, g >= c_.critical_ratio ? severity::critical : severity::warning,
                       {{"recent_median_norm", recent_.median()}, {"anchor_median_norm", anchor_}, {"growth", g},
                        {"anchor_step", static_cast<double>(anchor_step_)}, {"recent_loss", loss_now},
                        {"anchor_loss", anchor_loss_}});
      f.first_step = anchor_step_;
      out.push_back(std::move(f));
    }
  }

  finding make(const observation& o, severity level, std::vector<std::pair<std::string, double>> evidence) const {
    finding f = make_finding(question::convergence, symptoms::exploding_gradients, level, o.now.step, name(), std::move(evidence));
    for (const auto& g : o.now.gradients) f.where.emplace_back("grad/" + std::string(o.names[g.id]), g.stats.l2_norm());
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (f.where.size() > 5) f.where.resize(5);
    return f;
  }

  config c_;
  signals::window baseline_, jitter_, recent_, losses_, recent_losses_, loss_steps_, after_{3};
  double anchor_ = 0.0, anchor_loss_ = std::numeric_limits<double>::quiet_NaN();
  std::int64_t anchor_step_ = -1, jump_start_ = -1;
  std::size_t jump_steps_ = 0, loss_up_run_ = 0;
  double jump_loss_ = std::numeric_limits<double>::quiet_NaN();
  double jump_ref_loss_ = std::numeric_limits<double>::quiet_NaN();
  // A forming baseline's decisive jump awaiting the loss's answer (first_steps).
  bool pending_ = false, unrecovered_ = false;
  std::size_t pending_steps_ = 0;
  double pending_peak_ = 0.0;
  bool seen_loss_ = false;
  edge growth_;
};

/// Q1: gradients that persist from step to step, the signature of gradients never zeroed
/// (a missing or misplaced `zero_grad()`), from a gradient_persistence's two cosines: over the
/// last `window` (20) steps, the median cosine between consecutive gradients at least
/// `min_cosine` (0.85) and the median cosine between consecutive increments at least
/// `min_increment_cosine` (0), for `sustain` (30) steps in a row. The first says the gradients
/// agree; the second says why: a healthy run's increments are batch noise minus batch noise
/// (about -0.5) even when one direction dominates every batch, while a never-zeroed gradient's
/// increment is a fresh gradient. A warning when the loss also moved up on at least
/// `min_loss_rises` (10%) of the window's steps (the batches differ); info when the loss falls
/// smoothly (full-batch training, whose gradients and increments agree legitimately), when no
/// loss is recorded, or when the increments' cosine was not recorded. Reports the onset;
/// `first_step` is where the agreement began.
///
/// Chosen on the zoo's dumped cosines (docs/accuracy.md): gradients never zeroed agree at
/// 0.95-1.0 with increments at 0.05-0.99 (medians) in eleven of twelve families (a ViT clipped
/// at norm 1 reaches 0.65 only); healthy mini-batch runs sit at 0.1-0.2, a transformer's first
/// 20 steps at 0.91 for two steps, and the held-out autoencoders at 0.9-1.0 for hundreds of
/// steps — where the consecutive cosine alone raised 43 false alarms in 50 runs — with
/// increments at -0.5 (the longest 20-step stretch with both medians over their lines: 26
/// steps, hence `sustain` 30).
class persistent_gradients {
 public:
  struct config {
    std::size_t window = 20;
    double min_cosine = 0.85;
    double min_increment_cosine = 0.0;
    std::size_t sustain = 30;
    double min_loss_rises = 0.1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_cosine", &config::min_cosine},
          field<config>{"min_increment_cosine", &config::min_increment_cosine},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_loss_rises", &config::min_loss_rises}};
    }
  };
  persistent_gradients() : persistent_gradients(config{}) {}
  explicit persistent_gradients(config c)
      : c_(c), cosines_(c.window < 1 ? 1 : c.window), increments_(c.window < 1 ? 1 : c.window), rises_(c.window < 1 ? 1 : c.window) {
    if (c.window < 1 || c.sustain < 1) throw error("persistent_gradients: window and sustain must be at least 1");
    if (!(c.min_cosine > -1.0 && c.min_cosine < 1.0)) throw error("persistent_gradients: min_cosine must lie in (-1, 1)");
    if (!(c.min_increment_cosine >= -1.0 && c.min_increment_cosine < 1.0)) {
      throw error("persistent_gradients: min_increment_cosine must lie in [-1, 1)");
    }
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"persistent_gradients", question::convergence, {symptoms::gradients_persist, symptoms::gradients_nearly_identical}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.has_loss && std::isfinite(s.loss)) {
      if (has_last_loss_) rises_.push(s.loss > last_loss_ ? 1.0 : 0.0);
      last_loss_ = s.loss;
      has_last_loss_ = true;
    }
    if (!s.has_grad_cosine || !std::isfinite(s.grad_cosine)) return;
    cosines_.push(s.grad_cosine);
    const bool has_increments = s.has_grad_increment_cosine && std::isfinite(s.grad_increment_cosine);
    if (has_increments) increments_.push(s.grad_increment_cosine);
    else increments_.clear();
    // Without the increments the agreement is judged alone, and can only be info.
    const bool increments_known = increments_.full();
    const bool high = cosines_.full() && cosines_.median() >= c_.min_cosine &&
                      (!increments_known || increments_.median() >= c_.min_increment_cosine);
    if (!high) {
      fired_.reset();
      return;
    }
    if (!fired_.observe(true, c_.sustain)) return;
    const double rise_fraction = rises_.empty() ? std::numeric_limits<double>::quiet_NaN() : rises_.mean();
    const bool warn = increments_known && rises_.full() && rise_fraction >= c_.min_loss_rises;
    finding f = make_finding(question::convergence,
                             warn ? symptoms::gradients_persist
                                  : symptoms::gradients_nearly_identical,
                             warn ? severity::warning : severity::info, s.step, name(),
                             {{"median_cosine", cosines_.median()},
                              {"median_increment_cosine",
                               increments_known ? increments_.median() : std::numeric_limits<double>::quiet_NaN()},
                              {"steps", static_cast<double>(fired_.run() + c_.window - 1)},
                              {"loss_rise_fraction", rise_fraction}});
    f.first_step = fired_.start(s.step) - static_cast<std::int64_t>(c_.window) + 1;
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window cosines_, increments_, rises_;
  double last_loss_ = 0.0;
  bool has_last_loss_ = false;
  edge fired_;
};

/// Q1: divergence signs other than a spike: a loss value that goes missing after losses were
/// logged (critical); a loss that rose by at least `min_step_rise` on each of the last
/// `rise_steps` observations, by `rise_fraction` and by `min_rise` nats (0.25, as loss_spike's)
/// in all, with each of them at least `elevated` above the median of the losses before the
/// climb, and with at most `max_last_share` (0.8) of the rise in its last step (a climb, not
/// one outlier batch after two steps that happened to rise by 2%: a healthy small table went
/// 0.0074, 0.0077, 0.256), and to a loss above every one of the `baseline_window`
/// losses before the climb (a level the loss has not visited: hard batches that stray and
/// return do not make a climb) (warning; BigScience 104B experiment 2 climbed 6.37 -> 10.24 at the
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
    double min_mads = 10.0;  ///< the end of the climb at least this many MADs above the baseline median
    double max_last_share = 0.8;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"halvings", &config::halvings},
          field<config>{"window", &config::window},
          field<config>{"rise_steps", &config::rise_steps},
          field<config>{"rise_fraction", &config::rise_fraction},
          field<config>{"elevated", &config::elevated},
          field<config>{"min_step_rise", &config::min_step_rise},
          field<config>{"baseline_window", &config::baseline_window},
          field<config>{"min_rise", &config::min_rise},
          field<config>{"min_mads", &config::min_mads},
          field<config>{"max_last_share", &config::max_last_share}};
    }
  };
  divergence() : divergence(config{}) {}
  explicit divergence(config c)
      : c_(c), scales_(c.window + 1), losses_(c.rise_steps + 1), baseline_(c.baseline_window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"divergence", question::convergence, {symptoms::missing_loss_value, symptoms::sustained_loss_increase, symptoms::loss_scale_halving}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.has_loss) seen_loss_ = true;
    // A training line without its loss (Megatron's "missing lm loss"): the step logged other
    // values. A step with only a validation loss, or nothing, is an evaluation or a gap.
    const bool logged_other = s.has_lr || s.has_grad_norm || s.has_loss_scale || !s.gradients.empty() || !s.parameters.empty();
    if (!s.has_loss && seen_loss_ && logged_other && !s.has_val_loss) {
      out.push_back(make(o, symptoms::missing_loss_value, severity::critical, {{"steps_with_loss_before", 1.0}}));
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
        // Above the baseline's own noise too: batch-64 losses climb three times in a row by
        // chance; a divergence leaves the noise band (robust z, as loss_spike's).
        const double noise = c_.min_mads > 0.0 ? baseline_.mad() : 0.0;
        const double total = losses_.back() - losses_[0];
        const double last = losses_.back() - losses_[losses_.size() - 2];
        const double highest = std::max(base, baseline_.max());
        if (climbing && rise >= c_.rise_fraction && total >= c_.min_rise && last <= c_.max_last_share * total &&
            losses_.back() - base >= c_.min_mads * noise && losses_.back() > highest) {
          out.push_back(make(o, symptoms::sustained_loss_increase, severity::warning,
                             {{"rise_fraction", rise}, {"baseline_median", base}, {"loss", s.loss}}));
        }
      }
    }
    if (!s.has_loss_scale || !std::isfinite(s.loss_scale)) return;
    scales_.push(s.loss_scale);
    std::size_t halved = 0;
    for (std::size_t i = 1; i < scales_.size(); ++i) halved += scales_[i] < scales_[i - 1] ? 1u : 0u;
    if (halved >= c_.halvings) {
      out.push_back(make(o, symptoms::loss_scale_halving, severity::warning,
                         {{"halvings_in_window", static_cast<double>(halved)}, {"loss_scale", s.loss_scale},
                          {"loss_scale_window_start", scales_[0]}}));
    }
  }

 private:
  finding make(const observation& o, mldiag::symptom symptom, severity level,
               std::vector<std::pair<std::string, double>> evidence) const {
    finding f;
    f.question = question::convergence;
    f.symptom = std::string(symptom.text);
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
/// above `max_lr` (warning; 5: plain SGD at 1 with gradient clipping is a classic recipe for
/// recurrent language models, Zaremba et al. 2014, and ran healthy in the zoo; docs/accuracy.md),
/// or that rises by more than `max_jump` (10x) from one step to the next (warning: a scheduler
/// restored with the wrong state, a factor applied twice). A drop by as much is info: step
/// decay by 0.1 is an ordinary schedule (the zoo's step-decay runs raised 28 false alarms when
/// drops counted). Reports onsets.
class lr_sanity {
 public:
  struct config {
    std::size_t zero_steps = 10;
    double max_lr = 5.0;
    double max_jump = 10.0;  ///< a change by more than this factor in one step (a rise warns, a drop is info)
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"zero_steps", &config::zero_steps},
          field<config>{"max_lr", &config::max_lr},
          field<config>{"max_jump", &config::max_jump}};
    }
  };
  lr_sanity() : lr_sanity(config{}) {}
  explicit lr_sanity(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"lr_sanity", question::convergence, {symptoms::lr_not_finite_or_negative, symptoms::lr_reached_zero, symptoms::lr_is_zero, symptoms::lr_absurdly_large, symptoms::lr_jumped, symptoms::lr_dropped}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_lr) return;
    const double lr = o.now.lr;
    const bool was_positive = seen_positive_;
    seen_positive_ = seen_positive_ || lr > 0.0;
    if (invalid_.rise(!std::isfinite(lr) || lr < 0.0)) {
      out.push_back(make_finding(question::convergence, symptoms::lr_not_finite_or_negative, severity::critical,
                                 o.now.step, name(), {{"lr", lr}}));
    }
    if (zero_.observe(lr == 0.0, c_.zero_steps)) {
      out.push_back(make_finding(question::convergence, was_positive ? symptoms::lr_reached_zero : symptoms::lr_is_zero,
                                 was_positive ? severity::info : severity::warning, o.now.step, name(),
                                 {{"lr", lr}, {"steps_at_zero", static_cast<double>(zero_.run())}}));
    }
    if (large_.rise(std::isfinite(lr) && lr > c_.max_lr)) {
      out.push_back(make_finding(question::convergence, symptoms::lr_absurdly_large, severity::warning, o.now.step,
                                 name(), {{"lr", lr}, {"max_lr", c_.max_lr}}));
    }
    // A schedule moves smoothly (warm-up, decay); a jump by 10x in one step is a bug — a
    // scheduler restored with the wrong state on resume, a group given the wrong factor.
    const bool valid = previous_ > 0.0 && lr > 0.0 && std::isfinite(lr);
    if (jump_.rise(valid && lr > c_.max_jump * previous_)) {
      out.push_back(make_finding(question::convergence, symptoms::lr_jumped, severity::warning, o.now.step, name(),
                                 {{"lr", lr}, {"previous_lr", previous_}, {"factor", lr / previous_}}));
    }
    if (drop_.rise(valid && previous_ >= c_.max_jump * lr * (1.0 - 1e-9))) {
      out.push_back(make_finding(question::convergence, symptoms::lr_dropped, severity::info, o.now.step, name(),
                                 {{"lr", lr}, {"previous_lr", previous_}, {"factor", lr / previous_}}));
    }
    previous_ = std::isfinite(lr) ? lr : previous_;
  }

 private:
  config c_;
  bool seen_positive_ = false;
  double previous_ = 0.0;
  edge invalid_, zero_, large_, jump_, drop_;
};

/// Q1: the first recorded loss of a cross-entropy classifier far from ln(classes), the loss of
/// a uniform guess (wrong loss function, labels or initialization scale). Off unless
/// `classes` > 1. Warning when |loss - ln C| > max(`tolerance` * ln C, `min_difference`)
/// (0.25, llm.c GPT-2 starts at 11.009 against ln 50257 = 10.825, 1.7% off; 0.5 nats: the
/// first loss is one mini-batch of a randomly initialized model, whose logits spread by about
/// 0.6 and, on a separable table, already point the right way — the zoo's held-out UCI tables
/// with 2-3 classes started at 0.40-1.44 against ln C = 0.69-1.10, 9 false alarms in 25
/// healthy runs with the relative line alone; for 8 classes or more the relative line is the
/// larger).
class initial_loss {
 public:
  struct config {
    double classes = 0;
    double tolerance = 0.25;
    double min_difference = 0.5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"classes", &config::classes},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"min_difference", &config::min_difference}};
    }
  };
  initial_loss() : initial_loss(config{}) {}
  explicit initial_loss(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"initial_loss", question::convergence, {symptoms::initial_loss_far_from_chance}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  /// Whether a first loss is what a uniform guess over `classes` gives, by this detector's
  /// line (the one policy the phase-1 checks use too).
  [[nodiscard]] static bool near_chance(double loss, double classes, const config& c) {
    const double expected = std::log(classes);
    return std::fabs(loss - expected) <= std::max(c.tolerance * expected, c.min_difference);
  }
  // An overload, not a default argument: GCC 12 cannot use config's member initializers in a
  // default argument inside initial_loss.
  [[nodiscard]] static bool near_chance(double loss, double classes) { return near_chance(loss, classes, config{}); }
  void observe(const observation& o, std::vector<finding>& out) {
    if (done_ || c_.classes <= 1.0 || !o.now.has_loss || !std::isfinite(o.now.loss)) return;
    done_ = true;
    const double expected = std::log(c_.classes);
    const double off = std::fabs(o.now.loss - expected) / expected;
    if (!near_chance(o.now.loss, c_.classes, c_)) {
      out.push_back(make_finding(question::convergence, symptoms::initial_loss_far_from_chance, severity::warning,
                                 o.now.step, name(),
                                 {{"loss", o.now.loss}, {"ln_classes", expected}, {"relative_difference", off}}));
    }
  }

 private:
  config c_;
  bool done_ = false;
};

/// Q1: inputs that are not normalized, the first of the method's obvious checks: a recorded
/// input batch (`role::input`) whose root mean square is above `max_rms` (10). Standardized
/// features have an RMS of 1, images scaled to [0, 1] less (Fashion-MNIST 0.45, the UCI digits
/// over 16 0.48); raw 0-255 pixels have 116 (Fashion-MNIST's training set; the digits x255:
/// 124), and unscaled tabular features (areas in the hundreds) as much. The UCI digits on their
/// own 0-16 scale (RMS 7.7) stay below the line. 10 leaves a standardized table's heavy tails
/// (a few values at 10-30) far below the line, since it reads the mean square of the batch.
/// Warning, once per onset, at the inputs above the line (largest RMS first). Token ids are
/// not inputs in this sense: record what the first layer multiplies, not what it looks up.
class input_scale {
 public:
  struct config {
    double max_rms = 10.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_rms", &config::max_rms}};
    }
  };
  input_scale() : input_scale(config{}) {}
  explicit input_scale(config c) : c_(c) {
    if (!(c.max_rms > 0.0)) throw error("input_scale: max_rms must be > 0 (the RMS above which inputs count as unnormalized)");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"input_scale", question::convergence, {symptoms::inputs_not_normalized}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    // A step that recorded no input says nothing (inputs recorded every k steps stay one onset).
    if (o.now.inputs.empty()) return;
    const tensor_evidence* top = nullptr;
    for (const auto& t : o.now.inputs)
      if (t.stats.finite() > 0 && (top == nullptr || t.stats.rms() > top->stats.rms())) top = &t;
    if (!fired_.rise(top != nullptr && top->stats.rms() > c_.max_rms)) return;
    finding f = make_finding(question::convergence, symptoms::inputs_not_normalized, severity::warning, o.now.step, name(),
                             {{"input_rms", top->stats.rms()}, {"max_rms", c_.max_rms}, {"mean", top->stats.mean()},
                              {"std", top->stats.stddev()}, {"max_abs", top->stats.max_abs}});
    for (const auto& t : o.now.inputs)
      if (t.stats.finite() > 0 && t.stats.rms() > c_.max_rms)
        f.where.emplace_back("input/" + std::string(o.names[t.id]), t.stats.rms());
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(f));
  }

 private:
  config c_;
  edge fired_;
};

/// Q1: the same input batch every step — a data pipeline that hands out one batch (a loader
/// created anew inside the loop, the first batch of an iterator taken each step, an index that
/// never advances): every recorded input (`role::input`) has the statistics of the previous
/// step's — elements, zeros and non-finite count exactly, smallest and largest value and L2 norm
/// within `tolerance` (1e-5) of it relatively, the mean within `tolerance` of the data's scale
/// (the larger of |mean| and the standard deviation) — for
/// `sustain` (20) steps in a row. Two different batches of real data agree on all of them
/// essentially never (none of the zoo's 408 healthy mini-batch runs that record inputs did for
/// two steps in a row); the same batch does on every step. A warning; info where `full_batch`
/// (1) says that every step reads the whole training set (full-batch gradient descent, L-BFGS:
/// the monitor sets it from `training_config::full_batch`), which looks the same and is
/// meant. Not seen: token ids that are not recorded as an input, and one batch augmented
/// afresh each step (random crops, noise), whose inputs differ. Reports onsets; `first_step`
/// is the first step that repeated its predecessor.
class repeated_batch {
 public:
  struct config {
    std::size_t sustain = 20;
    // 1e-5: ten times the statistics' accuracy contract, which is what the same elements in
    // another order may differ by (1e-9 until issue 18: the host kernel sums fp32 and bf16 in
    // float lanes now, and a full batch shuffled anew each step moved its mean by 1.3e-6).
    // Two different batches differ far more: a mini-batch's mean moves by about sd / sqrt(n)
    // (1e-3 relative for 50,000 elements) and its zero count almost always.
    double tolerance = 1e-5;
    std::size_t full_batch = 0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"full_batch", &config::full_batch}};
    }
  };
  repeated_batch() : repeated_batch(config{}) {}
  explicit repeated_batch(config c) : c_(c) {
    if (!(c.tolerance >= 0.0) || c.sustain == 0)
      throw error("repeated_batch: need tolerance >= 0 (relative) and sustain >= 1 (steps in a row)");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"repeated_batch", question::convergence, {symptoms::same_input_batch}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    // A step that recorded no input says nothing (inputs recorded every k steps compare with
    // the last step that recorded them).
    if (o.now.inputs.empty()) return;
    bool same = o.now.inputs.size() == last_.size();
    for (std::size_t i = 0; same && i < last_.size(); ++i)
      same = last_[i].first == o.now.inputs[i].id && alike(last_[i].second, o.now.inputs[i].stats);
    last_.resize(o.now.inputs.size());  // allocates only when the number of inputs grows
    for (std::size_t i = 0; i < last_.size(); ++i) last_[i] = {o.now.inputs[i].id, o.now.inputs[i].stats};
    if (!repeated_.observe(same, c_.sustain)) return;
    finding f = make_finding(question::convergence, symptoms::same_input_batch,
                             c_.full_batch != 0 ? severity::info : severity::warning, o.now.step, name(),
                             {{"steps_identical", static_cast<double>(repeated_.run())},
                              {"elements", static_cast<double>(o.now.inputs.front().stats.count)},
                              {"full_batch", c_.full_batch != 0 ? 1.0 : 0.0}});
    f.first_step = repeated_.start(o.now.step);
    for (const auto& t : o.now.inputs) f.where.emplace_back("input/" + std::string(o.names[t.id]), static_cast<double>(t.stats.count));
    out.push_back(std::move(f));
  }

 private:
  [[nodiscard]] bool near(double a, double b) const noexcept {
    return a == b || std::fabs(a - b) <= c_.tolerance * std::max(std::fabs(a), std::fabs(b));
  }
  [[nodiscard]] bool alike(const tensor_stats& a, const tensor_stats& b) const noexcept {
    // The mean on the data's scale: a mean near 0 has no relative accuracy of its own.
    const double scale = std::max({std::fabs(a.mean()), std::fabs(b.mean()), a.stddev(), b.stddev()});
    const bool means = a.mean() == b.mean() || std::fabs(a.mean() - b.mean()) <= c_.tolerance * scale;
    return a.count > 0 && a.count == b.count && a.zeros == b.zeros && a.non_finite() == b.non_finite() &&
           near(a.min, b.min) && near(a.max, b.max) && means && near(a.l2_norm(), b.l2_norm());
  }

  config c_;
  std::vector<std::pair<std::uint32_t, tensor_stats>> last_;
  onset repeated_;
};

/// Q1: the loss of a cross-entropy classifier still at chance level, ln(classes), after
/// `warmup` steps: the mean of the last `window` losses above (1 - `tolerance`) ln C. Nothing
/// is being learned — labels that do not match the inputs (shuffled, misaligned, read from
/// the wrong column), a dead network, a learning rate of zero. Off unless `classes` > 1.
/// Defaults: warmup 200, window 20, tolerance 0.1. Not 50: some healthy recipes sit at chance
/// for about 100 steps before they start to learn (LibTorch's MNIST example with SGD 0.01,
/// batch 64; docs/accuracy.md), while a model whose labels do not match its inputs stays at
/// chance for good.
class chance_level {
 public:
  struct config {
    double classes = 0;
    std::size_t warmup = 200;
    std::size_t window = 20;
    double tolerance = 0.1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"classes", &config::classes},
          field<config>{"warmup", &config::warmup},
          field<config>{"window", &config::window},
          field<config>{"tolerance", &config::tolerance}};
    }
  };
  chance_level() : chance_level(config{}) {}
  explicit chance_level(config c) : c_(c), recent_(c.window == 0 ? 1 : c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"chance_level", question::convergence, {symptoms::loss_at_chance_level}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return c_.classes > 1.0 ? std::max(c_.warmup, c_.window) : 0; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (c_.classes <= 1.0 || !o.now.has_loss || !std::isfinite(o.now.loss)) return;
    recent_.push(o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double chance = std::log(c_.classes), mean = recent_.mean();
    if (fired_.rise(mean > (1.0 - c_.tolerance) * chance)) {
      out.push_back(make_finding(question::convergence, symptoms::loss_at_chance_level, severity::warning, o.now.step,
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
/// or the input side's gradient RMS below `layer_ratio` (default 1e-3) times the last recorded
/// gradient's, for `sustain` steps in a row. Recording order is taken as layer order, and the
/// input side is the first layer: the largest RMS among the first `input_tensors` (2) recorded
/// gradients, a weight and its bias, or LoRA's A and B. A gradient that vanishes through depth
/// leaves both small; one tensor whose gradient passes through a factor that starts at zero
/// has none while its partner's is normal (PEFT initializes lora_B to 0, so lora_A's gradient
/// B^T delta is exactly 0 at first and tiny for tens of steps: the zoo's round 6, 5 of 27
/// healthy LoRA runs at first-to-last ratios of 6e-5..6e-4 with one tensor).
class vanishing_gradients {
 public:
  struct config {
    double min_rms = 1e-9;
    double layer_ratio = 1e-3;
    std::size_t sustain = 5;
    std::size_t input_tensors = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_rms", &config::min_rms},
          field<config>{"layer_ratio", &config::layer_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"input_tensors", &config::input_tensors}};
    }
  };
  vanishing_gradients() : vanishing_gradients(config{}) {}
  explicit vanishing_gradients(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"vanishing_gradients", question::convergence, {symptoms::vanishing_gradients}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& g = o.now.gradients;
    if (g.empty()) return;
    // Counts and the largest magnitude decide most steps; the merged statistics of every
    // gradient (4 us for 300 tensors, issue 18) are computed only where they decide, below.
    std::uint64_t non_finite = 0, finite = 0;
    double largest = 0.0;
    for (const auto& t : g) {
      non_finite += t.stats.non_finite();
      finite += t.stats.finite();
      largest = std::max(largest, t.stats.max_abs);
    }
    const auto merged_rms = [&] {
      tensor_stats all;
      for (const auto& t : g)
        all.merge(t.stats);
      return all.rms();
    };
    // Gradients that hold NaN or Inf say nothing about vanishing (their few finite elements
    // are what is left of a blow-up): non_finite's business.
    if (non_finite > 0) {
      fired_.reset();
      return;
    }
    // The input side: the first layer's largest gradient (see the class comment). The last
    // tensor stays the output side's, even where fewer than input_tensors + 1 are recorded.
    const std::size_t input_side = std::min(std::max<std::size_t>(c_.input_tensors, 1), std::max<std::size_t>(g.size() - 1, 1));
    double first = 0.0;
    for (std::size_t i = 0; i < input_side; ++i) first = std::max(first, g[i].stats.rms());
    const double last = g.back().stats.rms();
    const double ratio = last > 0.0 ? first / last : 1.0;
    // Each element's square is in the mean square, so the RMS is at least the largest |g| over
    // sqrt(elements): at twice the line (rounding moves the merged RMS by far less) it is above.
    const bool above_line = largest / std::sqrt(static_cast<double>(finite)) > 2.0 * c_.min_rms;
    const bool vanishing = finite > 0 && ((g.size() > 1 && ratio < c_.layer_ratio) ||
                                          (!above_line && merged_rms() < c_.min_rms));
    if (fired_.observe(vanishing, c_.sustain)) {
      finding f = make_finding(
          question::convergence, symptoms::vanishing_gradients, severity::warning, o.now.step,
          name(), {{"grad_rms", merged_rms()}, {"first_to_last_layer_rms_ratio", ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("grad/" + std::string(o.names[g.front().id]), first);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  edge fired_;
};

/// Q1: the loss has not come down since the start (mean of the last `window` losses within
/// `min_improvement` of the mean of the first `start_window`, and no significant downward trend)
/// after `warmup` steps, while gradients are finite and non-zero: learning rate too low,
/// wrong loss, frozen model. Defaults: warmup 200, window 100, min_improvement 0.05.
/// Once reported, the loss counts as flat until it has improved by twice `min_improvement`
/// since the start: an improvement that hovers around the line is one
/// episode, not a delivery each time it crosses (a zoo autoencoder at 2.5-4.6% for 400 steps
/// was delivered 9 times).
class loss_not_decreasing {
 public:
  struct config {
    std::size_t warmup = 200;
    std::size_t window = 100;
    double min_improvement = 0.05;
    double t_critical = 2.0;
    std::size_t start_window = 10;  // the first losses: a run that converges fast is not flat
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"warmup", &config::warmup},
          field<config>{"window", &config::window},
          field<config>{"min_improvement", &config::min_improvement},
          field<config>{"t_critical", &config::t_critical},
          field<config>{"start_window", &config::start_window}};
    }
  };
  loss_not_decreasing() : loss_not_decreasing(config{}) {}
  explicit loss_not_decreasing(config c) : c_(c), first_(c.start_window), recent_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"loss_not_decreasing", question::convergence, {symptoms::loss_not_decreasing}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return std::max(c_.warmup, c_.window); }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    if (!first_.full()) first_.push(o.now.loss);
    recent_.push(o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double start = first_.mean(), now = recent_.mean();
    const double improvement = (start - now) / std::fabs(start);
    const auto t = signals::slope(recent_);
    // The global gradient norm reads every gradient's statistics (about 1 us for 300 tensors,
    // issue 18): asked for only where the loss has not improved.
    const auto gradients_normal = [&] {
      const double g = o.now.global_grad_norm();
      return std::isnan(g) || (std::isfinite(g) && g > 0.0);
    };
    // Cleared only by the improvement itself: a window's trend t-statistic passes -2 by chance
    // every few hundred steps of pure noise, which would re-arm the report. fired_ is active
    // while a reported flat stretch lasts.
    const bool flat = fired_.active() ? improvement < 2.0 * c_.min_improvement
                                      : improvement < c_.min_improvement && !(t.t_stat < -c_.t_critical) &&
                                            gradients_normal();
    if (fired_.rise(flat)) {
      out.push_back(make_finding(question::convergence, symptoms::loss_not_decreasing, severity::warning, o.now.step, name(),
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
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_improvement", &config::min_improvement},
          field<config>{"stall_change", &config::stall_change},
          field<config>{"t_critical", &config::t_critical}};
    }
  };
  plateau() : plateau(config{}) {}
  explicit plateau(config c) : c_(c), first_(c.window < 100 ? c.window : 100), recent_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"plateau", question::convergence, {symptoms::plateau}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return c_.window; }
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
      out.push_back(make_finding(question::convergence, symptoms::plateau, severity::info, o.now.step, name(),
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
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_sign_changes", &config::min_sign_changes},
          field<config>{"min_spread", &config::min_spread}};
    }
  };
  oscillation() : oscillation(config{}) {}
  explicit oscillation(config c) : c_(c), losses_(c.window), residuals_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"oscillation", question::convergence, {symptoms::loss_oscillation}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return c_.window; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    losses_.push(o.now.loss);
    if (!losses_.full()) return;
    const double changes = signals::sign_change_rate(losses_);
    // The spread only where the sign changes are over their line: the residuals move with each
    // new line, so their MAD is the one statistic here that costs a pass over the window
    // (issue 18), and white noise (2/3) is far below the line.
    const bool turning = changes > c_.min_sign_changes;
    const double spread = turning ? residual_spread() : std::numeric_limits<double>::quiet_NaN();
    if (fired_.rise(turning && spread > c_.min_spread)) {
      out.push_back(make_finding(question::convergence, symptoms::loss_oscillation, severity::warning, o.now.step, name(),
                                 {{"sign_change_rate", changes}, {"relative_spread", spread}}));
    }
  }

 private:
  // The robust spread (MAD) of the losses around their least-squares line, over the median loss.
  double residual_spread() {
    const auto t = signals::slope(losses_);
    residuals_.clear();
    for (std::size_t i = 0; i < losses_.size(); ++i) {
      residuals_.push(losses_[i] - (t.intercept + t.slope * static_cast<double>(i)));
    }
    return residuals_.mad() / std::fabs(losses_.median());
  }

  config c_;
  signals::window losses_, residuals_;
  edge fired_;
};

/// Q1: dead activations — an activation tensor whose fraction of exact zeros exceeds
/// `max_zero_fraction` (default 0.99: dead ReLUs): at once where the tensor was seen alive
/// before, and on `patience` (2) observations in a row where it never was. Not lower: healthy ReLU feed-forward layers of transformers are sparse — about 97%
/// zeros in trained T5 ("The Lazy Neuron Phenomenon", Li et al. 2022), and 95-97% in the
/// examples' transformer after 200 steps while it was being calibrated (AdamW 3e-3). Critical
/// when a tensor is entirely zero (nothing passes through it), on as many observations. Reports onsets; `first_step` is where the streak began; the location ranks the
/// tensors by zero fraction.
///
/// Why a streak for a tensor never seen alive: a dead layer stays dead, because no gradient
/// reaches what feeds it; a layer that starts at zero comes alive with the first update. A
/// tensor that was alive and is now over the line has died: no wait. word2vec's zero-initialized output
/// vectors give scores that are all zero at step 0 and 36% zero at step 1 (the zoo's round 5:
/// a critical finding in 27 of 27 healthy runs with a streak of 1); so do LoRA's B = 0,
/// zero-initialized residual branches (Fixup, SkipInit) and zero BatchNorm gammas.
class dead_activations {
 public:
  struct config {
    double max_zero_fraction = 0.99;
    std::size_t patience = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_zero_fraction", &config::max_zero_fraction},
          field<config>{"patience", &config::patience}};
    }
  };
  dead_activations() : dead_activations(config{}) {}
  explicit dead_activations(config c) : c_(c) {
    if (c.patience == 0) throw error("dead_activations: patience must be at least 1 observation");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"dead_activations", question::convergence, {symptoms::dead_activations}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (streaks_.size() < o.names.size()) streaks_.resize(o.names.size());  // new names only
    where_.clear();
    double worst = 0.0;
    bool all_zero = false;
    std::int64_t start = -1, zero_start = -1;
    for (const auto& a : o.now.activations) {
      if (a.stats.count == 0) continue;
      const double z = static_cast<double>(a.stats.zeros) / static_cast<double>(a.stats.count);
      streak& t = streaks_[a.id];
      const std::size_t needed = t.alive ? 1 : c_.patience;
      if (z > c_.max_zero_fraction) {
        if (t.over++ == 0) t.start = o.now.step;
      } else {
        t.over = 0;
        t.alive = true;
      }
      if (z >= 1.0) {
        if (t.zero++ == 0) t.zero_start = o.now.step;
      } else {
        t.zero = 0;
      }
      if (t.over < needed) continue;
      where_.emplace_back("act/" + std::string(o.names[a.id]), z);
      worst = std::max(worst, z);
      start = std::max(start, t.start);
      if (t.zero >= needed) {
        all_zero = true;
        zero_start = std::max(zero_start, t.zero_start);
      }
    }
    // A tensor with no non-zero value at all is a layer that passes nothing on: critical.
    const severity level = all_zero ? severity::critical : severity::warning;
    // Delivered again when a second layer dies or one goes from 99% to 100% zeros.
    if (!episode_.report(!where_.empty(), level, where_)) return;
    finding f = make_finding(question::convergence, symptoms::dead_activations, level, o.now.step, name(), {{"max_zero_fraction", worst}});
    f.first_step = all_zero ? std::max(start, zero_start) : start;
    f.where = where_;
    std::sort(f.where.begin(), f.where.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(f));
  }

 private:
  struct streak {
    std::size_t over = 0, zero = 0;  // observations in a row over the line / entirely zero
    std::int64_t start = -1, zero_start = -1;
    bool alive = false;  // seen under the line once
  };
  config c_;
  episode episode_;
  std::vector<streak> streaks_;  // by name id
  std::vector<std::pair<std::string, double>> where_;
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
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_saturated", &config::min_saturated}};
    }
  };
  saturation() : saturation(config{}) {}
  explicit saturation(config c) : c_(std::move(c)), tanh_(c_.tanh_tag), sigmoid_(c_.sigmoid_tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"saturation", question::convergence, {symptoms::saturated_activations}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0;
    std::uint32_t worst_id = 0;
    for (const auto& a : o.now.activations) {
      const double bound = saturated_bound(o.names, a.id, a.stats);
      if (bound > worst) {
        worst = bound;
        worst_id = a.id;
      }
    }
    if (!fired_.rise(worst > c_.min_saturated)) return;
    finding f = make_finding(question::convergence, symptoms::saturated_activations, severity::warning, o.now.step, name(),
                             {{"saturated_fraction_at_least", worst}});
    f.where.emplace_back("act/" + std::string(o.names[worst_id]), worst);
    out.push_back(std::move(f));
  }

 private:
  double saturated_bound(const name_table& names, std::uint32_t id, const tensor_stats& s) {
    if (s.finite() == 0) return 0.0;
    const bool tanh = tanh_(names, id) && s.min >= -1.0 && s.max <= 1.0;
    if (!tanh && !(sigmoid_(names, id) && s.min >= 0.0 && s.max <= 1.0)) return 0.0;
    const double mean = s.mean(), second = s.variance() + mean * mean;  // E[x^2]
    return tanh ? (second - 0.81) / 0.19 : 1.0 - (mean - second) / 0.09;
  }
  config c_;
  name_tag tanh_, sigmoid_;
  edge fired_;
};

/// Q1: parameters that do not change: a parameter tensor whose statistics are bit-identical
/// for `steps` consecutive snapshots while its gradient (same name) is non-zero — frozen by
/// mistake, or an optimizer that does not hold it. Reports onsets per tensor.
class frozen_parameters {
 public:
  struct config {
    std::size_t steps = 3;
    double min_gradient = 1e-6;  ///< lr x max |gradient| (max |gradient| without lr) over max |parameter| below which a gradient is none
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"steps", &config::steps},
          field<config>{"min_gradient", &config::min_gradient}};
    }
  };
  frozen_parameters() : frozen_parameters(config{}) {}
  explicit frozen_parameters(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"frozen_parameters", question::convergence, {symptoms::frozen_parameters}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (state_.size() < o.names.size()) {  // new names only
      state_.resize(o.names.size());
      gradients_.resize(o.names.size());
    }
    std::fill(gradients_.begin(), gradients_.end(), 0.0);
    // A gradient too small to move its parameter in float (a bias followed by BatchNorm, whose
    // gradient is 0 but for rounding: 11 false alarms in the zoo's BatchNorm CNNs) says nothing.
    // With the learning rate known (and not 0, which is what lr_zero looks like), the step
    // lr x max|g| is what must be visible against max|theta|.
    const double scale = o.now.has_lr && std::isfinite(o.now.lr) && o.now.lr > 0.0 ? o.now.lr : 1.0;
    for (const auto& g : o.now.gradients)
      gradients_[g.id] = scale * g.stats.max_abs;
    for (const auto& p : o.now.parameters) {
      auto& st = state_[p.id];
      // Unchanged steps count where a gradient asked it to move; a change starts over; an
      // unchanged step without one neither counts nor clears (no flicker on a bias whose
      // gradient hovers at the threshold).
      if (!(st.seen && st.last == p.stats)) {
        st.run = 0;
        st.last = p.stats;  // equal statistics need no copy (they compare equal to either)
      } else if (gradients_[p.id] > c_.min_gradient * std::max(p.stats.max_abs, 1e-30)) {
        ++st.run;
      }
      st.seen = true;
      if (st.fired.rise(st.run + 1 >= c_.steps)) {
        finding f = make_finding(question::convergence, symptoms::frozen_parameters, severity::warning, o.now.step, name(),
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
    edge fired;
  };
  config c_;
  std::vector<per_tensor> state_;  // by name id
  std::vector<double> gradients_;  // lr x max |g| this step, by name id (apart: reset every step)
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
///
/// Too small means the optimizer made the step small, not the gradient: where the step recorded
/// gradients, a tensor counts only if no weight matrix moved at `min_ratio` (a learning rate too
/// small for all), or if its step per unit of gradient, ||delta theta|| / ||g||, is below
/// `rate_fraction` (0.1) times the median tensor's (a parameter group with its own tiny rate, a
/// tensor left out of the optimizer). A tensor stepped at the others' rate whose gradient is
/// tiny is a gradient matter: a residual branch behind a ReZero gate that starts at 0 gets
/// gate x delta, so SGD moves it by 1e-8 of itself for its first steps (the zoo's round 6,
/// 4 of 27 healthy Fixup/ReZero runs).
class update_ratio {
 public:
  struct config {
    double min_ratio = 1e-7;
    double max_ratio = 1.0;
    std::size_t sustain = 5;
    std::size_t min_elements = 256;
    double rate_fraction = 0.1;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"max_ratio", &config::max_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_elements", &config::min_elements},
          field<config>{"rate_fraction", &config::rate_fraction}};
    }
  };
  update_ratio() : update_ratio(config{}) {}
  explicit update_ratio(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"update_ratio", question::convergence, {symptoms::update_ratio_too_large, symptoms::update_ratio_too_small}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    double worst = 0.0, worst_ratio = 0.0;
    std::uint32_t worst_id = 0;
    bool any = false;
    if (params_.size() < o.names.size()) {  // new names only
      params_.resize(o.names.size());
      norms_.resize(o.names.size());
      rates_.reserve(o.names.size());
    }
    // Norms only for the tensors updated this step: the statistics are kept (a copy costs a
    // third of a norm) for an update recorded at a later step than its parameter.
    for (const auto& p : o.now.parameters)
      params_[p.id] = p.stats;
    if (o.now.updates.empty()) {  // nothing to judge
      (void)fired_.observe(false, c_.sustain);
      return;
    }
    for (const auto& u : o.now.updates)
      norms_[u.id] = params_[u.id].l2_norm();
    if (grads_.size() < o.names.size()) grads_.resize(o.names.size());
    // Where the step recorded gradients, a parameter without one got none (LibTorch leaves the
    // .grad() of an expert that no token reached undefined); where it recorded none, unknown.
    for (auto& g : grads_) g = o.now.gradients.empty() ? -1.0 : 0.0;
    for (const auto& g : o.now.gradients) grads_[g.id] = g.stats.l2_norm();
    // The optimizer's step per unit of gradient, tensor by tensor, and its median; whether any
    // weight matrix moved at min_ratio (see the class comment).
    rates_.clear();
    bool any_moved = false;
    for (const auto& u : o.now.updates) {
      const double norm = norms_[u.id];
      if (u.stats.count < c_.min_elements || !(norm > 0.0)) continue;
      const double step = u.stats.l2_norm();
      any_moved = any_moved || step >= c_.min_ratio * norm;
      if (grads_[u.id] > 0.0) rates_.push_back(step / grads_[u.id]);
    }
    double median_rate = -1.0;  // unknown
    if (!rates_.empty()) {
      const auto mid = rates_.begin() + static_cast<std::ptrdiff_t>(rates_.size() / 2);
      std::nth_element(rates_.begin(), mid, rates_.end());
      median_rate = *mid;
    }
    for (const auto& u : o.now.updates) {
      // norms_ and grads_ are the parameter's and the gradient's of the same id.
      const double norm = norms_[u.id];
      if (u.stats.count < c_.min_elements || !(norm > 0.0)) continue;
      const double step = u.stats.l2_norm(), grad = grads_[u.id];
      const double r = step / norm;
      // A tensor no gradient reached this step (an expert that got no tokens, a bias before
      // BatchNorm) is not updated too little: it was not asked to move (45 false alarms on
      // the zoo's MoE experts).
      const bool reached = grad < 0.0 || grad > 1e-6 * norm;
      // Stepped at the others' rate: its small step is its small gradient's.
      const bool at_rate = any_moved && grad > 0.0 && median_rate > 0.0 && step / grad >= c_.rate_fraction * median_rate;
      const double badness = r > c_.max_ratio ? r / c_.max_ratio
                             : (r < c_.min_ratio && reached && !at_rate) ? c_.min_ratio / (r > 0 ? r : 1e-300)
                                                                         : 0.0;
      if (badness > worst) {
        worst = badness;
        worst_ratio = r;
        worst_id = u.id;
        any = true;
      }
    }
    if (fired_.observe(any, c_.sustain)) {
      finding f = make_finding(question::convergence,
                               worst_ratio > c_.max_ratio ? symptoms::update_ratio_too_large : symptoms::update_ratio_too_small,
                               severity::warning, o.now.step, name(),
                               {{"update_ratio", worst_ratio}, {"min_ratio", c_.min_ratio}, {"max_ratio", c_.max_ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("param/" + std::string(o.names[worst_id]), worst_ratio);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  edge fired_;
  std::vector<tensor_stats> params_;  // last parameter statistics by id
  std::vector<double> norms_;         // their norms, for this step's updates, by id
  std::vector<double> grads_;  // this step's gradient norm by id (-1: the step recorded no gradients)
  std::vector<double> rates_;  // scratch: this step's ||update|| / ||gradient|| per weight matrix
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
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"sustain", &config::sustain}};
    }
  };
  probabilities_as_logits() : probabilities_as_logits(config{}) {}
  explicit probabilities_as_logits(config c) : c_(std::move(c)), logits_(c_.tag) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"probabilities_as_logits", question::convergence, {symptoms::probabilities_as_logits}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const tensor_evidence* hit = nullptr;
    for (const auto& a : o.now.activations) {
      if (!logits_(o.names, a.id) || a.stats.finite() < 2) continue;
      if (a.stats.min >= 0.0 && a.stats.max <= 1.0) hit = &a;
    }
    if (fired_.observe(hit != nullptr, c_.sustain)) {
      finding f = make_finding(question::convergence, symptoms::probabilities_as_logits, severity::warning,
                               o.now.step, name(), {{"min", hit->stats.min}, {"max", hit->stats.max}, {"mean", hit->stats.mean()}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back("act/" + std::string(o.names[hit->id]), hit->stats.max);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  name_tag logits_;
  edge fired_;
};

/// Q1: a loss that cannot be a measurement of learning: the first `steps` (5) recorded losses
/// all within `tolerance` (1e-4) relative of the first (the model is not being trained at all:
/// no optimizer step, a detached graph, a loss of a constant), or a loss of exactly 0 after
/// non-zero losses for `zero_sustain` (2) observations in a row (a mask that drops every
/// target, an empty batch; a float cross-entropy or MSE of real data is never exactly 0).
/// Warnings; evidence a short log shows on its face (seven epoch lines suffice). A loss that
/// comes back from an exact 0 before that reaches 0 on some batches — a hinge or margin loss
/// (a triplet loss: the zoo's held-out round 8, 6 of 27 healthy runs warned at their first
/// zero; single zeros first, runs of up to 14 later in 1500 batch-8 steps) — is info, once,
/// and its later zeros are not reported. A run that converges to a flat loss later is
/// plateau's case.
///
/// Where gradients and parameter updates are recorded, "not trained at all" is checked
/// against them: if, in one of those steps, a tensor had a non-zero gradient and a non-zero
/// update, the loss depends on the parameters and the optimizer moves them; the loss is only
/// insensitive to the first moves. That is info, with the largest update-to-parameter ratio
/// seen. The zoo's round 5: word2vec's zero-initialized output vectors keep the loss at 6 ln 2
/// to six digits for five steps while they move by their whole norm (13 of 27 runs), and a
/// SimCLR encoder at its collapsed start keeps NT-Xent at ln 63 while a warm-up moves it by
/// 4e-5 to 2e-4 of its norm. Each cause named above leaves the gradient zero (a detached
/// graph, a constant) or the update zero (no step, no learning rate, the wrong parameters
/// given to the optimizer); weight decay alone moves a tensor whose gradient is zero.
class constant_loss {
 public:
  struct config {
    std::size_t steps = 5;
    double tolerance = 1e-4;
    std::size_t zero_sustain = 2;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"steps", &config::steps},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"zero_sustain", &config::zero_sustain}};
    }
  };
  constant_loss() : constant_loss(config{}) {}
  explicit constant_loss(config c) : c_(c) {
    if (c.steps < 2 || c.zero_sustain == 0) throw error("constant_loss: steps must be at least 2 and zero_sustain at least 1");
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"constant_loss", question::convergence, {symptoms::loss_constant_from_start, symptoms::loss_exactly_zero}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (seen_ < c_.steps) moved_ = std::max(moved_, largest_update_ratio(o.now));
    if (!o.now.has_loss || !std::isfinite(o.now.loss)) return;
    const double loss = o.now.loss;
    if (seen_ == 0) first_ = loss;
    if (seen_ < c_.steps) {
      same_ = same_ && std::fabs(loss - first_) <= c_.tolerance * std::fabs(first_);
      if (++seen_ == c_.steps && same_) {
        const bool trained = moved_ > 0.0;
        finding f = make_finding(question::convergence, symptoms::loss_constant_from_start,
                                 trained ? severity::info : severity::warning, o.now.step, name(),
                                 {{"loss", loss}, {"first_loss", first_}, {"steps", static_cast<double>(c_.steps)}});
        if (moved_ >= 0.0) f.evidence.emplace_back("largest_update_ratio", moved_);
        out.push_back(std::move(f));
      }
    }
    const bool zero = loss == 0.0 && nonzero_;
    if (zero) {
      if (++zero_run_ == c_.zero_sustain && !intermittent_) {
        finding f = make_finding(question::convergence, symptoms::loss_exactly_zero, severity::warning, o.now.step, name(),
                                 {{"loss", loss}, {"last_nonzero_loss", last_nonzero_},
                                  {"zero_steps", static_cast<double>(zero_run_)}});
        f.first_step = o.now.step - static_cast<std::int64_t>(zero_run_) + 1;
        out.push_back(std::move(f));
      }
    } else if (zero_run_ > 0) {
      // The loss came back from an exact 0: one that reaches 0 on some batches (a hinge or
      // margin loss), said once, as info; its zeros are not a dropped target from then on.
      if (!intermittent_ && zero_run_ < c_.zero_sustain) {
        finding f = make_finding(question::convergence, symptoms::loss_exactly_zero, severity::info, o.now.step, name(),
                                 {{"loss", loss}, {"last_nonzero_loss", last_nonzero_},
                                  {"zero_steps", static_cast<double>(zero_run_)}, {"came_back", 1.0}});
        f.first_step = o.now.step - static_cast<std::int64_t>(zero_run_);
        out.push_back(std::move(f));
      }
      intermittent_ = true;
      zero_run_ = 0;
    }
    if (loss != 0.0) {
      nonzero_ = true;
      last_nonzero_ = loss;
    }
  }

 private:
  /// The largest update-to-parameter norm ratio of the step over the tensors whose gradient
  /// was non-zero (a tensor that moved from 0: +inf); -1 when no such tensor recorded both.
  [[nodiscard]] static double largest_update_ratio(const snapshot& s) {
    double r = -1.0;
    for (const auto& u : s.updates) {
      const auto id = [&](const auto& q) { return q.id == u.id; };
      const auto g = std::find_if(s.gradients.begin(), s.gradients.end(), id);
      const auto p = std::find_if(s.parameters.begin(), s.parameters.end(), id);
      if (g == s.gradients.end() || p == s.parameters.end() || !(g->stats.l2_norm() > 0.0)) continue;
      const double un = u.stats.l2_norm(), pn = p->stats.l2_norm();
      if (!std::isfinite(un) || !std::isfinite(pn)) continue;
      r = std::max(r, pn > 0.0 ? un / pn : un > 0.0 ? std::numeric_limits<double>::infinity() : 0.0);
    }
    return r;
  }

  config c_;
  std::size_t seen_ = 0;
  double first_ = 0.0, last_nonzero_ = 0.0;
  double moved_ = -1.0;  // the largest update ratio of a tensor its gradient reached, over the first `steps` steps; -1: none
  bool same_ = true, nonzero_ = false, intermittent_ = false;
  std::size_t zero_run_ = 0;  // exact zeros in a row, after a non-zero loss
};

/// Q1: the training loss far below the validation loss: at a step with a validation loss,
/// the validation loss at least `min_ratio` (5) times the mean of the last `window` (20)
/// training losses and above it by at least `min_gap` (0.25) of the run's initial training
/// loss (the mean of its first 10; a scale that means the same for cross-entropy and MSE).
/// Once a training loss has been negative (no floor at 0), the ratio line becomes: the gap at
/// least `min_ratio` times the training loss's fall from that initial mean.
/// Memorization: the same batch every step, validation data that differs from training data
/// (a different preprocessing), a leak in the training data. Healthy overfitting of a small
/// data set stays far below: the digits MLP ends at training 0.01, validation 0.1 (a gap of
/// 4% of its initial 2.3). Reports onsets.
class train_val_gap {
 public:
  struct config {
    std::size_t window = 20;
    double min_ratio = 5.0;
    double min_gap = 0.25;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"min_gap", &config::min_gap}};
    }
  };
  train_val_gap() : train_val_gap(config{}) {}
  explicit train_val_gap(config c) : c_(c), recent_(c.window == 0 ? 1 : c.window), first_(10) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"train_val_gap", question::convergence, {symptoms::train_far_below_val}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.has_loss && std::isfinite(s.loss)) {
      recent_.push(s.loss);
      if (!first_.full()) first_.push(s.loss);
      negative_seen_ = negative_seen_ || s.loss < 0.0;
    }
    compare(o, out);
  }
  /// An evaluation recorded after its step closed: the same comparison, against the training
  /// losses seen up to that step.
  void observe_evaluation(const observation& o, std::vector<finding>& out) { compare(o, out); }

 private:
  void compare(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (!s.has_val_loss || !std::isfinite(s.val_loss) || recent_.size() < recent_.capacity() / 2 + 1) return;
    const double train = recent_.mean(), scale = std::fabs(first_.mean());
    const double gap = s.val_loss - train;
    // A ratio of loss values means something only for a loss floored at 0. One that has gone
    // negative once (a Gaussian NLL as it fits; its batches straddle 0 long before their mean
    // does) has no floor to measure from: the gap is then taken against what training gained
    // since its start, min_ratio times that fall (the zoo's round 7: 17 of 27 healthy
    // Gaussian-NLL runs warned on the clamped ratio; a repeated batch there sits at 60-5000x
    // its fall).
    const bool ratio_ok = !negative_seen_ ? s.val_loss >= c_.min_ratio * std::max(train, 0.0)
                                      : gap >= c_.min_ratio * std::max(first_.mean() - train, 0.0);
    const bool wide = ratio_ok && gap >= c_.min_gap * scale && gap > 0.0;
    if (fired_.rise(wide)) {
      out.push_back(make_finding(question::convergence, symptoms::train_far_below_val, severity::warning,
                                 s.step, name(),
                                 {{"val_loss", s.val_loss}, {"recent_train_loss", train}, {"gap", gap},
                                  {"initial_train_loss", scale}}));
    }
  }

  config c_;
  signals::window recent_, first_;
  edge fired_;
  bool negative_seen_ = false;
};

/// Q1: the learning rate in use above the peak the configuration states (`peak`; 0 = not
/// known, silent) by more than `max_factor` (2): a schedule that starts at 10x its peak, a
/// scheduler restored with the wrong state, a learning rate multiplied twice. The monitor
/// adds it with the peak that check_configuration is told. Reports onsets.
class configured_lr {
 public:
  struct config {
    double peak = 0.0;
    double max_factor = 2.0;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"peak", &config::peak},
          field<config>{"max_factor", &config::max_factor}};
    }
  };
  configured_lr() : configured_lr(config{}) {}
  explicit configured_lr(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"configured_lr", question::convergence, {symptoms::lr_above_configured_peak}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!(c_.peak > 0.0) || !o.now.has_lr || !std::isfinite(o.now.lr)) return;
    if (fired_.rise(o.now.lr > c_.max_factor * c_.peak)) {
      out.push_back(make_finding(question::convergence, symptoms::lr_above_configured_peak, severity::warning,
                                 o.now.step, name(),
                                 {{"lr", o.now.lr}, {"configured_peak", c_.peak}, {"factor", o.now.lr / c_.peak}}));
    }
  }

 private:
  config c_;
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
  /// A tensor detector (for `per_tensor`), not in the default set.
  static constexpr detector_info about{"tensor_norm_jump", question::convergence, {symptoms::tensor_norm_jump}};
  [[nodiscard]] std::string_view name() const { return about.name; }
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
      finding f = make_finding(question::convergence, symptoms::tensor_norm_jump, severity::warning, o.now.step, name(),
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
