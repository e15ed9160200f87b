// SPDX-License-Identifier: Apache-2.0
/// Q1 `persistent_gradients`: gradients that agree step after step: gradients never zeroed.
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

/// Q1: gradients that persist from step to step, the signature of gradients never zeroed
/// (a missing or misplaced `zero_grad()`), from a gradient_persistence's two cosines: over the
/// last `window` (20) steps, the median cosine between consecutive gradients at least
/// `min_cosine` (0.85) and the median cosine between consecutive increments at least
/// `min_increment_cosine` (0), for `sustain` (30) steps in a row. The first says the gradients
/// agree; the second says why: a healthy run's increments are batch noise minus batch noise
/// (about -0.5) even when one direction dominates every batch, while a never-zeroed gradient's
/// increment is a fresh gradient. Where the loss also moved up on at least
/// `min_loss_rises` (10%) of the window's steps (the batches differ), info that awaits its
/// consequence: a warning when the loss or validation worsens (the monitor's harm_watch), or
/// when the agreement has lasted `persist` (100) more steps (never-zeroed gradients agree for as
/// long as they accumulate; a healthy run's early agreement ends);
/// plain info when the loss falls
/// smoothly (full-batch training, whose gradients and increments agree legitimately), when no
/// loss is recorded, or when the increments' cosine was not recorded. Reports the onset;
/// `first_step` is where the agreement began.
///
/// The lines come from recorded cosines (docs/accuracy.md#persistent_gradients): gradients
/// never zeroed agree at 0.95-1.0 with increments at 0.05-0.99 (medians) unless clipped far
/// below their norm (a ViT clipped at norm 1 reaches 0.65 only); healthy mini-batch runs sit
/// at 0.1-0.2, a transformer's first 20 steps at 0.91 for two steps, and autoencoders pulled
/// toward the mean image at 0.9-1.0 for hundreds of steps — too long for the consecutive
/// cosine alone — with increments at -0.5 (the longest healthy 20-step stretch with both
/// medians over their lines: 26 steps, hence `sustain` 30).
class persistent_gradients {
 public:
  struct config {
    std::size_t window = 20;
    double min_cosine = 0.85;
    double min_increment_cosine = 0.0;
    std::size_t sustain = 30;
    double min_loss_rises = 0.1;
    std::size_t persist = 100;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_cosine", &config::min_cosine},
          field<config>{"min_increment_cosine", &config::min_increment_cosine},
          field<config>{"sustain", &config::sustain},
          field<config>{"min_loss_rises", &config::min_loss_rises},
          field<config>{"persist", &config::persist}};
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
  static constexpr detector_info about{"persistent_gradients", question::convergence, {symptoms::gradients_persist, symptoms::gradients_nearly_identical}, "gradients that agree step after step: gradients never zeroed", {.restarts_on_change = true, .consequence = "the loss or validation worsening while gradients that agree step after step accumulate, or the agreement lasting persist (100) more steps"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const snapshot& s = o.now;
    if (s.loss && std::isfinite(*s.loss)) {
      if (has_last_loss_) rises_.push(*s.loss > last_loss_ ? 1.0 : 0.0);
      last_loss_ = *s.loss;
      has_last_loss_ = true;
    }
    if (!s.grad_cosine || !std::isfinite(*s.grad_cosine)) return;
    cosines_.push(*s.grad_cosine);
    const bool has_increments = s.grad_increment_cosine && std::isfinite(*s.grad_increment_cosine);
    if (has_increments) increments_.push(*s.grad_increment_cosine);
    else increments_.clear();
    // Without the increments the agreement is judged alone, and can only be info.
    const bool increments_known = increments_.full();
    const bool high = cosines_.full() && cosines_.median() >= c_.min_cosine &&
                      (!increments_known || increments_.median() >= c_.min_increment_cosine);
    if (!high) {
      fired_.reset();
      return;
    }
    const bool onset = fired_.observe(true, c_.sustain);
    // Still agreeing `persist` observations after the onset: gradients that accumulate go on
    // agreeing for as long as they are never zeroed; a healthy run's early agreement ends.
    const bool lasted = c_.persist > 0 && fired_.run() == c_.sustain + c_.persist;
    if (!onset && !lasted) return;
    const double rise_fraction = rises_.empty() ? std::numeric_limits<double>::quiet_NaN() : rises_.mean();
    const bool warn = increments_known && rises_.full() && rise_fraction >= c_.min_loss_rises;
    if (lasted && !warn) return;  // full-batch agreement is expected however long it lasts
    finding f = make_finding(question::convergence,
                             warn ? symptoms::gradients_persist
                                  : symptoms::gradients_nearly_identical,
                             severity::info, s.step, name(),
                             {{"median_cosine", cosines_.median()},
                              {"median_increment_cosine",
                               increments_known ? increments_.median() : std::numeric_limits<double>::quiet_NaN()},
                              {"steps", static_cast<double>(fired_.run() + c_.window - 1)},
                              {"loss_rise_fraction", rise_fraction}});
    f.first_step = fired_.start(s.step) - static_cast<std::int64_t>(c_.window) + 1;
    // Batches that differ (the loss moves up on some steps) make the agreement a claim that
    // gradients accumulate; its consequence is the run's: the loss or validation worsening, as
    // gradients never zeroed do (2.3 -> 84), escalated by the monitor (harm_watch). The
    // agreement alone is no harm: some healthy networks agree for their first 50 steps and
    // train (docs/accuracy.md#persistent_gradients). A loss that falls
    // smoothly is full-batch training, whose gradients agree legitimately.
    out.push_back(escalate(std::move(f), {.awaits_consequence = warn,
                                          .held = lasted ? c_.persist : 1,
                                          .horizon = warn ? c_.persist : 0,
                                          .note = warn ? "the loss moved up on some steps while the gradients agreed"
                                                       : "the loss fell smoothly, or the increments are not known"}));
  }

 private:
  config c_;
  signals::window cosines_, increments_, rises_;
  double last_loss_ = 0.0;
  bool has_last_loss_ = false;
  edge fired_;
};

}  // namespace mldiag::detectors
