// SPDX-License-Identifier: Apache-2.0
/// `mldiag diff`: how two checkpoints differ, tensor by tensor, streamed window by window.
#pragma once

#include "cli/checkpoint.hpp"
#include "cli/parallel_units.hpp"
#include "cli/tensor_source.hpp"
#include "mldiag/stats/block_stats.hpp"  // stats_unit_elements
#include "mldiag/stats/host_engine.hpp"
#include "mldiag/stats/tensor_stats.hpp"  // scale_exponent

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mldiag::cli {

// How tensor B differs from tensor A (same name, same shape).
struct tensor_diff {
  std::string name;
  std::string dtype_a, dtype_b;
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 0;       // elements compared
  std::uint64_t non_finite = 0;  // positions where A or B is NaN or +-Inf: left out of the norms
  double norm_a = 0.0;           // ||A||_2 over the positions where both are finite
  double norm_b = 0.0;           // ||B||_2 over the same positions
  double norm_diff = 0.0;        // ||B - A||_2 over the same positions
  // norm_diff / norm_a; when norm_a == 0 it is 0 if norm_diff == 0 too, +Inf otherwise.
  double relative = 0.0;
  double max_abs_diff = 0.0;  // max |B - A| over the same positions (0 when there are none)
};

// A tensor in both checkpoints with different shapes (not compared).
struct reshaped_tensor {
  std::string name;
  std::vector<std::uint64_t> shape_a, shape_b;
};

// A tensor in both with the same shape that could not be compared, and why.
struct uncompared_tensor {
  std::string name;
  std::string reason;
};

// The difference of two checkpoints.
struct checkpoint_diff {
  std::vector<tensor_diff> common;            // in A's order
  std::vector<std::string> added;             // only in B, in B's order
  std::vector<std::string> removed;           // only in A, in A's order
  std::vector<reshaped_tensor> reshaped;      // in A's order
  std::vector<uncompared_tensor> uncompared;  // e.g. Fortran order in one file only
};

namespace detail {

// Sums of squares of A, B and B - A over the positions where both are finite, kept as
// ssq * 2^(2 * exp) with exp = mldiag::scale_exponent(max_abs): the power of two that
// tensor_stats scales its moments by, so the scaling is exact and no square overflows or
// underflows for any finite input. B - A is formed after scaling, so it cannot overflow.
struct scaled_ssq {
  bool any = false;
  double max_abs = 0.0;  // largest finite |A| or |B| over the positions summed
  int exp = 0;
  double ssq_a = 0.0, ssq_b = 0.0, ssq_d = 0.0;

  // Both parts go to the exponent of the merged max_abs, the one the whole would have (as in
  // tensor_stats::merge): a part of zeros has exponent 0, and the larger of the two exponents
  // would lose a part of values below about 1e-154 (below 1e-162 it becomes 0).
  void merge(const scaled_ssq& o) noexcept {
    if (!o.any) return;
    if (!any) { *this = o; return; }
    max_abs = std::max(max_abs, o.max_abs);
    const int e = mldiag::scale_exponent(max_abs);
    auto at = [e](double v, int from) { return std::ldexp(v, 2 * (from - e)); };
    ssq_a = at(ssq_a, exp) + at(o.ssq_a, o.exp);
    ssq_b = at(ssq_b, exp) + at(o.ssq_b, o.exp);
    ssq_d = at(ssq_d, exp) + at(o.ssq_d, o.exp);
    exp = e;
  }
  [[nodiscard]] double norm(double ssq) const noexcept { return any ? std::ldexp(std::sqrt(ssq), exp) : 0.0; }
};

struct diff_unit {
  std::uint64_t non_finite = 0;
  double max_abs_diff = 0.0;
  scaled_ssq sums;
};

inline diff_unit diff_values(const double* a, const double* b, std::size_t n) noexcept {
  diff_unit r;
  double big = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) { ++r.non_finite; continue; }
    big = std::max({big, std::fabs(a[i]), std::fabs(b[i])});
    r.max_abs_diff = std::max(r.max_abs_diff, std::fabs(b[i] - a[i]));  // may be +Inf: |B-A| > DBL_MAX
  }
  if (r.non_finite == n) return r;
  r.sums.any = true;
  r.sums.max_abs = big;
  r.sums.exp = mldiag::scale_exponent(big);
  const double scale = std::ldexp(1.0, -r.sums.exp);
  double sa = 0.0, sb = 0.0, sd = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) continue;
    const double x = a[i] * scale, y = b[i] * scale;
    sa += x * x;
    sb += y * y;
    sd += (y - x) * (y - x);
  }
  r.sums.ssq_a = sa;
  r.sums.ssq_b = sb;
  r.sums.ssq_d = sd;
  return r;
}

struct diff_scratch {
  unit_scratch a, b;
};

