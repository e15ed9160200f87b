// SPDX-License-Identifier: Apache-2.0
/// `tap`: one tensor an inference engine hands to mldiag at a point of its forward pass — which
/// layer, which tokens, which phase, which request and rank, stored in which format.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/inference/format.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::inference {

/// Prefill reads the prompt in one pass; decode produces one token per step.
enum class phase : std::uint8_t { prefill = 0, decode = 1 };

[[nodiscard]] constexpr std::string_view name(phase p) noexcept { return p == phase::prefill ? "prefill" : "decode"; }

/// What a tapped tensor is, which decides the checks it gets: every kind gets the non-finite
/// sentinel and the format's range; `residual` also the outlier channels; `kv_cache` the
/// padding-slot check (rows from `valid_rows` on are padding).
enum class tap_kind : std::uint8_t { activation = 0, residual = 1, kv_cache = 2, logits = 3 };

/// One tensor at one point of the forward pass, rows x cols, row-major (a row per token
/// position, or per cache slot). `values` is read during `observe` only.
///
/// **Example**: `mon.observe({.name = "blocks.3.mlp.fc1", .phase = phase::decode, .position = 17,
/// .rows = 1, .cols = 256, .values = h, .format = {number_format::fp16}});`
struct tap {
  std::string_view name;
  inference::phase phase = inference::phase::decode;
  tap_kind kind = tap_kind::activation;
  std::int64_t position = 0;  ///< the token position of the first row
  std::size_t rows = 1;
  std::size_t cols = 0;
  std::span<const float> values;
  storage_format format{};
  std::int32_t request = 0;
  std::int32_t rank = 0;
  /// kv_cache only: rows [valid_rows, rows) are padding slots no token was written to. Unset
  /// (the default, SIZE_MAX) means every row is valid.
  std::size_t valid_rows = static_cast<std::size_t>(-1);
};

}  // namespace mldiag::inference
