// SPDX-License-Identifier: Apache-2.0
/// The host workers behind every statistics entry point: one block of elements -> tensor_stats.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/element_types.hpp"
#include "mldiag/core/layout.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/host_isa.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <algorithm>
#include <array>
#include <bit>      // std::bit_cast
#include <cmath>    // std::ldexp, std::frexp
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <type_traits>

#ifdef MLDIAG_HOST_DISPATCH
#include <immintrin.h>  // the AVX-512 passes around 0 (bf16_centred_pass, f32_centred_pass)
#endif

// The kernels, after everything they include (the block above, which holds what the pieces
// need), so that a translation unit defines everything in the order of the single header this
// was: GCC's inlining depends on that order, and the kernels' code stays as measured. Each
// piece includes the one before it: element_formats, block_stats_narrow (the exact kernel),
// block_stats_float (the float kernel, per ISA), block_stats_centred (AVX-512 around zero).
// This file adds float64, the dispatch on ISA and dtype, and the walk over a tensor's blocks.
#include "mldiag/stats/block_stats_centred.hpp"
#include "mldiag/stats/block_stats_float.hpp"
#include "mldiag/stats/block_stats_narrow.hpp"
#include "mldiag/stats/element_formats.hpp"

namespace mldiag::inline MLDIAG_ABI::detail {

// One block of float64: a first look for the classes and the largest magnitude, then the
// moments of the values scaled by 2^-e (exact), so that no square overflows or underflows.
inline tensor_stats block_stats_f64(const double* x, std::size_t n) noexcept {
  using F = fmt_f64;
  constexpr std::size_t w = lanes / 2;  // one native vector of doubles
  tensor_stats out;
  out.count = n;
  std::size_t first = 0;
  while (first < n && !is_finite_bits<F>(F::bits(x[first]) & F::abs_mask)) ++first;
  if (first == n) {
    count_non_finite<F>(x, n, out);
    return out;
  }
  const double first_value = x[first];
  std::array<double, w> lo, hi;
  std::array<std::uint64_t, w> amax{};
  std::array<std::uint32_t, w> bad{}, zero{};
  lo.fill(first_value);
  hi.fill(first_value);
  auto look = [&](std::size_t j, std::uint64_t u) {
    const std::uint64_t a = u & F::abs_mask;
    const bool fin = is_finite_bits<F>(a);
    const double v = fin ? std::bit_cast<double>(u) : first_value;
    bad[j] += static_cast<std::uint32_t>(!fin);
    zero[j] += static_cast<std::uint32_t>(a == 0);
    lo[j] = v < lo[j] ? v : lo[j];
    hi[j] = v > hi[j] ? v : hi[j];
    const std::uint64_t af = fin ? a : 0;
    amax[j] = af > amax[j] ? af : amax[j];
  };
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    for (std::size_t j = 0; j < w; ++j) look(j, F::bits(x[i + j]));
  }
  for (std::size_t j = 0; i < n; ++i, ++j) look(j, F::bits(x[i]));
  std::uint64_t non_finite = 0;
  std::uint64_t am = 0;
  out.min = out.max = first_value;
  for (std::size_t j = 0; j < w; ++j) {
    non_finite += bad[j];
    out.zeros += zero[j];
    out.min = std::min(out.min, lo[j]);
    out.max = std::max(out.max, hi[j]);
    am = std::max(am, amax[j]);
  }
  if (non_finite > 0) count_non_finite<F>(x, n, out);
  out.max_abs = std::bit_cast<double>(am);
  out.scale_exp = scale_exponent(out.max_abs);

  const double scale = std::ldexp(1.0, -out.scale_exp);
  // Sums of d = x * 2^-e - shift and d^2 over the finite elements, in lane order.
  auto shifted_sums = [&](double shift, double& s, double& q) {
    std::array<double, w> sum{}, sum_sq{};
    auto moments = [&](std::size_t j, std::uint64_t u) {
      const bool fin = is_finite_bits<F>(u & F::abs_mask);
      const double d = fin ? std::bit_cast<double>(u) * scale - shift : 0.0;
      sum[j] += d;
      sum_sq[j] += d * d;
    };
    std::size_t k = 0;
    for (; k + w <= n; k += w) {
      for (std::size_t j = 0; j < w; ++j) moments(j, F::bits(x[k + j]));
    }
    for (std::size_t j = 0; k < n; ++k, ++j) moments(j, F::bits(x[k]));
    s = 0.0;
    q = 0.0;
    for (std::size_t j = 0; j < w; ++j) {
      s += sum[j];
      q += sum_sq[j];
    }
  };
  const double nf = static_cast<double>(n - non_finite);
  // The shift: the median of the first, middle and last elements where all three are finite
  // (as in block_stats_narrow), else the first finite one.
  double pivot = first_value;
  if (first == 0 && n >= 3 && is_finite_bits<F>(F::bits(x[n / 2]) & F::abs_mask) &&
      is_finite_bits<F>(F::bits(x[n - 1]) & F::abs_mask)) {
    const double a = x[0], b = x[n / 2], c = x[n - 1];
    pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
  }
  double shift = pivot * scale, s = 0.0, q = 0.0;
  shifted_sums(shift, s, q);
  if (needs_reshift(s, q, nf)) {  // the shift lies far from the mean: again around the mean
    shift += s / nf;
    shifted_sums(shift, s, q);
  }
  // The mean as a pair (see tensor_stats): shift + s/n keeps every digit of s/n.
  double mean_hi = 0.0, mean_lo = 0.0;
  two_sum(shift, s / nf, mean_hi, mean_lo);
  out.mean_scaled = mean_hi;
  out.mean_lo = static_cast<float>(mean_lo);
  out.m2_scaled = std::max(0.0, q - s * (s / nf));
  return out;
}

