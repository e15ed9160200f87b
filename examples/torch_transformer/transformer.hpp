// SPDX-License-Identifier: Apache-2.0
/// A small decoder-only transformer language model in LibTorch's C++ API — its own attention
/// (so attention probabilities can be observed) and an optional mixture-of-experts
/// feed-forward with a router — trained at the character level on a text Debian ships, under
/// an mldiag monitor, with one fault planted on request. Used by the example's main, the fault
/// suite, the flagship demo and the overhead benchmark.
#pragma once

#include "../common/faults.hpp"

#include <mldiag/adapters/torch.hpp>
#include <mldiag/monitor.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples::lm {

/// The text and its character vocabulary.
struct corpus {
  std::string text;
  std::array<int, 256> id{};   // byte -> token id
  std::int64_t vocab = 0;
  torch::Tensor tokens;        // [n] int64
  std::string source;
};

inline constexpr const char* default_text = "/usr/share/common-licenses/GPL-3";

inline corpus load_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("mldiag: cannot read the training text " + path +
                             "; Debian ships it in base-files, or pass another text with --data FILE");
  }
  corpus c;
  c.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (c.text.size() < 4096) {
    throw std::runtime_error("mldiag: " + path + " has " + std::to_string(c.text.size()) +
                             " bytes; give a text of at least 4096 bytes with --data FILE");
  }
  std::array<bool, 256> seen{};
  for (unsigned char ch : c.text) seen[ch] = true;
  for (int b = 0; b < 256; ++b) c.id[static_cast<std::size_t>(b)] = seen[static_cast<std::size_t>(b)] ? static_cast<int>(c.vocab++) : -1;
  std::vector<std::int64_t> ids(c.text.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = c.id[static_cast<unsigned char>(c.text[i])];
  c.tokens = torch::tensor(ids, torch::kLong);
  c.source = path + " (" + std::to_string(c.text.size()) + " bytes, " + std::to_string(c.vocab) + " characters)";
  return c;
}

/// The model's shape.
struct shape {
  std::int64_t d = 64, heads = 4, blocks = 4, context = 32, batch = 8, ffn = 128, experts = 4;
  bool moe = true;  ///< odd blocks use a mixture-of-experts feed-forward (top-1, Switch-style)
};

/// What the forward pass hands to the monitor: tensors by role, attention logits, routers.
/// Detached references: recording costs nothing here; the monitor reads them after the step.
struct taps {
  struct tensor_tap {
    mldiag::role role;
    std::string name;
    torch::Tensor t;
  };
  struct router_tap {
    std::string name;
    torch::Tensor logits, assignment;
  };
  std::vector<tensor_tap> tensors;
  std::vector<std::pair<std::string, torch::Tensor>> attention;  // [B, H, T, T] masked logits
  std::vector<router_tap> routers;
  std::vector<std::pair<std::string, double>> layer_seconds;
  void clear() {
    tensors.clear();
    attention.clear();
    routers.clear();
    layer_seconds.clear();
  }
};

