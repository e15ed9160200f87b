// SPDX-License-Identifier: Apache-2.0
/// The `tabular`, `vit` and `lenet` families (split heldout3) in LibTorch: a tabular classifier (an
/// MLP, or multinomial logistic regression) for the UCI tables, a small vision transformer and a
/// LeNet-5 style CNN with dropout, both on Fashion-MNIST. Like the other families, each taps its
/// activations in forward order through `taps` and names the layers forward_inf can be planted in.
#pragma once

#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zoo {

/// A tabular classifier: in -> hidden... (ReLU) -> head. With no hidden layer it is
/// multinomial logistic regression, one Linear; its one activation, the head's output (the
/// logits), is then tapped as "head.out", so that forward_inf has a layer to be planted in.
struct tabular_net : net {
  tabular_net(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t classes) {
    std::int64_t width = in;
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      layers_.push_back(register_module(n, torch::nn::Linear(width, hidden[i])));
      names_.push_back(n);
      overflow_sites.emplace_back(n, n + ".relu");
      width = hidden[i];
    }
    head = register_module("head", torch::nn::Linear(width, classes));
    if (hidden.empty()) overflow_sites.emplace_back("head", "head.out");
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < layers_.size(); ++i) h = t.act(names_[i] + ".relu", torch::relu(layers_[i](h)));
    auto y = head(h);
    return layers_.empty() ? t.act("head.out", y) : y;
  }
  std::vector<torch::nn::Linear> layers_;
  std::vector<std::string> names_;
  torch::nn::Linear head{nullptr};
};

