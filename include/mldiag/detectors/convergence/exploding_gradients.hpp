// SPDX-License-Identifier: Apache-2.0
/// Q1 `exploding_gradients`: a gradient norm that jumps or grows far above its baseline, judged with the loss.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1: exploding gradients, two ways, each judged with the loss where the loss is recorded
/// (a gradient norm that grows while the loss falls is a change of regime, not an explosion: a
/// network leaving its initial plateau grows its gradient norm 10-90x as its loss halves,
/// docs/accuracy.md):
/// - a **jump**: the norm at `warn_ratio` (10) times the median of the last `window` (100)
///   norms before the jump, critical from `critical_ratio` (100) — once the loss has answered
///   and not come back: where a loss is recorded, size alone decides nothing. A finding when
///   the loss is non-finite, when no loss is recorded at all, when the norm stays up for
///   `sustain` (10) steps without the loss falling by `rebase_improvement` (10%), when the loss
///   answered decisively (below), or when it answered marginally (above (1 + `loss_rise`) times
///   its recent median on `loss_up_steps` jump steps) and is not back within `loss_rise` of its
///   median before the jump (the median of the last three losses since) within `come_back` (10)
///   steps, or goes on up to a decisive level; back in time, it is info, "the loss came back"
///   (issue 38: harm is what lasts). After one jump whose loss did not come back, the next
///   marginal answer decides at once. If the loss falls that much meanwhile, the jump was a new regime: info, and the
///   baseline restarts from the recent norms. Until one of these decides, the jump is info,
///   once. Findings of one jump carry its first step. Two
///   corroborations keep one hard batch from counting (near-zero losses on small tables, a
///   network at the edge of stability; docs/accuracy.md#exploding_gradients): the jump must
///   leave the baseline's own step-to-step
///   jitter, log10(ratio) at least `min_jitter_z` (5) times the robust spread (MAD) of the
///   baseline's consecutive log10 differences over sqrt 2 — a smooth growth has a tiny jitter,
///   a near-zero loss's norms swing over decades — and the loss must be up on
///   `loss_up_steps` (2) jump steps in a row, not on one, unless it rose decisively: to
///   `decisive_factor` (1.5) times its median, `decisive_rise` (0.25) above it and, once 5
///   losses are known, `decisive_mads` (10) robust standard deviations of the last 50 above
///   it — loss_spike's three lines for one observation out of the batch noise (the 104B's
///   3.11 -> 7.71, one step after its norm went up 20x, is hundreds of MADs out; a CNN at SGD
///   0.2 leaving its plateau went 1.2 -> 3.28 for one step against a median of 2.16 moving
///   down fast, 6 MADs, and trained to 0.05). Healthy llm.c
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
/// every weight by about the learning rate (losses 2.3 -> 23-40 at step 1 with norms
/// 30-380x, back in 4-8 steps, and the runs train; docs/accuracy.md#exploding_gradients) —
/// and not back
/// within `come_back` steps, or non-finite, is the jump's verdict from its first step, after
/// which decisive evidence decides at once. A jump without decisive evidence joins the
/// baseline. A new regime's baseline forms again from the
/// jump's own norms (a SimCLR encoder leaving its collapsed start grows its norm 1000x in 8
/// steps while its loss falls 4.14 -> 3.68). At step 0 a layer that
/// starts at zero leaves the gradient of what feeds it zero (word2vec's first norm was a tenth
/// of its next), and a baseline of one step is no baseline.
///
/// Where the gradients are clipped (`clip_norm`, 0 = not clipped or not known; the monitor sets
/// it from `task::max_grad_norm`), a jump above the bound was bounded before the
/// optimizer applied it; that is said in the finding's evidence. Clipped or not, a jump the
/// loss did not answer is info: an LSTM clipped at 5 whose norm jumped 142x once and
/// recovered, and a healthy normalizing flow's unclipped one-step jumps of 139x and 103x
/// (docs/accuracy.md#exploding_gradients). A clipped jump the loss answered is graded by what
/// the optimizer applied, the bound over the baseline's median, not by the raw norm: critical
/// only where that reaches `critical_ratio`. Where no loss is recorded, the size decides at
/// once, critical from `critical_ratio`.
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
    // 5: healthy small-batch runs near a zero loss jump 10-60x at 1.3-4.2 (their norms swing
    // over decades); gradients never zeroed grow at 30-90, x255 inputs jump at 4-4.4 (found at
    // step 0 by input_scale). docs/accuracy.md#exploding_gradients.
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
    /// Steps a jump the loss answered waits for the loss to come back (first_steps).
    std::size_t come_back = 10;
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
          field<config>{"clip_norm", &config::clip_norm},
          field<config>{"come_back", &config::come_back}};
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
  static constexpr detector_info about{"exploding_gradients", question::convergence, {symptoms::grad_norm_grew_loss_fell, symptoms::grad_norm_jumped_unanswered, symptoms::first_steps_overshot, symptoms::grad_norm_jump_recovered, symptoms::exploding_gradients}, "a gradient norm that jumps or grows far above its baseline, judged with the loss", {.restarts_on_change = true, .consequence = "the loss rising with the norm and not back within come_back steps (decisively at once), or the norm staying up sustain steps without progress; a jump while the loss falls is info"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    const bool loss_bad = s.loss && !std::isfinite(*s.loss);
    const double loss_median = losses_.empty() ? std::numeric_limits<double>::quiet_NaN() : losses_.median();
    // A rise out of the batch noise too: late in training a batch of 64 sits 5% above the
    // median all the time (CNNs at losses near 0.02; docs/accuracy.md#exploding_gradients).
    const double mad = losses_.size() >= 5 ? losses_.mad() : 0.0;
    const double loss = s.loss.value_or(std::numeric_limits<double>::quiet_NaN());
    const bool loss_up = loss_bad || (s.loss && loss_median > 0.0 &&
                                      loss > loss_median + std::max(c_.loss_rise * loss_median, 3.0 * mad));
    const bool loss_decisive = loss_up && !loss_bad && loss >= c_.decisive_factor * loss_median &&
                               loss - loss_median >= std::max(c_.decisive_rise, c_.decisive_mads * mad);
    seen_loss_ = seen_loss_ || s.loss.has_value();
    if (s.loss && std::isfinite(loss)) {
      if (!losses_.empty()) loss_steps_.push(loss - losses_.back());
      losses_.push(loss);
      recent_losses_.push(loss);
      if (pending_) after_.push(loss);
    }
    const double loss_now = recent_losses_.empty() ? std::numeric_limits<double>::quiet_NaN() : recent_losses_.mean();
    const auto global = s.global_grad_norm();
    if (!global) return;
    const double norm = *global;
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
      const bool first = !settled && jump_start_ < static_cast<std::int64_t>(c_.settle);
      // A jump the loss answered only marginally (up by `loss_rise` and 3 MADs on
      // `loss_up_steps` jump steps, not decisively) waits, at any step, for the loss to come
      // back (first_steps): a rise gone within `come_back` steps harmed nothing, one that stays
      // is the explosion's verdict (docs/accuracy.md#exploding_gradients). Decisive is harm at once.
      const bool marginal = settled && loss_up_run_ >= c_.loss_up_steps && !loss_decisive;
      if (seen_loss_ && !loss_bad && !unrecovered_ &&
          (marginal || (first && (loss_decisive || (ratio >= c_.critical_ratio && !clipped && !fell))))) {
        pending_ = true;
        pending_steps_ = 0;
        pending_peak_ = ratio;
        pending_clipped_ = clipped;
        after_.clear();
        return;
      }
      // Size alone decides nothing where the loss is recorded (issue 38: severity is earned by
      // consequences): a flow's coupling layer jumping 139x for one step, the loss not answering,
      // is a hard batch; critical_ratio grades a jump the loss did answer.
      const bool decided = !seen_loss_ || loss_bad || loss_decisive || (unrecovered_ && marginal) ||
                           (settled && jump_steps_ >= c_.sustain && !fell);
      if (decided) {
        finding f = make(o, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                             {"loss_rose", loss_up ? 1.0 : 0.0}, {"steps_up", static_cast<double>(jump_steps_)}});
        if (clipped) f.evidence.emplace_back("clip_norm", c_.clip_norm);
        f.first_step = jump_start_;
        // A clipped jump reached the weights at the bound: its size is graded by what was
        // applied (an actor-critic's 160x jump clipped at 0.5 moved them 3x; issue 38).
        const double applied = clipped && median > 0.0 ? std::min(ratio, c_.clip_norm / median) : ratio;
        out.push_back(escalate(std::move(f), {.harm = true, .magnitude = applied, .critical_at = c_.critical_ratio,
                                              .note = "the jump went on with the loss up, unknown or not improving"}));
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
        finding f = make(o, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                             {"loss_at_jump", jump_loss_}, {"loss_now", loss_now}});
        f.symptom = symptoms::grad_norm_grew_loss_fell;
        f.first_step = jump_start_;
        out.push_back(escalate(std::move(f), {.expected = true, .note = "the loss made progress meanwhile: a new regime"}));
        baseline_.clear();
        jitter_.clear();
        // From the norms of the new regime only (the jump's steps, at most `growth_window`): a
        // baseline of fewer than `settle` forms again, as at the start.
        const std::size_t from = recent_.size() - std::min(recent_.size(), jump_steps_);
        for (std::size_t i = from; i < recent_.size(); ++i) push_baseline(recent_[i]);
        jump_start_ = -1;
      } else if (jump_steps_ == 1) {
        finding f = make(o, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio}});
        f.symptom = symptoms::grad_norm_jumped_unanswered;
        out.push_back(escalate(std::move(f), {.note = "the loss has not answered yet"}));
      }
    } else {
      jump_start_ = -1;
      push_baseline(norm);
    }
    growth(o, loss_now, out);
  }

 private:
  /// A jump the loss answered marginally, or decisively in training's first steps (from
  /// `jump_start_`, against the loss median before it,
  /// `jump_ref_loss_`), one step later and on: the loss comes back (the median of the losses
  /// since, two at least, within `loss_rise` of the median before): info, and the norm joins
  /// the baseline; or it does not come back within `come_back` steps, goes non-finite, or (outside
  /// training's first steps) goes on up to a decisive level: the jump's verdict, from its first step.
  void first_steps(const observation& o, double norm, double median, double ratio, bool loss_bad,
                   std::vector<finding>& out) {
    ++pending_steps_;
    pending_peak_ = std::max(pending_peak_, ratio);
    const double after = after_.median();
    // Two losses since at least, or `come_back` where that is fewer (a short series' epochs).
    const std::size_t needed = std::min<std::size_t>(2, std::max<std::size_t>(c_.come_back, 1));
    if (!loss_bad && after_.size() >= needed && after <= (1.0 + c_.loss_rise) * jump_ref_loss_) {
      finding f = make(o, {{"peak_ratio_to_median", pending_peak_}, {"baseline_median", median},
                           {"loss_before", jump_ref_loss_}, {"loss_after", after},
                           {"steps_to_recover", static_cast<double>(pending_steps_)}});
      f.symptom = jump_start_ < static_cast<std::int64_t>(c_.settle) ? symptoms::first_steps_overshot
                                                                      : symptoms::grad_norm_jump_recovered;
      f.first_step = jump_start_;
      out.push_back(escalate(std::move(f), {.expected = true, .note = "the loss came back within its noise"}));
      pending_ = false;
      jump_start_ = -1;
      push_baseline(norm);
      return;
    }
    // Outside training's first steps, a loss that went on up with the norm, its last two or
    // three since the jump at `decisive_factor` (1.5) times its level before and `decisive_rise`
    // above it, is harm already (BLOOM-176B's 2.2 -> 4.4 as its norm went 0.24 -> 145); there,
    // Adagrad's and RMSprop's overshoots of 10-400x come back, and wait their `come_back` steps.
    const bool first = jump_start_ < static_cast<std::int64_t>(c_.settle);
    const bool worse = !first && after_.size() >= 2 && after >= c_.decisive_factor * jump_ref_loss_ &&
                       after - jump_ref_loss_ >= c_.decisive_rise;
    if (!loss_bad && !worse && pending_steps_ < c_.come_back) return;
    finding f = make(o, {{"grad_norm", norm}, {"baseline_median", median}, {"ratio_to_median", ratio},
                         {"peak_ratio_to_median", pending_peak_}, {"loss_before", jump_ref_loss_},
                         {"loss_after", after_.empty() ? std::numeric_limits<double>::quiet_NaN() : after},
                         {"steps_up", static_cast<double>(pending_steps_)}});
    f.first_step = jump_start_;
    // A clipped jump is graded by what the optimizer applied (the bound over the median).
    const double applied = pending_clipped_ && median > 0.0 ? std::min(pending_peak_, c_.clip_norm / median) : pending_peak_;
    if (pending_clipped_) f.evidence.emplace_back("clip_norm", c_.clip_norm);
    out.push_back(escalate(std::move(f), {.harm = true, .magnitude = applied, .critical_at = c_.critical_ratio,
                                          .note = "the loss did not come back"}));
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
  /// plateau left slowly: skip-gram runs fall 4.1589 -> 4.1229 (0.9%) while their
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
      // "grown" 15x at a few hard batches); while norms already rise as a network leaves its
      // plateau, the last ten are the level (an MLP at SGD 0.2 warned at its plateau exit with
      // the baseline's median alone). docs/accuracy.md#exploding_gradients.
      anchor_ = recent_.median();
      if (baseline_.size() >= recent_.capacity()) anchor_ = std::max(anchor_, baseline_.median());
      anchor_loss_ = loss_now;
      anchor_step_ = o.now.step;
    }
    if (!recent_.full() || !(anchor_ > 0.0)) return;
    const double g = recent_.median() / anchor_;
    const bool grown = g >= c_.warn_ratio && !progressed(anchor_loss_, loss_now);
    if (growth_.observe(grown, std::max<std::size_t>(c_.growth_sustain, 1))) {
      finding f = make(o, {{"recent_median_norm", recent_.median()}, {"anchor_median_norm", anchor_}, {"growth", g},
                           {"anchor_step", static_cast<double>(anchor_step_)}, {"recent_loss", loss_now},
                           {"anchor_loss", anchor_loss_}});
      f.first_step = anchor_step_;
      out.push_back(escalate(std::move(f), {.harm = true, .magnitude = g, .critical_at = c_.critical_ratio,
                                            .note = "the loss made no progress while the norm grew"}));
    }
  }

  // The finding with its evidence and the largest gradients; its severity is the policy's.
  finding make(const observation& o, std::vector<std::pair<std::string, double>> evidence) const {
    finding f = make_finding(question::convergence, symptoms::exploding_gradients, severity::info, o.now.step, name(), std::move(evidence));
    for (const auto& g : o.now.gradients) f.where.emplace_back(location(role::gradient, o.names[g.id]), g.stats.l2_norm());
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
  bool pending_ = false, unrecovered_ = false, pending_clipped_ = false;
  std::size_t pending_steps_ = 0;
  double pending_peak_ = 0.0;
  bool seen_loss_ = false;
  edge growth_;
};

}  // namespace mldiag::detectors
