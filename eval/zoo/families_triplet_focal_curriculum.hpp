// SPDX-License-Identifier: Apache-2.0
/// The `triplet`, `focal` and `curriculum` families (split heldout8) in LibTorch: metric learning
/// with a triplet margin loss (an embedding and no class logits; a hinge whose loss, and gradient,
/// is exactly 0 on a batch whose triplets all satisfy the margin), class-imbalanced classification
/// with a focal loss (Lin et al. 2017: a loss that is not cross-entropy, down-weighting the
/// examples a model already gets right, on long-tailed or step-imbalanced data), and curriculum
/// learning (the training data presented easy to hard, by stages of classes or by a pacing function
/// over a difficulty score: a data distribution that changes during the run, so the training loss
/// rises when harder data arrives while the validation loss on the full task falls). They probe
/// what no other family does: a loss that sits at exactly 0 for whole steps with every gradient 0,
/// a classification loss whose uniform guess is not ln C, and a training stream that is not
/// stationary. Like the other families, each taps its activations in forward order through `taps`
/// and names the layers forward_inf can be planted in. Their own modules, so that a change to
/// another family cannot change these held-out runs.
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
#include <tuple>    // std::get of sort's pair
#include <utility>  // std::pair, std::move
#include <vector>

namespace zoo {

/// These three families' models, ReLU throughout, named as a PyTorch user's, the last layer `out_name`
/// ("head" for a classifier's logits, "embedding" for a metric-learning embedding):
/// - an MLP in -> widths... -> out, fc1 .. fcN then the last layer;
/// - a CNN on 28 x 28 images: conv1 (1 -> 16, 5x5, stride 2: 28 -> 12), conv2 (16 -> 32, 3x3,
///   stride 2, padding 1: 12 -> 6), fc1 (1152 -> widths[0]), then the last layer.
/// `l2`: the output divided by its L2 norm (an embedding on the unit sphere, FaceNet's).
struct mlp_or_cnn_net : net {
  mlp_or_cnn_net(std::int64_t side, bool cnn, const std::vector<std::int64_t>& widths,
                 std::int64_t out, bool l2, const std::string& out_name)
      : side_(side), cnn_(cnn), l2_(l2) {
    using namespace torch::nn;
    std::int64_t width = side * side;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 16, 5).stride(2)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(16, 32, 3).stride(2).padding(1)));
      const auto s1 = (side - 5) / 2 + 1, s2 = (s1 + 1) / 2;
      width = 32 * s2 * s2;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}};
    }
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      fcs_.push_back(register_module(n, Linear(width, widths[i])));
      names_.push_back(n + ".relu");
      overflow_sites.emplace_back(n, n + ".relu");
      width = widths[i];
    }
    last = register_module(out_name, Linear(width, out));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    if (cnn_) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side_, side_}))));
      h = t.act("conv2.relu", torch::relu(conv2(h))).flatten(1);
    }
    for (std::size_t i = 0; i < fcs_.size(); ++i)
      h = t.act(names_[i], torch::relu(fcs_[i](h)));
    auto y = last(h);
    if (l2_)
      y = torch::nn::functional::normalize(
          y, torch::nn::functional::NormalizeFuncOptions().p(2.0).dim(1).eps(1e-12));
    return y;
  }
  std::int64_t side_;
  bool cnn_, l2_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  std::vector<torch::nn::Linear> fcs_;
  std::vector<std::string> names_;
  torch::nn::Linear last{nullptr};
};

/// How the triplets of a batch are formed:
/// - `random`: for each anchor one positive and one negative drawn at random from the batch
///   (what a loop around torch.nn.TripletMarginLoss over sampled triplets computes), the mean
///   over the anchors;
/// - `batch_hard`: for each anchor its farthest positive and its nearest negative in the batch
///   (Hermans, Beyer & Leibe 2017, "In defense of the triplet loss"), the mean over the anchors;
/// - `semi_hard`: every anchor-positive pair with the nearest negative farther from the anchor
///   than the positive, or, where there is none, the farthest negative (FaceNet's online
///   semi-hard negatives, Schroff et al. 2015, as tfa.losses.TripletSemiHardLoss picks them),
///   the mean over the pairs.
enum class triplet_mining { random, batch_hard, semi_hard };

