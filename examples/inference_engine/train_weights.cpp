// SPDX-License-Identifier: Apache-2.0
// Trains the inference engine's model — a tiny decoder-only character-level transformer
// language model (LibTorch, one CPU thread, fixed seeds) — on license texts Debian ships, and
// writes its weights and byte vocabulary to a safetensors file. With --check FILE it instead
// loads that file into the same LibTorch model and checks the engine's fp32 logits against
// LibTorch's forward pass: the engine's independent reference.
#include "engine.hpp"
#include "safetensors_io.hpp"

#include "cli/safetensors.hpp"  // mldiag's own reader, to check the writer independently

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace inf = examples::inference;

// The model's shape. Four blocks give the fault table four layers to localize in.
struct shape {
  std::int64_t d = 64, layers = 4, heads = 4, context = 64;
};

// Texts the base-files package installs on every Debian system (about 120 KB together).
constexpr const char* texts[] = {"GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-2.1", "Artistic", "BSD"};
constexpr const char* text_dir = "/usr/share/common-licenses/";

struct corpus {
  std::vector<std::uint8_t> vocab;  // token id -> byte, ascending
  std::array<std::int64_t, 256> id{};
  torch::Tensor train,
      validation;  // [n] int64 token ids: the first 90% of each text, and the last 10%
  std::size_t bytes = 0;
};

corpus load_corpus() {
  std::vector<std::string> contents;
  std::array<bool, 256> seen{};
  corpus c;
  for (const char* name : texts) {
    const std::string path = std::string(text_dir) + name;
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw std::runtime_error("mldiag: cannot read " + path +
                               "; Debian's base-files package installs it");
    contents.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    for (unsigned char ch : contents.back())
      seen[ch] = true;
    c.bytes += contents.back().size();
  }
  c.id.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<std::size_t>(b)]) {
      c.id[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(c.vocab.size());
      c.vocab.push_back(static_cast<std::uint8_t>(b));
    }
  std::vector<std::int64_t> train, validation;
  for (const auto& s : contents) {
    const std::size_t cut = s.size() * 9 / 10;
    for (std::size_t i = 0; i < s.size(); ++i)
      (i < cut ? train : validation).push_back(c.id[static_cast<unsigned char>(s[i])]);
  }
  c.train = torch::tensor(train, torch::kLong);
  c.validation = torch::tensor(validation, torch::kLong);
  return c;
}

// The model, laid out so that its parameter names are the tensor names the engine loads
// ("blocks.1.attn.qkv.weight", "blocks.1.mlp.fc1.bias", ...).
struct attention_impl : torch::nn::Module {
  explicit attention_impl(const shape& s)
      : qkv(register_module("qkv", torch::nn::Linear(s.d, 3 * s.d))),
        proj(register_module("proj", torch::nn::Linear(s.d, s.d))) {}
  torch::nn::Linear qkv, proj;
};
TORCH_MODULE_IMPL(attention, attention_impl);

struct mlp_impl : torch::nn::Module {
  explicit mlp_impl(const shape& s)
      : fc1(register_module("fc1", torch::nn::Linear(s.d, 4 * s.d))),
        fc2(register_module("fc2", torch::nn::Linear(4 * s.d, s.d))) {}
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE_IMPL(mlp, mlp_impl);

struct block_impl : torch::nn::Module {
  explicit block_impl(const shape& s)
      : s_(s),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))),
        attn(register_module("attn", attention(s))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))),
        ff(register_module("mlp", mlp(s))) {}

  // Pre-norm block; x [B, T, d], causal [T, T] true above the diagonal.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal) {
    const auto B = x.size(0), T = x.size(1), H = s_.heads, dh = s_.d / s_.heads;
    auto qkv =
        attn->qkv(ln1(x)).view({B, T, 3, H, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1))
                      .mul(1.0 / std::sqrt(static_cast<double>(dh)));
    scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
    auto ctx =
        torch::matmul(torch::softmax(scores, -1), qkv[2]).transpose(1, 2).reshape({B, T, s_.d});
    auto h = x + attn->proj(ctx);
    return h + ff->fc2(torch::gelu(ff->fc1(ln2(h))));  // exact (erf) GELU, as the engine's
  }

  shape s_;
  torch::nn::LayerNorm ln1;
  attention attn;
  torch::nn::LayerNorm ln2;
  mlp ff;
};
TORCH_MODULE_IMPL(block, block_impl);

