// SPDX-License-Identifier: Apache-2.0
/// The `lora`, `fixup` and `distill` families (split heldout6) in LibTorch: LoRA fine-tuning of a
/// frozen base network pre-trained inside the run (low-rank adapters whose B starts at 0), a deep
/// residual network without normalization whose residual branches start at zero (Fixup, ReZero, a
/// zero-initialized last conv), and knowledge distillation from a teacher trained inside the run
/// (soft-target cross-entropy plus label-smoothed cross-entropy: a loss whose floor is far above
/// 0). They probe, in other ways than the skipgram and contrastive families, tensors that start at
/// exactly zero (and, here, frozen ones that never move) and losses whose minimum is well above 0.
/// Like the other families, each taps its activations in forward order through `taps` and names the
/// layers forward_inf can be planted in. Their own modules, so that a change to another family
/// cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zoo {

/// A Linear with an optional LoRA adapter (Hu et al. 2021, as PEFT writes it): y = base_layer(x)
/// + (alpha / r) * lora_B(lora_A(x)); lora_A [r, in] initialized as a Linear is (PEFT's
/// kaiming-uniform), lora_B [out, r] zero, so the adapter's contribution starts at exactly 0
/// and lora_A's first gradient is exactly 0 too. The adapter is only added once `adapting` is
/// set (after the base's pre-training). Parameter names follow PEFT's: `base_layer.weight`,
/// `lora_A.weight`, `lora_B.weight`. rank 0: no adapter.
struct lora_linear : torch::nn::Module {
  lora_linear(std::int64_t in, std::int64_t out, std::int64_t rank, double alpha)
      : scale_(rank > 0 ? alpha / static_cast<double>(rank) : 0.0) {
    using namespace torch::nn;
    base_layer = register_module("base_layer", Linear(in, out));
    if (rank > 0) {
      lora_A = register_module("lora_A", Linear(LinearOptions(in, rank).bias(false)));
      lora_B = register_module("lora_B", Linear(LinearOptions(rank, out).bias(false)));
      torch::NoGradGuard no_grad;
      lora_B->weight.zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = base_layer(x);
    if (adapting && lora_A) y = y + scale_ * lora_B(lora_A(x));
    return y;
  }
  /// The base layer's parameters (frozen for fine-tuning).
  std::vector<torch::Tensor> base_parameters() { return base_layer->parameters(); }
  double scale_;
  bool adapting = false;
  torch::nn::Linear base_layer{nullptr}, lora_A{nullptr}, lora_B{nullptr};
};

/// The LoRA family's model: a base network pre-trained on one task, then frozen, and adapters
/// (and, with `new_head`, a fresh classification head) trained on another. Two bases:
/// - an MLP on flattened 28 x 28 images: fc1 (784 -> 256), fc2 (256 -> 128), ReLU, head
///   (128 -> classes); adapters on fc1 and fc2, and on the head where it is reused (`!new_head`);
/// - a one-block pre-norm transformer over the image's 28 rows as 28 tokens of 28 pixels
///   (`rows`): embed (28 -> 32) plus a learned position embedding, attention of 2 heads of 16
///   (q, k, v, o), a GELU MLP 32 -> 64 -> 32, a final LayerNorm, mean over the tokens, head;
///   adapters on q and v (LoRA's own choice of targets), a new head.
/// `start_fine_tuning` freezes everything but the adapters (and the new head, which it resets to
/// an initialization drawn at construction, so that the run's initialization depends on its
/// seed alone: see train()'s lock), and drops the pre-training's gradients.
struct lora_net : net {
  lora_net(bool rows, std::int64_t rank, double alpha, bool new_head, std::int64_t classes)
      : rows_(rows), new_head_(new_head) {
    using namespace torch::nn;
    const auto r_head = new_head ? 0 : rank;
    if (!rows_) {
      fc1 = register_module("fc1", std::make_shared<lora_linear>(784, 256, rank, alpha));
      fc2 = register_module("fc2", std::make_shared<lora_linear>(256, 128, rank, alpha));
      head = register_module("head", std::make_shared<lora_linear>(128, classes, r_head, alpha));
      overflow_sites = {{"fc1", "fc1.relu"}, {"fc2", "fc2.relu"}};
    } else {
      constexpr std::int64_t d = 32;
      embed = register_module("embed", Linear(28, d));
      pos = register_parameter("pos", torch::randn({28, d}) * 0.02);
      ln1 = register_module("ln1", LayerNorm(LayerNormOptions({d})));
      q = register_module("q", std::make_shared<lora_linear>(d, d, rank, alpha));
      k = register_module("k", std::make_shared<lora_linear>(d, d, 0, alpha));
      v = register_module("v", std::make_shared<lora_linear>(d, d, rank, alpha));
      o = register_module("o", std::make_shared<lora_linear>(d, d, 0, alpha));
      ln2 = register_module("ln2", LayerNorm(LayerNormOptions({d})));
      mlp1 = register_module("mlp1", Linear(d, 2 * d));
      mlp2 = register_module("mlp2", Linear(2 * d, d));
      ln_f = register_module("ln_f", LayerNorm(LayerNormOptions({d})));
      head = register_module("head", std::make_shared<lora_linear>(d, classes, r_head, alpha));
      overflow_sites = {{"embed", "embed.out"}, {"mlp1", "mlp1.gelu"}};
    }
    // The new head's initialization, drawn now (under train()'s lock) and put in place by
    // start_fine_tuning.
    const auto& w = head->base_layer->weight;
    // Linear's default initialization (kaiming-uniform, a = sqrt 5, and its bias).
    const double bound = 1.0 / std::sqrt(static_cast<double>(w.size(1)));
    fresh_head_w = torch::empty(w.sizes()).uniform_(-bound, bound);
    fresh_head_b = torch::empty({w.size(0)}).uniform_(-bound, bound);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto n = x.size(0);
    if (!rows_) {
      auto h = t.act("fc1.relu", torch::relu(fc1->forward(x)));
      h = t.act("fc2.relu", torch::relu(fc2->forward(h)));
      return head->forward(h);
    }
    constexpr std::int64_t d = 32, heads = 2, dh = 16;
    auto h = t.act("embed.out", embed(x.view({n, 28, 28})) + pos);  // [N, 28, d]
    auto a = ln1(h);
    // [N, 28, d] -> [N, H, 28, dh]
    auto split = [&](const torch::Tensor& z) { return z.view({n, 28, heads, dh}).transpose(1, 2); };
    auto qh = split(q->forward(a)), kh = split(k->forward(a)), vh = split(v->forward(a));
    auto scores = torch::matmul(qh, kh.transpose(-2, -1)) /
                  std::sqrt(static_cast<double>(dh));  // [N, H, 28, 28]
    t.attention.emplace_back("attn", scores.detach());
    auto ctx = torch::matmul(torch::softmax(scores, -1), vh).transpose(1, 2).reshape({n, 28, d});
    h = t.act("attn.out", h + o->forward(ctx));
    h = h + mlp2(t.act("mlp1.gelu", torch::gelu(mlp1(ln2(h)))));
    auto pooled = t.act("pool", ln_f(h).mean(1));  // [N, d]
    return head->forward(pooled);
  }
  std::vector<std::shared_ptr<lora_linear>> adapted() const {
    std::vector<std::shared_ptr<lora_linear>> out;
    for (const auto& l : {fc1, fc2, q, k, v, o, head})
      if (l) out.push_back(l);
    return out;
  }
  /// Pre-training: every parameter but the adapters'.
  std::vector<torch::Tensor> base_parameters() {
    std::vector<torch::Tensor> out;
    for (const auto& p : named_parameters())
      if (p.key().find("lora_") == std::string::npos) out.push_back(p.value());
    return out;
  }
  void start_fine_tuning() {
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) {
      p.mutable_grad() = torch::Tensor();  // the pre-training's last gradients
      p.requires_grad_(false);
    }
    for (auto& l : adapted()) {
      l->adapting = true;
      if (l->lora_A) {
        l->lora_A->weight.requires_grad_(true);
        l->lora_B->weight.requires_grad_(true);
      }
    }
    if (new_head_) {
      head->base_layer->weight.copy_(fresh_head_w);
      head->base_layer->bias.copy_(fresh_head_b);
      for (auto& p : head->base_layer->parameters())
        p.requires_grad_(true);
    }
  }
  bool rows_, new_head_;
  std::shared_ptr<lora_linear> fc1, fc2, q, k, v, o, head;
  torch::nn::Linear embed{nullptr}, mlp1{nullptr}, mlp2{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr}, ln_f{nullptr};
  torch::Tensor pos, fresh_head_w, fresh_head_b;
};

