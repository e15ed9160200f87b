// SPDX-License-Identifier: Apache-2.0
/// The `deep_sets`, `mixture_density` and `mean_teacher` families (split heldout15) in LibTorch:
/// a permutation-invariant set model (DeepSets, Zaheer et al. 2017: each element through a
/// shared network phi, the elements' features summed or averaged, the pooled vector through a
/// network rho) asked a question about a set of UCI digits or Fashion-MNIST images (the class
/// most of them show, the largest class among them); a mixture
/// density network (Bishop 1994: a network whose outputs are the weights, means and widths of a
/// K-component Gaussian mixture over the target, trained by the mixture's negative
/// log-likelihood) on the UCI diabetes table (the disease progression from the ten
/// measurements) and on Fashion-MNIST cut in two (the bottom half's ink from the top half's
/// pixels, a many-to-one problem); and the
/// semi-supervised mean teacher (Tarvainen & Valpola 2017: a student trained on the
/// cross-entropy of the few labelled images of each batch plus a ramped-up consistency, the
/// squared distance between its class probabilities and those of a teacher, an exponential
/// moving average of the student's weights, on independently noised views of every image,
/// labelled or not). They probe kinds of training the zoo had not had: a model whose input is
/// a set and whose pooling adds up the elements' activations; a loss that is a log-density, with
/// no classes, no chance level and no floor, going below 0 as the mixture narrows; and a loss
/// whose second term is measured against a second network that the optimizer never steps and
/// whose weight grows during the run. Like the other families, each taps its activations in
/// forward order through `taps` and names the layers forward_inf can be planted in. Their own
/// modules, so that a change to another family cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "families_meta_learning_sparse_autoencoder_warm_restarts.hpp"  // fewshot_net
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// deep_sets: a permutation-invariant model of sets of images

/// What a set is asked, ten classes either way: the class most of its elements show (each set
/// n / 2 + 1 images of one class drawn uniformly, the others of any other classes), or its
/// largest class (every element drawn uniformly from the rows).
enum class set_question { majority, max };

/// Sets of `n` images drawn, with replacement across sets, from a table's training (or
/// validation) rows, each labelled by the answer to `question`. The majority's images come
/// first in each set: the order is nothing to a permutation-invariant model.
struct set_tasks {
  const table* t;
  std::int64_t n;
  set_question question;
  std::vector<torch::Tensor> train_rows, val_rows;  ///< per class: its rows' indices [n_c]

  set_tasks(const table* tab, std::int64_t size, set_question q) : t(tab), n(size), question(q) {
    for (std::int64_t c = 0; c < 10; ++c) {
      train_rows.push_back(t->y_train.eq(c).nonzero().flatten());
      val_rows.push_back(t->y_val.eq(c).nonzero().flatten());
    }
  }
  [[nodiscard]] static std::int64_t classes() { return 10; }
  /// `sets` sets -> (x [sets, n, D], y [sets] int64).
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t sets, bool validation, torch::Generator& g) const {
    const auto& images = validation ? t->x_val : t->x_train;
    const auto& labels = validation ? t->y_val : t->y_train;
    if (question == set_question::max) {
      const auto rows = torch::randint(images.size(0), {sets * n}, g, torch::kLong);
      const auto c = labels.index_select(0, rows).view({sets, n});  // [sets, n] classes
      return {images.index_select(0, rows).view({sets, n, images.size(1)}), std::get<0>(c.max(1))};
    }
    const auto most = n / 2 + 1;
    const auto y = torch::randint(10, {sets}, g, torch::kLong);
    // [sets, n]: the majority's class, then other classes (y + 1 .. y + 9, mod 10)
    const auto others = (y.unsqueeze(1) + torch::randint(1, 10, {sets, n - most}, g, torch::kLong)).remainder(10);
    const auto c = torch::cat({y.unsqueeze(1).expand({sets, most}), others}, 1).flatten();
    auto rows = torch::empty({sets * n}, torch::kLong);
    const auto& by_class = validation ? val_rows : train_rows;
    for (std::int64_t k = 0; k < 10; ++k) {
      const auto at = c.eq(k).nonzero().flatten();
      const auto& r = by_class[static_cast<std::size_t>(k)];
      rows.index_put_({at}, r.index_select(0, torch::randint(r.size(0), {at.size(0)}, g, torch::kLong)));
    }
    return {images.index_select(0, rows).view({sets, n, images.size(1)}), y};
  }
};

