// SPDX-License-Identifier: Apache-2.0
/// The diagnostic snapshot: the evidence as the flat key/value pairs people already log.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/signals/window.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// A value of the diagnostic snapshot: a number, a flag or a word.
using diagnostic_value = std::variant<double, bool, std::string>;
/// Key/value pairs in a fixed order (gradients, parameters, then loss).
using diagnostic = std::vector<std::pair<std::string, diagnostic_value>>;

/// Keys: `grad/<name>/norm`, `grad/<name>/has_nan`, `grad/<name>/has_inf`,
/// `param/<name>/norm` (from the newest snapshot), `loss/recent_mean`, `loss/recent_std`
/// (over the last `window` recorded finite losses) and `loss/trend`: "decreasing" when the
/// least-squares slope of those losses is negative with t-statistic below `-t_critical`,
/// else "flat_or_increasing" — a regression over the window and its significance, not a
/// comparison of two noisy points. Allocates (strings); call it when you report, not per step.
[[nodiscard]] inline diagnostic diagnostic_snapshot(const history& past, const name_table& names,
                                                    std::size_t window = 100, double t_critical = 2.0) {
  diagnostic out;
  if (past.empty()) return out;
  const snapshot& now = past.back();
  for (const auto& g : now.gradients) {
    const std::string prefix = "grad/" + std::string(names[g.id]);
    out.emplace_back(prefix + "/norm", g.stats.l2_norm());
    out.emplace_back(prefix + "/has_nan", g.stats.nan > 0);
    out.emplace_back(prefix + "/has_inf", g.stats.pos_inf + g.stats.neg_inf > 0);
  }
  for (const auto& p : now.parameters) out.emplace_back("param/" + std::string(names[p.id]) + "/norm", p.stats.l2_norm());
  signals::window losses(window == 0 ? 1 : window);
  for (std::size_t i = 0; i < past.size(); ++i) {
    const snapshot& s = past[i];
    if (s.loss && std::isfinite(*s.loss)) losses.push(*s.loss);
  }
  if (!losses.empty()) {
    out.emplace_back("loss/recent_mean", losses.mean());
    out.emplace_back("loss/recent_std", losses.size() > 1 ? losses.stddev() : 0.0);
    const auto t = signals::slope(losses);
    const bool decreasing = t.n >= 3 && t.slope < 0.0 && t.t_stat < -t_critical;
    out.emplace_back("loss/trend", std::string(decreasing ? "decreasing" : "flat_or_increasing"));
  }
  return out;
}

}  // namespace mldiag
