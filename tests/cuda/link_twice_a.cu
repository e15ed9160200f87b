// SPDX-License-Identifier: Apache-2.0
// Two translation units (this one and link_twice_b.cu) include every header of
// kernels/mldiag/cuda/ and use everything in it, as a user's program with two .cu files does.
// The test is mostly that this program links: a kernel or function defined in a header as one
// external symbol would make the link fail ("multiple definition of ..."). Without a GPU it
// says so and exits 0, having linked; with one, both translation units run the statistics,
// the row entropy, the event timer and the memory query on the same data, and must agree with
// each other bit for bit and with a host reference within the accuracy contract.
#include "link_twice.cuh"

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

namespace {

// Field by field: a struct's padding bytes are not part of the result.
bool same(const mldiag::tensor_stats& a, const mldiag::tensor_stats& b) {
  return a.count == b.count && a.nan == b.nan && a.pos_inf == b.pos_inf && a.neg_inf == b.neg_inf &&
         a.zeros == b.zeros && a.min == b.min && a.max == b.max && a.max_abs == b.max_abs &&
         a.mean_scaled == b.mean_scaled && a.m2_scaled == b.m2_scaled && a.scale_exp == b.scale_exp;
}
bool same(const mldiag::entropy_stats& a, const mldiag::entropy_stats& b) {
  return a.rows == b.rows && a.invalid_rows == b.invalid_rows && a.sum == b.sum && a.min == b.min &&
         a.max == b.max && a.normalized_sum == b.normalized_sum &&
         a.normalized_min == b.normalized_min && a.normalized_max == b.normalized_max;
}

int fail(const char* what) {
  std::printf("mldiag: link_twice: FAILED: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  const auto devices = mldiag::cuda::query_devices();
  if (devices.count == 0) {
    std::printf(
        "mldiag: link_twice: two translation units including every .cuh header linked; "
        "nothing run (%s)\n",
        devices.describe().c_str());
    return 0;
  }
  // Three chunks and a tail, so the merge kernels have work; rows of 13 logits.
  constexpr std::int64_t row_len = 13;
  constexpr std::int64_t n = row_len * 15200;
  std::vector<float> x(static_cast<std::size_t>(n));
  double sum_sq = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % row_len) - 6) * 0.5f;
    sum_sq += static_cast<double>(x[i]) * x[i];
  }
  float* d_x = nullptr;
  mldiag::cuda::check(cudaMalloc(reinterpret_cast<void**>(&d_x), x.size() * sizeof(float)),
                      "link_twice: data");
  mldiag::cuda::check(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
                      "link_twice: upload");
  const link_twice_result a = link_twice_run_a(d_x, n, row_len);
  const link_twice_result b = link_twice_run_b(d_x, n, row_len);
  mldiag::cuda::check(cudaFree(d_x), "link_twice: free");

  const mldiag::entropy_stats host_entropy =
      mldiag::entropy_from_logits(std::span<const float>(x), row_len);
  std::printf("mldiag: link_twice on %s: l2 %.9g (reference %.9g), entropy mean %.9g (host %.9g)\n",
              devices.describe().c_str(), a.stats.l2_norm(), std::sqrt(sum_sq), a.entropy.mean(),
              host_entropy.mean());
  if (!same(a.stats, b.stats)) return fail("the two units' statistics differ");
  if (!same(a.entropy, b.entropy)) return fail("the two units' entropies differ");
  if (a.stats.count != static_cast<std::uint64_t>(n) || a.stats.min != -3.0 || a.stats.max != 3.0 ||
      a.stats.zeros != static_cast<std::uint64_t>(n / row_len))
    return fail("counts or extrema are not exact");
  if (std::abs(a.stats.l2_norm() - std::sqrt(sum_sq)) > 1e-6 * std::sqrt(sum_sq))
    return fail("l2 norm off");
  if (a.entropy.rows != host_entropy.rows ||
      std::abs(a.entropy.mean() - host_entropy.mean()) > 1e-6 * host_entropy.mean())
    return fail("entropy off the host's");
  if (!(a.memory_capacity > 0.0) || a.memory_capacity != b.memory_capacity)
    return fail("device memory");
  if (a.timed_layers != 1 || b.timed_layers != 1)
    return fail("the event timer did not time the one layer");
  std::printf("mldiag: link_twice: both translation units agree\n");
  return 0;
}

link_twice_result link_twice_run_a(const float* d_x, std::int64_t n, std::int64_t row_len) {
  return run_everything(d_x, n, row_len);
}
