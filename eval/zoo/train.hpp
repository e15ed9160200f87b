// SPDX-License-Identifier: Apache-2.0
/// One zoo run: builds the family's model and data for a `run_spec`, trains it under a fresh
/// monitor with the fault planted, and returns what the monitor found and how the loss went.
#pragma once

#include "../../examples/common/faults.hpp"
#include "../common/evidence_log.hpp"
#include "data.hpp"
#include "families.hpp"
#include "families_adversarial_policy_recsys_graph.hpp"
#include "families_deep_sets_mixture_density_mean_teacher.hpp"
#include "families_diffusion_flow_multilabel.hpp"
#include "families_gru_seq_regression_dwsep.hpp"
#include "families_hetero_nll_pruned_qat.hpp"
#include "families_lora_fixup_distill.hpp"
#include "families_masked_lm_ctc_domain_adversarial.hpp"
#include "families_meta_learning_sparse_autoencoder_warm_restarts.hpp"
#include "families_quasi_newton_uncertainty_actor_critic_soft_targets.hpp"
#include "families_segmentation_simsiam_forecaster.hpp"
#include "families_seq2seq_contrastive_skipgram.hpp"
#include "families_tabular_vit_lenet.hpp"
#include "families_triplet_focal_curriculum.hpp"
#include "observe.hpp"
#include "spec.hpp"

#include <mldiag/monitor.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace zoo {

/// What a run reports: the shared run_result (findings, losses, planted layer) and how well it
/// trained.
struct result {
  run_spec spec;
  examples::run_result run;
  double initial_loss = 0.0, final_loss = 0.0;  ///< mean of the first 5 and of the last 10% of steps
  double val_first = std::numeric_limits<double>::quiet_NaN(), val_last = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0.0;
  std::string skipped;  ///< why the run did not happen ("" when it did)
  /// The progress metric a family gives with observe_metric (round 9's GAN and policy
  /// gradient), each step's value; its name ("" when none) and direction; the mean of its
  /// first 5 and of its last 10% of values, as the loss's.
  std::string metric_name;
  bool metric_higher_is_better = false;
  std::vector<double> metric_values;
  double initial_metric = std::numeric_limits<double>::quiet_NaN(), final_metric = std::numeric_limits<double>::quiet_NaN();
  /// Whether the loss is not a progress measure (task::objective): such a run is judged by its metric.
  bool loss_not_progress = false;
  /// Each evaluation: (step, validation loss).
  std::vector<std::pair<std::int64_t, double>> val_losses;
  /// A healthy run must learn: the last tenth of its losses well below the first steps'; where
  /// the loss is not a progress measure, its progress metric 15% better than at the start, by
  /// the same means (lower: below 0.85x; higher: above the first's by 0.15x its magnitude).
  [[nodiscard]] bool trained() const {
    if (loss_not_progress)
      return std::isfinite(final_metric) && std::isfinite(initial_metric) &&
             (metric_higher_is_better ? final_metric > initial_metric + 0.15 * std::abs(initial_metric)
                                      : final_metric < 0.85 * initial_metric);
    return std::isfinite(final_loss) && final_loss < 0.85 * initial_loss;
  }
};

namespace detail {

/// `sgd_weight_decay`: the L2 term of the SGD optimizers (the ResNet recipe's 5e-4; 0 for the
/// other families); AdamW keeps its decoupled 0.01, Adam has none; RMSprop (alpha 0.99, no
/// momentum) and Adagrad with LibTorch's defaults and no weight decay. `adam_beta1`: Adam's
/// and AdamW's first beta (0.9, LibTorch's default; a GAN's 0.5, DCGAN's).
inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(optimizer o, std::vector<torch::Tensor> params, double lr,
                                                               double sgd_weight_decay = 0.0, double adam_beta1 = 0.9) {
  using namespace torch::optim;
  const double wd = sgd_weight_decay;
  switch (o) {
    case optimizer::sgd: return std::make_unique<SGD>(params, SGDOptions(lr).weight_decay(wd));
    case optimizer::momentum: return std::make_unique<SGD>(params, SGDOptions(lr).momentum(0.9).weight_decay(wd));
    case optimizer::nesterov:
      return std::make_unique<SGD>(params, SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(wd));
    case optimizer::adam: return std::make_unique<Adam>(params, AdamOptions(lr).betas({adam_beta1, 0.999}));
    case optimizer::adamw:
      return std::make_unique<AdamW>(params, AdamWOptions(lr).betas({adam_beta1, 0.999}).weight_decay(0.01));
    case optimizer::rmsprop: return std::make_unique<RMSprop>(params, RMSpropOptions(lr));
    case optimizer::adagrad: return std::make_unique<Adagrad>(params, AdagradOptions(lr));
    // Round 10's quasi_newton builds its own (see build()); this is PyTorch's usual L-BFGS.
    case optimizer::lbfgs: return std::make_unique<LBFGS>(params, LBFGSOptions(lr).line_search_fn("strong_wolfe"));
  }
  return nullptr;
}

/// SGDR's cycle holding step `t`: its first step and its length, the first cycle `t0` steps
/// long and each next one `mult` times the last (PyTorch's CosineAnnealingWarmRestarts).
inline std::pair<std::int64_t, std::int64_t> sgdr_cycle(std::int64_t t, std::int64_t t0, std::int64_t mult) {
  std::int64_t start = 0, length = std::max<std::int64_t>(1, t0);
  while (t >= start + length) {
    start += length;
    length *= mult;
  }
  return {start, length};
}
/// The first cycle's length: a quarter of the run with T_mult 1 (four cycles, or three before
/// SWA's last quarter), a seventh with T_mult 2 (cycles of 1, 2 and 4 sevenths), rounded up so
/// that no restart falls in the run's last steps.
inline std::int64_t sgdr_first_cycle(schedule s, std::int64_t steps) {
  return s == schedule::sgdr_mult2 ? (steps + 6) / 7 : (steps + 3) / 4;
}
/// sgdr_swa: the step stochastic weight averaging starts at, after three cycles.
inline std::int64_t swa_start(std::int64_t steps) { return 3 * ((steps + 3) / 4); }

/// Whether the schedule restarts at `step` on purpose (an SGDR cycle begins, or SWA's schedule
/// takes over): what its user declares as regime_change{optimizer} (docs/declarations.md: "the
/// optimizer or its schedule changes ... a restart").
inline bool schedule_restarts_at(schedule s, std::int64_t step, std::int64_t steps) {
  if (step == 0 || (s != schedule::sgdr && s != schedule::sgdr_mult2 && s != schedule::sgdr_swa)) return false;
  if (s == schedule::sgdr_swa && step >= swa_start(steps)) return step == swa_start(steps);
  return sgdr_cycle(step, sgdr_first_cycle(s, steps), s == schedule::sgdr_mult2 ? 2 : 1).first == step;
}

/// The learning rate of step `step` of `steps` for a peak of `peak`.
inline double scheduled_lr(schedule s, double peak, std::int64_t step, std::int64_t steps) {
  const double t = static_cast<double>(step), n = static_cast<double>(steps);
  constexpr double pi = 3.141592653589793;
  switch (s) {
    case schedule::constant: return peak;
    case schedule::warmup_cosine: {
      // Linear warm-up over the first 5%, cosine down to 10% of the peak.
      const double warm = std::max(1.0, 0.05 * n);
      if (t < warm) return peak * (t + 1.0) / warm;
      const double progress = (t - warm) / std::max(1.0, n - warm);
      return peak * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
    }
    case schedule::step_decay: return peak * (t >= 0.75 * n ? 0.01 : t >= 0.5 * n ? 0.1 : 1.0);
    case schedule::warmup_linear: {
      // Linear warm-up over the first 10%, then linear decay towards 0 at step n (BERT's;
      // Hugging Face's get_linear_schedule_with_warmup): the last step's rate is peak / (n -
      // warm), never 0.
      const double warm = std::max(1.0, 0.1 * n);
      if (t < warm) return peak * (t + 1.0) / warm;
      return peak * (n - t) / std::max(1.0, n - warm);
    }
    case schedule::sgdr:
    case schedule::sgdr_mult2:
    case schedule::sgdr_swa: {
      // CosineAnnealingWarmRestarts with eta_min 0 (PyTorch's default): peak x (1 + cos(pi x
      // T_cur / T_i)) / 2, back at the peak at each cycle's first step.
      const auto cosine = [&](std::int64_t at) {
        const auto [start, length] = sgdr_cycle(at, sgdr_first_cycle(s, steps), s == schedule::sgdr_mult2 ? 2 : 1);
        return peak * 0.5 * (1.0 + std::cos(pi * static_cast<double>(at - start) / static_cast<double>(length)));
      };
      const auto swa = swa_start(steps);
      if (s != schedule::sgdr_swa || step < swa) return cosine(step);
      // SWA's schedule (torch.optim.swa_utils.SWALR): from the last SGDR rate to swa_lr, half the
      // peak, by a cosine over a twentieth of the run, then constant.
      const double swa_lr = 0.5 * peak, from = cosine(swa - 1);
      const double a = std::min(1.0, static_cast<double>(step - swa + 1) /
                                         static_cast<double>(std::max<std::int64_t>(1, steps / 20)));
      const double alpha = 0.5 * (1.0 - std::cos(pi * a));
      return swa_lr * alpha + from * (1.0 - alpha);
    }
  }
  return peak;
}

/// The model and data of a run; `why_not` says what is missing.
struct setup {
  std::shared_ptr<net> model;
  const table* tab = nullptr;
  const text* txt = nullptr;
  std::int64_t classes = 0;  ///< 0: MSE reconstruction (or, with `elbo`, a VAE's loss; with `regression`, MSE on targets)
  /// MSE between the output [N, 1] and the table's float targets (round 11's diffusion: the
  /// output [N, D] and the noise its loop drew; its normalizing_flow: `regression_loss`)
  bool regression = false;
  bool elbo = false;  ///< the VAE's negative ELBO (Bernoulli decoder), in nats per input value
  std::int64_t context = 32;
  double clip = 0.0;  ///< clip_grad_norm_ bound (0: none)
  /// The monitored run fine-tunes a checkpoint, and says so (task::from_checkpoint), as
  /// a user who loads one knows.
  bool from_checkpoint = false;
  double sgd_weight_decay = 0.0;
  /// inputs_not_normalized is planted in the data (the tabular and regression families' raw
  /// features), not by scaling the inputs x255.
  bool raw_inputs = false;
  /// The seq2seq family's targets are its source windows reversed (u.txt windows of
  /// `context` characters).
  bool reverse_text = false;
  /// Losses computed from the model's output alone, labels unused: NT-Xent over
  /// in-batch negatives (contrastive; validation in micro-batches, as the loss depends on the
  /// batch) and skip-gram negative sampling. The output is named "logits" as a classifier's.
  bool nt_xent = false, sgns = false;
  /// The run's setup before its monitored loop, never monitored (the LoRA base's
  /// pre-training, the distillation teacher's training); called by train() outside the lock
  /// that guards initialization, with generators of its own.
  std::function<void()> prepare;
  /// Knowledge distillation from `teacher` (a second model, trained by `prepare`, not
  /// observed and not optimized) at temperature `kd_temperature`, soft-target weight
  /// `kd_alpha`, label smoothing `label_smoothing` (see distill_loss).
  std::shared_ptr<net> teacher;
  double kd_temperature = 1.0, kd_alpha = 0.0, label_smoothing = 0.0;
  /// A regression's loss of (output, targets) in place of MSE (hetero_nll's Gaussian
  /// negative log-likelihood; round 11's flow's negative log-likelihood, targets unused).
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> regression_loss;
  /// The steps of a loop that does more than forward, backward and step, as its user
  /// writes them: `before_step` at the start of each step (qat: fake quantization switched on
  /// after a float warm-up); `after_backward` once the step's gradients are in, before their
  /// norm is taken and the optimizer steps (pruned: the pruned weights' gradients zeroed);
  /// `after_update` after the optimizer step (or the AMP case's skipped one), before the monitor
  /// reads the parameters (pruned: the schedule's new masks, and the masks applied).
  std::function<void(std::int64_t)> before_step, after_update;
  std::function<void()> after_backward;
  /// A loss of (output, labels) in place of the cross-entropy (triplet's margin loss
  /// over the batch's embeddings, focal's focal loss); `classes` stays the labels' count (the
  /// modulus of labels_off_by_one).
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> label_loss;
  /// `label_loss` plants wrong_loss_mse_on_logits itself (round 15's mean_teacher: its
  /// supervised term reads only the batch's labelled rows, the consistency term every row).
  bool label_loss_plants_mse = false;
  /// Whether the monitor is told `classes`, which monitor_config documents as a
  /// cross-entropy task's: not where the loss is another (focal) or the output is no class
  /// logits (triplet's embeddings).
  bool tell_classes = true;
  /// The output is observed as "output", not "logits" (an embedding).
  bool output_not_logits = false;
  /// The run's own batches, given the step (triplet's PK batches, a curriculum's
  /// growing pool), in place of shuffled epochs of the table.
  std::function<std::pair<torch::Tensor, torch::Tensor>(std::int64_t, std::int64_t)> draw;
  /// The validation loss as the family computes it (triplet: the same loss over fixed
  /// held-out micro-batches), given the model in evaluation mode and the input scale.
  std::function<double(net&, double)> validate;
  // Round 9's families: what its user declares (docs/declarations.md), and the loops that are
  // not one forward, backward and optimizer step.
  /// What the training loss is (task::objective): not_progress for a GAN's adversarial loss and
  /// a policy-gradient surrogate.
  mldiag::objective objective = mldiag::objective::minimized;
  /// The progress metric given each step by observe_metric, after the optimizer's step (the
  /// GAN's Fréchet distance, the episodes' return): its name, its direction, and the value of
  /// step `step`. Unset: none.
  std::string metric_name;
  bool metric_higher_is_better = false;
  std::function<double(std::int64_t)> metric;
  /// The steps between two measurements of the metric (round 13's kNN monitor, measured as
  /// self-supervised training code measures it, every so many steps, not every step), given to
  /// the monitor only when measured; the run's record (result::metric_values) carries the last
  /// measurement over the steps between. 1: every step (rounds 9 to 12).
  std::int64_t metric_every = 1;
  /// Tensors meant to grow (monitor::expect_growth: the recommender's embedding tables).
  std::vector<std::string> expect_growth;
  /// An uninformed model's loss when it is not ln(classes) (task::chance_loss: BPR's ln 2).
  std::optional<double> chance_loss;
  /// Each optimizer's learning rates are observed from the optimizer itself
  /// (mldiag::observe_learning_rates, docs/integrations.md), under the optimizer's name, or
  /// under `optimizers`' names where the family has its own.
  bool observe_group_lrs = false;
  /// The run has a validation loss (not a GAN's, nor a policy's: their progress is the metric).
  bool validation = true;
  /// The embedding frozen_embedding leaves out of the optimizer (its module's name).
  std::string frozen_embedding = "embed";
  /// The rows of the output and of the targets that the loss reads (a GCN's labelled nodes,
  /// where the model computes every node); undefined: every row.
  torch::Tensor loss_rows;
  /// `draw` is called every step even where same_batch trains on the first batch again (a
  /// policy's episodes are collected every step, and their return is the metric; the loop
  /// then trains on a stale batch).
  bool draw_every_step = false;
  /// A step that is not one forward, backward and optimizer step (the GAN: its two networks'
  /// alternating updates by optimizers of its own, `optimizers`), given the step's learning
  /// rate, whether gradients are zeroed (no_zero_grad), whether the loss is poisoned with NaN,
  /// whether the optimizers' updates are skipped (the AMP case), the real batch (the input
  /// scale applied) and the taps; it returns the recorded loss, the output observed and the
  /// gradient norm logged. Accumulation is 1 for such a family (its recipe's).
  /// Round 10's quasi_newton also gets the step's labels (labels_off_by_one applied) and the
  /// monitor (null when the run is not monitored), whose step is then open (`open_step_first`):
  /// it observes the loss inside its closure and declares its change of optimizer; it returns
  /// the learning rate of the optimizer in use (NaN: `lr`), that optimizer and its name (for
  /// observe_learning_rates), and whether it observed the loss itself.
  struct custom_step_io {
    std::int64_t step;
    double lr;
    bool zero_grad, nan, skip_update;
    torch::Tensor x;
    taps* tap;
    torch::Tensor y;
    mldiag::monitor* mon = nullptr;
  };
  struct custom_step_result {
    double loss;
    torch::Tensor output;
    double grad_norm;
    double lr = std::numeric_limits<double>::quiet_NaN();
    torch::optim::Optimizer* active = nullptr;
    std::string active_name;
    bool loss_observed = false;
  };
  std::function<custom_step_result(const custom_step_io&)> custom_step;
  std::vector<std::pair<std::string, std::shared_ptr<torch::optim::Optimizer>>> optimizers;
  // Round 10's families: the declarations of issue 38 that round 9 did not use, and the steps
  // their loops add.
  /// The optimizer evaluates the loss several times a step and stops moving at its tolerance
  /// (task::line_search: L-BFGS).
  bool line_search = false;
  /// The lowest loss the objective can reach (task::loss_floor: the soft targets' entropy), or
  /// mldiag::no_lower_bound (learned uncertainty weights).
  std::optional<double> loss_floor;
  /// The monitor's step is opened before the step's work (begin_step), so that the family's
  /// own step can observe into it (quasi_newton's closure, its regime_change).
  bool open_step_first = false;
  /// The layer (or parameter) frozen_layer leaves out of the optimizer: its parameters' names
  /// are it or begin with it and a dot.
  std::string frozen_layer;
  /// Mixup in the training loop, after the loader's labels (labels_off_by_one applied) and the
  /// input scale: (x, labels) -> (mixed x, soft targets [N, C]).
  /// Round 11's diffusion uses it for DDPM's noising: (clean x, labels) -> (x_t, the noise).
  std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor&, const torch::Tensor&)> mix;
  // Declarations issue 38 added after round 8 was written, wired into round 8's kinds as
  // docs/declarations.md tells a user (seen figures: round 8 had been measured before).
  /// Validation drawn unlike training (task::validation_unlike_training: focal's balanced
  /// validation beside its long-tailed training set).
  bool validation_unlike_training = false;
  /// The steps at which the data changes on purpose (regime_change{data}: a curriculum's stage).
  std::function<bool(std::int64_t)> data_changes_at;
  /// The steps at which the schedule restarts on purpose (regime_change{optimizer}: round 14's
  /// warm restarts, and SWA's schedule taking over).
  std::function<bool(std::int64_t)> schedule_changes_at;
  // Round 11's families.
  /// A table the family builds for the run (Fashion-MNIST at 14 x 14, multi-label targets),
  /// which `tab` points to.
  std::shared_ptr<const table> own_table;
  /// labels_off_by_one as the family's labels read one off (multilabel: the label columns
  /// rolled by one, each label given its neighbour's targets); unset: (y + 1) mod classes.
  std::function<torch::Tensor(const torch::Tensor&)> shift_labels;
  std::string why_not;
};

