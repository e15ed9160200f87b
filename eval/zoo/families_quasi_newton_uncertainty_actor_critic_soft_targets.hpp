// SPDX-License-Identifier: Apache-2.0
/// The `quasi_newton`, `uncertainty_multitask`, `actor_critic` and `soft_targets` families (split
/// heldout10) in LibTorch: full-batch L-BFGS with a closure (LibTorch's `torch::optim::LBFGS`,
/// strong Wolfe line search) on a logistic regression and small tanh MLPs over the digits, one
/// variant starting with Adam and switching to L-BFGS half-way; a shared trunk with two or three
/// heads (the digit's class, the image's reconstruction, the ink's centroid) weighted by learned
/// homoscedastic uncertainty (Kendall, Gal & Cipolla 2018), whose total loss has no lower bound
/// and goes below 0 once the tasks fit; advantage actor-critic on round 9's CartPole (PyTorch's
/// actor_critic.py, an A2C with GAE and a small PPO with a clipped surrogate); and a classifier
/// trained on soft targets (label smoothing, mixup), whose loss cannot reach 0. They probe the
/// declarations of issue 38 that round 9 had not: an optimizer that evaluates the loss several
/// times a step and stops moving at its tolerance (`task::line_search`), a loss with no lower
/// bound (`task::loss_floor = no_lower_bound`), a loss floor above 0 (`task::loss_floor` = the
/// soft targets' entropy), a change of optimizer made on purpose (`regime_change{optimizer}`),
/// and, again, a surrogate loss beside a progress metric (`objective::not_progress`, the return).
/// Like the other families, each taps its activations in forward order through `taps` and names
/// the layers forward_inf can be planted in. Their own modules, so that a change to another
/// family cannot change these held-out runs; only round 9's CartPole is reused, as it is.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "families_adversarial_policy_recsys_graph.hpp"  // cartpole, unrecorded_like
#include "observe.hpp"

#include <mldiag/monitor.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>  // std::mt19937_64: the environments' and mixup's own generators
#include <string>
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// quasi_newton: full-batch L-BFGS

/// A smooth classifier for a quasi-Newton method: in -> hidden... (tanh: `fc1`, `fc2`, ...) ->
/// classes (`out`); no hidden layer: a multinomial logistic regression. LibTorch's default
/// initialization.
struct smooth_mlp_net : net {
  smooth_mlp_net(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t classes) {
    std::int64_t width = in;
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      fc.push_back(register_module(n, torch::nn::Linear(width, hidden[i])));
      names.push_back(n + ".tanh");
      overflow_sites.emplace_back(n, n + ".tanh");
      width = hidden[i];
    }
    out = register_module("out", torch::nn::Linear(width, classes));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < fc.size(); ++i)
      h = t.act(names[i], torch::tanh(fc[i](h)));
    return out(h);
  }
  /// 0.5 x the squared weights (not the biases): the L2 term of the objective.
  torch::Tensor weight_penalty() {
    auto sum = out->weight.pow(2).sum();
    for (auto& l : fc)
      sum = sum + l->weight.pow(2).sum();
    return 0.5 * sum;
  }
  std::vector<torch::nn::Linear> fc;
  std::vector<std::string> names;
  torch::nn::Linear out{nullptr};
};

/// The parameters of `m` but those of module `left_out` (its `left_out.*` tensors; "" leaves
/// nothing out): what a user hands the optimizer, frozen_layer's bug included.
inline std::vector<torch::Tensor> parameters_but(torch::nn::Module& m,
                                                 const std::string& left_out) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.named_parameters()) {
    const auto& k = p.key();
    if (!left_out.empty() && (k == left_out || k.rfind(left_out + ".", 0) == 0)) continue;
    out.push_back(p.value());
  }
  return out;
}

/// What one quasi_newton step returns to the loop: the step's loss (the first evaluation's, at
/// the step's parameters: what `LBFGS::step` returns), its logits, the gradient norm of that
/// evaluation, the learning rate of the optimizer in use, and that optimizer and its name.
struct quasi_newton_step_result {
  double loss;
  torch::Tensor logits;
  double grad_norm;
  double lr;
  torch::optim::Optimizer* active;
  const char* active_name;
};

