// SPDX-License-Identifier: Apache-2.0
/// The `hetero_nll`, `pruned` and `qat` families (split heldout7) in LibTorch: heteroscedastic
/// regression with a Gaussian negative log-likelihood (a mean head and a variance head: a loss that
/// goes below 0 as the model fits), gradual magnitude pruning during training (Zhu & Gupta's cubic
/// schedule: weight tensors with a growing share of exact zeros, whose gradients are zeroed too),
/// and quantization-aware training (fake quantization of the weights per channel and of the
/// activations through running min/max observers, gradients through the straight-through
/// estimator). They probe what no other family does: a loss with no floor at 0, a parameter that is
/// partly and increasingly exactly 0 while the rest of it trains, and a forward pass whose values
/// sit on a grid (and may jump when quantization is switched on). Like the other families, each
/// taps its activations in forward order through `taps` and names the layers forward_inf can be
/// planted in. Their own modules, so that a change to another family cannot change these held-out
/// runs.
#pragma once

#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>    // std::get of topk's and aminmax's pairs
#include <utility>  // std::move
#include <vector>

namespace zoo {

/// The widths of a variant's MLP, read after `tag` up to the next '-': "mlp256x128" -> {256,
/// 128}; "mlp64" -> {64}; none where `tag` is absent.
inline std::vector<std::int64_t> widths_after(const std::string& variant, const std::string& tag) {
  std::vector<std::int64_t> out;
  const auto at = variant.find(tag);
  if (at == std::string::npos) return out;
  std::size_t i = at + tag.size();
  while (i < variant.size() && variant[i] >= '0' && variant[i] <= '9') {
    std::int64_t w = 0;
    while (i < variant.size() && variant[i] >= '0' && variant[i] <= '9')
      w = 10 * w + (variant[i++] - '0');
    out.push_back(w);
    if (i < variant.size() && variant[i] == 'x') ++i;
  }
  return out;
}

/// How a heteroscedastic regression's second head gives the variance: `log_var`, var =
/// exp(log_var) (the common form); `softplus`, var = softplus(raw), the form users pair with
/// torch.nn.GaussianNLLLoss's eps clamp.
enum class variance_head { log_var, softplus };

/// Heteroscedastic regression: in -> hidden... (ReLU) -> two heads, the mean (`mean_head`) and
/// the variance's parameter (`logvar_head`, or `var_head` for softplus), each [N, 1]; the
/// output is [N, 2] = (mean, parameter), what the loss reads.
struct hetero_net : net {
  hetero_net(std::int64_t in, const std::vector<std::int64_t>& hidden, variance_head kind) {
    using namespace torch::nn;
    std::int64_t width = in;
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      layers_.push_back(register_module(n, Linear(width, hidden[i])));
      names_.push_back(n + ".relu");
      overflow_sites.emplace_back(n, n + ".relu");
      width = hidden[i];
    }
    mean_head = register_module("mean_head", Linear(width, 1));
    var_head = register_module(kind == variance_head::log_var ? "logvar_head" : "var_head",
                               Linear(width, 1));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < layers_.size(); ++i)
      h = t.act(names_[i], torch::relu(layers_[i](h)));
    return torch::cat({mean_head(h), var_head(h)}, 1);  // [N, 2]
  }
  std::vector<torch::nn::Linear> layers_;
  std::vector<std::string> names_;  ///< the activations' names: fc1.relu, ...
  torch::nn::Linear mean_head{nullptr}, var_head{nullptr};
};

/// torch.nn.GaussianNLLLoss's eps (its default): the variance is clamped to it without the
/// clamp's gradient (torch clamps a clone under no_grad), so the gradient is the unclamped one.
inline constexpr double gaussian_nll_eps = 1e-6;

/// The Gaussian negative log-likelihood of targets `y` [N, 1] under `out` [N, 2] = (mean,
/// variance parameter), as torch.nn.GaussianNLLLoss computes it (full = false: no 0.5 log 2 pi,
/// mean over the rows): 0.5 (log var + (y - mean)^2 / var), var clamped at eps. Below 0 once
/// the fitted variance is under ~e^-1 of the target's where the residuals match it: the
/// standardized targets here start near 0.5 and go negative as a model fits well. `beta` > 0:
/// beta-NLL (Seitzer et al. 2022), each row's term weighted by var^beta with the weight's
/// gradient stopped (var.detach() ** beta), which keeps the mean's gradient from vanishing
/// where the variance is large; its value is still a weighted NLL and also goes below 0.
inline torch::Tensor gaussian_nll(const torch::Tensor& out, const torch::Tensor& y,
                                  variance_head kind, double beta) {
  const auto mean = out.slice(1, 0, 1), raw = out.slice(1, 1, 2);  // [N, 1] each
  auto var = kind == variance_head::log_var ? raw.exp() : torch::softplus(raw);
  var = var + (var.clamp_min(gaussian_nll_eps) - var).detach();
  auto nll = 0.5 * (var.log() + (y - mean).pow(2) / var);  // [N, 1]
  if (beta > 0.0) nll = nll * var.detach().pow(beta);
  return nll.mean();
}

