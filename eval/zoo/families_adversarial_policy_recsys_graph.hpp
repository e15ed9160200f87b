// SPDX-License-Identifier: Apache-2.0
/// The `adversarial`, `policy_gradient`, `recommender` and `graph` families (split heldout9) in
/// LibTorch: a GAN (a generator and a discriminator, two optimizers, alternating steps; the
/// recorded loss is the generator's adversarial loss, which hovers at its equilibrium, and
/// progress is a Fréchet distance in a small classifier's feature space), REINFORCE (a policy
/// trained by the policy-gradient surrogate on episodes of an environment written here: CartPole
/// and a contextual bandit over the digits; progress is the episode return), a recommender
/// (matrix factorization and a two-tower model on a synthetic, seeded, low-rank ratings table
/// with popularity skew; user and item embeddings initialized small, so that their norms grow
/// on purpose) and a graph convolutional network (Kipf & Welling's two layers, full-batch node
/// classification on a seeded stochastic block model with class-correlated bag-of-words
/// features). They probe what the declarations of docs/declarations.md are for: a loss that is
/// not a progress measure (`objective::not_progress` with a progress metric given by
/// `observe_metric`), embeddings meant to grow (`expect_growth`), a loss whose uninformed level
/// is not ln C (`chance_loss`), and the same input batch every step by design (`full_batch`).
/// Like the other families, each taps its activations in forward order through `taps` and
/// names the layers forward_inf can be planted in. Their own modules, so that a change to
/// another family cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>  // std::mt19937_64: the environments' and the synthetic data sets' own generators
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// adversarial: a GAN

/// The GAN's objectives (D's logit d): `non_saturating` (Goodfellow et al. 2014's practical
/// form, DCGAN's): D minimizes BCE(d_real, 1) + BCE(d_fake, 0), G minimizes BCE(d_gen, 1) =
/// -log sigmoid(d_gen); `least_squares` (LSGAN, Mao et al. 2017): D minimizes 0.5 (d_real - 1)^2 +
/// 0.5 d_fake^2, G minimizes 0.5 (d_gen - 1)^2. Each the mean over the batch.
enum class gan_objective { non_saturating, least_squares };

inline torch::Tensor discriminator_loss(gan_objective o, const torch::Tensor& d_real,
                                        const torch::Tensor& d_fake) {
  namespace F = torch::nn::functional;
  if (o == gan_objective::least_squares)
    return 0.5 * (d_real - 1.0).pow(2).mean() + 0.5 * d_fake.pow(2).mean();
  return F::binary_cross_entropy_with_logits(d_real, torch::ones_like(d_real)) +
         F::binary_cross_entropy_with_logits(d_fake, torch::zeros_like(d_fake));
}
inline torch::Tensor generator_loss(gan_objective o, const torch::Tensor& d_gen) {
  if (o == gan_objective::least_squares) return 0.5 * (d_gen - 1.0).pow(2).mean();
  return torch::nn::functional::binary_cross_entropy_with_logits(d_gen, torch::ones_like(d_gen));
}

/// A GAN's two networks as one module, so that a monitor handed the module sees both
/// (`generator.*`, `discriminator.*`), as a user who registers both does. Images are side x
/// side in [0, 1] (the generator ends in a sigmoid), flattened [N, side * side]. MLPs, LibTorch's
/// default initialization: G z -> widths (fc1, fc2, ..., ReLU) -> side^2 (`out`, sigmoid), with
/// `batchnorm` a BatchNorm (`bn2`, ...) before the ReLU of every hidden layer but the first (the
/// GAN of PyTorch-GAN's gan.py, Linder-Norén, and of most MNIST GAN tutorials); D side^2 -> the
/// widths reversed (fc1, ..., LeakyReLU 0.2) -> 1 (`out`, a logit).
struct gan_net : net {
  gan_net(std::int64_t side, std::int64_t z_dim, const std::vector<std::int64_t>& widths,
          bool batchnorm)
      : z_(z_dim) {
    using namespace torch::nn;
    generator = register_module("generator", Sequential());
    discriminator = register_module("discriminator", Sequential());
    std::int64_t in = z_dim;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      g_fc.push_back(generator->register_module(n, Linear(in, widths[i])));
      g_bn.push_back(batchnorm && i > 0 ? generator->register_module("bn" + std::to_string(i + 1),
                                                                     BatchNorm1d(widths[i]))
                                        : BatchNorm1d(nullptr));
      overflow_sites.emplace_back("generator." + n, "generator." + n + ".relu");
      in = widths[i];
    }
    g_out = generator->register_module("out", Linear(in, side * side));
    in = side * side;
    for (std::size_t i = widths.size(); i-- > 0;) {
      const std::string n = "fc" + std::to_string(widths.size() - i);
      d_fc.push_back(discriminator->register_module(n, Linear(in, widths[i])));
      overflow_sites.emplace_back("discriminator." + n, "discriminator." + n + ".lrelu");
      in = widths[i];
    }
    d_out = discriminator->register_module("out", Linear(in, 1));
  }
  /// z [N, z_dim] -> images [N, side * side] in [0, 1].
  torch::Tensor generate(const torch::Tensor& z, taps& t) {
    auto h = z;
    for (std::size_t i = 0; i < g_fc.size(); ++i) {
      h = g_fc[i](h);
      if (!g_bn[i].is_empty()) h = g_bn[i](h);
      h = t.act("generator.fc" + std::to_string(i + 1) + ".relu", torch::relu(h));
    }
    return torch::sigmoid(g_out(h));
  }
  /// images [N, side * side] -> logits [N].
  torch::Tensor discriminate(const torch::Tensor& x, taps& t) {
    namespace F = torch::nn::functional;
    const auto lrelu = F::LeakyReLUFuncOptions().negative_slope(0.2);
    auto h = x;
    for (std::size_t i = 0; i < d_fc.size(); ++i)
      h = t.act("discriminator.fc" + std::to_string(i + 1) + ".lrelu",
                F::leaky_relu(d_fc[i](h), lrelu));
    return d_out(h).squeeze(1);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override { return discriminate(x, t); }
  std::vector<torch::Tensor> generator_parameters() { return generator->parameters(); }
  std::vector<torch::Tensor> discriminator_parameters() { return discriminator->parameters(); }

  std::int64_t z_;
  torch::nn::Sequential generator{nullptr}, discriminator{nullptr};
  std::vector<torch::nn::Linear> g_fc, d_fc;
  std::vector<torch::nn::BatchNorm1d> g_bn;
  torch::nn::Linear g_out{nullptr}, d_out{nullptr};
};