struct expert_impl : torch::nn::Module {
  explicit expert_impl(const shape& s)
      : fc1(register_module("fc1", torch::nn::Linear(s.d, s.ffn))), fc2(register_module("fc2", torch::nn::Linear(s.ffn, s.d))) {}
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE_IMPL(expert, expert_impl);

/// Faults applied inside the forward pass.
struct forward_faults {
  int attention_hot_block = -1;   ///< scores x `attention_factor` (50) in this block
  double attention_factor = 50.0;
  int router_biased_block = -1;   ///< router logit of expert 0 + 10 in this block
  int residual_scaled_block = -1; ///< residual branch x `residual_factor` (30) in this block
  double residual_factor = 30.0;
  int slow_block = -1;            ///< this block spins for `slow_seconds` (a step's time)
  double slow_seconds = 0.0;
};

struct block_impl : torch::nn::Module {
  block_impl(const shape& s, int index)
      : s_(s), index_(index), moe_(s.moe && index % 2 == 1),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))),
        qkv(register_module("qkv", torch::nn::Linear(s.d, 3 * s.d))),
        proj(register_module("proj", torch::nn::Linear(s.d, s.d))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))) {
    if (moe_) {
      router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(s.d, s.experts).bias(false)));
      experts = register_module("experts", torch::nn::ModuleList());
      for (std::int64_t e = 0; e < s.experts; ++e) experts->push_back(expert(s));
    } else {
      fc1 = register_module("fc1", torch::nn::Linear(s.d, s.ffn));
      fc2 = register_module("fc2", torch::nn::Linear(s.ffn, s.d));
    }
  }

  /// x: [B, T, d] -> [B, T, d]; `aux` accumulates the load-balancing loss.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal, const forward_faults& f, taps* tap,
                        torch::Tensor& aux) {
    const std::string name = "blocks." + std::to_string(index_);
    const auto B = x.size(0), T = x.size(1), H = s_.heads, dh = s_.d / s_.heads;
    // Attention, written out so that its logits can be observed.
    auto qkv_out = qkv(ln1(x)).view({B, T, 3, H, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
    double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    if (index_ == f.attention_hot_block) scale *= f.attention_factor;
    auto scores = torch::matmul(q, k.transpose(-2, -1)).mul(scale).masked_fill(causal.slice(0, 0, T).slice(1, 0, T), -INFINITY);
    auto attn = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, s_.d});
    auto write = proj(attn);
    auto h = x + (index_ == f.residual_scaled_block ? f.residual_factor * write : write);
    // Feed-forward: dense ReLU MLP, or top-1 mixture of experts.
    auto u = ln2(h);
    torch::Tensor ff;
    if (!moe_) {
      auto z = torch::relu(fc1(u));
      if (tap) tap->tensors.push_back({mldiag::role::activation, name + ".fc1.relu", z.detach()});
      ff = fc2(z);
    } else {
      auto flat = u.reshape({B * T, s_.d});
      auto logits = router(flat);  // [B*T, E]
      if (index_ == f.router_biased_block) logits = logits + torch::tensor({10.0f, 0.0f, 0.0f, 0.0f}).slice(0, 0, s_.experts);
      auto gates = torch::softmax(logits, -1);
      auto [gate, choice] = gates.max(-1);  // [B*T]
      auto out = torch::zeros_like(flat);
      for (std::int64_t e = 0; e < s_.experts; ++e) {
        auto idx = (choice == e).nonzero().squeeze(-1);
        if (idx.numel() == 0) continue;
        auto ex = experts[static_cast<std::size_t>(e)]->as<expert_impl>();
        auto y = ex->fc2(torch::relu(ex->fc1(flat.index_select(0, idx))));
        out.index_add_(0, idx, y * gate.index_select(0, idx).unsqueeze(-1));
      }
      // Switch Transformer's load-balancing loss: E * sum_e (fraction routed to e) * (mean gate of e).
      auto fraction = torch::one_hot(choice, s_.experts).to(torch::kFloat).mean(0);
      aux = aux + static_cast<double>(s_.experts) * (fraction * gates.mean(0)).sum();
      if (tap) tap->routers.push_back({name + ".router", logits.detach(), choice.detach()});
      ff = out.view({B, T, s_.d});
    }
    auto y = h + (index_ == f.residual_scaled_block ? f.residual_factor * ff : ff);
    if (tap) {
      tap->attention.emplace_back(name + ".attn", scores.detach());
      tap->tensors.push_back({mldiag::role::residual_input, name, x.detach()});
      tap->tensors.push_back({mldiag::role::block_output, name, (y - x).detach()});
    }
    if (index_ == f.slow_block) slow_down_layer(f.slow_seconds);
    return y;
  }

  shape s_;
  int index_;
  bool moe_;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, router{nullptr};
  torch::nn::ModuleList experts{nullptr};
};
TORCH_MODULE_IMPL(block, block_impl);