/// Gradual magnitude pruning (Zhu & Gupta 2017, "To prune, or not to prune") of `weights`,
/// each pruned on its own (layer-wise, as TensorFlow's prune_low_magnitude does): from step
/// `begin` to `end`, every `every` steps, the smallest-magnitude weights of each tensor are
/// masked so that its sparsity is s_t = s_f (1 - (1 - (t - begin) / (end - begin))^3), a cubic
/// that prunes fast early and slowly at the end; after `end` the masks stay as they are. A
/// user's loop (no torch.nn.utils.prune, whose `weight_orig` keeps the pruned values): after
/// backward the pruned weights' gradients are zeroed (`mask_gradients`), after the optimizer
/// step the masks are applied to the weights (`update`), so the weights stay exactly 0 even
/// where Adam's moments or momentum would move them. A weight pruned once stays pruned: the
/// masks are recomputed from the masked weights, whose zeros are the smallest magnitudes.
struct magnitude_pruner {
  std::vector<torch::Tensor> weights, masks;  ///< masks: 0 or 1, each its weight's shape
  double final_sparsity = 0.0;
  std::int64_t begin = 0, end = 0, every = 1;

  /// A run of `steps` steps: the dense phase is its first 20%, pruning ends at 70%, in 25 steps.
  magnitude_pruner(std::vector<torch::Tensor> w, double sparsity, std::int64_t steps)
      : weights(std::move(w)),
        final_sparsity(sparsity),
        begin(steps / 5),
        end(steps * 7 / 10),
        every(std::max<std::int64_t>(1, (end - begin) / 25)) {
    for (const auto& p : weights)
      masks.push_back(torch::ones_like(p.detach()));
  }
  [[nodiscard]] double sparsity_at(std::int64_t step) const {
    if (step <= begin) return 0.0;
    const double progress =
        std::min(1.0, static_cast<double>(step - begin) / static_cast<double>(end - begin));
    return final_sparsity * (1.0 - std::pow(1.0 - progress, 3.0));
  }
  void mask_gradients() {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (weights[i].grad().defined()) weights[i].mutable_grad().mul_(masks[i]);
  }
  /// After step `step`'s optimizer step: on a pruning step, new masks; always, the masks applied.
  void update(std::int64_t step) {
    torch::NoGradGuard no_grad;
    const bool prune_now =
        step > begin && step <= end && ((step - begin) % every == 0 || step == end);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (prune_now) {
        const auto n = weights[i].numel();
        const auto k =
            static_cast<std::int64_t>(std::llround(sparsity_at(step) * static_cast<double>(n)));
        masks[i].fill_(1.0);
        if (k > 0) {
          // The k smallest magnitudes (a NaN sorts above every number: never among them).
          const auto idx =
              std::get<1>(torch::topk(weights[i].abs().flatten(), k, 0, /*largest=*/false));
          masks[i].view({-1}).index_fill_(0, idx, 0.0);
        }
      }
      weights[i].mul_(masks[i]);
    }
  }
};

