// SPDX-License-Identifier: Apache-2.0
/// Training FLOPs of dense and mixture-of-experts transformers, from their shape (Q3 evidence).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <cstdint>  // std::uint64_t
#include <limits>   // overflow checks
#include <string>

// What is counted, and why (docs/efficiency.md, "FLOPs and MFU", derives every number):
//
//   training FLOPs per token = 6·N + 12·L·H·Q·T      (PaLM, Chowdhery et al. 2022, Appendix B)
//
// 6·N: a weight used in one matmul costs 2 FLOPs per token forward (multiply and add) and 4
// backward (gradient of the input and of the weight): Kaplan et al. 2020, "Scaling Laws",
// section 2.1 and Table 1. 12·L·H·Q·T: the two attention matmuls (Q·Kᵀ and scores·V), 2·T·H·Q
// FLOPs each per token and layer forward, times 3 for forward + backward. Kaplan's Table 1
// lists only the first of the two (C_forward = 2N + 2·n_layer·n_ctx·d_attn); PaLM counts both,
// and so do we. Neither halves the attention term for the causal mask; `attention_count::causal`
// does, for kernels that skip masked tiles (FlashAttention). GQA/MQA do not change the
// attention term (every query head still meets T keys and values); they shrink the k and v
// projections, which the parameter count models through `kv_heads`.
//
// Not counted, as in both papers: norms, softmax, activations, residual adds, optimizer step,
// and recomputation (activation checkpointing) — model FLOPs, not hardware FLOPs.

namespace mldiag::inline MLDIAG_ABI::efficiency {

/// How a normalization layer is parameterized: LayerNorm has a gain and a bias (2·d),
/// RMSNorm only a gain (d).
enum class norm_kind : std::uint8_t { layer_norm, rms_norm };

/// Which layers are mixture-of-experts layers, and how they route. `experts == 0` means a dense
/// model (every other field must then stay 0 / default).
///
/// **Example** (Mixtral-8x7B: 8 experts, top-2, every layer)
/// ```cpp
/// mldiag::efficiency::moe_shape moe{.experts = 8, .top_k = 2};
/// ```
struct moe_shape {
  std::uint64_t experts = 0;  ///< E routed experts per MoE layer; 0: dense model
  std::uint64_t top_k = 0;    ///< routed experts each token goes to (1 <= top_k <= E)
  std::uint64_t shared_experts =
      0;  ///< always-on experts per MoE layer (DeepSeekMoE), counted fully
  std::uint64_t expert_ffn_hidden = 0;  ///< hidden size of one expert's FFN; 0: `ffn_hidden`
  std::uint64_t first_layer = 0;        ///< layers before this one (0-based) are dense
  std::uint64_t layer_step = 1;  ///< 1: every layer from `first_layer` on; 2: every other one
  bool router_bias = false;      ///< the router (d → E linear) has a bias
};

/// The shape of a decoder-only transformer: enough to count its parameters and its FLOPs.
/// Pre-norm blocks (two norms per layer) and one final norm are assumed.
///
/// **Example** (GPT-2 124M)
/// ```cpp
/// mldiag::efficiency::transformer_shape gpt2{
///     .vocab = 50257, .d_model = 768, .layers = 12, .heads = 12, .ffn_hidden = 3072,
///     .tied_embeddings = true, .learned_positions = 1024, .bias = true,
///     .norm = mldiag::efficiency::norm_kind::layer_norm};
/// ```
struct transformer_shape {
  std::uint64_t vocab = 0;       ///< V: rows of the token embedding
  std::uint64_t d_model = 0;     ///< d: width of the residual stream
  std::uint64_t layers = 0;      ///< L
  std::uint64_t heads = 0;       ///< H: query heads
  std::uint64_t head_dim = 0;    ///< Q; 0: d_model / heads
  std::uint64_t kv_heads = 0;    ///< key/value heads (GQA, MQA); 0: `heads` (multi-head)
  std::uint64_t ffn_hidden = 0;  ///< hidden size of the (dense) FFN
  bool gated_ffn = false;        ///< SwiGLU/GeGLU: 3 matrices (gate, up, down) instead of 2
  bool tied_embeddings = false;  ///< the output (logit) matrix is the token embedding
  std::uint64_t learned_positions =
      0;              ///< rows of a learned position embedding; 0 (RoPE, ALiBi): none
  bool bias = false;  ///< linear layers have biases (GPT-2 yes, Llama no)
  norm_kind norm = norm_kind::rms_norm;
  moe_shape moe{};
};

/// A transformer's parameters by part. Each tied matrix is counted once. `active` is what one
/// token uses: only `top_k` of each MoE layer's routed experts (for a dense model, `total`).
struct parameter_count {
  std::uint64_t total = 0;
  std::uint64_t active = 0;
  std::uint64_t token_embedding = 0;        ///< V·d (also the output matrix when tied)
  std::uint64_t position_embedding = 0;     ///< positions·d
  std::uint64_t output_embedding = 0;       ///< V·d when untied, 0 when tied
  std::uint64_t attention = 0;              ///< q, k, v, o projections (and biases), all layers
  std::uint64_t ffn = 0;                    ///< dense layers' FFNs and the shared experts
  std::uint64_t routed_experts = 0;         ///< every routed expert of every MoE layer
  std::uint64_t routed_experts_active = 0;  ///< top_k routed experts per MoE layer
  std::uint64_t router = 0;                 ///< d·E (+E) per MoE layer
  std::uint64_t norms = 0;                  ///< 2 per layer and the final one
  std::uint64_t moe_layers = 0;