struct lm_impl : torch::nn::Module {
  lm_impl(const shape& s, std::int64_t vocab)
      : tok_emb(register_module("tok_emb", torch::nn::Embedding(vocab, s.d))),
        pos_emb(register_module("pos_emb", torch::nn::Embedding(s.context, s.d))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))),
        head(register_module("head",
                             torch::nn::Linear(torch::nn::LinearOptions(s.d, vocab).bias(false)))) {
    for (std::int64_t i = 0; i < s.layers; ++i)
      blocks->push_back(block(s));
    // GPT-2's embedding scale: small next to what the blocks write, so pre-norm starts stable.
    torch::NoGradGuard no_grad;
    tok_emb->weight.normal_(0.0, 0.02);
    pos_emb->weight.normal_(0.0, 0.02);
  }

  // tokens [B, T] -> logits [B, T, V]
  torch::Tensor forward(const torch::Tensor& tokens) {
    const auto T = tokens.size(1);
    auto x = tok_emb(tokens) + pos_emb(torch::arange(T, torch::kLong));
    const auto causal = torch::ones({T, T}, torch::kBool).triu(1);
    for (const auto& b : *blocks)
      x = b->as<block_impl>()->forward(x, causal);
    return head(ln_f(x));
  }

  torch::nn::Embedding tok_emb, pos_emb;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear head;
};
TORCH_MODULE_IMPL(lm, lm_impl);

struct train_options {
  std::string out;
  std::string check;
  int steps = 400;
  std::uint64_t seed = 1;
};

double mean_loss(lm& model, const torch::Tensor& data, const shape& s, std::int64_t V) {
  torch::NoGradGuard no_grad;
  // Every whole window of the held-out text, 16 at a time.
  const auto T = s.context, windows = (data.size(0) - 1) / T;
  double total = 0.0;
  for (std::int64_t w0 = 0; w0 < windows; w0 += 16) {
    const auto n = std::min<std::int64_t>(16, windows - w0);
    auto x = data.slice(0, w0 * T, (w0 + n) * T).view({n, T});
    auto y = data.slice(0, w0 * T + 1, (w0 + n) * T + 1).view({n, T});
    total += torch::nn::functional::cross_entropy(model(x).reshape({n * T, V}), y.reshape({-1}))
                 .item<double>() *
             static_cast<double>(n);
  }
  return total / static_cast<double>(windows);
}