/// Trains `params` of `m` by Adam with cross-entropy on random micro-batches of `t`'s training
/// rows, from a generator of its own (the run's setup, never monitored: the LoRA base's
/// pre-training, the distillation teacher), then drops the gradients it left.
inline void fit_unmonitored(net& m, const std::vector<torch::Tensor>& params, const table& t,
                            std::int64_t steps, std::int64_t batch, double lr, std::uint64_t seed) {
  torch::optim::Adam opt(params, torch::optim::AdamOptions(lr));
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  const auto n = t.x_train.size(0);
  m.train();
  for (std::int64_t step = 0; step < steps; ++step) {
    auto idx = torch::randint(0, n, {batch}, gen, torch::kLong);
    taps unused;
    auto loss = torch::nn::functional::cross_entropy(
        m.forward(t.x_train.index_select(0, idx), unused), t.y_train.index_select(0, idx));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  for (auto& p : m.parameters())
    p.mutable_grad() = torch::Tensor();
}

/// A residual branch that starts at zero, three ways, on a stream of `c` channels (3x3 convs,
/// padding 1, no normalization anywhere):
/// - fixup (Zhang et al. 2019, its BasicBlock): scalar biases before each conv and the
///   activation, a scalar multiplier (1), conv1 He-initialized and scaled by L^(-1/2) for L
///   blocks, conv2 zero; relu(x + branch);
/// - rezero (Bachlechner et al. 2020): x + alpha * conv2(relu(conv1(x))), alpha a scalar
///   starting at 0, the convs with LibTorch's default initialization and biases;
/// - zero_last: relu(x + conv2(relu(conv1(x)))), conv1 He-initialized, conv2 (weight and bias)
///   zero: torchvision's zero_init_residual without the BatchNorm it is meant for.
enum class zero_branch { fixup, rezero, zero_last };

struct zero_block_impl : torch::nn::Module {
  zero_block_impl(zero_branch kind, std::int64_t c, std::int64_t blocks) : kind_(kind) {
    using namespace torch::nn;
    const bool fixup = kind == zero_branch::fixup;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(c, c, 3).padding(1).bias(!fixup)));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(c, c, 3).padding(1).bias(!fixup)));
    torch::NoGradGuard no_grad;
    const double he = std::sqrt(2.0 / static_cast<double>(c * 9));
    if (fixup) {
      conv1->weight.normal_(0.0, he / std::sqrt(static_cast<double>(blocks)));
      conv2->weight.zero_();
      bias1a = register_parameter("bias1a", torch::zeros({1}));
      bias1b = register_parameter("bias1b", torch::zeros({1}));
      bias2a = register_parameter("bias2a", torch::zeros({1}));
      bias2b = register_parameter("bias2b", torch::zeros({1}));
      scale = register_parameter("scale", torch::ones({1}));
    } else if (kind == zero_branch::rezero) {
      alpha = register_parameter("alpha", torch::zeros({1}));
    } else {
      conv1->weight.normal_(0.0, he);
      conv1->bias.zero_();
      conv2->weight.zero_();
      conv2->bias.zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    switch (kind_) {
      case zero_branch::fixup: {
        auto h = t.act(name + ".relu1", torch::relu(conv1(x + bias1a) + bias1b));
        return t.act(name + ".out", torch::relu(x + conv2(h + bias2a) * scale + bias2b));
      }
      case zero_branch::rezero: {
        auto h = t.act(name + ".relu1", torch::relu(conv1(x)));
        return t.act(name + ".out", x + alpha * conv2(h));
      }
      case zero_branch::zero_last:
        break;
    }
    auto h = t.act(name + ".relu1", torch::relu(conv1(x)));
    return t.act(name + ".out", torch::relu(x + conv2(h)));
  }
  zero_branch kind_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::Tensor bias1a, bias1b, bias2a, bias2b, scale, alpha;
};
TORCH_MODULE_IMPL(zero_block, zero_block_impl);

