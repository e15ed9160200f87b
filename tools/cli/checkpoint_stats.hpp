// SPDX-License-Identifier: Apache-2.0
/// `mldiag stats`: per-tensor statistics of a checkpoint, streamed window by window.
#pragma once

#include "cli/checkpoint.hpp"
#include "cli/parallel_units.hpp"
#include "cli/tensor_source.hpp"
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"  // stats_unit_elements
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/host_engine.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mldiag::cli {

namespace detail {

// Statistics of one unit (at most unit_elems elements at p): floats read in place by mldiag's
// kernels (so a tensor's result equals mldiag::compute_stats of it); integers as doubles.
inline tensor_stats unit_stats(const tensor_entry& t, const std::byte* p, std::size_t n, unit_scratch& s) {
  const std::byte* x = native_unit(t, p, n, s);
  const auto count = static_cast<std::int64_t>(n);
  if (const auto f = float_dtype(t.type)) return compute_stats(tensor_ref({}, x, count, *f));
  to_double(t.type, x, n, s.values.data());
  return compute_stats(tensor_ref({}, s.values.data(), count, mldiag::dtype::f64));
}

}  // namespace detail

// One tensor's statistics, with what identifies it.
struct tensor_report {
  std::string name;
  std::string dtype;                 // "F32", "BF16", ... (safetensors spelling)
  std::vector<std::uint64_t> shape;  // empty for a 0-d scalar
  mldiag::tensor_stats stats;        // count, nan, inf, zeros, min/max/max_abs, mean, variance, L2
};

// Statistics of every tensor of `c`, in `c.tensors()` order, on `threads` threads (0: one per
// hardware thread). The file is read once, front to back, in windows of about
// `window_bytes` whose pages are released after use, so resident memory stays bounded
// (about window_bytes + what the kernel reads ahead) whatever the file size. Compressed .npz
// members are inflated one window at a time.
//
// Each tensor is cut into units of 65536 elements merged in order (as `mldiag::stats_plan`
// does), so results are bit-identical for every thread count and window size, and equal to
// `mldiag::compute_stats` on the tensor for the floating-point dtypes. Integers and BOOL
// are converted to double (64-bit integers above 2^53 round). Throws `mldiag::error` for a
// damaged compressed member.
//
// **Example**
// ```cpp
// auto ckpt = mldiag::cli::checkpoint::open("model.safetensors");
// for (const auto& r : mldiag::cli::checkpoint_stats(ckpt, 0))
//   if (r.stats.non_finite() > 0) std::printf("%s has NaN/Inf\n", r.name.c_str());
// ```
[[nodiscard]] inline std::vector<tensor_report> checkpoint_stats(const checkpoint& c, unsigned threads = 0,
                                                                 std::size_t window_bytes = default_window_bytes) {
  host_engine engine(detail::resolve_threads(threads));
  std::vector<detail::unit_scratch> scratch(engine.threads());
  std::vector<tensor_stats> units;
  std::vector<tensor_report> out;
  out.reserve(c.tensors().size());
  for (const auto& t : c.tensors()) {
    tensor_report r{t.name, std::string(t.dtype()), t.shape, {}};
    const std::size_t size = size_of(t.type);
    detail::tensor_source src(c, t, detail::window_for(size, window_bytes));
    for (auto w = src.next(); !w.empty(); w = src.next()) {
      const std::size_t elems = w.size() / size;
      const std::size_t count = (elems + mldiag::stats_unit_elements - 1) / mldiag::stats_unit_elements;
      units.assign(count, tensor_stats{});
      detail::for_each_unit(engine, count, [&](std::size_t u, unsigned worker) {
        const std::size_t begin = u * mldiag::stats_unit_elements;
        const std::size_t n = std::min(mldiag::stats_unit_elements, elems - begin);
        units[u] = detail::unit_stats(t, w.data() + begin * size, n, scratch[worker]);
      });
      for (const auto& s : units) r.stats.merge(s);  // fixed order
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace mldiag::cli
