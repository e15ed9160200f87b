// SPDX-License-Identifier: Apache-2.0
/// The zoo's monitor wiring, written once for every family the way the README wires a
/// LibTorch loop: per named parameter its gradient, value and update; the cosine between
/// consecutive steps' gradients; the input batch (the method's first check: normalized?);
/// the activations the
/// forward pass tapped, in forward order, and the loss input as "logits"; attention entropies;
/// router loads.
#pragma once

#include <mldiag/adapters/torch.hpp>
#include <mldiag/monitor.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace zoo {

/// What a forward pass hands to the monitor. Tensors are detached references: the monitor
/// reads them after the step.
struct taps {
  std::vector<std::pair<std::string, torch::Tensor>> activations;  ///< forward order
  std::vector<std::pair<std::string, torch::Tensor>> attention;    ///< [B, H, T, T] masked logits
  std::vector<std::pair<std::string, torch::Tensor>> routers;      ///< [E] tokens per expert, double
  torch::Tensor aux;             ///< an auxiliary loss the model adds (MoE load balancing)
  torch::Tensor kl;              ///< a VAE's KL(q(z|x) || N(0, I)), summed over the batch
  torch::Tensor input;           ///< the batch the model reads (not token ids), as role::input
  std::string overflow_at;       ///< the forward_inf fault: this activation overflows to Inf

  /// Records activation `name` and returns it (with the forward_inf fault applied there).
  torch::Tensor act(const std::string& name, torch::Tensor t) {
    // x 1e38 then x 10: every element above ~0.03 in magnitude becomes +-Inf in float32.
    if (name == overflow_at) t = t.mul(1e38).mul(10.0);
    activations.emplace_back(name, t.detach());
    return t;
  }
  void clear() {
    activations.clear();
    attention.clear();
    routers.clear();
    aux = torch::Tensor();
    kl = torch::Tensor();
    input = torch::Tensor();
  }
};

/// A parameter's value before the optimizer step, to observe the update (new minus old);
/// a copy of every parameter, fine for the zoo's small models.
struct previous_values {
  std::vector<torch::Tensor> old;  ///< the parameters' values at the last step (update_stats keeps them)
  mldiag::gradient_persistence persist;  ///< consecutive gradients' cosine (gradients never zeroed)
  explicit previous_values(torch::nn::Module& m) {
    for (const auto& p : m.named_parameters()) old.push_back(p.value().detach().clone());
  }
};

/// How the zoo reads attention rows (`--entropy-stride`, `--entropy-gap`), set once before
/// the runs start.
struct entropy_options {
  std::uint32_t row_stride = mldiag::monitor_config{}.entropy.row_stride;  ///< the monitor's default
  bool gap = false;  ///< also measure what sampling every `row_stride`-th row changes
};
inline entropy_options entropy_flags;

/// `--evidence DIR`: each run writes its evidence log and findings there (eval/common/evidence_log.hpp).
inline std::string evidence_dir;

/// Whether the run on this thread plants a fault (set by `run_one`), for `entropy_gap`.
inline thread_local bool run_is_faulted = false;

/// What `--entropy-gap` measured over every run: per attention tensor and step, the mean
/// normalized row entropy of every row against that of the rows the monitor's sampling reads
/// (`entropy_flags.row_stride`) at each offset the rotation visits
/// (the worst offset counts). Tensors whose rows all lack an entropy (NaN logits) are left out.
struct entropy_gap {
  struct part {
    std::uint64_t tensor_steps = 0;
    double largest = 0.0;             ///< largest |sampled - every row|
    double full_at_largest = 0.0;     ///< every row's mean there
    std::uint64_t low = 0;            ///< tensor-steps with every row's mean below 0.3
    double largest_low = 0.0;         ///< the largest difference among those
    std::uint64_t disagreements = 0;  ///< an offset on the other side of attention_collapse's 0.1
    double lowest = 1.0;              ///< lowest mean of every row seen
  };
  std::mutex m;
  part healthy, faulted;

  void add(const torch::Tensor& scores) {
    const std::int64_t len = scores.size(-1);
    const auto all = mldiag::entropy_from_logits(scores);
    if (all.rows == 0) return;
    const double full = all.normalized_mean();
    const mldiag::entropy_sampling sampling{.row_stride = entropy_flags.row_stride};
    double worst = 0.0;
    bool disagree = false;
    for (std::int64_t step = 0; step < static_cast<std::int64_t>(sampling.row_stride); ++step) {
      const auto e = mldiag::entropy_from_logits(scores, len, sampling, step);
      if (e.rows == 0) continue;
      worst = std::max(worst, std::abs(e.normalized_mean() - full));
      disagree = disagree || ((e.normalized_mean() < 0.1) != (full < 0.1));
    }
    const std::lock_guard<std::mutex> lock(m);
    part& p = run_is_faulted ? faulted : healthy;
    ++p.tensor_steps;
    if (worst > p.largest) {
      p.largest = worst;
      p.full_at_largest = full;
    }
    if (full < 0.3) {
      ++p.low;
      p.largest_low = std::max(p.largest_low, worst);
    }
    p.disagreements += disagree ? 1 : 0;
    p.lowest = std::min(p.lowest, full);
  }
};
inline entropy_gap entropy_gaps;

/// The one wiring every family uses, called after the optimizer step and before end_step().
/// `output` is the loss input: "logits" for a classifier or a language model (what the README
/// names it), "output" for a regression or reconstruction.
inline void observe_module(mldiag::monitor& mon, torch::nn::Module& m, previous_values& prev, const taps& t,
                           const torch::Tensor& output, bool logits = true) {
  torch::NoGradGuard no_grad;
  const auto named = m.named_parameters();
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& key = named[i].key();
    const auto& p = named[i].value();
    if (p.grad().defined()) mon.observe(mldiag::role::gradient, key, mldiag::compute_stats(p.grad()));
    const auto s = mldiag::parameter_and_update_stats(prev.old[i], p.detach());  // one pass over p
    mon.observe(mldiag::role::parameter, key, s.parameter);
    mon.observe(mldiag::role::update, key, s.update);
  }
  if (const auto c = mldiag::gradient_cosines_of(prev.persist, named)) mon.observe(*c);
  if (t.input.defined()) mon.observe(mldiag::role::input, "x", mldiag::compute_stats(t.input));
  for (const auto& [name, a] : t.activations) mon.observe(mldiag::role::activation, name, mldiag::compute_stats(a));
  mon.observe(mldiag::role::activation, logits ? "logits" : "output", mldiag::compute_stats(output.detach()));
  for (const auto& [name, scores] : t.attention) {
    mon.observe_logits(name, scores, scores.size(-1));  // the rows monitor_config::entropy samples
    if (entropy_flags.gap) entropy_gaps.add(scores);
  }
  for (const auto& [name, load] : t.routers) {
    const auto c = load.to(torch::kDouble).contiguous();
    mon.observe(mldiag::router_load{name, std::span<const double>(c.data_ptr<double>(), static_cast<std::size_t>(c.numel()))});
  }
}

/// The global L2 norm of the gradients, as frameworks log it (before any clipping).
inline double grad_norm(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double sq = 0.0;
  for (const auto& p : m.parameters())
    if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

}  // namespace zoo
