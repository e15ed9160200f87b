// SPDX-License-Identifier: Apache-2.0
/// LibTorch adapter: torch::Tensor as evidence — statistics, module parameters and gradients
/// in layer order, activations, attention entropy, router load. Target: mldiag::torch.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/evidence/persistence.hpp"
#include "mldiag/evidence/observer.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/update.hpp"

#include <torch/torch.h>

#include <concepts>  // std::derived_from
#include <memory>    // std::shared_ptr

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

inline dtype torch_dtype(const at::Tensor& t, std::string_view name) {
  switch (t.scalar_type()) {
    case at::kDouble: return dtype::f64;
    case at::kFloat: return dtype::f32;
    case at::kHalf: return dtype::f16;
    case at::kBFloat16: return dtype::bf16;
    default: break;
  }
  fail("torch adapter", name,
       std::string("dtype ") + c10::toString(t.scalar_type()) +
           " is not a floating-point type mldiag reads (f64, f32, f16, bf16); convert it first");
}

}  // namespace detail

/// A type-erased reference to a torch::Tensor's memory: dtype dispatched once here, strides
/// (in elements) kept, so a transposed or sliced tensor is read in place. CUDA tensors carry
/// their device (for mldiag::cuda::stats_plan); the host entry points refuse them.
[[nodiscard]] inline tensor_ref as_tensor_ref(std::string_view name, const at::Tensor& t) {
  const dtype type = detail::torch_dtype(t, name);
  const mldiag::device where =
      t.is_cuda() ? mldiag::device::cuda(static_cast<int>(t.get_device())) : mldiag::device::host();
  if (t.is_contiguous()) return tensor_ref(name, t.data_ptr(), t.numel(), type, where);
  std::vector<std::int64_t> extents(t.sizes().begin(), t.sizes().end());
  std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
  return tensor_ref(name, t.data_ptr(), type, extents, strides, -1, where);
}

}  // namespace mldiag

/// `torch::Tensor` is an mldiag tensor: `mon.observe(mldiag::role::gradient, name, p.grad())`
/// reads it in place (CPU tensors; a CUDA tensor gets an error naming the CUDA kernels).
template <>
struct mldiag::view_traits<at::Tensor> {
  static mldiag::tensor_ref view(const at::Tensor& t) { return mldiag::as_tensor_ref({}, t); }
};

