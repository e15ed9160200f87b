// SPDX-License-Identifier: Apache-2.0
/// Q1 `frozen_parameters`: parameters that do not change while their gradients ask them to.
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

/// Q1: parameters that do not change: a parameter tensor whose statistics are bit-identical
/// for `steps` consecutive snapshots while its gradient (same name) is non-zero — frozen by
/// mistake, or an optimizer that does not hold it. Reports onsets per tensor.
class frozen_parameters {
 public:
  struct config {
    std::size_t steps = 3;
    double min_gradient = 1e-6;  ///< lr x max |gradient| (max |gradient| without lr) over max |parameter| below which a gradient is none
    /// The optimizer stops moving once it meets its tolerance (L-BFGS; the monitor sets it for
    /// `task::line_search`): every parameter unchanged at once is its convergence (info), one
    /// tensor left behind while others move is still frozen.
    bool stops_at_tolerance = false;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"steps", &config::steps},
          field<config>{"min_gradient", &config::min_gradient},
          field<config>{"stops_at_tolerance", &config::stops_at_tolerance}};
    }
  };
  frozen_parameters() : frozen_parameters(config{}) {}
  explicit frozen_parameters(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"frozen_parameters", question::convergence, {symptoms::frozen_parameters}, "parameters that do not change while their gradients ask them to", {.restarts_on_change = true, .consequence = "held steps steps while the gradients ask for change"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (state_.size() < o.names.size()) {  // new names only
      state_.resize(o.names.size());
      gradients_.resize(o.names.size());
    }
    std::fill(gradients_.begin(), gradients_.end(), 0.0);
    // A gradient too small to move its parameter in float (a bias followed by BatchNorm, whose
    // gradient is 0 but for rounding; docs/accuracy.md#frozen_parameters) says nothing.
    // With the learning rate known (and not 0, which is what lr_zero looks like), the step
    // lr x max|g| is what must be visible against max|theta|.
    const double scale = o.now.lr && std::isfinite(*o.now.lr) && *o.now.lr > 0.0 ? *o.now.lr : 1.0;
    for (const auto& g : o.now.gradients)
      gradients_[g.id] = scale * g.stats.max_abs;
    // Every parameter of the step unchanged since the last: the optimizer took no step.
    bool none_moved = !o.now.parameters.empty();
    for (const auto& p : o.now.parameters)
      none_moved = none_moved && state_[p.id].seen && state_[p.id].last == p.stats;
    const bool converged = c_.stops_at_tolerance && none_moved;
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
        finding f = make_finding(question::convergence, symptoms::frozen_parameters, severity::info, o.now.step, name(),
                                 {{"unchanged_steps", static_cast<double>(st.run + 1)}});
        f.where.emplace_back(location(role::parameter, o.names[p.id]), p.stats.l2_norm());
        out.push_back(escalate(std::move(f), {.expected = converged, .held = st.run + 1, .horizon = std::max<std::size_t>(c_.steps, 1),
                                              .note = converged ? "every parameter stopped at once: the line-search optimizer met its tolerance (task::line_search)"
                                                                : "its gradient asked it to move"}));
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

}  // namespace mldiag::detectors