/// Full-batch training of a smooth_mlp_net by L-BFGS as a PyTorch user writes it: a closure
/// that zeroes the gradients, computes the loss (cross-entropy + `l2` x the weight penalty),
/// calls backward and returns the loss; `optimizer.step(closure)` once per step. L-BFGS runs up
/// to `max_iter` iterations a step, each with a strong Wolfe line search, so the closure is
/// evaluated several times a step, and once the change of the loss or of the parameters falls
/// below its tolerance it stops moving, the parameters unchanged but for the last bits.
/// `adam`: the first `switch_at` steps are Adam's (the full batch, one evaluation a step, at
/// `adam_lr_ratio` x the run's rate), L-BFGS's from then on, and at the switch the user
/// declares `regime_change{optimizer}`. `record_in_closure`: the user observes the loss inside
/// the closure, each evaluation (`task::line_search` tells the monitor that the first is the
/// step's); otherwise the loop observes the loss `step` returns, once.
struct quasi_newton_trainer {
  smooth_mlp_net* model = nullptr;
  std::shared_ptr<torch::optim::LBFGS> lbfgs;
  std::shared_ptr<torch::optim::Adam> adam;  ///< null: L-BFGS from the first step
  std::int64_t switch_at = 0;
  double adam_lr_ratio = 1e-2;
  double l2 = 0.0;
  bool record_in_closure = false;
  /// wrong_loss_mse_on_logits: MSE between the logits and one-hot labels in place of the
  /// cross-entropy (the L2 term kept).
  bool mse_on_logits = false;

  /// `zero_grad` false: the closure never zeroes the gradients (no_zero_grad: they pile up over
  /// every evaluation of every step); `nan` multiplies the loss by NaN. `t` records the first
  /// evaluation's activations (the others overflow where it does, unrecorded). `mon`: null when
  /// the run is not monitored; else its open step.
  quasi_newton_step_result step(std::int64_t step, double lr, const torch::Tensor& x,
                                const torch::Tensor& y, bool zero_grad, bool nan, taps& t,
                                mldiag::monitor* mon) {
    const double poison = nan ? std::numeric_limits<double>::quiet_NaN() : 1.0;
    auto objective = [&](const torch::Tensor& logits) {
      const auto fit =
          mse_on_logits
              ? torch::mse_loss(logits, torch::one_hot(y, logits.size(1)).to(logits.dtype()))
              : torch::nn::functional::cross_entropy(logits, y);
      return (fit + l2 * model->weight_penalty()) * poison;
    };
    if (adam && step < switch_at) {
      const double rate = lr * adam_lr_ratio;
      for (auto& g : adam->param_groups())
        g.options().set_lr(rate);
      if (zero_grad) adam->zero_grad();
      auto logits = model->forward(x, t);
      auto loss = objective(logits);
      loss.backward();
      const double norm = grad_norm(*model);
      adam->step();
      const double v = loss.item<double>();
      if (record_in_closure && mon) mon->observe(mldiag::scalar::loss, v);
      return {v, logits.detach(), norm, rate, adam.get(), "adam"};
    }
    // Adam to L-BFGS, on purpose: the user says so at the first L-BFGS step.
    if (adam && step == switch_at && mon)
      mon->observe(mldiag::regime_change{mldiag::change::optimizer});
    for (auto& g : lbfgs->param_groups())
      g.options().set_lr(lr);
    bool first = true;
    double first_loss = std::numeric_limits<double>::quiet_NaN(), first_norm = first_loss;
    torch::Tensor first_logits;
    auto closure = [&]() -> torch::Tensor {
      // LBFGS::step runs under a NoGradGuard and enables gradients around its closure calls;
      // enabled here too, as a closure that must build a graph should not rely on the caller.
      torch::AutoGradMode enable_grad(true);
      if (zero_grad) lbfgs->zero_grad();
      taps later = unrecorded_like(t);
      auto logits = model->forward(x, first ? t : later);
      auto loss = objective(logits);
      loss.backward();
      const double v = loss.item<double>();
      if (record_in_closure && mon) mon->observe(mldiag::scalar::loss, v);
      if (first) {
        first_loss = v;
        first_logits = logits.detach();
        first_norm = grad_norm(*model);
        first = false;
      }
      return loss;
    };
    lbfgs->step(closure);
    return {first_loss, first_logits, first_norm, lr, lbfgs.get(), "lbfgs"};
  }
};