int train(const train_options& o) {
  const auto c = load_corpus();
  const shape s;
  const auto V = static_cast<std::int64_t>(c.vocab.size());
  torch::manual_seed(o.seed);
  lm model(s, V);
  std::printf("data: %zu bytes of license texts, vocabulary %lld bytes (ln V = %.3f)\n", c.bytes,
              static_cast<long long>(V), std::log(static_cast<double>(V)));
  std::int64_t params = 0;
  for (const auto& p : model->parameters())
    params += p.numel();
  std::printf("model: %lld blocks, d=%lld, %lld heads, context %lld, %lld parameters\n",
              static_cast<long long>(s.layers), static_cast<long long>(s.d),
              static_cast<long long>(s.heads), static_cast<long long>(s.context),
              static_cast<long long>(params));

  // AdamW, 3e-3 after 50 warm-up steps, cosine to a tenth; batch 32 x 64 tokens.
  constexpr std::int64_t batch = 32;
  constexpr double peak_lr = 3e-3;
  torch::optim::AdamW opt(
      model->parameters(),
      torch::optim::AdamWOptions(peak_lr).betas({0.9, 0.99}).weight_decay(0.01));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  double recent = 0.0;
  for (int step = 0; step < o.steps; ++step) {
    const double warm = std::min(1.0, (step + 1) / 50.0);
    const double progress = static_cast<double>(step) / o.steps;
    const double lr =
        peak_lr * warm * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
    static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options()).lr(lr);
    auto starts = torch::randint(0, c.train.size(0) - s.context - 1, {batch}, gen, torch::kLong);
    auto offsets = torch::arange(s.context, torch::kLong);
    auto idx = starts.unsqueeze(1) + offsets.unsqueeze(0);  // [B, T]
    auto x = c.train.index({idx}), y = c.train.index({idx + 1});
    auto loss = torch::nn::functional::cross_entropy(model(x).reshape({batch * s.context, V}),
                                                     y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    const double l = loss.item<double>();
    recent = step == 0 ? l : 0.95 * recent + 0.05 * l;
    if (step % 100 == 0 || step + 1 == o.steps)
      std::printf("step %4d  loss %.4f  (lr %.2e)\n", step, l, lr);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  model->eval();
  const double val = mean_loss(model, c.validation, s, V);
  std::printf(
      "trained %d steps in %.1f s: training loss %.3f (recent mean), held-out loss %.3f, ln V = "
      "%.3f\n",
      o.steps, seconds, recent, val, std::log(static_cast<double>(V)));

  std::vector<inf::safetensors::tensor_out> tensors;
  for (const auto& p : model->named_parameters()) {
    const auto t = p.value().detach().contiguous();
    std::vector<std::int64_t> dims(t.sizes().begin(), t.sizes().end());
    tensors.push_back(inf::safetensors::f32(
        p.key(), dims,
        std::span<const float>(t.data_ptr<float>(), static_cast<std::size_t>(t.numel()))));
  }
  tensors.push_back(inf::safetensors::u8("vocab", c.vocab));
  char loss_text[64];
  std::snprintf(loss_text, sizeof loss_text, "%.4f", val);
  const std::map<std::string, std::string> meta{{"format", "mldiag inference_engine example"},
                                                {"d_model", std::to_string(s.d)},
                                                {"layers", std::to_string(s.layers)},
                                                {"heads", std::to_string(s.heads)},
                                                {"context", std::to_string(s.context)},
                                                {"steps", std::to_string(o.steps)},
                                                {"seed", std::to_string(o.seed)},
                                                {"held_out_loss", loss_text}};
  // Written aside and renamed, so an interrupted run never leaves a file the demo would reuse.
  const std::string tmp = o.out + ".partial";
  inf::safetensors::write(tmp, tensors, meta);
  std::filesystem::rename(tmp, o.out);
  std::printf("wrote %s\n", o.out.c_str());
  return 0;
}

// Loads `path` into the LibTorch model through mldiag's safetensors reader (not the engine's),
// requiring exactly the model's parameters, and returns the vocabulary size.
std::int64_t load_into(lm& model, const std::string& path, std::vector<std::uint8_t>& vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("mldiag: cannot read " + path);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(raw.data()),
                                         raw.size());
  const auto index = mldiag::cli::detail::index_safetensors(bytes, path);
  std::map<std::string, const mldiag::cli::tensor_entry*> by_name;
  for (const auto& t : index.tensors)
    by_name[t.name] = &t;
  torch::NoGradGuard no_grad;
  std::set<std::string> used{"vocab"};
  for (auto& p : model->named_parameters()) {
    const auto it = by_name.find(p.key());
    if (it == by_name.end())
      throw std::runtime_error("mldiag: " + path + " has no tensor " + p.key());
    const auto& e = *it->second;
    std::vector<std::int64_t> dims(e.shape.begin(), e.shape.end());
    if (e.dtype() != "F32" || dims != p.value().sizes().vec())
      throw std::runtime_error("mldiag: " + path + ": " + p.key() +
                               " has the wrong dtype or shape");
    std::vector<float> values(e.numel);
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::uint32_t bits = 0;
      for (int k = 3; k >= 0; --k)
        bits = (bits << 8) | std::to_integer<std::uint32_t>(
                                 bytes[e.offset + 4 * i + static_cast<std::size_t>(k)]);
      values[i] = std::bit_cast<float>(bits);
    }
    p.value().copy_(torch::tensor(values).view(p.value().sizes()));
    used.insert(p.key());
  }
  for (const auto& t : index.tensors)
    if (!used.count(t.name))
      throw std::runtime_error("mldiag: " + path +
                               " holds a tensor the model does not have: " + t.name);
  const auto& v = *by_name.at("vocab");
  vocab.assign(reinterpret_cast<const std::uint8_t*>(raw.data() + v.offset),
               reinterpret_cast<const std::uint8_t*>(raw.data() + v.offset + v.nbytes));
  return static_cast<std::int64_t>(vocab.size());
}