/// A taps that records nothing but overflows where `like` does: the passes of a step whose
/// activations are not the ones observed (a GAN's discriminator on generated images), through
/// the same layers, so a planted Inf is there too.
inline taps unrecorded_like(const taps& like) {
  taps t;
  t.overflow_at = like.overflow_at;
  return t;
}

/// One alternating GAN step as a PyTorch user writes it, DCGAN's loop: the discriminator on a
/// real batch and on a generated one (the generator's output detached), its optimizer's step;
/// then, the discriminator's parameters frozen (`requires_grad` false, as WGAN-GP's and
/// StyleGAN's loops do, so that its gradients stay those of its own step), the generator
/// through the discriminator, its optimizer's step. `zero_grad` false leaves both optimizers'
/// gradients unzeroed (no_zero_grad); `nan` multiplies both losses by NaN; `skip_update` skips
/// both optimizer steps (the AMP scaler's skipped step). Taps, in forward order: the generator's
/// activations of the discriminator's step (the first forward of the step) and the
/// discriminator's on the real batch. Returns the generator's loss (the run's recorded loss),
/// its generated batch and the generator's gradient norm.
struct gan_step_result {
  double loss;
  torch::Tensor generated;
  double grad_norm;
};
inline gan_step_result gan_step(gan_net& m, torch::optim::Optimizer& opt_g,
                                torch::optim::Optimizer& opt_d, gan_objective o,
                                const torch::Tensor& real, torch::Generator& gen, bool zero_grad,
                                bool nan, bool skip_update, taps& t) {
  const auto b = real.size(0);
  const double poison = nan ? std::numeric_limits<double>::quiet_NaN() : 1.0;
  // The discriminator's step.
  if (zero_grad) opt_d.zero_grad();
  torch::Tensor fake;
  {
    torch::NoGradGuard no_grad;
    fake = m.generate(torch::randn({b, m.z_}, gen), t);
  }
  auto d_real = m.discriminate(real, t);
  auto quiet = unrecorded_like(t);
  auto d_fake = m.discriminate(fake, quiet);
  (discriminator_loss(o, d_real, d_fake) * poison).backward();
  if (!skip_update) opt_d.step();
  // The generator's step, the discriminator frozen.
  for (auto& p : m.discriminator_parameters())
    p.requires_grad_(false);
  if (zero_grad) opt_g.zero_grad();
  auto quiet_g = unrecorded_like(t);
  auto generated = m.generate(torch::randn({b, m.z_}, gen), quiet_g);
  auto quiet_d = unrecorded_like(t);
  const auto loss_g = generator_loss(o, m.discriminate(generated, quiet_d)) * poison;
  loss_g.backward();
  double sq = 0.0;
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : m.generator_parameters())
      if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  }
  if (!skip_update) opt_g.step();
  for (auto& p : m.discriminator_parameters())
    p.requires_grad_(true);
  return {loss_g.item<double>(), generated.detach(), std::sqrt(sq)};
}

/// The GAN's progress metric, a Fréchet distance as FID computes it (Heusel et al. 2017), in the
/// feature space of a small classifier trained on the real training images in the run's setup
/// (as GAN papers on MNIST compute FID with a LeNet in place of Inception): an MLP in -> h ->
/// 32 -> 10, ReLU, trained by Adam 1e-3 for 500 steps of 64 from a generator of its own, never
/// monitored; its 32 features of the real validation images are the reference, and each step
/// the generator, in evaluation mode, draws the same 256 latent vectors (fixed at the start)
/// and their features are compared: |mu_r - mu_g|^2 + tr(S_r) + tr(S_g) - 2 tr((S_r^1/2 S_g
/// S_r^1/2)^1/2), in double precision. Lower is better; NaN where a feature is not finite.
struct frechet_metric {
  torch::nn::Sequential features{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor mu_r, sqrt_cov_r, z;  // [32], [32, 32] double; [256, z_dim]
  double trace_r = 0.0;

  frechet_metric(std::int64_t in, std::int64_t hidden) {
    using namespace torch::nn;
    features = Sequential(Linear(in, hidden), Functional(torch::relu), Linear(hidden, 32),
                          Functional(torch::relu));
    head = Linear(32, 10);
  }
  /// The classifier's training and the reference statistics: the run's setup, unmonitored.
  void prepare(const table& t, std::int64_t z_dim, std::uint64_t seed) {
    torch::Generator gen = at::detail::createCPUGenerator(seed);
    std::vector<torch::Tensor> params = features->parameters();
    for (auto& p : head->parameters())
      params.push_back(p);
    torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-3));
    const auto n = t.x_train.size(0);
    for (int step = 0; step < 500; ++step) {
      const auto idx = torch::randint(0, n, {64}, gen, torch::kLong);
      const auto loss = torch::nn::functional::cross_entropy(
          head(features->forward(t.x_train.index_select(0, idx))), t.y_train.index_select(0, idx));
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    torch::NoGradGuard no_grad;
    for (auto& p : params)
      p.requires_grad_(false);
    const auto f = features->forward(t.x_val).to(torch::kDouble);
    mu_r = f.mean(0);
    const auto c = covariance(f, mu_r);
    auto [ev, vec] = torch::linalg_eigh(c, "L");
    sqrt_cov_r = vec.mm(torch::diag(ev.clamp_min(0.0).sqrt())).mm(vec.t());
    trace_r = c.trace().item<double>();
    z = torch::randn({256, z_dim}, gen);
  }
  static torch::Tensor covariance(const torch::Tensor& f, const torch::Tensor& mu) {
    const auto d = f - mu;
    return d.t().mm(d) / static_cast<double>(f.size(0) - 1);
  }
  double operator()(gan_net& m) {
    torch::NoGradGuard no_grad;
    m.eval();
    taps unused;
    const auto images = m.generate(z, unused);
    m.train();
    if (!torch::isfinite(images).all().item<bool>())
      return std::numeric_limits<double>::quiet_NaN();
    const auto f = features->forward(images).to(torch::kDouble);
    const auto mu = f.mean(0);
    const auto c = covariance(f, mu);
    auto inner = sqrt_cov_r.mm(c).mm(sqrt_cov_r);
    inner = 0.5 * (inner + inner.t());
    const auto ev = torch::linalg_eigvalsh(inner, "L");
    return (mu - mu_r).pow(2).sum().item<double>() + trace_r + c.trace().item<double>() -
           2.0 * ev.clamp_min(0.0).sqrt().sum().item<double>();
  }
};