  /// Kaplan et al.'s N: everything but the token and position embeddings and the untied
  /// output matrix.
  [[nodiscard]] std::uint64_t non_embedding() const {
    return total - token_embedding - position_embedding - output_embedding;
  }
  /// `non_embedding()` with only the active experts.
  [[nodiscard]] std::uint64_t active_non_embedding() const {
    return active - token_embedding - position_embedding - output_embedding;
  }
};

/// Which embedding parameters enter N in 6·N.
enum class embedding_count : std::uint8_t {
  /// Every (active) parameter: N is the model's parameter count as people quote it (PaLM's
  /// "540B", nanoGPT's MFU estimate). The default. Overcounts: an input lookup costs no FLOPs.
  all,
  /// The output (logit) matrix — the token embedding when tied — but not the input lookups
  /// (token and position embeddings). The count closest to the matmuls a step really does;
  /// it is Narayanan et al. 2021's (Megatron) count, whose per-token form is
  /// 72·l·h² + 12·l·h·s + 6·h·V for a 4h-FFN model without biases.
  output_only,
  /// Kaplan et al. 2020's non-embedding N (Table 1): no token, position or output embedding.
  /// Undercounts the logit matmul (6·d·V per token: 27% of GPT-2 124M's FLOPs).
  none,
};

/// Whether the attention term counts the full T×T score matrix or its causal half.
enum class attention_count : std::uint8_t {
  full,    ///< 12·L·H·Q·T, as PaLM publishes it (the default)
  causal,  ///< 6·L·H·Q·T: what kernels that skip masked tiles do (FlashAttention)
};

/// The choices of the FLOP count; the defaults are the formula as published (PaLM).
struct flop_options {
  embedding_count embeddings = embedding_count::all;
  attention_count attention = attention_count::full;
};

/// Training (forward + backward) FLOPs per token, and their parts. Exact integers.
struct token_flops {
  std::uint64_t counted_parameters = 0;  ///< N: active parameters, per `embedding_count`
  std::uint64_t parameter_flops = 0;     ///< 6·N
  std::uint64_t router_flops = 0;        ///< the router's share of 6·N: 6·(d·E (+E))·MoE layers
  std::uint64_t attention_flops = 0;     ///< 12·L·H·Q·T (or half of it, causal)
  std::uint64_t total = 0;               ///< parameter_flops + attention_flops
};

namespace detail {

// Shapes are small numbers, but a typo (an extra zero in vocab, a negative value cast to
// uint64) must not wrap around into a plausible count: every product and sum is checked.
[[nodiscard]] inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    throw error(
        "the parameter or FLOP count overflows 64 bits: check the transformer shape "
        "(a negative value converted to unsigned, or an extra digit)");
  return a * b;
}
[[nodiscard]] inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) {
  if (b > std::numeric_limits<std::uint64_t>::max() - a)
    throw error(
        "the parameter or FLOP count overflows 64 bits: check the transformer shape "
        "(a negative value converted to unsigned, or an extra digit)");
  return a + b;
}
[[nodiscard]] inline std::uint64_t mul3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return checked_mul(checked_mul(a, b), c);
}

inline void require_positive(std::uint64_t v, const char* field) {
  if (v == 0)
    throw error(std::string("transformer_shape.") + field + " is 0: give the model's value");
}