// The engine's fp32 logits against LibTorch's on the same text: each request's prompt and the
// tokens the engine generated, fed whole to LibTorch (no cache, no padding).
int check(const train_options& o) {
  const shape s;
  const auto model_file = inf::model_weights::load(o.check);
  torch::manual_seed(0);
  lm model(s, model_file.cfg.vocab);
  std::vector<std::uint8_t> vocab;
  load_into(model, o.check, vocab);
  if (vocab != model_file.vocab)
    throw std::runtime_error("mldiag: the engine and mldiag's reader disagree on the vocabulary");
  model->eval();
  torch::NoGradGuard no_grad;

  const std::vector<std::string> prompts{"This program is free software: you can redistribute it",
                                         "Licensed under the ",
                                         "THE SOFTWARE IS PROVIDED \"AS IS\"", "the"};
  std::vector<std::vector<int>> batch;
  for (const auto& p : prompts)
    batch.push_back(model_file.encode(p));
  const int new_tokens = 8;
  double worst = 0.0;
  std::size_t rows = 0;
  struct run {
    const char* what;
    inf::sampling sample;
  };
  for (const run& r : {run{"greedy", {}}, run{"sampled (T 0.8, top-k 10)", {0.8f, 10, 7}}}) {
    inf::engine e(model_file, {.path = inf::precision::fp32});
    const auto out = e.generate(batch, new_tokens, r.sample);
    const auto V = static_cast<std::size_t>(model_file.cfg.vocab);
    for (std::size_t b = 0; b < batch.size(); ++b) {
      std::vector<std::int64_t> seq(batch[b].begin(), batch[b].end());
      seq.insert(seq.end(), out[b].tokens.begin(), out[b].tokens.end() - 1);
      const auto ref =
          model(torch::tensor(seq, torch::kLong).unsqueeze(0))[0].contiguous();  // [T, V]
      const std::size_t L = batch[b].size();
      const auto compare = [&](const float* engine_row, std::size_t pos) {
        const float* r_row = ref[static_cast<std::int64_t>(pos)].data_ptr<float>();
        double diff = 0.0, scale = 0.0;
        for (std::size_t v = 0; v < V; ++v) {
          diff = std::max(diff, std::fabs(static_cast<double>(engine_row[v]) - r_row[v]));
          scale = std::max(scale, std::fabs(static_cast<double>(r_row[v])));
        }
        worst = std::max(worst, diff / scale);
        ++rows;
      };
      for (std::size_t p = 0; p < L; ++p)
        compare(&out[b].prompt_logits[p * V], p);
      for (std::size_t t = 1; t < out[b].tokens.size(); ++t)
        compare(&out[b].step_logits[t * V], L + t - 1);
      std::printf("%-26s request %zu: \"%s\" -> \"%s\"\n", r.what, b, prompts[b].c_str(),
                  model_file.decode(out[b].tokens).c_str());
    }
  }
  constexpr double tolerance = 1e-4;
  std::printf(
      "engine fp32 vs LibTorch: %zu logit rows (prefill and decode, batch of %zu with padding), "
      "largest difference %.2e of the row's largest logit (tolerance %.0e)\n",
      rows, batch.size(), worst, tolerance);
  if (!(worst <= tolerance)) {
    std::printf("FAILED: the engine's fp32 path does not match LibTorch\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

train_options parse(int argc, char** argv) {
  train_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("mldiag: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--out")
      o.out = value();
    else if (a == "--check")
      o.check = value();
    else if (a == "--steps")
      o.steps = std::stoi(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: mldiag_inference_train --out FILE [--steps N] [--seed S]\n"
          "       mldiag_inference_train --check FILE   (engine fp32 vs LibTorch on FILE's "
          "weights)\n");
      std::exit(0);
    } else {
      throw std::runtime_error("mldiag: unknown option " + a + "; see --help");
    }
  }
  if (o.out.empty() == o.check.empty())
    throw std::runtime_error("mldiag: give exactly one of --out FILE or --check FILE; see --help");
  if (o.steps < 1) throw std::runtime_error("mldiag: --steps must be at least 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto o = parse(argc, argv);
  torch::set_num_threads(1);  // reproducible, and the test suite runs programs side by side
  return o.check.empty() ? train(o) : check(o);
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
