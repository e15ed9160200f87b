// SPDX-License-Identifier: Apache-2.0
/// The `segmentation`, `simsiam` and `forecaster` families (split heldout13) in LibTorch:
/// semantic segmentation by a small U-Net (Ronneberger et al. 2015), an encoder of two 3x3
/// convolutions a level (each followed by BatchNorm, as U-Nets are now written) and 2x2 max
/// pooling, a decoder of transposed convolutions (or bilinear
/// upsampling) whose every level reads the encoder's map of its size through a skip
/// connection, the cross-entropy of every pixel's class (the background or the class of the
/// object it belongs to) in scenes of UCI digits or Fashion-MNIST items; non-contrastive
/// self-supervised learning (SimSiam, Chen & He 2021; BYOL, Grill et al. 2020, in one variant):
/// two augmentations of each image, an encoder, a projector and a predictor, the negative cosine
/// similarity of each view's prediction with the other view's projection, behind a stop-gradient
/// (SimSiam) or from a target network that is an exponential moving average of the online one
/// (BYOL), a loss whose floor is -1, with a k-nearest-neighbour accuracy on held-out images as
/// its user's progress measure; and time-series forecasting of real series (yearly sunspot
/// numbers, the monthly El Niño 1+2 sea surface temperature, the weekly changes of Mauna Loa's
/// CO2, as python3-statsmodels ships them) by a causal dilated temporal convolution network (Bai
/// et al. 2018), a gated WaveNet-style stack (van den Oord et al. 2016) or an LSTM, the MSE of
/// the next values of the standardized series. They probe kinds of training the zoo had not
/// had: a cross-entropy over every pixel, dominated by the background class; a loss that falls
/// below 0 toward a floor of -1 and that a collapsed network would also reach, so that its user
/// reads a second measure; and a regression onto the same series the inputs are cut from,
/// validated on a later stretch of it. Like the other families, each taps its activations in
/// forward order through `taps` and names the layers forward_inf can be planted in. Their own
/// modules, so that a change to another family cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>  // std::tie of a table's windows
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// segmentation: a U-Net over scenes of digits or Fashion-MNIST items

/// Fashion-MNIST's items at 14 x 14 (2 x 2 average pooling), in [0, 1]: the first `n_train`
/// training images and the first 512 validation images; labels kept.
inline table fashion_items14(const table& f, std::int64_t n_train) {
  const auto pool = [](const torch::Tensor& x) {
    return torch::avg_pool2d(x.view({x.size(0), 1, 28, 28}), 2).flatten(1);
  };
  return shrunk(f, n_train, 14, pool, "at 14 x 14");
}

/// Scenes of a table's items (side x side images in [0, 1]) on a `height` x `width` canvas, from
/// the run's own generator: a grid of side x side slots, each holding an item with probability
/// 3/4; each pixel labelled 0 (background) or 1 + the class of the item it belongs to (its value
/// above `threshold`). x [B, height x width], labels [B, height, width] (int64). Validation: 256
/// scenes of the validation items drawn once with a fixed seed.
struct seg_scenes {
  const table* tab;
  std::int64_t side, height, width;
  double threshold;
  torch::Generator gen;
  std::pair<torch::Tensor, torch::Tensor> val;
  seg_scenes(const table* t, std::int64_t canvas_height, std::int64_t canvas_width,
             double foreground, std::uint64_t seed)
      : tab(t),
        side(t->side),
        height(canvas_height),
        width(canvas_width),
        threshold(foreground),
        gen(at::detail::createCPUGenerator(seed)) {
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    val = make(tab->x_val, tab->y_val, 256, vg);
  }
  std::pair<torch::Tensor, torch::Tensor> make(const torch::Tensor& x, const torch::Tensor& y,
                                               std::int64_t b, torch::Generator& g) const {
    const auto rows = height / side, cols = width / side, k = rows * cols;
    const auto idx = torch::randint(0, x.size(0), {b * k}, g, torch::kLong);
    const auto filled = torch::rand({b, k}, g) < 0.75;  // [B, k]
    const auto items = x.index_select(0, idx).view({b, k, side, side}) *
                       filled.unsqueeze(2).unsqueeze(3).to(torch::kFloat);
    const auto cls = (y.index_select(0, idx).view({b, k}) + 1) * filled.to(torch::kLong);
    const auto labels =
        torch::where(items > threshold, cls.unsqueeze(2).unsqueeze(3).expand_as(items),
                     torch::zeros({1}, torch::kLong));
    // [B, rows, cols, side, side] -> [B, rows, side, cols, side] -> [B, height, width]
    const auto place = [&](const torch::Tensor& t) {
      return t.view({b, rows, cols, side, side})
          .permute({0, 1, 3, 2, 4})
          .reshape({b, height, width});
    };
    return {place(items).reshape({b, height * width}).contiguous(), place(labels).contiguous()};
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    return make(tab->x_train, tab->y_train, b, gen);
  }
};

