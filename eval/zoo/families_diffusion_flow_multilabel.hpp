// SPDX-License-Identifier: Apache-2.0
/// The `diffusion`, `normalizing_flow` and `multilabel` families (split heldout11) in
/// LibTorch: a DDPM-style denoiser trained to predict the noise added at a random timestep of a
/// linear or cosine schedule (Ho et al. 2020; Nichol & Dhariwal 2021), on a 2-D Swiss roll drawn
/// from the run's own generator and on Fashion-MNIST downsampled to 14 x 14, whose loss is noisy
/// by nature (a random timestep per example) and plateaus early above 0; a RealNVP-style flow of
/// affine coupling layers (Dinh et al. 2017) trained by maximum likelihood on 2-D toy densities
/// and on the UCI breast cancer table, whose negative log-likelihood has no lower bound and goes
/// below 0 as the density sharpens; and a multi-label classifier, BCE with logits over K
/// independent binary attributes derived from the digits' and Fashion-MNIST's classes and pixel
/// statistics, some of them rare, with `pos_weight` in one variant. They probe kinds of training
/// the zoo had not had: a regression onto fresh noise (the target is drawn by the loop, not read
/// from the data), a density model's likelihood, and a loss that is neither a cross-entropy over
/// classes nor a reconstruction. Like the other families, each taps its activations in forward
/// order through `taps` and names the layers forward_inf can be planted in. Their own modules,
/// so that a change to another family cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zoo {

inline constexpr double pi = 3.141592653589793;

// ---------------------------------------------------------------------------------------------
// 2-D toy data, drawn from the run's own generator

/// The 2-D densities: sklearn's make_moons and make_swiss_roll (its x and z, the roll seen from
/// above), and a ring of radius 1; each with Gaussian noise.
enum class toy_kind { moons, swiss_roll, ring };

/// `n` points of `kind`, [n, 2], as drawn (not standardized).
inline torch::Tensor toy_points(toy_kind kind, std::int64_t n, torch::Generator& gen) {
  const auto u = torch::rand({n}, gen);
  torch::Tensor x, y;
  double noise = 0.05;
  switch (kind) {
    case toy_kind::moons: {
      // Half the points on the upper moon, half on the lower, shifted (make_moons).
      const auto upper = torch::rand({n}, gen) < 0.5;
      const auto a = u * pi;
      x = torch::where(upper, torch::cos(a), 1.0 - torch::cos(a));
      y = torch::where(upper, torch::sin(a), 0.5 - torch::sin(a));
      noise = 0.1;
      break;
    }
    case toy_kind::swiss_roll: {
      const auto t = 1.5 * pi * (1.0 + 2.0 * u);
      x = t * torch::cos(t);
      y = t * torch::sin(t);
      noise = 0.5;
      break;
    }
    case toy_kind::ring: {
      const auto a = 2.0 * pi * u;
      x = torch::cos(a);
      y = torch::sin(a);
      break;
    }
  }
  return torch::stack({x, y}, 1) + noise * torch::randn({n, 2}, gen);
}

/// An endless stream of a toy density, standardized as its user standardizes data: by the mean
/// and standard deviation of a reference sample of 10000 points (a fixed seed, the same for
/// every run); each batch drawn fresh from the run's own generator. Validation: 1024 fixed points.
struct toy_stream {
  toy_kind kind;
  torch::Generator gen;
  torch::Tensor mean, sd, val;
  toy_stream(toy_kind k, std::uint64_t seed) : kind(k), gen(at::detail::createCPUGenerator(seed)) {
    torch::Generator ref = at::detail::createCPUGenerator(20261207);
    const auto r = toy_points(kind, 10000, ref);
    mean = r.mean(0, /*keepdim=*/true);
    sd = r.std(0, /*unbiased=*/false, /*keepdim=*/true);
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    val = (toy_points(kind, 1024, vg) - mean) / sd;
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    return {(toy_points(kind, b, gen) - mean) / sd, torch::zeros({b}, torch::kLong)};
  }
};

/// Fashion-MNIST downsampled to 14 x 14 (2 x 2 average pooling) and scaled to [-1, 1], as DDPM
/// scales images: the first `n_train` training images and the first 512 validation images;
/// labels kept. [n, 196].
inline table fashion14(const table& f, std::int64_t n_train) {
  const auto pool = [](const torch::Tensor& x) {
    return torch::avg_pool2d(x.view({x.size(0), 1, 28, 28}), 2).flatten(1) * 2.0 - 1.0;
  };
  return shrunk(f, n_train, 14, pool, "at 14 x 14 in [-1, 1]");
}

