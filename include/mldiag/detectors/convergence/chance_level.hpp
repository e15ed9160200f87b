// SPDX-License-Identifier: Apache-2.0
/// Q1 `chance_level`: a cross-entropy loss still at chance level after training.
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

/// Q1: the loss of a cross-entropy classifier still at chance level, ln(classes), after
/// `warmup` steps: the mean of the last `window` losses above (1 - `tolerance`) ln C. Nothing
/// is being learned — labels that do not match the inputs (shuffled, misaligned, read from
/// the wrong column), a dead network, a learning rate of zero. Off unless `classes` > 1.
/// With `chance` > 0 (task::chance_loss: ln(batch) for an in-batch contrastive loss, any
/// declared level of an uninformed model) that level replaces ln C, classes or not.
/// Defaults: warmup 200, window 20, tolerance 0.1. Not 50: some healthy recipes sit at chance
/// for about 100 steps before they start to learn (LibTorch's MNIST example with SGD 0.01,
/// batch 64; docs/accuracy.md), while a model whose labels do not match its inputs stays at
/// chance for good.
class chance_level {
 public:
  struct config {
    std::size_t classes = 0;
    std::size_t warmup = 200;
    std::size_t window = 20;
    double tolerance = 0.1;
    double chance = 0.0;  ///< the declared chance level (0: ln(classes))
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"classes", &config::classes},
          field<config>{"warmup", &config::warmup},
          field<config>{"window", &config::window},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"chance", &config::chance}};
    }
  };
  chance_level() : chance_level(config{}) {}
  explicit chance_level(config c) : c_(c), recent_(c.window == 0 ? 1 : c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"chance_level", question::convergence, {symptoms::loss_at_chance_level}, "a cross-entropy loss still at chance level after training", {.restarts_on_change = true, .judges_loss_progress = true, .consequence = "nothing learned after the warm-up: the harm itself"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  [[nodiscard]] std::size_t needs_losses() const { return on() ? std::max(c_.warmup, c_.window) : 0; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (!on() || !o.now.loss || !std::isfinite(*o.now.loss)) return;
    recent_.push(*o.now.loss);
    if (++seen_ < c_.warmup || !recent_.full()) return;
    const double chance = c_.chance > 0.0 ? c_.chance : std::log(static_cast<double>(c_.classes)), mean = recent_.mean();
    if (fired_.rise(mean > (1.0 - c_.tolerance) * chance)) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::loss_at_chance_level, severity::info, o.now.step,
                                          name(), {{"recent_mean", mean}, {c_.chance > 0.0 ? "declared_chance" : "ln_classes", chance}, {"fraction_of_chance", mean / chance}}),
                             {.harm = true, .note = "nothing learned after the warm-up"}));
    }
  }

 private:
  [[nodiscard]] bool on() const noexcept { return c_.classes > 1 || c_.chance > 0.0; }
  config c_;
  signals::window recent_;
  std::size_t seen_ = 0;
  edge fired_;
};

}  // namespace mldiag::detectors