/// A pre-norm transformer encoder block (no mask): LayerNorm -> multi-head self-attention
/// (written out so that its logits can be observed) -> residual; LayerNorm -> GELU MLP ->
/// residual. Its own, not the LM's tblock, so that a change to the LM cannot change these
/// held-out runs.
struct vit_block_impl : torch::nn::Module {
  vit_block_impl(std::int64_t d, std::int64_t heads, std::int64_t hidden) : d_(d), h_(heads) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc1 = register_module("fc1", torch::nn::Linear(d, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, d));
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    const auto B = x.size(0), T = x.size(1), dh = d_ / h_;
    auto qkv_out = qkv(ln1(x)).view({B, T, 3, h_, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto scores = torch::matmul(qkv_out[0], qkv_out[1].transpose(-2, -1))
                      .mul(1.0 / std::sqrt(static_cast<double>(dh)));  // [B, H, T, T]
    t.attention.emplace_back(name + ".attn", scores.detach());
    auto attn = torch::matmul(torch::softmax(scores, -1), qkv_out[2]).transpose(1, 2).reshape({B, T, d_});
    auto h = x + proj(attn);
    auto z = t.act(name + ".fc1.gelu", torch::gelu(fc1(ln2(h))));
    return h + fc2(z);
  }
  std::int64_t d_, h_;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE_IMPL(vit_block, vit_block_impl);

/// A vision transformer on side x side images: non-overlapping patch x patch patches embedded
/// by a strided convolution (28 / 7 -> 16 tokens, 28 / 4 -> 49), an optional CLS token, a
/// learned position embedding, pre-norm encoder blocks, a final LayerNorm, then the CLS token
/// or the mean over tokens -> linear head.
struct vit_net : net {
  vit_net(std::int64_t side, std::int64_t patch, std::int64_t d, std::int64_t heads, std::int64_t blocks_n,
          std::int64_t hidden, bool cls_token, std::int64_t classes)
      : side_(side), d_(d), cls_(cls_token) {
    using namespace torch::nn;
    embed = register_module("patch", Conv2d(Conv2dOptions(1, d, patch).stride(patch)));
    overflow_sites.emplace_back("patch", "patch.out");
    const std::int64_t grid = side / patch, tokens = grid * grid + (cls_ ? 1 : 0);
    // 0.02: ViT's initialization of the position embedding and the CLS token.
    pos = register_parameter("pos", torch::randn({tokens, d}).mul(0.02));
    if (cls_) cls = register_parameter("cls", torch::randn({1, 1, d}).mul(0.02));
    blocks = register_module("blocks", ModuleList());
    for (std::int64_t i = 0; i < blocks_n; ++i) {
      blocks->push_back(vit_block(d, heads, hidden));
      const std::string n = "blocks." + std::to_string(i);
      overflow_sites.emplace_back(n, n + ".fc1.gelu");
    }
    ln_f = register_module("ln_f", LayerNorm(LayerNormOptions({d})));
    head = register_module("head", Linear(d, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto N = x.size(0);
    auto tok = embed(x.view({N, 1, side_, side_})).flatten(2).transpose(1, 2);  // [N, T, d]
    if (cls_) tok = torch::cat({cls.expand({N, 1, d_}), tok}, 1);
    auto h = t.act("patch.out", tok + pos);
    for (std::size_t i = 0; i < blocks->size(); ++i)
      h = blocks[i]->as<vit_block_impl>()->forward(h, "blocks." + std::to_string(i), t);
    h = ln_f(h);
    auto pooled = t.act("pool", cls_ ? h.select(1, 0) : h.mean(1));  // [N, d]
    return head(pooled);
  }
  std::int64_t side_, d_;
  bool cls_;
  torch::nn::Conv2d embed{nullptr};
  torch::Tensor pos, cls;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
};

/// LeNet-5 on side x side images: conv 5x5 to 6 channels (padding 2) -> pool 2 -> conv 5x5 to
/// 16 -> pool 2 -> 120 -> 84 -> classes (28: 28 -> 14 -> 10 -> 5), with tanh and average
/// pooling, or ReLU and max pooling; dropout after each hidden layer of the classifier head.
/// The dropout masks come from the run's own generator (seeded with the run), not LibTorch's
/// process-wide one, so a run does not depend on the runs beside it.
struct lenet_net : net {
  lenet_net(std::int64_t side, bool relu, double dropout, std::int64_t classes, std::uint64_t seed)
      : side_(side),
        relu_(relu),
        p_(dropout),
        act_(relu ? "relu" : "tanh"),
        gen_(at::detail::createCPUGenerator(seed)) {
    using namespace torch::nn;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 6, 5).padding(2)));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(6, 16, 5)));
    const std::int64_t pooled = (side / 2 - 4) / 2;
    fc1 = register_module("fc1", Linear(16 * pooled * pooled, 120));
    fc2 = register_module("fc2", Linear(120, 84));
    head = register_module("head", Linear(84, classes));
    for (const auto* n : {"conv1", "conv2", "fc1", "fc2"}) overflow_sites.emplace_back(n, std::string(n) + "." + act_);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h1 = t.act("conv1." + act_, activate(conv1(x.view({x.size(0), 1, side_, side_}))));
    auto h2 = t.act("conv2." + act_, activate(conv2(pool(h1))));
    auto h3 = t.act("fc1." + act_, activate(fc1(pool(h2).flatten(1))));
    auto h4 = t.act("fc2." + act_, activate(fc2(drop(h3))));
    return head(drop(h4));
  }
  [[nodiscard]] torch::Tensor activate(const torch::Tensor& z) const { return relu_ ? torch::relu(z) : torch::tanh(z); }
  [[nodiscard]] torch::Tensor pool(const torch::Tensor& z) const {
    return relu_ ? torch::max_pool2d(z, 2) : torch::avg_pool2d(z, 2);
  }
  /// Inverted dropout while training; the identity in eval mode (validation).
  torch::Tensor drop(const torch::Tensor& h) {
    if (!is_training() || p_ <= 0.0) return h;
    auto keep = torch::empty_like(h).bernoulli_(1.0 - p_, gen_);
    return h * keep / (1.0 - p_);
  }
  std::int64_t side_;
  bool relu_;
  double p_;
  std::string act_;
  at::Generator gen_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, head{nullptr};
};

}  // namespace zoo