// ---------------------------------------------------------------------------------------------
// diffusion: a DDPM noise-prediction denoiser

/// The forward process's coefficients, t = 1..T stored at 0..T-1: sqrt(alpha-bar_t) and
/// sqrt(1 - alpha-bar_t). `cosine`: Nichol & Dhariwal's schedule (s = 0.008, betas clipped at
/// 0.999); else DDPM's linear betas, 1e-4 to 0.02 at T = 1000, rescaled by 1000 / T (improved
/// DDPM's rescaling for fewer steps: 1e-3 to 0.2 at T = 100), so that alpha-bar_T is near 0.
struct noise_schedule {
  std::int64_t steps = 100;
  torch::Tensor sqrt_ab, sqrt_one_minus_ab;  // [T]
  noise_schedule(std::int64_t T, bool cosine) : steps(T) {
    torch::Tensor ab;
    if (cosine) {
      const double s = 0.008;
      auto f = [&](const torch::Tensor& t) {
        return torch::cos((t / static_cast<double>(T) + s) / (1.0 + s) * pi / 2.0).pow(2);
      };
      const auto t = torch::arange(0, T + 1, torch::kDouble);
      const auto abar = f(t) / f(torch::zeros({1}, torch::kDouble));
      const auto betas = (1.0 - abar.slice(0, 1) / abar.slice(0, 0, T)).clamp_max(0.999);
      ab = torch::cumprod(1.0 - betas, 0);
    } else {
      const double k = 1000.0 / static_cast<double>(T);
      const auto betas = torch::linspace(1e-4 * k, 0.02 * k, T, torch::kDouble);
      ab = torch::cumprod(1.0 - betas, 0);
    }
    sqrt_ab = ab.sqrt().to(torch::kFloat);
    sqrt_one_minus_ab = (1.0 - ab).sqrt().to(torch::kFloat);
  }
};

/// Transformer-style sinusoidal features of integer timesteps [N] -> [N, dim] (DDPM's).
inline torch::Tensor sinusoidal_embedding(const torch::Tensor& t, std::int64_t dim) {
  const auto half = dim / 2;
  const auto freq = torch::exp(torch::arange(half, torch::kFloat) * (-std::log(10000.0) / static_cast<double>(half)));
  const auto a = t.to(torch::kFloat).unsqueeze(1) * freq.unsqueeze(0);
  return torch::cat({torch::sin(a), torch::cos(a)}, 1);
}

/// A denoiser eps_theta(x_t, t): x_t [N, D] (2-D points, or 14 x 14 images flattened) and the
/// batch's timesteps, set in `timesteps` by the loop's noising just before the forward (the
/// module's forward takes one tensor; the timesteps are the second input every DDPM denoiser
/// takes). `time_embed` embeds them: sinusoidal features through a Linear, or a learned
/// nn::Embedding of T rows; frozen_layer leaves it out of the optimizer.
///  - mlp: fc1(x_t) + time_embed(t) -> SiLU -> fc2 ... (SiLU) -> out, width `hidden`;
///  - conv (14 x 14): conv1 (c1, 3x3) + time_embed(t) per channel -> SiLU -> conv2 (c2, 3x3,
///    stride 2, 7 x 7) -> SiLU -> conv3 (c2, 3x3) -> SiLU -> up (transposed 2x2, stride 2, c1,
///    14 x 14) + conv1's map (a U-Net's skip) -> SiLU -> out (1, 3x3).
struct denoiser_net : net {
  denoiser_net(std::int64_t dim, std::int64_t hidden, std::int64_t layers, bool conv, std::int64_t c2,
               bool learned_time, std::int64_t T)
      : conv_(conv), learned_(learned_time) {
    using namespace torch::nn;
    if (learned_) time_embed_e = register_module("time_embed", Embedding(T, hidden));
    else time_embed_l = register_module("time_embed", Linear(sin_dim, hidden));
    if (conv_) {
      side_ = 14;
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, hidden, 3).padding(1)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(hidden, c2, 3).stride(2).padding(1)));
      conv3 = register_module("conv3", Conv2d(Conv2dOptions(c2, c2, 3).padding(1)));
      up = register_module("up", ConvTranspose2d(ConvTranspose2dOptions(c2, hidden, 2).stride(2)));
      out_conv = register_module("out", Conv2d(Conv2dOptions(hidden, 1, 3).padding(1)));
      overflow_sites = {{"conv1", "conv1.silu"}, {"conv2", "conv2.silu"}, {"conv3", "conv3.silu"}, {"up", "up.silu"}};
    } else {
      std::int64_t width = dim;
      for (std::int64_t i = 0; i < layers; ++i) {
        const std::string n = "fc" + std::to_string(i + 1);
        fc.push_back(register_module(n, Linear(width, hidden)));
        overflow_sites.emplace_back(n, n + ".silu");
        width = hidden;
      }
      out_fc = register_module("out", Linear(hidden, dim));
    }
  }
  torch::Tensor embed(const torch::Tensor& t) {
    return learned_ ? time_embed_e(t) : time_embed_l(sinusoidal_embedding(t, sin_dim));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& tp) override {
    const auto e = embed(timesteps);  // [N, hidden]
    if (conv_) {
      const auto n = x.size(0);
      auto h1 = tp.act("conv1.silu", torch::silu(conv1(x.view({n, 1, side_, side_})) + e.unsqueeze(2).unsqueeze(3)));
      auto h = tp.act("conv2.silu", torch::silu(conv2(h1)));
      h = tp.act("conv3.silu", torch::silu(conv3(h)));
      h = tp.act("up.silu", torch::silu(up(h) + h1));
      return out_conv(h).flatten(1);
    }
    auto h = x;
    for (std::size_t i = 0; i < fc.size(); ++i) {
      auto z = fc[i](h);
      if (i == 0) z = z + e;
      h = tp.act(overflow_sites[i].second, torch::silu(z));
    }
    return out_fc(h);
  }
  static constexpr std::int64_t sin_dim = 32;
  bool conv_, learned_;
  std::int64_t side_ = 0;
  torch::Tensor timesteps;  ///< [N] int64: the timesteps of the batch the next forward reads
  torch::nn::Embedding time_embed_e{nullptr};
  torch::nn::Linear time_embed_l{nullptr};
  std::vector<torch::nn::Linear> fc;
  torch::nn::Linear out_fc{nullptr};
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, out_conv{nullptr};
  torch::nn::ConvTranspose2d up{nullptr};
};

