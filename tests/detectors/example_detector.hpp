// SPDX-License-Identifier: Apache-2.0
/// An example of a detector of one's own, written as the library's are (one file: its symptom,
/// its description, its typed config with `fields()`, and `observe` deciding through
/// `escalate`); adding_a_detector_test.cpp adds it to a catalogue with one line.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

// [own_detector]
namespace example {

/// The symptom it raises: a constant of its own, beside the library's (`mldiag::symptoms`).
namespace symptoms {
inline constexpr mldiag::symptom loss_below_floor{"loss below its floor"};
}  // namespace symptoms

/// Q1: the loss below a floor the task cannot go under (the entropy of its labels, the loss
/// of a teacher being distilled, a label-noise floor) for `sustain` (3) observations in a row:
/// the loss no longer measures what it should — a leak of the labels into the inputs, a mask
/// that drops the hard targets, a reduction over the wrong axis. Off while `floor` is unset
/// (negative infinity). A warning once it has held `sustain` observations; reports onsets, with
/// `first_step` where the run began.
class loss_below_floor {
 public:
  struct config {
    double floor = -std::numeric_limits<double>::infinity();
    std::size_t sustain = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{mldiag::detectors::field<config>{"floor", &config::floor},
                        mldiag::detectors::field<config>{"sustain", &config::sustain}};
    }
  };
  loss_below_floor() : loss_below_floor(config{}) {}
  explicit loss_below_floor(config c) : c_(c) {
    if (std::isnan(c.floor) || c.sustain == 0)
      throw mldiag::error("loss_below_floor: need a floor that is a number and sustain >= 1 (observations in a row)");
  }
  /// What this detector is: its name (`make_detector`'s key), question, symptoms and summary.
  static constexpr mldiag::detectors::detector_info about{"loss_below_floor", mldiag::question::convergence,
                                                          {symptoms::loss_below_floor},
                                                          "a loss below the floor its task allows"};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const mldiag::observation& o, std::vector<mldiag::finding>& out) {
    if (!o.now.loss || !std::isfinite(*o.now.loss)) return;  // an absent or non-finite loss: non_finite's
    const double loss = *o.now.loss;
    if (!below_.observe(loss < c_.floor, c_.sustain)) return;
    mldiag::finding f = mldiag::make_finding(mldiag::question::convergence, symptoms::loss_below_floor, mldiag::severity::info,
                                             o.now.step, name(), {{"loss", loss}, {"floor", c_.floor}});
    f.first_step = below_.start(o.now.step);
    out.push_back(mldiag::detectors::escalate(std::move(f), {.held = below_.run(), .horizon = c_.sustain,
                                                             .note = "no loss of this task goes below its floor"}));
  }

 private:
  config c_;
  mldiag::detectors::onset below_;
};

static_assert(mldiag::detectors::detector<loss_below_floor>);

}  // namespace example
// [own_detector]