/// One level of a U-Net: two 3x3 convolutions (padding 1), each followed by BatchNorm where
/// `bn` and a ReLU; the second ReLU's output tapped as `<name>.relu`.
struct unet_stage : torch::nn::Module {
  unet_stage(std::int64_t in, std::int64_t out, bool bn) {
    using namespace torch::nn;
    conv1 = register_module("conv1", Conv2d(Conv2dOptions(in, out, 3).padding(1)));
    conv2 = register_module("conv2", Conv2d(Conv2dOptions(out, out, 3).padding(1)));
    if (bn) {
      bn1 = register_module("bn1", BatchNorm2d(out));
      bn2 = register_module("bn2", BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    auto h = conv1(x);
    if (bn1) h = bn1(h);
    h = conv2(torch::relu(h));
    if (bn2) h = bn2(h);
    return t.act(name + ".relu", torch::relu(h));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};

/// A U-Net of `levels` levels over height x width images (both divisible by 2^(levels - 1)):
/// `enc0` .. `enc<L-2>` (base x 2^l channels) each followed by 2x2 max pooling, `bottleneck`
/// (base x 2^(L-1)), then per level from the deepest up `up<l>` (a 2x2 transposed convolution of
/// stride 2 halving the channels; or, where `bilinear`, bilinear upsampling, no parameters) and
/// `dec<l>`, a stage over the upsampled map concatenated with enc<l>'s output (the skip); `head`,
/// a 1x1 convolution to `classes` logits per pixel. x [B, height x width] -> logits [B, height,
/// width, classes] (channels last: each pixel's logits a row, as the loss reads them). The stages'
/// convolutions He-initialized, biases 0 (the U-Net paper's Gaussian of standard deviation
/// sqrt(2 / fan-in)).
struct unet_net : net {
  unet_net(std::int64_t h, std::int64_t w, std::int64_t levels, std::int64_t base,
           std::int64_t classes, bool bn, bool bilinear_up)
      : height(h), width(w), bilinear(bilinear_up) {
    using namespace torch::nn;
    std::int64_t in = 1;
    for (std::int64_t l = 0; l + 1 < levels; ++l) {
      const std::string n = "enc" + std::to_string(l);
      enc.push_back(register_module(n, std::make_shared<unet_stage>(in, base << l, bn)));
      overflow_sites.emplace_back(n, n + ".relu");
      in = base << l;
    }
    bottleneck =
        register_module("bottleneck", std::make_shared<unet_stage>(in, base << (levels - 1), bn));
    overflow_sites.emplace_back("bottleneck", "bottleneck.relu");
    for (std::int64_t l = levels - 2; l >= 0; --l) {
      const auto c = base << l;
      const std::string n = "dec" + std::to_string(l);
      if (!bilinear)
        up.push_back(
            register_module("up" + std::to_string(l),
                            ConvTranspose2d(ConvTranspose2dOptions(2 * c, c, 2).stride(2))));
      dec.push_back(
          register_module(n, std::make_shared<unet_stage>(bilinear ? 3 * c : 2 * c, c, bn)));
      overflow_sites.emplace_back(n, n + ".relu");
    }
    head = register_module("head", Conv2d(Conv2dOptions(base, classes, 1)));
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const auto& k = p.key();
      const bool stage_conv = k.find(".conv") != std::string::npos;
      if (!stage_conv) continue;
      if (p.value().dim() > 1)
        torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanIn, torch::kReLU);
      else
        p.value().zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x.view({x.size(0), 1, height, width});
    std::vector<torch::Tensor> skips;
    for (std::size_t l = 0; l < enc.size(); ++l) {
      h = enc[l]->forward(h, "enc" + std::to_string(l), t);
      skips.push_back(h);
      h = torch::max_pool2d(h, 2);
    }
    h = bottleneck->forward(h, "bottleneck", t);
    for (std::size_t i = 0; i < dec.size(); ++i) {
      const auto l = enc.size() - 1 - i;
      const auto& skip = skips[l];
      h = bilinear ? torch::nn::functional::interpolate(
                         h, torch::nn::functional::InterpolateFuncOptions()
                                .size(std::vector<std::int64_t>{skip.size(2), skip.size(3)})
                                .mode(torch::kBilinear)
                                .align_corners(false))
                   : up[i](h);
      h = dec[i]->forward(torch::cat({h, skip}, 1), "dec" + std::to_string(l), t);
    }
    return head(h).permute({0, 2, 3, 1});
  }
  std::int64_t height, width;
  bool bilinear;
  std::vector<std::shared_ptr<unet_stage>> enc, dec;
  std::shared_ptr<unet_stage> bottleneck;
  std::vector<torch::nn::ConvTranspose2d> up;
  torch::nn::Conv2d head{nullptr};
};

/// The cross-entropy of every pixel's logits [B, H, W, K] against its label [B, H, W] (int64),
/// the mean over the pixels (torch.nn.CrossEntropyLoss on a segmentation map).
inline torch::Tensor pixel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              labels.reshape({-1}));
}