struct model_impl : torch::nn::Module {
  model_impl(const shape& s, std::int64_t vocab)
      : s_(s), tok_embed(register_module("tok_embed", torch::nn::Embedding(vocab, s.d))),
        pos_embed(register_parameter("pos_embed", torch::randn({s.context, s.d}))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d})))),
        head(register_module("head", torch::nn::Linear(s.d, vocab))),
        causal(torch::ones({s.context, s.context}, torch::kBool).triu(1)) {
    for (int i = 0; i < s.blocks; ++i) blocks->push_back(block(s, i));
    torch::NoGradGuard no_grad;
    // GPT-2's initialization — N(0, 0.02) for every matrix, the projections that write into
    // the residual stream scaled down by sqrt(2 * blocks), biases zero — except the token
    // embedding, which keeps LibTorch's N(0, 1): with it the stream starts larger than what
    // the blocks write, and it does not grow several-fold in the first hundred steps; the
    // learned positions likewise.
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(s.blocks));
    for (auto& p : named_parameters()) {
      const auto& key = p.key();
      if (key.find("ln") != std::string::npos || key == "tok_embed.weight" || key == "pos_embed") continue;
      if (p.value().dim() < 2) p.value().zero_();
      else if (key.find("proj.") != std::string::npos || key.find("fc2.") != std::string::npos) p.value().normal_(0.0, residual_std);
      else p.value().normal_(0.0, 0.02);
    }
  }

  /// tokens: [B, T] -> logits [B, T, vocab].
  torch::Tensor forward(const torch::Tensor& tokens, const forward_faults& f, taps* tap, torch::Tensor& aux) {
    using clock = std::chrono::steady_clock;
    const auto T = tokens.size(1);
    auto t0 = clock::now();
    auto h = tok_embed(tokens) + pos_embed.slice(0, 0, T);
    if (tap) tap->layer_seconds.emplace_back("tok_embed", since(t0));
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      t0 = clock::now();
      h = blocks[i]->as<block_impl>()->forward(h, causal, f, tap, aux);
      if (tap) tap->layer_seconds.emplace_back("blocks." + std::to_string(i), since(t0));
    }
    t0 = clock::now();
    auto logits = head(ln_f(h));
    if (tap) tap->layer_seconds.emplace_back("head", since(t0));
    return logits;
  }

  shape s_;
  torch::nn::Embedding tok_embed;
  torch::Tensor pos_embed;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear head;
  torch::Tensor causal;
};
TORCH_MODULE_IMPL(model, model_impl);

/// Which block a run's layer fault goes into (varies with the seed, so localization is checked
/// on every block the fault can be in).
inline int planted_block(const run_options& o, const shape& s) {
  const int n = static_cast<int>(s.blocks);
  const auto seed = static_cast<int>(o.seed % 1000);
  switch (o.planted) {
    case fault::router_collapse: return s.moe ? 1 + 2 * (seed % (n / 2)) : -1;             // a MoE block
    case fault::dead_relu: return s.moe ? 2 * (seed % ((n + 1) / 2)) : seed % n;           // a dense block
    case fault::nan_grad:
    case fault::attention_temperature:
    case fault::residual_scale:
    case fault::frozen_layer:
    case fault::slow_layer: return seed % n;
    default: return -1;
  }
}

/// Where the peer's statistics end up, so the compiler cannot drop them.
inline volatile double peer_result = 0.0;

/// How the statistics of a step are computed: by mldiag (the monitor), by LibTorch's own ops
/// (the peer of the overhead benchmark, same statistics), or not at all.
enum class stats_mode { mldiag, torch_peer, none };

/// LibTorch computing what mldiag's tensor_stats holds (count, NaN, +-Inf, zeros, min, max,
/// max |x|, mean, variance, L2 norm), with the reductions a careful user would write.
inline double torch_peer_stats(const torch::Tensor& t) {
  const auto x = t.detach().to(torch::kDouble);
  const auto finite = torch::isfinite(x);
  const auto f = x.masked_select(finite);
  double acc = 0.0;
  acc += static_cast<double>(torch::isnan(x).sum().item<std::int64_t>());
  acc += static_cast<double>(torch::isposinf(x).sum().item<std::int64_t>());
  acc += static_cast<double>(torch::isneginf(x).sum().item<std::int64_t>());
  acc += static_cast<double>((x == 0).sum().item<std::int64_t>());
  if (f.numel() > 0) {
    acc += f.amin().item<double>() + f.amax().item<double>() + f.abs().amax().item<double>();
    acc += f.mean().item<double>() + f.var(/*unbiased=*/false).item<double>();
    acc += torch::linalg_vector_norm(f, 2).item<double>();
  }
  return acc;
}

