// SPDX-License-Identifier: Apache-2.0
/// The zoo's model families in LibTorch: an MLP classifier, a small CNN (plain, BatchNorm,
/// residual), a GRU/LSTM character LM, a compact transformer character LM (pre- or post-norm),
/// an MSE autoencoder and a mixture-of-experts classifier (top-1 router, load-balancing loss);
/// held-out round 2: a BatchNorm ResNet, a character-level text CNN and a VAE.
/// Each taps its activations in forward order through `taps`.
#pragma once

#include "observe.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zoo {

/// What every family's model is: a module with a forward pass that taps.
struct net : torch::nn::Module {
  /// x: the batch's inputs -> the loss input (logits [N, C], or [N, T, V], or reconstructions).
  virtual torch::Tensor forward(const torch::Tensor& x, taps& t) = 0;
  /// The layers the forward_inf fault can be planted in: {layer, activation name}.
  std::vector<std::pair<std::string, std::string>> overflow_sites;
  /// Linear layers `<prefix>1`, `<prefix>2`, ... of `widths` after an input of `in`, registered
  /// in that order into `into`, each with its ReLU (`<prefix>N.relu`) an overflow site. Returns
  /// the last width.
  std::int64_t add_relu_stack(const std::string& prefix, std::int64_t in, const std::vector<std::int64_t>& widths,
                              std::vector<torch::nn::Linear>& into) {
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const auto name = prefix + std::to_string(i + 1);
      into.push_back(register_module(name, torch::nn::Linear(in, widths[i])));
      overflow_sites.emplace_back(name, name + ".relu");
      in = widths[i];
    }
    return in;
  }
};

/// An MLP: in -> hidden... (ReLU) -> out.
struct mlp_net : net {
  mlp_net(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t out, bool relu_out_last = false)
      : relu_last_(relu_out_last) {
    std::int64_t width = in;
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      const std::string name = "fc" + std::to_string(i + 1);
      layers_.push_back(register_module(name, torch::nn::Linear(width, hidden[i])));
      names_.push_back(name);
      overflow_sites.emplace_back(name, name + ".relu");
      width = hidden[i];
    }
    head_ = register_module("head", torch::nn::Linear(width, out));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < layers_.size(); ++i) h = t.act(names_[i] + ".relu", torch::relu(layers_[i](h)));
    auto y = head_(h);
    return relu_last_ ? torch::sigmoid(y) : y;
  }
  bool relu_last_;
  std::vector<torch::nn::Linear> layers_;
  std::vector<std::string> names_;
  torch::nn::Linear head_{nullptr};
};

/// A small CNN on side x side images (8 for digits, 28 for Fashion-MNIST).
struct cnn_net : net {
  cnn_net(std::int64_t side, bool bn, bool residual, std::int64_t classes) : side_(side), bn_(bn), res_(residual) {
    const bool small = side <= 8;
    const std::int64_t c1 = small ? 16 : 8, c2 = small ? 16 : 16;
    if (res_) {
      // A residual connection needs conv2 to keep conv1's shape.
      conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, c2, small ? 3 : 5).stride(small ? 1 : 2).padding(small ? 1 : 0)));
      conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c2, c2, 3).padding(1)));
    } else {
      conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, c1, small ? 3 : 5).stride(small ? 1 : 2).padding(small ? 1 : 0)));
      conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, 3).padding(1)));
    }
    if (bn_) {
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(res_ ? c2 : c1));
      bn2 = register_module("bn2", torch::nn::BatchNorm2d(c2));
    }
    // digits: 8 -> 8 -> pool 4; fashion: 28 -> 12 -> 12 -> pool 6
    const std::int64_t s1 = small ? side : (side - 5) / 2 + 1, pooled = s1 / 2;
    fc = register_module("fc", torch::nn::Linear(c2 * pooled * pooled, 64));
    head = register_module("head", torch::nn::Linear(64, classes));
    overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc", "fc.relu"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto img = x.view({x.size(0), 1, side_, side_});
    auto z1 = conv1(img);
    if (bn_) z1 = bn1(z1);
    auto h1 = t.act("conv1.relu", torch::relu(z1));
    auto z2 = conv2(h1);
    if (bn_) z2 = bn2(z2);
    if (res_) z2 = z2 + h1;
    auto h2 = t.act("conv2.relu", torch::relu(z2));
    auto p = torch::max_pool2d(h2, 2).flatten(1);
    auto h3 = t.act("fc.relu", torch::relu(fc(p)));
    return head(h3);
  }
  std::int64_t side_;
  bool bn_, res_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr}, head{nullptr};
};