[[nodiscard]] inline std::uint64_t head_dim_of(const transformer_shape& s) {
  if (s.head_dim != 0) return s.head_dim;
  if (s.d_model % s.heads != 0)
    throw error(
        "transformer_shape.head_dim is 0 and d_model is not a multiple of heads: give head_dim");
  return s.d_model / s.heads;
}

[[nodiscard]] inline std::uint64_t kv_heads_of(const transformer_shape& s) {
  const std::uint64_t kv = s.kv_heads == 0 ? s.heads : s.kv_heads;
  if (kv > s.heads || s.heads % kv != 0)
    throw error(
        "transformer_shape.kv_heads must divide heads (GQA groups query heads evenly; "
        "0 means multi-head attention)");
  return kv;
}

// Number of MoE layers: first_layer, first_layer + step, ... below `layers`.
[[nodiscard]] inline std::uint64_t moe_layers_of(const transformer_shape& s) {
  const moe_shape& m = s.moe;
  if (m.experts == 0) {
    if (m.top_k != 0 || m.shared_experts != 0 || m.expert_ffn_hidden != 0 || m.first_layer != 0)
      throw error(
          "transformer_shape.moe sets routing fields but experts is 0: give experts, or "
          "leave moe empty for a dense model");
    return 0;
  }
  if (m.top_k == 0 || m.top_k > m.experts)
    throw error("transformer_shape.moe.top_k must be between 1 and experts");
  if (m.layer_step == 0) throw error("transformer_shape.moe.layer_step is 0: 1 means every layer");
  if (m.first_layer >= s.layers)
    throw error("transformer_shape.moe.first_layer is not below layers: no layer would be MoE");
  return (s.layers - m.first_layer + m.layer_step - 1) / m.layer_step;
}

// Parameters of one FFN of hidden size f (weights, and biases when the model has them).
[[nodiscard]] inline std::uint64_t ffn_params(const transformer_shape& s, std::uint64_t f) {
  const std::uint64_t matrices = s.gated_ffn ? 3 : 2;
  std::uint64_t p = mul3(matrices, s.d_model, f);
  // Biases: one per hidden unit for each input-side matrix (up, and gate when gated), d for down.
  if (s.bias) p = checked_add(p, checked_add(checked_mul(matrices - 1, f), s.d_model));
  return p;
}

}  // namespace detail

/// Counts a transformer's parameters from its shape. Throws `mldiag::error` for a shape that
/// is incomplete (a zero size), inconsistent (kv_heads not dividing heads, top_k > experts) or
/// whose count would overflow 64 bits.
///
/// **Example**
/// ```cpp
/// auto p = mldiag::efficiency::count_parameters(gpt2);  // p.total == 124'439'808
/// ```
[[nodiscard]] inline parameter_count count_parameters(const transformer_shape& s) {
  using detail::checked_add;
  using detail::checked_mul;
  using detail::mul3;
  detail::require_positive(s.vocab, "vocab");
  detail::require_positive(s.d_model, "d_model");
  detail::require_positive(s.layers, "layers");
  detail::require_positive(s.heads, "heads");
  detail::require_positive(s.ffn_hidden, "ffn_hidden");
  const std::uint64_t d = s.d_model;
  const std::uint64_t q = detail::head_dim_of(s);
  const std::uint64_t kv = detail::kv_heads_of(s);
  const std::uint64_t moe_layers = detail::moe_layers_of(s);
  const std::uint64_t dense_layers = s.layers - moe_layers;

  parameter_count p;
  p.moe_layers = moe_layers;
  p.token_embedding = checked_mul(s.vocab, d);
  p.position_embedding = checked_mul(s.learned_positions, d);
  p.output_embedding = s.tied_embeddings ? 0 : p.token_embedding;

  // Per layer: q and o are d × H·Q, k and v are d × KV·Q.
  const std::uint64_t hq = checked_mul(s.heads, q);
  const std::uint64_t kvq = checked_mul(kv, q);
  std::uint64_t attention =
      checked_add(checked_mul(2, checked_mul(d, hq)), checked_mul(2, checked_mul(d, kvq)));
  if (s.bias)
    attention = checked_add(attention, checked_add(checked_add(hq, checked_mul(2, kvq)), d));
  p.attention = checked_mul(attention, s.layers);

  p.ffn = checked_mul(detail::ffn_params(s, s.ffn_hidden), dense_layers);
  if (moe_layers != 0) {
    const std::uint64_t f = s.moe.expert_ffn_hidden == 0 ? s.ffn_hidden : s.moe.expert_ffn_hidden;
    const std::uint64_t expert = detail::ffn_params(s, f);
    p.ffn = checked_add(p.ffn, mul3(expert, s.moe.shared_experts, moe_layers));
    p.routed_experts = mul3(expert, s.moe.experts, moe_layers);
    p.routed_experts_active = mul3(expert, s.moe.top_k, moe_layers);
    const std::uint64_t router =
        checked_add(checked_mul(d, s.moe.experts), s.moe.router_bias ? s.moe.experts : 0);
    p.router = checked_mul(router, moe_layers);
  }

  const std::uint64_t per_norm = s.norm == norm_kind::layer_norm ? checked_mul(2, d) : d;
  p.norms = checked_mul(per_norm, checked_add(checked_mul(2, s.layers), 1));

  std::uint64_t shared = checked_add(p.token_embedding, p.position_embedding);
  shared = checked_add(shared, p.output_embedding);
  shared = checked_add(shared, p.attention);
  shared = checked_add(shared, p.ffn);
  shared = checked_add(shared, p.router);
  shared = checked_add(shared, p.norms);
  p.total = checked_add(shared, p.routed_experts);
  p.active = checked_add(shared, p.routed_experts_active);
  return p;
}