/// Trains for `o.steps` steps (AdamW, lr 1e-3 after 20 warm-up steps, batch 16 x 64
/// characters) and returns what the monitor found. With `mode` other than mldiag the
/// monitor sees only the loss and learning rate, and the statistics (if any) are the peer's.
inline run_result train(const run_options& o, mldiag::monitor& mon, const corpus& text, const shape& s = {},
                        stats_mode mode = stats_mode::mldiag) {
  using clock = std::chrono::steady_clock;
  run_result r;
  r.example = "torch_transformer";
  r.options = o;
  torch::manual_seed(o.seed);
  model net(s, text.vocab);
  const int planted = planted_block(o, s);
  if (planted >= 0) r.planted_layer = "blocks." + std::to_string(planted);
  if (o.planted == fault::embedding_lr_100x) r.planted_layer = "tok_embed";
  if (o.planted == fault::bad_init) {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters())
      if (p.dim() >= 2) p.mul_(1e-3);
  }

  // Two parameter groups: the token embedding (whose learning rate one fault raises) and the rest.
  std::vector<torch::Tensor> embed_params{net->tok_embed->weight}, rest;
  for (auto& p : net->named_parameters())
    if (p.key() != "tok_embed.weight") rest.push_back(p.value());
  const double base_lr = 1e-3;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(embed_params, std::make_unique<torch::optim::AdamWOptions>(base_lr));
  groups.emplace_back(rest, std::make_unique<torch::optim::AdamWOptions>(base_lr));
  torch::optim::AdamW opt(std::move(groups), torch::optim::AdamWOptions(base_lr).weight_decay(0.01));

  // The frozen-layer fault: the planted block's parameters, kept out of the update.
  std::vector<torch::Tensor> frozen;
  if (o.planted == fault::frozen_layer) frozen = net->blocks[static_cast<std::size_t>(planted)]->parameters();
  std::vector<torch::Tensor> frozen_copy;

  // Previous parameter values, for the updates (role::update).
  const auto named = net->named_parameters();
  // The monitor reads each parameter and its update with one fused pass
  // (mldiag::parameter_and_update_stats); the peer forms the update with LibTorch ops into
  // `update`.
  std::vector<torch::Tensor> previous, update;
  std::vector<mldiag::tensor_stats> update_of(named.size());
  for (const auto& p : named) {
    previous.push_back(p.value().detach().clone());
    update.push_back(torch::empty_like(p.value()));
  }

  const std::int64_t n = text.tokens.size(0), B = s.batch, T = s.context;
  torch::Generator gen = at::detail::createCPUGenerator(o.seed);
  taps tap;
  forward_faults ff;
  double monitor_seconds = 0.0, peer_sink = 0.0;  // the peer's results, kept observable below
  time_baseline before_onset;
  const auto run_start = clock::now();

  for (std::int64_t step = 0; step < o.steps; ++step) {
    const auto t0 = clock::now();
    mldiag::step_timings timing;
    // Data: B random windows of T + 1 characters.
    if (o.active(fault::input_starvation, step) && !o.synthetic_time) starve_input(before_onset.step);
    auto starts = torch::randint(0, n - T - 1, {B}, gen, torch::kLong);
    auto offsets = torch::arange(T + 1, torch::kLong);
    auto window = text.tokens.index({(starts.unsqueeze(1) + offsets.unsqueeze(0)).reshape({-1})}).view({B, T + 1});
    auto x = window.slice(1, 0, T), y = window.slice(1, 1, T + 1);
    if (o.planted == fault::labels_shuffled) y = torch::randint(0, text.vocab, {B, T}, gen, torch::kLong);
    timing.data_wait = since(t0);

    // Forward.
    const auto t1 = clock::now();
    ff.attention_hot_block = o.active(fault::attention_temperature, step) ? planted : -1;
    ff.attention_factor = o.magnitude(50.0);
    ff.router_biased_block = o.active(fault::router_collapse, step) ? planted : -1;
    ff.residual_scaled_block = o.active(fault::residual_scale, step) ? planted : -1;
    ff.residual_factor = o.magnitude(30.0);
    ff.slow_block = o.active(fault::slow_layer, step) && !o.synthetic_time ? planted : -1;
    ff.slow_seconds = before_onset.step;
    if (o.active(fault::dead_relu, step) && step == o.onset_step()) {
      torch::NoGradGuard no_grad;
      net->blocks[static_cast<std::size_t>(planted)]->as<block_impl>()->fc1->bias.sub_(o.magnitude(50.0));
    }
    tap.clear();
    auto aux = torch::zeros({});
    auto logits = net->forward(x, ff, mode == stats_mode::none ? nullptr : &tap, aux);
    // The wrong_loss fault: a softmax before cross_entropy, which applies its own.
    auto loss_input = o.planted == fault::wrong_loss ? torch::softmax(logits, -1) : logits;
    auto ce = torch::nn::functional::cross_entropy(loss_input.reshape({B * T, text.vocab}), y.reshape({-1}));
    auto loss = ce + 0.1 * aux;
    timing.forward = since(t1);

    // Backward.
    const auto t2 = clock::now();
    opt.zero_grad();
    loss.backward();
    if (o.active(fault::nan_grad, step) && step == o.onset_step()) {
      torch::NoGradGuard no_grad;
      net->blocks[static_cast<std::size_t>(planted)]->as<block_impl>()->qkv->weight.grad()[0][0] = NAN;
    }
    timing.backward = since(t2);

    // Optimizer, with the faults that touch it.
    const auto t3 = clock::now();
    double lr = base_lr * o.lr_scale * std::min(1.0, static_cast<double>(step + 1) / 20.0);
    if (o.active(fault::lr_100x, step)) lr *= 100.0;
    if (o.active(fault::lr_zero, step)) lr = 0.0;
    const double embed_lr = o.active(fault::embedding_lr_100x, step) ? 100.0 * lr : lr;
    static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options()).lr(embed_lr);
    static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[1].options()).lr(lr);
    if (o.active(fault::frozen_layer, step)) {
      frozen_copy.clear();
      for (auto& p : frozen) frozen_copy.push_back(p.detach().clone());
    }
    opt.step();
    if (o.active(fault::frozen_layer, step)) {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < frozen.size(); ++i) frozen[i].copy_(frozen_copy[i]);  // left out of the optimizer
    }
    timing.optimizer = since(t3);
    timing.total = since(t0);
    if (o.synthetic_time) {
      const bool slow = o.active(fault::slow_layer, step);
      timing = synthetic_clock::timings(o.active(fault::input_starvation, step), slow);
      const std::string slow_name = "blocks." + std::to_string(planted);
      for (auto& [name, seconds] : tap.layer_seconds)
        seconds = synthetic_clock::layer(tap.layer_seconds.size(), slow && name == slow_name);
    }
    const double loss_value = ce.item<double>();
    if (!o.active(step)) before_onset.add(*timing.total);

    // The monitor: every tensor, every step.
    const auto tm = clock::now();
    mon.begin_step(step);
    mon.observe(mldiag::scalar::loss, loss_value);
    mon.observe(mldiag::scalar::learning_rate, lr);
    if (mode == stats_mode::mldiag) {
      mon.observe(timing);
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < named.size(); ++i) {
        const auto& key = named[i].key();
        const auto& p = named[i].value();
        if (p.grad().defined()) mon.observe(mldiag::role::gradient, key, mldiag::compute_stats(p.grad()));
        // Read in place: no detach() (it builds a new tensor object; the statistics only read
        // the memory, inside the NoGradGuard). The parameter and its update in one pass.
        const auto both = mldiag::parameter_and_update_stats(previous[i], p);
        update_of[i] = both.update;
        mon.observe(mldiag::role::parameter, key, both.parameter);
        mon.observe(mldiag::role::update, key, update_of[i]);
      }
      for (const auto& t : tap.tensors) mon.observe(t.role, t.name, mldiag::compute_stats(t.t));
      mon.observe(mldiag::role::activation, "logits", mldiag::compute_stats(loss_input.detach()));
      // The row entropy of the attention rows and steps that monitor_config::entropy
      // samples (every fifth, rotating, by default).
      for (const auto& [name, scores] : tap.attention) mon.observe_logits(name, scores, scores.size(-1));
      for (const auto& rt : tap.routers) {  // `assignment`: [B*T] int64 expert indices, contiguous
        mon.observe(mldiag::router_assignments{rt.name, std::span<const std::int64_t>(rt.assignment.data_ptr<std::int64_t>(), static_cast<std::size_t>(rt.assignment.numel())), static_cast<std::size_t>(s.experts)});
      }
      for (const auto& [name, seconds] : tap.layer_seconds) mon.observe(mldiag::layer_timing{name, seconds});
    } else if (mode == stats_mode::torch_peer) {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < named.size(); ++i) {
        const auto& p = named[i].value();
        if (p.grad().defined()) peer_sink += torch_peer_stats(p.grad());
        peer_sink += torch_peer_stats(p);
        torch::sub_out(update[i], p.detach(), previous[i]);
        previous[i].copy_(p.detach());
        peer_sink += torch_peer_stats(update[i]);
      }
      for (const auto& t : tap.tensors) peer_sink += torch_peer_stats(t.t);
      peer_sink += torch_peer_stats(loss_input);
      for (const auto& [name, scores] : tap.attention) {
        // Row entropy the way a LibTorch user writes it: -sum p log p over softmax rows.
        const auto p = torch::softmax(scores, -1);
        peer_sink += (-(p * torch::log(p.clamp_min(1e-30))).sum(-1)).mean().item<double>();
      }
      for (const auto& rt : tap.routers)
        peer_sink += torch::bincount(rt.assignment.reshape({-1}), {}, s.experts).to(torch::kDouble).sum().item<double>();
    }
    if (o.verbose && step % 20 == 0) {
      std::printf("  step %lld loss %.4f lr %.3g data %.2f ms forward %.2f ms backward %.2f ms optimizer %.2f ms\n",
                  static_cast<long long>(step), loss_value, lr, 1e3 * timing.data_wait.value_or(0.0), 1e3 * timing.forward.value_or(0.0),
                  1e3 * timing.backward.value_or(0.0), 1e3 * timing.optimizer.value_or(0.0));
      for (std::size_t i = 0; i + 1 < tap.tensors.size(); ++i)
        if (tap.tensors[i].role == mldiag::role::residual_input)
          std::printf("    %-32s residual write ratio %.3f\n", tap.tensors[i].name.c_str(),
                      mldiag::compute_stats(tap.tensors[i + 1].t).l2_norm() / mldiag::compute_stats(tap.tensors[i].t).l2_norm());
      for (std::size_t i = 0; i < named.size(); ++i)
        if (named[i].value().grad().defined())
          std::printf("    %-32s grad rms %.3g  update/param %.3g\n", named[i].key().c_str(),
                      mldiag::compute_stats(named[i].value().grad()).rms(),
                      (mode == stats_mode::torch_peer ? mldiag::compute_stats(update[i]) : update_of[i]).l2_norm() /
                          mldiag::compute_stats(named[i].value().detach()).l2_norm());
    }
    close_step(r, o, mon, step, loss_value);
    monitor_seconds += since(tm);
  }
  finish(r, since(run_start), monitor_seconds);
  peer_result = peer_sink;
  return r;
}

/// The monitor the examples use: the default detectors, told the number of classes (the
/// vocabulary) for the initial-loss and chance-level checks.
inline mldiag::monitor_config monitor_settings(const corpus& c) { return {.task = {.classes = static_cast<std::size_t>(c.vocab)}}; }

}  // namespace examples::lm