// ---------------------------------------------------------------------------------------------
// simsiam: non-contrastive self-supervised learning

/// Two augmented views of a batch of side x side images [N, side^2] -> [2N, side^2] (the first
/// view of every image, then the second), each as SimSiam's augmentations reduced to one
/// channel: a random resized crop (area 0.4-1 of the image, aspect ratio 3/4-4/3, resized back
/// to side x side by bilinear sampling), a horizontal flip half the time, and a random contrast
/// (x 0.6-1.4) and brightness (+-0.1), from `g`.
inline torch::Tensor simsiam_views(const torch::Tensor& x, std::int64_t side, torch::Generator& g) {
  namespace F = torch::nn::functional;
  const auto n = x.size(0);
  const auto view = [&] {
    const auto area = 0.4 + 0.6 * torch::rand({n}, g);
    const auto ratio =
        torch::exp(std::log(0.75) + (std::log(4.0 / 3.0) - std::log(0.75)) * torch::rand({n}, g));
    const auto sx = (torch::sqrt(area * ratio)).clamp_max(1.0),
               sy = (torch::sqrt(area / ratio)).clamp_max(1.0);
    const auto tx = (1.0 - sx) * (2.0 * torch::rand({n}, g) - 1.0),
               ty = (1.0 - sy) * (2.0 * torch::rand({n}, g) - 1.0);
    const auto flip = torch::where(torch::rand({n}, g) < 0.5, -torch::ones({n}), torch::ones({n}));
    const auto zero = torch::zeros({n});
    // theta [N, 2, 3]: input coordinates = theta x (output coordinates, 1).
    const auto theta =
        torch::stack({torch::stack({sx * flip, zero, tx}, 1), torch::stack({zero, sy, ty}, 1)}, 1);
    const auto grid = F::affine_grid(theta, {n, 1, side, side}, /*align_corners=*/false);
    auto v = F::grid_sample(x.view({n, 1, side, side}), grid,
                            F::GridSampleFuncOptions()
                                .mode(torch::kBilinear)
                                .padding_mode(torch::kZeros)
                                .align_corners(false));
    const auto contrast = 0.6 + 0.8 * torch::rand({n, 1, 1, 1}, g),
               brightness = 0.2 * torch::rand({n, 1, 1, 1}, g) - 0.1;
    return (v * contrast + brightness).reshape({n, side * side});
  };
  auto first = view();
  auto second = view();
  return torch::cat({first, second}, 0);
}

