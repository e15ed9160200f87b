// SPDX-License-Identifier: Apache-2.0
/// Q1 `tensor_norm_jump`: one tensor's norm jumping far above its own baseline (a tensor detector).
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
  static constexpr detector_info about{"tensor_norm_jump", question::convergence, {symptoms::tensor_norm_jump}, "one tensor's norm jumping far above its own baseline (a tensor detector)", {.restarts_on_change = true, .consequence = "at once"}};
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
      finding f = make_finding(question::convergence, symptoms::tensor_norm_jump, severity::info, o.now.step, name(),
                               {{"norm", norm}, {"baseline_median", median}, {"ratio_to_median", r}});
      f.where.emplace_back(std::string(tensor), r);
      out.push_back(escalate(std::move(f), {.horizon = 1}));
    }
  }

 private:
  config c_;
  signals::window norms_;
  edge fired_;
};

}  // namespace mldiag::detectors