/// Training FLOPs per token at sequence length `sequence` (T): 6·N + 12·L·H·Q·T with the
/// choices of `options` (defaults: every active parameter in N, full attention — the PaLM
/// formula as published). For MoE models N is the active count: `top_k` of E routed experts
/// per MoE layer, shared experts, attention, router and embeddings in full. Throws
/// `mldiag::error` for a bad shape, `sequence == 0` or overflow.
///
/// **Example**
/// ```cpp
/// auto f = mldiag::efficiency::training_flops_per_token(gpt2, 1024);
/// // f.total == 859'885'056 == 6 · 124'439'808 + 12 · 12 · 12 · 64 · 1024
/// ```
[[nodiscard]] inline token_flops training_flops_per_token(const transformer_shape& s,
                                                          std::uint64_t sequence,
                                                          flop_options options = {}) {
  if (sequence == 0)
    throw error("training_flops_per_token: the sequence length is 0: give the tokens per sequence");
  const parameter_count p = count_parameters(s);
  std::uint64_t n = p.active;
  switch (options.embeddings) {
    case embedding_count::all:
      break;
    case embedding_count::output_only:
      // The tied matrix is the output matmul: only its lookup role is free.
      n -= s.tied_embeddings ? p.position_embedding : p.token_embedding + p.position_embedding;
      break;
    case embedding_count::none:
      n = p.active_non_embedding();
      break;
  }
  token_flops f;
  f.counted_parameters = n;
  f.parameter_flops = detail::checked_mul(6, n);
  f.router_flops = detail::checked_mul(6, p.router);
  const std::uint64_t attention = detail::checked_mul(
      detail::mul3(12, s.layers, s.heads), detail::checked_mul(detail::head_dim_of(s), sequence));
  f.attention_flops =
      options.attention == attention_count::full ? attention : attention / 2;  // 12·… is even
  f.total = detail::checked_add(f.parameter_flops, f.attention_flops);
  return f;
}

/// Training FLOPs of one optimizer step that processes `tokens_per_step` tokens (batch ×
/// sequence, summed over every device and micro-batch of the step). A double, because a large
/// run's product passes 2⁶⁴; it is exact while it stays below 2⁵³ (9.007e15).
///
/// **Example**
/// ```cpp
/// double step = mldiag::efficiency::training_flops_per_step(f, 16 * 1024);
/// ```
[[nodiscard]] inline double training_flops_per_step(const token_flops& per_token,
                                                    std::uint64_t tokens_per_step) {
  if (tokens_per_step == 0)
    throw error("training_flops_per_step: 0 tokens per step: give batch × sequence");
  return static_cast<double>(per_token.total) * static_cast<double>(tokens_per_step);
}

/// Training FLOPs of one step of `batch` sequences of `sequence` tokens.
///
/// **Example**
/// ```cpp
/// double step = mldiag::efficiency::training_flops_per_step(gpt2, /*batch=*/16,
/// /*sequence=*/1024);
/// ```
[[nodiscard]] inline double training_flops_per_step(const transformer_shape& s, std::uint64_t batch,
                                                    std::uint64_t sequence,
                                                    flop_options options = {}) {
  if (batch == 0) throw error("training_flops_per_step: the batch is 0 sequences");
  return training_flops_per_step(training_flops_per_token(s, sequence, options),
                                 detail::checked_mul(batch, sequence));
}

}  // namespace mldiag::efficiency