// ---------------------------------------------------------------------------------------------
// policy_gradient: REINFORCE

/// A policy: an MLP observation -> hidden (ReLU) -> action logits, fc1 then head.
struct policy_net : net {
  policy_net(std::int64_t observation, std::int64_t hidden, std::int64_t actions) {
    fc1 = register_module("fc1", torch::nn::Linear(observation, hidden));
    head = register_module("head", torch::nn::Linear(hidden, actions));
    overflow_sites = {{"fc1", "fc1.relu"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    return head(t.act("fc1.relu", torch::relu(fc1(x))));
  }
  torch::nn::Linear fc1{nullptr}, head{nullptr};
};

/// CartPole as Gym's CartPole-v0 computes it (Barto, Sutton & Anderson 1983): a pole of half
/// length 0.5 m and 0.1 kg on a 1 kg cart, a force of +-10 N, Euler steps of 0.02 s; the state
/// (x, x', theta, theta') starts uniform in +-0.05; the episode ends when |x| > 2.4, |theta| >
/// 12 degrees or after 200 steps; reward 1 per step, so the return is the episode's length.
struct cartpole {
  double x = 0.0, x_dot = 0.0, theta = 0.0, theta_dot = 0.0;
  int steps = 0;
  bool done = false;
  static constexpr int max_steps = 200;
  void reset(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    x = u(rng);
    x_dot = u(rng);
    theta = u(rng);
    theta_dot = u(rng);
    steps = 0;
    done = false;
  }
  void step(int action) {
    constexpr double gravity = 9.8, mass_cart = 1.0, mass_pole = 0.1, total = mass_cart + mass_pole,
                     length = 0.5, pole_mass_length = mass_pole * length, force_mag = 10.0,
                     tau = 0.02;
    constexpr double theta_limit = 12.0 * 2.0 * 3.141592653589793 / 360.0, x_limit = 2.4;
    const double force = action == 1 ? force_mag : -force_mag;
    const double c = std::cos(theta), s = std::sin(theta);
    const double temp = (force + pole_mass_length * theta_dot * theta_dot * s) / total;
    const double theta_acc =
        (gravity * s - c * temp) / (length * (4.0 / 3.0 - mass_pole * c * c / total));
    const double x_acc = temp - pole_mass_length * theta_acc * c / total;
    x += tau * x_dot;
    x_dot += tau * x_acc;
    theta += tau * theta_dot;
    theta_dot += tau * theta_acc;
    ++steps;
    done = x < -x_limit || x > x_limit || theta < -theta_limit || theta > theta_limit ||
           steps >= max_steps;
  }
};

/// How REINFORCE weighs each step's log-probability, each whitened over the batch's steps (mean
/// 0, standard deviation 1: the advantage normalization of PyTorch's
/// examples/reinforcement_learning/reinforce.py and of most policy-gradient code):
/// - `episode_return`: the episode's whole (undiscounted) return at every step of it (Williams
///   1992), the batch mean its baseline;
/// - `reward_to_go`: the discounted reward-to-go (gamma 0.99);
/// - `bandit_reward`: a contextual bandit's reward, the batch mean its baseline.
/// Unnormalized, one learning rate did not suit both CartPole and the bandit: plain SGD needed 0.5
/// or more for the bandit (0.2: a return of 1.9 of 10 after 200 steps) and sent CartPole with the
/// whole return less its mean (advantages of +-100) back to 16-31 at SGD 1 and momentum 0.2
/// (first --curves runs). The bandit's reward less an exponential average of the past batches'
/// means, divided by the batch's standard deviation, was 1e7 on a batch whose rewards were all 0
/// (second --curves run): the batch's own mean it is.
enum class pg_advantage { episode_return, reward_to_go, bandit_reward };

/// The episodes a policy collects, and the REINFORCE surrogate over them. A batch of `b`
/// episodes: b CartPole episodes run side by side, or b bandit episodes of 10 rounds, each a
/// training image of the digits shown as the context and reward 1 where the action is its label.
/// Actions are sampled from the policy's softmax (no gradient) by the run's own generator; a
/// policy whose probabilities are not finite (after a NaN update) acts uniformly at random. The
/// batch handed to the training loop: the observations [T, obs] of every step of every
/// episode, and per step (action, advantage) [T, 2].
struct pg_rollout {
  net* policy;
  pg_advantage kind;
  const table* contexts = nullptr;  ///< the bandit's images (the digits' training rows)
  double entropy_bonus = 0.0;       ///< the surrogate less this x the policy's mean entropy
  std::mt19937_64 rng;
  torch::Generator gen;
  double return_sum = 0.0;  ///< the episodes' returns since the metric last read them
  std::int64_t episodes = 0;
  static constexpr std::int64_t bandit_rounds = 10;

  pg_rollout(net* p, pg_advantage k, const table* ctx, double entropy, std::uint64_t seed)
      : policy(p),
        kind(k),
        contexts(ctx),
        entropy_bonus(entropy),
        rng(seed),
        gen(at::detail::createCPUGenerator(seed + 1)) {}

  /// The actions for the rows of `obs` [k, obs] from the policy's current parameters.
  std::vector<int> act(const torch::Tensor& obs) {
    torch::NoGradGuard no_grad;
    taps unused;
    const auto p = torch::softmax(policy->forward(obs, unused).to(torch::kDouble), 1).contiguous();
    const auto k = p.size(0), a = p.size(1);
    const double* pp = p.data_ptr<double>();
    std::vector<int> out(static_cast<std::size_t>(k));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (std::int64_t i = 0; i < k; ++i) {
      const double* row = pp + i * a;
      bool finite = true;
      for (std::int64_t j = 0; j < a; ++j)
        finite = finite && std::isfinite(row[j]);
      double r = u(rng), acc = 0.0;
      int pick = static_cast<int>(a - 1);
      for (std::int64_t j = 0; j < a; ++j) {
        acc += finite ? row[j] : 1.0 / static_cast<double>(a);
        if (r < acc) {
          pick = static_cast<int>(j);
          break;
        }
      }
      out[static_cast<std::size_t>(i)] = pick;
    }
    return out;
  }

  std::pair<torch::Tensor, torch::Tensor> collect(std::int64_t b) {
    return contexts ? collect_bandit(b) : collect_cartpole(b);
  }

  std::pair<torch::Tensor, torch::Tensor> collect_cartpole(std::int64_t b) {
    std::vector<cartpole> env(static_cast<std::size_t>(b));
    for (auto& e : env)
      e.reset(rng);
    std::vector<std::vector<std::array<float, 4>>> obs(env.size());
    std::vector<std::vector<int>> actions(env.size());
    for (;;) {
      std::vector<std::size_t> alive;
      for (std::size_t i = 0; i < env.size(); ++i)
        if (!env[i].done) alive.push_back(i);
      if (alive.empty()) break;
      auto o = torch::empty({static_cast<std::int64_t>(alive.size()), 4});
      auto* op = o.data_ptr<float>();
      for (std::size_t k = 0; k < alive.size(); ++k) {
        const auto& e = env[alive[k]];
        const std::array<float, 4> s = {static_cast<float>(e.x), static_cast<float>(e.x_dot),
                                        static_cast<float>(e.theta),
                                        static_cast<float>(e.theta_dot)};
        std::copy(s.begin(), s.end(), op + 4 * k);
        obs[alive[k]].push_back(s);
      }
      const auto a = act(o);
      for (std::size_t k = 0; k < alive.size(); ++k) {
        actions[alive[k]].push_back(a[k]);
        env[alive[k]].step(a[k]);
      }
    }
    // Per step: the weight of its log-probability.
    std::vector<double> weight;
    std::vector<float> flat_obs;
    std::vector<float> flat_actions;
    for (std::size_t i = 0; i < env.size(); ++i) {
      const auto n = obs[i].size();
      return_sum += static_cast<double>(n);
      ++episodes;
      double to_go = 0.0;
      std::vector<double> w(n);
      for (std::size_t t = n; t-- > 0;) {
        to_go = 1.0 + 0.99 * to_go;
        w[t] = kind == pg_advantage::reward_to_go ? to_go : static_cast<double>(n);
      }
      weight.insert(weight.end(), w.begin(), w.end());
      for (std::size_t t = 0; t < n; ++t) {
        flat_obs.insert(flat_obs.end(), obs[i][t].begin(), obs[i][t].end());
        flat_actions.push_back(static_cast<float>(actions[i][t]));
      }
    }
    whiten(weight);
    const auto T = static_cast<std::int64_t>(weight.size());
    auto x = torch::from_blob(flat_obs.data(), {T, 4}, torch::kFloat).clone();
    auto y = torch::empty({T, 2});
    y.select(1, 0).copy_(torch::from_blob(flat_actions.data(), {T}, torch::kFloat));
    y.select(1, 1).copy_(torch::tensor(weight, torch::kDouble).to(torch::kFloat));
    return {x, y};
  }

  std::pair<torch::Tensor, torch::Tensor> collect_bandit(std::int64_t b) {
    const auto n = b * bandit_rounds;
    const auto idx = torch::randint(0, contexts->x_train.size(0), {n}, gen, torch::kLong);
    const auto x = contexts->x_train.index_select(0, idx);
    const auto labels = contexts->y_train.index_select(0, idx).contiguous();
    const auto a = act(x);
    std::vector<float> actions(static_cast<std::size_t>(n));
    std::vector<double> reward(static_cast<std::size_t>(n));
    double mean = 0.0;
    const auto* lp = labels.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      actions[static_cast<std::size_t>(i)] = static_cast<float>(a[static_cast<std::size_t>(i)]);
      reward[static_cast<std::size_t>(i)] = a[static_cast<std::size_t>(i)] == lp[i] ? 1.0 : 0.0;
      mean += reward[static_cast<std::size_t>(i)];
    }
    mean /= static_cast<double>(n);
    return_sum += mean * static_cast<double>(bandit_rounds) * static_cast<double>(b);
    episodes += b;
    whiten(reward);
    auto y = torch::empty({n, 2});
    y.select(1, 0).copy_(torch::from_blob(actions.data(), {n}, torch::kFloat));
    y.select(1, 1).copy_(torch::tensor(reward, torch::kDouble).to(torch::kFloat));
    return {x, y};
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

  /// The REINFORCE surrogate: -mean_t(log pi(a_t | s_t) x weight_t), less the entropy bonus x
  /// the mean entropy of the policy, over the batch's steps.
  torch::Tensor surrogate(const torch::Tensor& logits, const torch::Tensor& y) const {
    const auto logp = torch::log_softmax(logits, 1);
    const auto a = y.select(1, 0).to(torch::kLong).unsqueeze(1);
    auto loss = -(logp.gather(1, a).squeeze(1) * y.select(1, 1)).mean();
    if (entropy_bonus > 0.0) loss = loss - entropy_bonus * (-(logp.exp() * logp).sum(1)).mean();
    return loss;
  }

  /// The mean return of the episodes collected since the last call (NaN when none were).
  double take_mean_return() {
    const double r = episodes > 0 ? return_sum / static_cast<double>(episodes)
                                  : std::numeric_limits<double>::quiet_NaN();
    return_sum = 0.0;
    episodes = 0;
    return r;
  }
};

// ---------------------------------------------------------------------------------------------
// recommender: matrix factorization and a two-tower model

/// A synthetic ratings table shaped like MovieLens-100K (no network here, and Debian ships no
/// MovieLens): 943 users, 1682 items, about 100,000 ratings from 1 to 5, drawn once from a fixed
/// seed (the data set; the same in every run). A rank-10 model: user and item factors N(0,
/// 1/sqrt(10)) per entry, user biases N(0, 0.3), item biases N(0, 0.4) plus 0.25 x the item's
/// standardized log popularity (popular items are rated higher), rating = round(3.5 + biases +
/// 3 x the factors' product + N(0, 0.6)) clamped to 1..5 (the training ratings' variance about
/// 1.2, MovieLens-100K's 1.27). Which pairs are rated is skewed as
/// real feedback is: users' activity log-normal (sigma 1), items' popularity Zipf (exponent 0.9,
/// ranks shuffled), each pair drawn with probability proportional to both, without repeats. 90% of
/// the ratings, shuffled, are training and 10% validation. Implicit feedback (BPR): the ratings of
/// 4 and 5 are the positives. Inputs are id pairs [n, 2] int64 (user, item); targets [n, 1] float.
struct ratings {
  std::int64_t users = 943, items = 1682;
  table explicit_feedback;                                  ///< every rating; y the rating
  table implicit_feedback;                                  ///< the ratings of 4 and 5; y 1
  std::vector<std::unordered_set<std::int64_t>> positives;  ///< per user, the training positives
  double mean_rating = 0.0;                                 ///< over the training ratings
};

inline ratings synthetic_ratings() {
  ratings r;
  std::mt19937_64 rng(20261204);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int rank = 10;
  const auto U = r.users, I = r.items;
  std::vector<double> p(static_cast<std::size_t>(U * rank)), q(static_cast<std::size_t>(I * rank));
  for (auto& v : p)
    v = normal(rng) / std::sqrt(static_cast<double>(rank));
  for (auto& v : q)
    v = normal(rng) / std::sqrt(static_cast<double>(rank));
  std::vector<double> activity(static_cast<std::size_t>(U)),
      popularity(static_cast<std::size_t>(I));
  for (auto& a : activity)
    a = std::exp(normal(rng));
  std::vector<std::int64_t> rank_of(static_cast<std::size_t>(I));
  for (std::int64_t i = 0; i < I; ++i)
    rank_of[static_cast<std::size_t>(i)] = i + 1;
  std::shuffle(rank_of.begin(), rank_of.end(), rng);
  for (std::int64_t i = 0; i < I; ++i)
    popularity[static_cast<std::size_t>(i)] =
        std::pow(static_cast<double>(rank_of[static_cast<std::size_t>(i)]), -0.9);
  std::vector<double> log_pop(popularity.size());
  double lm = 0.0, lv = 0.0;
  for (std::size_t i = 0; i < popularity.size(); ++i)
    lm += log_pop[i] = std::log(popularity[i]);
  lm /= static_cast<double>(I);
  for (const double v : log_pop)
    lv += (v - lm) * (v - lm);
  const double lsd = std::sqrt(lv / static_cast<double>(I));
  std::vector<double> bu(static_cast<std::size_t>(U)), bi(static_cast<std::size_t>(I));
  for (auto& v : bu)
    v = 0.3 * normal(rng);
  for (std::size_t i = 0; i < bi.size(); ++i)
    bi[i] = 0.4 * normal(rng) + 0.25 * (log_pop[i] - lm) / lsd;
  std::discrete_distribution<std::int64_t> pick_user(activity.begin(), activity.end());
  std::discrete_distribution<std::int64_t> pick_item(popularity.begin(), popularity.end());
  std::unordered_set<std::int64_t> seen;
  std::vector<std::int64_t> us, is;
  std::vector<float> rs;
  constexpr std::int64_t target = 100000;
  while (static_cast<std::int64_t>(rs.size()) < target) {
    const auto u = pick_user(rng), i = pick_item(rng);
    if (!seen.insert(u * I + i).second) continue;
    double dot = 0.0;
    for (int k = 0; k < rank; ++k)
      dot += p[static_cast<std::size_t>(u * rank + k)] * q[static_cast<std::size_t>(i * rank + k)];
    const double v = std::round(3.5 + bu[static_cast<std::size_t>(u)] +
                                bi[static_cast<std::size_t>(i)] + 3.0 * dot + 0.6 * normal(rng));
    us.push_back(u);
    is.push_back(i);
    rs.push_back(static_cast<float>(std::clamp(v, 1.0, 5.0)));
  }
  std::vector<std::size_t> order(rs.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::shuffle(order.begin(), order.end(), rng);
  const auto n = static_cast<std::int64_t>(rs.size()), n_train = n * 9 / 10;
  auto x = torch::empty({n, 2}, torch::kLong);
  auto y = torch::empty({n, 1});
  auto* xp = x.data_ptr<std::int64_t>();
  auto* yp = y.data_ptr<float>();
  for (std::int64_t k = 0; k < n; ++k) {
    const auto o = order[static_cast<std::size_t>(k)];
    xp[2 * k] = us[o];
    xp[2 * k + 1] = is[o];
    yp[k] = rs[o];
  }
  auto& e = r.explicit_feedback;
  e.x_train = x.slice(0, 0, n_train);
  e.y_train = y.slice(0, 0, n_train);
  e.x_val = x.slice(0, n_train, n);
  e.y_val = y.slice(0, n_train, n);
  e.classes = 0;
  e.side = 0;
  e.vocab = std::max(U, I);
  e.source = "synthetic MovieLens-100K-like ratings (943 users, 1682 items, " + std::to_string(n) +
             " ratings)";
  r.mean_rating = e.y_train.mean().item<double>();
  auto positive = [](const torch::Tensor& xs, const torch::Tensor& ys, torch::Tensor& xo,
                     torch::Tensor& yo) {
    const auto idx = (ys.squeeze(1) >= 4.0f).nonzero().squeeze(1);
    xo = xs.index_select(0, idx);
    yo = torch::ones({idx.size(0), 1});
  };
  auto& im = r.implicit_feedback;
  positive(e.x_train, e.y_train, im.x_train, im.y_train);
  positive(e.x_val, e.y_val, im.x_val, im.y_val);
  im.classes = 0;
  im.side = 0;
  im.vocab = e.vocab;
  im.source = e.source + ", ratings of 4-5 as implicit positives";
  r.positives.resize(static_cast<std::size_t>(U));
  const auto* ip = im.x_train.contiguous().data_ptr<std::int64_t>();
  for (std::int64_t k = 0; k < im.x_train.size(0); ++k)
    r.positives[static_cast<std::size_t>(ip[2 * k])].insert(ip[2 * k + 1]);
  return r;
}

/// BPR's batches (Rendle et al. 2009): the training positives (user, item) in shuffled epochs,
/// each with one negative item drawn uniformly from the items the user has no training positive
/// for; [b, 3] int64 (user, positive, negative), targets unused (zeros [b, 1]).
struct bpr_sampler {
  const ratings* r;
  torch::Generator gen;
  std::mt19937_64 rng;
  torch::Tensor order;
  std::int64_t next = 0;
  bpr_sampler(const ratings& data, std::uint64_t seed)
      : r(&data), gen(at::detail::createCPUGenerator(seed)), rng(seed) {}
  torch::Tensor with_negatives(const torch::Tensor& pairs, std::mt19937_64& g) const {
    const auto b = pairs.size(0);
    auto out = torch::empty({b, 3}, torch::kLong);
    const auto c = pairs.contiguous();
    const auto* pp = c.data_ptr<std::int64_t>();
    auto* op = out.data_ptr<std::int64_t>();
    std::uniform_int_distribution<std::int64_t> item(0, r->items - 1);
    for (std::int64_t k = 0; k < b; ++k) {
      const auto u = pp[2 * k];
      std::int64_t j = item(g);
      while (r->positives[static_cast<std::size_t>(u)].contains(j))
        j = item(g);
      op[3 * k] = u;
      op[3 * k + 1] = pp[2 * k + 1];
      op[3 * k + 2] = j;
    }
    return out;
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    const auto& x = r->implicit_feedback.x_train;
    const auto n = x.size(0);
    b = std::min(b, n);
    if (!order.defined() || next + b > n) {
      order = torch::randperm(n, gen, torch::kLong);
      next = 0;
    }
    const auto idx = order.slice(0, next, next + b);
    next += b;
    return {with_negatives(x.index_select(0, idx), rng), torch::zeros({b, 1})};
  }
};

/// A recommender's scores. Embedding tables `user_embedding` [users, d] and `item_embedding`
/// [items, d], initialized N(0, 0.01) (small, so that their norms grow as they learn: Spotlight's
/// and most matrix-factorization code's choice), item biases `item_bias` (0 at the start) and, for
/// explicit ratings, user biases `user_bias` and a global bias `global_bias` started at the
/// training ratings' mean (Koren et al. 2009's biased MF). `two_tower`: each side's embedding e
/// then a residual MLP tower, e + Linear(ReLU(Linear(e))) through `hidden` (`user_tower`,
/// `item_tower`), its last Linear zero-initialized so that the tower starts as the identity and
/// the model as biased MF; the score is the towers' dot product plus the biases (a two-tower
/// model as YouTube's, Covington et al. 2016, here on ids only; residual because plain towers d
/// -> hidden -> d, fed embeddings of 0.01, left the factors unlearned, the validation MSE at the
/// biases' 0.95-0.97 while the training loss fell; zero-initialized because with LibTorch's
/// default initialization RMSprop at 1.6e-2 took the first losses to 370; --curves runs). Input [b,
/// 2] (user, item): [b, 1] predicted ratings; [b, 3] (user, positive, negative): [b, 2] scores.
/// `last_l2` keeps the batch's mean squared norm of the embedding rows and biases it read, the L2
/// term the loss adds (the regularization of Koren et al. and of BPR-Opt, on the rows a batch
/// touches).
struct recommender_net : net {
  recommender_net(std::int64_t users, std::int64_t items, std::int64_t d, bool two_tower,
                  std::int64_t hidden, bool explicit_ratings, double mean_rating)
      : two_tower_(two_tower), explicit_(explicit_ratings) {
    using namespace torch::nn;
    user_embedding = register_module("user_embedding", Embedding(users, d));
    item_embedding = register_module("item_embedding", Embedding(items, d));
    item_bias = register_module("item_bias", Embedding(items, 1));
    {
      torch::NoGradGuard no_grad;
      user_embedding->weight.normal_(0.0, 0.01);
      item_embedding->weight.normal_(0.0, 0.01);
      item_bias->weight.zero_();
    }
    if (explicit_) {
      user_bias = register_module("user_bias", Embedding(users, 1));
      {
        torch::NoGradGuard no_grad;
        user_bias->weight.zero_();
      }
      global_bias = register_parameter("global_bias", torch::full({1}, mean_rating));
    }
    if (two_tower_) {
      user_tower = register_module(
          "user_tower", Sequential(Linear(d, hidden), Functional(torch::relu), Linear(hidden, d)));
      item_tower = register_module(
          "item_tower", Sequential(Linear(d, hidden), Functional(torch::relu), Linear(hidden, d)));
      // The residual branches start at zero (their last Linear zero-initialized): each tower
      // starts as the identity, the model as biased MF.
      torch::NoGradGuard no_grad;
      for (auto* tower : {&user_tower, &item_tower}) {
        auto last = (*tower)[2]->as<torch::nn::LinearImpl>();
        last->weight.zero_();
        last->bias.zero_();
      }
      overflow_sites = {{"user_tower", "user_tower.out"}, {"item_tower", "item_tower.out"}};
    } else {
      overflow_sites = {{"user_embedding", "user_embedding.out"},
                        {"item_embedding", "item_embedding.out"}};
    }
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    // The items of a BPR triple (positive, then negative) are looked up together, one call of
    // each embedding per batch, as a user batches them.
    const auto b = x.size(0);
    const auto u = x.select(1, 0);
    const auto i = x.size(1) == 2 ? x.select(1, 1) : torch::cat({x.select(1, 1), x.select(1, 2)});
    auto pu = t.act("user_embedding.out", user_embedding(u));  // [b, d]
    auto qi = t.act("item_embedding.out", item_embedding(i));  // [b or 2b, d]
    last_l2 =
        pu.pow(2).sum(1).mean() + qi.pow(2).sum(1).mean() * static_cast<double>(qi.size(0) / b);
    if (two_tower_) {
      pu = t.act("user_tower.out", pu + user_tower->forward(pu));
      qi = t.act("item_tower.out", qi + item_tower->forward(qi));
    }
    const auto bi = item_bias(i).squeeze(1);
    last_l2 = last_l2 + bi.pow(2).mean() * static_cast<double>(qi.size(0) / b);
    const auto scores = (pu.repeat({qi.size(0) / b, 1}) * qi).sum(1) + bi;  // [b or 2b]
    if (x.size(1) == 3) return torch::stack({scores.slice(0, 0, b), scores.slice(0, b, 2 * b)}, 1);
    const auto bu = user_bias(u).squeeze(1);
    last_l2 = last_l2 + bu.pow(2).mean();
    return (scores + bu + global_bias).unsqueeze(1);
  }
  bool two_tower_, explicit_;
  torch::nn::Embedding user_embedding{nullptr}, item_embedding{nullptr}, user_bias{nullptr},
      item_bias{nullptr};
  torch::nn::Sequential user_tower{nullptr}, item_tower{nullptr};
  torch::Tensor global_bias, last_l2;
};

/// BPR's loss of scores [b, 2] (positive, negative): -mean log sigmoid(s_pos - s_neg); ln 2
/// where every score is equal (an untrained model's: the embeddings start near 0).
inline torch::Tensor bpr_loss(const torch::Tensor& scores) {
  return -torch::nn::functional::logsigmoid(scores.select(1, 0) - scores.select(1, 1)).mean();
}

// ---------------------------------------------------------------------------------------------
// graph: a GCN on a stochastic block model

/// A seeded stochastic block model with bag-of-words node features, for node classification as
/// the Planetoid splits of Cora and Citeseer are (Yang et al. 2016, Kipf & Welling 2017): `n`
/// nodes in `c` classes of equal size (labels in a shuffled order), each pair of nodes joined
/// with probability `avg_in` / (n / c) within a class and `avg_out` / (n - n / c) across (an
/// expected degree of avg_in + avg_out, a share avg_in / (avg_in + avg_out) of a node's edges
/// within its class); each node 5 to 20 words of a vocabulary of `f`, each word with probability
/// 0.25 from its class's topic (f / c words of its own) and otherwise uniform over the
/// vocabulary; binary features, each row divided by its sum (Kipf's preprocessing). Training:
/// 20 nodes per class; validation: 500 other nodes. The adjacency normalized with self loops:
/// `symmetric` D^-1/2 (A + I) D^-1/2 (Kipf's), else D^-1 (A + I) (the mean of the neighbours),
/// a sparse [n, n] COO matrix.
struct sbm_graph {
  torch::Tensor features, labels, adjacency, train_nodes,
      val_nodes;  // [n, f] float, [n] int64, sparse [n, n], [k] int64
  std::int64_t classes = 0, edges = 0;
  std::string source;
};

inline sbm_graph stochastic_block_model(std::int64_t n, std::int64_t c, std::int64_t f,
                                        double avg_in, double avg_out, bool symmetric,
                                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  sbm_graph g;
  g.classes = c;
  std::vector<std::int64_t> label(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    label[static_cast<std::size_t>(i)] = i % c;
  std::shuffle(label.begin(), label.end(), rng);
  const double block = static_cast<double>(n / c);
  const double p_in = avg_in / block, p_out = avg_out / (static_cast<double>(n) - block);
  std::vector<std::int64_t> src, dst;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j)
      if (u(rng) < (label[static_cast<std::size_t>(i)] == label[static_cast<std::size_t>(j)]
                        ? p_in
                        : p_out)) {
        src.push_back(i);
        dst.push_back(j);
      }
  g.edges = static_cast<std::int64_t>(src.size());
  std::vector<double> degree(static_cast<std::size_t>(n), 1.0);  // the self loop
  for (std::size_t e = 0; e < src.size(); ++e) {
    degree[static_cast<std::size_t>(src[e])] += 1.0;
    degree[static_cast<std::size_t>(dst[e])] += 1.0;
  }
  std::vector<std::int64_t> rows, cols;
  std::vector<float> values;
  auto add = [&](std::int64_t i, std::int64_t j) {
    rows.push_back(i);
    cols.push_back(j);
    const double di = degree[static_cast<std::size_t>(i)], dj = degree[static_cast<std::size_t>(j)];
    values.push_back(static_cast<float>(symmetric ? 1.0 / std::sqrt(di * dj) : 1.0 / di));
  };
  for (std::int64_t i = 0; i < n; ++i)
    add(i, i);
  for (std::size_t e = 0; e < src.size(); ++e) {
    add(src[e], dst[e]);
    add(dst[e], src[e]);
  }
  const auto nnz = static_cast<std::int64_t>(values.size());
  auto index = torch::stack({torch::tensor(rows, torch::kLong), torch::tensor(cols, torch::kLong)});
  g.adjacency = torch::sparse_coo_tensor(
                    index, torch::from_blob(values.data(), {nnz}, torch::kFloat).clone(), {n, n})
                    .coalesce();
  // Features: a bag of words per node.
  g.features = torch::zeros({n, f});
  auto* fp = g.features.data_ptr<float>();
  const std::int64_t topic = f / c;
  std::uniform_int_distribution<std::int64_t> length(5, 20), any_word(0, f - 1),
      topic_word(0, topic - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto words = length(rng);
    for (std::int64_t w = 0; w < words; ++w) {
      const auto word = u(rng) < 0.25 ? label[static_cast<std::size_t>(i)] * topic + topic_word(rng)
                                      : any_word(rng);
      fp[i * f + word] = 1.0f;
    }
  }
  g.features = g.features / g.features.sum(1, true).clamp_min(1.0);
  g.labels = torch::tensor(label, torch::kLong);
  // The split: the first 20 nodes of each class in a shuffled order, then 500 others.
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    perm[static_cast<std::size_t>(i)] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int64_t> taken(static_cast<std::size_t>(c), 0), train, val;
  for (const auto i : perm) {
    auto& k = taken[static_cast<std::size_t>(label[static_cast<std::size_t>(i)])];
    if (k < 20) {
      ++k;
      train.push_back(i);
    } else if (static_cast<std::int64_t>(val.size()) < 500) {
      val.push_back(i);
    }
  }
  g.train_nodes = torch::tensor(train, torch::kLong);
  g.val_nodes = torch::tensor(val, torch::kLong);
  g.source = "stochastic block model: " + std::to_string(n) + " nodes, " + std::to_string(c) +
             " classes, " + std::to_string(g.edges) + " edges, " + std::to_string(f) +
             " bag-of-words features";
  return g;
}

/// A two-layer GCN (Kipf & Welling 2017): logits = A dropout(relu(A dropout(X) W1 + b1)) W2 + b2,
/// A the normalized adjacency (sparse), dropout `p` on the input's non-zero entries and on the
/// hidden layer (masks from the run's own generator; none in evaluation mode), Glorot-uniform
/// weights and zero biases as Kipf's. Returns every node's logits [n, classes]; the loss reads the
/// training nodes'.
struct gcn_net : net {
  gcn_net(torch::Tensor adjacency, std::int64_t in, std::int64_t hidden, std::int64_t classes,
          double dropout, std::uint64_t seed)
      : adj(std::move(adjacency)), p_(dropout), gen_(at::detail::createCPUGenerator(seed)) {
    using namespace torch::nn;
    gc1 = register_module("gc1", Linear(in, hidden));
    gc2 = register_module("gc2", Linear(hidden, classes));
    torch::NoGradGuard no_grad;
    for (auto* l : {&gc1, &gc2}) {
      torch::nn::init::xavier_uniform_((*l)->weight);
      (*l)->bias.zero_();
    }
    overflow_sites = {{"gc1", "gc1.relu"}};
  }
  torch::Tensor drop(const torch::Tensor& x) {
    if (!is_training() || p_ <= 0.0) return x;
    return x * torch::empty_like(x).bernoulli_(1.0 - p_, gen_) / (1.0 - p_);
  }
  /// Dropout of the features' non-zero entries only, as Kipf's sparse_dropout does (the same
  /// distribution as dense dropout, whose zeros stay zero; drawing a mask for each of the n x f
  /// entries took 75% of a step).
  torch::Tensor drop_features(const torch::Tensor& x) {
    if (!is_training() || p_ <= 0.0) return x;
    const auto nz = x.nonzero();  // [nnz, 2]
    const auto rows = nz.select(1, 0), cols = nz.select(1, 1);
    const auto keep =
        torch::empty({nz.size(0)}, x.options()).bernoulli_(1.0 - p_, gen_) / (1.0 - p_);
    return torch::zeros_like(x).index_put({rows, cols}, x.index({rows, cols}) * keep);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    auto h =
        torch::mm(adj, torch::nn::functional::linear(drop_features(x), gc1->weight)) + gc1->bias;
    h = t.act("gc1.relu", torch::relu(h));
    return torch::mm(adj, torch::nn::functional::linear(drop(h), gc2->weight)) + gc2->bias;
  }
  torch::Tensor adj;
  double p_;
  at::Generator gen_;
  torch::nn::Linear gc1{nullptr}, gc2{nullptr};
};

}  // namespace zoo
