// SPDX-License-Identifier: Apache-2.0
// The float-accumulating host kernel on every ISA this CPU runs (issue 18): clean data, where
// the fast path is taken, held to the contract of docs/stats.md against a long double
// reference; the adversarial cases that must leave it (overflowing squares, deviations
// below 2^-40, a shift far from the mean); determinism across thread counts for each ISA.
#include <doctest/doctest.h>

#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/host_engine.hpp"
#include "mldiag/stats/host_isa.hpp"
#include "mldiag/stats/stats_plan.hpp"

#include "../support/reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using mldiag_test::contract_tol;

template <class T>
T make(double v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else return T(v);
}

// Selects each ISA the CPU can run in turn, and restores the one in use afterwards.
void for_each_isa(const std::function<void(mldiag::host_isa)>& f) {
  const auto before = mldiag::active_host_isa();
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    f(isa);
  }
  mldiag::select_host_isa(before);
}

// The largest relative errors seen (mean relative to max(|mean|, sd), as the contract states).
struct worst {
  double mean = 0, sd = 0, l2 = 0;
  void see(const mldiag::tensor_stats& s, const mldiag_test::reference_stats& r) {
    const long double sd_ref = std::sqrt(r.variance);
    const long double scale = std::max(std::fabs(r.mean), sd_ref);
    if (scale > 0) mean = std::max(mean, static_cast<double>(std::fabs(s.mean() - r.mean) / scale));
    if (sd_ref > 0) sd = std::max(sd, static_cast<double>(std::fabs(s.stddev() - sd_ref) / sd_ref));
    if (r.l2 > 0) l2 = std::max(l2, static_cast<double>(std::fabs(s.l2_norm() - r.l2) / r.l2));
  }
};

template <class T>
void check_data(const std::vector<double>& values, worst& w, std::size_t offset = 0) {
  std::vector<T> x;
  for (double v : values) x.push_back(make<T>(v));
  const std::span<const T> view(x.data() + offset, x.size() - offset);
  const auto s = mldiag::compute_stats(view);
  const auto r = mldiag_test::reference_of(view);
  mldiag_test::check_against(s, r, contract_tol<T>);
  w.see(s, r);
}

std::vector<double> gaussian(std::size_t n, std::uint64_t seed, double mean, double sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, sd);
  std::vector<double> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST_CASE("an ISA the CPU cannot run is refused and the active one is named") {
  const auto best = mldiag::detail::detect_host_isa();
  CHECK(static_cast<int>(mldiag::active_host_isa()) <= static_cast<int>(best));
  CHECK(mldiag::select_host_isa(mldiag::host_isa::portable));
  CHECK(mldiag::active_host_isa() == mldiag::host_isa::portable);
  for (auto isa : mldiag::host_isas) {
    if (static_cast<int>(isa) <= static_cast<int>(best)) continue;
    CHECK_FALSE(mldiag::select_host_isa(isa));
    CHECK(mldiag::active_host_isa() == mldiag::host_isa::portable);
  }
  CHECK(mldiag::select_host_isa(best));
  CHECK(mldiag::host_isa_name(mldiag::host_isa::avx2) == "avx2");
  CHECK(mldiag::host_isa_name(mldiag::host_isa::avx512_bf16) == "avx512_bf16");
  MESSAGE("host statistics run on: " << mldiag::host_isa_name(best));
}

TEST_CASE_TEMPLATE("clean data on every ISA is within the contract", T, float, mldiag::bfloat16, mldiag::half,
                   mldiag::float8_e4m3, mldiag::float8_e5m2) {
  for_each_isa([](mldiag::host_isa) {
    worst w;
    // Sizes around a block, a vector group and a run; unaligned starts (offset 1).
    for (std::size_t n : {16, 17, 100, 4095, 4096, 4097, 12345, 70000}) {
      CAPTURE(n);
      check_data<T>(gaussian(n + 1, n, 0.0, 1.0), w, 1);
      check_data<T>(gaussian(n + 1, n + 7, 3.0, 0.25), w, 1);
      std::vector<double> relu = gaussian(n, n + 3, 0.0, 2.0);
      for (auto& v : relu) v = std::max(v, 0.0);  // half exact zeros
      check_data<T>(relu, w);
    }
    MESSAGE("worst relative error: mean " << w.mean << ", sd " << w.sd << ", L2 " << w.l2);
  });
}