template <class F>
tensor_stats block_stats(const typename F::element* x, std::size_t n) noexcept {
  if constexpr (std::is_same_v<F, fmt_f64>) {
    return block_stats_f64(x, n);
  } else {
#ifdef MLDIAG_HOST_VECTORS
#ifdef MLDIAG_HOST_DISPATCH
    switch (active_host_isa()) {
      case host_isa::avx512_bf16:
      case host_isa::avx512:
        if constexpr (std::is_same_v<F, fmt_bf16>) return block_stats_avx512_bf16(x, n);
        if constexpr (std::is_same_v<F, fmt_f32>) return block_stats_avx512_f32(x, n);
        return block_stats_avx512<F>(x, n);
      case host_isa::avx2: return block_stats_avx2<F>(x, n);
      case host_isa::portable: break;
    }
#endif
    return block_stats_portable<F>(x, n);
#else
    return block_stats_narrow<F>(x, n);
#endif
  }
}

// Walks a strided layout in logical (row-major) order from a starting index, one element at
// a time, carrying into outer dimensions: no division per element.
class strided_cursor {
 public:
  strided_cursor(const layout& l, std::uint64_t start) noexcept : layout_(l) {
    std::uint64_t index = start;
    for (int d = l.rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      const auto extent = static_cast<std::uint64_t>(l.extents[k]);
      index_[k] = static_cast<std::int64_t>(index % extent);
      offset_ += index_[k] * l.strides[k];
      index /= extent;
    }
  }
  [[nodiscard]] std::int64_t offset() const noexcept { return offset_; }
  void next() noexcept {
    for (int d = layout_.rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      offset_ += layout_.strides[k];
      if (++index_[k] < layout_.extents[k]) return;
      offset_ -= index_[k] * layout_.strides[k];
      index_[k] = 0;
    }
  }

 private:
  const layout& layout_;
  std::array<std::int64_t, max_rank> index_{};
  std::int64_t offset_ = 0;
};

// Statistics of the logical elements [begin, end) of a host tensor of format F, block by
// block (begin must be a multiple of block_elems), merged in order.
template <class F>
tensor_stats range_stats_typed(const tensor_ref& t, std::uint64_t begin,
                               std::uint64_t end) noexcept {
  using element = typename F::element;
  const auto* base = static_cast<const element*>(t.data());
  tensor_stats total;
  if (t.is_contiguous()) {
    for (std::uint64_t b = begin; b < end; b += block_elems) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(block_elems, end - b));
      total.merge(block_stats<F>(base + b, n));
    }
    return total;
  }
  // Strided: gather each block into a buffer on the stack (at most 32 KiB), then the same
  // block worker, so a strided view of row-major memory gives the contiguous result.
  std::array<element, block_elems> buffer;
  strided_cursor cursor(t.layout(), begin);
  for (std::uint64_t b = begin; b < end; b += block_elems) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(block_elems, end - b));
    for (std::size_t i = 0; i < n; ++i, cursor.next()) buffer[i] = base[cursor.offset()];
    total.merge(block_stats<F>(buffer.data(), n));
  }
  return total;
}

template <class F>
struct format_tag {
  using type = F;
};

// The one run-time dispatch on dtype: calls f(format_tag<fmt_...>{}) for the format of `t`, so
// that everything after it is typed. Host and CUDA entry points all go through here.
template <class Visitor>
decltype(auto) with_format(dtype t, Visitor&& f) {
  switch (t) {
    case dtype::f64: return f(format_tag<fmt_f64>{});
    case dtype::f32: return f(format_tag<fmt_f32>{});
    case dtype::f16: return f(format_tag<fmt_f16>{});
    case dtype::bf16: return f(format_tag<fmt_bf16>{});
    case dtype::f8_e4m3: return f(format_tag<fmt_e4m3>{});
    case dtype::f8_e5m2: break;
  }
  return f(format_tag<fmt_e5m2>{});  // tensor_ref validates its dtype: nothing else gets here
}

inline tensor_stats range_stats(const tensor_ref& t, std::uint64_t begin,
                                std::uint64_t end) noexcept {
  return with_format(t.dtype(), [&](auto tag) {
    return range_stats_typed<typename decltype(tag)::type>(t, begin, end);
  });
}

}  // namespace mldiag::detail
