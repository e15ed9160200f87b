// SPDX-License-Identifier: Apache-2.0
/// The `gru_seq`, `regression` and `dwsep_cnn` families (split heldout4) in LibTorch: a GRU or LSTM
/// that reads a Fashion-MNIST image row by row and classifies it from its last hidden state, an MLP
/// (or linear) regression with MSE on the UCI diabetes table, and a small MobileNet-style
/// depthwise-separable CNN on Fashion-MNIST. Like the other families, each taps its activations in
/// forward order through `taps` and names the layers forward_inf can be planted in. Their own
/// modules, not the other families', so that a change to another family cannot change these
/// held-out runs.
#pragma once

#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zoo {

/// Sequence classification of side x side images: each image is `side` time steps of `side`
/// features (its rows, top to bottom), read by a 1-layer GRU or LSTM (batch first); a linear
/// head on the hidden state after the last row. Taps: the whole output sequence, then the
/// last hidden state.
struct seq_rnn_net : net {
  seq_rnn_net(std::int64_t side, std::int64_t hidden, bool lstm_cell, std::int64_t classes)
      : side_(side), lstm_(lstm_cell), r_(lstm_cell ? "lstm" : "gru") {
    using namespace torch::nn;
    if (lstm_) lstm = register_module("lstm", LSTM(LSTMOptions(side, hidden).batch_first(true)));
    else gru = register_module("gru", GRU(GRUOptions(side, hidden).batch_first(true)));
    head = register_module("head", Linear(hidden, classes));
    overflow_sites.emplace_back(r_, r_ + ".out");
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto rows = x.view({x.size(0), side_, side_});  // [N, T = rows, features = columns]
    auto seq = t.act(r_ + ".out", lstm_ ? std::get<0>(lstm(rows)) : std::get<0>(gru(rows)));  // [N, T, H]
    auto last = t.act(r_ + ".last", seq.select(1, side_ - 1));  // [N, H]
    return head(last);
  }
  std::int64_t side_;
  bool lstm_;
  std::string r_;
  torch::nn::GRU gru{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
};

/// Regression: in -> hidden... (ReLU or tanh) -> one output. With no hidden layer it is
/// linear regression, one Linear; its one activation, the output, is then tapped as
/// "head.out", so that forward_inf has a layer to be planted in.
struct regression_net : net {
  regression_net(std::int64_t in, const std::vector<std::int64_t>& hidden, bool tanh_act)
      : tanh_(tanh_act), act_(tanh_act ? ".tanh" : ".relu") {
    std::int64_t width = in;
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      std::string n = "fc";
      n += std::to_string(i + 1);
      layers_.push_back(register_module(n, torch::nn::Linear(width, hidden[i])));
      names_.push_back(n + act_);
      overflow_sites.emplace_back(n, n + act_);
      width = hidden[i];
    }
    head = register_module("head", torch::nn::Linear(width, 1));
    if (hidden.empty()) overflow_sites.emplace_back("head", "head.out");
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      auto z = layers_[i](h);
      h = t.act(names_[i], tanh_ ? torch::tanh(z) : torch::relu(z));
    }
    auto y = head(h);  // [N, 1]
    return layers_.empty() ? t.act("head.out", y) : y;
  }
  bool tanh_;
  std::string act_;
  std::vector<torch::nn::Linear> layers_;
  std::vector<std::string> names_;  ///< the activations' names: fc1.relu, ...
  torch::nn::Linear head{nullptr};
};

/// The activation of a depthwise-separable CNN: ReLU6 (MobileNet v1/v2) or SiLU.
inline torch::Tensor dwsep_activate(const torch::Tensor& z, bool silu) {
  return silu ? torch::silu(z) : torch::clamp(z, 0.0, 6.0);
}