/// An encoder: 3x3 convolutions of stride 2 (`conv1`, ...; BatchNorm `bn1`, ... after each where
/// `bn`), ReLU each, the last map flattened (4 x 4 x the last width for 28 x 28 images), as small
/// encoders of 28 x 28 images end. The convolutions He-initialized, biases 0.
struct siamese_encoder : torch::nn::Module {
  siamese_encoder(const std::vector<std::int64_t>& channels, bool bn) {
    using namespace torch::nn;
    std::int64_t in = 1;
    for (std::size_t i = 0; i < channels.size(); ++i) {
      const auto n = std::to_string(i + 1);
      convs.push_back(register_module(
          "conv" + n, Conv2d(Conv2dOptions(in, channels[i], 3).stride(2).padding(1))));
      if (bn) bns.push_back(register_module("bn" + n, BatchNorm2d(channels[i])));
      in = channels[i];
    }
    torch::NoGradGuard no_grad;
    for (auto& c : convs) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanIn, torch::kReLU);
      c->bias.zero_();
    }
  }
  /// x [M, side^2] -> the features [M, 16 x channels.back()]; taps `encoder.conv<i>.relu` where
  /// `t` is given.
  torch::Tensor forward(const torch::Tensor& x, std::int64_t side, taps* t) {
    auto h = x.view({x.size(0), 1, side, side});
    for (std::size_t i = 0; i < convs.size(); ++i) {
      h = convs[i](h);
      if (!bns.empty()) h = bns[i](h);
      h = torch::relu(h);
      if (t) h = t->act("encoder.conv" + std::to_string(i + 1) + ".relu", h);
    }
    return h.flatten(1);
  }
  /// The features' width for side x side images.
  static std::int64_t width(const std::vector<std::int64_t>& channels, std::int64_t side) {
    auto s = side;
    for (std::size_t i = 0; i < channels.size(); ++i)
      s = (s + 1) / 2;
    return channels.back() * s * s;
  }
  std::vector<torch::nn::Conv2d> convs;
  std::vector<torch::nn::BatchNorm2d> bns;
};