namespace mldiag::inline MLDIAG_ABI {

/// Statistics of a CPU tensor (any of f64, f32, f16, bf16; contiguous or strided), in one
/// pass, without a copy.
[[nodiscard]] inline tensor_stats compute_stats(const at::Tensor& t) {
  return compute_stats(as_tensor_ref({}, t));
}

namespace detail {
inline void require_matching_previous(const at::Tensor& previous, const at::Tensor& current, const char* who) {
  if (previous.numel() != current.numel() || previous.scalar_type() != current.scalar_type()) {
    throw error(std::string(who) + ": the previous values (" + std::to_string(previous.numel()) + " of " +
                std::string(c10::toString(previous.scalar_type())) + ") do not match the parameter (" +
                std::to_string(current.numel()) + " of " + std::string(c10::toString(current.scalar_type())) +
                "); keep a copy made with p.detach().clone()");
  }
}

// The fused pass (stats/update.hpp) over two contiguous CPU tensors of one floating dtype:
// `fused(previous_span, current_span)`; nullopt for anything else (the caller subtracts).
template <class Fused>
auto with_fused_spans(at::Tensor& previous, const at::Tensor& current, Fused&& fused)
    -> std::optional<decltype(fused(std::span<float>{}, std::span<const float>{}))> {
  if (!(previous.is_cpu() && current.is_cpu() && previous.is_contiguous() && current.is_contiguous())) return std::nullopt;
  const auto n = static_cast<std::size_t>(current.numel());
  switch (current.scalar_type()) {
    case at::kFloat:
      return fused(std::span<float>(previous.data_ptr<float>(), n), std::span<const float>(current.data_ptr<float>(), n));
    case at::kDouble:
      return fused(std::span<double>(previous.data_ptr<double>(), n), std::span<const double>(current.data_ptr<double>(), n));
    case at::kBFloat16:  // c10::BFloat16 and mldiag::bfloat16 hold the same 16 bits
      return fused(std::span<bfloat16>(static_cast<bfloat16*>(previous.data_ptr()), n),
                   std::span<const bfloat16>(static_cast<const bfloat16*>(current.data_ptr()), n));
    case at::kHalf:
      return fused(std::span<half>(static_cast<half*>(previous.data_ptr()), n),
                   std::span<const half>(static_cast<const half*>(current.data_ptr()), n));
    default: return std::nullopt;
  }
}
}  // namespace detail

/// The statistics of `current - previous` (a parameter's update) and then `previous =
/// current`, fused: one pass over both CPU tensors where they are contiguous with the same
/// dtype (stats/update.hpp), a subtraction and a copy otherwise. `previous` is the caller's
/// kept copy (`p.detach().clone()` once). Throws `mldiag::error` when the sizes or dtypes differ.
///
/// **Example**: `mon.observe(mldiag::role::update, name, mldiag::update_stats(previous[i], p));`
[[nodiscard]] inline tensor_stats update_stats(at::Tensor& previous, const at::Tensor& current) {
  detail::require_matching_previous(previous, current, "update_stats");
  if (auto u = detail::with_fused_spans(previous, current, [](auto p, auto c) { return update_stats(p, c); })) return *u;
  const at::Tensor difference = current.detach() - previous;
  previous.copy_(current.detach());
  return compute_stats(difference);
}

/// `compute_stats(current)` and `update_stats(previous, current)` from one pass over the
/// parameter where both CPU tensors are contiguous with the same dtype (stats/update.hpp:
/// the parameter is read from memory once, not twice), then `previous = current`; the two
/// calls otherwise. Throws `mldiag::error` when the sizes or dtypes differ.
///
/// **Example**
/// ```cpp
/// const auto s = mldiag::parameter_and_update_stats(previous[i], p);
/// mon.observe(mldiag::role::parameter, name, s.parameter);
/// mon.observe(mldiag::role::update, name, s.update);
/// ```
[[nodiscard]] inline parameter_update_stats parameter_and_update_stats(at::Tensor& previous, const at::Tensor& current) {
  detail::require_matching_previous(previous, current, "parameter_and_update_stats");
  if (auto s = detail::with_fused_spans(previous, current, [](auto p, auto c) { return parameter_and_update_stats(p, c); })) {
    return *s;
  }
  parameter_update_stats out;
  out.parameter = compute_stats(current);
  out.update = update_stats(previous, current);
  return out;
}

/// Row entropy over the last dimension of logits (attention scores, router logits).
[[nodiscard]] inline entropy_stats entropy_from_logits(const at::Tensor& logits) {
  return entropy_from_logits(as_tensor_ref({}, logits), logits.dim() == 0 ? 1 : logits.size(-1));
}
/// Row entropy over the last dimension of probabilities (attention probabilities).
[[nodiscard]] inline entropy_stats entropy_from_probs(const at::Tensor& probs) {
  return entropy_from_probs(as_tensor_ref({}, probs), probs.dim() == 0 ? 1 : probs.size(-1));
}

/// Observes every parameter of `module` (named_parameters order: registration order, which is
/// layer order for sequential models), and, with `gradients`, each one's .grad() where it has
/// one, under the same names. `module_observer` adds updates and gradient cosines.
template <observer O>
void observe_module(O& to, const torch::nn::Module& module, bool gradients = true) {
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    to.observe(role::parameter, item.key(), compute_stats(p.detach()));
    if (gradients && p.grad().defined()) to.observe(role::gradient, item.key(), compute_stats(p.grad()));
  }
}

