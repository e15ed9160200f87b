// SPDX-License-Identifier: Apache-2.0
/// The `meta_learning`, `sparse_autoencoder` and `warm_restarts` families (split heldout14) in
/// LibTorch: first-order meta-learning by Reptile (Nichol et al. 2018), whose every step draws
/// few-shot tasks (a few classes of the UCI digits or of Fashion-MNIST, labelled afresh in each
/// task), adapts the weights to each task by a few steps of SGD on its support set and moves the
/// meta-weights toward the adapted ones, the query loss after adaptation being the loss; a
/// sparse autoencoder of interpretability work (Bricken et al. 2023, Anthropic's April 2024
/// update), ReLU latents four to eight times wider than the hidden activations of a small MLP
/// it is trained on, the MSE of their reconstruction plus an L1 penalty on the latents, with
/// decoder columns held at unit norm or the penalty weighted by their norms; and a classifier
/// trained under cosine annealing with warm restarts (SGDR, Loshchilov & Hutter 2017), the
/// learning rate back at its peak every T_i steps (T_mult 1 or 2), or SGDR followed by
/// stochastic weight averaging at a constant rate (Izmailov et al. 2018). They probe kinds of
/// training the zoo had not had: a step whose gradient is no loss's gradient but the distance
/// the weights moved on a task, and whose loss is measured after an inner loop; a loss of two
/// terms of which one is meant to silence most units, over inputs that are another network's
/// activations, with a projection after each step; and a learning rate that jumps back to its
/// peak by design, the loss jumping up after each restart. Like the other families, each taps
/// its activations in forward order through `taps` and names the layers forward_inf can be
/// planted in. Their own modules, so that a change to another family cannot change these
/// held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// meta_learning: Reptile over few-shot tasks

/// Few-shot classification tasks drawn from a table's classes: each task `ways` of its classes
/// in a random order, which is their labels 0 .. ways - 1 (so that no class keeps a label from
/// task to task), `shots` support and `queries` query images of each, drawn without replacement
/// from the training rows (or, for validation, the validation rows) of the class.
struct fewshot_tasks {
  const table* t;
  std::int64_t ways, shots, queries;
  std::vector<torch::Tensor> train_rows, val_rows;  ///< per class: its rows' indices [n_c]

  fewshot_tasks(const table* tab, std::int64_t ways_n, std::int64_t shots_n, std::int64_t queries_n)
      : t(tab), ways(ways_n), shots(shots_n), queries(queries_n) {
    for (std::int64_t c = 0; c < t->classes; ++c) {
      train_rows.push_back(t->y_train.eq(c).nonzero().flatten());
      val_rows.push_back(t->y_val.eq(c).nonzero().flatten());
    }
  }
  /// The rows of one task: ways x (shots + queries).
  [[nodiscard]] std::int64_t per_task() const { return ways * (shots + queries); }
  /// `tasks` tasks -> (x [tasks x per_task(), D], y [tasks x per_task()] int64): each task's
  /// support rows (ways x shots, class by class), then its query rows (ways x queries).
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t tasks, bool validation,
                                               torch::Generator& g) const {
    std::vector<torch::Tensor> xs, ys;
    const auto& rows = validation ? val_rows : train_rows;
    const auto& images = validation ? t->x_val : t->x_train;
    for (std::int64_t k = 0; k < tasks; ++k) {
      const auto classes = torch::randperm(t->classes, g, torch::kLong).slice(0, 0, ways);
      std::vector<torch::Tensor> sx, sy, qx, qy;
      for (std::int64_t j = 0; j < ways; ++j) {
        const auto& r = rows[static_cast<std::size_t>(classes[j].item<std::int64_t>())];
        const auto pick = r.index_select(
            0, torch::randperm(r.size(0), g, torch::kLong).slice(0, 0, shots + queries));
        const auto x = images.index_select(0, pick);
        sx.push_back(x.slice(0, 0, shots));
        qx.push_back(x.slice(0, shots));
        sy.push_back(torch::full({shots}, j, torch::kLong));
        qy.push_back(torch::full({queries}, j, torch::kLong));
      }
      xs.push_back(torch::cat(sx));
      xs.push_back(torch::cat(qx));
      ys.push_back(torch::cat(sy));
      ys.push_back(torch::cat(qy));
    }
    return {torch::cat(xs), torch::cat(ys)};
  }
};