// ---------------------------------------------------------------------------------------------
// uncertainty_multitask: a shared trunk, heads weighted by learned uncertainty

/// How the tasks' losses L_i are weighted by the learned log-variances s_i (`log_vars`, one per
/// task, started at 0):
/// - `plain`: sum_i exp(-s_i) L_i + s_i, the form most implementations write;
/// - `kendall`: Kendall, Gal & Cipolla 2018's own: exp(-s) L + s / 2 for the classification
///   (a softmax likelihood with temperature sigma^2), exp(-s) L / 2 + s / 2 for a regression (a
///   Gaussian likelihood), with s = log sigma^2.
/// Either has no lower bound: as a task fits, L_i -> small and s_i -> ln L_i, each term tends
/// to 1 + ln L_i (plain), and the total goes below 0.
enum class uncertainty_weighting { plain, kendall };

/// The multi-task model: a trunk in -> widths (ReLU: `fc1`, `fc2`, ...) and heads on its last
/// layer: `classify` (-> classes: the class logits, the forward's output), `reconstruct` (->
/// in, sigmoid: the image) and, with `centroid`, `locate` (-> 2: the ink's centroid, column and
/// row, standardized); `log_vars` [tasks] the learned s_i. The forward keeps its input and the
/// other heads' outputs for the loss.
struct multitask_net : net {
  multitask_net(std::int64_t in, const std::vector<std::int64_t>& widths, std::int64_t classes,
                bool centroid) {
    using namespace torch::nn;
    std::int64_t width = in;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      trunk.push_back(register_module(n, Linear(width, widths[i])));
      names.push_back(n + ".relu");
      overflow_sites.emplace_back(n, n + ".relu");
      width = widths[i];
    }
    classify = register_module("classify", Linear(width, classes));
    reconstruct = register_module("reconstruct", Linear(width, in));
    if (centroid) locate = register_module("locate", Linear(width, 2));
    log_vars = register_parameter("log_vars", torch::zeros({centroid ? 3 : 2}));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h = x;
    for (std::size_t i = 0; i < trunk.size(); ++i)
      h = t.act(names[i], torch::relu(trunk[i](h)));
    last_input = x;
    last_reconstruction = torch::sigmoid(reconstruct(h));
    last_centroid = locate.is_empty() ? torch::Tensor() : locate(h);
    return classify(h);
  }
  std::vector<torch::nn::Linear> trunk;
  std::vector<std::string> names;
  torch::nn::Linear classify{nullptr}, reconstruct{nullptr}, locate{nullptr};
  torch::Tensor log_vars;
  torch::Tensor last_input, last_reconstruction, last_centroid;
};

/// The ink's centroid of side x side images [N, side^2] (non-negative): [N, 2], column then
/// row, in pixels from the top left; invariant to the images' scale.
inline torch::Tensor ink_centroid(const torch::Tensor& x, std::int64_t side) {
  const auto img = x.view({x.size(0), side, side});
  const auto mass = img.sum({1, 2}).clamp_min(1e-6);
  const auto pos = torch::arange(side, x.options());
  const auto col = (img.sum(1) * pos).sum(1) / mass;
  const auto row = (img.sum(2) * pos).sum(1) / mass;
  return torch::stack({col, row}, 1);
}

/// The uncertainty-weighted loss of the last forward: the classification's cross-entropy
/// against `y`, the reconstruction's MSE against the input, the centroid's MSE against the
/// input's standardized centroid (`centroid_mean`, `centroid_sd`: the training images').
struct uncertainty_loss {
  multitask_net* model = nullptr;
  uncertainty_weighting weighting = uncertainty_weighting::plain;
  std::int64_t side = 8;
  torch::Tensor centroid_mean, centroid_sd;  // [2]