/// A deep residual CNN without normalization whose branches start at zero: a stem (digits 8 x
/// 8: a 3x3 conv, 8 -> 8; Fashion-MNIST 28 x 28: a 4x4 conv of stride 4, 28 -> 7, which keeps
/// 6-16 blocks within a short run on one thread), ReLU, `blocks` zero_blocks of `c` channels,
/// a linear head on the flattened map (8 x 8 or 7 x 7 x c). Fixup also zero-initializes the
/// head (weight and bias) and adds a scalar bias before it, as its paper does: the initial
/// logits are exactly 0. Flattened, not global average pooling as the papers' CIFAR ResNets:
/// with every branch at zero the network starts as a linear model of its head's input, and of
/// c channel means it learned next to nothing in a short run (ReZero on the digits at SGD 0.05
/// and 0.2 and Nesterov 0.01: 2.30-2.32 -> 2.30-2.31 in 200-300 steps; Fixup at momentum 0.01:
/// 2.30 -> 2.16; 4 of the first 10 runs checked with --losses-only).
struct zero_resnet_net : net {
  zero_resnet_net(std::int64_t side, zero_branch kind, std::int64_t blocks_n, std::int64_t c,
                  std::int64_t classes)
      : side_(side), kind_(kind) {
    using namespace torch::nn;
    const bool small = side <= 8;
    stem = register_module(
        "stem",
        Conv2d(Conv2dOptions(1, c, small ? 3 : 4).stride(small ? 1 : 4).padding(small ? 1 : 0)));
    overflow_sites.emplace_back("stem", "stem.relu");
    blocks = register_module("blocks", ModuleList());
    for (std::int64_t i = 0; i < blocks_n; ++i) {
      blocks->push_back(zero_block(kind, c, blocks_n));
      const std::string n = "blocks." + std::to_string(i);
      overflow_sites.emplace_back(n, n + ".out");
    }
    const auto s = small ? side : side / 4;
    head = register_module("head", Linear(c * s * s, classes));
    if (kind == zero_branch::fixup) {
      bias_head = register_parameter("bias_head", torch::zeros({1}));
      torch::NoGradGuard no_grad;
      head->weight.zero_();
      head->bias.zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = t.act("stem.relu", torch::relu(stem(x.view({x.size(0), 1, side_, side_}))));
    for (std::size_t i = 0; i < blocks->size(); ++i)
      h = blocks[i]->as<zero_block_impl>()->forward(h, "blocks." + std::to_string(i), t);
    auto flat = h.flatten(1);  // [N, c * s * s]
    return head(kind_ == zero_branch::fixup ? flat + bias_head : flat);
  }
  std::int64_t side_;
  zero_branch kind_;
  torch::nn::Conv2d stem{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor bias_head;
};

/// The distillation family's students: an MLP of one hidden ReLU layer (fc1 -> head), or a
/// small CNN on side x side images (conv1 1 -> 8, 5x5 stride 2: 28 -> 12; conv2 8 -> 16, 3x3
/// stride 2 padding 1: 12 -> 6; fc 576 -> 32; head), ReLU throughout.
struct student_net : net {
  student_net(std::int64_t side, bool cnn, std::int64_t hidden, std::int64_t classes)
      : side_(side), cnn_(cnn) {
    using namespace torch::nn;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 8, 5).stride(2)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(8, 16, 3).stride(2).padding(1)));
      const auto s1 = (side - 5) / 2 + 1, s2 = (s1 + 1) / 2;
      fc1 = register_module("fc1", Linear(16 * s2 * s2, hidden));
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc1", "fc1.relu"}};
    } else {
      fc1 = register_module("fc1", Linear(side * side, hidden));
      overflow_sites = {{"fc1", "fc1.relu"}};
    }
    head = register_module("head", Linear(hidden, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    if (cnn_) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side_, side_}))));
      h = t.act("conv2.relu", torch::relu(conv2(h))).flatten(1);
    }
    return head(t.act("fc1.relu", torch::relu(fc1(h))));
  }
  std::int64_t side_;
  bool cnn_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, head{nullptr};
};