TEST_CASE_TEMPLATE("adversarial blocks for float accumulation stay within the contract", T, float,
                   mldiag::bfloat16) {
  for_each_isa([](mldiag::host_isa) {
    worst w;
    const std::size_t n = 3 * 4096 + 77;
    // The 16 elements the shift is sampled from (every 256th) are outliers: the shift lands
    // far from the mean and the block is summed again around it.
    std::vector<double> sampled = gaussian(n, 1, 0.0, 1.0);
    for (std::size_t i = 0; i < n; i += 256) sampled[i] = 1000.0;
    check_data<T>(sampled, w);
    // +a, -a alternating with a = 1 + 2^-7 (exact in bf16): every sample is +a, the mean is
    // 0, and each square rounds the same way.
    std::vector<double> alternating(n);
    for (std::size_t i = 0; i < n; ++i) alternating[i] = (i % 2 ? -1.0 : 1.0) * (1.0 + 0x1p-7);
    check_data<T>(alternating, w);
    // A mean far above the spread (|mean| / sd = 1e4 in fp32, 1e2 in bf16's 8 bits).
    check_data<T>(gaussian(n, 2, 1000.0, std::is_same_v<T, float> ? 0.1 : 10.0), w);
    // Magnitudes where float squares are fine (1e17: squares 1e34) and where they overflow
    // (1e20: squares 1e40, the exact kernel takes the block).
    check_data<T>(gaussian(n, 3, 0.0, 1e17), w);
    check_data<T>(gaussian(n, 4, 5e19, 1e20), w);
    // Deviations around 1e-12 (below 2^-40: the exact kernel) and 1e-10 (float, squares 1e-20).
    check_data<T>(gaussian(n, 5, 0.0, 1e-12), w);
    check_data<T>(gaussian(n, 6, 0.0, 1e-10), w);
    // fp32 near the ends of its range: 3e38 (sums overflow) and 1e-38 (below 2^-40).
    check_data<T>(gaussian(n, 7, 0.0, 1e38), w);
    check_data<T>(gaussian(n, 8, 0.0, 1e-38), w);
    // Two scales in one block: ones and one 2^40 every 1000 elements.
    std::vector<double> mixed(n, 1.0);
    for (std::size_t i = 500; i < n; i += 1000) mixed[i] = 0x1p40;
    check_data<T>(mixed, w);
    // A constant block and integers.
    check_data<T>(std::vector<double>(n, 0.1), w);
    std::vector<double> ints(n);
    for (std::size_t i = 0; i < n; ++i) ints[i] = static_cast<double>(i % 7);
    check_data<T>(ints, w);
    MESSAGE("worst relative error: mean " << w.mean << ", sd " << w.sd << ", L2 " << w.l2);
  });
}

// Blocks for the kernels around zero — bf16's and fp32's centred passes on avx512 and
// avx512_bf16 — and the same checks on every other ISA: extrema (read
// from the bits for bf16), signed zeros, denormals, a block whose samples look centred while
// its mean is not (the pass around 0, then the shifted pass around the mean), squares that
// overflow float, NaN and Inf.
TEST_CASE_TEMPLATE("blocks around zero: extrema, signed zeros, denormals, a mean the samples miss", T,
                   mldiag::bfloat16, float) {
  for_each_isa([](mldiag::host_isa) {
    worst w;
    for (std::size_t n : {64, 65, 127, 4096, 3 * 4096 + 77}) {
      CAPTURE(n);
      check_data<T>(gaussian(n, n, -5.0, 0.5), w);  // all negative
      check_data<T>(gaussian(n, n + 1, 5.0, 0.5), w);  // all positive
      std::vector<double> neg_zero = gaussian(n, n + 2, -1.0, 0.3);
      for (std::size_t i = 0; i < n; i += 3) neg_zero[i] = -0.0;  // -0 with negatives: max is -0
      for (auto& v : neg_zero) v = std::min(v, -0.0);
      check_data<T>(neg_zero, w);
      std::vector<double> zeros(n, 0.0);  // +0 and -0 only
      for (std::size_t i = 1; i < n; i += 2) zeros[i] = -0.0;
      check_data<T>(zeros, w);
      std::vector<double> tiny = gaussian(n, n + 4, 0.0, 1.0);  // denormals among normals
      for (std::size_t i = 5; i < n; i += 7) tiny[i] = (i % 2 ? 1.0 : -1.0) * 0x1p-130;
      check_data<T>(tiny, w);
      std::vector<double> hidden(n);  // the sampled elements are 0; the others 3 +- 0.1
      const auto spread = gaussian(n, n + 5, 3.0, 0.1);
      for (std::size_t i = 0; i < n; ++i) hidden[i] = i % (n / 16) == 0 ? 0.0 : spread[i];
      check_data<T>(hidden, w);
    }
    // Non-finite elements in a centred block (in the vectors and in the tail): counted
    // exactly by the exact kernel.
    std::vector<double> bad = gaussian(4096 + 20, 9, 0.0, 1.0);
    bad[100] = std::nan("");
    bad[2000] = -INFINITY;
    bad[4096 + 7] = INFINITY;
    check_data<T>(bad, w);
    // Centred values whose squares overflow float (|x| = 1e20, 3e38): the exact kernel.
    for (double big : {1e20, 3e38}) {
      std::vector<double> huge = gaussian(4096, 10, 0.0, 1.0);
      for (std::size_t i = 0; i < huge.size(); i += 5) huge[i] = (i % 2 ? big : -big);
      check_data<T>(huge, w);
    }
    MESSAGE("worst relative error: mean " << w.mean << ", sd " << w.sd << ", L2 " << w.l2);
  });
}

TEST_CASE("each ISA is bit-identical across thread counts and with compute_stats") {
  const auto a = gaussian(300000, 11, 0.5, 2.0), b = gaussian(70001, 12, -1.0, 0.1);
  std::vector<float> fa(a.begin(), a.end());
  std::vector<mldiag::bfloat16> bb;
  for (double v : b) bb.emplace_back(v);
  for_each_isa([&](mldiag::host_isa) {
    std::vector<mldiag::tensor_stats> totals;
    for (unsigned threads : {1u, 2u, 8u}) {
      const std::vector<mldiag::tensor_ref> list = {mldiag::as_tensor_ref("a", fa),
                                                    mldiag::as_tensor_ref("b", bb)};
      mldiag::stats_plan plan(list);
      mldiag::host_engine engine(threads);
      plan.compute(engine);
      CHECK(plan[0] == mldiag::compute_stats(fa));
      CHECK(plan[1] == mldiag::compute_stats(bb));
      totals.push_back(plan.total());
    }
    CHECK(totals[0] == totals[1]);
    CHECK(totals[0] == totals[2]);
  });
}
