// SPDX-License-Identifier: Apache-2.0
/// Q2 `loss_spike`: a loss that rises far above its robust running baseline.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
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

namespace mldiag::inline MLDIAG_ABI::detectors {

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
/// docs/accuracy.md#loss_spike.) Intermittent or consistent, as the method's
/// phase 2 asks: once a run of outliers has recovered before it was reported (an excursion)
/// within the last `window` observations, the loss is one whose batches stray, and a spike must
/// hold for `noisy_sustain` (5) observations, not `sustain`: two hard batches in a row are then
/// chance (one batch in 30 holds a confidently wrong row on a small, nearly separable table),
/// while real spikes hold for tens of iterations. In training's first `settle` (5) steps
/// (step numbers below it; a log excerpt that starts later is judged on its first points),
/// until the baseline holds `settle` losses, only the one-observation verdict decides and
/// every other loss joins the baseline: the robust spread of two or three batch losses is
/// chance (a batch-8 Gaussian NLL went 0.45, 0.49, 0.76, 0.78, 1.6x a median of two, and an
/// AdamW warm-up 0.71, 0.68, 0.68, 1.16, 1.02; docs/accuracy.md#loss_spike). The same holds
/// after a declared change (`on_change`), whatever the step number. `method_rule()`
/// is the method's table rule alone: loss > 10x the moving average, on one observation.
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
    /// The loss has a lower bound, so a rise reads as a ratio to its level. The monitor turns it
    /// off for `task::loss_floor = no_lower_bound` (a loss that crosses 0 has no ratio): the
    /// detector then stands aside, and the loss's harm is read in the share of its progress
    /// (detectors::harm_watch).
    bool bounded_loss = true;
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
          field<config>{"settle", &config::settle},
          field<config>{"bounded_loss", &config::bounded_loss}};
    }
  };
  loss_spike() : loss_spike(config{}) {}
  explicit loss_spike(config c) : c_(c), baseline_(c.window) {
    if (c.factor <= 1.0 || c.sustain == 0) throw error("loss_spike: need factor > 1 and sustain >= 1");
  }
  static loss_spike method_rule() {
    return loss_spike(config{.factor = 10.0, .sustain = 1, .window = 50, .min_history = 2, .critical_factor = 10.0,
                             .min_rise = 0.0, .min_mads = 0.0, .immediate_factor = 10.0, .immediate_min_rise = 0.0,
                             .noisy_sustain = 1, .settle = 0});
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"loss_spike", question::early_anomaly, {symptoms::loss_spike}, "a loss that rises far above its robust running baseline", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "the spike held sustain observations (the progress measure worsened); one observation 10x above everything is critical at once"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  /// A declared change (any kind) opens a new baseline, formed by its first `settle` losses
  /// whatever their size, as at training's start: a schedule's restart lifts the loss for a few
  /// steps, which a baseline of two or three losses would read as a spike.
  void on_change(mldiag::change) {
    *this = loss_spike(c_);
    restarted_ = true;
  }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (!s.loss || !std::isfinite(*s.loss) || !c_.bounded_loss) return;
    const double loss = *s.loss;
    ++seen_;
    if (baseline_.size() < c_.min_history) {
      baseline_.push(loss);
      return;
    }
    const double median = baseline_.median();
    const double ratio = loss / median;
    const double noise = c_.min_mads > 0.0 ? baseline_.mad() : 0.0;
    if (!(median > 0.0) || ratio < c_.factor || loss - median < c_.min_rise || loss - median < c_.min_mads * noise) {
      if (run_ > 0 && !reported_) last_excursion_ = seen_;
      baseline_.push(loss);
      run_ = 0;
      reported_ = false;
      return;
    }
    const bool noisy = last_excursion_ > 0 && seen_ - last_excursion_ <= c_.window;
    // One observation is unmistakable only at immediate_factor times anything the window holds
    // too, and where the batches have not strayed: one confidently wrong row in a batch of 8
    // lifts its mean by up to ~2 nats (0.14 -> 1.8, 13x the median, 2-4x the window's largest
    // batch, in batch-8 runs of 1500-2000 steps; docs/accuracy.md#loss_spike), and then waits
    // like any other.
    const bool immediate = ratio >= c_.immediate_factor && loss - median >= c_.immediate_min_rise && !noisy &&
                           loss >= c_.immediate_factor * baseline_.max();
    // Training's first `settle` steps (step numbers below it): a baseline of two or three
    // batch losses has no noise estimate (their MAD is chance); only the one-observation
    // verdict decides, and the loss joins it. An excerpt of a log that starts later is judged
    // on its first points (the BigScience logbook's 13B spike is its excerpt's third line).
    if (baseline_.size() < c_.settle && (s.step < static_cast<std::int64_t>(c_.settle) || restarted_) && !immediate) {
      baseline_.push(loss);
      run_ = 0;
      reported_ = false;
      return;
    }
    if (run_++ == 0) run_start_ = s.step;
    peak_ = run_ == 1 ? ratio : std::max(peak_, ratio);
    if (run_ < (noisy ? std::max(c_.sustain, c_.noisy_sustain) : c_.sustain) && !immediate) return;
    reported_ = true;
    finding f = make_finding(question::early_anomaly, symptoms::loss_spike, severity::info, s.step, name());
    f.first_step = run_start_;
    f.evidence = {{"loss", loss}, {"baseline_median", median}, {"ratio_to_median", ratio},
                  {"peak_ratio", peak_}, {"observations_above", static_cast<double>(run_)},
                  {"mads_above", noise > 0.0 ? (loss - median) / noise : std::numeric_limits<double>::infinity()}};
    // It has held for its sustain (the detector reports only then) or is unmistakable at once.
    out.push_back(escalate(std::move(f), {.unambiguous = immediate, .horizon = 1, .magnitude = peak_,
                                          .critical_at = c_.critical_factor,
                                          .note = immediate ? "one observation far above anything the window holds" : ""}));
  }

 private:
  config c_;
  signals::window baseline_;
  std::size_t run_ = 0, seen_ = 0, last_excursion_ = 0;
  std::int64_t run_start_ = -1;
  double peak_ = 0.0;
  bool reported_ = false;
  bool restarted_ = false;  // a declared change opened the baseline (on_change)
};

}  // namespace mldiag::detectors