/// DeepSets: phi (`phi1`, `phi2`, ... Linear + ReLU) on each element, the elements' features
/// summed (or averaged) over the set, rho (`rho1`, ... Linear + ReLU) and `head` on the pooled
/// vector. x [B, n, D] -> logits [B, C]; invariant to the order of each set's elements.
struct deep_sets_net : net {
  deep_sets_net(std::int64_t in, const std::vector<std::int64_t>& phi, const std::vector<std::int64_t>& rho,
                bool mean_pool, std::int64_t classes)
      : mean_(mean_pool) {
    const auto width = add_relu_stack("rho", add_relu_stack("phi", in, phi, phi_), rho, rho_);
    head = register_module("head", torch::nn::Linear(width, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto sets = x.size(0), n = x.size(1);
    auto h = x.reshape({sets * n, x.size(2)});  // [B n, D]: every element through phi alike
    for (std::size_t i = 0; i < phi_.size(); ++i)
      h = t.act("phi" + std::to_string(i + 1) + ".relu", torch::relu(phi_[i](h)));
    h = h.view({sets, n, h.size(1)});
    h = mean_ ? h.mean(1) : h.sum(1);  // [B, H]: the set's one vector
    for (std::size_t i = 0; i < rho_.size(); ++i)
      h = t.act("rho" + std::to_string(i + 1) + ".relu", torch::relu(rho_[i](h)));
    return head(h);
  }
  bool mean_;
  std::vector<torch::nn::Linear> phi_, rho_;
  torch::nn::Linear head{nullptr};
};

// ---------------------------------------------------------------------------------------------
// mixture_density: a mixture density network

/// Fashion-MNIST's images cut in two: the top half's 14 x 28 pixels the features, the bottom
/// half's mean intensity the target (standardized with the training rows' mean and standard
/// deviation), the same rows in training and validation as `t`. A many-to-one problem of the
/// kind mixture density networks were made for: a top half that a T-shirt, a dress and a coat
/// share leaves the bottom half's ink several values apart.
inline table fashion_bottom_ink(const table& t) {
  const auto half = t.side * t.side / 2;
  const auto ink_train = t.x_train.slice(1, half).mean(1, true), ink_val = t.x_val.slice(1, half).mean(1, true);
  const auto mean = ink_train.mean(), sd = ink_train.std(0, false);
  table u;
  u.x_train = t.x_train.slice(1, 0, half).contiguous();
  u.x_val = t.x_val.slice(1, 0, half).contiguous();
  u.y_train = (ink_train - mean) / sd;
  u.y_val = (ink_val - mean) / sd;
  u.classes = 0;
  u.side = 0;
  u.source = t.source + ": the bottom half's mean intensity (standardized) from the top half's pixels";
  return u;
}

/// A mixture density network: a ReLU trunk (`fc1`, ...) and three heads of K outputs each,
/// `pi_head` (the mixing weights' logits), `mu_head` (the means) and `sigma_head` (the log
/// standard deviations). x [N, F] -> [N, 3K] = (logits, means, log sigmas).
struct mdn_net : net {
  mdn_net(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t k) {
    using namespace torch::nn;
    const auto width = add_relu_stack("fc", in, hidden, layers_);
    pi_head = register_module("pi_head", Linear(width, k));
    mu_head = register_module("mu_head", Linear(width, k));
    sigma_head = register_module("sigma_head", Linear(width, k));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < layers_.size(); ++i)
      h = t.act("fc" + std::to_string(i + 1) + ".relu", torch::relu(layers_[i](h)));
    return torch::cat({pi_head(h), mu_head(h), sigma_head(h)}, 1);
  }
  std::vector<torch::nn::Linear> layers_;
  torch::nn::Linear pi_head{nullptr}, mu_head{nullptr}, sigma_head{nullptr};
};

/// The mixture's negative log-likelihood of targets y [N, 1] under out [N, 3K], in nats, the
/// mean over the rows: -log sum_k pi_k N(y; mu_k, sigma_k^2), by log-sum-exp (Bishop's error
/// function with the 0.5 log 2 pi kept, so that it is a density's). `clamp`: the log sigmas
/// clamped to [-2, 2] (sigma 0.14 .. 7.4 standard deviations of the target), the guard many
/// MDN implementations put against a component collapsing onto one row; without it they are as
/// the head gives them. Below 0 wherever the mixture puts more than 1 per unit of density on the
/// targets: an untrained network's is about 1.4 on standardized targets.
inline torch::Tensor mixture_nll(const torch::Tensor& out, const torch::Tensor& y, std::int64_t k, bool clamp) {
  constexpr double half_log_two_pi = 0.9189385332046727;
  const auto log_pi = torch::log_softmax(out.slice(1, 0, k), 1);
  const auto mu = out.slice(1, k, 2 * k);
  auto log_sigma = out.slice(1, 2 * k, 3 * k);
  if (clamp) log_sigma = log_sigma.clamp(-2.0, 2.0);
  const auto z = (y - mu) * torch::exp(-log_sigma);  // [N, K], y broadcast over the components
  const auto log_density = -0.5 * z.pow(2) - log_sigma - half_log_two_pi;
  return -torch::logsumexp(log_pi + log_density, 1).mean();
}

// ---------------------------------------------------------------------------------------------
// mean_teacher: semi-supervised learning with an averaged teacher

/// The classifier both networks are: round 14's few-shot learner with ten logits (an MLP, or a
/// CNN of two strided 3x3 convolutions and an fc of 64, no normalization).
struct teacher_student_net : fewshot_net {
  teacher_student_net(std::int64_t side, bool conv, const std::vector<std::int64_t>& widths)
      : fewshot_net(side, conv, widths, 10) {}
};

/// The mean teacher's data: `labels_per_class` labelled training images of each class (the
/// first of each in the table's order, which its loader shuffled once), the other training
/// images unlabelled. Each batch: a quarter labelled images (at least one), drawn with
/// replacement from the labelled ones, first, then unlabelled ones; their labels come with
/// them, but the loss reads only the first `labelled(batch)` rows' (the unlabelled images'
/// labels are there because a table has them, never read).
struct semi_supervised_pool {
  torch::Tensor labelled_rows, unlabelled_rows;  ///< indices into the training rows [n_l], [n_u]
  const table* t;

