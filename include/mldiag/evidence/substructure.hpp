// SPDX-License-Identifier: Apache-2.0
/// `substructure_patterns`: which substructure (attention, FFN, embedding, MoE, norm) a tensor or layer name belongs to.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// The substructures of the method's hierarchical decomposition (substructure -> operation ->
/// forward/backward). `moe` holds a mixture-of-experts layer's router (gate) and its experts.
enum class substructure : std::uint8_t { attention, ffn, embedding, moe, norm, other };
inline constexpr std::size_t substructure_count = 6;

[[nodiscard]] constexpr std::string_view substructure_name(substructure s) noexcept {
  switch (s) {
    case substructure::attention:
      return "attention";
    case substructure::ffn:
      return "ffn";
    case substructure::embedding:
      return "embedding";
    case substructure::moe:
      return "moe";
    case substructure::norm:
      return "norm";
    case substructure::other:
      return "other";
  }
  return "unknown substructure";
}

/// Name patterns that sort layer names into substructures.
///
/// A name is split at '.' into components; the components are read left to right, and the
/// first component that contains one of the patterns (tried in order) decides. Left to right
/// because the outer module is the substructure: `blocks.3.mlp.gate_proj` is FFN (Llama's gated
/// MLP), `blocks.3.moe.experts.2.fc1` is MoE, `blocks.3.moe.gate` is MoE. A name no pattern
/// matches is `other` (the LM head, a block's own glue). The profiler's roll-ups and the
/// protocol's localization both sort names with it.
///
/// Defaults: `attn`, `attention`, `q_proj`, `k_proj`, `v_proj`, `o_proj` -> attention; `router`,
/// `experts`, `moe` -> moe; `mlp`, `ffn`, `fc1`, `fc2`, `feed_forward`, `up_proj`, `down_proj` ->
/// ffn; `embed`, `wte`, `wpe`, `tok_` -> embedding; `gate` -> moe (last); `norm`, `ln_` -> norm (first).
///
/// **Example**
/// ```cpp
/// using mldiag::substructure;
/// mldiag::substructure_patterns p({{"mixer", substructure::attention},
///                                              {"mlp", substructure::ffn}});
/// assert(p.classify("layers.0.mixer.in_proj") == substructure::attention);
/// ```
class substructure_patterns {
 public:
  struct rule {
    std::string pattern;
    substructure kind;
  };

  /// The default patterns.
  substructure_patterns()
      // First: within one component a norm wins over the module it is named after
      // (Llama's `post_attention_layernorm` is a norm, not attention).
      : rules_{{"norm", substructure::norm},
               {"ln_", substructure::norm},
               {"attn", substructure::attention},
               {"attention", substructure::attention},
               {"q_proj", substructure::attention},
               {"k_proj", substructure::attention},
               {"v_proj", substructure::attention},
               {"o_proj", substructure::attention},
               {"router", substructure::moe},
               {"experts", substructure::moe},
               {"moe", substructure::moe},
               {"mlp", substructure::ffn},
               {"ffn", substructure::ffn},
               {"fc1", substructure::ffn},
               {"fc2", substructure::ffn},
               {"feed_forward", substructure::ffn},
               {"up_proj", substructure::ffn},
               {"down_proj", substructure::ffn},
               {"embed", substructure::embedding},
               {"wte", substructure::embedding},
               {"wpe", substructure::embedding},
               {"tok_", substructure::embedding},

               // Last: inside one component every other pattern wins ("mlp_gate" is FFN);
               // Llama's "mlp.gate_proj" is FFN already because "mlp" comes first.
               {"gate", substructure::moe}} {}

  explicit substructure_patterns(std::vector<rule> rules) : rules_(std::move(rules)) {
    for (const auto& r : rules_) {
      if (r.pattern.empty())
        throw error("substructure_patterns: an empty pattern matches every name; remove it");
      if (r.pattern.find('.') != std::string::npos) {
        throw error(
            "substructure_patterns: pattern '" + r.pattern +
            "' contains '.', but patterns are matched inside one name component; drop the dot");
      }
    }
  }

  [[nodiscard]] substructure classify(std::string_view name) const noexcept {
    while (!name.empty()) {
      const auto dot = name.find('.');
      const std::string_view component = name.substr(0, dot);
      for (const auto& r : rules_) {
        if (component.find(r.pattern) != std::string_view::npos) return r.kind;
      }
      if (dot == std::string_view::npos) break;
      name.remove_prefix(dot + 1);
    }
    return substructure::other;
  }

  [[nodiscard]] std::span<const rule> rules() const noexcept { return rules_; }

 private:
  std::vector<rule> rules_;
};

}  // namespace mldiag