/// The pruned family's models, ReLU throughout, named as a PyTorch user's:
/// - an MLP in -> widths... -> classes, fc1 .. fcN (LeNet-300-100: 784 -> 300 -> 100 -> 10,
///   Han et al.'s and Zhu & Gupta's small benchmark); every layer's weight pruned but the
///   output layer's;
/// - a CNN on 28 x 28 images: conv1 (1 -> 16, 5x5, stride 2: 28 -> 12), conv2 (16 -> 32, 3x3,
///   stride 2, padding 1: 12 -> 6), fc1 (1152 -> 64), fc2 (64 -> classes); conv2's and fc1's
///   weights pruned; conv1 (400 weights) and the output layer stay dense, as Gale et al. 2019
///   ("The state of sparsity in deep neural networks") keep the first and last layers.
/// Biases are never pruned.
struct pruned_net : net {
  pruned_net(std::int64_t side, bool cnn, const std::vector<std::int64_t>& widths,
             std::int64_t classes, double sparsity, std::int64_t steps)
      : side_(side), cnn_(cnn) {
    using namespace torch::nn;
    std::vector<torch::Tensor> prunable;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 16, 5).stride(2)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(16, 32, 3).stride(2).padding(1)));
      const auto s1 = (side - 5) / 2 + 1, s2 = (s1 + 1) / 2;
      fcs_.push_back(register_module("fc1", Linear(32 * s2 * s2, 64)));
      fcs_.push_back(register_module("fc2", Linear(64, classes)));
      names_ = {"fc1.relu"};
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc1", "fc1.relu"}};
      prunable = {conv2->weight, fcs_[0]->weight};
    } else {
      std::int64_t width = side * side;
      for (std::size_t i = 0; i <= widths.size(); ++i) {
        const std::string n = "fc" + std::to_string(i + 1);
        const auto out = i < widths.size() ? widths[i] : classes;
        fcs_.push_back(register_module(n, Linear(width, out)));
        if (i < widths.size()) {
          names_.push_back(n + ".relu");
          overflow_sites.emplace_back(n, n + ".relu");
          prunable.push_back(fcs_.back()->weight);
        }
        width = out;
      }
    }
    pruner = std::make_unique<magnitude_pruner>(std::move(prunable), sparsity, steps);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    if (cnn_) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side_, side_}))));
      h = t.act("conv2.relu", torch::relu(conv2(h))).flatten(1);
    }
    for (std::size_t i = 0; i + 1 < fcs_.size(); ++i)
      h = t.act(names_[i], torch::relu(fcs_[i](h)));
    return fcs_.back()(h);
  }
  std::int64_t side_;
  bool cnn_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  std::vector<torch::nn::Linear> fcs_;
  std::vector<std::string> names_;
  std::unique_ptr<magnitude_pruner> pruner;
};

/// Fake quantization of a weight [out, ...] per output channel, symmetric, `bits` bits, as
/// PyTorch's per_channel_symmetric fake quantizer: scale = max |w| / ((qmax - qmin) / 2) per
/// channel (quant range [-2^(bits-1), 2^(bits-1) - 1], zero point 0), w -> clamp(round(w /
/// scale)) x scale. The straight-through estimator: the gradient passes unchanged where
/// round(w / scale) lies in the range and is 0 where it was clamped (torch's
/// fake_quantize_per_channel_affine backward), so a channel's largest positive weight, at
/// 2^(bits-1) - 0.5 scales, gets none.
inline torch::Tensor fake_quant_weight(const torch::Tensor& w, int bits) {
  const double qmax = std::ldexp(1.0, bits - 1) - 1.0, qmin = -std::ldexp(1.0, bits - 1);
  std::vector<std::int64_t> shape(static_cast<std::size_t>(w.dim()), 1);
  shape[0] = w.size(0);
  const auto wd = w.detach();
  // float32's epsilon as the least scale, as torch's observers
  const auto scale =
      (wd.abs().flatten(1).amax(1) / ((qmax - qmin) / 2.0)).clamp_min(1.1920929e-7).view(shape);
  const auto q = torch::round(wd / scale);
  const auto pass = ((q >= qmin) & (q <= qmax)).to(w.scalar_type());
  const auto through = w * pass;
  return through + (q.clamp(qmin, qmax) * scale - through).detach();
}

/// Fake quantization of an activation, per tensor, affine, 8 bits (quint8, [0, 255]) with a
/// moving-average min/max observer (PyTorch's MovingAverageMinMaxObserver, averaging constant
/// 0.01; the first batch sets the range): the range always includes 0, scale = (max - min) /
/// 255, zero point = -round(min / scale); the straight-through estimator passes the gradient
/// where the value is inside the range and stops it where it was clamped. The observer learns
/// only in training mode; evaluation reads its running range.
struct act_fake_quant {
  double averaging = 0.01, lo = 0.0, hi = 0.0;
  bool seen = false;
  torch::Tensor operator()(const torch::Tensor& x, bool training) {
    if (training) {
      const auto mm = torch::aminmax(x.detach());
      const double b_lo = std::get<0>(mm).item<double>(), b_hi = std::get<1>(mm).item<double>();
      lo = seen ? lo + averaging * (b_lo - lo) : b_lo;
      hi = seen ? hi + averaging * (b_hi - hi) : b_hi;
      seen = true;
    }
    const double l = std::min(lo, 0.0), h = std::max(hi, 0.0);
    const double scale = std::max((h - l) / 255.0, 1.1920929e-7);
    const double zero = std::min(255.0, std::max(0.0, -std::nearbyint(l / scale)));
    const auto q = torch::round(x.detach() / scale) + zero;
    const auto pass = ((q >= 0.0) & (q <= 255.0)).to(x.scalar_type());
    const auto through = x * pass;
    return through + ((q.clamp(0.0, 255.0) - zero) * scale - through).detach();
  }
};