/// A two-layer MLP head: `fc1` -> BatchNorm `bn1` -> ReLU -> `fc2`, then, for the projector,
/// BatchNorm `bn2` without affine parameters (SimSiam's projector ends so; its predictor, a
/// bottleneck of a quarter of the width, does not). The hidden ReLU tapped as `<name>.fc1.relu`.
struct siamese_mlp : torch::nn::Module {
  siamese_mlp(std::int64_t in, std::int64_t hidden, std::int64_t out, bool last_bn) {
    using namespace torch::nn;
    fc1 = register_module("fc1", Linear(in, hidden));
    bn1 = register_module("bn1", BatchNorm1d(hidden));
    fc2 = register_module("fc2", Linear(hidden, out));
    if (last_bn) bn2 = register_module("bn2", BatchNorm1d(BatchNorm1dOptions(out).affine(false)));
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps* t) {
    auto h = torch::relu(bn1(fc1(x)));
    if (t) h = t->act(name + ".fc1.relu", h);
    h = fc2(h);
    return bn2 ? bn2(h) : h;
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn1{nullptr}, bn2{nullptr};
};

/// SimSiam (or, where `ema` > 0, BYOL): an online `encoder` (siamese_encoder), `projector` (to
/// `dim`, hidden `dim`) and `predictor` (dim -> dim / 4 -> dim: SimSiam's bottleneck); BYOL's
/// `target_encoder` and `target_projector`, copies of the online ones updated after each
/// optimizer step as an exponential moving average (update_target), no gradient. x [2N, side^2],
/// two views of N images (simsiam_views) -> the predictions p [2N, dim]; the targets the loss
/// compares them with, the projections z stopped from the gradient (SimSiam) or the target
/// network's (BYOL), are left in `targets`. Taps in forward order: the encoder's convolutions,
/// the projector's and the predictor's hidden layers.
struct simsiam_net : net {
  simsiam_net(std::int64_t image_side, const std::vector<std::int64_t>& channels, bool bn,
              std::int64_t dim, double ema)
      : side(image_side), momentum(ema) {
    encoder = register_module("encoder", std::make_shared<siamese_encoder>(channels, bn));
    const auto features_width = siamese_encoder::width(channels, side);
    projector =
        register_module("projector", std::make_shared<siamese_mlp>(features_width, dim, dim, true));
    predictor =
        register_module("predictor", std::make_shared<siamese_mlp>(dim, dim / 4, dim, false));
    if (momentum > 0.0) {
      target_encoder =
          register_module("target_encoder", std::make_shared<siamese_encoder>(channels, bn));
      target_projector = register_module(
          "target_projector", std::make_shared<siamese_mlp>(features_width, dim, dim, true));
      torch::NoGradGuard no_grad;
      for (auto& [from, to] : target_pairs(false))
        to.copy_(from);
      for (auto& [from, to] : target_pairs(true))
        to.copy_(from);
      for (auto* m : {static_cast<torch::nn::Module*>(target_encoder.get()),
                      static_cast<torch::nn::Module*>(target_projector.get())})
        for (auto& p : m->parameters())
          p.requires_grad_(false);
    }
    for (std::size_t i = 0; i < channels.size(); ++i) {
      const auto n = "encoder.conv" + std::to_string(i + 1);
      overflow_sites.emplace_back(n, n + ".relu");
    }
    overflow_sites.emplace_back("projector.fc1", "projector.fc1.relu");
    overflow_sites.emplace_back("predictor.fc1", "predictor.fc1.relu");
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto z = projector->forward(encoder->forward(x, side, &t), "projector", &t);
    const auto p = predictor->forward(z, "predictor", &t);
    if (target_encoder) {
      torch::NoGradGuard no_grad;
      targets = target_projector->forward(target_encoder->forward(x, side, nullptr),
                                          "target_projector", nullptr);
    } else {
      targets = z.detach();
    }
    return p;
  }
  /// (online, target) pairs of the parameters (`buffers` false) or of the buffers (BatchNorm's
  /// running statistics), the encoder's then the projector's, in registration order.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> target_pairs(bool buffers) {
    std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
    const auto add = [&](torch::nn::Module& from, torch::nn::Module& to) {
      const auto f = buffers ? from.buffers() : from.parameters(),
                 t = buffers ? to.buffers() : to.parameters();
      for (std::size_t i = 0; i < f.size(); ++i)
        out.emplace_back(f[i], t[i]);
    };
    add(*encoder, *target_encoder);
    add(*projector, *target_projector);
    return out;
  }
  /// BYOL's target update, after each optimizer step: each target parameter m x itself + (1 - m)
  /// x its online twin; BatchNorm's running statistics copied.
  void update_target() {
    if (!target_encoder) return;
    torch::NoGradGuard no_grad;
    for (auto& [from, to] : target_pairs(false))
      to.mul_(momentum).add_(from, 1.0 - momentum);
    for (auto& [from, to] : target_pairs(true))
      to.copy_(from);
  }
  /// The online encoder's features of x [M, side^2], in evaluation mode (the kNN monitor's), no
  /// gradient.
  torch::Tensor features(const torch::Tensor& x) {
    torch::NoGradGuard no_grad;
    const bool was_training = is_training();
    eval();
    auto f = encoder->forward(x, side, nullptr);
    train(was_training);
    return f;
  }
  std::int64_t side;
  double momentum;
  std::shared_ptr<siamese_encoder> encoder, target_encoder;
  std::shared_ptr<siamese_mlp> projector, predictor, target_projector;
  torch::Tensor targets;  ///< [2N, dim]: the last forward's, no gradient
};

/// SimSiam's symmetric loss: -(cos(p1, z2) + cos(p2, z1)) / 2, the mean over the N images, the
/// predictions p [2N, dim] (view 1's rows, then view 2's) against the other view's targets z
/// [2N, dim] (no gradient). Its floor is -1: every prediction aligned with its target.
inline torch::Tensor simsiam_loss(const torch::Tensor& p, const torch::Tensor& z) {
  namespace F = torch::nn::functional;
  const auto n = p.size(0) / 2;
  const auto cos = [](const torch::Tensor& a, const torch::Tensor& b) {
    return F::cosine_similarity(a, b, F::CosineSimilarityFuncOptions().dim(1)).mean();
  };
  return -0.5 * (cos(p.slice(0, 0, n), z.slice(0, n)) + cos(p.slice(0, n), z.slice(0, 0, n)));
}

