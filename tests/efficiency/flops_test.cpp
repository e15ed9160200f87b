// SPDX-License-Identifier: Apache-2.0
// FLOP counting and MFU against numbers derived by hand from the published shapes of GPT-2
// 124M, Llama-2-7B and Mixtral-8x7B. Every expected value below is a literal worked out in the
// comment above it (and in docs/efficiency.md), never the library's own output.
#include "mldiag/efficiency/flops.hpp"
#include "mldiag/efficiency/mfu.hpp"

#include "../support/count_allocations.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace eff = mldiag::efficiency;

namespace {

// GPT-2 124M (Radford et al. 2019; Hugging Face "gpt2" config): vocab 50257, n_ctx 1024,
// d 768, 12 layers, 12 heads, FFN 4·768 = 3072, biases, LayerNorm, tied embeddings, learned
// positions.
eff::transformer_shape gpt2_124m() {
  return {.vocab = 50257,
          .d_model = 768,
          .layers = 12,
          .heads = 12,
          .ffn_hidden = 3072,
          .tied_embeddings = true,
          .learned_positions = 1024,
          .bias = true,
          .norm = eff::norm_kind::layer_norm};
}

// Llama-2-7B (Touvron et al. 2023; "meta-llama/Llama-2-7b-hf" config): vocab 32000, d 4096,
// 32 layers, 32 heads (head dim 128), FFN 11008 SwiGLU, RMSNorm, untied, no biases, RoPE.
eff::transformer_shape llama2_7b() {
  return {.vocab = 32000,
          .d_model = 4096,
          .layers = 32,
          .heads = 32,
          .ffn_hidden = 11008,
          .gated_ffn = true};
}

// Mixtral-8x7B (Jiang et al. 2024; "mistralai/Mixtral-8x7B-v0.1" config): vocab 32000, d 4096,
// 32 layers, 32 query heads of 128, 8 KV heads (GQA), every layer MoE with 8 SwiGLU experts of
// 14336, top-2, router without bias, RMSNorm, untied, no biases.
eff::transformer_shape mixtral_8x7b() {
  return {.vocab = 32000,
          .d_model = 4096,
          .layers = 32,
          .heads = 32,
          .kv_heads = 8,
          .ffn_hidden = 14336,
          .gated_ffn = true,
          .moe = {.experts = 8, .top_k = 2}};
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const mldiag::error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("GPT-2 124M: parameters by hand") {
  const eff::parameter_count p = eff::count_parameters(gpt2_124m());
  // wte = 50257·768 = 38,597,376; wpe = 1024·768 = 786,432; tied: no separate lm_head.
  CHECK(p.token_embedding == 38'597'376u);
  CHECK(p.position_embedding == 786'432u);
  CHECK(p.output_embedding == 0u);
  // Per layer, attention: c_attn 768·2304 = 1,769,472 + bias 2,304; c_proj 768·768 = 589,824
  // + bias 768 -> 2,362,368; ·12 = 28,348,416.
  CHECK(p.attention == 28'348'416u);
  // Per layer, MLP: c_fc 768·3072 = 2,359,296 + 3,072; c_proj 2,359,296 + 768 -> 4,722,432;
  // ·12 = 56,669,184.
  CHECK(p.ffn == 56'669'184u);
  // LayerNorm (gain + bias = 1,536): 2 per layer + ln_f = 25 · 1,536 = 38,400.
  CHECK(p.norms == 38'400u);
  // 38,597,376 + 786,432 + 28,348,416 + 56,669,184 + 38,400 = 124,439,808 (the "124M").
  CHECK(p.total == 124'439'808u);
  CHECK(p.active == 124'439'808u);
  // Non-embedding (Kaplan's N): 124,439,808 − 38,597,376 − 786,432 = 85,056,000 (the "85M").
  CHECK(p.non_embedding() == 85'056'000u);
  // Kaplan's approximation 12·L·d² = 12·12·768² = 84,934,656 leaves out the biases and norms:
  // per layer 2,304 + 768 + 3,072 + 768 + 3,072 = 9,984, ·12 = 119,808, + ln_f 1,536 = 121,344.
  CHECK(p.non_embedding() == 84'934'656u + 121'344u);
  CHECK(p.moe_layers == 0u);
}

TEST_CASE("GPT-2 124M: FLOPs per token and per step, each embedding choice") {
  // Attention term 12·L·H·Q·T = 12·12·12·64·1024 = 113,246,208 (H·Q = 768).
  const auto all = eff::training_flops_per_token(gpt2_124m(), 1024);
  // 6N = 6·124,439,808 = 746,638,848; total 746,638,848 + 113,246,208 = 859,885,056.
  CHECK(all.counted_parameters == 124'439'808u);
  CHECK(all.parameter_flops == 746'638'848u);
  CHECK(all.attention_flops == 113'246'208u);
  CHECK(all.total == 859'885'056u);
  CHECK(all.router_flops == 0u);

  // Output only: the tied wte is the logit matmul and stays; wpe (786,432) goes:
  // N = 123,653,376 (nanoGPT's get_num_params()), 6N = 741,920,256, total 855,166,464.
  const auto out = eff::training_flops_per_token(gpt2_124m(), 1024,
                                                 {.embeddings = eff::embedding_count::output_only});
  CHECK(out.counted_parameters == 123'653'376u);
  CHECK(out.total == 855'166'464u);

  // Kaplan's non-embedding N = 85,056,000: 6N = 510,336,000, total 623,582,208.
  const auto none =
      eff::training_flops_per_token(gpt2_124m(), 1024, {.embeddings = eff::embedding_count::none});
  CHECK(none.counted_parameters == 85'056'000u);
  CHECK(none.total == 623'582'208u);

  // Causal halving: 113,246,208 / 2 = 56,623,104; total 746,638,848 + 56,623,104 = 803,261,952.
  const auto causal =
      eff::training_flops_per_token(gpt2_124m(), 1024, {.attention = eff::attention_count::causal});
  CHECK(causal.attention_flops == 56'623'104u);
  CHECK(causal.total == 803'261'952u);

  // Per step, batch 16 × 1024 = 16,384 tokens: 859,885,056 · 16,384 = 14,088,356,757,504
  // (below 2^53, so the double is exact).
  CHECK(eff::training_flops_per_step(gpt2_124m(), 16, 1024) == 14'088'356'757'504.0);
  CHECK(eff::training_flops_per_step(all, 16 * 1024) == 14'088'356'757'504.0);
}

TEST_CASE("GPT-2 124M: cross-check with Narayanan et al. 2021 (Megatron)") {
  // Their count without recomputation, per step: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)). It
  // counts the logit matmul but no input lookup (our output_only) and assumes no biases or
  // norms. Evaluated here as printed, per token (B = 1, divide by s):
  const double B = 1, s = 1024, l = 12, h = 768, V = 50257;
  const double megatron_per_token =
      72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / s;
  // = 72·l·h² + 12·l·h·s + 6·h·V = 509,607,936 + 113,246,208 + 231,584,256 = 854,438,400.
  CHECK(megatron_per_token == doctest::Approx(854'438'400.0).epsilon(1e-12));
  // Ours (output_only) adds 6 × the 121,344 bias and norm parameters = 728,064.
  const auto out = eff::training_flops_per_token(gpt2_124m(), 1024,
                                                 {.embeddings = eff::embedding_count::output_only});
  CHECK(static_cast<double>(out.total - 6u * 121'344u) ==
        doctest::Approx(megatron_per_token).epsilon(1e-12));
}

TEST_CASE("Llama-2-7B: parameters and FLOPs by hand") {
  const eff::parameter_count p = eff::count_parameters(llama2_7b());
  // Embedding and untied lm_head: 32000·4096 = 131,072,000 each.
  CHECK(p.token_embedding == 131'072'000u);
  CHECK(p.output_embedding == 131'072'000u);
  CHECK(p.position_embedding == 0u);
  // Attention per layer: q, k, v, o = 4·4096² = 67,108,864; ·32 = 2,147,483,648.
  CHECK(p.attention == 2'147'483'648u);
  // SwiGLU per layer: 3·4096·11008 = 135,266,304; ·32 = 4,328,521,728.
  CHECK(p.ffn == 4'328'521'728u);
  // RMSNorm (gain only): 65 · 4096 = 266,240.
  CHECK(p.norms == 266'240u);
  // 262,144,000 + 2,147,483,648 + 4,328,521,728 + 266,240 = 6,738,415,616 (the published 6.74B).
  CHECK(p.total == 6'738'415'616u);
  CHECK(p.non_embedding() == 6'476'271'616u);  // 6,738,415,616 − 262,144,000

  // T = 4096: 12·L·H·Q·T = 12·32·32·128·4096 = 6,442,450,944; 6N = 40,430,493,696;
  // total 46,872,944,640.
  const auto f = eff::training_flops_per_token(llama2_7b(), 4096);
  CHECK(f.attention_flops == 6'442'450'944u);
  CHECK(f.parameter_flops == 40'430'493'696u);
  CHECK(f.total == 46'872'944'640u);
  // Output only drops the input embedding: N = 6,738,415,616 − 131,072,000 = 6,607,343,616.
  CHECK(eff::training_flops_per_token(llama2_7b(), 4096,
                                      {.embeddings = eff::embedding_count::output_only})
            .counted_parameters == 6'607'343'616u);
}

TEST_CASE("Mixtral-8x7B: total and active parameters (GQA, top-2 of 8), FLOPs") {
  const eff::parameter_count p = eff::count_parameters(mixtral_8x7b());
  // Attention per layer with GQA: q and o 4096·4096 = 16,777,216 each; k and v 4096·(8·128)
  // = 4,194,304 each -> 41,943,040; ·32 = 1,342,177,280.
  CHECK(p.attention == 1'342'177'280u);
  // One SwiGLU expert: 3·4096·14336 = 176,160,768. All: ·8·32 = 45,097,156,608; active
  // (top-2): ·2·32 = 11,274,289,152.
  CHECK(p.routed_experts == 45'097'156'608u);
  CHECK(p.routed_experts_active == 11'274'289'152u);
  CHECK(p.ffn == 0u);
  // Router 4096·8 = 32,768 per layer; ·32 = 1,048,576.
  CHECK(p.router == 1'048'576u);
  CHECK(p.norms == 266'240u);
  CHECK(p.moe_layers == 32u);
  // Total: 262,144,000 + 1,342,177,280 + 45,097,156,608 + 1,048,576 + 266,240
  //      = 46,702,792,704 (the published 46.7B).
  CHECK(p.total == 46'702'792'704u);
  // Active: 262,144,000 + 1,342,177,280 + 11,274,289,152 + 1,048,576 + 266,240
  //       = 12,879,925,248 (the published 12.9B).
  CHECK(p.active == 12'879'925'248u);

  // T = 4096: attention term as Llama's, 6,442,450,944 (query heads count, not KV heads).
  // 6 · 12,879,925,248 = 77,279,551,488; total 83,722,002,432. Router: 6·1,048,576 = 6,291,456.
  const auto f = eff::training_flops_per_token(mixtral_8x7b(), 4096);
  CHECK(f.counted_parameters == 12'879'925'248u);
  CHECK(f.attention_flops == 6'442'450'944u);
  CHECK(f.total == 83'722'002'432u);
  CHECK(f.router_flops == 6'291'456u);
}

TEST_CASE("MoE placement: every other layer, shared experts, own expert width") {
  // A toy shape small enough to add up in one's head: V 10, d 4, L 4, 2 heads of 2, FFN 8
  // (2 matrices), RMSNorm, untied; MoE from layer 1 every 2nd layer (layers 1 and 3), 4
  // experts, top-1, 1 shared expert.
  eff::transformer_shape s{
      .vocab = 10,
      .d_model = 4,
      .layers = 4,
      .heads = 2,
      .ffn_hidden = 8,
      .moe = {.experts = 4, .top_k = 1, .shared_experts = 1, .first_layer = 1, .layer_step = 2}};
  const auto p = eff::count_parameters(s);
  CHECK(p.moe_layers == 2u);
  // Embeddings 2·10·4 = 80; attention 4·4·4 = 64 per layer, ·4 = 256; dense FFN 2·4·8 = 64 for
  // layers 0 and 2 = 128, plus the shared expert 64 in layers 1 and 3 = 128 -> ffn 256;
  // routed 64·4·2 = 512, active 64·1·2 = 128; router 4·4·2 = 32; norms 9·4 = 36.
  CHECK(p.ffn == 256u);
  CHECK(p.routed_experts == 512u);
  CHECK(p.routed_experts_active == 128u);
  CHECK(p.router == 32u);
  CHECK(p.total == 80u + 256u + 256u + 512u + 32u + 36u);   // 1,172
  CHECK(p.active == 80u + 256u + 256u + 128u + 32u + 36u);  // 788

  // Experts of width 2 instead of 8: one expert is 2·4·2 = 16; routed 16·4·2 = 128, shared
  // 16·2 = 32 (ffn = 128 + 32 = 160); a router bias adds 4 per MoE layer (32 + 8 = 40).
  s.moe.expert_ffn_hidden = 2;
  s.moe.router_bias = true;
  const auto q = eff::count_parameters(s);
  CHECK(q.routed_experts == 128u);
  CHECK(q.ffn == 160u);
  CHECK(q.router == 40u);
}

TEST_CASE("peak table: dense datasheet values, every device and precision once") {
  // Hand-copied from the datasheets; '*' values are printed with sparsity and halved here.
  struct row {
    eff::gpu g;
    eff::precision p;
    double expected;
  };
  const row rows[] = {
      {eff::gpu::a100_sxm_80gb, eff::precision::fp32, 19.5e12},
      {eff::gpu::a100_sxm_80gb, eff::precision::tf32, 156e12},
      {eff::gpu::a100_sxm_80gb, eff::precision::bf16, 312e12},
      {eff::gpu::a100_sxm_80gb, eff::precision::fp16, 312e12},
      {eff::gpu::h100_sxm, eff::precision::fp32, 67e12},
      {eff::gpu::h100_sxm, eff::precision::tf32, 989e12 / 2},
      {eff::gpu::h100_sxm, eff::precision::bf16, 1979e12 / 2},
      {eff::gpu::h100_sxm, eff::precision::fp16, 1979e12 / 2},
      {eff::gpu::h100_sxm, eff::precision::fp8, 3958e12 / 2},
      {eff::gpu::h100_pcie, eff::precision::fp32, 51e12},
      {eff::gpu::h100_pcie, eff::precision::tf32, 756e12 / 2},
      {eff::gpu::h100_pcie, eff::precision::bf16, 1513e12 / 2},
      {eff::gpu::h100_pcie, eff::precision::fp16, 1513e12 / 2},
      {eff::gpu::h100_pcie, eff::precision::fp8, 3026e12 / 2},
      {eff::gpu::h200_sxm, eff::precision::fp32, 67e12},
      {eff::gpu::h200_sxm, eff::precision::tf32, 989e12 / 2},
      {eff::gpu::h200_sxm, eff::precision::bf16, 1979e12 / 2},
      {eff::gpu::h200_sxm, eff::precision::fp16, 1979e12 / 2},
      {eff::gpu::h200_sxm, eff::precision::fp8, 3958e12 / 2},
      {eff::gpu::b200, eff::precision::fp32, 75e12},
      {eff::gpu::b200, eff::precision::tf32, 2.2e15 / 2},
      {eff::gpu::b200, eff::precision::bf16, 4.5e15 / 2},
      {eff::gpu::b200, eff::precision::fp16, 4.5e15 / 2},
      {eff::gpu::b200, eff::precision::fp8, 9e15 / 2},
      {eff::gpu::l40s, eff::precision::fp32, 91.6e12},
      {eff::gpu::l40s, eff::precision::tf32, 183e12},
      {eff::gpu::l40s, eff::precision::bf16, 362.05e12},
      {eff::gpu::l40s, eff::precision::fp16, 362.05e12},
      {eff::gpu::l40s, eff::precision::fp8, 733e12},
      {eff::gpu::rtx_4090, eff::precision::fp32, 82.6e12},
      {eff::gpu::rtx_4090, eff::precision::tf32, 82.6e12},
      {eff::gpu::rtx_4090, eff::precision::bf16, 165.2e12},
      {eff::gpu::rtx_4090, eff::precision::fp16, 165.2e12},
      {eff::gpu::rtx_4090, eff::precision::fp8, 330.3e12},
  };
  CHECK(std::size(rows) == eff::peak_table.size());
  for (const row& r : rows) {
    CAPTURE(eff::name(r.g));
    CAPTURE(eff::name(r.p));
    const eff::peak pk = eff::table_peak(r.g, r.p);
    CHECK(pk.flops_per_s == doctest::Approx(r.expected).epsilon(1e-12));
    CHECK(pk.from_table);
    int hits = 0;
    for (const auto& e : eff::peak_table) {
      if (e.device == r.g && e.math == r.p) {
        ++hits;
        CHECK_FALSE(e.source.empty());
      }
    }
    CHECK(hits == 1);
  }
  // A100 has no FP8 tensor cores.
  const std::string m =
      message_of([] { (void)eff::table_peak(eff::gpu::a100_sxm_80gb, eff::precision::fp8); });
  CHECK(starts_with(m, "mldiag: A100 SXM 80GB has no fp8 peak"));
}

TEST_CASE("MFU: GPT-2 124M on an A100 in bf16, worked by hand") {
  const eff::peak a100 = eff::table_peak(eff::gpu::a100_sxm_80gb, eff::precision::bf16);
  // 16 × 1024 tokens per step: 14,088,356,757,504 FLOPs (above). Measured step 0.150 s:
  // achieved 14,088,356,757,504 / 0.150 = 93,922,378,383,360 FLOP/s;
  // MFU = 93,922,378,383,360 / 312e12 = 0.301033264049231 (30.1%).
  const auto r = eff::model_flops_utilization(14'088'356'757'504.0, 0.150, a100);
  CHECK(r.achieved_flops_per_s == doctest::Approx(93'922'378'383'360.0).epsilon(1e-12));
  CHECK(r.peak_flops_per_s == 312e12);
  CHECK(r.mfu == doctest::Approx(0.301033264049231).epsilon(1e-12));
  // The same from throughput: 16,384 / 0.150 = 109,226.666… tokens/s × 859,885,056 FLOPs/token.
  const auto t = eff::model_flops_utilization_from_throughput(16384.0 / 0.150, 859'885'056.0, a100);
  CHECK(t.mfu == doctest::Approx(0.301033264049231).epsilon(1e-12));
}

TEST_CASE("MFU: Llama-2-7B on 8 H100 SXM in bf16, worked by hand") {
  // One 4096-token sequence per GPU, 8 GPUs: 32,768 tokens; 46,872,944,640 · 32,768
  // = 1,535,932,649,963,520 FLOPs per step. Step 0.5 s: 3,071,865,299,927,040 FLOP/s over
  // 8 · 989.5e12 = 7,916e12 -> MFU 0.388057769066074.
  const double step = eff::training_flops_per_step(llama2_7b(), 8, 4096);
  CHECK(step == 1'535'932'649'963'520.0);
  const auto r = eff::model_flops_utilization(
      step, 0.5, eff::table_peak(eff::gpu::h100_sxm, eff::precision::bf16), 8);
  CHECK(r.peak_flops_per_s == doctest::Approx(7916e12).epsilon(1e-12));
  CHECK(r.mfu == doctest::Approx(0.388057769066074).epsilon(1e-12));
}

TEST_CASE("MFU above 100% is an error naming the likely wrong input") {
  const eff::peak a100 = eff::table_peak(eff::gpu::a100_sxm_80gb, eff::precision::bf16);
  // GPT-2 step in 0.040 s: 14,088,356,757,504 / 0.040 / 312e12 = 1.1289 (112.9%): probably the
  // FLOP count (e.g. a global batch with devices = 1).
  const std::string a =
      message_of([&] { (void)eff::model_flops_utilization(14'088'356'757'504.0, 0.040, a100); });
  CHECK(starts_with(a, "mldiag: MFU would be 112.9%"));
  CHECK(a.find("Probably the FLOPs per step") != std::string::npos);
  CHECK(a.find("A100 SXM 80GB bf16 dense") != std::string::npos);
  // 0.001 s: MFU 45: a clock read around asynchronous launches.
  const std::string b =
      message_of([&] { (void)eff::model_flops_utilization(14'088'356'757'504.0, 0.001, a100); });
  CHECK(starts_with(b, "mldiag: MFU would be 4515%"));
  CHECK(b.find("Probably the step time") != std::string::npos);
  CHECK(b.find("synchroniz") != std::string::npos);
  // Against the non-tensor FP32 peak (19.5e12), 0.150 s gives MFU 4.82: the matmuls ran as TF32.
  const auto fp32 = eff::table_peak(eff::gpu::a100_sxm_80gb, eff::precision::fp32);
  const std::string c =
      message_of([&] { (void)eff::model_flops_utilization(14'088'356'757'504.0, 0.150, fp32); });
  CHECK(c.find("Probably the peak is too low") != std::string::npos);
  CHECK(c.find("TF32") != std::string::npos);
  // Exactly 100% is allowed: 312e12 FLOPs in 1 s.
  CHECK(eff::model_flops_utilization(312e12, 1.0, a100).mfu == 1.0);
  // With the 8 devices it ran on, the 0.040 s step is 14.1% — the devices argument matters.
  CHECK(eff::model_flops_utilization(14'088'356'757'504.0, 0.040, a100, 8).mfu ==
        doctest::Approx(1.1288747401846153 / 8).epsilon(1e-12));
}

TEST_CASE("bad inputs are errors, not numbers") {
  const eff::peak a100 = eff::table_peak(eff::gpu::a100_sxm_80gb, eff::precision::bf16);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {0.0, -1.0, inf, nan}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)eff::model_flops_utilization(bad, 0.1, a100), mldiag::error);
    CHECK_THROWS_AS((void)eff::model_flops_utilization(1e12, bad, a100), mldiag::error);
    CHECK_THROWS_AS((void)eff::custom_peak(bad), mldiag::error);
    CHECK_THROWS_AS((void)eff::model_flops_utilization_from_throughput(bad, 1e9, a100),
                    mldiag::error);
    CHECK_THROWS_AS((void)eff::model_flops_utilization_from_throughput(1e3, bad, a100),
                    mldiag::error);
    CHECK_THROWS_AS(eff::throughput_vs_target(bad, 1.0, eff::throughput_unit::tokens_per_s),
                    mldiag::error);
    CHECK_THROWS_AS(eff::throughput_vs_target(1.0, bad, eff::throughput_unit::samples_per_s),
                    mldiag::error);
  }
  CHECK_THROWS_AS((void)eff::model_flops_utilization(1e12, 0.1, a100, 0), mldiag::error);
  // A peak built by hand with a zero still fails.
  CHECK_THROWS_AS((void)eff::model_flops_utilization(1e12, 0.1, eff::peak{}), mldiag::error);
  // An overflowing achieved rate (1e300 FLOPs in 1e-300 s).
  CHECK_THROWS_AS((void)eff::model_flops_utilization(1e300, 1e-300, a100), mldiag::error);
  // Custom peak: 1e12 FLOPs in 0.01 s on a 197e12 peak -> 1e14 / 197e12 = 0.5076142131979695.
  CHECK(eff::model_flops_utilization(1e12, 0.01, eff::custom_peak(197e12, "TPU v4 bf16")).mfu ==
        doctest::Approx(0.5076142131979695).epsilon(1e-12));

  // Shapes.
  auto s = gpt2_124m();
  s.vocab = 0;
  CHECK(starts_with(message_of([&] { (void)eff::count_parameters(s); }),
                    "mldiag: transformer_shape.vocab is 0"));
  s = llama2_7b();
  s.kv_heads = 3;  // does not divide 32
  CHECK_THROWS_AS((void)eff::count_parameters(s), mldiag::error);
  s = mixtral_8x7b();
  s.moe.top_k = 9;
  CHECK_THROWS_AS((void)eff::count_parameters(s), mldiag::error);
  s.moe = {.top_k = 2};  // routing without experts
  CHECK_THROWS_AS((void)eff::count_parameters(s), mldiag::error);
  s = mixtral_8x7b();
  s.moe.first_layer = 32;
  CHECK_THROWS_AS((void)eff::count_parameters(s), mldiag::error);
  s = gpt2_124m();
  s.heads = 7;  // 768 is not a multiple of 7 and head_dim is not given
  CHECK_THROWS_AS((void)eff::count_parameters(s), mldiag::error);
  s = gpt2_124m();
  s.d_model = static_cast<std::uint64_t>(-768);  // a negative value cast to unsigned
  s.head_dim = 64;
  CHECK(message_of([&] { (void)eff::count_parameters(s); }).find("overflows 64 bits") !=
        std::string::npos);
  CHECK_THROWS_AS((void)eff::training_flops_per_token(gpt2_124m(), 0), mldiag::error);
  CHECK_THROWS_AS((void)eff::training_flops_per_step(gpt2_124m(), 0, 1024), mldiag::error);
}

TEST_CASE("evidence beside MFU: tensor-core activity and throughput against a target") {
  CHECK(eff::tensor_core_activity(0.0).fraction() == 0.0);  // fp32 without TF32: honest zero
  CHECK(eff::tensor_core_activity(1.0).fraction() == 1.0);
  CHECK(eff::tensor_core_activity(0.42).fraction() == 0.42);
  for (double bad : {-0.01, 1.01, 42.0, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(eff::tensor_core_activity{bad}, mldiag::error);
  }
  CHECK(message_of([] { eff::tensor_core_activity(42.0); }).find("divide a percentage by 100") !=
        std::string::npos);

  // 95,000 of a 120,000 tokens/s target: 95,000 / 120,000 = 0.791666…
  const eff::throughput_vs_target t(95'000.0, 120'000.0, eff::throughput_unit::tokens_per_s);
  CHECK(t.ratio() == doctest::Approx(0.7916666666666666).epsilon(1e-12));
  CHECK_FALSE(t.meets_target());
  CHECK(t.unit() == eff::throughput_unit::tokens_per_s);
  CHECK(eff::throughput_vs_target(64.0, 64.0, eff::throughput_unit::samples_per_s).meets_target());
}

TEST_CASE("once per step: the FLOP count and MFU allocate nothing") {
  const eff::transformer_shape shape = mixtral_8x7b();
  const eff::peak h100 = eff::table_peak(eff::gpu::h100_sxm, eff::precision::bf16);
  const auto before = mldiag_test::allocations();
  const auto f = eff::training_flops_per_token(shape, 4096);
  const auto r =
      eff::model_flops_utilization(eff::training_flops_per_step(f, 8 * 4096), 2.0, h100, 8);
  const auto t =
      eff::model_flops_utilization_from_throughput(16384.0, static_cast<double>(f.total), h100, 8);
  CHECK(mldiag_test::allocations() == before);
  // 83,722,002,432 FLOPs/token · 32,768 tokens / 2 s = 16,384 tokens/s · 83,722,002,432
  // = 1.371701…e15 FLOP/s over 8 · 989.5e12 = 7,916e12: MFU 0.173282123275125 both ways.
  CHECK(r.mfu == doctest::Approx(0.173282123275125).epsilon(1e-12));
  CHECK(t.mfu == doctest::Approx(0.173282123275125).epsilon(1e-12));
}
