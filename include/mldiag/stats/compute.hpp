// SPDX-License-Identifier: Apache-2.0
/// `compute_stats`: the statistics of one host tensor, in one pass over its memory.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/compiled.hpp"
#include "mldiag/core/concepts.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

inline void require_host(const tensor_ref& t, std::string_view who) {
  if (!t.device().is_host()) {
    fail(who, t.name(),
         "the tensor is in CUDA memory (device " + std::to_string(t.device().index) +
             ") and the host engine reads host memory; use the kernels in mldiag::cuda "
             "(kernels/mldiag/cuda) or copy the tensor to the host");
  }
}

// Units in order, blocks in order within a unit: the same merge tree as stats_plan, so one
// tensor computed here equals the same tensor computed in a list, on any number of threads.
inline tensor_stats tensor_stats_serial(const tensor_ref& t) noexcept {
  tensor_stats total;
  for (std::uint64_t begin = 0; begin < t.numel(); begin += unit_elems) {
    total.merge(range_stats(t, begin, std::min<std::uint64_t>(t.numel(), begin + unit_elems)));
  }
  return total;
}

}  // namespace detail

/// Statistics of a host tensor of any dtype, contiguous or strided, on the calling thread.
/// Throws `mldiag::error` for a tensor in device memory.
[[nodiscard]] MLDIAG_COMPILED_INLINE tensor_stats compute_stats(const tensor_ref& t);
#if MLDIAG_DEFINE_COMPILED
MLDIAG_COMPILED_INLINE tensor_stats compute_stats(const tensor_ref& t) {
  detail::require_host(t, "compute_stats");
  return detail::tensor_stats_serial(t);
}
#endif

/// Statistics of anything mldiag reads on the host: a contiguous range (`std::vector`,
/// `std::span`, ...) of `double`, `float`, `half`, `bfloat16`, `float8_e4m3`, `float8_e5m2`,
/// a `strided_view`, or an adapted type (Eigen with `<mldiag/adapters/eigen.hpp>`). One pass
/// over memory; no allocation.
///
/// **Example**
/// ```cpp
/// std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
/// auto s = mldiag::compute_stats(g);  // s.l2_norm() == sqrt(650) == 25.495098
/// ```
template <tensor V>
[[nodiscard]] tensor_stats compute_stats(const V& x) {
  return compute_stats(as_tensor_ref({}, x));
}

/// Not a tensor: this overload exists to say why, at compile time.
template <class V>
  requires(!tensor<V> && !std::is_same_v<V, tensor_ref>)
tensor_stats compute_stats(const V&) {
  detail::explain_not_a_tensor<V>();
  return {};
}

}  // namespace mldiag