  torch::Tensor operator()(const torch::Tensor& logits, const torch::Tensor& y) const {
    const auto& s = model->log_vars;
    std::vector<torch::Tensor> losses = {
        torch::nn::functional::cross_entropy(logits, y),
        torch::mse_loss(model->last_reconstruction, model->last_input)};
    if (model->last_centroid.defined()) {
      torch::Tensor target;
      {
        torch::NoGradGuard no_grad;
        target = (ink_centroid(model->last_input, side) - centroid_mean) / centroid_sd;
      }
      losses.push_back(torch::mse_loss(model->last_centroid, target));
    }
    auto total = torch::zeros({}, logits.options());
    for (std::size_t i = 0; i < losses.size(); ++i) {
      const auto si = s.select(0, static_cast<std::int64_t>(i));
      if (weighting == uncertainty_weighting::plain)
        total = total + torch::exp(-si) * losses[i] + si;
      else if (i == 0)
        total = total + torch::exp(-si) * losses[i] + 0.5 * si;
      else
        total = total + 0.5 * torch::exp(-si) * losses[i] + 0.5 * si;
    }
    return total;
  }
};

// ---------------------------------------------------------------------------------------------
// actor_critic: A2C and PPO on CartPole

/// An actor and a critic. `shared`: PyTorch's examples/reinforcement_learning/actor_critic.py,
/// one trunk obs -> hidden (ReLU, `fc1`) and two heads, `action` (the logits) and `value`;
/// otherwise two networks of two tanh layers each, Stable-Baselines3's default for A2C and PPO
/// (`actor.fc1`, `actor.fc2`, `actor.out`; `critic.fc1`, `critic.fc2`, `critic.out`). The
/// forward returns the action logits and keeps the values [N] for the loss. LibTorch's default
/// initialization.
struct actor_critic_net : net {
  actor_critic_net(std::int64_t observation, std::int64_t hidden, std::int64_t actions, bool shared)
      : shared_(shared) {
    using namespace torch::nn;
    if (shared_) {
      fc1 = register_module("fc1", Linear(observation, hidden));
      action = register_module("action", Linear(hidden, actions));
      value_head = register_module("value", Linear(hidden, 1));
      overflow_sites = {{"fc1", "fc1.relu"}};
      return;
    }
    actor = register_module("actor", Sequential());
    critic = register_module("critic", Sequential());
    a_fc1 = actor->register_module("fc1", Linear(observation, hidden));
    a_fc2 = actor->register_module("fc2", Linear(hidden, hidden));
    a_out = actor->register_module("out", Linear(hidden, actions));
    c_fc1 = critic->register_module("fc1", Linear(observation, hidden));
    c_fc2 = critic->register_module("fc2", Linear(hidden, hidden));
    c_out = critic->register_module("out", Linear(hidden, 1));
    overflow_sites = {{"actor.fc1", "actor.fc1.tanh"},
                      {"actor.fc2", "actor.fc2.tanh"},
                      {"critic.fc1", "critic.fc1.tanh"},
                      {"critic.fc2", "critic.fc2.tanh"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    if (shared_) {
      const auto h = t.act("fc1.relu", torch::relu(fc1(x)));
      last_value = value_head(h).squeeze(1);
      return action(h);
    }
    auto a = t.act("actor.fc1.tanh", torch::tanh(a_fc1(x)));
    a = t.act("actor.fc2.tanh", torch::tanh(a_fc2(a)));
    auto c = t.act("critic.fc1.tanh", torch::tanh(c_fc1(x)));
    c = t.act("critic.fc2.tanh", torch::tanh(c_fc2(c)));
    last_value = c_out(c).squeeze(1);
    return a_out(a);
  }
  /// The action logits alone, untapped (acting in the environment: the critic is not needed,
  /// and the episodes' forwards are not the loss's).
  torch::Tensor actor_logits(const torch::Tensor& x) {
    if (shared_) return action(torch::relu(fc1(x)));
    return a_out(torch::tanh(a_fc2(torch::tanh(a_fc1(x)))));
  }
  bool shared_;
  torch::nn::Linear fc1{nullptr}, action{nullptr}, value_head{nullptr};
  torch::nn::Sequential actor{nullptr}, critic{nullptr};
  torch::nn::Linear a_fc1{nullptr}, a_fc2{nullptr}, a_out{nullptr}, c_fc1{nullptr}, c_fc2{nullptr},
      c_out{nullptr};
  torch::Tensor last_value;  // [N]
};

/// How the actor's advantages and the critic's targets are formed (gamma 0.99 throughout):
/// - `monte_carlo`: actor_critic.py's: the discounted return R_t, whitened over the batch, is
///   the critic's target (smooth L1) and R_t - V(s_t) the advantage, V from the same forward;
/// - `gae`: generalized advantage estimation (Schulman et al. 2016, lambda 0.95) from the
///   critic's values at collection, bootstrapped where an episode is cut at 200 steps; the
///   advantages whitened over the batch, the targets A_t + V(s_t) (MSE x 0.5), as
///   Stable-Baselines3's A2C and PPO form them;
/// - `ppo`: `gae`'s, with PPO's clipped surrogate (clip 0.2) and `epochs` optimizer steps on
///   each batch of episodes before the next is collected.
enum class ac_kind { monte_carlo, gae, ppo };

/// The episodes an actor-critic collects on round 9's CartPole, and its loss over them. A
/// batch of `b` CartPole episodes run side by side to their end with actions sampled from the
/// current policy (no gradient) by the run's own generator; a policy whose probabilities are
/// not finite acts uniformly at random. The batch handed to the loop: the observations [T, 4]
/// of every step of every episode, and per step (action, advantage or whitened return, value
/// target, log-probability at collection) [T, 4]. With `ppo` the same batch is handed out for
/// `epochs` steps, then a new one is collected.
struct ac_rollout {
  actor_critic_net* model;
  ac_kind kind;
  double entropy_coef = 0.0, value_coef = 0.5;
  std::int64_t epochs = 1;
  std::mt19937_64 rng;
  double last_return = std::numeric_limits<double>::quiet_NaN();  ///< the last batch's mean return
  std::pair<torch::Tensor, torch::Tensor> held;                   ///< ppo: the batch of this epoch

  ac_rollout(actor_critic_net* m, ac_kind k, double entropy, std::int64_t ppo_epochs,
             std::uint64_t seed)
      : model(m), kind(k), entropy_coef(entropy), epochs(ppo_epochs), rng(seed) {}

  /// Per row of `obs` [k, 4]: the sampled action and its log-probability.
  std::vector<std::pair<int, double>> act(const torch::Tensor& obs) {
    torch::NoGradGuard no_grad;
    const auto p = torch::softmax(model->actor_logits(obs).to(torch::kDouble), 1).contiguous();
    const auto k = p.size(0), a = p.size(1);
    const double* pp = p.data_ptr<double>();
    std::vector<std::pair<int, double>> out(static_cast<std::size_t>(k));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (std::int64_t i = 0; i < k; ++i) {
      const double* row = pp + i * a;
      bool finite = true;
      for (std::int64_t j = 0; j < a; ++j)
        finite = finite && std::isfinite(row[j]);
      const double r = u(rng);
      double acc = 0.0;
      int pick = static_cast<int>(a - 1);
      for (std::int64_t j = 0; j < a; ++j) {
        acc += finite ? row[j] : 1.0 / static_cast<double>(a);
        if (r < acc) {
          pick = static_cast<int>(j);
          break;
        }
      }
      const double prob = finite ? row[pick] : 1.0 / static_cast<double>(a);
      out[static_cast<std::size_t>(i)] = {pick, std::log(std::max(prob, 1e-300))};
    }
    return out;
  }

  /// The loop's batch for step `step`: a fresh one, or with `ppo` the held one within its epochs.
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t step, std::int64_t b) {
    if (kind != ac_kind::ppo || !held.first.defined() || step % epochs == 0) held = collect(b);
    return held;
  }

  std::pair<torch::Tensor, torch::Tensor> collect(std::int64_t b) {
    std::vector<cartpole> env(static_cast<std::size_t>(b));
    for (auto& e : env)
      e.reset(rng);
    struct record {
      std::vector<std::array<float, 4>> obs;
      std::vector<int> action;
      std::vector<double> logp;
      std::array<float, 4> last{};  ///< the state after the last step (bootstrapped if cut at 200)
      bool cut = false;
    };
    std::vector<record> ep(env.size());
    const auto state = [](const cartpole& e) {
      return std::array<float, 4>{static_cast<float>(e.x), static_cast<float>(e.x_dot),
                                  static_cast<float>(e.theta), static_cast<float>(e.theta_dot)};
    };
    for (;;) {
      std::vector<std::size_t> alive;
      for (std::size_t i = 0; i < env.size(); ++i)
        if (!env[i].done) alive.push_back(i);
      if (alive.empty()) break;
      auto o = torch::empty({static_cast<std::int64_t>(alive.size()), 4});
      auto* op = o.data_ptr<float>();
      for (std::size_t k = 0; k < alive.size(); ++k) {
        const auto s = state(env[alive[k]]);
        std::copy(s.begin(), s.end(), op + 4 * k);
        ep[alive[k]].obs.push_back(s);
      }
      const auto a = act(o);
      for (std::size_t k = 0; k < alive.size(); ++k) {
        auto& e = env[alive[k]];
        ep[alive[k]].action.push_back(a[k].first);
        ep[alive[k]].logp.push_back(a[k].second);
        e.step(a[k].first);
        if (e.done) {
          ep[alive[k]].last = state(e);
          // Cut by the time limit, not failed: the pole still up and the cart on the track.
          ep[alive[k]].cut = e.steps >= cartpole::max_steps && std::abs(e.x) <= 2.4 &&
                             std::abs(e.theta) <= 12.0 * 2.0 * 3.141592653589793 / 360.0;
        }
      }
    }
    // The critic's values of every state and of each cut episode's last state (gae, ppo).
    std::vector<float> flat_obs;
    std::size_t total = 0;
    double return_sum = 0.0;
    for (const auto& r : ep) {
      total += r.obs.size();
      return_sum += static_cast<double>(r.obs.size());
      for (const auto& s : r.obs)
        flat_obs.insert(flat_obs.end(), s.begin(), s.end());
    }
    last_return = return_sum / static_cast<double>(ep.size());
    const auto T = static_cast<std::int64_t>(total);
    auto x = torch::from_blob(flat_obs.data(), {T, 4}, torch::kFloat).clone();
    std::vector<double> first_col, second_col, third_col, fourth_col;
    first_col.reserve(total);
    if (kind == ac_kind::monte_carlo) {
      for (const auto& r : ep) {
        std::vector<double> ret(r.obs.size());
        double to_go = 0.0;
        for (std::size_t t = r.obs.size(); t-- > 0;)
          ret[t] = to_go = 1.0 + 0.99 * to_go;
        second_col.insert(second_col.end(), ret.begin(), ret.end());
        for (std::size_t t = 0; t < r.obs.size(); ++t) {
          first_col.push_back(r.action[t]);
          fourth_col.push_back(r.logp[t]);
        }
      }
      whiten(second_col);
      third_col = second_col;
    } else {
      std::vector<float> lasts;
      for (const auto& r : ep)
        lasts.insert(lasts.end(), r.last.begin(), r.last.end());
      torch::Tensor v, v_last;
      {
        torch::NoGradGuard no_grad;
        taps unused;
        model->forward(x, unused);
        v = model->last_value.to(torch::kDouble).contiguous();
        auto xl =
            torch::from_blob(lasts.data(), {static_cast<std::int64_t>(ep.size()), 4}, torch::kFloat)
                .clone();
        model->forward(xl, unused);
        v_last = model->last_value.to(torch::kDouble).contiguous();
      }
      const double* vp = v.data_ptr<double>();
      const double* vl = v_last.data_ptr<double>();
      std::size_t at = 0;
      for (std::size_t i = 0; i < ep.size(); ++i) {
        const auto& r = ep[i];
        const auto n = r.obs.size();
        std::vector<double> adv(n);
        double gae = 0.0;
        for (std::size_t t = n; t-- > 0;) {
          const double next = t + 1 < n ? vp[at + t + 1] : (r.cut ? vl[i] : 0.0);
          const double delta = 1.0 + 0.99 * next - vp[at + t];
          gae = delta + 0.99 * 0.95 * gae;
          adv[t] = gae;
        }
        for (std::size_t t = 0; t < n; ++t) {
          first_col.push_back(r.action[t]);
          second_col.push_back(adv[t]);
          third_col.push_back(adv[t] + vp[at + t]);
          fourth_col.push_back(r.logp[t]);
        }
        at += n;
      }
      whiten(second_col);
    }
    auto y = torch::empty({T, 4}, torch::kDouble);
    y.select(1, 0).copy_(torch::tensor(first_col, torch::kDouble));
    y.select(1, 1).copy_(torch::tensor(second_col, torch::kDouble));
    y.select(1, 2).copy_(torch::tensor(third_col, torch::kDouble));
    y.select(1, 3).copy_(torch::tensor(fourth_col, torch::kDouble));
    return {x, y.to(torch::kFloat)};
  }

  /// Subtracts `w`'s mean and divides by its standard deviation (1e-8 added).
  static void whiten(std::vector<double>& w) {
    double m = 0.0, v = 0.0;
    for (const double x : w)
      m += x;
    m /= static_cast<double>(w.size());
    for (const double x : w)
      v += (x - m) * (x - m);
    const double sd = std::sqrt(v / static_cast<double>(w.size()));
    for (double& x : w)
      x = (x - m) / (sd + 1e-8);
  }

  /// The actor-critic loss of the batch (logits from the loop's forward, the values kept by it):
  /// the policy's term, plus `value_coef` x the critic's, less `entropy_coef` x the policy's
  /// mean entropy.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& y) const {
    const auto logp_all = torch::log_softmax(logits, 1);
    const auto logp = logp_all.gather(1, y.select(1, 0).to(torch::kLong).unsqueeze(1)).squeeze(1);
    const auto& v = model->last_value;
    torch::Tensor policy, value;
    if (kind == ac_kind::monte_carlo) {
      const auto ret = y.select(1, 1);
      policy = -(logp * (ret - v.detach())).mean();
      value = torch::nn::functional::smooth_l1_loss(v, ret);
    } else {
      const auto adv = y.select(1, 1);
      if (kind == ac_kind::ppo) {
        const auto ratio = torch::exp(logp - y.select(1, 3));
        policy = -torch::min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean();
      } else {
        policy = -(logp * adv).mean();
      }
      value = torch::mse_loss(v, y.select(1, 2));
    }
    auto total = policy + value_coef * value;
    if (entropy_coef > 0.0)
      total = total - entropy_coef * (-(logp_all.exp() * logp_all).sum(1)).mean();
    return total;
  }
};