/// The Euclidean distances between the rows of `e` [N, D], [N, N]. The squared distance is
/// clamped at 1e-12 before the square root, so that a row's distance to itself (never used as
/// a triplet's) has a finite gradient.
inline torch::Tensor pairwise_distances(const torch::Tensor& e) {
  return (e.unsqueeze(1) - e.unsqueeze(0)).pow(2).sum(2).clamp_min(1e-12).sqrt();
}

/// The triplet margin loss of embeddings `e` [N, D] with labels `y` [N]: per anchor max(0,
/// d(a, p) - d(a, n) + margin), the mean over the anchors that have a positive and a negative in
/// the batch (every anchor of a PK batch). Exactly 0, with every gradient 0, on a batch whose
/// triplets all satisfy the margin. `gen` draws the random triplets.
inline torch::Tensor triplet_loss(const torch::Tensor& e, const torch::Tensor& y,
                                  triplet_mining mining, double margin, torch::Generator& gen) {
  const auto n = e.size(0);
  const auto d = pairwise_distances(e);
  const auto same = y.unsqueeze(1) == y.unsqueeze(0);
  const auto eye = torch::eye(n, torch::TensorOptions().dtype(torch::kBool));
  const auto pos = same & ~eye, neg = ~same;
  const auto valid = pos.any(1) & neg.any(1);
  const auto anchors = valid.nonzero().squeeze(1);
  if (anchors.numel() == 0) return (e * 0.0).sum();  // no triplet in the batch: 0, with a graph
  torch::Tensor d_ap, d_an;
  if (mining == triplet_mining::semi_hard) {
    // Per pair (a, p): the nearest negative with d(a, n) > d(a, p), else the farthest negative.
    const auto pairs = pos.nonzero();  // [M, 2]
    const auto a = pairs.select(1, 0), p = pairs.select(1, 1);
    const auto rows = d.index_select(0, a);  // [M, N]
    const auto ap = d.index({a, p});         // [M]
    const auto neg_rows = neg.index_select(0, a);
    const auto inf = std::numeric_limits<float>::infinity();
    const auto outside = neg_rows & (rows > ap.detach().unsqueeze(1));
    const auto nearest_outside = rows.masked_fill(~outside, inf).amin(1);
    const auto farthest = rows.masked_fill(~neg_rows, -inf).amax(1);
    const auto an = torch::where(outside.any(1), nearest_outside, farthest);
    return torch::relu(ap - an + margin).mean();
  }
  if (mining == triplet_mining::batch_hard) {
    d_ap = (d * pos.to(d.scalar_type())).amax(1);
    d_an = d.masked_fill(~neg, std::numeric_limits<float>::infinity()).amin(1);
    d_ap = d_ap.index_select(0, anchors);
    d_an = d_an.index_select(0, anchors);
  } else {
    const auto p =
        torch::multinomial(pos.index_select(0, anchors).to(torch::kFloat), 1, false, gen);
    const auto q =
        torch::multinomial(neg.index_select(0, anchors).to(torch::kFloat), 1, false, gen);
    const auto rows = d.index_select(0, anchors);
    d_ap = rows.gather(1, p).squeeze(1);
    d_an = rows.gather(1, q).squeeze(1);
  }
  return torch::relu(d_ap - d_an + margin).mean();
}