/// The k-nearest-neighbour monitor of self-supervised training (Wu et al. 2018, as SimSiam's
/// and BYOL's reproductions print it): a fixed bank of training images with their labels and a
/// fixed set of held-out queries, both encoded by the current encoder (evaluation mode); each
/// query's class is the vote of its k most cosine-similar bank images, weighted by exp(similarity
/// / 0.1). Returns the queries' accuracy.
struct knn_monitor {
  torch::Tensor bank_x, bank_y, query_x, query_y;
  std::int64_t k = 10, classes = 10;
  knn_monitor(const table& t, std::int64_t bank, std::int64_t queries)
      : bank_x(t.x_train.slice(0, 0, bank)),
        bank_y(t.y_train.slice(0, 0, bank)),
        query_x(t.x_val.slice(0, 0, queries)),
        query_y(t.y_val.slice(0, 0, queries)) {}
  double operator()(simsiam_net& m, double input_scale) const {
    namespace F = torch::nn::functional;
    torch::NoGradGuard no_grad;
    const auto norm = F::NormalizeFuncOptions().dim(1);
    // One forward of the bank and the queries: in evaluation mode, BatchNorm reads its running
    // statistics, so batching them together changes no feature.
    const auto f = F::normalize(m.features(torch::cat({bank_x, query_x}) * input_scale), norm);
    const auto b = f.slice(0, 0, bank_x.size(0)), q = f.slice(0, bank_x.size(0));
    const auto [sim, at] = q.mm(b.t()).topk(k, 1);  // [Q, k]
    const auto votes = torch::zeros({q.size(0), classes})
                           .scatter_add_(1, bank_y.index({at}), torch::exp(sim / 0.1));
    return votes.argmax(1).eq(query_y).to(torch::kDouble).mean().item<double>();
  }
};

// ---------------------------------------------------------------------------------------------
// forecaster: the next values of a real series

/// A series of python3-statsmodels' data sets as scripts/fetch-digits.sh copies them into
/// third_party/data/ (all in the public domain): `sunspots` (sunspots.csv: the yearly sunspot
/// number, 1700-2008, 309 values), `elnino` (elnino.csv: the monthly sea surface temperature of
/// the Niño 1+2 region in degrees C, 1950-2010, a year a row, 732 values), `co2` (co2.csv: Mauna
/// Loa's weekly CO2 in ppm, March 1958 - December 2001, 2284 weeks, the 59 without a value filled
/// linearly between their neighbours). Throws with a message where the file is missing.
struct series {
  std::vector<double> values;
  std::string source;
};

inline series load_series(const std::string& dir, const std::string& name) {
  const std::string path = dir + name + ".csv";
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("mldiag: cannot read " + path +
                             " (scripts/fetch-digits.sh fetches it)");
  std::string line;
  std::getline(in, line);  // the header
  std::vector<double> v;
  std::vector<bool> known;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields(1);
    for (const char ch : line) {
      if (ch == ',')
        fields.emplace_back();
      else
        fields.back() += ch;
    }
    // The first field is the year or the date; the values follow (12 a row in elnino.csv).
    for (std::size_t i = 1; i < fields.size(); ++i) {
      if (fields[i].empty()) {
        v.push_back(0.0);
        known.push_back(false);
        continue;
      }
      try {
        v.push_back(std::stod(fields[i]));
      } catch (const std::exception&) {
        throw std::runtime_error("mldiag: " + path + ": '" + fields[i] +
                                 "' is not a number; fetch it again (scripts/fetch-digits.sh)");
      }
      known.push_back(true);
    }
  }
  // A missing value: linear between the nearest known ones (the first and last are known in
  // co2.csv).
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (known[i]) continue;
    std::size_t a = i, b = i;
    while (a > 0 && !known[a])
      --a;
    while (b + 1 < v.size() && !known[b])
      ++b;
    if (!known[a] || !known[b])
      throw std::runtime_error("mldiag: " + path + " starts or ends without a value");
    v[i] = v[a] + (v[b] - v[a]) * static_cast<double>(i - a) / static_cast<double>(b - a);
  }
  if (v.size() < 100)
    throw std::runtime_error("mldiag: " + path + " has " + std::to_string(v.size()) + " values");
  return {v, path + " (" + std::to_string(v.size()) + " values)"};
}

/// A forecasting table: windows of `window` consecutive values as inputs [n, window] and the
/// next `horizon` values as targets [n, horizon]. The first 80% of the series is training, every
/// window of it whose targets lie in it; validation, every window whose targets lie in the rest
/// (its inputs may reach back into the training part: the model forecasts the future from the
/// recent past). `z`: the series standardized with the training part's mean and standard
/// deviation (the healthy recipe); `raw`: as the file has it, inputs and targets alike
/// (inputs_not_normalized). `difference`: the series' changes from one value to the next in
/// place of its values (a trending series' usual remedy: co2). `classes` 0, `side` 0.
struct forecast_tables {
  table z, raw;
};

