// SPDX-License-Identifier: Apache-2.0
/// `observer`: what the adapters hand evidence to — the monitor, the recorder, or a type of yours
/// with the same `observe` calls.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/evidence/observations.hpp"
#include "mldiag/stats/tensor_stats.hpp"
#include "mldiag/vocab/metric.hpp"
#include "mldiag/vocab/role.hpp"

#include <concepts>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// Takes evidence through `observe`: a tensor's statistics by role and name, a scalar, a
/// layer's time, row entropies. `mldiag::monitor` and `mldiag::recorder` model it; the LibTorch,
/// dlib and Eigen adapters and the layer profiler talk to either through it.
template <class O>
concept observer = requires(O& o, std::string_view name, const tensor_stats& s, double v) {
  o.observe(role::gradient, name, s);
  o.observe(scalar::loss, v);
  o.observe(layer_timing{name, v});
  o.observe(row_entropy{name, entropy_stats{}});
  o.observe(gradient_cosines{});
};

/// Takes one kind of evidence through `observe` (a sink of layer times needs only
/// `observe(const layer_timing&)`).
template <class O, class E>
concept observes = requires(O& o, const E& e) { o.observe(e); };

}  // namespace mldiag