/// PK batches (Hermans et al.): P classes drawn without replacement, K rows of each, P = min(C,
/// max(2, b / 4)), K = b / P, the remainder one more row for the first classes drawn: a batch of
/// 8 is 2 classes x 4, 32 is 8 x 4, 64 is 10 x 6 (+4), 128 is 10 x 12 (+8). Each class's rows in
/// shuffled epochs of its own.
struct pk_sampler {
  const table* tab;
  bool val;  ///< draw from the validation rows
  torch::Generator gen;
  std::vector<torch::Tensor> rows, order;  ///< per class: its row indices; their current shuffle
  std::vector<std::int64_t> next;
  pk_sampler(const table& t, bool validation, std::uint64_t seed)
      : tab(&t), val(validation), gen(at::detail::createCPUGenerator(seed)) {
    const auto& y = val ? t.y_val : t.y_train;
    for (std::int64_t c = 0; c < t.classes; ++c) {
      rows.push_back((y == c).nonzero().squeeze(1));
      order.push_back(torch::Tensor());
      next.push_back(0);
    }
  }
  /// The row indices of a batch of `b`.
  torch::Tensor indices(std::int64_t b) {
    const auto C = static_cast<std::int64_t>(rows.size());
    const auto P = std::min(C, std::max<std::int64_t>(2, b / 4)), K = b / P, extra = b - P * K;
    const auto classes = torch::randperm(C, gen, torch::kLong);
    std::vector<torch::Tensor> parts;
    for (std::int64_t i = 0; i < P; ++i) {
      const auto c = static_cast<std::size_t>(classes[i].item<std::int64_t>());
      const auto k = std::min(K + (i < extra ? 1 : 0), rows[c].size(0));
      if (!order[c].defined() || next[c] + k > rows[c].size(0)) {
        order[c] = rows[c].index_select(0, torch::randperm(rows[c].size(0), gen, torch::kLong));
        next[c] = 0;
      }
      parts.push_back(order[c].slice(0, next[c], next[c] + k));
      next[c] += k;
    }
    return torch::cat(parts);
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    const auto idx = indices(b);
    const auto& x = val ? tab->x_val : tab->x_train;
    const auto& y = val ? tab->y_val : tab->y_train;
    return {x.index_select(0, idx), y.index_select(0, idx)};
  }
};

/// The focal loss (Lin et al. 2017) of logits [N, C] for labels `y` [N], multi-class: per row
/// -sum_c q_c (1 - p_c)^gamma log p_c, where q is the one-hot label, smoothed by `smoothing`
/// (q = (1 - s) one_hot + s / C) where it is above 0, weighted by alpha[y] where `alpha` [C] is
/// given (class weights), the mean over the rows. gamma = 0 without alpha or smoothing is the
/// cross-entropy; with gamma > 0 a uniform guess's loss is (1 - 1/C)^gamma ln C, not ln C
/// (1.87 at gamma 2, C = 10).
inline torch::Tensor focal_loss(const torch::Tensor& logits, const torch::Tensor& y, double gamma,
                                const torch::Tensor& alpha, double smoothing) {
  const auto C = logits.size(1);
  const auto logp = torch::log_softmax(logits, 1);
  const auto p = logp.exp();
  auto q = torch::one_hot(y, C).to(logits.scalar_type());
  if (smoothing > 0.0) q = q * (1.0 - smoothing) + smoothing / static_cast<double>(C);
  auto per_row = -(q * (1.0 - p).pow(gamma) * logp).sum(1);
  if (alpha.defined()) per_row = per_row * alpha.index_select(0, y);
  return per_row.mean();
}

/// Cui et al. 2019's class-balanced weights ("Class-balanced loss based on effective number of
/// samples"): per class (1 - beta) / (1 - beta^n_c), normalized to sum to C, from the
/// training rows' class counts.
inline torch::Tensor class_balanced_weights(const table& t, double beta) {
  const auto counts = torch::bincount(t.y_train, {}, t.classes).to(torch::kDouble);
  auto w = (1.0 - beta) / (1.0 - torch::pow(beta, counts));
  w = w / w.sum() * static_cast<double>(t.classes);
  return w.to(torch::kFloat);
}

