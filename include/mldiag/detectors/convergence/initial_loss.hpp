// SPDX-License-Identifier: Apache-2.0
/// Q1 `initial_loss`: a first cross-entropy loss far from ln(classes).
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

/// Q1: the first recorded loss of a cross-entropy classifier far from ln(classes), the loss of
/// a uniform guess (wrong loss function, labels or initialization scale). Off unless
/// `classes` > 1. Warning when |loss - ln C| > max(`tolerance` * ln C, `min_difference`)
/// (0.25, llm.c GPT-2 starts at 11.009 against ln 50257 = 10.825, 1.7% off; 0.5 nats: the
/// first loss is one mini-batch of a randomly initialized model, whose logits spread by about
/// 0.6 and, on a separable table, already point the right way — UCI tables with 2-3 classes
/// start at 0.40-1.44 against ln C = 0.69-1.10, past the relative line alone
/// (docs/accuracy.md#initial_loss); for 8 classes or more the relative line is the larger).
/// With `chance` > 0 (task::chance_loss) the first loss is judged against that declared level
/// instead, classes or not.
class initial_loss {
 public:
  struct config {
    std::size_t classes = 0;
    double tolerance = thresholds::chance_tolerance;
    double min_difference = thresholds::chance_min_difference;
    double chance = 0.0;  ///< the declared chance level (0: ln(classes))
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"classes", &config::classes},
          field<config>{"tolerance", &config::tolerance},
          field<config>{"min_difference", &config::min_difference},
          field<config>{"chance", &config::chance}};
    }
  };
  initial_loss() : initial_loss(config{}) {}
  explicit initial_loss(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"initial_loss", question::convergence, {symptoms::initial_loss_far_from_chance}, "a first cross-entropy loss far from ln(classes)", {.judges_loss_progress = true, .consequence = "a wrong loss, labels or initialization: at once"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  /// Whether a first loss is what a uniform guess over `classes` gives, by this detector's
  /// line (the one policy the phase-1 checks use too).
  [[nodiscard]] static bool near_chance(double loss, std::size_t classes, const config& c) {
    return thresholds::near_chance(loss, static_cast<double>(classes), c.tolerance, c.min_difference);
  }
  void observe(const observation& o, std::vector<finding>& out) {
    const bool declared = c_.chance > 0.0;
    if (done_ || (c_.classes <= 1 && !declared) || !o.now.loss || !std::isfinite(*o.now.loss)) return;
    done_ = true;
    const double loss = *o.now.loss;
    const double expected = declared ? c_.chance : std::log(static_cast<double>(c_.classes));
    const double off = std::fabs(loss - expected) / expected;
    const bool near = declared ? thresholds::near_chance(loss, std::exp(expected), c_.tolerance, c_.min_difference)
                               : near_chance(loss, c_.classes, c_);
    if (!near) {
      out.push_back(escalate(make_finding(question::convergence, symptoms::initial_loss_far_from_chance, severity::info,
                                          o.now.step, name(),
                                          {{"loss", loss}, {declared ? "declared_chance" : "ln_classes", expected}, {"relative_difference", off}}),
                             {.horizon = 1, .note = "a uniform guess costs ln(classes): the loss, labels or initialization differ"}));
    }
  }

 private:
  config c_;
  bool done_ = false;
};

}  // namespace mldiag::detectors
