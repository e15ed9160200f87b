// SPDX-License-Identifier: Apache-2.0
// mldiag-bench-gpu-train (issue 40): the monitor inside a real training step. A decoder-only
// transformer LM in LibTorch (pre-norm blocks, causal self-attention, GELU MLP, tied
// embeddings, AdamW; bf16 autocast on CUDA), trained on seeded synthetic tokens, and in one
// process, interleaved, medians of several repeats:
//   none        the training step alone
//   mldiag      the step with the monitor recording every gradient, every parameter and its
//               update, two activations per block and sampled attention entropy (CUDA:
//               mldiag::cuda's statistics plan, entropy kernels and readback rings, through
//               bench/gpu/mldiag_bench_capi; CPU: the host engine)
//   torch peer  the step with the same statistics from LibTorch ops (_foreach_norm,
//               isnan().any(), isinf().any(), softmax entropy)
// and, timed alone, the statistics alone and the bytes-read ceiling (a copy of as many bytes).
// Host synchronizations inside the step are counted (CUDA: CUPTI's driver callbacks, plus a
// spinning-kernel probe and the library's own count of its blocking calls). Then the Q3
// planted faults (--fault): a data loader that sleeps, one block made slow, a list that keeps
// every step's loss with its graph; the monitor gets step, layer and memory evidence and MFU,
// and the program prints which Q3 findings at warning or above each mode raised.
// Prints a table and, last, one JSON line. docs/benchmarks.md says how it is run and read.
#include <mldiag/adapters/torch.hpp>
#include <mldiag/adapters/torch_cuda_memory.hpp>
#include <mldiag/efficiency/flops.hpp>
#include <mldiag/efficiency/memory.hpp>
#include <mldiag/efficiency/profiler.hpp>
#include <mldiag/efficiency/timing.hpp>
#include <mldiag/monitor.hpp>

#include <torch/torch.h>
#include <torch/version.h>

// The CUDA path is compiled where this program is built against a CUDA LibTorch and linked
// with bench/gpu/mldiag_bench_capi.cu (bench/gpu/issue40.sh; CMake where both are found).
#ifndef MLDIAG_BENCH_CUDA
#define MLDIAG_BENCH_CUDA 0
#endif
#if MLDIAG_BENCH_CUDA
#include "gpu/mldiag_bench_capi.h"

#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

[[noreturn]] void usage_error(const std::string& what) {
  throw std::runtime_error(
      "mldiag: " + what +
      "\nusage: mldiag-bench-gpu-train [--preset gpu|cpu-check] [--layers N] [--d-model N] [--heads N] [--seq N] "
      "[--batch N] [--vocab N] [--steps N] [--repeats N] [--fault-steps N] "
      "[--fault all|none|input_starvation|slow_layer|memory_growth] [--no-timing] [--peak-tflops X] [--seed N] "
      "[--device cpu|cuda] [--check]");
}

enum class fault { none, input_starvation, slow_layer, memory_growth };
constexpr const char* fault_names[] = {"none", "input_starvation", "slow_layer", "memory_growth"};
// The detector each planted fault must raise (none: no Q3 finding at warning or above).
constexpr const char* expected_detector[] = {"", "input_starvation", "layer_dominates", "memory_growth"};

enum class mode { none, mldiag, torch_peer };
constexpr const char* mode_names[] = {"none", "mldiag", "torch peer"};

struct options {
  std::string preset = "cpu-check";
  std::int64_t layers = 4, d_model = 64, heads = 4, seq = 64, batch = 4, vocab = 1024;
  int steps = 8, repeats = 5, fault_steps = 260;
  std::vector<fault> faults = {fault::none, fault::input_starvation, fault::slow_layer, fault::memory_growth};
  bool timing = true, check = false;
  double peak_tflops = 989.0;  // H100/H200 SXM bf16 dense (the datasheet's 1979 "with sparsity", halved)
  std::uint64_t seed = 1;
  bool cuda = false;
  // Every 16th query row of the first sequence, all heads, rotating with the step: sampled
  // attention entropy (the monitor's host default samples every 5th row; on a 1024-token
  // context 16 gives 64 rows a head, enough for a mean, at 1/128 of the scores).
  std::int64_t entropy_stride = 16;
};