/// DDPM's training step's noising, in the loop after the loader (and the input scale): for
/// clean x_0 [N, D], t uniform in 1..T and eps ~ N(0, I) from the run's own generator, x_t =
/// sqrt(ab_t) x_0 + sqrt(1 - ab_t) eps; returns (x_t, eps), the denoiser's input and target, and
/// hands the denoiser its timesteps. `fixed` is the validation set's: the same t and eps at every
/// evaluation (drawn once from a fixed seed).
struct ddpm_noising {
  noise_schedule sch;
  denoiser_net* model;
  torch::Generator gen;
  ddpm_noising(noise_schedule s, denoiser_net* m, std::uint64_t seed)
      : sch(std::move(s)), model(m), gen(at::detail::createCPUGenerator(seed)) {}
  std::pair<torch::Tensor, torch::Tensor> operator()(const torch::Tensor& x0) {
    const auto t = torch::randint(0, sch.steps, {x0.size(0)}, gen, torch::kLong);
    const auto eps = torch::randn(x0.sizes(), gen);
    model->timesteps = t;
    return {sch.sqrt_ab.index_select(0, t).unsqueeze(1) * x0 + sch.sqrt_one_minus_ab.index_select(0, t).unsqueeze(1) * eps,
            eps};
  }
};

/// The validation loss: the noise-prediction MSE of fixed held-out x_0 [n, D] at fixed timesteps
/// and noise (seed 424242), the input scale applied to x_0 as in training.
struct ddpm_validation {
  torch::Tensor x0, t, eps;
  ddpm_validation(const torch::Tensor& x, std::int64_t T) : x0(x) {
    torch::Generator g = at::detail::createCPUGenerator(424242);
    t = torch::randint(0, T, {x.size(0)}, g, torch::kLong);
    eps = torch::randn(x.sizes(), g);
  }
  double operator()(denoiser_net& m, const noise_schedule& sch, double scale) const {
    taps vt;
    m.timesteps = t;
    const auto xt = sch.sqrt_ab.index_select(0, t).unsqueeze(1) * (x0 * scale) +
                    sch.sqrt_one_minus_ab.index_select(0, t).unsqueeze(1) * eps;
    return torch::mse_loss(m.forward(xt, vt), eps).item<double>();
  }
};

// ---------------------------------------------------------------------------------------------
// normalizing_flow: RealNVP affine coupling layers