/// The QAT family's models, ReLU throughout, with PyTorch eager-mode QAT's placement: the input
/// fake-quantized (QuantStub), each layer's weight fake-quantized per channel to `weight_bits`,
/// each ReLU's output and the logits fake-quantized to 8 bits (the fused Linear/Conv-ReLU
/// modules' activation_post_process), biases in float. The parameters are the float "shadow"
/// weights a QAT module keeps, named as the float model's (conv1.weight, fc1.weight, ...).
/// - an MLP in -> widths... -> classes, fc1 .. fcN;
/// - a CNN on 28 x 28 images: conv1 (1 -> 8, 5x5, stride 2: 28 -> 12), conv2 (8 -> 16, 3x3,
///   stride 2, padding 1: 12 -> 6), fc1 (576 -> 64), fc2 (64 -> classes).
/// `fake_quant` false: a float model (the float warm-up) until `enable_fake_quant`, which, as
/// prepare_qat on a model trained in float for a while, starts every observer afresh. The taps
/// are the fake-quantized activations (what a forward hook on a QAT module sees).
struct qat_net : net {
  qat_net(std::int64_t side, bool cnn, const std::vector<std::int64_t>& widths,
          std::int64_t classes, int weight_bits, bool fake_quant_on)
      : side_(side), cnn_(cnn), bits_(weight_bits), fake_quant(fake_quant_on) {
    using namespace torch::nn;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 8, 5).stride(2)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(8, 16, 3).stride(2).padding(1)));
      const auto s1 = (side - 5) / 2 + 1, s2 = (s1 + 1) / 2;
      fcs_.push_back(register_module("fc1", Linear(16 * s2 * s2, 64)));
      fcs_.push_back(register_module("fc2", Linear(64, classes)));
      names_ = {"fc1.relu"};
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc1", "fc1.relu"}};
    } else {
      std::int64_t width = side * side;
      for (std::size_t i = 0; i <= widths.size(); ++i) {
        const std::string n = "fc" + std::to_string(i + 1);
        const auto out = i < widths.size() ? widths[i] : classes;
        fcs_.push_back(register_module(n, Linear(width, out)));
        if (i < widths.size()) {
          names_.push_back(n + ".relu");
          overflow_sites.emplace_back(n, n + ".relu");
        }
        width = out;
      }
    }
    // The input, each ReLU and the logits.
    observers_.resize((cnn_ ? 2 : 0) + fcs_.size() + 1);
  }
  void enable_fake_quant() {
    fake_quant = true;
    for (auto& o : observers_)
      o = act_fake_quant{};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    std::size_t k = 0;
    auto aq = [&](const torch::Tensor& a) {
      return fake_quant ? observers_[k++](a, is_training()) : a;
    };
    auto wq = [&](const torch::Tensor& w) { return fake_quant ? fake_quant_weight(w, bits_) : w; };
    namespace F = torch::nn::functional;
    auto h = aq(x);
    if (cnn_) {
      h = h.view({x.size(0), 1, side_, side_});
      h = t.act("conv1.relu",
                aq(torch::relu(F::conv2d(h, wq(conv1->weight),
                                         F::Conv2dFuncOptions().bias(conv1->bias).stride(2)))));
      h = t.act("conv2.relu", aq(torch::relu(F::conv2d(
                                  h, wq(conv2->weight),
                                  F::Conv2dFuncOptions().bias(conv2->bias).stride(2).padding(1)))));
      h = h.flatten(1);
    }
    for (std::size_t i = 0; i + 1 < fcs_.size(); ++i)
      h = t.act(names_[i], aq(torch::relu(F::linear(h, wq(fcs_[i]->weight), fcs_[i]->bias))));
    return aq(F::linear(h, wq(fcs_.back()->weight), fcs_.back()->bias));
  }
  std::int64_t side_;
  bool cnn_;
  int bits_;
  bool fake_quant;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  std::vector<torch::nn::Linear> fcs_;
  std::vector<std::string> names_;
  std::vector<act_fake_quant> observers_;
};

}  // namespace zoo
