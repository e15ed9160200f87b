// SPDX-License-Identifier: Apache-2.0
// The example engine's tap, as mldiag's inference monitor reads it: the same tensor, with the
// engine's storage format (int8 with its scale) and kind. diagnose.cpp and
// bench/inference_cost_bench.cpp both hand the monitor what this gives.
#pragma once

#include "engine.hpp"

#include "mldiag/inference/tap.hpp"

namespace examples::inference {

namespace mi = mldiag::inference;

/// The monitor's tap for one of the engine's (attention probabilities are an activation to it).
inline mi::tap convert(const tap& t) {
  mi::tap o;
  o.name = t.name;
  o.phase = t.phase == phase::prefill ? mi::phase::prefill : mi::phase::decode;
  switch (t.kind) {
    case tap_kind::residual: o.kind = mi::tap_kind::residual; break;
    case tap_kind::kv_cache: o.kind = mi::tap_kind::kv_cache; break;
    case tap_kind::logits: o.kind = mi::tap_kind::logits; break;
    default: o.kind = mi::tap_kind::activation; break;
  }
  o.position = t.position;
  o.rows = t.rows;
  o.cols = t.cols;
  o.values = t.values;
  switch (t.format) {
    case number_format::bf16: o.format = {mi::number_format::bf16}; break;
    case number_format::fp16: o.format = {mi::number_format::fp16}; break;
    case number_format::int8: o.format = {mi::number_format::int8, static_cast<double>(t.scale)}; break;
    default: o.format = {mi::number_format::fp32}; break;
  }
  o.request = t.request;
  o.rank = t.rank;
  o.valid_rows = t.valid_rows;
  return o;
}

}  // namespace examples::inference