/// One affine coupling layer (RealNVP): the dimensions where `mask` is 1 pass through and
/// condition a ReLU MLP (`fc1`, `fc2`, `st`: dim -> hidden -> hidden -> 2 dim) whose outputs
/// scale and shift the others: y = x_a + (1 - m) (x exp(s) + t), log|det J| = sum s. The log-scale
/// is bounded as real implementations bound it: `tanh`, s = scale * tanh(raw) with a learned
/// per-dimension `scale` started at 1 (RealNVP's); else FrEIA's soft clamp, s = 0.636 c atan(raw
/// / c), c = 2.
struct coupling : torch::nn::Module {
  coupling(std::int64_t dim, std::int64_t hidden, torch::Tensor m, bool tanh_scale)
      : mask(std::move(m)), tanh_(tanh_scale) {
    using namespace torch::nn;
    fc1 = register_module("fc1", Linear(dim, hidden));
    fc2 = register_module("fc2", Linear(hidden, hidden));
    st = register_module("st", Linear(hidden, 2 * dim));
    if (tanh_) scale = register_parameter("scale", torch::ones({dim}));
  }
  /// x [N, D] -> (y [N, D], log|det J| [N]); `prefix` names its taps.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, taps& tp, const std::string& prefix) {
    const auto keep = x * mask;
    auto h = tp.act(prefix + ".fc1.relu", torch::relu(fc1(keep)));
    h = tp.act(prefix + ".fc2.relu", torch::relu(fc2(h)));
    const auto out = st(h).chunk(2, 1);
    const auto raw = out[0];
    auto s = tanh_ ? scale * torch::tanh(raw) : 0.636 * 2.0 * torch::atan(raw / 2.0);
    s = s * (1.0 - mask);
    const auto t = out[1] * (1.0 - mask);
    return {keep + (1.0 - mask) * (x * torch::exp(s) + t), s.sum(1)};
  }
  torch::Tensor mask, scale;
  bool tanh_;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, st{nullptr};
};

/// A RealNVP flow of `layers` couplings (`coupling0`, `coupling1`, ...), masks alternating
/// between the even and the odd dimensions (for 2-D: x then y), onto a standard normal base.
/// Output [N, D + 1]: z and, in the last column, the log-determinant of the whole map, what the
/// negative log-likelihood reads (flow_nll).
struct realnvp_net : net {
  realnvp_net(std::int64_t dim, std::int64_t layers, std::int64_t hidden, bool tanh_scale) {
    const auto even = (torch::arange(dim) % 2 == 0).to(torch::kFloat);
    for (std::int64_t i = 0; i < layers; ++i) {
      const std::string n = "coupling" + std::to_string(i);
      layers_.push_back(register_module(n, std::make_shared<coupling>(dim, hidden, i % 2 == 0 ? even : 1.0 - even, tanh_scale)));
      names_.push_back(n);
      overflow_sites.emplace_back(n + ".fc1", n + ".fc1.relu");
      overflow_sites.emplace_back(n + ".fc2", n + ".fc2.relu");
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& tp) override {
    auto z = x;
    auto log_det = torch::zeros({x.size(0)});
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      auto [y, ld] = layers_[i]->forward(z, tp, names_[i]);
      z = y;
      log_det = log_det + ld;
    }
    return torch::cat({z, log_det.unsqueeze(1)}, 1);
  }
  std::vector<std::shared_ptr<coupling>> layers_;
  std::vector<std::string> names_;
};

/// The mean negative log-likelihood, in nats per example, of a flow's output [N, D + 1] (z, then
/// log|det J|) under the standard normal base: 0.5 |z|^2 + 0.5 D ln(2 pi) - log|det J|. No lower
/// bound: it goes below 0 once the density is sharper than a unit Gaussian.
inline torch::Tensor flow_nll(const torch::Tensor& out) {
  const auto D = out.size(1) - 1;
  const auto z = out.slice(1, 0, D), log_det = out.select(1, D);
  return (0.5 * z.pow(2).sum(1) + 0.5 * static_cast<double>(D) * std::log(2.0 * pi) - log_det).mean();
}

// ---------------------------------------------------------------------------------------------
// multilabel: BCE with logits over K binary attributes

/// The multi-label targets [n, K] (float 0/1) of a table's images: attributes of the class and
/// of the pixels, deterministic. The digits (K = 7): even, 5 or more, prime (2, 3, 5, 7), a
/// closed loop (0, 6, 8, 9), zero, one, and heavy ink (the image's mean above the 80th percentile
/// of the training images'). Fashion-MNIST (K = 8): upper body (T-shirt, pullover, coat, shirt),
/// footwear (sandal, sneaker, ankle boot), long sleeves (pullover, coat, shirt), trousers, bag,
/// dress, bright (the mean above the 85th percentile of the training images'), top-heavy (more
/// ink in the upper half than the lower, by the training images' median ratio). The percentiles
/// are the training images', for training and validation alike.
struct multilabel_table {
  table t;
  std::vector<double> positive_rate;  ///< per label, in the training rows
};