inline forecast_tables forecast_windows(const series& s, std::int64_t window, std::int64_t horizon,
                                        bool difference) {
  std::vector<double> v = s.values;
  if (difference) {
    for (std::size_t i = 0; i + 1 < v.size(); ++i)
      v[i] = v[i + 1] - v[i];
    v.pop_back();
  }
  const auto n = static_cast<std::int64_t>(v.size()), cut = n * 8 / 10;
  double mean = 0.0, sq = 0.0;
  for (std::int64_t i = 0; i < cut; ++i)
    mean += v[static_cast<std::size_t>(i)];
  mean /= static_cast<double>(cut);
  for (std::int64_t i = 0; i < cut; ++i)
    sq += std::pow(v[static_cast<std::size_t>(i)] - mean, 2);
  const double sd = std::sqrt(sq / static_cast<double>(cut));
  const auto all = torch::tensor(v, torch::kDouble).to(torch::kFloat);
  const auto windows = [&](std::int64_t first_target, std::int64_t last_target_end,
                           const torch::Tensor& x) {
    // Targets x[t .. t + horizon) with first_target <= t and t + horizon <= last_target_end.
    const auto t =
        torch::arange(std::max(first_target, window), last_target_end - horizon + 1, torch::kLong);
    const auto in =
        x.index({(t.unsqueeze(1) - window + torch::arange(window, torch::kLong).unsqueeze(0))
                     .reshape({-1})})
            .view({t.size(0), window});
    const auto out =
        x.index(
             {(t.unsqueeze(1) + torch::arange(horizon, torch::kLong).unsqueeze(0)).reshape({-1})})
            .view({t.size(0), horizon});
    return std::make_pair(in, out);
  };
  const auto fill = [&](table& tb, const torch::Tensor& x, const std::string& how) {
    std::tie(tb.x_train, tb.y_train) = windows(0, cut, x);
    std::tie(tb.x_val, tb.y_val) = windows(cut, n, x);
    tb.classes = 0;
    tb.side = 0;
    tb.source = s.source + (difference ? ", its changes" : "") + how + ": " +
                std::to_string(tb.x_train.size(0)) + " training and " +
                std::to_string(tb.x_val.size(0)) + " validation windows of " +
                std::to_string(window) + " -> " + std::to_string(horizon);
  };
  forecast_tables f;
  fill(f.z, (all - mean) / sd, ", standardized");
  fill(f.raw, all, ", raw");
  return f;
}

/// The forecasters: x [N, window] -> the next `horizon` values [N, horizon], read from the last
/// time step's features by a Linear `head`.
///  - tcn (Bai et al. 2018): residual blocks `blocks.<i>` of two causal convolutions of kernel k
///    and dilation 2^i (left-padded, so that no output reads a later input), ReLU each, the
///    block's input added back (through a 1x1 convolution `down` where the widths differ) and a
///    ReLU; taps `blocks.<i>.relu`.
///  - wavenet (van den Oord et al. 2016): a causal input convolution `input` (kernel 2) to
///    `channels`, layers `layers.<i>` of a causal convolution of kernel 2 and dilation 2^i to
///    twice the channels, the gate tanh(a) x sigmoid(b), a 1x1 `res` added back and a 1x1 `skip`
///    summed over the layers; ReLU, a 1x1 `post`, ReLU. Taps `layers.<i>.gate`, `post.relu`.
///  - lstm: one LSTM layer `lstm` over the values; tap `lstm.out`.
enum class forecaster_kind { tcn, wavenet, lstm };

struct tcn_block : torch::nn::Module {
  tcn_block(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t dilation_)
      : pad((kernel - 1) * dilation_) {
    using namespace torch::nn;
    conv1 = register_module("conv1", Conv1d(Conv1dOptions(in, out, kernel).dilation(dilation_)));
    conv2 = register_module("conv2", Conv1d(Conv1dOptions(out, out, kernel).dilation(dilation_)));
    if (in != out) down = register_module("down", Conv1d(Conv1dOptions(in, out, 1)));
  }
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    namespace F = torch::nn::functional;
    const auto causal = F::PadFuncOptions({pad, 0});
    auto h = torch::relu(conv1(F::pad(x, causal)));
    h = torch::relu(conv2(F::pad(h, causal)));
    return t.act(name + ".relu", torch::relu(h + (down ? down(x) : x)));
  }
  std::int64_t pad;
  torch::nn::Conv1d conv1{nullptr}, conv2{nullptr}, down{nullptr};
};