/// A curriculum over a table's training rows (the batch drawn from a pool that grows with the
/// step), one of two kinds:
/// - staged classes: `stages` of (first step's fraction of the run, the classes seen from
///   then on); within a stage, shuffled epochs of the stage's rows, a new shuffle when a stage
///   begins;
/// - smooth pacing (Platanios et al. 2019, "Competence-based curriculum learning"): the rows
///   sorted easy to hard by a difficulty score (`by_difficulty`), competence c(t) = min(1, sqrt(t (1 -
///   c0^2) / T_full + c0^2)), the batch drawn uniformly from the easiest c(t) of the rows.
struct curriculum_sampler {
  const table* tab;
  std::int64_t steps;
  torch::Generator gen;
  // staged classes
  /// (the fraction of the run it starts at, its rows' indices)
  std::vector<std::pair<double, torch::Tensor>> stages;
  std::int64_t stage = -1;
  torch::Tensor shuffled;
  std::int64_t next = 0;
  // smooth pacing
  torch::Tensor by_difficulty;     ///< row indices, easiest first
  double c0 = 0.0, full_at = 0.5;  ///< initial competence; fraction of the run at which c(t) = 1

  curriculum_sampler(const table& t, std::int64_t run_steps, std::uint64_t seed)
      : tab(&t), steps(run_steps), gen(at::detail::createCPUGenerator(seed)) {}

  /// A stage from `start` (a fraction of the run) on, with classes `classes`.
  void add_stage(double start, const std::vector<std::int64_t>& classes) {
    auto in = torch::zeros_like(tab->y_train, torch::kBool);
    for (const auto c : classes)
      in = in | (tab->y_train == c);
    stages.emplace_back(start, in.nonzero().squeeze(1));
  }
  /// Smooth pacing over the rows ordered by their distance to their class's mean input (a
  /// difficulty score that needs no trained model: a typical image of its class is easy).
  void pace_by_distance_to_class_mean(double initial_competence, double full_fraction) {
    c0 = initial_competence;
    full_at = full_fraction;
    const auto& x = tab->x_train;
    const auto& y = tab->y_train;
    auto dist = torch::empty({x.size(0)}, x.options());
    for (std::int64_t c = 0; c < tab->classes; ++c) {
      const auto idx = (y == c).nonzero().squeeze(1);
      if (idx.numel() == 0) continue;
      const auto xc = x.index_select(0, idx);
      dist.index_copy_(0, idx, (xc - xc.mean(0, true)).pow(2).sum(1).sqrt());
    }
    by_difficulty = std::get<1>(dist.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  }
  [[nodiscard]] double competence(std::int64_t step) const {
    const double T = std::max(1.0, full_at * static_cast<double>(steps));
    return std::min(1.0, std::sqrt(static_cast<double>(step) * (1.0 - c0 * c0) / T + c0 * c0));
  }
  torch::Tensor indices(std::int64_t step, std::int64_t b) {
    if (by_difficulty.defined()) {
      const auto n = by_difficulty.size(0);
      const auto pool = std::max<std::int64_t>(
          std::min(b, n),
          static_cast<std::int64_t>(std::ceil(competence(step) * static_cast<double>(n))));
      return by_difficulty.index_select(
          0, torch::randint(0, std::min(pool, n), {b}, gen, torch::kLong));
    }
    std::int64_t k = 0;
    for (std::size_t i = 0; i < stages.size(); ++i)
      if (static_cast<double>(step) >= stages[i].first * static_cast<double>(steps))
        k = static_cast<std::int64_t>(i);
    const auto& rows = stages[static_cast<std::size_t>(k)].second;
    b = std::min(b, rows.size(0));
    if (k != stage || next + b > rows.size(0)) {
      stage = k;
      shuffled = rows.index_select(0, torch::randperm(rows.size(0), gen, torch::kLong));
      next = 0;
    }
    auto idx = shuffled.slice(0, next, next + b);
    next += b;
    return idx;
  }
  /// Whether a stage after the first starts at `step` (its first step).
  [[nodiscard]] bool stage_starts(std::int64_t step) const {
    for (std::size_t i = 1; i < stages.size(); ++i) {
      const double at = stages[i].first * static_cast<double>(steps);
      if (static_cast<double>(step) >= at && static_cast<double>(step - 1) < at) return true;
    }
    return false;
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t step, std::int64_t b) {
    const auto idx = indices(step, b);
    return {tab->x_train.index_select(0, idx), tab->y_train.index_select(0, idx)};
  }
};

}  // namespace zoo