/// The few-shot learner: an MLP (`fc1`, ... ReLU, `head`) or a small CNN (`conv1`, `conv2`:
/// 3x3 convolutions of stride 2, ReLU; `fc` of 64, ReLU; `head`), no normalization (an inner
/// loop would move BatchNorm's running statistics from task to task), `ways` logits.
struct fewshot_net : net {
  fewshot_net(std::int64_t side, bool conv, const std::vector<std::int64_t>& widths,
              std::int64_t ways)
      : side_(side), conv_(conv) {
    using namespace torch::nn;
    std::int64_t in = side * side;
    if (conv_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, widths[0], 3).stride(2).padding(1)));
      conv2 = register_module("conv2",
                              Conv2d(Conv2dOptions(widths[0], widths[1], 3).stride(2).padding(1)));
      const auto s = ((side + 1) / 2 + 1) / 2;
      fc = register_module("fc", Linear(widths[1] * s * s, 64));
      in = 64;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc", "fc.relu"}};
    } else {
      in = add_relu_stack("fc", in, widths, layers);
    }
    head = register_module("head", Linear(in, ways));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    torch::Tensor h = x;
    if (conv_) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side_, side_}))));
      h = t.act("conv2.relu", torch::relu(conv2(h)));
      h = t.act("fc.relu", torch::relu(fc(h.flatten(1))));
    } else {
      for (std::size_t i = 0; i < layers.size(); ++i)
        h = t.act("fc" + std::to_string(i + 1) + ".relu", torch::relu(layers[i](h)));
    }
    return head(h);
  }
  std::int64_t side_;
  bool conv_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc{nullptr}, head{nullptr};
  std::vector<torch::nn::Linear> layers;
};

/// Reptile's outer step, as a LibTorch user writes it with an outer optimizer (the paper's
/// Algorithm 2 moves the meta-weights by a step size times meta - adapted, plain SGD on that
/// direction; handing the direction to `.grad` lets any optimizer take the step): for each of
/// the step's tasks, `inner_steps` steps of plain SGD at `inner_lr` on its support set, taken on
/// the model's own weights (by torch::autograd::grad, so that `.grad` holds only the outer
/// direction), the query loss of the adapted weights measured, then each parameter's `.grad`
/// added the task's share of meta - adapted (Reptile's direction as a gradient: the outer
/// optimizer steps against it) and the weights put back; then the outer optimizer steps. The
/// loss is the query loss after adaptation, the mean over the step's tasks; the forward the loop
/// reads (taps, logits) is the last task's query forward, the one that loss comes from.
struct reptile {
  net* model = nullptr;
  std::shared_ptr<torch::optim::Optimizer> outer;
  std::shared_ptr<fewshot_tasks> tasks;
  std::int64_t inner_steps = 5;
  double inner_lr = 0.1;
  /// wrong_loss_mse_on_logits: MSE between logits and one-hot labels, inner loop and query alike.
  bool mse_on_logits = false;