options parse(int argc, char** argv) {
  options o;
  // The preset first, so that the other flags override it whatever their order.
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--preset") == 0) o.preset = argv[i + 1];
  if (o.preset == "gpu") {
    // GPT-2-small-shaped: 12 x 768, 12 heads, 1024 tokens, 32768-token vocabulary, tied head:
    // 110.4M parameters (printed and checked against efficiency::count_parameters).
    o.layers = 12, o.d_model = 768, o.heads = 12, o.seq = 1024, o.batch = 16, o.vocab = 32768;
    o.steps = 10, o.repeats = 7, o.fault_steps = 260;
  } else if (o.preset != "cpu-check") {
    usage_error("unknown --preset '" + o.preset + "'; use gpu or cpu-check");
  }
  bool device_given = false;
  auto number = [&](int& i, const char* flag) -> double {
    if (i + 1 >= argc) usage_error(std::string(flag) + " needs a value");
    char* end = nullptr;
    const double v = std::strtod(argv[++i], &end);
    if (end == argv[i] || *end != '\0' || !std::isfinite(v)) usage_error(std::string(flag) + " needs a number, got '" + argv[i] + "'");
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--preset") ++i;
    else if (a == "--layers") o.layers = static_cast<std::int64_t>(number(i, "--layers"));
    else if (a == "--d-model") o.d_model = static_cast<std::int64_t>(number(i, "--d-model"));
    else if (a == "--heads") o.heads = static_cast<std::int64_t>(number(i, "--heads"));
    else if (a == "--seq") o.seq = static_cast<std::int64_t>(number(i, "--seq"));
    else if (a == "--batch") o.batch = static_cast<std::int64_t>(number(i, "--batch"));
    else if (a == "--vocab") o.vocab = static_cast<std::int64_t>(number(i, "--vocab"));
    else if (a == "--steps") o.steps = static_cast<int>(number(i, "--steps"));
    else if (a == "--repeats") o.repeats = static_cast<int>(number(i, "--repeats"));
    else if (a == "--fault-steps") o.fault_steps = static_cast<int>(number(i, "--fault-steps"));
    else if (a == "--peak-tflops") o.peak_tflops = number(i, "--peak-tflops");
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(number(i, "--seed"));
    else if (a == "--no-timing") o.timing = false;
    else if (a == "--check") o.check = true;
    else if (a == "--fault") {
      if (i + 1 >= argc) usage_error("--fault needs a value");
      const std::string f = argv[++i];
      o.faults.clear();
      if (f == "all") o.faults = {fault::none, fault::input_starvation, fault::slow_layer, fault::memory_growth};
      for (int k = 0; k < 4; ++k)
        if (f == fault_names[k]) o.faults = {static_cast<fault>(k)};
      if (o.faults.empty()) usage_error("unknown --fault '" + f + "'; use all, none, input_starvation, slow_layer or memory_growth");
    } else if (a == "--device") {
      if (i + 1 >= argc) usage_error("--device needs cpu or cuda");
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") usage_error("--device must be cpu or cuda, got '" + d + "'");
      o.cuda = d == "cuda";
      device_given = true;
    } else {
      usage_error("unknown flag " + a);
    }
  }
  if (o.layers < 3 || o.d_model < 8 || o.heads < 1 || o.d_model % o.heads != 0 || o.seq < 16 || o.batch < 1 || o.vocab < 16) {
    usage_error("need --layers >= 3 (layer_dominates compares at least three), --d-model >= 8 and divisible by --heads, "
                "--seq >= 16, --batch >= 1, --vocab >= 16");
  }
  if (o.steps < 1 || o.repeats < 1 || o.fault_steps < 0 || !(o.peak_tflops > 0.0)) {
    usage_error("need --steps >= 1, --repeats >= 1, --fault-steps >= 0 and --peak-tflops > 0");
  }
#if MLDIAG_BENCH_CUDA
  if (!device_given) o.cuda = torch::cuda::is_available();
  if (o.cuda && !torch::cuda::is_available()) usage_error("--device cuda, but LibTorch sees no CUDA device; use --device cpu");
#else
  if (device_given && o.cuda) {
    usage_error("--device cuda: this build has no CUDA path (build it with bench/gpu/issue40.sh against a CUDA LibTorch)");
  }
#endif
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------------------------------------
// The model.

// What the forward pass records and how it misbehaves; one per trainer.
struct forward_context {
  bool tap = false;                 // keep two activations per block and sampled attention logits
  std::int64_t entropy_offset = 0;  // which query rows the sample starts at (rotates per step)
  int slow_block = -1;              // slow_layer: this block recomputes its MLP `slow_repeats` (4 L) times
  int slow_repeats = 0;
  bool slow_sync = false;           // slow_layer on CUDA: and synchronizes the device once (counted)
  std::vector<torch::Tensor> block_out, mlp_hidden, scores;  // by block, when tapping
  std::vector<double> block_seconds;                        // host clock (the CPU's layer times)
  void* timer = nullptr;                                    // CUDA: event timer, layer ids below
  std::vector<std::int32_t> timer_ids;
  void* stream = nullptr;
};

struct block_impl : torch::nn::Module {
  block_impl(std::int64_t d, std::int64_t heads, int index)
      : heads_(heads), index_(index),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        qkv(register_module("qkv", torch::nn::Linear(d, 3 * d))),
        proj(register_module("proj", torch::nn::Linear(d, d))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        fc1(register_module("fc1", torch::nn::Linear(d, 4 * d))),
        fc2(register_module("fc2", torch::nn::Linear(4 * d, d))) {}

  // x: [B, T, d] -> [B, T, d]. rows/masks: the sampled query rows and their causal masks.
  torch::Tensor forward(const torch::Tensor& x, forward_context& ctx, const torch::Tensor& causal,
                        const torch::Tensor& rows, const torch::Tensor& row_mask) {
    const auto B = x.size(0), T = x.size(1), d = x.size(2), dh = d / heads_;
    auto qkv_out = qkv(ln1(x)).view({B, T, 3, heads_, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
#if TORCH_VERSION_MAJOR >= 2
    (void)causal;
    auto attn = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);  // flash on CUDA bf16
#else
    auto scores = torch::matmul(q, k.transpose(-2, -1)).mul(scale).masked_fill(causal, -INFINITY);
    auto attn = torch::matmul(torch::softmax(scores, -1), v);
#endif
    auto h = x + proj(attn.transpose(1, 2).reshape({B, T, d}));
    auto hidden = torch::gelu(fc1(ln2(h)));
    auto y = h + fc2(hidden);
    if (index_ == ctx.slow_block) {
      // The planted slow layer: the MLP recomputed and thrown away (redundant, unfused work),
      // and on CUDA one redundant device synchronization, which the sync count must see.
      torch::NoGradGuard no_grad;
      for (int r = 0; r < ctx.slow_repeats; ++r) (void)fc2(torch::gelu(fc1(ln2(h))));
#if MLDIAG_BENCH_CUDA
      if (ctx.slow_sync) torch::cuda::synchronize();
#endif
    }
    if (ctx.tap) {
      torch::NoGradGuard no_grad;
      ctx.block_out.push_back(y.detach());
      ctx.mlp_hidden.push_back(hidden.detach()[0]);  // [T, 4d]: the first sequence
      // Sampled attention logits: the first sequence, every head, the sampled query rows,
      // every key, the causal mask applied: [H, R, T].
      auto qs = q[0].index_select(1, rows);  // [H, R, dh]
      ctx.scores.push_back(torch::matmul(qs, k[0].transpose(-2, -1)).mul(scale).masked_fill(row_mask, -INFINITY).contiguous());
    }
    return y;
  }

  std::int64_t heads_;
  int index_;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE_IMPL(block, block_impl);

struct gpt_impl : torch::nn::Module {
  gpt_impl(const options& o)
      : tok(register_module("tok_embed", torch::nn::Embedding(o.vocab, o.d_model))),
        pos(register_parameter("pos_embed", torch::zeros({o.seq, o.d_model}))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})))) {
    for (int i = 0; i < static_cast<int>(o.layers); ++i) blocks->push_back(block(o.d_model, o.heads, i));
    // GPT-2's initialization: N(0, 0.02), the projections into the residual stream scaled by
    // 1/sqrt(2 L), biases zero; the head is the token embedding (tied).
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(o.layers));
    for (auto& p : named_parameters()) {
      const auto& key = p.key();
      if (key.find("ln") != std::string::npos) continue;
      if (p.value().dim() < 2 && key != "pos_embed") p.value().zero_();
      else if (key.find("proj.") != std::string::npos || key.find("fc2.") != std::string::npos) p.value().normal_(0.0, residual_std);
      else p.value().normal_(0.0, 0.02);
    }
  }

  // tokens [B, T] -> logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& tokens, forward_context& ctx, const torch::Tensor& causal,
                        const torch::Tensor& rows, const torch::Tensor& row_mask) {
    auto h = tok(tokens) + pos.slice(0, 0, tokens.size(1));
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      const auto t0 = clock_type::now();
#if MLDIAG_BENCH_CUDA
      if (ctx.timer != nullptr) mldiag_timer_begin(ctx.timer, ctx.timer_ids[i], ctx.stream);
#endif
      h = blocks[i]->as<block_impl>()->forward(h, ctx, causal, rows, row_mask);
#if MLDIAG_BENCH_CUDA
      if (ctx.timer != nullptr) mldiag_timer_end(ctx.timer, ctx.stream);
#endif
      if (ctx.timer == nullptr) ctx.block_seconds.push_back(since(t0));
    }
    return torch::nn::functional::linear(ln_f(h), tok->weight);
  }

  torch::nn::Embedding tok;
  torch::Tensor pos;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f;
};
TORCH_MODULE_IMPL(gpt, gpt_impl);

mldiag::efficiency::transformer_shape shape_of(const options& o) {
  return {.vocab = static_cast<std::uint64_t>(o.vocab), .d_model = static_cast<std::uint64_t>(o.d_model),
          .layers = static_cast<std::uint64_t>(o.layers), .heads = static_cast<std::uint64_t>(o.heads),
          .ffn_hidden = static_cast<std::uint64_t>(4 * o.d_model), .tied_embeddings = true,
          .learned_positions = static_cast<std::uint64_t>(o.seq), .bias = true,
          .norm = mldiag::efficiency::norm_kind::layer_norm};
}

// ---------------------------------------------------------------------------------------------
// The trainer: one model, its optimizer, its data, and the three ways of computing statistics.

struct findings_seen {
  std::vector<mldiag::finding> warnings;  // severity warning and above, every question
};

struct step_record {
  std::int64_t step = -1;
  mldiag::step_timings timings;
  mldiag::memory_evidence memory;
  std::optional<double> mfu;
  std::vector<std::pair<std::string, double>> layers;  // CPU: host clock; CUDA: filled from the event timer
  bool layers_ready = false;
};