/// Knowledge distillation's loss (Hinton et al. 2015, the soft-target cross-entropy form):
/// alpha * H(softmax(teacher / T), softmax(student / T)) + (1 - alpha) * the cross-entropy
/// with the labels, smoothed by `smoothing`. Not the KL form: the gradients are the same (the
/// teacher's entropy is a constant), but this is the number a user of the cross-entropy form
/// logs, and its floor, alpha * H(teacher / T) + (1 - alpha) * H(smoothed labels), is far
/// above 0, which is what the family is here for. No T^2 factor: with it the loss would start
/// at (alpha T^2 + 1 - alpha) ln C, and the monitor, told C classes, expects ln C from a
/// classifier's initial loss; without it both terms start at ln C for a student whose logits
/// start near 0. Logits [N, C], labels [N].
inline torch::Tensor distill_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                                  const torch::Tensor& y, double temperature, double alpha,
                                  double smoothing) {
  namespace F = torch::nn::functional;
  auto soft = torch::softmax(teacher / temperature, 1);
  auto soft_ce = -(soft * torch::log_softmax(student / temperature, 1)).sum(1).mean();
  auto hard = F::cross_entropy(student, y, F::CrossEntropyFuncOptions().label_smoothing(smoothing));
  return alpha * soft_ce + (1.0 - alpha) * hard;
}

}  // namespace zoo