  [[nodiscard]] torch::Tensor task_loss(const torch::Tensor& logits, const torch::Tensor& y) const {
    if (mse_on_logits)
      return torch::mse_loss(logits, torch::one_hot(y, logits.size(1)).to(torch::kFloat));
    return torch::nn::functional::cross_entropy(logits, y);
  }
  /// The inner loop on one task's support set, in place; its forwards tapped into `t`.
  void adapt(const torch::Tensor& xs, const torch::Tensor& ys, taps& t, bool nan) {
    const auto params = model->parameters();
    for (std::int64_t k = 0; k < inner_steps; ++k) {
      auto loss = task_loss(model->forward(xs, t), ys);
      if (nan) loss = loss * std::numeric_limits<double>::quiet_NaN();
      const auto g = torch::autograd::grad({loss}, params);
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i)
        params[i].sub_(g[i], inner_lr);
    }
  }
  /// x, y: the step's tasks as fewshot_tasks::draw lays them out.
  struct outcome {
    double loss;
    torch::Tensor logits;
    double grad_norm;
  };
  outcome step(const torch::Tensor& x, const torch::Tensor& y, double lr, bool zero_grad, bool nan,
               bool skip_update, taps& tap) {
    for (auto& g : outer->param_groups())
      g.options().set_lr(lr);
    if (zero_grad) outer->zero_grad();
    const auto params = model->parameters();
    const auto rows = tasks->per_task(), support = tasks->ways * tasks->shots;
    const auto n = x.size(0) / rows;
    std::vector<torch::Tensor> meta;
    for (const auto& p : params)
      meta.push_back(p.detach().clone());
    double loss_sum = 0.0;
    torch::Tensor logits;
    for (std::int64_t k = 0; k < n; ++k) {
      const auto xt = x.slice(0, k * rows, (k + 1) * rows),
                 yt = y.slice(0, k * rows, (k + 1) * rows);
      taps inner;  // the inner loop's forwards: forward_inf overflows there too, nothing recorded
      inner.overflow_at = tap.overflow_at;
      adapt(xt.slice(0, 0, support), yt.slice(0, 0, support), inner, nan);
      torch::NoGradGuard no_grad;
      tap.activations.clear();  // the last task's query forward is the one observed
      logits = model->forward(xt.slice(0, support), tap);
      loss_sum += nan ? std::numeric_limits<double>::quiet_NaN()
                      : task_loss(logits, yt.slice(0, support)).item<double>();
      for (std::size_t i = 0; i < params.size(); ++i) {
        const auto direction = (meta[i] - params[i]) / static_cast<double>(n);
        auto& g = params[i].mutable_grad();
        if (g.defined())
          g.add_(direction);
        else
          g = direction;
        params[i].copy_(meta[i]);
      }
    }
    const double norm = grad_norm(*model);
    if (!skip_update) outer->step();
    return {loss_sum / static_cast<double>(n), logits, norm};
  }
  /// The query loss after adaptation over fixed validation tasks (x, y as draw lays them out),
  /// the inputs scaled by `scale`; the weights put back after each task.
  double validate(const torch::Tensor& x, const torch::Tensor& y, double scale) {
    torch::AutoGradMode enable(
        true);  // the loop validates under NoGradGuard; the inner loop needs gradients
    const auto params = model->parameters();
    const auto rows = tasks->per_task(), support = tasks->ways * tasks->shots;
    const auto n = x.size(0) / rows;
    std::vector<torch::Tensor> meta;
    for (const auto& p : params)
      meta.push_back(p.detach().clone());
    double sum = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
      const auto xt = x.slice(0, k * rows, (k + 1) * rows) * scale,
                 yt = y.slice(0, k * rows, (k + 1) * rows);
      taps unused;
      adapt(xt.slice(0, 0, support), yt.slice(0, 0, support), unused, false);
      torch::NoGradGuard no_grad;
      sum += task_loss(model->forward(xt.slice(0, support), unused), yt.slice(0, support))
                 .item<double>();
      for (std::size_t i = 0; i < params.size(); ++i)
        params[i].copy_(meta[i]);
    }
    return sum / static_cast<double>(n);
  }
};

// ---------------------------------------------------------------------------------------------
// sparse_autoencoder: a dictionary of another network's activations