inline multilabel_table make_multilabel(const table& src, bool fashion, std::int64_t n_train) {
  const auto n = std::min<std::int64_t>(n_train, src.x_train.size(0));
  const auto xtr = src.x_train.slice(0, 0, n), ytr = src.y_train.slice(0, 0, n);
  const std::int64_t side = fashion ? 28 : 8;
  auto ink = [](const torch::Tensor& x) { return x.mean(1); };
  auto top_share = [&](const torch::Tensor& x) {
    const auto img = x.view({x.size(0), side, side});
    const auto top = img.slice(1, 0, side / 2).sum({1, 2}), all = img.sum({1, 2});
    return top / (all + 1e-6);
  };
  const auto ink_q = torch::quantile(ink(xtr), fashion ? 0.85 : 0.80).item<double>();
  const auto top_q = torch::quantile(top_share(xtr), 0.5).item<double>();
  auto in = [](const torch::Tensor& y, std::initializer_list<std::int64_t> cs) {
    auto m = torch::zeros_like(y, torch::kBool);
    for (const auto c : cs) m = m | (y == c);
    return m.to(torch::kFloat);
  };
  auto labels = [&](const torch::Tensor& x, const torch::Tensor& y) {
    std::vector<torch::Tensor> cols;
    if (fashion) {
      cols = {in(y, {0, 2, 4, 6}), in(y, {5, 7, 9}), in(y, {2, 4, 6}), in(y, {1}), in(y, {8}), in(y, {3}),
              (ink(x) > ink_q).to(torch::kFloat), (top_share(x) > top_q).to(torch::kFloat)};
    } else {
      cols = {in(y, {0, 2, 4, 6, 8}), in(y, {5, 6, 7, 8, 9}), in(y, {2, 3, 5, 7}), in(y, {0, 6, 8, 9}), in(y, {0}),
              in(y, {1}), (ink(x) > ink_q).to(torch::kFloat)};
    }
    return torch::stack(cols, 1);
  };
  multilabel_table m;
  m.t.x_train = xtr;
  m.t.y_train = labels(xtr, ytr);
  m.t.x_val = src.x_val;
  m.t.y_val = labels(src.x_val, src.y_val);
  m.t.classes = m.t.y_train.size(1);  // labels, for shift_labels; the monitor is not told
  m.t.side = src.side;
  m.t.source = src.source + ", " + std::to_string(m.t.classes) + " binary attributes";
  const auto rate = m.t.y_train.mean(0);
  for (std::int64_t k = 0; k < rate.size(0); ++k) m.positive_rate.push_back(rate[k].item<double>());
  return m;
}

/// A multi-label classifier: `mlp`: in -> hidden (ReLU, `fc1`) -> K (`head`); `cnn` (28 x 28):
/// conv1 (c1, 3x3, stride 2, 14 x 14) -> ReLU -> conv2 (c2, 3x3, stride 2, 7 x 7) -> ReLU -> fc1
/// (hidden) -> ReLU -> head (K). One logit per label.
struct multilabel_net : net {
  multilabel_net(std::int64_t side, bool cnn, std::int64_t c1, std::int64_t c2, std::int64_t hidden, std::int64_t K)
      : side_(side), cnn_(cnn) {
    using namespace torch::nn;
    std::int64_t width = side * side;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, c1, 3).stride(2).padding(1)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(c1, c2, 3).stride(2).padding(1)));
      const auto s2 = (side + 3) / 4;
      width = c2 * s2 * s2;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}};
    }
    fc1 = register_module("fc1", Linear(width, hidden));
    overflow_sites.emplace_back("fc1", "fc1.relu");
    head = register_module("head", Linear(hidden, K));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    if (cnn_) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side_, side_}))));
      h = t.act("conv2.relu", torch::relu(conv2(h))).flatten(1);
    }
    h = t.act("fc1.relu", torch::relu(fc1(h)));
    return head(h);
  }
  std::int64_t side_;
  bool cnn_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, head{nullptr};
};

/// BCE with logits over [N, K], the mean over every (example, label), each positive weighted by
/// its label's `pos_weight` (torch.nn.BCEWithLogitsLoss(pos_weight=...); undefined: 1).
inline torch::Tensor multilabel_bce(const torch::Tensor& logits, const torch::Tensor& y, const torch::Tensor& pos_weight) {
  namespace F = torch::nn::functional;
  auto opts = F::BinaryCrossEntropyWithLogitsFuncOptions();
  if (pos_weight.defined()) opts = opts.pos_weight(pos_weight);
  return F::binary_cross_entropy_with_logits(logits, y, opts);
}

}  // namespace zoo