struct trainer {
  options o;
  torch::Device dev;
  gpt net{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  torch::Tensor causal, mult, add;
  std::vector<torch::Tensor> sample_rows, sample_masks;  // by offset
  std::vector<std::string> param_names;
  std::vector<torch::Tensor> params, update;  // update: -p before the step, p_new - p_old after
  forward_context ctx;
  double lr = 1e-3;
  double flops_per_step = 0.0;
  std::vector<torch::Tensor> peer_keep;  // the peer's results (kept so nothing is dropped)
  double peer_sink = 0.0;
  std::vector<torch::Tensor> leak;       // memory_growth: every step's loss, with its graph

  // The monitor (built per run) and what feeds it.
  std::unique_ptr<mldiag::monitor> mon;
  findings_seen seen;
  std::deque<step_record> records;
  std::map<std::string, std::vector<double>> layer_history;  // seconds by layer, every fed step
  double monitor_host_seconds = 0.0;
  double data_sleep_s = 0.0;
  fault planted = fault::none;
  std::int64_t onset = 1 << 30;

#if MLDIAG_BENCH_CUDA
  void* stream = nullptr;
  void* plan = nullptr;
  void* readback = nullptr;
  void* ring = nullptr;
  void* timer = nullptr;
  torch::Tensor workspace, entropy_ws, scalars;  // scalars: [loss f64, pad][entropy_stats x L]
  std::vector<torch::Tensor> tap_out, tap_hidden;  // fixed buffers the plan reads
  std::vector<std::string> plan_names;
  std::vector<mldiag::role> plan_roles;
  std::size_t entropy_ws_bytes = 0;
  static constexpr std::size_t scalars_header = 64;
#endif

  explicit trainer(const options& opts) : o(opts), dev(opts.cuda ? torch::kCUDA : torch::kCPU) {
    torch::manual_seed(o.seed);
    net = gpt(o);
    net->to(dev);
    for (const auto& p : net->named_parameters()) {
      param_names.push_back(p.key());
      params.push_back(p.value());
      update.push_back(torch::zeros_like(p.value()));
    }
    opt = std::make_unique<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.1));
    causal = torch::ones({o.seq, o.seq}, torch::TensorOptions().dtype(torch::kBool).device(dev)).triu(1);
    // The sampled rows of each offset and their causal masks, made once (no host-to-device
    // copy inside a step).
    for (std::int64_t off = 0; off < o.entropy_stride; ++off) {
      auto r = torch::arange(off, o.seq, o.entropy_stride, torch::TensorOptions().dtype(torch::kLong).device(dev));
      sample_rows.push_back(r);
      sample_masks.push_back(causal.index_select(0, r));  // [R, T]
    }
    {
      // A[t] = a^t, C[t] = c (1 + a + ... + a^(t-1)), mod V; a odd and c odd, so the map is a
      // permutation of the tokens for a power-of-two V (every token has one successor).
      const std::int64_t a = 5, c = 7;
      std::vector<std::int64_t> A(static_cast<std::size_t>(o.seq + 1)), C(A.size());
      A[0] = 1, C[0] = 0;
      for (std::size_t i = 1; i < A.size(); ++i) {
        A[i] = (A[i - 1] * a) % o.vocab;
        C[i] = (C[i - 1] * a + c) % o.vocab;
      }
      mult = torch::tensor(A, torch::kLong).to(dev);
      add = torch::tensor(C, torch::kLong).to(dev);
    }
    flops_per_step = mldiag::efficiency::training_flops_per_step(shape_of(o), static_cast<std::uint64_t>(o.batch),
                                                                 static_cast<std::uint64_t>(o.seq));
#if MLDIAG_BENCH_CUDA
    if (o.cuda) {
      stream = c10::cuda::getCurrentCUDAStream().stream();
      timer = mldiag_timer_create(4);
      if (timer == nullptr) throw std::runtime_error(std::string("mldiag: event timer: ") + mldiag_last_error());
      for (std::int64_t i = 0; i < o.layers; ++i) ctx.timer_ids.push_back(mldiag_timer_intern(timer, ("blocks." + std::to_string(i)).c_str()));
      ctx.stream = stream;
    }
#endif
  }

  ~trainer() {
#if MLDIAG_BENCH_CUDA
    if (o.cuda) {
      torch::cuda::synchronize();
      if (readback != nullptr) mldiag_readback_destroy(readback);
      if (plan != nullptr) mldiag_plan_destroy(plan);
      if (ring != nullptr) mldiag_bytes_ring_destroy(ring);
      if (timer != nullptr) mldiag_timer_destroy(timer);
    }
#endif
  }

  // Seeded synthetic tokens, made on the device: a fixed affine bigram, x[t+1] = (a x[t] + c)
  // mod V, from a random start per sequence (x[t] = A[t] x[0] + C[t] mod V, the multipliers
  // made once), one token in ten replaced by a random one. Learnable as a lookup table (the
  // loss falls, so the convergence detectors see a healthy run); no host data, no copy.
  std::pair<torch::Tensor, torch::Tensor> batch() {
    const auto opts = torch::TensorOptions().dtype(torch::kLong).device(dev);
    auto start = torch::randint(0, o.vocab, {o.batch, 1}, opts);
    auto seq = (mult.unsqueeze(0) * start + add.unsqueeze(0)).remainder(o.vocab);
    auto noise = torch::randint(0, o.vocab, {o.batch, o.seq + 1}, opts);
    auto keep = torch::rand({o.batch, o.seq + 1}, torch::TensorOptions().device(dev)) >= 0.1;
    auto tokens = torch::where(keep, seq, noise);
    return {tokens.slice(1, 0, o.seq), tokens.slice(1, 1, o.seq + 1)};
  }

  void set_autocast(bool on) {
#if MLDIAG_BENCH_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
    if (!o.cuda) return;
    at::autocast::set_autocast_enabled(at::kCUDA, on);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    // The cast cache holds bf16 copies of the weights; the optimizer changes them in place, so
    // it is cleared every step (what leaving Python's autocast context does).
    if (!on) at::autocast::clear_cache();
#elif MLDIAG_BENCH_CUDA
#error "mldiag: the CUDA path needs LibTorch >= 2.4 (at::autocast::set_autocast_enabled(device, bool))"
#else
    (void)on;
#endif
  }

  // One training step; `m` says how its statistics are computed. Returns the host's seconds.
  double step(std::int64_t s, mode m) {
    const auto t0 = clock_type::now();
    step_record rec;
    rec.step = s;
    set_region(1);
    const bool monitored = m == mode::mldiag;
#if MLDIAG_BENCH_CUDA
    const bool timed_on_gpu = monitored && o.cuda;
    ctx.timer = timed_on_gpu ? timer : nullptr;
    if (timed_on_gpu) mldiag_timer_begin_step(timer, stream);
#endif
    // Data (input_starvation: the loader sleeps).
    if (planted == fault::input_starvation && s >= onset) std::this_thread::sleep_for(std::chrono::duration<double>(data_sleep_s));
    auto [x, y] = batch();
    const double data_s = since(t0);

    // Forward.
    const auto t1 = clock_type::now();
#if MLDIAG_BENCH_CUDA
    if (timed_on_gpu) mldiag_timer_mark(timer, static_cast<int>(mldiag::efficiency::phase::forward), stream);
#endif
    ctx.tap = m != mode::none;
    ctx.entropy_offset = s % o.entropy_stride;
    ctx.block_out.clear();
    ctx.mlp_hidden.clear();
    ctx.scores.clear();
    ctx.block_seconds.clear();
    ctx.slow_block = planted == fault::slow_layer && s >= onset ? static_cast<int>(o.layers / 2) : -1;
    ctx.slow_repeats = static_cast<int>(4 * o.layers);
    ctx.slow_sync = o.cuda;
    const auto off = static_cast<std::size_t>(ctx.entropy_offset);
    set_autocast(true);
    auto logits = net->forward(x, ctx, causal, sample_rows[off], sample_masks[off]);
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, o.vocab}), y.reshape({-1}));
    if (planted == fault::memory_growth && s >= onset) {
      // The planted leak: a per-token loss of the first sequence's first 256 positions, kept
      // for "later logging" without detach(): each one holds its graph and the [256, V] fp32
      // log-probabilities that graph saved.
      const auto n = std::min<std::int64_t>(256, o.seq);
      leak.push_back(torch::nn::functional::cross_entropy(
          logits[0].slice(0, 0, n).to(torch::kFloat), y[0].slice(0, 0, n),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)));
    }
    const double forward_s = since(t1);

    // Backward.
    const auto t2 = clock_type::now();