inline setup build(const run_spec& s, const data& d) {
  setup u;
  const bool fashion = s.variant.rfind("fashion", 0) == 0;
  auto need_table = [&]() -> bool {
    u.tab = fashion ? (d.fashion ? &*d.fashion : nullptr) : (d.digits ? &*d.digits : nullptr);
    if (!u.tab) u.why_not = fashion ? "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)" : "the digits are missing";
    return u.tab != nullptr;
  };
  const std::int64_t in = fashion ? 784 : 64;
  if (s.family == "mlp") {
    if (!need_table()) return u;
    std::vector<std::int64_t> hidden = s.variant == "digits-2x64"    ? std::vector<std::int64_t>{64, 64}
                                       : s.variant == "digits-3x128" ? std::vector<std::int64_t>{128, 128, 128}
                                       : s.variant == "digits-1x256" ? std::vector<std::int64_t>{256}
                                                                     : std::vector<std::int64_t>{256, 128};
    u.model = std::make_shared<mlp_net>(in, hidden, 10);
    u.classes = 10;
  } else if (s.family == "cnn") {
    if (!need_table()) return u;
    const bool bn = s.variant.find("bn") != std::string::npos, res = s.variant.find("res") != std::string::npos;
    u.model = std::make_shared<cnn_net>(u.tab->side, bn, res, 10);
    u.classes = 10;
  } else if (s.family == "autoencoder") {
    if (!need_table()) return u;
    std::vector<std::int64_t> widths = s.variant == "digits-32-8"     ? std::vector<std::int64_t>{32, 8}
                                       : s.variant == "digits-128-16" ? std::vector<std::int64_t>{128, 16}
                                       : s.variant == "digits-deep"   ? std::vector<std::int64_t>{64, 32, 16}
                                                                      : std::vector<std::int64_t>{128, 32};
    u.model = std::make_shared<autoencoder_net>(in, widths);
    u.classes = 0;
  } else if (s.family == "moe") {
    if (!need_table()) return u;
    const std::int64_t experts = s.variant == "digits-e8" ? 8 : 4, ffn = s.variant == "digits-e4-wide" ? 256 : 64;
    u.model = std::make_shared<moe_net>(in, 64, experts, ffn, 10);
    u.classes = 10;
  } else if (s.family == "resnet") {
    if (!need_table()) return u;
    using st = resnet_net::stage;
    const bool wide = s.variant == "fashion-res3-w16";
    const std::int64_t w = wide ? 16 : 8;
    // 14 x 14 after the stem; strided blocks: 14 -> 7 -> 4.
    const std::vector<st> stages = s.variant == "fashion-res4-w8"
                                       ? std::vector<st>{{w, 1}, {2 * w, 2}, {2 * w, 1}, {4 * w, 2}}
                                       : std::vector<st>{{w, 1}, {2 * w, 2}, {4 * w, 2}};
    u.model = std::make_shared<resnet_net>(u.tab->side, w, stages, 10);
    u.classes = 10;
    u.sgd_weight_decay = 5e-4;
  } else if (s.family == "text_cnn") {
    u.tab = d.licenses ? &*d.licenses : nullptr;
    if (!u.tab) {
      u.why_not = "fewer than 3 license texts in /usr/share/common-licenses";
      return u;
    }
    const auto V = u.tab->vocab, C = u.tab->classes;
    if (s.variant == "kim-3-5-7")
      u.model =
          std::make_shared<text_cnn_net>(V, 32, std::vector<std::int64_t>{3, 5, 7}, 64, true, C);
    else if (s.variant == "stacked-5-3")
      u.model =
          std::make_shared<text_cnn_net>(V, 32, std::vector<std::int64_t>{5, 3}, 64, false, C);
    else
      u.model = std::make_shared<text_cnn_net>(V, 16, std::vector<std::int64_t>{5}, 128, true, C);
    u.classes = C;
  } else if (s.family == "vae") {
    if (!need_table()) return u;
    const bool deep = s.variant == "fashion-deep-z8", small = s.variant == "fashion-small-z4";
    const std::vector<std::int64_t> widths = deep    ? std::vector<std::int64_t>{256, 64}
                                             : small ? std::vector<std::int64_t>{128}
                                                     : std::vector<std::int64_t>{256};
    const std::int64_t latent = deep ? 8 : small ? 4 : 16;
    u.model = std::make_shared<vae_net>(in, widths, latent, s.seed * 104729 + 3);
    u.classes = 0;
    u.elbo = true;
  } else if (s.family == "tabular") {
    // breast-cancer-*, wine-* or iris-*; *-mlp: two hidden ReLU layers of 32, *-logreg: one
    // Linear (multinomial logistic regression).
    const bool bc = s.variant.rfind("breast-cancer", 0) == 0, wine = s.variant.rfind("wine", 0) == 0;
    const auto& t = bc ? d.breast_cancer : wine ? d.wine : d.iris;
    if (!t) {
      u.why_not = std::string("third_party/data/") + (bc ? "breast_cancer.csv" : wine ? "wine_data.csv" : "iris.csv") +
                  " is missing (scripts/fetch-digits.sh)";
      return u;
    }
    // Unnormalized tabular inputs are the features as the file has them (areas in the
    // thousands beside ratios near 0.01), not x255: that is a pixel bug.
    u.raw_inputs = s.planted == fault::inputs_not_normalized;
    u.tab = u.raw_inputs ? &t->raw : &t->z;
    const bool logreg = s.variant.find("logreg") != std::string::npos;
    u.model = std::make_shared<tabular_net>(u.tab->x_train.size(1),
                                            logreg ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{32, 32},
                                            u.tab->classes);
    u.classes = u.tab->classes;
  } else if (s.family == "vit") {
    if (!need_table()) return u;
    // fashion-p<patch>-d<width>-<cls|mean>: 2 pre-norm blocks, 16-wide heads, MLP 4 x d.
    const std::int64_t patch = s.variant.find("-p4-") != std::string::npos ? 4 : 7;
    const std::int64_t width = s.variant.find("-d64-") != std::string::npos ? 64 : 32;
    u.model = std::make_shared<vit_net>(u.tab->side, patch, width, width / 16, 2, 4 * width,
                                        s.variant.find("-cls") != std::string::npos, 10);
    u.classes = 10;
    u.clip = 1.0;  // as ViTs are trained
  } else if (s.family == "lenet") {
    if (!need_table()) return u;
    const bool relu = s.variant.find("relu-max") != std::string::npos;
    const double dropout = s.variant.find("drop25") != std::string::npos ? 0.25 : 0.5;
    u.model = std::make_shared<lenet_net>(u.tab->side, relu, dropout, 10, s.seed * 104729 + 5);
    u.classes = 10;
  } else if (s.family == "gru_seq") {
    if (!need_table()) return u;
    // fashion-<gru|lstm><hidden>[-clip5]: one layer reading the 28 rows as 28 steps.
    const bool lstm = s.variant.find("lstm") != std::string::npos;
    const std::int64_t hidden = s.variant.find("32") != std::string::npos ? 32 : 64;
    u.model = std::make_shared<seq_rnn_net>(u.tab->side, hidden, lstm, 10);
    u.classes = 10;
    if (s.variant.find("clip5") != std::string::npos) u.clip = 5.0;
  } else if (s.family == "regression") {
    if (!d.diabetes) {
      u.why_not = "third_party/data/diabetes_data.csv or diabetes_target.csv is missing (scripts/fetch-digits.sh)";
      return u;
    }
    // Raw features as the file has them (ages near 50 beside serum values in the hundreds),
    // the target standardized as in a healthy run.
    u.raw_inputs = s.planted == fault::inputs_not_normalized;
    u.tab = u.raw_inputs ? &d.diabetes->raw : &d.diabetes->z;
    const std::vector<std::int64_t> hidden = s.variant == "diabetes-linear"          ? std::vector<std::int64_t>{}
                                             : s.variant == "diabetes-mlp64x64-tanh" ? std::vector<std::int64_t>{64, 64}
                                                                                     : std::vector<std::int64_t>{64};
    u.model = std::make_shared<regression_net>(u.tab->x_train.size(1), hidden, s.variant.find("tanh") != std::string::npos);
    u.classes = 0;
    u.regression = true;
  } else if (s.family == "dwsep_cnn") {
    if (!need_table()) return u;
    // fashion-ds<blocks>-<bn|nobn>-<silu|relu6>: stem 16 channels, 28 -> 14; 3 blocks 32 (14),
    // 64 (7), 128 (4); 2 blocks 32 (7), 64 (4).
    using st = dwsep_net::stage;
    const bool three = s.variant.find("-ds3-") != std::string::npos;
    const std::vector<st> stages = three ? std::vector<st>{{32, 1}, {64, 2}, {128, 2}} : std::vector<st>{{32, 2}, {64, 2}};
    u.model = std::make_shared<dwsep_net>(u.tab->side, 16, stages, s.variant.find("-bn-") != std::string::npos,
                                          s.variant.find("silu") != std::string::npos, 10);
    u.classes = 10;
  } else if (s.family == "seq2seq") {
    // <gpl3|apache>-<gru|lstm><hidden>-w<window>: embedding 32, clip_grad_norm_ 1.
    const bool apache = s.variant.rfind("apache", 0) == 0;
    u.txt = apache ? (d.apache ? &*d.apache : nullptr) : (d.gpl ? &*d.gpl : nullptr);
    if (!u.txt) {
      u.why_not = std::string("the ") + (apache ? "Apache-2.0" : "GPL-3") + " text in /usr/share/common-licenses is missing";
      return u;
    }
    const auto w = s.variant.find("-w");
    u.context = std::stoll(s.variant.substr(w + 2));
    const std::int64_t hidden = s.variant.find("128") != std::string::npos ? 128 : 64;
    u.model = std::make_shared<seq2seq_net>(u.txt->c.vocab, 32, hidden, s.variant.find("lstm") != std::string::npos);
    u.classes = u.txt->c.vocab;
    u.reverse_text = true;
    u.clip = 1.0;
  } else if (s.family == "contrastive") {
    if (!need_table()) return u;
    // fashion-c<convs>-<mlp|linear>-t<temperature>.
    const int convs = s.variant.find("-c3-") != std::string::npos ? 3 : 2;
    const double tau = std::stod(s.variant.substr(s.variant.find("-t") + 2));
    u.model = std::make_shared<contrastive_net>(u.tab->side, convs, s.variant.find("-mlp-") != std::string::npos, tau,
                                                s.seed * 104729 + 7);
    u.classes = 0;
    u.nt_xent = true;
  } else if (s.family == "skipgram") {
    if (!d.words) {
      u.why_not = "the license texts in /usr/share/common-licenses are missing (package base-files)";
      return u;
    }
    // licenses-d<dimension>-w<window>: 5 negatives.
    const auto w = std::stoll(s.variant.substr(s.variant.find("-w") + 2));
    const auto dim = std::stoll(s.variant.substr(s.variant.find("-d") + 2));
    u.tab = &d.words->by_window[static_cast<std::size_t>(w - 1)];
    u.model = std::make_shared<skipgram_net>(d.words->vocab, dim, d.words->counts, 5, s.seed * 104729 + 11);
    u.classes = 0;
    u.sgns = true;
  } else if (s.family == "lora") {
    // fashion-<mlp|rows>-r<rank>-<all|newhead|qv>: alpha = 2 x rank. The base is pre-trained on
    // classes 0-4 (prepare: Adam 1e-3, 300 steps of 64, its own generator), then frozen; the
    // monitored run fine-tunes on classes 5-9. The monitor sees the whole module, frozen base
    // weights included, as a user who hands it the model (observe_module, mldiag's
    // module_observer) does: their updates are exactly 0 and they have no gradient, every step;
    // a user who registered only the trainable parameters would hide that, and the detectors
    // must cope with the common case.
    if (!d.fashion_first5 || !d.fashion_last5) {
      u.why_not = "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)";
      return u;
    }
    const bool rows = s.variant.find("-rows-") != std::string::npos;
    const std::int64_t rank = s.variant.find("-r8-") != std::string::npos ? 8 : 4;
    const bool new_head = s.variant.find("-all") == std::string::npos;
    auto m = std::make_shared<lora_net>(rows, rank, 2.0 * static_cast<double>(rank), new_head, 5);
    u.model = m;
    u.tab = &*d.fashion_last5;
    u.classes = 5;
    u.from_checkpoint = true;
    if (rows) u.clip = 1.0;  // as transformers are trained
    const auto* base_task = &*d.fashion_first5;
    const auto seed = s.seed * 104729 + 13;
    u.prepare = [m, base_task, seed] {
      fit_unmonitored(*m, m->base_parameters(), *base_task, 300, 64, 1e-3, seed);
      m->start_fine_tuning();
    };
  } else if (s.family == "fixup") {
    if (!need_table()) return u;
    // <digits|fashion>-<rezero|fixup|zerolast>-<blocks>x<channels>.
    const auto kind = s.variant.find("-rezero-") != std::string::npos  ? zero_branch::rezero
                      : s.variant.find("-fixup-") != std::string::npos ? zero_branch::fixup
                                                                        : zero_branch::zero_last;
    const auto last = s.variant.rfind('-'), x = s.variant.rfind('x');
    const auto blocks = std::stoll(s.variant.substr(last + 1, x - last - 1));
    const auto channels = std::stoll(s.variant.substr(x + 1));
    u.model = std::make_shared<zero_resnet_net>(u.tab->side, kind, blocks, channels, 10);
    u.classes = 10;
  } else if (s.family == "distill") {
    if (!need_table()) return u;
    // <fashion|digits>-<mlp<hidden>|cnn>-t<T>-a<alpha>-ls<smoothing>. The teacher is built here
    // (its initialization under train()'s lock) and trained by prepare on the whole training
    // table (Adam 1e-3, 500 steps of 64, its own generator); the monitor observes the student.
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const auto hidden = cnn ? 32 : std::stoll(s.variant.substr(s.variant.find("-mlp") + 4));
    u.model = std::make_shared<student_net>(u.tab->side, cnn, hidden, 10);
    u.classes = 10;
    u.kd_temperature = std::stod(s.variant.substr(s.variant.find("-t") + 2));
    u.kd_alpha = std::stod(s.variant.substr(s.variant.find("-a") + 2));
    u.label_smoothing = std::stod(s.variant.substr(s.variant.find("-ls") + 3));
    const auto widths = fashion ? std::vector<std::int64_t>{256, 128} : std::vector<std::int64_t>{256, 256};
    auto teacher = std::make_shared<mlp_net>(in, widths, 10);
    u.teacher = teacher;
    const auto* t = u.tab;
    const auto seed = s.seed * 104729 + 17;
    u.prepare = [teacher, t, seed] {
      fit_unmonitored(*teacher, teacher->parameters(), *t, 500, 64, 1e-3, seed);
      for (auto& p : teacher->parameters()) p.requires_grad_(false);
      teacher->eval();
    };
  } else if (s.family == "hetero_nll") {
    // <diabetes|breast-cancer-smoothness>-mlp<widths>-<softplus|logvar|betanll<beta>>: ReLU
    // layers, a mean head and a variance head (log-variance but for softplus), the Gaussian NLL.
    const bool bc = s.variant.rfind("breast-cancer-smoothness", 0) == 0;
    const auto& t = bc ? d.breast_cancer_smoothness : d.diabetes;
    if (!t) {
      u.why_not = std::string("third_party/data/") + (bc ? "breast_cancer.csv" : "diabetes_data.csv or diabetes_target.csv") +
                  " is missing (scripts/fetch-digits.sh)";
      return u;
    }
    // Raw features as the file has them (breast cancer: areas in the hundreds to 4254 beside
    // fractal dimensions near 0.06), the target standardized as in a healthy run, as in the
    // regression family.
    u.raw_inputs = s.planted == fault::inputs_not_normalized;
    u.tab = u.raw_inputs ? &t->raw : &t->z;
    const auto head = s.variant.find("-softplus") != std::string::npos ? variance_head::softplus : variance_head::log_var;
    const auto b = s.variant.find("-betanll");
    const double beta = b == std::string::npos ? 0.0 : std::stod(s.variant.substr(b + 8));
    u.model = std::make_shared<hetero_net>(u.tab->x_train.size(1), widths_after(s.variant, "-mlp"), head);
    u.classes = 0;
    u.regression = true;
    u.regression_loss = [head, beta](const torch::Tensor& out, const torch::Tensor& y) {
      return gaussian_nll(out, y, head, beta);
    };
  } else if (s.family == "pruned") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|lenet300|cnn>-s<final sparsity>: pruned from 20% to 70%
    // of the run's steps (see magnitude_pruner).
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const auto widths = s.variant.find("-lenet300-") != std::string::npos ? std::vector<std::int64_t>{300, 100}
                                                                           : widths_after(s.variant, "-mlp");
    const double sparsity = std::stod(s.variant.substr(s.variant.rfind("-s") + 2));
    auto m = std::make_shared<pruned_net>(u.tab->side, cnn, widths, 10, sparsity, s.steps);
    u.model = m;
    u.classes = 10;
    u.after_backward = [m] { m->pruner->mask_gradients(); };
    u.after_update = [m](std::int64_t step) { m->pruner->update(step); };
  } else if (s.family == "qat") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn>-w<bits>a8[-delayed]: `-delayed` trains in float for
    // the first quarter of the steps, then switches fake quantization (and its observers) on.
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const int bits = s.variant.find("-w4a8") != std::string::npos ? 4 : 8;
    const bool delayed = s.variant.find("-delayed") != std::string::npos;
    auto m = std::make_shared<qat_net>(u.tab->side, cnn, widths_after(s.variant, "-mlp"), 10, bits, !delayed);
    u.model = m;
    u.classes = 10;
    if (delayed) {
      const auto start = s.steps / 4;
      u.before_step = [m, start](std::int64_t step) {
        if (step == start) m->enable_fake_quant();
      };
    }
  } else if (s.family == "triplet") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn>-e<dimension>-<l2|raw>-m<margin>-<random|batchhard|semihard>:
    // an embedding of `dimension`, L2-normalized or not, trained by the triplet margin loss
    // over PK batches (see pk_sampler, triplet_loss). No class logits: the monitor is not told
    // classes, and the output is observed as "output". The CNN's fc1 is 128 wide.
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const auto widths = cnn ? std::vector<std::int64_t>{128} : widths_after(s.variant, "-mlp");
    const auto dimension = std::stoll(s.variant.substr(s.variant.find("-e") + 2));
    const bool l2 = s.variant.find("-l2-") != std::string::npos;
    const double margin = std::stod(s.variant.substr(s.variant.rfind("-m") + 2));
    const auto mining = s.variant.find("-batchhard") != std::string::npos  ? triplet_mining::batch_hard
                        : s.variant.find("-semihard") != std::string::npos ? triplet_mining::semi_hard
                                                                           : triplet_mining::random;
    u.model = std::make_shared<mlp_or_cnn_net>(u.tab->side, cnn, widths, dimension, l2, "embedding");
    u.classes = u.tab->classes;  // the labels' count (labels_off_by_one's modulus), not told to the monitor
    u.tell_classes = false;
    u.output_not_logits = true;
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 104729 + 19));
    u.label_loss = [mining, margin, gen](const torch::Tensor& e, const torch::Tensor& y) {
      return triplet_loss(e, y, mining, margin, *gen);
    };
    auto pk = std::make_shared<pk_sampler>(*u.tab, false, s.seed * 7919 + 13);
    u.draw = [pk](std::int64_t, std::int64_t b) { return pk->draw(b); };
    // Validation: the same loss over fixed PK micro-batches of the training micro-batch's size
    // from the held-out rows (512 / batch of them, at least one), its random triplets drawn by a
    // generator seeded afresh at each evaluation: the same held-out triplets every time. In
    // micro-batches, as the contrastive family's: the hardest triplets depend on the batch.
    pk_sampler held_out(*u.tab, true, 424242);
    auto val = std::make_shared<std::vector<std::pair<torch::Tensor, torch::Tensor>>>();
    for (std::int64_t i = 0; i < std::max<std::int64_t>(1, 512 / s.batch); ++i) val->push_back(held_out.draw(s.batch));
    u.validate = [val, mining, margin](net& m, double input_scale) {
      torch::Generator g = at::detail::createCPUGenerator(424243);
      double sum = 0.0;
      for (const auto& [x, y] : *val) {
        taps t;
        sum += triplet_loss(m.forward(x * input_scale, t), y, mining, margin, g).item<double>();
      }
      return sum / static_cast<double>(val->size());
    };
  } else if (s.family == "focal") {
    // <digits-step10|fashion-lt20|fashion-lt10>-<mlp<widths>|cnn>-g<gamma>[-cb<beta>][-ls<smoothing>]:
    // a classifier on a class-imbalanced copy of the table (see step_imbalanced, long_tailed;
    // shuffled epochs of it, no re-sampling: the focal loss is the remedy), trained by the focal
    // loss (see focal_loss), class-balanced weights (Cui et al.) where `-cb`, label smoothing
    // where `-ls`. The CNN's fc1 is 64 wide. The monitor is not told classes: monitor_config
    // documents `classes` as a cross-entropy task's (see spec.hpp's comment on the family).
    const bool digits = s.variant.rfind("digits-step10", 0) == 0, lt20 = s.variant.rfind("fashion-lt20", 0) == 0;
    const auto& t = digits ? d.digits_step10 : lt20 ? d.fashion_lt20 : d.fashion_lt10;
    if (!t) {
      u.why_not = digits ? "the digits are missing" : "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)";
      return u;
    }
    u.tab = &*t;
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const auto widths = cnn ? std::vector<std::int64_t>{64} : widths_after(s.variant, "-mlp");
    const double gamma = std::stod(s.variant.substr(s.variant.find("-g") + 2));
    const auto cb = s.variant.find("-cb"), ls = s.variant.find("-ls");
    const auto alpha = cb == std::string::npos ? torch::Tensor()
                                               : class_balanced_weights(*u.tab, std::stod(s.variant.substr(cb + 3)));
    const double smoothing = ls == std::string::npos ? 0.0 : std::stod(s.variant.substr(ls + 3));
    u.model = std::make_shared<mlp_or_cnn_net>(u.tab->side, cnn, widths, 10, false, "head");
    u.classes = 10;
    u.tell_classes = false;
    u.validation_unlike_training = true;  // long-tailed training, balanced validation
    u.label_loss = [gamma, alpha, smoothing](const torch::Tensor& out, const torch::Tensor& y) {
      return focal_loss(out, y, gamma, alpha, smoothing);
    };
  } else if (s.family == "curriculum") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn>-<classes<n1>-<n2>-<n3>|sqrt<c0>-dist>: a classifier
    // (cross-entropy, 10 classes, the monitor told 10) whose batches come from a curriculum
    // (see curriculum_sampler): `classes`, stages of the first n1, n2, n3 classes of an
    // easy-first order from 0, 1/8 and 1/4 of the run's steps; `sqrt`, Platanios et al.'s
    // square-root competence from c0 of the rows sorted by distance to their class's mean
    // image, all of them from half the run's steps on. Validation: every class. The CNN's fc1 is
    // 64 wide.
    const bool cnn = s.variant.find("-cnn-") != std::string::npos;
    const auto widths = cnn ? std::vector<std::int64_t>{64} : widths_after(s.variant, "-mlp");
    u.model = std::make_shared<mlp_or_cnn_net>(u.tab->side, cnn, widths, 10, false, "head");
    u.classes = 10;
    auto cs = std::make_shared<curriculum_sampler>(*u.tab, s.steps, s.seed * 7919 + 13);
    const auto sq = s.variant.find("-sqrt");
    if (sq != std::string::npos) {
      cs->pace_by_distance_to_class_mean(std::stod(s.variant.substr(sq + 5)), 0.5);
    } else {
      // The digits in label order (no prior on which are easy); Fashion-MNIST easy first by a
      // plain classifier's per-class accuracy as commonly reported: trouser, bag, sandal,
      // sneaker, ankle boot, dress, coat, pullover, T-shirt, shirt.
      const std::vector<std::int64_t> order = fashion ? std::vector<std::int64_t>{1, 8, 5, 7, 9, 3, 4, 2, 0, 6}
                                                      : std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
      std::vector<std::int64_t> n;  // "-classes3-6-10": {3, 6, 10}
      for (std::size_t at = s.variant.find("-classes") + 8; at < s.variant.size();) {
        std::size_t used = 0;
        n.push_back(std::stoll(s.variant.substr(at), &used));
        at += used + 1;
      }
      for (std::size_t k = 0; k < n.size(); ++k)
        cs->add_stage(0.125 * static_cast<double>(k),
                      std::vector<std::int64_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n[k])));
      // Stages train on a few classes while validation holds all ten: validation is drawn
      // unlike training by design, as docs/declarations.md has a user say.
      u.validation_unlike_training = true;
    }
    u.draw = [cs](std::int64_t step, std::int64_t b) { return cs->draw(step, b); };
    // A stage is a change of data made on purpose; smooth pacing grows the pool every step and
    // has no one step to declare.
    u.data_changes_at = [cs](std::int64_t step) { return cs->stage_starts(step); };
  } else if (s.family == "adversarial") {
    if (!need_table()) return u;
    // <digits|fashion>-mlp<widths>[-bn]-<ns|ls>-z<latent>: a GAN (see gan_net, gan_step), its
    // two networks one module, each with an optimizer of its own of the run's kind, rate and
    // schedule (Adam's and AdamW's beta1 0.5, DCGAN's). The recorded loss is the generator's;
    // the run declares that it is not a progress measure and gives the Fréchet distance of a
    // classifier's features (see frechet_metric) every step, lower is better. No validation
    // loss. The generated batch is observed as "output".
    const std::int64_t z_dim = std::stoll(s.variant.substr(s.variant.rfind("-z") + 2));
    const auto objective =
        s.variant.find("-ls-") != std::string::npos ? gan_objective::least_squares : gan_objective::non_saturating;
    auto m = std::make_shared<gan_net>(u.tab->side, z_dim, widths_after(s.variant, "-mlp"),
                                       s.variant.find("-bn-") != std::string::npos);
    u.model = m;
    u.classes = 0;
    u.validation = false;
    std::shared_ptr<torch::optim::Optimizer> opt_g = make_optimizer(s.opt, m->generator_parameters(), s.lr, 0.0, 0.5);
    std::shared_ptr<torch::optim::Optimizer> opt_d = make_optimizer(s.opt, m->discriminator_parameters(), s.lr, 0.0, 0.5);
    u.optimizers = {{"generator", opt_g}, {"discriminator", opt_d}};
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 104729 + 23));
    auto* mp = m.get();
    u.custom_step = [mp, opt_g, opt_d, objective, gen](const setup::custom_step_io& io) -> setup::custom_step_result {
      for (auto* o : {opt_g.get(), opt_d.get()})
        for (auto& g : o->param_groups()) g.options().set_lr(io.lr);
      const auto r = gan_step(*mp, *opt_g, *opt_d, objective, io.x, *gen, io.zero_grad, io.nan, io.skip_update, *io.tap);
      return {r.loss, r.generated, r.grad_norm};
    };
    auto fd = std::make_shared<frechet_metric>(in, fashion ? 128 : 64);
    const auto* t = u.tab;
    const auto seed = s.seed * 104729 + 29;
    u.prepare = [fd, t, z_dim, seed] { fd->prepare(*t, z_dim, seed); };
    u.objective = mldiag::objective::not_progress;
    u.metric_name = "frechet_distance";
    u.metric_higher_is_better = false;
    u.metric = [fd, mp](std::int64_t) { return (*fd)(*mp); };
    u.observe_group_lrs = true;
  } else if (s.family == "policy_gradient") {
    // <cartpole|digits-bandit10>-mlp<hidden>-<return|rtg|ent<beta>>: REINFORCE
    // (see pg_rollout): a batch of `batch` episodes collected each micro-batch with the current
    // policy, the surrogate over their steps. The run declares that the surrogate is not a
    // progress measure and gives the episodes' mean return every step, higher is better. No
    // validation loss. Not told classes: the actions' logits are no classifier's.
    const bool bandit = s.variant.rfind("digits-bandit", 0) == 0;
    if (bandit && !need_table()) return u;
    const std::int64_t hidden = widths_after(s.variant, "-mlp").front();
    auto m = std::make_shared<policy_net>(bandit ? 64 : 4, hidden, bandit ? 10 : 2);
    u.model = m;
    u.classes = bandit ? 10 : 2;
    u.tell_classes = false;
    const auto kind = bandit                                            ? pg_advantage::bandit_reward
                      : s.variant.find("-rtg") != std::string::npos ? pg_advantage::reward_to_go
                                                                     : pg_advantage::episode_return;
    const auto ent = s.variant.find("-ent");
    const double entropy = ent == std::string::npos ? 0.0 : std::stod(s.variant.substr(ent + 4));
    auto roll = std::make_shared<pg_rollout>(m.get(), kind, bandit ? u.tab : nullptr, entropy, s.seed * 7919 + 17);
    u.draw = [roll](std::int64_t, std::int64_t b) { return roll->collect(b); };
    u.draw_every_step = true;
    u.label_loss = [roll](const torch::Tensor& out, const torch::Tensor& y) { return roll->surrogate(out, y); };
    u.objective = mldiag::objective::not_progress;
    u.metric_name = "return";
    u.metric_higher_is_better = true;
    u.metric = [roll](std::int64_t) { return roll->take_mean_return(); };
    u.validation = false;
    u.observe_group_lrs = true;
  } else if (s.family == "recommender") {
    // <explicit|implicit>-<mf|twotower>-d<dimension>[-mlp<hidden>]-<mse|bpr>: on the synthetic
    // ratings (see synthetic_ratings; the same data in every run), user and item ids in.
    // Explicit: predicted ratings, MSE + 0.02 x the batch's squared embedding rows and biases
    // (Funk's and Koren et al.'s lambda 0.02), validated by the MSE of the validation ratings.
    // Implicit: BPR over (user, positive, negative) triples with fresh uniform negatives (see
    // bpr_sampler), + 0.01 x the same squares, validated by the BPR loss of the validation
    // positives with negatives drawn once. The run declares that the embedding tables are meant
    // to grow and, for BPR, that an uninformed model's loss is ln 2. frozen_embedding leaves out
    // the items' embedding.
    static const ratings feedback = synthetic_ratings();
    const bool implicit = s.variant.rfind("implicit", 0) == 0;
    const bool two_tower = s.variant.find("-twotower-") != std::string::npos;
    const std::int64_t dim = std::stoll(s.variant.substr(s.variant.find("-d") + 2));
    const std::int64_t hidden = two_tower ? widths_after(s.variant, "-mlp").front() : 0;
    auto m = std::make_shared<recommender_net>(feedback.users, feedback.items, dim, two_tower, hidden, !implicit, feedback.mean_rating);
    u.model = m;
    u.tab = implicit ? &feedback.implicit_feedback : &feedback.explicit_feedback;
    u.classes = 0;
    u.regression = true;
    auto* mp = m.get();
    if (implicit) {
      u.regression_loss = [mp](const torch::Tensor& out, const torch::Tensor&) { return bpr_loss(out) + 0.01 * mp->last_l2; };
      auto bs = std::make_shared<bpr_sampler>(feedback, s.seed * 7919 + 13);
      u.draw = [bs](std::int64_t, std::int64_t b) { return bs->draw(b); };
      std::mt19937_64 rng(424242);
      const auto val = bpr_sampler(feedback, 424242).with_negatives(feedback.implicit_feedback.x_val, rng);
      u.validate = [val](net& model, double) {
        taps t;
        return bpr_loss(model.forward(val, t)).item<double>();
      };
      u.chance_loss = std::log(2.0);
    } else {
      u.regression_loss = [mp](const torch::Tensor& out, const torch::Tensor& y) {
        return torch::mse_loss(out, y) + 0.02 * mp->last_l2;
      };
      const auto* t = u.tab;
      u.validate = [t](net& model, double) {
        taps vt;
        return torch::mse_loss(model.forward(t->x_val, vt), t->y_val).item<double>();
      };
    }
    u.expect_growth = {"user_embedding", "item_embedding"};
    u.frozen_embedding = "item_embedding";
    u.observe_group_lrs = true;
  } else if (s.family == "graph") {
    // sbm<nodes>-c<classes>-f<features>-gcn<hidden>-drop<p>[-mean]: a two-layer GCN (see gcn_net)
    // on a stochastic block model (see stochastic_block_model: expected degree 8, 3/4 of a
    // node's edges within its class; the graph fixed by the variant, the same in every run),
    // full-batch: every step reads every node (the run's batch is `full_batch`, which the
    // monitor is told, task::full_batch), the loss the cross-entropy of the 20 training nodes
    // per class plus Kipf's 5e-4 x ||W1||^2 / 2; validation the cross-entropy of 500 other
    // nodes. `-mean`: D^-1 (A + I) in place of D^-1/2 (A + I) D^-1/2. Told the classes.
    const auto number_after = [&](const std::string& tag) {
      return std::stoll(s.variant.substr(s.variant.find(tag) + tag.size()));
    };
    const std::int64_t nodes = number_after("sbm"), c = number_after("-c"), features = number_after("-f"),
                       hidden = number_after("-gcn");
    const double dropout = std::stod(s.variant.substr(s.variant.find("-drop") + 5));
    const bool mean = s.variant.find("-mean") != std::string::npos;
    auto g = std::make_shared<sbm_graph>(
        stochastic_block_model(nodes, c, features, 6.0, 2.0, !mean, 7 + static_cast<std::uint64_t>(nodes)));
    auto m = std::make_shared<gcn_net>(g->adjacency, features, hidden, c, dropout, s.seed * 104729 + 31);
    u.model = m;
    u.classes = c;
    u.loss_rows = g->train_nodes;
    u.draw = [g](std::int64_t, std::int64_t) { return std::make_pair(g->features, g->labels); };
    auto* mp = m.get();
    u.label_loss = [mp](const torch::Tensor& out, const torch::Tensor& y) {
      return torch::nn::functional::cross_entropy(out, y) + 5e-4 * 0.5 * mp->gc1->weight.pow(2).sum();
    };
    u.validate = [g](net& model, double scale) {
      taps t;
      const auto out = model.forward(g->features * scale, t);
      return torch::nn::functional::cross_entropy(out.index_select(0, g->val_nodes), g->labels.index_select(0, g->val_nodes))
          .item<double>();
    };
    u.observe_group_lrs = true;
  } else if (s.family == "quasi_newton") {
    if (!need_table()) return u;
    // digits-<logreg|mlp<width>-tanh>[-adam-lbfgs]-l2-<after|closure>: full-batch L-BFGS with a
    // closure (see quasi_newton_trainer): LibTorch's LBFGS at the run's rate (the line search's
    // first step), 20 iterations a step, strong Wolfe; the objective cross-entropy + 1e-3 x half
    // the squared weights. `-adam-lbfgs`: Adam (1e-2 x the run's rate) for the first half of
    // the steps, declared (regime_change{optimizer}) at the switch. `-closure`: the loss is
    // observed inside the closure, at every evaluation; `-after`: the loss step() returns,
    // once. The whole training set every step, in its fixed order (the user's X and y); told
    // the classes, that every step reads the whole set (full_batch) and that the optimizer
    // evaluates the loss several times a step (line_search). Validation: the cross-entropy.
    const bool logreg = s.variant.find("-logreg") != std::string::npos;
    const auto hidden = logreg ? std::vector<std::int64_t>{} : widths_after(s.variant, "-mlp");
    auto m = std::make_shared<smooth_mlp_net>(in, hidden, 10);
    u.model = m;
    u.classes = 10;
    u.line_search = true;
    u.frozen_layer = "fc1";
    const auto params = parameters_but(*m, s.planted == fault::frozen_layer ? u.frozen_layer : std::string());
    auto tr = std::make_shared<quasi_newton_trainer>();
    tr->model = m.get();
    tr->l2 = 1e-3;
    tr->record_in_closure = s.variant.find("-closure") != std::string::npos;
    tr->mse_on_logits = s.planted == fault::wrong_loss_mse_on_logits;
    tr->lbfgs = std::make_shared<torch::optim::LBFGS>(
        params, torch::optim::LBFGSOptions(s.lr).max_iter(20).history_size(logreg ? 10 : 100).line_search_fn("strong_wolfe"));
    if (s.variant.find("-adam-lbfgs") != std::string::npos) {
      tr->adam = std::make_shared<torch::optim::Adam>(params, torch::optim::AdamOptions(s.lr * tr->adam_lr_ratio));
      tr->switch_at = s.steps / 2;
    }
    const auto* t = u.tab;
    u.draw = [t](std::int64_t, std::int64_t) { return std::make_pair(t->x_train, t->y_train); };
    u.custom_step = [tr](const setup::custom_step_io& io) -> setup::custom_step_result {
      const auto r = tr->step(io.step, io.lr, io.x, io.y, io.zero_grad, io.nan, *io.tap, io.mon);
      return {r.loss, r.logits, r.grad_norm, r.lr, r.active, r.active_name, tr->record_in_closure};
    };
    u.open_step_first = true;
    u.observe_group_lrs = true;
  } else if (s.family == "uncertainty_multitask") {
    if (!need_table()) return u;
    // <digits|fashion>-mlp<widths>-cls-recon[-centroid][-kendall]: a shared trunk, the class,
    // the image's reconstruction and (`-centroid`) the ink's centroid, weighted by learned
    // uncertainty (see multitask_net, uncertainty_loss; `-kendall`: Kendall et al.'s halves).
    // The recorded loss is the weighted total, which has no lower bound (told: loss_floor =
    // no_lower_bound); validation the same total over the first 512 validation images. Not
    // told the classes: the total is not a cross-entropy.
    const bool centroid = s.variant.find("-centroid") != std::string::npos;
    auto m = std::make_shared<multitask_net>(in, widths_after(s.variant, "-mlp"), 10, centroid);
    u.model = m;
    u.classes = 10;
    u.tell_classes = false;
    auto lf = std::make_shared<uncertainty_loss>();
    lf->model = m.get();
    lf->weighting = s.variant.find("-kendall") != std::string::npos ? uncertainty_weighting::kendall
                                                                     : uncertainty_weighting::plain;
    lf->side = u.tab->side;
    if (centroid) {
      const auto c = ink_centroid(u.tab->x_train, u.tab->side);
      lf->centroid_mean = c.mean(0);
      lf->centroid_sd = c.std(0);
    }
    u.label_loss = [lf](const torch::Tensor& out, const torch::Tensor& y) { return (*lf)(out, y); };
    const auto* t = u.tab;
    u.validate = [lf, t](net& model, double scale) {
      taps vt;
      const auto n = std::min<std::int64_t>(512, t->x_val.size(0));
      const auto out = model.forward(t->x_val.slice(0, 0, n) * scale, vt);
      return (*lf)(out, t->y_val.slice(0, 0, n)).item<double>();
    };
    u.loss_floor = mldiag::no_lower_bound;
    u.frozen_layer = "log_vars";
    u.observe_group_lrs = true;
  } else if (s.family == "actor_critic") {
    // cartpole-<shared<hidden>-mc|separate<hidden>-gae0.95-ent<c>|ppo<hidden>-clip0.2-epochs<k>>:
    // an actor-critic on CartPole (see actor_critic_net, ac_rollout), a batch of `batch` whole
    // episodes collected by the current policy each step (PPO: every `k` steps). The loss
    // declared not a progress measure, the batch's mean return the metric, higher is better;
    // clip_grad_norm_ 0.5 but for the shared variant (PyTorch's example clips nothing). No
    // validation loss; not told classes.
    const bool shared = s.variant.find("-shared") != std::string::npos;
    const bool ppo = s.variant.find("-ppo") != std::string::npos;
    const std::int64_t hidden = widths_after(s.variant, shared ? "-shared" : ppo ? "-ppo" : "-separate").front();
    auto m = std::make_shared<actor_critic_net>(4, hidden, 2, shared);
    u.model = m;
    u.classes = 2;
    u.tell_classes = false;
    const auto kind = shared ? ac_kind::monte_carlo : ppo ? ac_kind::ppo : ac_kind::gae;
    const auto ent = s.variant.find("-ent");
    const double entropy = ent == std::string::npos ? 0.0 : std::stod(s.variant.substr(ent + 4));
    const auto ep = s.variant.find("-epochs");
    const std::int64_t epochs = ep == std::string::npos ? 1 : std::stoll(s.variant.substr(ep + 7));
    auto roll = std::make_shared<ac_rollout>(m.get(), kind, entropy, epochs, s.seed * 7919 + 17);
    u.draw = [roll](std::int64_t step, std::int64_t b) { return roll->draw(step, b); };
    u.draw_every_step = true;
    u.label_loss = [roll](const torch::Tensor& out, const torch::Tensor& y) { return roll->loss(out, y); };
    u.objective = mldiag::objective::not_progress;
    u.metric_name = "return";
    u.metric_higher_is_better = true;
    u.metric = [roll](std::int64_t) { return roll->last_return; };
    u.validation = false;
    if (!shared) u.clip = 0.5;
    u.observe_group_lrs = true;
  } else if (s.family == "soft_targets") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<hidden>|cnn16x32>[-ls<eps>][-mixup<alpha>]: a classifier (see
    // soft_target_net) trained by cross-entropy against soft targets: labels smoothed by eps
    // (`-ls`), mixed by mixup (`-mixup`, in the loop after the loader: see mixup). Told the
    // classes and the loss floor: the smoothed targets' entropy (smoothed_entropy: 0.500 for
    // eps 0.1 over 10 classes), or with mixup the mixed targets' expected entropy
    // (mixup_floor), the lowest loss cross-entropy against them can reach. Validation: the plain
    // cross-entropy of the first 512 validation images (timm's validate()).
    const bool cnn = s.variant.find("-cnn") != std::string::npos;
    const std::int64_t hidden = cnn ? 64 : widths_after(s.variant, "-mlp").front();
    u.model = std::make_shared<soft_target_net>(u.tab->side, cnn, hidden, 10);
    u.classes = 10;
    const auto ls = s.variant.find("-ls"), mx = s.variant.find("-mixup");
    const double eps = ls == std::string::npos ? 0.0 : std::stod(s.variant.substr(ls + 3));
    if (mx != std::string::npos) {
      const double alpha = std::stod(s.variant.substr(mx + 6));
      auto mix = std::make_shared<mixup>(alpha, eps, 10, s.seed * 7919 + 23);
      u.mix = [mix](const torch::Tensor& x, const torch::Tensor& y) { return (*mix)(x, y); };
      u.loss_floor = mixup_floor(alpha, eps, 10);
    } else {
      u.loss_floor = smoothed_entropy(eps, 10);
    }
    u.label_loss = [eps](const torch::Tensor& out, const torch::Tensor& y) { return soft_cross_entropy(out, y, eps); };
    const auto* t = u.tab;
    u.validate = [t](net& model, double scale) {
      taps vt;
      const auto n = std::min<std::int64_t>(512, t->x_val.size(0));
      return torch::nn::functional::cross_entropy(model.forward(t->x_val.slice(0, 0, n) * scale, vt),
                                                  t->y_val.slice(0, 0, n))
          .item<double>();
    };
    u.observe_group_lrs = true;
  } else if (s.family == "diffusion") {
    // <swissroll|fashion14>-<mlp<widths>|conv<c1>x<c2>>-<sin|learned>-<linear|cosine>-t<T>: a
    // DDPM denoiser (see denoiser_net) trained to predict the noise added at a random timestep
    // of T (ddpm_noising, in the loop after the loader and the input scale, as a user's loop
    // noises its batch), MSE on the noise. The Swiss roll drawn fresh each step from the run's
    // own generator (toy_stream); Fashion-MNIST at 14 x 14 in [-1, 1] (fashion14, the first
    // 20000 training images). Told the chance loss: a denoiser that predicts 0, the noise's
    // mean, costs exactly 1, the noise's variance (docs/declarations.md: an uninformed model's
    // loss, classes or not). Not told classes (no classes), nor a loss floor (the noise MSE's
    // floor is above 0 and unknown). Validation: the same MSE on held-out data at fixed
    // timesteps and noise (ddpm_validation).
    const bool toy = s.variant.rfind("swissroll", 0) == 0;
    const bool conv = s.variant.find("-conv") != std::string::npos;
    const auto T = std::stoll(s.variant.substr(s.variant.rfind("-t") + 2));
    torch::Tensor val_x0;
    std::int64_t dim = 2;
    if (toy) {
      auto stream = std::make_shared<toy_stream>(toy_kind::swiss_roll, s.seed * 7919 + 29);
      u.draw = [stream](std::int64_t, std::int64_t b) { return stream->draw(b); };
      val_x0 = stream->val;
    } else {
      if (!need_table()) return u;
      auto t = std::make_shared<table>(fashion14(*u.tab, 20000));
      u.tab = t.get();
      u.own_table = t;
      val_x0 = t->x_val;
      dim = 196;
    }
    const auto w = widths_after(s.variant, conv ? "-conv" : "-mlp");
    auto m = std::make_shared<denoiser_net>(dim, w.front(), static_cast<std::int64_t>(w.size()), conv, w.back(),
                                            s.variant.find("-learned") != std::string::npos, T);
    u.model = m;
    auto noising = std::make_shared<ddpm_noising>(noise_schedule(T, s.variant.find("-cosine") != std::string::npos),
                                                  m.get(), s.seed * 7919 + 31);
    u.mix = [noising](const torch::Tensor& x, const torch::Tensor&) { return (*noising)(x); };
    u.classes = 0;
    u.regression = true;  // MSE between the output and the noise, the target the loop drew
    auto val = std::make_shared<ddpm_validation>(val_x0, T);
    u.validate = [val, noising](net& model, double scale) {
      return (*val)(static_cast<denoiser_net&>(model), noising->sch, scale);
    };
    u.chance_loss = 1.0;
    u.frozen_layer = "time_embed";
    u.observe_group_lrs = true;
  } else if (s.family == "normalizing_flow") {
    // <moons|ring|breast-cancer>-realnvp<layers>-h<hidden>-<tanh|softclamp>: a RealNVP flow
    // (see realnvp_net) trained by maximum likelihood, the mean negative log-likelihood in nats
    // per example (flow_nll), which has no lower bound (told: loss_floor = no_lower_bound). The
    // 2-D densities drawn fresh each step from the run's own generator (toy_stream), validated
    // on 1024 fixed points; the breast cancer table's 30 features standardized (raw features
    // for inputs_not_normalized, as the tabular family), validated on its held-out rows. Not
    // told classes (a density, no classes).
    const bool bc = s.variant.rfind("breast-cancer", 0) == 0;
    std::int64_t dim = 2;
    if (bc) {
      if (!d.breast_cancer) {
        u.why_not = "third_party/data/breast_cancer.csv is missing (scripts/fetch-digits.sh)";
        return u;
      }
      u.raw_inputs = s.planted == fault::inputs_not_normalized;
      u.tab = u.raw_inputs ? &d.breast_cancer->raw : &d.breast_cancer->z;
      dim = u.tab->x_train.size(1);
    } else {
      auto stream = std::make_shared<toy_stream>(s.variant.rfind("ring", 0) == 0 ? toy_kind::ring : toy_kind::moons,
                                                  s.seed * 7919 + 29);
      u.draw = [stream](std::int64_t, std::int64_t b) { return stream->draw(b); };
      u.validate = [stream](net& model, double scale) {
        taps vt;
        return flow_nll(model.forward(stream->val * scale, vt)).item<double>();
      };
    }
    u.model = std::make_shared<realnvp_net>(dim, widths_after(s.variant, "-realnvp").front(),
                                            widths_after(s.variant, "-h").front(),
                                            s.variant.find("-tanh") != std::string::npos);
    u.classes = 0;
    u.regression = true;
    u.regression_loss = [](const torch::Tensor& out, const torch::Tensor&) { return flow_nll(out); };
    u.loss_floor = mldiag::no_lower_bound;
    u.frozen_layer = "coupling0";
    u.observe_group_lrs = true;
  } else if (s.family == "multilabel") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<hidden>|cnn<c1>x<c2>>-k<K>[-posweight]: K binary attributes of
    // each image (make_multilabel), one logit each (multilabel_net), BCE with logits averaged
    // over the examples and labels; `-posweight`: each label's positives weighted by its
    // training negatives over positives (BCEWithLogitsLoss's pos_weight). Not told classes
    // (monitor_config documents them as a cross-entropy task's, whose chance is ln C); told the
    // chance loss, what logits of 0 cost: ln 2, or with pos_weight ln 2 x the mean over labels
    // of (w_k p_k + 1 - p_k). Validation: the same loss on the first 512 validation images.
    // labels_off_by_one reads the label columns one off (shift_labels).
    auto ml = std::make_shared<multilabel_table>(make_multilabel(*u.tab, fashion, 20000));
    u.tab = &ml->t;
    u.own_table = std::shared_ptr<const table>(ml, &ml->t);
    const auto K = ml->t.classes;
    const bool cnn = s.variant.find("-cnn") != std::string::npos;
    const auto w = widths_after(s.variant, cnn ? "-cnn" : "-mlp");
    u.model = cnn ? std::make_shared<multilabel_net>(ml->t.side, true, w.front(), w.back(), 64, K)
                  : std::make_shared<multilabel_net>(ml->t.side, false, 0, 0, w.front(), K);
    torch::Tensor pos_weight;
    double chance = 0.0;
    for (const double p : ml->positive_rate) {
      const double wk = s.variant.find("-posweight") != std::string::npos ? (1.0 - p) / p : 1.0;
      chance += std::log(2.0) * (wk * p + 1.0 - p) / static_cast<double>(K);
    }
    if (s.variant.find("-posweight") != std::string::npos) {
      std::vector<float> pw;
      for (const double p : ml->positive_rate) pw.push_back(static_cast<float>((1.0 - p) / p));
      pos_weight = torch::tensor(pw);
    }
    u.label_loss = [pos_weight](const torch::Tensor& out, const torch::Tensor& y) {
      return multilabel_bce(out, y, pos_weight);
    };
    u.classes = K;
    u.tell_classes = false;
    u.chance_loss = chance;
    u.shift_labels = [](const torch::Tensor& y) { return torch::roll(y, 1, 1); };
    u.observe_group_lrs = true;
  } else if (s.family == "masked_lm") {
    // <gpl3|licenses>-w<window>-d<width>-h<heads>-l<blocks>-<prenorm|postnorm>: a BERT-style
    // encoder (see masked_lm_net) over character windows, masked by the loader as BERT's
    // collator masks them (mlm_stream, mlm_mask: 15% of the positions chosen; 80% [MASK], 10% a
    // random character, 10% kept), the cross-entropy at the chosen positions only (mlm_loss,
    // ignore_index). `licenses`: the six license texts' windows (text_cnn's, their file labels
    // unread); `gpl3`: GPL-3's alone (text_windows); the first `window` characters of each
    // 64-character window, validation from held-out blocks spread over the text. Token ids in.
    // Told the classes, the vocabulary's size with [MASK] (docs/integrations.md: a
    // classification task's count; the loss is a cross-entropy over the vocabulary at each
    // chosen position, ln(V) for an uninformed model, as the causal transformer LM's is);
    // clip_grad_norm_ 1 as transformers are trained. labels_off_by_one: the chosen positions'
    // labels one character id up (mod the characters), the inputs right. frozen_embedding
    // leaves out the token embedding.
    const bool licenses = s.variant.rfind("licenses", 0) == 0;
    if (licenses ? !d.licenses : !d.gpl) {
      u.why_not = licenses ? "fewer than 3 license texts in /usr/share/common-licenses"
                           : "the GPL-3 text in /usr/share/common-licenses is missing";
      return u;
    }
    if (licenses) {
      u.tab = &*d.licenses;
    } else {
      auto own = std::make_shared<table>(text_windows(*d.gpl, 64));
      u.tab = own.get();
      u.own_table = own;
    }
    const auto number_after = [&](const std::string& tag) {
      return std::stoll(s.variant.substr(s.variant.find(tag) + tag.size()));
    };
    const std::int64_t window = std::min<std::int64_t>(number_after("-w"), u.tab->side);
    const std::int64_t chars = u.tab->vocab;
    u.model = std::make_shared<masked_lm_net>(chars + 1, number_after("-d"), number_after("-h"), number_after("-l"), window,
                                              s.variant.find("-prenorm") != std::string::npos);
    u.classes = chars + 1;
    auto stream = std::make_shared<mlm_stream>(u.tab, window, chars, s.seed * 7919 + 13);
    u.draw = [stream](std::int64_t, std::int64_t b) { return stream->draw(b); };
    u.label_loss = [](const torch::Tensor& out, const torch::Tensor& y) { return mlm_loss(out, y); };
    u.shift_labels = [chars](const torch::Tensor& y) { return torch::where(y >= 0, (y + 1).remainder(chars), y); };
    u.validate = [stream](net& model, double) {
      taps vt;
      return mlm_loss(model.forward(stream->val_inputs, vt), stream->val_labels).item<double>();
    };
    u.clip = 1.0;
    u.frozen_embedding = "embed";
    u.observe_group_lrs = true;
  } else if (s.family == "ctc") {
    if (!need_table()) return u;
    // <digits|fashion12>-<tcn<c>|crnn<c1>x<c2>-<bigru|gru><hidden>>[-clip5]: 3 to 6 glyphs side
    // by side (glyph_sequences: the UCI digits at 8 x 8, or Fashion-MNIST's first 20000
    // training images at 12 x 12, fashion_glyphs12), read column by column (see ctc_net), CTC
    // with blank 0, the mean over the batch of each sequence's loss over its length,
    // zero_infinity (ctc_sequence_loss). Not told classes (CTC is no cross-entropy over classes:
    // its loss sums over alignments), nor a chance loss: an uninformed model's CTC loss depends
    // on each sequence's length and frames, so no one level a user could declare. `-clip5`:
    // clip_grad_norm_ 5, as CRNN recipes clip. Validation: the same loss on 256 fixed sequences
    // of validation glyphs. labels_off_by_one: the label sequences' classes one up (mod 10),
    // never the blank.
    if (s.variant.rfind("fashion12", 0) == 0) {
      auto own = std::make_shared<table>(fashion_glyphs12(*u.tab, 20000));
      u.tab = own.get();
      u.own_table = own;
    }
    const bool rnn = s.variant.find("-crnn") != std::string::npos;
    const auto c = widths_after(s.variant, rnn ? "-crnn" : "-tcn");
    const bool bi = s.variant.find("-bigru") != std::string::npos;
    const std::int64_t hidden = rnn ? widths_after(s.variant, bi ? "-bigru" : "-gru").front() : 0;
    auto m = std::make_shared<ctc_net>(u.tab->side, rnn, c.front(), c.back(), hidden, bi);
    u.model = m;
    const auto frames = m->frames();
    u.classes = 11;  // 10 labels and the blank: not told
    u.tell_classes = false;
    auto seqs = std::make_shared<glyph_sequences>(u.tab, s.seed * 7919 + 13);
    u.draw = [seqs](std::int64_t, std::int64_t b) { return seqs->draw(b); };
    u.label_loss = [frames](const torch::Tensor& out, const torch::Tensor& y) { return ctc_sequence_loss(out, y, frames); };
    u.shift_labels = [](const torch::Tensor& y) {
      const auto l = y.slice(1, 1);
      return torch::cat({y.slice(1, 0, 1), torch::where(l > 0, l.remainder(10) + 1, l)}, 1);
    };
    u.validate = [seqs, frames](net& model, double scale) {
      taps vt;
      return ctc_sequence_loss(model.forward(seqs->val.first * scale, vt), seqs->val.second, frames).item<double>();
    };
    if (s.variant.find("-clip5") != std::string::npos) u.clip = 5.0;
    u.observe_group_lrs = true;
  } else if (s.family == "domain_adversarial") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn<c1>x<c2>-fc<width>>-d<hidden>-<noise|blur>: DANN
    // (see dann_net, dann_stream): each micro-batch N labelled source images and N unlabelled
    // target images (the training images shifted: shift_domain), the source rows' cross-entropy
    // plus the domain classifier's BCE over all 2N behind the gradient reversal, its coefficient
    // ramped by Ganin's schedule over the run's steps (dann_lambda, set before each step). The
    // recorded loss is that total, as pytorch-DANN's loop prints it; the domain term is
    // adversarial (it falls while the ramp is low, then climbs back toward ln 2 as the features
    // stop telling the domains apart), so the run declares that the loss is not a progress
    // measure (docs/declarations.md: an adversarial objective) and gives, every step, the label
    // classifier's accuracy on the first 256 shifted validation images, the target domain's
    // accuracy, higher is better, the measure DANN is judged by. Not told classes: the total is
    // not a cross-entropy (round 10's uncertainty_multitask's reading). Validation: the source
    // validation images' cross-entropy. frozen_layer leaves the domain classifier out of the
    // optimizer.
    const bool cnn = s.variant.find("-cnn") != std::string::npos;
    const auto convs = cnn ? widths_after(s.variant, "-cnn") : std::vector<std::int64_t>{0, 0};
    const auto widths = widths_after(s.variant, cnn ? "-fc" : "-mlp");
    const auto kind = s.variant.find("-blur") != std::string::npos ? target_shift::blur : target_shift::noise;
    auto m = std::make_shared<dann_net>(u.tab->side, cnn, widths, convs.front(), convs.back(),
                                        widths_after(s.variant, "-d").front());
    u.model = m;
    u.classes = 10;  // labels_off_by_one's modulus; not told
    u.tell_classes = false;
    auto stream = std::make_shared<dann_stream>(u.tab, kind, s.seed * 7919 + 13);
    u.draw = [stream](std::int64_t, std::int64_t b) { return stream->draw(b); };
    auto* mp = m.get();
    u.label_loss = [mp](const torch::Tensor& out, const torch::Tensor& y) { return dann_loss(out, y, mp->domain_logits); };
    const auto steps = s.steps;
    u.before_step = [mp, steps](std::int64_t step) { mp->lambda = dann_lambda(step, steps); };
    // The metric reads the images through the run's own pipeline: x255 where it is planted.
    const double scale = s.planted == fault::inputs_not_normalized ? 255.0 : 1.0;
    const auto* t = u.tab;
    u.metric = [mp, stream, t, scale](std::int64_t) {
      torch::NoGradGuard no_grad;
      const auto n = stream->target_val.size(0);
      const auto guess = mp->classify(stream->target_val * scale).argmax(1);
      return guess.eq(t->y_val.slice(0, 0, n)).to(torch::kDouble).mean().item<double>();
    };
    u.objective = mldiag::objective::not_progress;
    u.metric_name = "target_accuracy";
    u.metric_higher_is_better = true;
    u.validate = [mp, t](net&, double s_in) {
      const auto n = std::min<std::int64_t>(512, t->x_val.size(0));
      return torch::nn::functional::cross_entropy(mp->classify(t->x_val.slice(0, 0, n) * s_in), t->y_val.slice(0, 0, n))
          .item<double>();
    };
    u.frozen_layer = "domain";
    u.observe_group_lrs = true;
  } else if (s.family == "segmentation") {
    if (!need_table()) return u;
    // <digits16|fashion28>-slots2x2-unet<levels>-c<base>[-bn][-bilinear]: per-pixel
    // classification of scenes (see seg_scenes) by a U-Net (see unet_net): the digits at 8 x 8
    // in the 2 x 2 slots of a 16 x 16 canvas (a pixel above 0.25 is the digit's), Fashion-MNIST's
    // first 20000 training images at 14 x 14 (fashion_items14) in the 2 x 2 slots of a 28 x 28
    // canvas (a pixel above 0.1 is the item's). Eleven classes per pixel, the background and the
    // ten classes, told (docs/integrations.md: a classification task's count; the loss is the
    // cross-entropy over them at each pixel, ln 11 for an uninformed model, as
    // torch.nn.CrossEntropyLoss reads a segmentation map). BatchNorm after every convolution
    // (`-bn`): inputs_not_normalized is not planted (see the comment above fault_table).
    // Validation: the same loss on 256 fixed scenes of validation items. labels_off_by_one: every
    // pixel's label one up, mod 11 (the background read as the first class, the last class as
    // the background: a label map read one off, as a palette index off by one reads it).
    if (fashion) {
      auto own = std::make_shared<table>(fashion_items14(*u.tab, 20000));
      u.tab = own.get();
      u.own_table = own;
    }
    const auto canvas = widths_after(s.variant, fashion ? "fashion" : "digits").front();
    u.model = std::make_shared<unet_net>(canvas, canvas, widths_after(s.variant, "-unet").front(),
                                         widths_after(s.variant, "-c").front(), 11,
                                         s.variant.find("-bn") != std::string::npos,
                                         s.variant.find("-bilinear") != std::string::npos);
    u.classes = 11;
    auto scenes = std::make_shared<seg_scenes>(u.tab, canvas, canvas, fashion ? 0.1 : 0.25, s.seed * 7919 + 13);
    u.draw = [scenes](std::int64_t, std::int64_t b) { return scenes->draw(b); };
    u.label_loss = [](const torch::Tensor& out, const torch::Tensor& y) { return pixel_cross_entropy(out, y); };
    // Validation reads the loss the loop trains with, as a user's evaluation calls the same
    // criterion: MSE against the one-hot map where wrong_loss_mse_on_logits is planted.
    const bool mse = s.planted == fault::wrong_loss_mse_on_logits;
    u.validate = [scenes, mse](net& model, double scale) {
      taps vt;
      const auto out = model.forward(scenes->val.first * scale, vt);
      return (mse ? torch::mse_loss(out, torch::one_hot(scenes->val.second, out.size(-1)).to(torch::kFloat))
                  : pixel_cross_entropy(out, scenes->val.second))
          .item<double>();
    };
    u.observe_group_lrs = true;
  } else if (s.family == "simsiam") {
    if (!need_table()) return u;
    // fashion-cnn<c1>x<c2>x<c3>[-bn]-p<dim>-<simsiam|byol<m>>: SimSiam (see simsiam_net,
    // simsiam_loss) on Fashion-MNIST: each image's two views drawn in the loop after the loader
    // (simsiam_views, its own generator; after the input scale, as a transform pipeline that
    // forgot the /255 would feed them), an encoder of strided convolutions, a projector and a
    // predictor, the negative cosine of each view's prediction with the other's projection
    // behind a stop-gradient; `-byol<m>`: BYOL's target network, an exponential moving average
    // of the online encoder and projector at m, updated after each optimizer step. The loss
    // has a floor, -1 (every prediction aligned with its target), which the run declares
    // (task::loss_floor; docs/declarations.md: the lowest loss the objective can reach when it
    // is not 0), and no chance level to declare (an uninformed network's negative cosine
    // depends on its initialization, not on a count of classes: not told classes, nor a chance
    // loss). A collapsed network reaches -1 too, so its user watches a second measure, given
    // by observe_metric (docs/declarations.md: "this is the progress measure", a validation
    // accuracy; beside a loss that is still minimized, a second opinion) when it is measured,
    // every 25 steps and at the last (8 to 16 measurements in a short run, 60 in a long one), as
    // self-supervised code runs its kNN monitor every so often, not every step (SimSiam's every
    // epoch; metric_every): the k-nearest-neighbour accuracy of 512 validation images against a
    // bank of 1024 training images, the encoder's features (knn_monitor), higher is better.
    // Validation: the same loss on the first 256 validation images, their views drawn by a
    // generator seeded afresh at each evaluation. frozen_layer leaves the predictor out of the
    // optimizer.
    const auto dim = widths_after(s.variant, "-p").front();
    const auto byol = s.variant.find("-byol");
    const double ema = byol == std::string::npos ? 0.0 : std::stod(s.variant.substr(byol + 5));
    auto m = std::make_shared<simsiam_net>(u.tab->side, widths_after(s.variant, "-cnn"),
                                           s.variant.find("-bn-") != std::string::npos, dim, ema);
    u.model = m;
    u.classes = 0;
    u.regression = true;  // a loss of the output alone (see loss_of), the labels unread
    auto* mp = m.get();
    u.regression_loss = [mp](const torch::Tensor& p, const torch::Tensor&) { return simsiam_loss(p, mp->targets); };
    const auto side = u.tab->side;
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 7919 + 31));
    u.mix = [gen, side](const torch::Tensor& x, const torch::Tensor& y) {
      return std::make_pair(simsiam_views(x, side, *gen), y);
    };
    if (ema > 0.0) u.after_update = [mp](std::int64_t) { mp->update_target(); };
    const auto* t = u.tab;
    u.validate = [mp, t, side](net&, double scale) {
      torch::Generator g = at::detail::createCPUGenerator(424243);
      taps vt;
      const auto x = simsiam_views(t->x_val.slice(0, 0, std::min<std::int64_t>(256, t->x_val.size(0))) * scale, side, g);
      return simsiam_loss(mp->forward(x, vt), mp->targets).item<double>();
    };
    auto knn = std::make_shared<knn_monitor>(*u.tab, 1024, 512);
    // The metric reads the images through the run's own pipeline: x255 where it is planted.
    const double scale = s.planted == fault::inputs_not_normalized ? 255.0 : 1.0;
    u.metric = [knn, mp, scale](std::int64_t) { return (*knn)(*mp, scale); };
    u.metric_every = 25;
    u.metric_name = "knn_accuracy";
    u.metric_higher_is_better = true;
    u.loss_floor = -1.0;
    u.frozen_layer = "predictor";
    u.sgd_weight_decay = 5e-4;  // SimSiam's CIFAR recipe's, on its SGD runs
    u.observe_group_lrs = true;
  } else if (s.family == "forecaster") {
    // <sunspots|elnino|co2diff>-w<window>-h<horizon>-<lstm<hidden>|tcn<channels>x<blocks>-k<kernel>|
    // wavenet<channels>x<layers>>: the next `horizon` values of a real series from its last
    // `window` (see load_series, forecast_windows, forecaster_net): the yearly sunspot numbers,
    // the monthly El Niño 1+2 sea surface temperature, the weekly changes of Mauna Loa's CO2;
    // standardized with the training part's (the first 80%'s) mean and standard deviation, the
    // MSE of the forecast (no classes). Validation: the windows whose targets lie in the last
    // 20%, a later stretch of the same series, as a forecaster is validated (not declared unlike
    // training: it is the same series, split in time as forecasting is validated). Told the
    // chance loss 1: a forecaster that predicts the training mean, 0 after standardization,
    // costs the standardized targets' variance, 1 (docs/declarations.md: an uninformed model's
    // loss, classes or not; round 11's diffusion's). inputs_not_normalized: the series as the
    // file has it, inputs and targets alike (one array cut into both: a pipeline that forgot to
    // standardize it forgot it for both). frozen_layer leaves the head out of the optimizer.
    const auto name = s.variant.substr(0, s.variant.find('-'));
    const bool difference = name == "co2diff";
    std::shared_ptr<forecast_tables> ft;
    try {
      ft = std::make_shared<forecast_tables>(forecast_windows(load_series(d.dir, difference ? "co2" : name),
                                                              widths_after(s.variant, "-w").front(),
                                                              widths_after(s.variant, "-h").front(), difference));
    } catch (const std::exception& e) {
      u.why_not = e.what();
      return u;
    }
    u.raw_inputs = s.planted == fault::inputs_not_normalized;
    u.tab = u.raw_inputs ? &ft->raw : &ft->z;
    u.own_table = std::shared_ptr<const table>(ft, u.tab);
    const auto horizon = widths_after(s.variant, "-h").front();
    const bool tcn = s.variant.find("-tcn") != std::string::npos, wavenet = s.variant.find("-wavenet") != std::string::npos;
    const auto shape = widths_after(s.variant, tcn ? "-tcn" : wavenet ? "-wavenet" : "-lstm");
    u.model = std::make_shared<forecaster_net>(tcn ? forecaster_kind::tcn : wavenet ? forecaster_kind::wavenet : forecaster_kind::lstm,
                                               shape.front(), shape.back(), tcn ? widths_after(s.variant, "-k").front() : 2,
                                               horizon);
    u.classes = 0;
    u.regression = true;
    u.chance_loss = 1.0;
    u.frozen_layer = "head";
    u.observe_group_lrs = true;
  } else if (s.family == "meta_learning") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn<c1>x<c2>>-<ways>way<shots>shot-k<inner steps>-sgd<inner
    // rate>: Reptile (see reptile, fewshot_tasks, fewshot_net): each step `batch` tasks (the
    // meta-batch) of `ways` classes of the table in a random order, their labels in that order, 5
    // query images a class; `k` steps of plain SGD at the inner rate on each task's support set,
    // then the outer optimizer (the run's, at the run's rate and schedule: Reptile's step size)
    // moves the meta-weights toward the adapted ones. The loss is the query loss after
    // adaptation, a cross-entropy over the ways: told the classes, `ways` (docs/integrations.md:
    // a classification task's count, ln(ways) for an uninformed model: the meta-initialization
    // itself tells no class from another, its labels being drawn afresh in every task). Validation:
    // the same query loss after the same adaptation, over 10 fixed tasks of validation images.
    // Not inputs and labels through the loop's sampler: the tasks are the batch (`draw`), so
    // same_batch trains on the first step's tasks again and inputs_not_normalized scales their
    // images. Accumulation 1: the meta-batch is the tasks of one step.
    const auto way_at = s.variant.find("way");
    auto ways_at = way_at;
    while (ways_at > 0 && s.variant[ways_at - 1] >= '0' && s.variant[ways_at - 1] <= '9') --ways_at;
    const std::int64_t ways = std::stoll(s.variant.substr(ways_at, way_at - ways_at));
    const auto shots = widths_after(s.variant, "way").front();
    const bool conv = s.variant.find("-cnn") != std::string::npos;
    auto m = std::make_shared<fewshot_net>(u.tab->side, conv, widths_after(s.variant, conv ? "-cnn" : "-mlp"), ways);
    u.model = m;
    u.classes = ways;
    auto tasks = std::make_shared<fewshot_tasks>(u.tab, ways, shots, 5);
    auto r = std::make_shared<reptile>();
    r->model = m.get();
    r->tasks = tasks;
    r->inner_steps = widths_after(s.variant, "-k").front();
    r->inner_lr = std::stod(s.variant.substr(s.variant.find("-sgd") + 4));
    r->mse_on_logits = s.planted == fault::wrong_loss_mse_on_logits;
    r->outer = make_optimizer(s.opt, m->parameters(), s.lr);
    u.optimizers = {{std::string(name(s.opt)), r->outer}};
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 7919 + 13));
    u.draw = [tasks, gen](std::int64_t, std::int64_t b) { return tasks->draw(b, false, *gen); };
    u.custom_step = [r](const setup::custom_step_io& io) -> setup::custom_step_result {
      const auto o = r->step(io.x, io.y, io.lr, io.zero_grad, io.nan, io.skip_update, *io.tap);
      return {o.loss, o.logits, o.grad_norm};
    };
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    const auto val = tasks->draw(10, true, vg);
    u.validate = [r, val](net&, double scale) { return r->validate(val.first, val.second, scale); };
    u.observe_group_lrs = true;
  } else if (s.family == "sparse_autoencoder") {
    if (!need_table()) return u;
    // <digits|fashion>-mlp<h1>x<h2>-sae<latents>-<unit|normweighted>-l1-<lambda>: a sparse
    // autoencoder (see sparse_autoencoder_net) of the fc2 activations (h2 wide) of an MLP
    // classifier that the run first trains, unmonitored (prepare: Adam 1e-3, 500 steps of 64,
    // its own generator, as round 6's distillation teacher), on the digits' 1497 training images
    // or Fashion-MNIST's first 20000; its activations on them, and on the validation images,
    // scaled so that their mean norm is sqrt(h2) (subject_activations), are the table. `-unit`:
    // the decoder's columns at unit norm (their gradients projected before each step,
    // renormalized after it); `-normweighted`: the penalty weighted by the columns' norms. The
    // loss is the MSE plus lambda x the penalty, the inputs' own reconstruction (no classes,
    // nor a chance loss or a floor to tell: an SAE's loss has neither a known floor nor an
    // uninformed level). Validation: the same loss on the first 512 validation activations.
    // frozen_layer leaves the decoder out of the optimizer.
    const auto mlp = widths_after(s.variant, "-mlp");
    const auto latents = widths_after(s.variant, "-sae").front();
    const bool unit = s.variant.find("-unit") != std::string::npos;
    const double l1 = std::stod(s.variant.substr(s.variant.find("-l1-") + 4));
    auto sae = std::make_shared<sparse_autoencoder_net>(mlp[1], latents, unit, l1);
    auto subject = std::make_shared<sae_subject_net>(in, mlp[0], mlp[1]);
    u.model = sae;
    u.classes = 0;
    u.regression = true;  // a loss of the output and the input alone (see loss_of), the labels unread
    auto* sp = sae.get();
    u.regression_loss = [sp](const torch::Tensor& out, const torch::Tensor&) { return sp->loss(out); };
    auto own = std::make_shared<table>();
    const auto* images = u.tab;
    u.tab = own.get();
    u.own_table = own;
    const auto seed = s.seed * 104729 + 13;
    const std::int64_t n_train = fashion ? 20000 : images->x_train.size(0);
    u.prepare = [own, images, subject, sp, n_train, seed] {
      fit_unmonitored(*subject, subject->parameters(), *images, 500, 64, 1e-3, seed);
      *own = subject_activations(*subject, *images, n_train);
      sp->set_center(own->x_train.mean(0));
    };
    u.after_backward = [sp] { sp->project_decoder_gradient(); };
    u.after_update = [sp](std::int64_t) { sp->normalize_decoder(); };
    u.frozen_layer = "decoder";
    u.observe_group_lrs = true;
  } else if (s.family == "warm_restarts") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn<c1>x<c2>[-bn]-fc64>: a classifier (see
    // restart_classifier_net) of the ten classes, cross-entropy, told the classes, trained under
    // the run's SGDR schedule (sgdr: T_mult 1, four cycles; sgdr_mult2: T_mult 2, cycles of 1, 2
    // and 4 sevenths of the run; sgdr_swa: three cycles, then stochastic weight averaging at a
    // constant rate, half the peak, the average updated every 5 steps; see
    // detail::scheduled_lr). The loop sets each step's rate into the optimizer and logs it
    // (scalar::learning_rate, and each group's by observe_learning_rates), told the peak
    // (task::learning_rate), and declares each restart, and SWA's start, as
    // regime_change{optimizer}, which docs/declarations.md gives for "a restart of the
    // schedule". Validation: the cross-entropy of the first 512 validation images, by the model
    // that trains (the SWA average is what the run would ship, evaluated after the run, not
    // during it).
    const bool conv = s.variant.find("-cnn") != std::string::npos;
    u.model = std::make_shared<restart_classifier_net>(u.tab->side, conv, s.variant.find("-bn-") != std::string::npos,
                                                       widths_after(s.variant, conv ? "-cnn" : "-mlp"));
    u.classes = 10;
    const auto sched = s.sched;
    const auto steps = s.steps;
    u.schedule_changes_at = [sched, steps](std::int64_t step) { return schedule_restarts_at(sched, step, steps); };
    if (sched == schedule::sgdr_swa) {
      auto avg = std::make_shared<swa_average>();
      auto* mp = u.model.get();
      u.after_update = [avg, mp, steps](std::int64_t step) {
        const auto from = swa_start(steps);
        if (step >= from && (step - from) % 5 == 0) avg->add(*mp);
      };
    }
    u.observe_group_lrs = true;
  } else if (s.family == "deep_sets") {
    if (!need_table()) return u;
    // <digits|fashion>-<majority|max><n>-<sumpool|meanpool>-phi<widths>-rho<widths>: DeepSets
    // (see deep_sets_net, set_tasks): each batch `batch` sets of n images drawn afresh from the
    // training rows (the loop's `draw`, its own generator), each set labelled by the answer to
    // its question (the class most of its images show; its largest class), a cross-entropy
    // over the ten answers, told the classes, 10; phi on every element, their features summed
    // or averaged, rho and the head on the pooled vector. Validation: the same loss on 512
    // fixed sets of validation images. same_batch trains on the first step's sets again;
    // inputs_not_normalized scales their images (x255, one loader); labels_off_by_one reads
    // each set's answer one off, (y + 1) mod 10.
    const auto first = s.variant.find('-') + 1;
    const auto token = s.variant.substr(first, s.variant.find('-', first) - first);
    const auto digit_at = token.find_first_of("0123456789");
    const auto q = token.substr(0, digit_at) == "majority" ? set_question::majority : set_question::max;
    auto tasks = std::make_shared<set_tasks>(u.tab, std::stoll(token.substr(digit_at)), q);
    const auto classes = set_tasks::classes();
    u.model = std::make_shared<deep_sets_net>(in, widths_after(s.variant, "-phi"), widths_after(s.variant, "-rho"),
                                              s.variant.find("-meanpool") != std::string::npos, classes);
    u.classes = classes;
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 7919 + 13));
    u.draw = [tasks, gen](std::int64_t, std::int64_t b) { return tasks->draw(b, false, *gen); };
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    const auto val = tasks->draw(512, true, vg);
    const bool mse = s.planted == fault::wrong_loss_mse_on_logits;
    u.validate = [val, mse, classes](net& model, double scale) {
      taps vt;
      const auto out = model.forward(val.first * scale, vt);
      return (mse ? torch::mse_loss(out, torch::one_hot(val.second, classes).to(torch::kFloat))
                  : torch::nn::functional::cross_entropy(out, val.second))
          .item<double>();
    };
    u.observe_group_lrs = true;
  } else if (s.family == "mixture_density") {
    // <diabetes|fashion-tophalf>-mlp<widths>-k<K>[-clamp]: a mixture density network (see
    // mdn_net, mixture_nll) of K Gaussian components over a standardized target: the diabetes
    // table's disease progression from its ten measurements (micro-batches of its 353 training
    // rows, validation its 89 others), or Fashion-MNIST's bottom half's ink from its top half's
    // pixels (fashion_bottom_ink: 60000 training images, validation the first 512 of the
    // validation images'). The loss the mixture's negative log-likelihood, in nats per row (no
    // classes, no chance level, no floor to tell: a density's log goes below 0, and an
    // uninformed mixture's value depends on its initialization); `-clamp`: the log sigmas
    // clamped to [-2, 2]. inputs_not_normalized: the diabetes features as the file has them,
    // the target standardized, as in the regression family. frozen_layer leaves `sigma_head`
    // out of the optimizer: the widths stay at their initialization while the weights and the
    // means train.
    u.raw_inputs = s.planted == fault::inputs_not_normalized;
    if (fashion) {
      if (!need_table()) return u;
      auto own = std::make_shared<table>(fashion_bottom_ink(*u.tab));
      u.own_table = own;
      u.tab = own.get();
      u.raw_inputs = false;  // images: x255 in the loop
    } else if (!d.diabetes) {
      u.why_not = "third_party/data/diabetes_data.csv or diabetes_target.csv is missing (scripts/fetch-digits.sh)";
      return u;
    } else {
      u.tab = u.raw_inputs ? &d.diabetes->raw : &d.diabetes->z;
    }
    const auto k = widths_after(s.variant, "-k").front();
    const bool clamp = s.variant.find("-clamp") != std::string::npos;
    u.model = std::make_shared<mdn_net>(u.tab->x_train.size(1), widths_after(s.variant, "-mlp"), k);
    u.classes = 0;
    u.regression = true;
    u.regression_loss = [k, clamp](const torch::Tensor& out, const torch::Tensor& y) {
      return mixture_nll(out, y, k, clamp);
    };
    u.frozen_layer = "sigma_head";
    u.observe_group_lrs = true;
  } else if (s.family == "mean_teacher") {
    if (!need_table()) return u;
    // <digits|fashion>-<mlp<widths>|cnn<c1>x<c2>-fc64>-labels<per class>: the mean teacher (see
    // mean_teacher, semi_supervised_pool): `labels` labelled training images a class, the rest
    // unlabelled; each batch a quarter labelled images, then unlabelled ones (the loop's `draw`,
    // its own generator); the student reads the batch with Gaussian noise of 0.15 added (`mix`,
    // after the loader and the input scale), the teacher its own noised view of it; the loss the
    // student's cross-entropy on the labelled rows plus the consistency, its weight ramped up to
    // 10 over the first 30% of the steps; after each optimizer step the teacher an exponential
    // moving average of the student at 0.99 (after_update). Told the classes, 10: the loss's
    // first value is the labelled rows' cross-entropy, about ln 10, the consistency's weight
    // being near 0 at the start. Validation: the student's cross-entropy on the first 512
    // validation images (labelled held-out data), as the paper reports the student beside the
    // teacher. wrong_loss_mse_on_logits replaces the supervised term (label_loss_plants_mse),
    // validation reading the same. frozen_layer leaves the student's first layer (`fc1`, the
    // CNN's `fc`) out of the optimizer; the teacher averages it, unchanged, as it is.
    const bool conv = s.variant.find("-cnn") != std::string::npos;
    const auto widths = widths_after(s.variant, conv ? "-cnn" : "-mlp");
    auto student = std::make_shared<teacher_student_net>(u.tab->side, conv, widths);
    auto mt = std::make_shared<mean_teacher>();
    mt->teacher = std::make_shared<teacher_student_net>(u.tab->side, conv, widths);
    mt->student = student.get();
    mt->ramp = std::max<std::int64_t>(1, s.steps * 3 / 10);
    mt->mse_on_logits = s.planted == fault::wrong_loss_mse_on_logits;
    mt->gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 7919 + 31));
    u.model = student;
    u.classes = 10;
    auto pool = std::make_shared<semi_supervised_pool>(u.tab, widths_after(s.variant, "-labels").front());
    auto gen = std::make_shared<torch::Generator>(at::detail::createCPUGenerator(s.seed * 7919 + 13));
    u.draw = [pool, gen](std::int64_t, std::int64_t b) { return pool->draw(b, *gen); };
    u.mix = [mt](const torch::Tensor& x, const torch::Tensor& y) {
      mt->clean = x;
      return std::make_pair(mt->noised(x), y);
    };
    u.label_loss = [mt](const torch::Tensor& out, const torch::Tensor& y) { return mt->loss(out, y); };
    u.label_loss_plants_mse = true;
    u.before_step = [mt](std::int64_t step) {
      mt->step = step;
      if (step == 0) mt->copy_student();
    };
    u.after_update = [mt](std::int64_t step) { mt->update(step); };
    const auto* t = u.tab;
    const bool mse = mt->mse_on_logits;
    u.validate = [t, mse](net& model, double scale) {
      taps vt;
      const auto n = std::min<std::int64_t>(512, t->x_val.size(0));
      const auto y = t->y_val.slice(0, 0, n);
      const auto out = model.forward(t->x_val.slice(0, 0, n) * scale, vt);
      return (mse ? torch::mse_loss(out, torch::one_hot(y, 10).to(torch::kFloat))
                  : torch::nn::functional::cross_entropy(out, y))
          .item<double>();
    };
    u.frozen_layer = conv ? "fc" : "fc1";
    u.observe_group_lrs = true;
  } else if (is_lm(s.family)) {
    const bool apache = s.variant.find("apache") != std::string::npos;
    u.txt = apache ? (d.apache ? &*d.apache : nullptr) : (d.gpl ? &*d.gpl : nullptr);
    if (!u.txt) {
      u.why_not = std::string("the ") + (apache ? "Apache-2.0" : "GPL-3") + " text in /usr/share/common-licenses is missing";
      return u;
    }
    const auto V = u.txt->c.vocab;
    u.classes = V;
    if (s.family == "rnn_lm") {
      u.model = std::make_shared<rnn_net>(V, 32, 128, s.variant == "lstm");
      u.clip = 1.0;
    } else {
      u.model = std::make_shared<transformer_net>(V, 64, 4, 2, u.context, s.variant == "pre-norm");
      u.clip = 1.0;
    }
  } else {
    u.why_not = "no family named '" + s.family + "'";
  }
  return u;
}