// ---------------------------------------------------------------------------------------------
// soft_targets: label smoothing and mixup

/// A small CNN for the 8 x 8 digits: conv1 (1 -> 16, 3 x 3, padding 1) -> ReLU -> conv2 (16 ->
/// 32, 3 x 3, stride 2, padding 1) -> ReLU -> fc1 (512 -> 64) -> ReLU -> head (-> 10); an MLP
/// for the others: fc1 (-> hidden) -> ReLU -> head.
struct soft_target_net : net {
  soft_target_net(std::int64_t side, bool cnn, std::int64_t hidden, std::int64_t classes)
      : side_(side), cnn_(cnn) {
    using namespace torch::nn;
    std::int64_t width = side * side;
    if (cnn_) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, 16, 3).padding(1)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(16, 32, 3).stride(2).padding(1)));
      const auto s2 = (side + 1) / 2;
      width = 32 * s2 * s2;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}};
    }
    fc1 = register_module("fc1", Linear(width, hidden));
    overflow_sites.emplace_back("fc1", "fc1.relu");
    head = register_module("head", Linear(hidden, classes));
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

/// Labels [N] -> targets [N, classes] smoothed by `eps` (1 - eps + eps / C on the label, eps /
/// C elsewhere: PyTorch's `label_smoothing`).
inline torch::Tensor smoothed_targets(const torch::Tensor& y, std::int64_t classes, double eps) {
  const auto one_hot = torch::one_hot(y, classes).to(torch::kFloat);
  return one_hot * (1.0 - eps) + eps / static_cast<double>(classes);
}