#if MLDIAG_BENCH_CUDA
    if (timed_on_gpu) mldiag_timer_mark(timer, static_cast<int>(mldiag::efficiency::phase::backward), stream);
#endif
    zero_grad();
    loss.backward();
    set_autocast(false);
    const double backward_s = since(t2);

    // Optimizer; the update is read as p_new - p_old (two passes the statistics need).
    const auto t3 = clock_type::now();
#if MLDIAG_BENCH_CUDA
    if (timed_on_gpu) mldiag_timer_mark(timer, static_cast<int>(mldiag::efficiency::phase::optimizer), stream);
#endif
    const double warm = std::min(1.0, static_cast<double>(s + 1) / 10.0);
    static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[0].options()).lr(lr * warm);
    if (m != mode::none && o.cuda) {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i) torch::neg_out(update[i], params[i]);
    }
    // (On the CPU, update[] holds p_old: the host engine reads each parameter and its update in
    // one pass after the step.)
    opt->step();
    if (m != mode::none && o.cuda) {
      torch::NoGradGuard no_grad;
      at::_foreach_add_(update, params);
    }
#if MLDIAG_BENCH_CUDA
    if (timed_on_gpu) mldiag_timer_end_step(timer, stream);
#endif
    const double optimizer_s = since(t3);

    rec.timings.data_wait = data_s;
    rec.timings.forward = forward_s;
    rec.timings.backward = backward_s;
    rec.timings.optimizer = optimizer_s;
    rec.timings.total = since(t0);  // the step without the statistics (what the program trains)
    if (m == mode::torch_peer) torch_peer(loss);
    if (monitored) observe(s, loss, rec);
    set_region(0);
    return since(t0);
  }

  void zero_grad() {
#if TORCH_VERSION_MAJOR >= 2
    opt->zero_grad(/*set_to_none=*/false);  // gradients keep their memory: the plan reads them in place
#else
    opt->zero_grad();
#endif
  }

  static void set_region(int r) {
#if MLDIAG_BENCH_CUDA
    mldiag_sync_counter_region(r);
#else
    (void)r;
#endif
  }

  // ---- LibTorch computing the same statistics ----
  void torch_peer(const torch::Tensor& loss) {
    set_region(4);
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    if (!o.cuda) {
      // The host peer forms the update the same way the device path does.
      for (std::size_t i = 0; i < params.size(); ++i) update[i] = params[i].detach() - update[i];
    }
    std::vector<torch::Tensor> out;
    for (const auto& list : {grads, params, update}) {
      auto norms = at::_foreach_norm(list);
      out.push_back(torch::stack(norms));
      std::vector<torch::Tensor> flags;
      for (const auto& t : list) {
        flags.push_back(torch::isnan(t).any());
        flags.push_back(torch::isinf(t).any());
      }
      out.push_back(torch::stack(flags));
    }
    out.push_back(torch::stack(at::_foreach_norm(ctx.block_out)));
    out.push_back(torch::stack(at::_foreach_norm(ctx.mlp_hidden)));
    for (const auto& sc : ctx.scores) {
      const auto p = torch::softmax(sc.to(torch::kFloat), -1);
      out.push_back((-(p * torch::log(p.clamp_min(1e-30))).sum(-1)).mean());
    }
    out.push_back(loss.detach());
    if (!o.cuda) {
      for (std::size_t i = 0; i < params.size(); ++i) update[i] = params[i].detach().clone();  // p_old for the next step
      for (const auto& t : out) peer_sink += t.to(torch::kDouble).sum().item<double>();
    } else {
      peer_keep = std::move(out);  // stays on the device: the peer is charged no readback, in its favour
    }
    set_region(1);
  }

  // ---- The monitor ----
  void observe(std::int64_t s, const torch::Tensor& loss, step_record& rec) {
    const auto tm = clock_type::now();
    set_region(2);
    if (!o.cuda) {
      rec.memory = mldiag::efficiency::with_host_memory({});
      for (std::size_t i = 0; i < ctx.block_seconds.size(); ++i) rec.layers.emplace_back("blocks." + std::to_string(i), ctx.block_seconds[i]);
      rec.layers_ready = true;
      feed_cpu(s, loss, rec);
    }
#if MLDIAG_BENCH_CUDA
    else {
      if (plan == nullptr) build_plan();
      enqueue_cuda(s, loss);
      if (mldiag::torch_cuda::available) rec.memory = mldiag::efficiency::with_host_memory(mldiag::torch_cuda::memory(0));
      rec.mfu = flops_per_step / *rec.timings.total / (o.peak_tflops * 1e12);
      records.push_back(std::move(rec));
      set_region(3);
      drain(false);
    }
#endif
    monitor_host_seconds += since(tm);
    set_region(1);
  }

  void keep_findings(std::span<const mldiag::finding> fs) {
    for (const auto& f : fs)
      if (f.severity >= mldiag::severity::warning) seen.warnings.push_back(f);
  }

  void feed_common(const step_record& rec, double loss_value) {
    mon->observe(mldiag::scalar::loss, loss_value);
    mon->observe(mldiag::scalar::learning_rate, lr * std::min(1.0, static_cast<double>(rec.step + 1) / 10.0));
    mon->observe(rec.timings);
    mon->observe(rec.memory);
    if (rec.mfu) mon->observe(mldiag::efficiency_evidence{.mfu = rec.mfu});
    for (const auto& [name, seconds] : rec.layers) {
      mon->observe(mldiag::layer_timing{name, seconds});
      layer_history[name].push_back(seconds);
    }
  }

  void feed_cpu(std::int64_t s, const torch::Tensor& loss, const step_record& rec) {
    torch::NoGradGuard no_grad;
    mon->begin_step(s);
    feed_common(rec, loss.item<double>());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      if (p.grad().defined()) mon->observe(mldiag::role::gradient, param_names[i], mldiag::compute_stats(p.grad()));
      const auto both = mldiag::parameter_and_update_stats(update[i], p);  // update[i]: p_old, then p_new
      mon->observe(mldiag::role::parameter, param_names[i], both.parameter);
      if (s > 0) mon->observe(mldiag::role::update, param_names[i], both.update);
    }
    for (std::size_t b = 0; b < ctx.block_out.size(); ++b) {
      const std::string name = "blocks." + std::to_string(b);
      mon->observe(mldiag::role::activation, name + ".out", mldiag::compute_stats(ctx.block_out[b]));
      mon->observe(mldiag::role::activation, name + ".mlp.gelu", mldiag::compute_stats(ctx.mlp_hidden[b]));
      mon->observe(mldiag::row_entropy{name + ".attn", mldiag::entropy_from_logits(ctx.scores[b])});
    }
    keep_findings(mon->end_step());
  }