inline tensor_diff diff_tensor(const checkpoint& ca, const tensor_entry& ta, const checkpoint& cb, const tensor_entry& tb,
                               host_engine& engine, std::vector<diff_scratch>& scratch, std::size_t window_bytes) {
  tensor_diff d;
  d.name = ta.name;
  d.dtype_a = ta.dtype();
  d.dtype_b = tb.dtype();
  d.shape = ta.shape;
  d.count = ta.numel;
  const std::size_t size_a = size_of(ta.type), size_b = size_of(tb.type);
  // The same number of elements per window from both (whole units).
  const std::size_t elems = window_for(std::max(size_a, size_b), window_bytes) / std::max(size_a, size_b);
  tensor_source sa(ca, ta, elems * size_a), sb(cb, tb, elems * size_b);
  scaled_ssq sums;
  std::vector<diff_unit> units;
  for (auto wa = sa.next(); !wa.empty(); wa = sa.next()) {
    const auto wb = sb.next();
    const std::size_t n_elems = wa.size() / size_a;
    const std::size_t count = (n_elems + mldiag::stats_unit_elements - 1) / mldiag::stats_unit_elements;
    units.assign(count, diff_unit{});
    for_each_unit(engine, count, [&](std::size_t u, unsigned w) {
      const std::size_t begin = u * mldiag::stats_unit_elements;
      const std::size_t n = std::min(mldiag::stats_unit_elements, n_elems - begin);
      auto& s = scratch[w];
      to_double(ta.type, native_unit(ta, wa.data() + begin * size_a, n, s.a), n, s.a.values.data());
      to_double(tb.type, native_unit(tb, wb.data() + begin * size_b, n, s.b), n, s.b.values.data());
      units[u] = diff_values(s.a.values.data(), s.b.values.data(), n);
    });
    for (const auto& u : units) {  // fixed order
      d.non_finite += u.non_finite;
      d.max_abs_diff = std::max(d.max_abs_diff, u.max_abs_diff);
      sums.merge(u.sums);
    }
  }
  (void)sb.next();  // releases B's last window
  d.norm_a = sums.norm(sums.ssq_a);
  d.norm_b = sums.norm(sums.ssq_b);
  d.norm_diff = sums.norm(sums.ssq_d);
  d.relative = d.norm_a > 0.0 ? d.norm_diff / d.norm_a : (d.norm_diff == 0.0 ? 0.0 : HUGE_VAL);
  return d;
}

// True when the same shape in different memory orders still pairs equal positions.
inline bool same_order(const tensor_entry& a, const tensor_entry& b) noexcept {
  if (a.fortran_order == b.fortran_order) return true;
  int non_trivial = 0;
  for (const auto e : a.shape) non_trivial += e > 1 ? 1 : 0;
  return non_trivial <= 1;
}

}  // namespace detail

// Compares checkpoint B with checkpoint A, tensor by tensor (matched by name): for each
// tensor in both with the same shape, ||B - A||_2 / ||A||_2, max |B - A| and the positions
// where either is non-finite (left out of the norms), computed in double from the values
// (A and B may have different dtypes), streaming window by window on `threads` threads
// (0: one per hardware thread), with results independent of the thread count. Also lists
// the tensors added (only in B), removed (only in A) and reshaped.
//
// **Example**
// ```cpp
// auto a = mldiag::cli::checkpoint::open("step1000.safetensors");
// auto b = mldiag::cli::checkpoint::open("step2000.safetensors");
// auto d = mldiag::cli::diff_checkpoints(a, b, 0);
// for (const auto& t : d.common) std::printf("%s %.3g\n", t.name.c_str(), t.relative);
// ```
[[nodiscard]] inline checkpoint_diff diff_checkpoints(const checkpoint& a, const checkpoint& b, unsigned threads = 0,
                                                      std::size_t window_bytes = default_window_bytes) {
  host_engine engine(detail::resolve_threads(threads));
  std::vector<detail::diff_scratch> scratch(engine.threads());
  checkpoint_diff out;
  for (const auto& ta : a.tensors()) {
    const tensor_entry* tb = b.find(ta.name);
    if (tb == nullptr) {
      out.removed.push_back(ta.name);
    } else if (ta.shape != tb->shape) {
      out.reshaped.push_back({ta.name, ta.shape, tb->shape});
    } else if (!detail::same_order(ta, *tb)) {
      out.uncompared.push_back({ta.name, "Fortran order in one file and C order in the other; re-save one with "
                                         "numpy.ascontiguousarray"});
    } else {
      out.common.push_back(detail::diff_tensor(a, ta, b, *tb, engine, scratch, window_bytes));
    }
  }
  for (const auto& tb : b.tensors())
    if (a.find(tb.name) == nullptr) out.added.push_back(tb.name);
  return out;
}

}  // namespace mldiag::cli