  semi_supervised_pool(const table* tab, std::int64_t labels_per_class) : t(tab) {
    std::vector<torch::Tensor> l;
    for (std::int64_t c = 0; c < 10; ++c) l.push_back(t->y_train.eq(c).nonzero().flatten().slice(0, 0, labels_per_class));
    labelled_rows = std::get<0>(torch::cat(l).sort());
    auto mask = torch::ones({t->x_train.size(0)}, torch::kBool);
    mask.index_fill_(0, labelled_rows, false);
    unlabelled_rows = mask.nonzero().flatten();
  }
  [[nodiscard]] static std::int64_t labelled(std::int64_t batch) { return std::max<std::int64_t>(1, batch / 4); }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t batch, torch::Generator& g) const {
    const auto l = labelled(batch);
    const auto pick_l = labelled_rows.index_select(0, torch::randint(labelled_rows.size(0), {l}, g, torch::kLong));
    const auto pick_u =
        unlabelled_rows.index_select(0, torch::randint(unlabelled_rows.size(0), {batch - l}, g, torch::kLong));
    const auto rows = torch::cat({pick_l, pick_u});
    return {t->x_train.index_select(0, rows), t->y_train.index_select(0, rows)};
  }
};

/// The mean teacher's loss and its teacher (Tarvainen & Valpola 2017, as their PyTorch code
/// writes it): the student's cross-entropy on the batch's labelled rows (`mse_on_logits`:
/// wrong_loss_mse_on_logits, the MSE of its logits and one-hot labels in its place) plus w(t) x
/// the mean squared difference of the student's and the teacher's softmax over every row, the
/// teacher reading its own noised view of the clean batch, without gradient; w ramps from 0 to
/// `max_weight` by exp(-5 (1 - t)^2) over the first `ramp` steps. After each optimizer step the
/// teacher becomes an exponential moving average of the student, at min(1 - 1 / (step + 2),
/// `alpha`); at the first step it is the student's copy (after whatever initialization the
/// student had).
struct mean_teacher {
  std::shared_ptr<teacher_student_net> teacher;
  teacher_student_net* student = nullptr;
  double alpha = 0.99, max_weight = 10.0, noise = 0.15;
  std::int64_t ramp = 1, step = 0;
  bool mse_on_logits = false;
  torch::Tensor clean;  ///< the batch before the student's noise (the input scale applied)
  std::shared_ptr<torch::Generator> gen;

  [[nodiscard]] torch::Tensor noised(const torch::Tensor& x) const {
    return x + noise * torch::randn(x.sizes(), *gen, x.options());
  }
  [[nodiscard]] double weight() const {
    const double t = std::min(1.0, static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, ramp)));
    return max_weight * std::exp(-5.0 * (1.0 - t) * (1.0 - t));
  }
  void copy_student() {
    torch::NoGradGuard no_grad;
    const auto from = student->parameters();
    auto to = teacher->parameters();
    for (std::size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
  }
  void update(std::int64_t at) {
    torch::NoGradGuard no_grad;
    const double a = std::min(1.0 - 1.0 / static_cast<double>(at + 2), alpha);
    const auto from = student->parameters();
    auto to = teacher->parameters();
    for (std::size_t i = 0; i < to.size(); ++i) to[i].mul_(a).add_(from[i], 1.0 - a);
  }
  /// The supervised term over the first rows: the task's loss as its user reads it.
  [[nodiscard]] torch::Tensor supervised(const torch::Tensor& logits, const torch::Tensor& y) const {
    if (mse_on_logits) return torch::mse_loss(logits, torch::one_hot(y, 10).to(torch::kFloat));
    return torch::nn::functional::cross_entropy(logits, y);
  }
  torch::Tensor loss(const torch::Tensor& out, const torch::Tensor& y) {
    const auto l = semi_supervised_pool::labelled(out.size(0));
    torch::Tensor target;
    {
      torch::NoGradGuard no_grad;
      taps unused;  // the teacher's activations: not observed, and forward_inf is not planted there
      target = torch::softmax(teacher->forward(noised(clean), unused), 1);
    }
    const auto consistency = torch::mse_loss(torch::softmax(out, 1), target);
    return supervised(out.slice(0, 0, l), y.slice(0, 0, l)) + weight() * consistency;
  }
};

}  // namespace zoo