#if MLDIAG_BENCH_CUDA
  // The plan over every gradient, parameter, update and the two tap buffers of each block,
  // built once after the first monitored step (when the gradients and the taps' shapes exist).
  void build_plan() {
    std::vector<const void*> ptrs;
    std::vector<std::int64_t> counts;
    std::vector<int> dtypes;
    auto add = [&](const torch::Tensor& t, const std::string& name, mldiag::role r) {
      ptrs.push_back(t.data_ptr());
      counts.push_back(t.numel());
      dtypes.push_back(static_cast<int>(mldiag::as_tensor_ref(name, t).dtype()));
      plan_names.push_back(name);
      plan_roles.push_back(r);
    };
    for (std::size_t i = 0; i < params.size(); ++i) add(params[i].grad(), param_names[i], mldiag::role::gradient);
    for (std::size_t i = 0; i < params.size(); ++i) add(params[i], param_names[i], mldiag::role::parameter);
    for (std::size_t i = 0; i < params.size(); ++i) add(update[i], param_names[i], mldiag::role::update);
    for (std::size_t b = 0; b < ctx.block_out.size(); ++b) {
      tap_out.push_back(torch::empty_like(ctx.block_out[b]));
      tap_hidden.push_back(torch::empty_like(ctx.mlp_hidden[b]));
      add(tap_out.back(), "blocks." + std::to_string(b) + ".out", mldiag::role::activation);
      add(tap_hidden.back(), "blocks." + std::to_string(b) + ".mlp.gelu", mldiag::role::activation);
    }
    std::size_t ws = 0;
    plan = mldiag_plan_create(ptrs.data(), counts.data(), dtypes.data(), static_cast<int>(ptrs.size()), 0, &ws);
    if (plan == nullptr) throw std::runtime_error(std::string("mldiag: statistics plan: ") + mldiag_last_error());
    workspace = torch::empty({static_cast<std::int64_t>(ws)}, torch::TensorOptions().dtype(torch::kUInt8).device(dev));
    if (mldiag_plan_upload(plan, workspace.data_ptr(), stream) != 0) throw std::runtime_error(mldiag_last_error());
    readback = mldiag_readback_create(plan, 8);
    const std::size_t rows = static_cast<std::size_t>(ctx.scores.front().numel() / o.seq);
    entropy_ws_bytes = mldiag_entropy_workspace_bytes(rows + static_cast<std::size_t>(o.heads));  // the longest sample
    entropy_ws = torch::empty({static_cast<std::int64_t>(entropy_ws_bytes) * o.layers},
                              torch::TensorOptions().dtype(torch::kUInt8).device(dev));
    const std::size_t scalar_bytes = scalars_header + static_cast<std::size_t>(o.layers) * mldiag_entropy_stats_bytes();
    scalars = torch::zeros({static_cast<std::int64_t>(scalar_bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(dev));
    ring = mldiag_bytes_ring_create(scalar_bytes, 8);
    if (readback == nullptr || ring == nullptr) throw std::runtime_error(std::string("mldiag: readback: ") + mldiag_last_error());
  }

  // Everything the monitor asks of the GPU for step s, enqueued on the step's stream: copies
  // of the taps into the plan's buffers, the statistics, the entropy of each block's sample,
  // the loss, and the two copies to pinned memory. Nothing here waits for the device.
  void enqueue_cuda(std::int64_t s, const torch::Tensor& loss) {
    torch::NoGradGuard no_grad;
    for (std::size_t b = 0; b < tap_out.size(); ++b) {
      tap_out[b].copy_(ctx.block_out[b]);
      tap_hidden[b].copy_(ctx.mlp_hidden[b]);
    }
    scalars.slice(0, 0, 8).view(torch::kDouble).copy_(loss.detach().reshape({1}));
    stats_only();
    if (mldiag_readback_enqueue(readback, plan, workspace.data_ptr(), stream, s) != 0 ||
        mldiag_bytes_ring_enqueue(ring, scalars.data_ptr(), stream, s) != 0) {
      throw std::runtime_error(mldiag_last_error());
    }
  }

  // Hands every step whose copies have arrived to the monitor, in order; never waits unless
  // `wait` (the end of a run, outside any step).
  void drain(bool wait) {
    if (readback == nullptr) return;
    if (wait) {
      mldiag_readback_wait(readback);
      mldiag_bytes_ring_wait(ring);
    }
    // Layer times: the event timer hands over each step once, oldest first.
    for (;;) {
      std::int64_t ts = -1;
      const void* ph = nullptr;
      const void* ly = nullptr;
      std::size_t n = 0;
      if (mldiag_timer_try_readback(timer, &ts, &ph, &ly, &n) != 1) break;
      const auto* layers = static_cast<const mldiag::efficiency::layer_result*>(ly);
      for (auto& r : records)
        if (r.step == ts) {
          for (std::size_t i = 0; i < n; ++i) r.layers.emplace_back(std::string(layers[i].name), layers[i].total.forward);
          r.layers_ready = true;
        }
    }
    for (;;) {
      std::int64_t s1 = -1, s2 = -1;
      int flag = 0;
      // The stats copy of a step is enqueued before its scalars: when the scalars are there,
      // so are the statistics.
      const auto* raw = static_cast<const unsigned char*>(mldiag_bytes_ring_next(ring, &s2));
      if (raw == nullptr) break;
      const auto* stats = static_cast<const mldiag::tensor_stats*>(mldiag_readback_next(readback, &s1, &flag));
      if (stats == nullptr || s1 != s2) throw std::runtime_error("mldiag: readback rings out of step (" + std::to_string(s1) + " vs " + std::to_string(s2) + ")");
      double loss_value = 0.0;
      std::memcpy(&loss_value, raw, sizeof loss_value);
      while (!records.empty() && records.front().step < s1) records.pop_front();
      if (records.empty() || records.front().step != s1) continue;
      const step_record& rec = records.front();
      mon->begin_step(s1);
      feed_common(rec, loss_value);
      for (std::size_t i = 0; i < plan_names.size(); ++i) {
        if (plan_roles[i] == mldiag::role::update && s1 == 0) continue;
        mon->observe(plan_roles[i], plan_names[i], stats[i]);
      }
      for (std::int64_t b = 0; b < o.layers; ++b) {
        mldiag::entropy_stats e;
        std::memcpy(&e, raw + scalars_header + static_cast<std::size_t>(b) * sizeof e, sizeof e);
        mon->observe(mldiag::row_entropy{"blocks." + std::to_string(b) + ".attn", e});
      }
      keep_findings(mon->end_step());
      records.pop_front();
    }
  }

  // The statistics' launches: the plan and the entropy kernels. Alone (no training) for the
  // table, and inside the monitored step (enqueue_cuda).
  void stats_only() {
    if (mldiag_plan_compute(plan, workspace.data_ptr(), stream) != 0) throw std::runtime_error(mldiag_last_error());
    auto* d_entropy = static_cast<unsigned char*>(scalars.data_ptr()) + scalars_header;
    auto* d_ews = static_cast<unsigned char*>(entropy_ws.data_ptr());
    for (std::size_t b = 0; b < ctx.scores.size(); ++b) {
      const auto& sc = ctx.scores[b];
      const int dt = static_cast<int>(mldiag::as_tensor_ref("scores", sc).dtype());
      if (mldiag_entropy_logits(sc.data_ptr(), sc.numel(), o.seq, dt, d_ews + b * entropy_ws_bytes, entropy_ws_bytes,
                                d_entropy + b * mldiag_entropy_stats_bytes(), stream, nullptr) != 0) {
        throw std::runtime_error(mldiag_last_error());
      }
    }
  }
#endif

  // Bytes the monitor's statistics read per step: every gradient, parameter and update, the
  // two taps of each block, the sampled attention logits.
  double stats_bytes() const {
    double b = 0.0;
    for (const auto& p : params) b += 3.0 * static_cast<double>(p.numel() * p.element_size());
    for (const auto& t : ctx.block_out) b += static_cast<double>(t.numel() * t.element_size());
    for (const auto& t : ctx.mlp_hidden) b += static_cast<double>(t.numel() * t.element_size());
    for (const auto& t : ctx.scores) b += static_cast<double>(t.numel() * t.element_size());
    return b;
  }

  void synchronize() const {
#if MLDIAG_BENCH_CUDA
    if (o.cuda) torch::cuda::synchronize();
#endif
  }

  void new_monitor() {
    mldiag::monitor_config c;
    c.task.classes = static_cast<std::size_t>(o.vocab);
    mon = std::make_unique<mldiag::monitor>(c);
    seen = {};
    records.clear();
  }

  std::int64_t parameter_count() const {
    std::int64_t n = 0;
    for (const auto& p : params) n += p.numel();
    return n;
  }
};

// A plain matmul's rate, to check the FLOP formula's scale against what the device does.
double matmul_tflops(const options& o) {
  // Small off the gpu preset: the tiny preset on CUDA runs under compute-sanitizer.
  const bool big = o.cuda && o.preset == "gpu";
  const std::int64_t n = big ? 8192 : (o.cuda ? 1024 : 512);
  const auto opts = torch::TensorOptions().device(o.cuda ? torch::kCUDA : torch::kCPU).dtype(o.cuda ? torch::kBFloat16 : torch::kFloat);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  auto c = torch::matmul(a, b);
  const int reps = o.cuda ? 20 : 5;
#if MLDIAG_BENCH_CUDA
  if (o.cuda) torch::cuda::synchronize();
#endif
  const auto t0 = clock_type::now();
  for (int r = 0; r < reps; ++r) c = torch::matmul(a, b);
#if MLDIAG_BENCH_CUDA
  if (o.cuda) torch::cuda::synchronize();
#endif
  const double s = since(t0) / reps;
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s / 1e12;
}

// The copy rate (bytes read + written per second) of a buffer far larger than the caches: the
// ceiling the statistics are measured against (bench/gpu/bench.py's convention).
double copy_gbs(const options& o) {
  const std::int64_t bytes = o.cuda && o.preset == "gpu" ? (std::int64_t{2} << 30) : (std::int64_t{256} << 20);
  const auto opts = torch::TensorOptions().device(o.cuda ? torch::kCUDA : torch::kCPU).dtype(torch::kUInt8);
  auto src = torch::ones({bytes}, opts), dst = torch::empty({bytes}, opts);
  dst.copy_(src);
  const int reps = o.cuda ? 10 : 3;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
#if MLDIAG_BENCH_CUDA
    if (o.cuda) torch::cuda::synchronize();
#endif
    const auto t0 = clock_type::now();
    dst.copy_(src);
#if MLDIAG_BENCH_CUDA
    if (o.cuda) torch::cuda::synchronize();
#endif
    best = std::min(best, since(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

struct q3_result {
  fault f;
  int steps = 0;
  std::vector<std::string> q3_warnings;     // detector names, Q3 at warning or above
  std::vector<std::string> other_warnings;  // other questions, for the reader
  bool memory_visible = false;
  double median_step_ms = 0.0;
  std::uint64_t syncs = 0;
  bool ok = true;
  std::string verdict;
  std::string top_layer;  // the layer with the largest median time, its share of the layers' sum
  double top_share = 0.0;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

int main(int argc, char** argv) try {
  // Line-buffered: a run stopped by its time limit (bench/gpu/issue40.sh) keeps what it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const options o = parse(argc, argv);
  if (!o.cuda) torch::set_num_threads(1);
  const auto shape = shape_of(o);
  const auto counted = mldiag::efficiency::count_parameters(shape);
  const auto per_token = mldiag::efficiency::training_flops_per_token(shape, static_cast<std::uint64_t>(o.seq));

#if MLDIAG_BENCH_CUDA
  std::string sync_method = "not applicable (CPU)";
  if (o.cuda) {
    sync_method = mldiag_sync_counter_start() == 0
                      ? "CUPTI driver-API callbacks (cu*Synchronize, synchronous cuMemcpy/cuMemset, cuMemFree)"
                      : std::string("not counted: ") + mldiag_last_error();
  }
#else
  const std::string sync_method = "not applicable (CPU)";
#endif
  const bool syncs_counted = sync_method.rfind("CUPTI", 0) == 0;

  trainer t(o);
  t.lr = o.preset == "gpu" ? 6e-4 : 2e-3;
  if (static_cast<std::uint64_t>(t.parameter_count()) != counted.total) {
    throw std::runtime_error("mldiag: the model has " + std::to_string(t.parameter_count()) + " parameters but count_parameters says " +
                             std::to_string(counted.total) + "; the shape given to the FLOP count does not match the model");
  }
  const std::string device = o.cuda ? "cuda" : "cpu";
  std::printf("mldiag-bench-gpu-train: preset %s, device %s, LibTorch %d.%d, %lld layers x d %lld, %lld heads, seq %lld, batch %lld, "
              "vocab %lld (tied), %.1fM parameters (= count_parameters), data: seeded synthetic tokens (seed %llu)\n",
              o.preset.c_str(), device.c_str(), TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, static_cast<long long>(o.layers),
              static_cast<long long>(o.d_model), static_cast<long long>(o.heads), static_cast<long long>(o.seq),
              static_cast<long long>(o.batch), static_cast<long long>(o.vocab), static_cast<double>(counted.total) / 1e6,
              static_cast<unsigned long long>(o.seed));
  const double mm_tflops = matmul_tflops(o);
  std::printf("FLOPs per step %.4g (6 N T_tokens with N every parameter incl. embeddings, + 12 L H Q T full attention: "
              "the PaLM formula, efficiency::training_flops_per_token); plain %s matmul %.1f TFLOP/s = %.3f of --peak-tflops %.0f\n",
              t.flops_per_step, o.cuda ? (o.preset == "gpu" ? "bf16 8192^3" : "bf16 1024^3") : "fp32 512^3", mm_tflops, mm_tflops / o.peak_tflops, o.peak_tflops);

  // ---- The overhead benchmark ----
  struct row {
    std::vector<double> step_ms;
    std::uint64_t syncs = 0;
    int steps = 0;
  };
  row rows[3];
  double stats_alone_ms = NAN, peer_alone_ms = NAN, ceiling_ms = NAN, gbs = NAN, bytes = 0.0, monitor_host_ms = NAN;
  std::uint64_t lib_blocking_in_steps = 0, monitor_region_syncs = 0;
  int probe_busy = -1;  // 1: the stream was still busy after the monitor's calls (no wait), 0: it was not, -1: not run
  std::int64_t s = 0;
  if (o.timing) {
    t.new_monitor();
    // Warm-up: every mode once (allocator, cuBLAS handles, the plan).
    for (int w = 0; w < 3; ++w)
      for (int m = 0; m < 3; ++m) (void)t.step(s++, static_cast<mode>(m));
    t.synchronize();
#if MLDIAG_BENCH_CUDA
    std::uint64_t base[8] = {}, now[8] = {};
    const std::uint64_t lib0 = mldiag_blocking_calls();
#endif
    double host_monitor_before = t.monitor_host_seconds;
    for (int r = 0; r < o.repeats; ++r) {
      for (int m = 0; m < 3; ++m) {
        t.synchronize();
#if MLDIAG_BENCH_CUDA
        if (o.cuda) mldiag_sync_counter_read(base, nullptr);
#endif
        const auto t0 = clock_type::now();
        for (int k = 0; k < o.steps; ++k) (void)t.step(s++, static_cast<mode>(m));
        t.synchronize();  // outside the steps: the block's end
        rows[m].step_ms.push_back(1e3 * since(t0) / o.steps);
        rows[m].steps += o.steps;
#if MLDIAG_BENCH_CUDA
        if (o.cuda) {
          mldiag_sync_counter_read(now, nullptr);
          for (int g = 1; g < 8; ++g) rows[m].syncs += now[g] - base[g];
          if (m == 1) monitor_region_syncs += (now[2] - base[2]) + (now[3] - base[3]);
        }
#endif
      }
    }
#if MLDIAG_BENCH_CUDA
    lib_blocking_in_steps = mldiag_blocking_calls() - lib0;
#endif
    monitor_host_ms = 1e3 * (t.monitor_host_seconds - host_monitor_before) / std::max(1, rows[1].steps);
    bytes = t.stats_bytes();
    gbs = copy_gbs(o);
    ceiling_ms = 1e3 * bytes / (gbs * 1e9);
    // The statistics alone and the peer alone, on the last step's tensors.
    const int reps = 10;
#if MLDIAG_BENCH_CUDA
    if (o.cuda) {
      t.synchronize();
      auto t0 = clock_type::now();
      for (int r = 0; r < reps; ++r) t.stats_only();
      t.synchronize();
      stats_alone_ms = 1e3 * since(t0) / reps;
      // The busy-stream probe: a monitored step, a wait (outside any step), a kernel that spins
      // 100 ms, then the monitor's calls again on that step's tensors; the stream must still
      // be busy after them (had any of them waited for it, the spin would have ended).
      (void)t.step(s++, mode::mldiag);
      t.synchronize();
      mldiag_spin(t.stream, 100000);
      torch::Tensor dummy_loss = torch::zeros({}, torch::TensorOptions().device(torch::kCUDA));
      step_record rec;
      rec.step = s;
      rec.timings.total = 1.0;
      t.observe(s++, dummy_loss, rec);
      probe_busy = mldiag_stream_busy(t.stream);
      t.synchronize();
      t.drain(true);
      t0 = clock_type::now();
      for (int r = 0; r < reps; ++r) t.torch_peer(dummy_loss);
      t.synchronize();
      peer_alone_ms = 1e3 * since(t0) / reps;
    }
#endif
    if (!o.cuda) {
      auto t0 = clock_type::now();
      for (int r = 0; r < reps; ++r) {
        double acc = 0.0;
        for (std::size_t i = 0; i < t.params.size(); ++i)
          acc += mldiag::compute_stats(t.params[i].grad()).l2_norm() + mldiag::compute_stats(t.params[i]).l2_norm() +
                 mldiag::compute_stats(t.update[i]).l2_norm();
        for (std::size_t b = 0; b < t.ctx.block_out.size(); ++b)
          acc += mldiag::compute_stats(t.ctx.block_out[b]).l2_norm() + mldiag::compute_stats(t.ctx.mlp_hidden[b]).l2_norm() +
                 mldiag::entropy_from_logits(t.ctx.scores[b]).mean();
        t.peer_sink += acc;
      }
      stats_alone_ms = 1e3 * since(t0) / reps;
      torch::Tensor l = torch::zeros({});
      t0 = clock_type::now();
      for (int r = 0; r < reps; ++r) t.torch_peer(l);
      peer_alone_ms = 1e3 * since(t0) / reps;
    }
  }

  // ---- Q3: planted faults ----
  std::vector<q3_result> q3;
  for (const fault f : o.faults) {
    if (o.fault_steps == 0) break;
    trainer run(o);
    run.lr = t.lr;
    run.new_monitor();
    run.planted = f;
    run.onset = 20;
    q3_result res;
    res.f = f;
    std::vector<double> before;
#if MLDIAG_BENCH_CUDA
    std::uint64_t c0[8] = {}, c1[8] = {};
    if (o.cuda) mldiag_sync_counter_read(c0, nullptr);
#endif
    for (std::int64_t k = 0; k < o.fault_steps; ++k) {
      if (k == run.onset) run.data_sleep_s = median(before);  // the loader sleeps as long as a step takes
      const double host = run.step(k, mode::mldiag);
      if (k >= 5 && k < run.onset) before.push_back(host);
      res.median_step_ms = k < run.onset ? 1e3 * median(before) : res.median_step_ms;
    }
    run.synchronize();
#if MLDIAG_BENCH_CUDA
    run.drain(true);
    if (o.cuda) {
      mldiag_sync_counter_read(c1, nullptr);
      for (int g = 1; g < 8; ++g) res.syncs += c1[g] - c0[g];
    }
#endif
    res.steps = o.fault_steps;
    {
      // Median over steps after the onset, per layer: where the time went.
      double sum = 0.0, top = -1.0;
      for (auto& [name, v] : run.layer_history) {
        std::vector<double> after(v.begin() + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(v.size()), run.onset), v.end());
        const double m = median(after);
        if (!std::isfinite(m)) continue;
        sum += m;
        if (m > top) top = m, res.top_layer = name;
      }
      res.top_share = sum > 0.0 ? top / sum : 0.0;
    }
    res.memory_visible = o.cuda ? mldiag::torch_cuda::available : mldiag::efficiency::host_memory_supported;
    for (const auto& w : run.seen.warnings) {
      auto& list = w.question == mldiag::question::efficiency ? res.q3_warnings : res.other_warnings;
      if (std::find(list.begin(), list.end(), w.detector) == list.end()) list.push_back(w.detector);
    }
    const std::string want = expected_detector[static_cast<int>(f)];
    if (f == fault::none) {
      res.ok = res.q3_warnings.empty();
      res.verdict = res.ok ? "healthy: no Q3 warning" : "FALSE ALARM: " + join(res.q3_warnings);
    } else if (f == fault::memory_growth && !res.memory_visible) {
      res.verdict = "not checked: this build cannot see memory (no CUDA LibTorch allocator statistics, no host RSS)";
    } else {
      const bool found = std::find(res.q3_warnings.begin(), res.q3_warnings.end(), want) != res.q3_warnings.end();
      res.ok = found;
      res.verdict = found ? "found " + want : "MISSED " + want;
    }
    std::printf("q3 %s: %d steps, Q3 warnings [%s], other warnings [%s], slowest layer %s (%.2f), host syncs %s: %s\n",
                fault_names[static_cast<int>(f)], res.steps, join(res.q3_warnings).c_str(), join(res.other_warnings).c_str(),
                res.top_layer.c_str(), res.top_share, syncs_counted ? std::to_string(res.syncs).c_str() : "-", res.verdict.c_str());
    q3.push_back(res);
  }

  // ---- The table ----
  const double base_ms = median(rows[0].step_ms), mon_ms = median(rows[1].step_ms), peer_ms = median(rows[2].step_ms);
  const double mon_share = (mon_ms - base_ms) / base_ms, peer_share = (peer_ms - base_ms) / base_ms;
  const double mfu = t.flops_per_step / (base_ms * 1e-3) / (o.peak_tflops * 1e12);
  auto per_step = [](const row& r) { return r.steps > 0 ? static_cast<double>(r.syncs) / r.steps : 0.0; };
  if (o.timing) {
    std::printf("\n%d repeats x %d steps per mode, interleaved; medians of the repeats' ms per step (wall clock, the device "
                "synchronized at each repeat's end only)\n",
                o.repeats, o.steps);
    std::printf("%-26s %12s %12s %12s %16s\n", "mode", "step (ms)", "added (ms)", "of the step", "host syncs/step");
    for (int m = 0; m < 3; ++m) {
      const double ms = median(rows[m].step_ms);
      std::printf("%-26s %12.3f %12.3f %11.2f%% %16s\n", mode_names[m], ms, ms - base_ms, 100.0 * (ms - base_ms) / base_ms,
                  syncs_counted ? std::to_string(per_step(rows[m])).c_str() : "-");
    }
    std::printf("%-26s %12s %12.3f %11.2f%%\n", "statistics alone (mldiag)", "-", stats_alone_ms, 100.0 * stats_alone_ms / base_ms);
    std::printf("%-26s %12s %12.3f %11.2f%%\n", "statistics alone (torch)", "-", peer_alone_ms, 100.0 * peer_alone_ms / base_ms);
    std::printf("%-26s %12s %12.3f %11.2f%%   (%.1f MB read per step at the copy rate, %.0f GB/s)\n", "ceiling (bytes read)", "-",
                ceiling_ms, 100.0 * ceiling_ms / base_ms, bytes / 1e6, gbs);
    std::printf("monitor's host time per step %.3f ms; MFU of the plain step %.3f (against %.0f TFLOP/s)\n", monitor_host_ms, mfu,
                o.peak_tflops);
    std::printf("host synchronizations: %s; inside the monitor's calls: %s; mldiag's own blocking calls in the timed steps: %llu; "
                "busy-stream probe: %s\n",
                sync_method.c_str(), syncs_counted ? std::to_string(monitor_region_syncs).c_str() : "0 (not applicable)",
                static_cast<unsigned long long>(lib_blocking_in_steps),
                probe_busy < 0 ? "not applicable (CPU)" : probe_busy == 1 ? "stream still busy after the monitor's calls (no wait)" : "STREAM IDLE: the host waited");
  }
  if (!q3.empty()) {
    std::printf("\nQ3 planted faults (%d steps each, onset step 20, the monitor's default detectors)\n", o.fault_steps);
    std::printf("%-18s %10s %-22s %-32s %-26s %s\n", "fault", "step (ms)", "slowest layer (share)", "Q3 warnings", "other warnings",
                "verdict");
    for (const auto& r : q3)
      std::printf("%-18s %10.3f %-22s %-32s %-26s %s\n", fault_names[static_cast<int>(r.f)], r.median_step_ms,
                  (r.top_layer + " (" + std::to_string(r.top_share).substr(0, 4) + ")").c_str(),
                  r.q3_warnings.empty() ? "-" : join(r.q3_warnings).c_str(), r.other_warnings.empty() ? "-" : join(r.other_warnings).c_str(),
                  r.verdict.c_str());
  }

  // ---- The JSON line ----
  std::string q3_json = "[";
  bool all_ok = true;
  for (const auto& r : q3) {
    all_ok = all_ok && r.ok;
    q3_json += std::string(q3_json.size() > 1 ? "," : "") + "{\"fault\":\"" + fault_names[static_cast<int>(r.f)] +
               "\",\"steps\":" + std::to_string(r.steps) + ",\"q3_warnings\":\"" + join(r.q3_warnings) + "\",\"other_warnings\":\"" +
               join(r.other_warnings) + "\",\"top_layer\":\"" + r.top_layer + "\",\"top_layer_share\":" + std::to_string(r.top_share) + ",\"memory_visible\":" + (r.memory_visible ? "true" : "false") +
               ",\"host_syncs\":" + (syncs_counted ? std::to_string(r.syncs) : "null") + ",\"ok\":" + (r.ok ? "true" : "false") + "}";
  }
  q3_json += "]";
  auto num = [](double v) {
    if (!std::isfinite(v)) return std::string("null");
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return std::string(b);
  };
  std::printf("{\"bench\":\"gpu_train\",\"preset\":\"%s\",\"device\":\"%s\",\"libtorch\":\"%d.%d\",\"params\":%llu,\"layers\":%lld,"
              "\"d_model\":%lld,\"heads\":%lld,\"seq\":%lld,\"batch\":%lld,\"vocab\":%lld,\"repeats\":%d,\"steps_per_repeat\":%d,"
              "\"step_ms\":%s,\"monitor_step_ms\":%s,\"torch_peer_step_ms\":%s,\"monitor_share\":%s,\"torch_peer_share\":%s,"
              "\"stats_alone_ms\":%s,\"torch_alone_ms\":%s,\"ceiling_ms\":%s,\"bytes_per_step\":%.0f,\"copy_gbs\":%s,"
              "\"monitor_host_ms\":%s,\"host_syncs_counted\":%s,\"sync_method\":\"%s\",\"host_syncs_per_step_none\":%s,"
              "\"host_syncs_per_step_monitor\":%s,\"host_syncs_in_monitor_calls\":%s,\"mldiag_blocking_calls\":%llu,\"busy_probe\":%s,"
              "\"flops_per_step\":%.6g,\"mfu\":%s,\"peak_tflops\":%s,\"matmul_tflops\":%s,\"q3\":%s,\"q3_ok\":%s}\n",
              o.preset.c_str(), device.c_str(), TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, static_cast<unsigned long long>(counted.total),
              static_cast<long long>(o.layers), static_cast<long long>(o.d_model), static_cast<long long>(o.heads),
              static_cast<long long>(o.seq), static_cast<long long>(o.batch), static_cast<long long>(o.vocab), o.repeats, o.steps,
              num(base_ms).c_str(), num(mon_ms).c_str(), num(peer_ms).c_str(), num(mon_share).c_str(), num(peer_share).c_str(),
              num(stats_alone_ms).c_str(), num(peer_alone_ms).c_str(), num(ceiling_ms).c_str(), bytes, num(gbs).c_str(),
              num(monitor_host_ms).c_str(), syncs_counted ? "true" : "false", sync_method.c_str(),
              syncs_counted ? num(per_step(rows[0])).c_str() : "0", syncs_counted ? num(per_step(rows[1])).c_str() : "0",
              syncs_counted ? std::to_string(monitor_region_syncs).c_str() : "0", static_cast<unsigned long long>(lib_blocking_in_steps),
              probe_busy < 0 ? "null" : (probe_busy == 1 ? "true" : "false"), t.flops_per_step, num(o.timing ? mfu : NAN).c_str(),
              num(o.peak_tflops).c_str(), num(mm_tflops).c_str(), q3_json.c_str(), all_ok ? "true" : "false");
  (void)per_token;
#if MLDIAG_BENCH_CUDA
  if (o.cuda) mldiag_sync_counter_stop();
#endif
  if (o.check) {
    bool ok = all_ok;
    if (o.timing && (!std::isfinite(base_ms) || !std::isfinite(mon_ms) || !std::isfinite(peer_ms))) ok = false;
    if (o.cuda && o.timing && (probe_busy != 1 || lib_blocking_in_steps != 0 || (syncs_counted && monitor_region_syncs != 0))) ok = false;
    if (!ok) {
      std::fprintf(stderr, "mldiag: the check failed (a Q3 verdict above, a missing timing, or a host wait inside the monitor)\n");
      return 1;
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