struct wavenet_layer : torch::nn::Module {
  wavenet_layer(std::int64_t c, std::int64_t dilation_) : dilation(dilation_) {
    using namespace torch::nn;
    conv = register_module("conv", Conv1d(Conv1dOptions(c, 2 * c, 2).dilation(dilation)));
    res = register_module("res", Conv1d(Conv1dOptions(c, c, 1)));
    skip = register_module("skip", Conv1d(Conv1dOptions(c, c, 1)));
  }
  std::int64_t dilation;
  torch::nn::Conv1d conv{nullptr}, res{nullptr}, skip{nullptr};
};

struct forecaster_net : net {
  forecaster_net(forecaster_kind k, std::int64_t channels, std::int64_t depth, std::int64_t kernel,
                 std::int64_t horizon)
      : kind(k) {
    using namespace torch::nn;
    switch (kind) {
      case forecaster_kind::tcn: {
        blocks = register_module("blocks", ModuleList());
        for (std::int64_t i = 0; i < depth; ++i) {
          blocks->push_back(std::make_shared<tcn_block>(i == 0 ? 1 : channels, channels, kernel,
                                                        std::int64_t{1} << i));
          const std::string n = "blocks." + std::to_string(i);
          overflow_sites.emplace_back(n, n + ".relu");
        }
        break;
      }
      case forecaster_kind::wavenet: {
        input = register_module("input", Conv1d(Conv1dOptions(1, channels, 2)));
        layers = register_module("layers", ModuleList());
        for (std::int64_t i = 0; i < depth; ++i) {
          layers->push_back(std::make_shared<wavenet_layer>(channels, std::int64_t{1} << i));
          const std::string n = "layers." + std::to_string(i);
          overflow_sites.emplace_back(n, n + ".gate");
        }
        post = register_module("post", Conv1d(Conv1dOptions(channels, channels, 1)));
        overflow_sites.emplace_back("post", "post.relu");
        break;
      }
      case forecaster_kind::lstm:
        lstm = register_module("lstm", LSTM(LSTMOptions(1, channels).batch_first(true)));
        overflow_sites.emplace_back("lstm", "lstm.out");
        break;
    }
    head = register_module("head", Linear(channels, horizon));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    namespace F = torch::nn::functional;
    const auto N = x.size(0), T = x.size(1);
    torch::Tensor last;  // [N, channels]: the last time step's features
    switch (kind) {
      case forecaster_kind::tcn: {
        auto h = x.view({N, 1, T});
        for (std::size_t i = 0; i < blocks->size(); ++i)
          h = blocks[i]->as<tcn_block>()->forward(h, "blocks." + std::to_string(i), t);
        last = h.select(2, T - 1);
        break;
      }
      case forecaster_kind::wavenet: {
        auto h = input(F::pad(x.view({N, 1, T}), F::PadFuncOptions({1, 0})));
        torch::Tensor skips;
        for (std::size_t i = 0; i < layers->size(); ++i) {
          auto* l = layers[i]->as<wavenet_layer>();
          const auto ab = l->conv(F::pad(h, F::PadFuncOptions({l->dilation, 0}))).chunk(2, 1);
          const auto g = t.act("layers." + std::to_string(i) + ".gate",
                               torch::tanh(ab[0]) * torch::sigmoid(ab[1]));
          h = h + l->res(g);
          skips = skips.defined() ? skips + l->skip(g) : l->skip(g);
        }
        last = t.act("post.relu", torch::relu(post(torch::relu(skips)))).select(2, T - 1);
        break;
      }
      case forecaster_kind::lstm:
        last = t.act("lstm.out", std::get<0>(lstm(x.view({N, T, 1})))).select(1, T - 1);
        break;
    }
    return head(last);
  }
  forecaster_kind kind;
  torch::nn::ModuleList blocks{nullptr}, layers{nullptr};
  torch::nn::Conv1d input{nullptr}, post{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace zoo