/// Samples batches: epochs of shuffled tables, or random windows of text.
struct sampler {
  const setup& u;
  torch::Generator gen;
  torch::Tensor order;
  std::int64_t next = 0;
  sampler(const setup& su, std::uint64_t seed) : u(su), gen(at::detail::createCPUGenerator(seed)) {}

  /// A batch of `b` (inputs, targets); `shifted` false plants lm_targets_not_shifted.
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b, bool shifted = true) {
    if (u.tab) {
      const auto n = u.tab->x_train.size(0);
      b = std::min(b, n);  // full_batch: every training row, every step
      if (!order.defined() || next + b > n) {
        order = torch::randperm(n, gen, torch::kLong);
        next = 0;
      }
      auto idx = order.slice(0, next, next + b);
      next += b;
      return {u.tab->x_train.index_select(0, idx), u.tab->y_train.index_select(0, idx)};
    }
    if (u.reverse_text) {
      auto x = windows(u.txt->train, b, false).first;
      return {x, x.flip(1)};
    }
    return windows(u.txt->train, b, shifted);
  }
  std::pair<torch::Tensor, torch::Tensor> windows(const torch::Tensor& stream, std::int64_t b, bool shifted) {
    const auto T = u.context, n = stream.size(0);
    auto starts = torch::randint(0, n - T - 1, {b}, gen, torch::kLong);
    auto w = stream.index({(starts.unsqueeze(1) + torch::arange(T + 1, torch::kLong).unsqueeze(0)).reshape({-1})}).view({b, T + 1});
    auto x = w.slice(1, 0, T);
    return {x, shifted ? w.slice(1, 1, T + 1) : x};
  }
};

}  // namespace detail