/// Adds every defined .grad() of `module` to `persist` (evidence/persistence.hpp) and ends its
/// step: the cosines between this step's gradients and the previous step's and between their
/// increments, or absent (first step, no gradients, a non-finite one). Each gradient is sampled on
/// gradient_persistence::stride_for (at most its `max_per_tensor` elements); CUDA gradients
/// are sampled on the device and copied to the host in one transfer, which waits for the
/// stream (once per step).
///
/// **Example**
/// ```cpp
/// mldiag::gradient_persistence persist;  // one per model, outside the loop
/// if (auto c = mldiag::gradient_cosines_of(persist, model)) mon.observe(*c);
/// ```
namespace detail {
// A contiguous CPU gradient of a floating dtype, added to `persist` from its memory (no
// framework call); false for anything else.
inline bool add_gradient_in_place(gradient_persistence& persist, std::string_view name, const at::Tensor& g) {
  if (!g.is_cpu() || !g.is_contiguous()) return false;
  const auto n = static_cast<std::size_t>(g.numel());
  switch (g.scalar_type()) {
    case at::kFloat: persist.add(name, std::span<const float>(g.data_ptr<float>(), n)); return true;
    case at::kDouble: persist.add(name, std::span<const double>(g.data_ptr<double>(), n)); return true;
    case at::kBFloat16:
      persist.add(name, std::span<const bfloat16>(static_cast<const bfloat16*>(g.data_ptr()), n));
      return true;
    case at::kHalf: persist.add(name, std::span<const half>(static_cast<const half*>(g.data_ptr()), n)); return true;
    default: return false;
  }
}
}  // namespace detail

/// The same over parameters already listed (`module.named_parameters()`, which builds its list
/// anew on every call: 15-20 µs a step on small LibTorch models), for a caller that has the list.
[[nodiscard]] inline std::optional<gradient_cosines> gradient_cosines_of(
    gradient_persistence& persist, const torch::OrderedDict<std::string, at::Tensor>& named_parameters) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> names;
  std::vector<std::int64_t> numel, stride;
  std::vector<at::Tensor> samples;
  for (const auto& item : named_parameters) {
    const at::Tensor& g = item.value().grad();
    if (!g.defined() || g.numel() == 0) continue;
    // Contiguous CPU gradients are read where they are: the framework's slice, conversion to
    // double and concatenation cost 10x the sketch itself (1.0-1.4 ms a step on the example
    // transformer's 80 gradients, issue 18). The same values in the same order.
    if (detail::add_gradient_in_place(persist, item.key(), g)) continue;
    const auto n = static_cast<std::size_t>(g.numel());
    const auto st = static_cast<std::int64_t>(persist.stride_for(n));
    samples.push_back(g.detach().reshape({-1}).slice(0, 0, g.numel(), st).to(at::kDouble));
    names.push_back(item.key());
    numel.push_back(g.numel());
    stride.push_back(st);
  }
  if (!samples.empty()) {
    const at::Tensor host = at::cat(samples).to(at::kCPU).contiguous();
    const double* v = host.data_ptr<double>();
    std::size_t at = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto len = static_cast<std::size_t>(samples[i].numel());
      persist.add_sampled(names[i], std::span<const double>(v + at, len), static_cast<std::size_t>(stride[i]),
                          static_cast<std::size_t>(numel[i]));
      at += len;
    }
  }
  return persist.finish_step();
}

[[nodiscard]] inline std::optional<gradient_cosines> gradient_cosines_of(gradient_persistence& persist,
                                                                         const torch::nn::Module& module) {
  return gradient_cosines_of(persist, module.named_parameters(/*recurse=*/true));
}

/// Activations without forward hooks (LibTorch's C++ modules have none): the model holds a
/// tap and passes values through it in `forward`; the tap keeps their statistics (computed in
/// place, no copy) until `observe` hands them to the monitor. Only forward passes under grad
/// mode are recorded (training, not `torch::NoGradGuard` evaluation), and every `every`-th
/// call of `observe` (1 = each step) — a forward pass is one more read of each activation.
///
/// **Example**
/// ```cpp
/// struct net : torch::nn::Module {
///   mldiag::activation_tap tap;
///   torch::Tensor forward(torch::Tensor x) {
///     x = tap("conv1.relu", torch::relu(conv1->forward(x)));
///     return fc->forward(x.flatten(1));
///   }
/// };
/// // in the loop, with the step open:
/// model->tap.observe(mon);
/// ```
class activation_tap {
 public:
  explicit activation_tap(std::size_t every = 1) : every_(every == 0 ? 1 : every) {}