/// A character LM: embedding -> GRU or LSTM -> linear head.
struct rnn_net : net {
  rnn_net(std::int64_t vocab, std::int64_t d, std::int64_t hidden, bool lstm_cell) : lstm_(lstm_cell) {
    embed = register_module("embed", torch::nn::Embedding(vocab, d));
    if (lstm_) lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(d, hidden).batch_first(true)));
    else gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(d, hidden).batch_first(true)));
    head = register_module("head", torch::nn::Linear(hidden, vocab));
    const std::string r = lstm_ ? "lstm" : "gru";
    overflow_sites = {{"embed", "embed.out"}, {r, r + ".out"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto e = t.act("embed.out", embed(x));
    auto h = lstm_ ? std::get<0>(lstm(e)) : std::get<0>(gru(e));
    h = t.act(std::string(lstm_ ? "lstm" : "gru") + ".out", h);
    return head(h);
  }
  bool lstm_;
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRU gru{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
};

/// A compact decoder-only transformer block, pre- or post-norm, with its attention written
/// out so that its logits can be observed.
struct tblock_impl : torch::nn::Module {
  tblock_impl(std::int64_t d, std::int64_t heads, bool pre_norm) : d_(d), h_(heads), pre_(pre_norm) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc1 = register_module("fc1", torch::nn::Linear(d, 4 * d));
    fc2 = register_module("fc2", torch::nn::Linear(4 * d, d));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal, const std::string& name, taps& t) {
    const auto B = x.size(0), T = x.size(1), dh = d_ / h_;
    auto a_in = pre_ ? ln1(x) : x;
    auto qkv_out = qkv(a_in).view({B, T, 3, h_, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto scores = torch::matmul(qkv_out[0], qkv_out[1].transpose(-2, -1))
                      .mul(1.0 / std::sqrt(static_cast<double>(dh)))
                      .masked_fill(causal.slice(0, 0, T).slice(1, 0, T), -INFINITY);  // [B, H, T, T]
    t.attention.emplace_back(name + ".attn", scores.detach());
    auto attn = torch::matmul(torch::softmax(scores, -1), qkv_out[2]).transpose(1, 2).reshape({B, T, d_});
    auto h = x + proj(attn);
    if (!pre_) h = ln1(h);
    auto f_in = pre_ ? ln2(h) : h;
    auto z = t.act(name + ".fc1.relu", torch::relu(fc1(f_in)));
    auto y = h + fc2(z);
    if (!pre_) y = ln2(y);
    return y;
  }
  std::int64_t d_, h_;
  bool pre_;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE_IMPL(tblock, tblock_impl);

struct transformer_net : net {
  transformer_net(std::int64_t vocab, std::int64_t d, std::int64_t heads, std::int64_t blocks_n, std::int64_t context,
                  bool pre_norm)
      : pre_(pre_norm) {
    embed = register_module("embed", torch::nn::Embedding(vocab, d));
    pos = register_parameter("pos", torch::randn({context, d}).mul(0.1));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < blocks_n; ++i) {
      blocks->push_back(tblock(d, heads, pre_norm));
      const std::string n = "blocks." + std::to_string(i);
      overflow_sites.emplace_back(n, n + ".fc1.relu");
    }
    if (pre_) ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    head = register_module("head", torch::nn::Linear(d, vocab));
    causal = torch::ones({context, context}, torch::kBool).triu(1);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto T = x.size(1);
    auto h = embed(x) + pos.slice(0, 0, T);
    for (std::size_t i = 0; i < blocks->size(); ++i)
      h = blocks[i]->as<tblock_impl>()->forward(h, causal, "blocks." + std::to_string(i), t);
    if (pre_) h = ln_f(h);
    return head(h);
  }
  bool pre_;
  torch::nn::Embedding embed{nullptr};
  torch::Tensor pos, causal;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
};

/// An MSE autoencoder: in -> widths (ReLU) -> code -> widths reversed (ReLU) -> in (sigmoid).
struct autoencoder_net : net {
  autoencoder_net(std::int64_t in, const std::vector<std::int64_t>& widths) {
    std::int64_t w = in;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "enc" + std::to_string(i + 1);
      enc_.push_back(register_module(n, torch::nn::Linear(w, widths[i])));
      enc_names_.push_back(n);
      overflow_sites.emplace_back(n, n + ".relu");
      w = widths[i];
    }
    for (std::size_t i = widths.size(); i-- > 0;) {
      const std::int64_t to = i == 0 ? in : widths[i - 1];
      const std::string n = "dec" + std::to_string(widths.size() - i);
      dec_.push_back(register_module(n, torch::nn::Linear(w, to)));
      dec_names_.push_back(n);
      w = to;
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < enc_.size(); ++i) h = t.act(enc_names_[i] + ".relu", torch::relu(enc_[i](h)));
    for (std::size_t i = 0; i < dec_.size(); ++i) {
      h = dec_[i](h);
      if (i + 1 < dec_.size()) h = t.act(dec_names_[i] + ".relu", torch::relu(h));
    }
    return torch::sigmoid(h);
  }
  std::vector<torch::nn::Linear> enc_, dec_;
  std::vector<std::string> enc_names_, dec_names_;
};

/// A mixture-of-experts classifier: stem -> top-1 routed experts (residual) -> head, with the
/// Switch Transformer's load-balancing loss in `taps::aux`.
struct moe_net : net {
  moe_net(std::int64_t in, std::int64_t d, std::int64_t experts_n, std::int64_t ffn, std::int64_t classes) : e_(experts_n) {
    stem = register_module("stem", torch::nn::Linear(in, d));
    router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(d, experts_n).bias(false)));
    experts = register_module("experts", torch::nn::ModuleList());
    for (std::int64_t e = 0; e < experts_n; ++e) {
      experts->push_back(torch::nn::Linear(d, ffn));
      experts->push_back(torch::nn::Linear(ffn, d));
    }
    head = register_module("head", torch::nn::Linear(d, classes));
    overflow_sites = {{"stem", "stem.relu"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = t.act("stem.relu", torch::relu(stem(x)));  // [N, d]
    auto gates = torch::softmax(router(h), -1);         // [N, E]
    auto [gate, choice] = gates.max(-1);
    auto out = torch::zeros_like(h);
    for (std::int64_t e = 0; e < e_; ++e) {
      auto idx = (choice == e).nonzero().squeeze(-1);
      if (idx.numel() == 0) continue;
      auto fc1 = experts[static_cast<std::size_t>(2 * e)]->as<torch::nn::LinearImpl>();
      auto fc2 = experts[static_cast<std::size_t>(2 * e + 1)]->as<torch::nn::LinearImpl>();
      auto y = fc2->forward(torch::relu(fc1->forward(h.index_select(0, idx))));
      out.index_add_(0, idx, y * gate.index_select(0, idx).unsqueeze(-1));
    }
    auto fraction = torch::one_hot(choice, e_).to(torch::kFloat).mean(0);
    auto aux = static_cast<double>(e_) * (fraction * gates.mean(0)).sum();
    t.aux = t.aux.defined() ? t.aux + aux : aux;
    t.routers.emplace_back("moe.router", torch::bincount(choice, {}, e_).detach());
    auto m = t.act("moe.out", h + out);
    return head(m);
  }
  std::int64_t e_;
  torch::nn::Linear stem{nullptr}, router{nullptr}, head{nullptr};
  torch::nn::ModuleList experts{nullptr};
};

/// A basic residual block: conv3x3 (stride) -> BN -> ReLU -> conv3x3 -> BN, plus the shortcut
/// (identity, or a strided 1x1 conv and BN where the shape changes), then ReLU.
struct res_block_impl : torch::nn::Module {
  res_block_impl(std::int64_t in, std::int64_t out, std::int64_t stride) {
    using namespace torch::nn;
    conv1 = register_module(
        "conv1", Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", BatchNorm2d(out));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", BatchNorm2d(out));
    if (stride != 1 || in != out) {
      proj = register_module("proj", Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      proj_bn = register_module("proj_bn", BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    auto h = t.act(name + ".relu1", torch::relu(bn1(conv1(x))));
    auto y = bn2(conv2(h));
    auto shortcut = proj.is_empty() ? x : proj_bn(proj(x));
    return t.act(name + ".out", torch::relu(y + shortcut));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, proj{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, proj_bn{nullptr};
};
TORCH_MODULE_IMPL(res_block, res_block_impl);

/// A ResNet on 28 x 28 images: a strided 3x3 stem (28 -> 14) with BN, residual blocks given
/// as {channels, stride} (strided ones downsample 14 -> 7 -> 4), global average pooling and a
/// linear head.
struct resnet_net : net {
  struct stage {
    std::int64_t channels, stride;
  };
  resnet_net(std::int64_t side, std::int64_t stem_channels, const std::vector<stage>& stages,
             std::int64_t classes)
      : side_(side) {
    using namespace torch::nn;
    stem = register_module(
        "stem", Conv2d(Conv2dOptions(1, stem_channels, 3).stride(2).padding(1).bias(false)));
    stem_bn = register_module("stem_bn", BatchNorm2d(stem_channels));
    overflow_sites.emplace_back("stem", "stem.relu");
    blocks = register_module("blocks", ModuleList());
    std::int64_t c = stem_channels;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      blocks->push_back(res_block(c, stages[i].channels, stages[i].stride));
      const std::string n = "blocks." + std::to_string(i);
      overflow_sites.emplace_back(n, n + ".out");
      c = stages[i].channels;
    }
    head = register_module("head", Linear(c, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = t.act("stem.relu", torch::relu(stem_bn(stem(x.view({x.size(0), 1, side_, side_})))));
    for (std::size_t i = 0; i < blocks->size(); ++i)
      h = blocks[i]->as<res_block_impl>()->forward(h, "blocks." + std::to_string(i), t);
    auto pooled = t.act("pool", h.mean({2, 3}));  // [N, C]
    return head(pooled);
  }
  std::int64_t side_;
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear head{nullptr};
};

/// A character-level text classifier: embedding -> 1D convolutions (ReLU) -> max over time
/// -> LayerNorm -> linear. `parallel`: one convolution per kernel width on the embedding,
/// their pooled features concatenated (Kim 2014); else the convolutions stacked, a max-pool
/// of 2 between. The LayerNorm is there because max-pooled ReLU features are all positive:
/// without it every logit of the head moved together and plain SGD at 0.05-1 sent the loss
/// from ln 6 to 4-12 within 5 steps (first zoo run, 2026-12-01).
struct text_cnn_net : net {
  text_cnn_net(std::int64_t vocab, std::int64_t d, const std::vector<std::int64_t>& kernels,
               std::int64_t channels, bool parallel, std::int64_t classes)
      : parallel_(parallel) {
    using namespace torch::nn;
    embed = register_module("embed", Embedding(vocab, d));
    overflow_sites.emplace_back("embed", "embed.out");
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const std::string n = "conv" + std::to_string(i + 1);
      const std::int64_t in = parallel || i == 0 ? d : channels;
      convs_.push_back(register_module(
          n, Conv1d(Conv1dOptions(in, channels, kernels[i]).padding(kernels[i] / 2))));
      names_.push_back(n);
      overflow_sites.emplace_back(n, n + ".relu");
    }
    const auto features =
        parallel ? channels * static_cast<std::int64_t>(kernels.size()) : channels;
    norm = register_module("norm", LayerNorm(LayerNormOptions({features})));
    head = register_module("head", Linear(features, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto e = t.act("embed.out", embed(x)).transpose(1, 2);  // [N, d, T]
    torch::Tensor features;
    if (parallel_) {
      std::vector<torch::Tensor> pooled;
      for (std::size_t i = 0; i < convs_.size(); ++i)
        pooled.push_back(std::get<0>(t.act(names_[i] + ".relu", torch::relu(convs_[i](e))).max(2)));
      features = torch::cat(pooled, 1);  // [N, channels * kernels]
    } else {
      auto h = e;
      for (std::size_t i = 0; i < convs_.size(); ++i) {
        if (i > 0) h = torch::max_pool1d(h, 2);
        h = t.act(names_[i] + ".relu", torch::relu(convs_[i](h)));  // [N, channels, T']
      }
      features = std::get<0>(h.max(2));
    }
    return head(t.act("features", norm(features)));
  }
  bool parallel_;
  torch::nn::Embedding embed{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  std::vector<torch::nn::Conv1d> convs_;
  std::vector<std::string> names_;
  torch::nn::Linear head{nullptr};
};

/// A variational autoencoder: in -> widths (ReLU) -> (mu, logvar) -> z = mu + sigma * eps ->
/// widths reversed (ReLU) -> in, as logits of a Bernoulli decoder; the KL term goes to
/// `taps::kl`. eps comes from the run's own generator (seeded with the run), not LibTorch's
/// process-wide one, so a run does not depend on the runs beside it.
struct vae_net : net {
  vae_net(std::int64_t in, const std::vector<std::int64_t>& widths, std::int64_t latent,
          std::uint64_t seed)
      : gen_(at::detail::createCPUGenerator(seed)) {
    using namespace torch::nn;
    std::int64_t w = in;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "enc" + std::to_string(i + 1);
      enc_.push_back(register_module(n, Linear(w, widths[i])));
      enc_names_.push_back(n);
      overflow_sites.emplace_back(n, n + ".relu");
      w = widths[i];
    }
    mu = register_module("mu", Linear(w, latent));
    logvar = register_module("logvar", Linear(w, latent));
    w = latent;
    for (std::size_t i = widths.size(); i-- > 0;) {
      const std::string n = "dec" + std::to_string(widths.size() - i);
      dec_.push_back(register_module(n, Linear(w, widths[i])));
      dec_names_.push_back(n);
      overflow_sites.emplace_back(n, n + ".relu");
      w = widths[i];
    }
    out = register_module("out", Linear(w, in));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < enc_.size(); ++i)
      h = t.act(enc_names_[i] + ".relu", torch::relu(enc_[i](h)));
    auto m = mu(h), lv = logvar(h);  // [N, latent]
    auto eps = torch::randn(m.sizes(), gen_, m.options());
    auto z = t.act("z", m + eps * torch::exp(0.5 * lv));
    t.kl = -0.5 * (1.0 + lv - m.pow(2) - lv.exp()).sum();
    h = z;
    for (std::size_t i = 0; i < dec_.size(); ++i)
      h = t.act(dec_names_[i] + ".relu", torch::relu(dec_[i](h)));
    return out(h);  // [N, in] logits
  }
  at::Generator gen_;
  std::vector<torch::nn::Linear> enc_, dec_;
  std::vector<std::string> enc_names_, dec_names_;
  torch::nn::Linear mu{nullptr}, logvar{nullptr}, out{nullptr};
};

}  // namespace zoo