/// Trains one run. Never throws for a missing data set: the result says it was skipped.
/// `monitored` false trains the run exactly so without a monitor (no findings: `--curves`,
/// which prints how a family's runs train without anything the detectors would say).
inline result train(const run_spec& s, const data& d, bool monitored = true) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  double monitor_seconds = 0.0;  // observe_* calls (with the update's sub_out) and end_step
  result res;
  res.spec = s;
  res.run.example = s.family;
  detail::setup u;
  {
    // LibTorch's default generator is one for the process: seeding it and initializing the
    // model happen under a lock, so a run's initialization depends on its seed alone and not
    // on the runs beside it.
    static std::mutex init;
    const std::lock_guard<std::mutex> lock(init);
    torch::manual_seed(s.seed);
    u = detail::build(s, d);
  }
  if (!u.model) {
    res.skipped = u.why_not;
    return res;
  }
  if (u.prepare) u.prepare();
  auto& model = *u.model;
  const fault f = s.planted;
  run_is_faulted = f != fault::none;  // for --entropy-gap
  const bool tokens = takes_tokens(s.family);  // token ids: never scaled
  const bool mse = u.classes == 0 && !u.nt_xent && !u.sgns;

  // Where a layer fault goes: varies with the seed over the layers it can be in.
  if (f == fault::forward_inf) {
    const auto& sites = model.overflow_sites;
    res.run.planted_layer = sites[s.seed % sites.size()].first;
  }
  if (f == fault::frozen_embedding) res.run.planted_layer = u.frozen_embedding;
  if (f == fault::frozen_layer) res.run.planted_layer = u.frozen_layer;
  if (f == fault::bad_init_large) {
    torch::NoGradGuard no_grad;
    for (auto& p : model.parameters())
      if (p.dim() >= 2) p.mul_(10.0);
  }

  // The trainable parameters, as a user filters them (the lora family's base is frozen).
  std::vector<torch::Tensor> params;
  const auto left_out = [&](const std::string& key) {
    return (f == fault::frozen_embedding && key == u.frozen_embedding + ".weight") ||
           (f == fault::frozen_layer && (key == u.frozen_layer || key.rfind(u.frozen_layer + ".", 0) == 0));
  };
  for (const auto& p : model.named_parameters())
    if (p.value().requires_grad() && !left_out(p.key())) params.push_back(p.value());
  // A family with optimizers of its own (the GAN's two) steps them in its custom step.
  auto opt = u.custom_step ? nullptr : detail::make_optimizer(s.opt, params, s.lr, u.sgd_weight_decay);

  // What a user knows and tells the monitor: the task, the learning rate, the clipping bound,
  // whether every step reads the whole training set.
  mldiag::monitor_config mc{.task = {.classes = static_cast<std::size_t>(u.tell_classes ? u.classes : 0),
                                     .from_checkpoint = u.from_checkpoint,
                                     .learning_rate = s.lr,
                                     .full_batch = s.batch >= full_batch}};
  if (u.clip > 0.0) mc.task.max_grad_norm = u.clip;  // the bound clip_grad_norm_ is given below
  // Round 9's declarations (docs/declarations.md): what the loss is, an uninformed model's loss.
  mc.task.objective = u.objective;
  if (u.chance_loss) mc.task.chance_loss = *u.chance_loss;
  // Round 10's: an optimizer with a line search, the lowest loss the objective can reach.
  mc.task.line_search = u.line_search;
  if (u.loss_floor) mc.task.loss_floor = *u.loss_floor;
  mc.task.validation_unlike_training = u.validation_unlike_training;
  mc.entropy.row_stride = entropy_flags.row_stride;
  std::optional<mldiag::monitor> mon;
  if (monitored) mon.emplace(mc);
  if (mon && !evidence_dir.empty()) {  // --evidence: the run's evidence and findings, for replay
    const std::string base = evidence_dir + "/" + eval::file_name(s.describe() + " fault " + std::string(f == fault::none ? "none" : info(f)->name) + " onset " + std::to_string(s.onset));
    auto w = std::make_unique<eval::evidence_writer>(base + ".evd", base + ".findings");
    w->configured({.task = mc.task});
    mon->attach(std::move(w));
  }
  if (mon) {
    for (const auto& name : u.expect_growth) mon->expect_growth(name);
    for (const auto& fnd : mon->configuration_findings())
      if (fnd.severity >= mldiag::severity::warning) res.run.findings.push_back({-1, fnd});
  }
  res.metric_name = u.metric_name;
  res.metric_higher_is_better = u.metric_higher_is_better;
  res.loss_not_progress = u.objective == mldiag::objective::not_progress;
  previous_values prev(model);
  detail::sampler sample(u, s.seed * 7919 + 13);
  const examples::run_options hooks;  // close_step's step hook: none
  taps tap;

  // Validation: a fixed set (first 512 rows, or 16 windows of held-out text).
  torch::Tensor val_x, val_y;
  if (!u.validation || u.validate) {
    // No validation set to hold: none (the GAN, the policy), or the family's own.
  } else if (u.tab) {
    const auto n = std::min<std::int64_t>(512, u.tab->x_val.size(0));
    val_x = u.tab->x_val.slice(0, 0, n);
    val_y = u.tab->y_val.slice(0, 0, n);
  } else {
    detail::sampler vs(u, 424242);
    if (u.reverse_text) {
      val_x = vs.windows(u.txt->val, 128, false).first;
      val_y = val_x.flip(1);
    } else {
      std::tie(val_x, val_y) = vs.windows(u.txt->val, 32, f != fault::lm_targets_not_shifted);
    }
  }
  const double input_scale = f == fault::inputs_not_normalized && !u.raw_inputs ? 255.0 : 1.0;
  auto loss_of = [&](const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y, const taps& t) {
    if (u.elbo) {
      // The negative ELBO: the Bernoulli decoder's cross-entropy summed over the input values,
      // plus the KL term; divided by batch x values, so one scale (nats per value) serves
      // 8 x 8 and 28 x 28 images and the same learning rates fit both.
      const auto recon = torch::nn::functional::binary_cross_entropy_with_logits(
          out, x, torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum));
      return (recon + t.kl) / static_cast<double>(x.numel());
    }
    if (u.regression) return u.regression_loss ? u.regression_loss(out, y) : torch::mse_loss(out, y);
    if (u.nt_xent) return nt_xent_loss(out);
    if (u.sgns) return sgns_loss(out);
    if (mse) return torch::mse_loss(out, x);
    if (f == fault::wrong_loss_mse_on_logits && !u.label_loss_plants_mse)  // soft targets (mixup's) as they are
      return torch::mse_loss(out, y.is_floating_point() ? y : torch::one_hot(y, u.classes).to(torch::kFloat));
    if (u.label_loss) return u.label_loss(out, y);
    if (u.teacher) {
      torch::Tensor teacher_logits;
      {
        torch::NoGradGuard no_grad;
        taps unused;  // the teacher's activations: not observed, and forward_inf is not planted there
        teacher_logits = u.teacher->forward(x, unused);
      }
      return distill_loss(out, teacher_logits, y, u.kd_temperature, u.kd_alpha, u.label_smoothing);
    }
    return torch::nn::functional::cross_entropy(out.reshape({-1, u.classes}), y.reshape({-1}));
  };
  const std::int64_t val_every = s.steps >= 1000 ? 100 : 50;
  std::pair<torch::Tensor, torch::Tensor> fixed;  // same_batch: the one batch
  double loss_scale = 65536.0;
  bool seen_val = false;

  for (std::int64_t step = 0; step < s.steps; ++step) {
    const bool active = f != fault::none && step >= s.onset;
    double lr = detail::scheduled_lr(s.sched, s.lr, step, s.steps);
    if (f == fault::lr_100x_midrun && active) lr *= 100.0;
    if (opt) {
      for (auto& g : opt->param_groups()) g.options().set_lr(lr);
      if (!(f == fault::no_zero_grad && active)) opt->zero_grad();
    }
    if (u.before_step) u.before_step(step);
    // The AMP skipped step: the scaler found an overflow, logged a NaN norm, halved its scale
    // and skipped the update.
    const bool amp_skip = f == fault::logged_nan_grad_norm_amp && step == s.onset;

    model.train();
    double loss_sum = 0.0, norm = 0.0;
    torch::Tensor logits;
    // The family's own step observes into the open step (quasi_newton's closure).
    if (mon && u.open_step_first) mon->begin_step(step);
    detail::setup::custom_step_result custom{};  // a custom step's, for the monitor's lines below
    for (std::int64_t m = 0; m < s.accumulation; ++m) {
      tap.clear();
      if (f == fault::forward_inf && active) tap.overflow_at = model.overflow_sites[s.seed % model.overflow_sites.size()].second;
      else tap.overflow_at.clear();
      auto batch = (f == fault::same_batch && fixed.first.defined()) ? fixed
                   : u.draw                                            ? u.draw(step, s.batch)
                                                                       : sample.draw(s.batch, f != fault::lm_targets_not_shifted);
      if (f == fault::same_batch && !fixed.first.defined()) fixed = batch;
      else if (f == fault::same_batch && u.draw_every_step) u.draw(step, s.batch);  // episodes collected, not trained on
      auto x = tokens ? batch.first : batch.first * input_scale;
      auto y = batch.second;
      if (f == fault::labels_off_by_one) y = u.shift_labels ? u.shift_labels(y) : (y + 1).remainder(u.classes);
      // Mixup (or a diffusion's noising): after the loader (its labels, right or wrong) and the input scale, before the model.
      if (u.mix) std::tie(x, y) = u.mix(x, y);
      if (!tokens) tap.input = x.detach();
      if (u.custom_step) {
        custom = u.custom_step({.step = step,
                                .lr = lr,
                                .zero_grad = !(f == fault::no_zero_grad && active),
                                .nan = f == fault::nan_grad_norm_real && active,
                                .skip_update = amp_skip,
                                .x = x,
                                .tap = &tap,
                                .y = y,
                                .mon = mon ? &*mon : nullptr});
        loss_sum += custom.loss;
        logits = custom.output;
        norm = custom.grad_norm;
        continue;
      }
      logits = model.forward(x, tap);
      // The rows the loss reads (a GCN's labelled nodes); the output observed is every row.
      auto loss = u.loss_rows.defined() ? loss_of(logits.index_select(0, u.loss_rows), x, y.index_select(0, u.loss_rows), tap)
                                        : loss_of(logits, x, y, tap);
      // 0.1, not Switch's 0.01: at 0.01 the small digit MoEs collapsed onto 3 of 8 experts
      // (normalized load entropy 0.3-0.5), a router collapse by the method's own line, not a
      // healthy run (issue 15).
      auto total = tap.aux.defined() ? loss + 0.1 * tap.aux : loss;
      if (f == fault::nan_grad_norm_real && active) total = total * std::numeric_limits<double>::quiet_NaN();
      loss_sum += (f == fault::nan_grad_norm_real && active) ? std::numeric_limits<double>::quiet_NaN() : loss.item<double>();
      (total / static_cast<double>(s.accumulation)).backward();
    }
    const double loss_value = loss_sum / static_cast<double>(s.accumulation);
    if (!u.custom_step) {
      if (u.after_backward) u.after_backward();
      norm = u.clip > 0.0 ? torch::nn::utils::clip_grad_norm_(model.parameters(), u.clip) : grad_norm(model);
      if (!amp_skip) opt->step();
    }
    if (amp_skip) {
      norm = std::numeric_limits<double>::quiet_NaN();
      loss_scale *= 0.5;
    }
    if (u.after_update) u.after_update(step);
    // The progress metric (the GAN's Fréchet distance, the episodes' return), measured as the
    // family's user measures it, not the monitor's cost.
    const bool measured = u.metric && (step % u.metric_every == 0 || step + 1 == s.steps);
    const double metric = measured ? u.metric(step)
                          : u.metric   ? res.metric_values.back()
                                       : std::numeric_limits<double>::quiet_NaN();
    if (u.metric) res.metric_values.push_back(metric);

    const auto monitor_start = clock::now();  // the monitor's share: issue 18's overhead target
    if (mon) {
      if (!u.open_step_first) mon->begin_step(step);
      if (!custom.loss_observed) mon->observe(mldiag::scalar::loss, loss_value);
      if (u.data_changes_at && u.data_changes_at(step)) mon->observe(mldiag::regime_change{mldiag::change::data});
      if (u.schedule_changes_at && u.schedule_changes_at(step))
        mon->observe(mldiag::regime_change{mldiag::change::optimizer});
      // The rate of the optimizer in use (quasi_newton's Adam, then L-BFGS's), else the schedule's.
      mon->observe(mldiag::scalar::learning_rate, std::isnan(custom.lr) ? lr : custom.lr);
      mon->observe(mldiag::scalar::grad_norm, norm);
      if (f == fault::logged_nan_grad_norm_amp) mon->observe(mldiag::scalar::loss_scale, loss_scale);
      if (u.observe_group_lrs) {
        if (opt) mldiag::observe_learning_rates(*mon, *opt, name(s.opt));
        if (custom.active) mldiag::observe_learning_rates(*mon, *custom.active, custom.active_name);
        else
          for (const auto& [opt_name, o] : u.optimizers) mldiag::observe_learning_rates(*mon, *o, opt_name);
      }
      if (measured) mon->observe_metric(u.metric_name, metric, u.metric_higher_is_better);
      observe_module(*mon, model, prev, tap, logits, /*logits=*/!mse && !u.output_not_logits);
    }
    monitor_seconds += std::chrono::duration<double>(clock::now() - monitor_start).count();
    if (u.validation && ((step + 1) % val_every == 0 || step + 1 == s.steps)) {
      torch::NoGradGuard no_grad;
      model.eval();
      taps vt;
      auto vx = tokens || !val_x.defined() ? val_x : val_x * input_scale;  // undefined: the family's own validation
      double v = 0.0;
      if (u.validate) {
        v = u.validate(model, input_scale);
      } else if (u.nt_xent) {
        // In-batch negatives: the loss depends on the batch's size, so validation is the mean
        // over micro-batches of the training size.
        const auto b = std::min(s.batch, vx.size(0));
        int chunks = 0;
        for (std::int64_t i = 0; i + b <= vx.size(0); i += b, ++chunks) {
          taps ct;
          auto xc = vx.slice(0, i, i + b);
          v += loss_of(model.forward(xc, ct), xc, val_y, ct).item<double>();
        }
        v /= chunks;
      } else {
        auto out = model.forward(vx, vt);
        v = loss_of(out, vx, val_y, vt).item<double>();
      }
      if (mon) mon->observe(mldiag::scalar::val_loss, v);
      res.val_losses.emplace_back(step, v);
      if (!seen_val) res.val_first = v;
      seen_val = true;
      res.val_last = v;
    }
    const auto close_start = clock::now();
    if (mon) examples::close_step(res.run, hooks, *mon, step, loss_value);
    else res.run.losses.push_back(loss_value);
    monitor_seconds += std::chrono::duration<double>(clock::now() - close_start).count();
  }
  if (!res.metric_values.empty()) {
    const auto& M = res.metric_values;
    const auto m = static_cast<std::ptrdiff_t>(M.size());
    const auto first = std::min<std::ptrdiff_t>(5, m), last = std::max<std::ptrdiff_t>(1, m / 10);
    res.initial_metric = std::accumulate(M.begin(), M.begin() + first, 0.0) / static_cast<double>(first);
    res.final_metric = std::accumulate(M.end() - last, M.end(), 0.0) / static_cast<double>(last);
  }
  const auto& L = res.run.losses;
  const auto n = static_cast<std::ptrdiff_t>(L.size());
  const auto head = std::min<std::ptrdiff_t>(5, n), tail = std::max<std::ptrdiff_t>(1, n / 10);
  res.initial_loss = std::accumulate(L.begin(), L.begin() + head, 0.0) / static_cast<double>(head);
  res.final_loss = std::accumulate(L.end() - tail, L.end(), 0.0) / static_cast<double>(tail);
  res.seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  examples::finish(res.run, res.seconds, monitor_seconds);
  return res;
}

}  // namespace zoo