  /// Records `x`'s statistics under `name` (a training forward pass only) and returns `x`
  /// (a handle, as torch's functions return one: `auto y = tap(...)` never dangles).
  at::Tensor operator()(std::string_view name, const at::Tensor& x) {
    if (!enabled_ || !at::GradMode::is_enabled()) return x;
    const tensor_stats s = compute_stats(x.detach());
    for (std::size_t i = 0; i < used_; ++i)
      if (kept_[i].first == name) {
        kept_[i].second.merge(s);  // the same tap twice in one pass (a shared block): one tensor
        return x;
      }
    // Slots are reused step to step (a name's string keeps its capacity): no allocation once
    // every tap has been seen.
    if (used_ == kept_.size()) kept_.emplace_back();
    kept_[used_].first.assign(name);
    kept_[used_++].second = s;
    return x;
  }

  /// Hands the kept statistics to `mon` as role::activation and clears them.
  template <observer O>
  void observe(O& mon) {
    for (std::size_t i = 0; i < used_; ++i) mon.observe(role::activation, kept_[i].first, kept_[i].second);
    used_ = 0;
    enabled_ = ++calls_ % every_ == 0;
  }

 private:
  std::vector<std::pair<std::string, tensor_stats>> kept_;
  std::size_t used_ = 0, every_, calls_ = 0;
  bool enabled_ = true;
};

/// What `module_observer` observes.
struct module_observer_options {
  bool parameters = true;  ///< role::parameter, every step
  bool gradients = true;   ///< role::gradient, where a parameter has a .grad()
  /// role::update (this call's parameters minus the previous call's): what the update-ratio
  /// detector reads. Costs one copy of the parameters (the previous values), allocated on the
  /// first call; each update is read by update_stats in one pass.
  bool updates = true;
  /// The cosines between consecutive steps' gradients (gradient_cosines_of): the evidence for
  /// gradients never zeroed. Costs at most `gradient_persistence::max_per_tensor` doubles
  /// (4,096 by default) per parameter, twice.
  bool gradient_cosines = true;
};

/// One call a step for a module: its parameters, gradients, updates and gradient cosines (and
/// the activations of its `activation_tap`, when given one), handed to an `observer` (the monitor).
/// Call it after `optimizer.step()` and before `zero_grad()`: the gradients are this step's,
/// the parameters the updated ones, the update what this step's optimizer did. Names are
/// `named_parameters()`'s (layer order for sequential models). CPU modules; for a CUDA module
/// observe the kernels' statistics (docs/cuda.md).
///
/// **Example**
/// ```cpp
/// mldiag::module_observer watch(model);    // once, after building the model (a module,
///                                          // a module holder or a shared_ptr to a module)
/// for (...) {
///   loss.backward(); opt.step();
///   mon.observe(mldiag::scalar::loss, loss.item<double>());
///   watch.observe(mon);                    // parameters, gradients, updates, cosines
///   mon.end_step();
///   opt.zero_grad();
/// }
/// ```
class module_observer {
 public:
  explicit module_observer(const torch::nn::Module& module, module_observer_options o = {})
      : module_(&module), options_(o) {}
  /// The same, and the activations of the module's tap handed over in the same call.
  module_observer(const torch::nn::Module& module, activation_tap& tap, module_observer_options o = {})
      : module_(&module), tap_(&tap), options_(o) {}
  /// The same for a module holder (`torch::nn::Sequential`, `torch::nn::Linear`, a
  /// `TORCH_MODULE(Net)`) or a `std::shared_ptr` to a module, so that `watch(model)` reads the
  /// same whichever way the program holds its model. The module must outlive the observer.
  template <class M>
  explicit module_observer(const torch::nn::ModuleHolder<M>& module, module_observer_options o = {})
      : module_observer(*module, o) {}
  template <class M>
  module_observer(const torch::nn::ModuleHolder<M>& module, activation_tap& tap, module_observer_options o = {})
      : module_observer(*module, tap, o) {}
  template <class M>
    requires std::derived_from<M, torch::nn::Module>
  explicit module_observer(const std::shared_ptr<M>& module, module_observer_options o = {})
      : module_observer(*module, o) {}

