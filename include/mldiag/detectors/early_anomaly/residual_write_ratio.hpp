// SPDX-License-Identifier: Apache-2.0
/// Q2 `residual_write_ratio`: blocks that write more into the residual stream than it carries.
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

/// Q2: residual write ratio ||block output|| / ||residual input|| above `max_ratio` for
/// `sustain` steps in a row. The method's line is 1.0 (a block writes more than the stream
/// carries); the default is 2.0 because small healthy models sit at 1: the examples'
/// 4-block transformer (d = 64, AdamW 1e-3) holds 1.0-1.16 in its middle blocks for tens of
/// steps, while a residual branch scaled 10x reaches about 10 (docs/accuracy.md); pass 1.0
/// for the method's strict line. A block is its role::residual_input and role::block_output
/// recorded under one name.
/// The first `skip_first` blocks in recording order (1) are not judged: the first block reads
/// the bare token embedding, and rewriting it is its known job (GPT-2's first MLP acts as an
/// extended embedding), so its ratio above 1 is healthy (the examples' transformer: 1.7 by
/// step 22 with a 0.02-scale embedding, 1.08 at step 40 as shipped).
class residual_write_ratio {
 public:
  struct config {
    double max_ratio = 2.0;
    std::size_t sustain = 5;
    std::size_t skip_first = 1;
    std::size_t persist = 100;  ///< observations above the line before it is a warning without a consequence
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_ratio", &config::max_ratio},
          field<config>{"sustain", &config::sustain},
          field<config>{"skip_first", &config::skip_first},
          field<config>{"persist", &config::persist}};
    }
  };
  residual_write_ratio() : residual_write_ratio(config{}) {}
  explicit residual_write_ratio(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"residual_write_ratio", question::early_anomaly, {symptoms::residual_write_ratio_too_large}, "blocks that write more into the residual stream than it carries", {.consequence = "info until harm follows within 500 steps (the loss or validation worsens, or the loss turns non-finite) or it lasts persist (100) observations"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (inputs_.size() < o.names.size()) inputs_.resize(o.names.size());  // new names only
    for (const auto& in : o.now.residual_inputs) inputs_[in.id] = in.stats.l2_norm();
    double worst = 0.0;
    std::uint32_t worst_id = 0;
    for (std::size_t i = c_.skip_first; i < o.now.block_outputs.size(); ++i) {
      const auto& b = o.now.block_outputs[i];
      const double in = inputs_[b.id];
      if (!(in > 0.0)) continue;
      const double r = b.stats.l2_norm() / in;
      if (r > worst) {
        worst = r;
        worst_id = b.id;
      }
    }
    const bool starts = fired_.observe(worst > c_.max_ratio, c_.sustain);
    const bool lasted = lasting_.reached(worst > c_.max_ratio, std::max(c_.persist, c_.sustain));
    if (starts || lasted) {
      finding f = make_finding(question::early_anomaly, symptoms::residual_write_ratio_too_large, severity::info, o.now.step,
                               name(), {{"write_ratio", worst}, {"max_ratio", c_.max_ratio}});
      f.first_step = o.now.step - static_cast<std::int64_t>(lasting_.held()) + 1;
      f.where.emplace_back(std::string(o.names[worst_id]), worst);
      out.push_back(escalate(std::move(f), {.awaits_consequence = true, .held = lasting_.held(),
                                            .horizon = std::max(c_.persist, c_.sustain)}));
    }
  }

 private:
  config c_;
  std::vector<double> inputs_;
  edge fired_;
  persistence_line lasting_;
};

}  // namespace mldiag::detectors
