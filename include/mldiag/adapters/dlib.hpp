// SPDX-License-Identifier: Apache-2.0
/// dlib adapter: a dlib::tensor is a tensor, and a dlib network's parameters and gradients are
/// observed layer by layer under stable names. Target: mldiag::dlib.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/concepts.hpp"
#include "mldiag/core/strided_view.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include <dlib/dnn.h>

#include <cctype>  // isalnum
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <sstream>  // a layer's type, read once from dlib's own printout
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// Any dlib tensor (`dlib::tensor`, `resizable_tensor`, `alias_tensor_instance`) is viewed in
/// place as [num_samples, k, nr, nc] row-major float, through `tensor::host()`.
///
/// Cost: on a CPU build of dlib (Debian's libdlib-dev), `host()` is the tensor's own memory:
/// no copy. On a CUDA build it is dlib's host mirror, which `host()` first brings up to date:
/// a blocking device-to-host copy of the whole tensor whenever the GPU wrote it since the
/// last read — every step, for parameters and gradients. (The const `host()` is used, so the
/// device copy stays current and nothing is copied back.) For a large network on the GPU,
/// read the `device()` pointers with the CUDA kernels (`kernels/mldiag/cuda/`) instead.
///
/// **Example**
/// ```cpp
/// dlib::resizable_tensor g(64, 16, 5, 5);
/// mon.observe(mldiag::role::gradient, "layer8.con", g);   // no copy on the CPU
/// ```
template <class T>
requires std::derived_from<T, dlib::tensor>
struct view_traits<T> {
  static strided_view<float> view(const dlib::tensor& t) {
    const std::int64_t n = t.num_samples(), k = t.k(), nr = t.nr(), nc = t.nc();
    // An empty tensor (a layer before its first forward pass) has no memory to point at.
    const float* data = t.size() == 0 ? nullptr : t.host();
    return strided_view<float>(data, {n, k, nr, nc}, {k * nr * nc, nr * nc, nc, 1},
                               static_cast<std::int64_t>(t.size()));
  }
};

/// A dlib layer's type as dlib prints it (`cout << net`): "fc", "con", "bn_con", "prelu",
/// the leading word of its `operator<<`.
template <class Details>
[[nodiscard]] std::string dlib_layer_type(const Details& details) {
  std::ostringstream out;
  out << details;
  const std::string text = out.str();
  std::size_t end = 0;
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_'))
    ++end;
  return end == 0 ? std::string("layer") : text.substr(0, end);
}

/// What `dlib_layers` hands tensors to: an observer (the monitor, the recorder: this header
/// makes `dlib::tensor` an mldiag tensor) or anything with the same `observe` call.
template <class S>
concept dlib_tensor_sink = requires(S& s, const dlib::tensor& t) { s.observe(role::gradient, std::string_view{}, t); };

/// A dlib network's parameters and their gradients, one call per step, under stable names:
/// "layer<i>.<type>" with dlib's own layer index (`dlib::layer<i>(net)`, the index
/// `cout << net` prints: 0 is the loss layer) and type ("layer1.fc", "layer4.con"). Each
/// computational layer with parameters gives one tensor (dlib keeps a layer's weights and
/// biases in one), observed as `role::parameter` and its gradient as `role::gradient`, in
/// forward order (input side first: the order mldiag localizes non-finite values in).
/// Layers without parameters (relu, max_pool) and layers not yet set up (before the first
/// forward pass) are skipped.
///
/// One `dlib_layers` per network (the names are made for the first one it sees). Call it
/// when dlib's trainer thread is idle: `dnn_trainer::get_net()` (or any of its
/// getters that wait, such as `get_average_loss()`) returns after the step has been applied,
/// and the gradients it leaves are that step's. Names are made on the first call (one
/// `std::string` per layer) and reused; a step allocates nothing here.
///
/// **Example**
/// ```cpp
/// mldiag::dlib_layers layers;
/// for (...) {
///   trainer.train_one_step(x, y);
///   mon.observe(mldiag::scalar::loss, trainer.get_average_loss());
///   layers.observe(mon, trainer.get_net(dlib::force_flush_to_disk::no));
///   mon.end_step();
/// }
/// ```
class dlib_layers {
 public:
  /// Observes every layer's parameters and gradients of `net` (see the class).
  template <dlib_tensor_sink Sink, class Net>
  void observe(Sink& sink, Net& net) {
    if (names_.size() != Net::num_layers) make_names(net);
    dlib::visit_layers_backwards(net, visitor<Sink>{sink, names_});
  }

  /// The name of each of dlib's layer indices; "" where a layer is not computational (the
  /// loss, the input, tags). Empty before the first `observe` or `make_names`.
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }

  /// Makes the names of `net`'s layers now (observe does it on its first call).
  template <class Net>
  void make_names(Net& net) {
    names_.assign(Net::num_layers, std::string());
    dlib::visit_layers(net, namer{names_});
  }

 private:
  struct namer {
    std::vector<std::string>& names;
    template <class T, class U, class E>
    void operator()(std::size_t i, dlib::add_layer<T, U, E>& l) const {
      names[i] = "layer" + std::to_string(i) + "." + dlib_layer_type(l.layer_details());
    }
  };

  template <class Sink>
  struct visitor {
    Sink& sink;
    const std::vector<std::string>& names;
    template <class T, class U, class E>
    void operator()(std::size_t i, dlib::add_layer<T, U, E>& l) const {
      const dlib::tensor& params = l.layer_details().get_layer_params();
      if (params.size() == 0) return;
      sink.observe(role::parameter, names[i], params);
      const dlib::tensor& grad = l.get_parameter_gradient();
      if (grad.size() == params.size()) sink.observe(role::gradient, names[i], grad);
    }
  };

  std::vector<std::string> names_;
};

}  // namespace mldiag
