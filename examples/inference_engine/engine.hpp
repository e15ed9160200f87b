// SPDX-License-Identifier: Apache-2.0
/// A small decoder-only transformer inference engine in plain C++20 (no LibTorch): it loads the
/// weights `mldiag_inference_train` wrote, prefills a batch of prompts into a preallocated KV
/// cache, decodes token by token (greedy or sampled), in fp32 (the reference), bf16, fp16 or
/// int8 (W8A8), calls an observation hook at every tap point, and plants the faults engine
/// writers hit when asked to (`planted_faults`).
///
/// **Example**
/// ```cpp
/// const auto model = examples::inference::model_weights::load("weights.safetensors");
/// examples::inference::engine fp16(model, {.path = examples::inference::precision::fp16});
/// fp16.set_hook([](const examples::inference::tap& t) { /* t.name, t.values, t.format, ... */ });
/// const auto out = fp16.generate({model.encode("This program is ")}, 24);
/// std::puts(model.decode(out[0].tokens).c_str());
/// ```
#pragma once

#include "safetensors_io.hpp"

// mldiag's host half and bfloat16 convert exactly as CUDA's __float2half_rn and
// __float2bfloat16_rn do (round to nearest even, overflow to inf), so this CPU engine stores
// values the way a GPU engine would.
#include <mldiag/core/element_types.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>  // std::mt19937_64: the sampler's seeded generator
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace examples::inference {

// ---------------------------------------------------------------------------------------------
// The model as trained
// ---------------------------------------------------------------------------------------------

struct model_config {
  int vocab = 0;
  int d = 0;  // model width
  int layers = 0;
  int heads = 0;
  int context = 0;  // learned positions
  int ffn = 0;      // MLP width, 4 d
  [[nodiscard]] int d_head() const noexcept { return d / heads; }
};

/// One block's fp32 weights, row-major as `torch::nn::Linear` keeps them ([out, in]).
struct block_weights {
  std::vector<float> ln1_w, ln1_b;
  // qkv [3d, d]: rows q, then k, then v; head h owns rows h*dh.. of each.
  std::vector<float> qkv_w, qkv_b;
  std::vector<float> proj_w, proj_b;  // [d, d]
  std::vector<float> ln2_w, ln2_b;
  std::vector<float> fc1_w, fc1_b;  // [ffn, d]
  std::vector<float> fc2_w, fc2_b;  // [d, ffn]
};

/// The trained model: fp32 weights and the byte vocabulary.
struct model_weights {
  model_config cfg;
  std::vector<std::uint8_t> vocab;  // token id -> byte
  std::array<int, 256> id{};        // byte -> token id, -1 where the byte is not in the vocabulary
  std::vector<float> tok_emb;       // [V, d]
  std::vector<float> pos_emb;       // [context, d]
  std::vector<block_weights> blocks;
  std::vector<float> ln_f_w, ln_f_b;
  std::vector<float> head_w;  // [V, d], no bias
  std::map<std::string, std::string> metadata;

  /// Loads a file written by `mldiag_inference_train`; every tensor's shape is checked against
  /// the configuration in its metadata.
  static model_weights load(const std::string& path) {
    const safetensors::file f(path);
    model_weights m;
    m.metadata = f.metadata();
    const auto number = [&](const char* key) {
      const std::string& s = f.meta(key);
      std::size_t used = 0;
      const int v = std::stoi(s, &used);
      if (used != s.size() || v <= 0)
        throw std::runtime_error("mldiag: " + path + ": metadata " + key + " = '" + s +
                                 "' is not a positive integer");
      return v;
    };
    m.vocab = f.u8("vocab");
    auto& c = m.cfg;
    c.vocab = static_cast<int>(m.vocab.size());
    c.d = number("d_model");
    c.layers = number("layers");
    c.heads = number("heads");
    c.context = number("context");
    c.ffn = 4 * c.d;
    if (c.d % c.heads != 0)
      throw std::runtime_error("mldiag: " + path + ": d_model is not a multiple of heads");
    m.id.fill(-1);
    for (std::size_t i = 0; i < m.vocab.size(); ++i)
      m.id[m.vocab[i]] = static_cast<int>(i);
    const std::int64_t V = c.vocab, d = c.d, T = c.context, F = c.ffn;
    m.tok_emb = f.f32("tok_emb.weight", {V, d});
    m.pos_emb = f.f32("pos_emb.weight", {T, d});
    for (int l = 0; l < c.layers; ++l) {
      const std::string p = "blocks." + std::to_string(l) + ".";
      block_weights b;
      b.ln1_w = f.f32(p + "ln1.weight", {d});
      b.ln1_b = f.f32(p + "ln1.bias", {d});
      b.qkv_w = f.f32(p + "attn.qkv.weight", {3 * d, d});
      b.qkv_b = f.f32(p + "attn.qkv.bias", {3 * d});
      b.proj_w = f.f32(p + "attn.proj.weight", {d, d});
      b.proj_b = f.f32(p + "attn.proj.bias", {d});
      b.ln2_w = f.f32(p + "ln2.weight", {d});
      b.ln2_b = f.f32(p + "ln2.bias", {d});
      b.fc1_w = f.f32(p + "mlp.fc1.weight", {F, d});
      b.fc1_b = f.f32(p + "mlp.fc1.bias", {F});
      b.fc2_w = f.f32(p + "mlp.fc2.weight", {d, F});
      b.fc2_b = f.f32(p + "mlp.fc2.bias", {d});
      m.blocks.push_back(std::move(b));
    }
    m.ln_f_w = f.f32("ln_f.weight", {d});
    m.ln_f_b = f.f32("ln_f.bias", {d});
    m.head_w = f.f32("head.weight", {V, d});
    return m;
  }

  /// Token ids of `text`; a byte the model never saw is an error that names it.
  [[nodiscard]] std::vector<int> encode(std::string_view text) const {
    std::vector<int> out;
    for (unsigned char ch : text) {
      const int t = id[ch];
      if (t < 0)
        throw std::runtime_error(
            "mldiag: the byte " + std::to_string(ch) +
            " is not in the model's vocabulary; use characters of the training texts");
      out.push_back(t);
    }
    return out;
  }

  [[nodiscard]] std::string decode(std::span<const int> tokens) const {
    std::string out;
    for (int t : tokens)
      out +=
          (t >= 0 && t < cfg.vocab) ? static_cast<char>(vocab[static_cast<std::size_t>(t)]) : '?';
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
// The observation hook
// ---------------------------------------------------------------------------------------------

/// The format a tensor is stored in.
enum class number_format : std::uint8_t { fp32, bf16, fp16, int8 };
/// Prefill reads the prompt in one pass; decode produces one token per step.
enum class phase : std::uint8_t { prefill, decode };
/// What a tapped tensor is: `kv_cache` rows are cache slots; `attention_probs` rows are queries
/// and column j is cache slot j (masked slots hold exactly 0).
enum class tap_kind : std::uint8_t { activation, residual, kv_cache, logits, attention_probs };

[[nodiscard]] constexpr std::string_view name(number_format f) noexcept {
  switch (f) {
    case number_format::fp32:
      return "fp32";
    case number_format::bf16:
      return "bf16";
    case number_format::fp16:
      return "fp16";
    case number_format::int8:
      return "int8";
  }
  return "?";
}
[[nodiscard]] constexpr std::string_view name(phase p) noexcept {
  return p == phase::prefill ? "prefill" : "decode";
}

/// One tensor at one tap point of one request's forward pass, rows x cols, row-major. The
/// values are the tensor as the engine stored it, widened to float exactly (an int8 tensor
/// gives code x scale); they are valid during the call only.
///
/// Tap points, in forward order: `embed`; per block `blocks.L.` + `ln1`, `attn.k`, `attn.v`,
/// `attn.probs` (one head), `attn.ctx`, `attn.out`, `ln2`, `mlp.fc1`, `mlp.act`, `mlp.out`,
/// `residual`; then `ln_f` and `logits`. A healthy run's taps hold finite values only.
struct tap {
  std::string_view name;  ///< "embed", "blocks.1.mlp.fc1", "ln_f", "logits"
  int layer = -1;         ///< the block; -1 outside the blocks
  inference::phase phase = inference::phase::prefill;
  tap_kind kind = tap_kind::activation;
  std::int64_t step = 0;      ///< 0 for prefill, t for the t-th decode step
  std::int64_t position = 0;  ///< token position of the first row
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::span<const float> values;  ///< rows x cols
  number_format format = number_format::fp32;
  float scale = 1.0f;        ///< int8: a value is code x scale; 1 for float formats
  std::int32_t request = 0;  ///< index in the batch
  std::int32_t rank = 0;     ///< always 0: one process
  std::int64_t slot = -1;    ///< kv_cache: the cache slot of the first row
  /// kv_cache: rows [valid_rows, rows) are padding slots (at prefill; SIZE_MAX: none).
  std::size_t valid_rows = static_cast<std::size_t>(-1);
  int head = -1;  ///< attention_probs: the head shown
};

/// Called at every tap point when set; an engine without one skips the taps entirely.
using tap_hook = std::function<void(const tap&)>;

// ---------------------------------------------------------------------------------------------
// Options and planted faults
// ---------------------------------------------------------------------------------------------

/// The numeric path: fp32 is the reference. bf16 and fp16 store weights, activations, attention
/// probabilities, the KV cache and the logits in the format (each matmul, norm and softmax
/// computes in fp32 and rounds once where it stores). int8 is W8A8: int8 weights, static int8
/// scales for the input of every linear (calibrated on a batch), int32 accumulation; the rest in
/// fp32.
enum class precision : std::uint8_t { fp32, bf16, fp16, int8 };

[[nodiscard]] constexpr std::string_view name(precision p) noexcept {
  switch (p) {
    case precision::fp32:
      return "fp32";
    case precision::bf16:
      return "bf16";
    case precision::fp16:
      return "fp16";
    case precision::int8:
      return "int8";
  }
  return "?";
}

/// The position the first decode token gets after a prompt of n tokens (n is right).
enum class position_bug : std::uint8_t { none, repeat_last /* n - 1 */, restart /* 0 */ };

/// Faults engine writers hit, each planted in the layer named (a layer of -1: off). Where it
/// shows first is in the README's table.
struct planted_faults {
  /// (a) blocks.L.mlp.fc1: a scale of `fp16_overflow_scale` folded into fc1's weights and bias
  /// and undone in the activation (the way smoothing scales are migrated). Exact in fp32 and
  /// bf16 (a power of two); in fp16 the stored fc1 output passes 65504 -> inf -> NaN after fc2.
  /// 2^15: the trained model's fc1 outputs reach about 4.5, so every |h| > 2 overflows.
  int fp16_overflow_layer = -1;
  float fp16_overflow_scale = 32768.0f;
  /// (b) embed, decode phase: the position counter after prefill is wrong.
  position_bug decode_position = position_bug::none;
  /// (c) blocks.L.attn: scores scaled by 1/d_head instead of 1/sqrt(d_head).
  int attention_scale_layer = -1;
  /// (d) blocks.L.attn: this layer's cache is not cleared (its padding slots keep the NaN the
  /// allocation is poisoned with) and its attention multiplies by the mask instead of skipping
  /// masked slots, so 0 x NaN = NaN reaches the shorter requests at their first decode step.
  int kv_padding_layer = -1;
  /// (e) blocks.L (int8 path): this layer's static input scales are calibrated on
  /// `options.unrepresentative` instead of the calibration batch: too small, values clip.
  int int8_calibration_layer = -1;
  /// (f) blocks.L.attn.proj: the weight loaded transposed (square, so no shape check catches it).
  int transposed_layer = -1;
};

/// Plants the fault named (the demo's and the diagnosis's names) in `layer`; "" plants nothing.
inline void plant(planted_faults& f, std::string_view name, int layer) {
  if (name == "fp16_overflow") f.fp16_overflow_layer = layer;
  else if (name == "position_offset") f.decode_position = position_bug::repeat_last;
  else if (name == "position_restart") f.decode_position = position_bug::restart;
  else if (name == "attention_scale") f.attention_scale_layer = layer;
  else if (name == "kv_padding") f.kv_padding_layer = layer;
  else if (name == "int8_calibration") f.int8_calibration_layer = layer;
  else if (name == "transposed_weights") f.transposed_layer = layer;
  else if (!name.empty()) throw std::runtime_error("mldiag: unknown fault '" + std::string(name) + "'; see --help");
}

struct engine_options {
  precision path = precision::fp32;
  bool int8_per_channel = true;  ///< int8 weight scales per output channel (else one per tensor)
  /// int8: the prompts whose fp32 activations set the static input scales (amax / 127).
  std::vector<std::vector<int>> calibration = {};
  /// int8 with fault (e): the batch the faulty layer is calibrated on.
  std::vector<std::vector<int>> unrepresentative = {};
  int observed_head = 0;  ///< the head `attn.probs` shows
  int max_slots = 0;      ///< KV-cache slots per request; 0: the model's context
  planted_faults faults = {};
};

/// Greedy when `temperature` is 0; otherwise softmax(logits / temperature) over the `top_k`
/// largest (all when 0), drawn from a generator seeded with `seed` and the request's index.
struct sampling {
  float temperature = 0.0f;
  int top_k = 0;
  std::uint64_t seed = 0;
};

/// One request's output.
struct request_result {
  std::vector<int> tokens;         ///< generated tokens
  std::vector<float> step_logits;  ///< [tokens, V]: the logits each generated token was drawn from
  /// [prompt length, V]: prefill's logits at every prompt position.
  std::vector<float> prompt_logits;
};

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

namespace detail {

// Rounds to the storage format once: what a kernel does when it writes its fp32 result out.
inline float store(float x, number_format f) noexcept {
  switch (f) {
    case number_format::bf16:
      return static_cast<float>(mldiag::bfloat16(x));
    case number_format::fp16:
      return static_cast<float>(mldiag::half(x));
    default:
      return x;
  }
}

inline void store(std::span<float> x, number_format f) noexcept {
  if (f == number_format::fp32 || f == number_format::int8) return;
  for (float& v : x)
    v = store(v, f);
}

// Symmetric int8 code of x / scale: round to nearest even, clamp to +-127 (what saturating
// conversion instructions do); a NaN gives 0, as cvt.rni.sat.s8.f32 does.
inline std::int8_t quantize(float x, float inv_scale) noexcept {
  const float q = std::nearbyint(x * inv_scale);
  if (!(q == q)) return 0;
  return static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
}

inline float gelu(float x) noexcept {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

}  // namespace detail

class engine {
 public:
  engine(const model_weights& m, engine_options o) : m_(&m), o_(std::move(o)), c_(m.cfg) {
    const int slots = o_.max_slots > 0 ? o_.max_slots : c_.context;
    if (slots > c_.context)
      throw std::runtime_error("mldiag: max_slots " + std::to_string(slots) +
                               " exceeds the model's context of " + std::to_string(c_.context));
    o_.max_slots = slots;
    if (o_.observed_head < 0 || o_.observed_head >= c_.heads)
      throw std::runtime_error("mldiag: observed_head must be in [0, heads)");
    act_ = o_.path == precision::bf16   ? number_format::bf16
           : o_.path == precision::fp16 ? number_format::fp16
                                        : number_format::fp32;
    build_layers();
    if (o_.path == precision::int8) calibrate();
    names();
  }

  /// The hook called at every tap point; an empty function turns the taps off.
  void set_hook(tap_hook hook) { hook_ = std::move(hook); }
  [[nodiscard]] const engine_options& options() const noexcept { return o_; }

  /// Generates `new_tokens` tokens for each prompt in one static batch: the prompts are prefilled
  /// into cache slots [0, length) of their request, slots [length, longest prompt) are padding
  /// that the attention mask excludes, and decode step t writes slot longest + t - 1 for every
  /// request. `forced`, when given, feeds its tokens instead of the drawn ones (teacher forcing,
  /// to compare logits with a reference along the same text).
  std::vector<request_result> generate(const std::vector<std::vector<int>>& prompts, int new_tokens,
                                       const sampling& s = {},
                                       const std::vector<std::vector<int>>* forced = nullptr) {
    const int B = static_cast<int>(prompts.size());
    int longest = 0;
    for (const auto& p : prompts) {
      if (p.empty())
        throw std::runtime_error("mldiag: an empty prompt; give each request at least one token");
      for (int t : p)
        if (t < 0 || t >= c_.vocab)
          throw std::runtime_error("mldiag: token id " + std::to_string(t) +
                                   " is outside the vocabulary");
      longest = std::max(longest, static_cast<int>(p.size()));
    }
    if (new_tokens < 0 || longest + std::max(new_tokens - 1, 0) > o_.max_slots) {
      throw std::runtime_error("mldiag: the longest prompt (" + std::to_string(longest) +
                               ") plus " + std::to_string(new_tokens) +
                               " new tokens needs more than the " + std::to_string(o_.max_slots) +
                               " cache slots; shorten one of them");
    }
    if (forced && (forced->size() != prompts.size()))
      throw std::runtime_error("mldiag: forced tokens need one sequence per prompt");
    // The caches, [request][layer][slot][d], are allocated once per batch and poisoned with NaN,
    // which is what reading memory no token wrote looks like in a fault (d) demo.
    const std::size_t per_layer =
        static_cast<std::size_t>(o_.max_slots) * static_cast<std::size_t>(c_.d);
    const float poison = std::numeric_limits<float>::quiet_NaN();
    k_cache_.assign(static_cast<std::size_t>(B),
                    std::vector<float>(per_layer * static_cast<std::size_t>(c_.layers), poison));
    v_cache_ = k_cache_;
    lengths_.clear();
    for (const auto& p : prompts)
      lengths_.push_back(static_cast<int>(p.size()));
    longest_ = longest;

    std::vector<request_result> out(static_cast<std::size_t>(B));
    std::vector<std::mt19937_64> rng;
    for (int b = 0; b < B; ++b)
      rng.emplace_back(s.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(b) + 1);
    const std::size_t V = static_cast<std::size_t>(c_.vocab);
    for (int b = 0; b < B; ++b) {
      auto& r = out[static_cast<std::size_t>(b)];
      const auto& p = prompts[static_cast<std::size_t>(b)];
      r.prompt_logits.resize(p.size() * V);
      forward(static_cast<std::size_t>(b), p, 0, 0, phase::prefill, 0, r.prompt_logits.data());
      if (new_tokens > 0) {
        r.step_logits.assign(r.prompt_logits.end() - static_cast<std::ptrdiff_t>(V),
                             r.prompt_logits.end());
        r.tokens.push_back(
            choose(std::span(r.step_logits).last(V), s, rng[static_cast<std::size_t>(b)]));
      }
    }
    std::vector<float> row(V);
    for (int t = 1; t < new_tokens; ++t) {
      for (int b = 0; b < B; ++b) {
        auto& r = out[static_cast<std::size_t>(b)];
        int in = r.tokens.back();
        if (forced) {
          const auto& f = (*forced)[static_cast<std::size_t>(b)];
          if (f.size() < static_cast<std::size_t>(t))
            throw std::runtime_error("mldiag: a forced sequence is shorter than new_tokens - 1");
          in = f[static_cast<std::size_t>(t - 1)];
        }
        const int n = lengths_[static_cast<std::size_t>(b)];
        std::int64_t pos = n + t - 1;
        // Fault (b): the counter after prefill points at the last prompt token, or back at 0.
        if (o_.faults.decode_position == position_bug::repeat_last) pos -= 1;
        if (o_.faults.decode_position == position_bug::restart) pos = t - 1;
        const int token[1] = {in};
        forward(static_cast<std::size_t>(b), token, pos, static_cast<std::size_t>(longest + t - 1),
                phase::decode, t, row.data());
        r.step_logits.insert(r.step_logits.end(), row.begin(), row.end());
        r.tokens.push_back(choose(row, s, rng[static_cast<std::size_t>(b)]));
      }
    }
    return out;
  }

 private:
  // A linear layer y = x W^T + b, W [out, in] row-major. Float paths keep W as floats holding
  // values of the storage format; int8 keeps codes and scales.
  struct linear {
    int out = 0, in = 0;
    std::vector<float> w;
    std::vector<std::int8_t> q;
    std::vector<float> w_scale;  // int8: per output channel, or one
    std::vector<float> b;
    float x_scale = 1.0f;  // int8: the static input scale
  };
  struct layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
    linear qkv, proj, fc1, fc2;
    float attn_scale = 0.0f;
    float act_in_scale = 1.0f;  // fault (a) undoes its folded scale here
    bool multiplicative_mask = false;
  };
  // The names of a layer's taps, built once so that a tap costs no string work.
  enum tap_id : int {
    t_ln1,
    t_k,
    t_v,
    t_probs,
    t_ctx,
    t_out,
    t_ln2,
    t_fc1,
    t_act,
    t_mlp_out,
    t_residual,
    t_count
  };
  static constexpr std::array<const char*, t_count> tap_suffix{
      "ln1", "attn.k",  "attn.v",  "attn.probs", "attn.ctx", "attn.out",
      "ln2", "mlp.fc1", "mlp.act", "mlp.out",    "residual"};

  void names() {
    for (int l = 0; l < c_.layers; ++l)
      for (const char* s : tap_suffix)
        tap_names_.push_back("blocks." + std::to_string(l) + "." + s);
  }

  linear make_linear(const std::vector<float>& w, const std::vector<float>& b, int out,
                     int in) const {
    linear L;
    L.out = out;
    L.in = in;
    L.b = b;
    if (o_.path == precision::int8) {
      // Symmetric per-channel (or per-tensor) scales: amax / 127, so the largest weight is +-127.
      const std::size_t rows = static_cast<std::size_t>(out), cols = static_cast<std::size_t>(in);
      L.q.resize(rows * cols);
      float tensor_amax = 0.0f;
      for (float v : w)
        tensor_amax = std::max(tensor_amax, std::fabs(v));
      for (std::size_t o = 0; o < rows; ++o) {
        float amax = tensor_amax;
        if (o_.int8_per_channel) {
          amax = 0.0f;
          for (std::size_t i = 0; i < cols; ++i)
            amax = std::max(amax, std::fabs(w[o * cols + i]));
        }
        const float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
        if (o_.int8_per_channel || o == 0) L.w_scale.push_back(scale);
        for (std::size_t i = 0; i < cols; ++i)
          L.q[o * cols + i] = detail::quantize(w[o * cols + i], 1.0f / scale);
      }
    } else {
      L.w = w;
      detail::store(L.w, act_);
      detail::store(L.b, act_);
    }
    return L;
  }

  void build_layers() {
    const auto& m = *m_;
    const auto& f = o_.faults;
    tok_emb_ = m.tok_emb;
    pos_emb_ = m.pos_emb;
    detail::store(tok_emb_, act_);
    detail::store(pos_emb_, act_);
    for (int l = 0; l < c_.layers; ++l) {
      const auto& w = m.blocks[static_cast<std::size_t>(l)];
      layer L;
      L.ln1_w = w.ln1_w;
      L.ln1_b = w.ln1_b;
      L.ln2_w = w.ln2_w;
      L.ln2_b = w.ln2_b;
      for (auto* v : {&L.ln1_w, &L.ln1_b, &L.ln2_w, &L.ln2_b})
        detail::store(*v, act_);
      L.qkv = make_linear(w.qkv_w, w.qkv_b, 3 * c_.d, c_.d);
      std::vector<float> proj = w.proj_w;
      if (l == f.transposed_layer) {  // fault (f)
        for (int i = 0; i < c_.d; ++i)
          for (int j = 0; j < c_.d; ++j)
            proj[static_cast<std::size_t>(i * c_.d + j)] =
                w.proj_w[static_cast<std::size_t>(j * c_.d + i)];
      }
      L.proj = make_linear(proj, w.proj_b, c_.d, c_.d);
      std::vector<float> fc1_w = w.fc1_w, fc1_b = w.fc1_b;
      if (l == f.fp16_overflow_layer) {  // fault (a)
        for (float& v : fc1_w)
          v *= f.fp16_overflow_scale;
        for (float& v : fc1_b)
          v *= f.fp16_overflow_scale;
        L.act_in_scale = 1.0f / f.fp16_overflow_scale;
      }
      L.fc1 = make_linear(fc1_w, fc1_b, c_.ffn, c_.d);
      L.fc2 = make_linear(w.fc2_w, w.fc2_b, c_.d, c_.ffn);
      // Fault (c): 1/d_head instead of 1/sqrt(d_head) flattens this layer's attention.
      const float dh = static_cast<float>(c_.d_head());
      L.attn_scale = l == f.attention_scale_layer ? 1.0f / dh : 1.0f / std::sqrt(dh);
      L.multiplicative_mask = l == f.kv_padding_layer;  // fault (d)
      layers_.push_back(std::move(L));
    }
    ln_f_w_ = m.ln_f_w;
    ln_f_b_ = m.ln_f_b;
    detail::store(ln_f_w_, act_);
    detail::store(ln_f_b_, act_);
    head_ = make_linear(m.head_w, std::vector<float>(static_cast<std::size_t>(c_.vocab), 0.0f),
                        c_.vocab, c_.d);
  }

  // Static int8 input scales: the largest |value| the fp32 reference stores at each linear's
  // input over a calibration batch, / 127. Fault (e) calibrates one layer on another batch.
  void calibrate() {
    if (o_.calibration.empty())
      throw std::runtime_error(
          "mldiag: the int8 path needs calibration prompts (engine_options::calibration)");
    const auto amax_of = [&](const std::vector<std::vector<int>>& batch) {
      engine reference(*m_, engine_options{.max_slots = o_.max_slots});
      std::vector<float> amax(static_cast<std::size_t>(c_.layers * 4 + 1), 0.0f);
      reference.set_hook([&](const tap& t) {
        int slot = -1;
        const int l = t.layer;
        if (t.name.ends_with(".ln1"))
          slot = 4 * l;
        else if (t.name.ends_with(".attn.ctx"))
          slot = 4 * l + 1;
        else if (t.name.ends_with(".ln2"))
          slot = 4 * l + 2;
        else if (t.name.ends_with(".mlp.act"))
          slot = 4 * l + 3;
        else if (t.name == "ln_f")
          slot = 4 * c_.layers;
        if (slot < 0) return;
        float& a = amax[static_cast<std::size_t>(slot)];
        for (float v : t.values)
          a = std::max(a, std::fabs(v));
      });
      for (const auto& p : batch)
        (void)reference.generate({p}, 0);
      return amax;
    };
    const auto good = amax_of(o_.calibration);
    std::vector<float> bad;
    if (o_.faults.int8_calibration_layer >= 0) {
      if (o_.unrepresentative.empty())
        throw std::runtime_error(
            "mldiag: fault (e) needs engine_options::unrepresentative prompts");
      bad = amax_of(o_.unrepresentative);
    }
    const auto scale = [](float amax) { return amax > 0.0f ? amax / 127.0f : 1.0f; };
    for (int l = 0; l < c_.layers; ++l) {
      const auto& a = l == o_.faults.int8_calibration_layer ? bad : good;
      auto& L = layers_[static_cast<std::size_t>(l)];
      L.qkv.x_scale = scale(a[static_cast<std::size_t>(4 * l)]);
      L.proj.x_scale = scale(a[static_cast<std::size_t>(4 * l + 1)]);
      L.fc1.x_scale = scale(a[static_cast<std::size_t>(4 * l + 2)]);
      L.fc2.x_scale = scale(a[static_cast<std::size_t>(4 * l + 3)]);
    }
    head_.x_scale = scale(good[static_cast<std::size_t>(4 * c_.layers)]);
  }

  // x [n, L.in] -> y [n, L.out]. Float paths accumulate in fp32 and round once to the format;
  // int8 quantizes x with the static scale (x is overwritten with code x scale, what is
  // stored), accumulates codes in int32 and rescales.
  void matmul(const linear& L, std::span<float> x, std::size_t n, std::span<float> y) {
    const std::size_t in = static_cast<std::size_t>(L.in), out = static_cast<std::size_t>(L.out);
    if (o_.path == precision::int8) {
      codes_.resize(n * in);
      const float inv = 1.0f / L.x_scale;
      for (std::size_t i = 0; i < codes_.size(); ++i) {
        codes_[i] = detail::quantize(x[i], inv);
        x[i] = static_cast<float>(codes_[i]) * L.x_scale;
      }
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t o = 0; o < out; ++o) {
          std::int32_t acc = 0;
          const std::int8_t* w = &L.q[o * in];
          const std::int8_t* a = &codes_[r * in];
          for (std::size_t i = 0; i < in; ++i)
            acc += std::int32_t{w[i]} * std::int32_t{a[i]};
          const float ws = L.w_scale[L.w_scale.size() == 1 ? 0 : o];
          y[r * out + o] = static_cast<float>(acc) * (L.x_scale * ws) + L.b[o];
        }
      return;
    }
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        float acc = 0.0f;
        const float* w = &L.w[o * in];
        const float* a = &x[r * in];
        for (std::size_t i = 0; i < in; ++i)
          acc += w[i] * a[i];
        y[r * out + o] = detail::store(acc + L.b[o], act_);
      }
  }

  // LayerNorm over d (eps 1e-5, as torch::nn::LayerNorm), statistics in fp32, output stored.
  void layer_norm(std::span<const float> x, std::size_t n, const std::vector<float>& g,
                  const std::vector<float>& b, std::span<float> y) const {
    const std::size_t d = static_cast<std::size_t>(c_.d);
    for (std::size_t r = 0; r < n; ++r) {
      const float* xr = &x[r * d];
      float mean = 0.0f, var = 0.0f;
      for (std::size_t i = 0; i < d; ++i)
        mean += xr[i];
      mean /= static_cast<float>(d);
      for (std::size_t i = 0; i < d; ++i)
        var += (xr[i] - mean) * (xr[i] - mean);
      const float rstd = 1.0f / std::sqrt(var / static_cast<float>(d) + 1e-5f);
      for (std::size_t i = 0; i < d; ++i)
        y[r * d + i] = detail::store((xr[i] - mean) * rstd * g[i] + b[i], act_);
    }
  }

  // Hands one tensor to the hook, with the current request's place. Only called with a hook.
  void emit(std::string_view name, int layer_index, tap_kind kind, std::span<const float> v,
            std::size_t rows, std::size_t cols, number_format f, float scale = 1.0f,
            std::int64_t slot = -1, std::size_t valid = static_cast<std::size_t>(-1)) const {
    hook_(tap{.name = name,
              .layer = layer_index,
              .phase = cur_.ph,
              .kind = kind,
              .step = cur_.step,
              .position = cur_.pos,
              .rows = rows,
              .cols = cols,
              .values = v.first(rows * cols),
              .format = f,
              .scale = scale,
              .request = cur_.request,
              .rank = 0,
              .slot = slot,
              .valid_rows = valid,
              .head = kind == tap_kind::attention_probs ? o_.observed_head : -1});
  }

  // One request's forward pass over n tokens at positions pos.. and cache slots slot..; writes
  // the logits [n, V] to `logits`. Taps come after the matmul that reads a tensor, so that the
  // int8 path shows the codes it stored.
  void forward(std::size_t b, std::span<const int> tokens, std::int64_t pos, std::size_t slot,
               phase ph, std::int64_t step, float* logits) {
    const std::size_t n = tokens.size(), d = static_cast<std::size_t>(c_.d), nd = n * d;
    const std::size_t F = static_cast<std::size_t>(c_.ffn), V = static_cast<std::size_t>(c_.vocab);
    const std::size_t slots = static_cast<std::size_t>(o_.max_slots);
    const std::size_t longest = static_cast<std::size_t>(longest_);
    const bool taps = static_cast<bool>(hook_);
    // The int8 path stores everything but the linears' inputs in fp32, its cache included.
    const number_format in_format = o_.path == precision::int8 ? number_format::int8 : act_;
    cur_ = {ph, step, pos, static_cast<std::int32_t>(b)};
    x_.resize(nd);
    h_.resize(nd);
    qkv_.resize(3 * nd);
    ctx_.resize(nd);
    a_.resize(nd);
    f_.resize(n * F);

    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t t = static_cast<std::size_t>(tokens[r]);
      const std::size_t p = static_cast<std::size_t>(pos) + r;
      if (p >= static_cast<std::size_t>(c_.context))
        throw std::runtime_error("mldiag: position " + std::to_string(p) +
                                 " is past the model's context");
      for (std::size_t i = 0; i < d; ++i)
        x_[r * d + i] = detail::store(tok_emb_[t * d + i] + pos_emb_[p * d + i], act_);
    }
    if (taps) emit("embed", -1, tap_kind::residual, x_, n, d, act_);

    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer& L = layers_[l];
      const int li = static_cast<int>(l);
      const std::string* name = &tap_names_[l * t_count];
      layer_norm(x_, n, L.ln1_w, L.ln1_b, h_);
      matmul(L.qkv, h_, n, qkv_);
      if (taps) emit(name[t_ln1], li, tap_kind::activation, h_, n, d, in_format, L.qkv.x_scale);

      // K and V into the cache ([slot][d] per layer); prefill also clears the request's padding
      // slots, except in fault (d)'s layer, which leaves the allocation's poison there.
      float* K = k_cache_[b].data() + l * slots * d;
      float* Vc = v_cache_[b].data() + l * slots * d;
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t i = 0; i < d; ++i) {
          K[(slot + r) * d + i] = detail::store(qkv_[r * 3 * d + d + i], act_);
          Vc[(slot + r) * d + i] = detail::store(qkv_[r * 3 * d + 2 * d + i], act_);
        }
      std::size_t kv_rows = n, valid = static_cast<std::size_t>(-1);
      if (ph == phase::prefill) {
        if (!L.multiplicative_mask) {
          std::fill(K + n * d, K + longest * d, 0.0f);
          std::fill(Vc + n * d, Vc + longest * d, 0.0f);
        }
        kv_rows = longest;
        valid = n;
      }
      if (taps) {
        const auto s = static_cast<std::int64_t>(slot);
        emit(name[t_k], li, tap_kind::kv_cache, {K + slot * d, kv_rows * d}, kv_rows, d, act_, 1.0f,
             s, valid);
        emit(name[t_v], li, tap_kind::kv_cache, {Vc + slot * d, kv_rows * d}, kv_rows, d, act_,
             1.0f, s, valid);
      }

      attention(L, K, Vc, n, slot, static_cast<std::size_t>(lengths_[b]), taps);
      if (taps) emit(name[t_probs], li, tap_kind::attention_probs, probs_, n, slot + n, act_);
      matmul(L.proj, ctx_, n, a_);
      if (taps) {
        emit(name[t_ctx], li, tap_kind::activation, ctx_, n, d, in_format, L.proj.x_scale);
        emit(name[t_out], li, tap_kind::activation, a_, n, d, act_);
      }
      for (std::size_t i = 0; i < nd; ++i)
        x_[i] = detail::store(x_[i] + a_[i], act_);

      layer_norm(x_, n, L.ln2_w, L.ln2_b, h_);
      matmul(L.fc1, h_, n, f_);
      if (taps) {
        emit(name[t_ln2], li, tap_kind::activation, h_, n, d, in_format, L.fc1.x_scale);
        emit(name[t_fc1], li, tap_kind::activation, f_, n, F, act_);
      }
      for (float& v : f_)
        v = detail::store(detail::gelu(v * L.act_in_scale), act_);
      matmul(L.fc2, f_, n, a_);
      if (taps) {
        emit(name[t_act], li, tap_kind::activation, f_, n, F, in_format, L.fc2.x_scale);
        emit(name[t_mlp_out], li, tap_kind::activation, a_, n, d, act_);
      }
      for (std::size_t i = 0; i < nd; ++i)
        x_[i] = detail::store(x_[i] + a_[i], act_);
      if (taps) emit(name[t_residual], li, tap_kind::residual, x_, n, d, act_);
    }

    layer_norm(x_, n, ln_f_w_, ln_f_b_, h_);
    const std::span<float> out(logits, n * V);
    matmul(head_, h_, n, out);
    if (taps) {
      emit("ln_f", -1, tap_kind::activation, h_, n, d, in_format, head_.x_scale);
      emit("logits", -1, tap_kind::logits, out, n, V, act_);
    }
  }

  // Causal attention of n queries (cache slots slot..slot+n-1) over the request's cache. Slot j
  // is visible to query slot s when j <= s and j is not padding ([len, longest)). Scores and
  // softmax in fp32; probabilities stored in the format before P x V, as flash attention does.
  // ctx_ [n, d] gets the heads side by side; probs_ [n, slot + n] the observed head's.
  void attention(const layer& L, const float* K, const float* Vc, std::size_t n, std::size_t slot,
                 std::size_t len, bool taps) {
    const std::size_t d = static_cast<std::size_t>(c_.d),
                      dh = static_cast<std::size_t>(c_.d_head());
    const std::size_t heads = static_cast<std::size_t>(c_.heads), cols = slot + n;
    const std::size_t longest = static_cast<std::size_t>(longest_);
    const auto visible = [&](std::size_t j) { return j < len || j >= longest; };
    scores_.resize(cols);
    if (taps) probs_.assign(n * cols, 0.0f);
    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t s = slot + r;
      for (std::size_t h = 0; h < heads; ++h) {
        const float* q = &qkv_[r * 3 * d + h * dh];
        float mx = -std::numeric_limits<float>::infinity();
        for (std::size_t j = 0; j <= s; ++j) {
          // Fault (d) computes every slot and relies on the mask's 0 to remove the masked ones.
          if (!visible(j) && !L.multiplicative_mask) continue;
          float dot = 0.0f;
          for (std::size_t i = 0; i < dh; ++i)
            dot += q[i] * K[j * d + h * dh + i];
          scores_[j] = dot * L.attn_scale;
          if (visible(j)) mx = std::max(mx, scores_[j]);
        }
        float sum = 0.0f;
        for (std::size_t j = 0; j <= s; ++j) {
          if (visible(j))
            scores_[j] = std::exp(scores_[j] - mx);
          else if (L.multiplicative_mask)
            scores_[j] = std::exp(scores_[j] - mx) * 0.0f;  // 0 x NaN = NaN
          else
            continue;
          sum += scores_[j];
        }
        float* o = &ctx_[r * d + h * dh];
        std::fill(o, o + dh, 0.0f);
        for (std::size_t j = 0; j <= s; ++j) {
          if (!visible(j) && !L.multiplicative_mask) continue;
          const float p = detail::store(scores_[j] / sum, act_);
          if (taps && h == static_cast<std::size_t>(o_.observed_head)) probs_[r * cols + j] = p;
          for (std::size_t i = 0; i < dh; ++i)
            o[i] += p * Vc[j * d + h * dh + i];
        }
        for (std::size_t i = 0; i < dh; ++i)
          o[i] = detail::store(o[i], act_);
      }
    }
  }

  // Greedy: the first largest logit (NaN never wins, and a row of NaN gives token 0 — a valid
  // looking token, which is how engines serve garbage). Sampled: see `sampling`.
  int choose(std::span<const float> row, const sampling& s, std::mt19937_64& rng) const {
    std::size_t first = 0;
    while (first + 1 < row.size() && std::isnan(row[first]))
      ++first;
    int best = static_cast<int>(first);
    for (std::size_t i = first + 1; i < row.size(); ++i)
      if (row[i] > row[static_cast<std::size_t>(best)]) best = static_cast<int>(i);
    if (std::isnan(row[static_cast<std::size_t>(best)])) best = 0;
    if (s.temperature <= 0.0f) return best;
    std::vector<int> order(row.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = static_cast<int>(i);
    const std::size_t k =
        s.top_k > 0 ? std::min(order.size(), static_cast<std::size_t>(s.top_k)) : order.size();
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int a, int b) {
                        return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
                      });
    std::vector<double> w(k);
    double total = 0.0;
    for (std::size_t i = 0; i < k; ++i) {
      w[i] = std::exp((static_cast<double>(row[static_cast<std::size_t>(order[i])]) -
                       row[static_cast<std::size_t>(best)]) /
                      s.temperature);
      total += w[i];
    }
    if (!(total > 0.0) || !std::isfinite(total)) return best;
    // 53 random bits -> [0, 1): the same draw on every standard library (std's distributions
    // differ).
    const double u = static_cast<double>(rng() >> 11) * 0x1p-53 * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < k; ++i) {
      acc += w[i];
      if (u < acc) return order[i];
    }
    return order[k - 1];
  }

  struct position_state {
    phase ph = phase::prefill;
    std::int64_t step = 0;
    std::int64_t pos = 0;
    std::int32_t request = 0;
  };

  const model_weights* m_;
  engine_options o_;
  model_config c_;
  number_format act_ = number_format::fp32;
  std::vector<float> tok_emb_, pos_emb_, ln_f_w_, ln_f_b_;
  std::vector<layer> layers_;
  linear head_;
  tap_hook hook_;
  std::vector<std::string> tap_names_;  // [layer][tap_id]
  // The batch's caches and shape.
  std::vector<std::vector<float>> k_cache_, v_cache_;
  std::vector<int> lengths_;
  int longest_ = 0;
  // Scratch, reused from call to call.
  std::vector<float> x_, h_, qkv_, ctx_, a_, f_, scores_, probs_;
  std::vector<std::int8_t> codes_;
  position_state cur_;
};

}  // namespace examples::inference