/// The network whose activations the sparse autoencoder is trained on: an MLP classifier
/// (`fc1`, `fc2` ReLU, `head`), trained before the run, unmonitored (see build()).
struct sae_subject_net : net {
  sae_subject_net(std::int64_t in, std::int64_t h1, std::int64_t h2) {
    fc1 = register_module("fc1", torch::nn::Linear(in, h1));
    fc2 = register_module("fc2", torch::nn::Linear(h1, h2));
    head = register_module("head", torch::nn::Linear(h2, 10));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto h1 = torch::relu(fc1(x));
    return head(t.act("fc2.relu", torch::relu(fc2(h1))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, head{nullptr};
};

/// A sparse autoencoder: latents f = ReLU(W_enc (x - b_dec) + b_enc) (`encoder`, tapped as
/// `latents`), the reconstruction W_dec f + b_dec (`decoder`, no bias of its own; column i of
/// W_dec [d, m] is latent i's direction; `b_dec`). `unit_decoder`: Bricken et al. 2023's
/// recipe, the decoder's columns renormalized to unit norm after each step and their
/// gradients' parallel component removed before it, the penalty lambda x the latents' sum;
/// else Anthropic's April 2024 update: the columns free, the penalty lambda x the sum of each
/// latent times its column's norm, the columns initialized at norm 0.1. W_enc starts as W_dec's
/// transpose, b_enc at 0, b_dec at the training activations' mean (set_center). The loss is
/// the MSE (the mean over the values) plus the penalty (the mean over the rows).
struct sparse_autoencoder_net : net {
  sparse_autoencoder_net(std::int64_t d, std::int64_t m, bool unit, double l1_coefficient)
      : unit_decoder(unit), l1(l1_coefficient) {
    encoder = register_module("encoder", torch::nn::Linear(d, m));
    decoder =
        register_module("decoder", torch::nn::Linear(torch::nn::LinearOptions(m, d).bias(false)));
    b_dec = register_parameter("b_dec", torch::zeros({d}));
    torch::NoGradGuard no_grad;
    auto w = torch::randn({d, m});
    w = w / w.norm(2, 0, true) * (unit_decoder ? 1.0 : 0.1);
    decoder->weight.copy_(w);
    encoder->weight.copy_(w.t());
    encoder->bias.zero_();
    overflow_sites = {{"encoder", "latents"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    input = x;
    latents = t.act("latents", torch::relu(encoder(x - b_dec)));
    return decoder(latents) + b_dec;
  }
  /// The loss of the last forward's reconstruction `out`.
  [[nodiscard]] torch::Tensor loss(const torch::Tensor& out) const {
    const auto per_latent = unit_decoder ? latents : latents * decoder->weight.norm(2, 0);
    return torch::mse_loss(out, input) + l1 * per_latent.sum(1).mean();
  }
  void set_center(const torch::Tensor& mean) {
    torch::NoGradGuard no_grad;
    b_dec.copy_(mean);
  }
  /// Before the step (unit_decoder): each column's gradient less its component along the column.
  void project_decoder_gradient() {
    if (!unit_decoder || !decoder->weight.grad().defined()) return;
    torch::NoGradGuard no_grad;
    auto& g = decoder->weight.mutable_grad();
    const auto& w = decoder->weight;
    g.sub_((g * w).sum(0, true) * w);
  }
  /// After the step (unit_decoder): each column back to unit norm.
  void normalize_decoder() {
    if (!unit_decoder) return;
    torch::NoGradGuard no_grad;
    decoder->weight.div_(decoder->weight.norm(2, 0, true).clamp_min(1e-8));
  }
  bool unit_decoder;
  double l1;
  torch::nn::Linear encoder{nullptr}, decoder{nullptr};
  torch::Tensor b_dec;
  torch::Tensor input, latents;  ///< the last forward's
};

/// The sparse autoencoder's data: the subject's `fc2.relu` activations on the first `n_train`
/// training images and on the validation images, scaled by one factor (the training
/// activations' mean L2 norm made sqrt(d), as SAE training code normalizes them); the images'
/// labels kept, unread by the loss.
inline table subject_activations(net& subject, const table& images, std::int64_t n_train) {
  torch::NoGradGuard no_grad;
  subject.eval();
  const auto harvest = [&](const torch::Tensor& x) {
    taps t;
    subject.forward(x, t);
    return t.activations.front().second.clone();
  };
  const auto n = std::min(n_train, images.x_train.size(0));
  auto train = harvest(images.x_train.slice(0, 0, n));
  auto val = harvest(images.x_val);
  const double d = static_cast<double>(train.size(1));
  const double scale = std::sqrt(d) / train.norm(2, 1).mean().item<double>();
  table out;
  out.x_train = train * scale;
  out.y_train = images.y_train.slice(0, 0, n);
  out.x_val = val * scale;
  out.y_val = images.y_val;
  out.classes = 10;
  out.side = 0;
  out.source = images.source + ", an MLP's fc2 activations";
  return out;
}

// ---------------------------------------------------------------------------------------------
// warm_restarts: a classifier under SGDR

/// The classifier: an MLP (`fc1`, ... ReLU, `head`) or a CNN (`conv1`, `conv2`: 3x3, padding 1,
/// [BatchNorm `bn1`, `bn2`], ReLU, 2x2 max pooling each; `fc` of 64, ReLU; `head`), 10 logits.
struct restart_classifier_net : net {
  restart_classifier_net(std::int64_t side, bool conv, bool bn,
                         const std::vector<std::int64_t>& widths)
      : side_(side), conv_(conv), bn_(bn) {
    using namespace torch::nn;
    std::int64_t in = side * side;
    if (conv_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, widths[0], 3).padding(1)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(widths[0], widths[1], 3).padding(1)));
      if (bn_) {
        bn1 = register_module("bn1", BatchNorm2d(widths[0]));
        bn2 = register_module("bn2", BatchNorm2d(widths[1]));
      }
      const auto s = side / 4;
      fc = register_module("fc", Linear(widths[1] * s * s, 64));
      in = 64;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"fc", "fc.relu"}};
    } else {
      for (std::size_t i = 0; i < widths.size(); ++i) {
        const auto n = "fc" + std::to_string(i + 1);
        layers.push_back(register_module(n, Linear(in, widths[i])));
        overflow_sites.emplace_back(n, n + ".relu");
        in = widths[i];
      }
    }
    head = register_module("head", Linear(in, 10));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    torch::Tensor h = x;
    if (conv_) {
      auto z = conv1(x.view({x.size(0), 1, side_, side_}));
      if (bn_) z = bn1(z);
      h = torch::max_pool2d(t.act("conv1.relu", torch::relu(z)), 2);
      z = conv2(h);
      if (bn_) z = bn2(z);
      h = torch::max_pool2d(t.act("conv2.relu", torch::relu(z)), 2);
      h = t.act("fc.relu", torch::relu(fc(h.flatten(1))));
    } else {
      for (std::size_t i = 0; i < layers.size(); ++i)
        h = t.act("fc" + std::to_string(i + 1) + ".relu", torch::relu(layers[i](h)));
    }
    return head(h);
  }
  std::int64_t side_;
  bool conv_, bn_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr}, head{nullptr};
  std::vector<torch::nn::Linear> layers;
};

/// Stochastic weight averaging's running average of a module's parameters
/// (torch.optim.swa_utils.AveragedModel's equal-weight mean), updated where the loop says: the
/// weights the run ships. The monitor reads the model that trains, as in every family.
struct swa_average {
  std::vector<torch::Tensor> mean;
  std::int64_t count = 0;
  void add(torch::nn::Module& m) {
    torch::NoGradGuard no_grad;
    const auto params = m.parameters();
    if (mean.empty())
      for (const auto& p : params)
        mean.push_back(torch::zeros_like(p));
    ++count;
    for (std::size_t i = 0; i < params.size(); ++i)
      mean[i].add_((params[i].detach() - mean[i]) / static_cast<double>(count));
  }
};

}  // namespace zoo