/// Cross-entropy against soft targets [N, C] (labels [N]: smoothed by `eps` first), the batch mean.
inline torch::Tensor soft_cross_entropy(const torch::Tensor& logits, const torch::Tensor& y,
                                        double eps) {
  const auto target = y.is_floating_point() ? y : smoothed_targets(y, logits.size(1), eps);
  return -(target * torch::log_softmax(logits, 1)).sum(1).mean();
}

/// The entropy of a distribution given by its probabilities (0 ln 0 = 0).
inline double entropy_of(const std::vector<double>& p) {
  double h = 0.0;
  for (const double q : p)
    if (q > 0.0) h -= q * std::log(q);
  return h;
}

/// The entropy of targets smoothed by `eps` over `classes`: -(1 - eps + eps/C) ln(1 - eps + eps/C)
/// - (C - 1)(eps/C) ln(eps/C), the lowest loss cross-entropy against them can reach (0.500 for
/// eps 0.1 and 10 classes).
inline double smoothed_entropy(double eps, std::int64_t classes) {
  std::vector<double> p(static_cast<std::size_t>(classes), eps / static_cast<double>(classes));
  p[0] += 1.0 - eps;
  return entropy_of(p);
}

/// The lowest expected loss of cross-entropy against mixup's targets, lambda ~ Beta(alpha,
/// alpha) mixing two rows' targets each smoothed by `eps`: each mixed target's entropy is what
/// cross-entropy against it can reach at best (a model that outputs the target itself), so the
/// floor is its expectation, over lambda and over the pair: the same class with probability 1 /
/// C (balanced classes: the digits' and Fashion-MNIST's are), the entropy of the smoothed
/// target; two classes otherwise, lambda (1 - eps + eps/C) + (1 - lambda) eps/C on one, the
/// mirror on the other, eps/C on the rest. The expectation over lambda by Monte Carlo, 200,000
/// draws from a fixed seed (Beta as X / (X + Y), X, Y ~ Gamma(alpha)): it is a number the user
/// computes once, before the run.
inline double mixup_floor(double alpha, double eps, std::int64_t classes) {
  std::mt19937_64 rng(20261206);
  std::gamma_distribution<double> g(alpha, 1.0);
  const double C = static_cast<double>(classes), lo = eps / C, hi = 1.0 - eps + eps / C;
  std::vector<double> p(static_cast<std::size_t>(classes), lo);
  double sum = 0.0;
  constexpr int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    const double a = g(rng), b = g(rng);
    const double lambda = a + b > 0.0 ? a / (a + b) : 0.5;
    p[0] = lambda * hi + (1.0 - lambda) * lo;
    p[1] = (1.0 - lambda) * hi + lambda * lo;
    sum += entropy_of(p);
  }
  return smoothed_entropy(eps, classes) / C + (1.0 - 1.0 / C) * sum / draws;
}