/// A MobileNet v1 block: 3x3 depthwise conv (groups = channels, stride) -> BatchNorm -> act
/// -> 1x1 pointwise conv -> BatchNorm -> act. Without BatchNorm the convs have biases.
struct dwsep_block_impl : torch::nn::Module {
  dwsep_block_impl(std::int64_t in, std::int64_t out, std::int64_t stride, bool bn, bool silu)
      : bn_(bn), silu_(silu), act_(silu ? "silu" : "relu6") {
    using namespace torch::nn;
    dw = register_module("dw", Conv2d(Conv2dOptions(in, in, 3).stride(stride).padding(1).groups(in).bias(!bn)));
    pw = register_module("pw", Conv2d(Conv2dOptions(in, out, 1).bias(!bn)));
    if (bn_) {
      dw_bn = register_module("dw_bn", BatchNorm2d(in));
      pw_bn = register_module("pw_bn", BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    auto z = dw(x);
    if (bn_) z = dw_bn(z);
    auto h = t.act(name + ".dw." + act_, dwsep_activate(z, silu_));
    auto y = pw(h);
    if (bn_) y = pw_bn(y);
    return t.act(name + ".pw." + act_, dwsep_activate(y, silu_));
  }
  bool bn_, silu_;
  std::string act_;
  torch::nn::Conv2d dw{nullptr}, pw{nullptr};
  torch::nn::BatchNorm2d dw_bn{nullptr}, pw_bn{nullptr};
};
TORCH_MODULE_IMPL(dwsep_block, dwsep_block_impl);

/// A depthwise-separable CNN on side x side images: a 3x3 stride-2 stem conv (28 -> 14) with
/// BatchNorm (or a bias) and the activation, blocks given as {channels, stride}, global
/// average pooling and a linear head. Without BatchNorm every conv is He-initialized (normal,
/// fan-in, ReLU gain; biases 0), as a network without normalization needs: with LibTorch's
/// default (uniform, a = sqrt(5): each ReLU layer keeps ~1/6 of the variance, and there are 7)
/// the pooled features were near 0 and 8 of the 9 short runs of the variant stayed at ln 10,
/// loss 2.30 -> 2.21-2.31, Adam, AdamW, SGD and momentum alike (first --losses-only run).
struct dwsep_net : net {
  struct stage {
    std::int64_t channels, stride;
  };
  dwsep_net(std::int64_t side, std::int64_t stem_channels, const std::vector<stage>& stages, bool bn, bool silu,
            std::int64_t classes)
      : side_(side), bn_(bn), silu_(silu), act_(silu ? "silu" : "relu6") {
    using namespace torch::nn;
    stem = register_module("stem", Conv2d(Conv2dOptions(1, stem_channels, 3).stride(2).padding(1).bias(!bn)));
    if (bn_) stem_bn = register_module("stem_bn", BatchNorm2d(stem_channels));
    overflow_sites.emplace_back("stem", "stem." + act_);
    blocks = register_module("blocks", ModuleList());
    std::int64_t c = stem_channels;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      blocks->push_back(dwsep_block(c, stages[i].channels, stages[i].stride, bn, silu));
      std::string n = "blocks.";
      n += std::to_string(i);
      overflow_sites.emplace_back(n, n + ".pw." + act_);
      c = stages[i].channels;
    }
    head = register_module("head", Linear(c, classes));
    if (!bn_) {
      for (auto& m : modules(/*include_self=*/false)) {
        if (auto* conv = m->as<Conv2dImpl>()) {
          torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanIn, torch::kReLU);
          torch::nn::init::zeros_(conv->bias);
        }
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto z = stem(x.view({x.size(0), 1, side_, side_}));
    if (bn_) z = stem_bn(z);
    auto h = t.act("stem." + act_, dwsep_activate(z, silu_));
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      std::string n = "blocks.";
      n += std::to_string(i);
      h = blocks[i]->as<dwsep_block_impl>()->forward(h, n, t);
    }
    auto pooled = t.act("pool", h.mean({2, 3}));  // [N, C]
    return head(pooled);
  }
  std::int64_t side_;
  bool bn_, silu_;
  std::string act_;
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace zoo