  template <observer O>
  void observe(O& mon) {
    torch::NoGradGuard no_grad;
    const auto named = module_->named_parameters(/*recurse=*/true);
    if (options_.updates && previous_.size() != named.size()) {
      previous_.clear();
      for (const auto& item : named) previous_.push_back(item.value().detach().clone());
      first_ = true;
    }
    for (std::size_t i = 0; i < named.size(); ++i) {
      const std::string& key = named[i].key();
      const at::Tensor p = named[i].value().detach();
      if (options_.gradients && named[i].value().grad().defined()) mon.observe(role::gradient, key, named[i].value().grad());
      if (options_.parameters && options_.updates) {
        // One pass for the parameter and its update (issue 18): the parameter is read once.
        const parameter_update_stats s = parameter_and_update_stats(previous_[i], p);
        mon.observe(role::parameter, key, s.parameter);
        if (!first_) mon.observe(role::update, key, s.update);
      } else if (options_.parameters) {
        mon.observe(role::parameter, key, p);
      } else if (options_.updates) {
        const tensor_stats u = update_stats(previous_[i], p);
        if (!first_) mon.observe(role::update, key, u);
      }
    }
    first_ = false;
    if (tap_ != nullptr) tap_->observe(mon);
    if (options_.gradient_cosines)
      if (auto c = gradient_cosines_of(persist_, named)) mon.observe(*c);
  }

 private:
  const torch::nn::Module* module_;
  activation_tap* tap_ = nullptr;
  module_observer_options options_;
  std::vector<at::Tensor> previous_;
  gradient_persistence persist_;
  bool first_ = true;
};

/// Observes an activation tensor from forward code (detached; no copy).
template <observer O>
void observe_activation(O& to, std::string_view name, const at::Tensor& activation) {
  to.observe(role::activation, name, compute_stats(activation.detach()));
}

/// Observes the row entropy of attention logits ([..., keys]; -inf entries are masked), every
/// row (the monitor's `observe_logits` samples rows).
template <observer O>
void observe_attention_logits(O& to, std::string_view name, const at::Tensor& logits) {
  to.observe(row_entropy{name, entropy_from_logits(logits.detach())});
}

/// Observes the row entropy of attention probabilities ([..., keys]).
template <observer O>
void observe_attention_probs(O& to, std::string_view name, const at::Tensor& probs) {
  to.observe(row_entropy{name, entropy_from_probs(probs.detach())});
}

/// Observes a mixture-of-experts router: the expert load from the assignments (integer expert
/// indices, any shape: top-k allowed) and the entropy of the router's logits
/// ([tokens, experts]) under "<name>.logits".
template <observer O>
void observe_router(O& to, std::string_view name, const at::Tensor& router_logits, const at::Tensor& expert_assignments) {
  const std::int64_t experts = router_logits.size(-1);
  const at::Tensor choice = expert_assignments.detach().reshape({-1}).to(at::kLong).cpu().contiguous();
  to.observe(router_assignments{name, std::span<const std::int64_t>(choice.data_ptr<std::int64_t>(), static_cast<std::size_t>(choice.numel())),
                                static_cast<std::size_t>(experts)});
  to.observe(row_entropy{std::string(name) + ".logits", entropy_from_logits(router_logits.detach())});
}

/// Observes the learning rate of every parameter group of `optimizer`, read from the optimizer
/// itself, under "<name>/<group index>": two optimizers in one loop, discriminative
/// fine-tuning rates. Read where the optimizer steps, a schedule the program computes (and
/// logs as `scalar::learning_rate`) but never writes into the optimizer cannot go unnoticed
/// (lr_sanity: "learning rate schedule not applied to the optimizer").
///
/// **Example**: `mldiag::observe_learning_rates(mon, discriminator_opt, "discriminator");`
template <class O>
  requires observes<O, group_learning_rate>
void observe_learning_rates(O& to, const torch::optim::Optimizer& optimizer, std::string_view name) {
  const auto& groups = optimizer.param_groups();
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::string group = std::string(name) + "/" + std::to_string(i);
    // A group given without options of its own uses the optimizer's defaults.
    const double lr = groups[i].has_options() ? groups[i].options().get_lr() : optimizer.defaults().get_lr();
    to.observe(group_learning_rate{group, lr});
  }
}

}  // namespace mldiag