/// Mixup (Zhang et al. 2018) as its reference code does it in the training loop, after the
/// loader: one lambda ~ Beta(alpha, alpha) per micro-batch, the batch mixed with a random
/// permutation of itself, x' = lambda x + (1 - lambda) x[perm], and the targets likewise (each
/// smoothed by `eps` first); the run's own generators.
struct mixup {
  double alpha, eps;
  std::int64_t classes;
  std::mt19937_64 rng;
  torch::Generator gen;
  mixup(double a, double e, std::int64_t c, std::uint64_t seed)
      : alpha(a), eps(e), classes(c), rng(seed), gen(at::detail::createCPUGenerator(seed + 1)) {}
  std::pair<torch::Tensor, torch::Tensor> operator()(const torch::Tensor& x,
                                                     const torch::Tensor& y) {
    std::gamma_distribution<double> g(alpha, 1.0);
    const double a = g(rng), b = g(rng);
    const double lambda = a + b > 0.0 ? a / (a + b) : 0.5;
    const auto perm = torch::randperm(x.size(0), gen, torch::kLong);
    const auto t = smoothed_targets(y, classes, eps);
    return {lambda * x + (1.0 - lambda) * x.index_select(0, perm),
            lambda * t + (1.0 - lambda) * t.index_select(0, perm)};
  }
};

}  // namespace zoo
