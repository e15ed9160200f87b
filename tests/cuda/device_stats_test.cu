// SPDX-License-Identifier: Apache-2.0
// The CUDA statistics against the host engine (the reference), on fresh random data with the
// awkward cases planted: NaN, +-Inf, denormals, zeros, misaligned starts, sizes around chunk
// boundaries, empty tensors, lists of 1 to 2000 tensors. Runs only where a GPU is.
#include <doctest/doctest.h>

#include "mldiag/cuda/device_entropy.cuh"
#include "mldiag/cuda/device_stats.cuh"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/stats_plan.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct device_buffer {
  void* ptr = nullptr;
  explicit device_buffer(std::size_t bytes) { REQUIRE(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) == cudaSuccess); }
  ~device_buffer() { cudaFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

// Host bytes of one tensor: random values of the dtype with specials planted.
std::vector<unsigned char> random_bytes(mldiag::dtype t, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.5, 2.0);
  std::vector<unsigned char> bytes(n * mldiag::size_of(t));
  for (std::size_t i = 0; i < n; ++i) {
    const double v = normal(rng);
    unsigned char* p = bytes.data() + i * mldiag::size_of(t);
    switch (t) {
      case mldiag::dtype::f64: std::memcpy(p, &v, 8); break;
      case mldiag::dtype::f32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case mldiag::dtype::f16: { const auto h = mldiag::half(v); std::memcpy(p, &h, 2); break; }
      case mldiag::dtype::bf16: { const auto h = mldiag::bfloat16(v); std::memcpy(p, &h, 2); break; }
      case mldiag::dtype::f8_e4m3: { const auto h = mldiag::float8_e4m3(v); std::memcpy(p, &h, 1); break; }
      case mldiag::dtype::f8_e5m2: { const auto h = mldiag::float8_e5m2(v); std::memcpy(p, &h, 1); break; }
    }
  }
  // Specials: all-ones exponent patterns (NaN / Inf where the format has them), zeros,
  // the smallest denormal; in one tensor of three, so most chunks take the fast path.
  if (n > 0 && rng() % 3 == 0) {
    const std::size_t es = mldiag::size_of(t);
    for (int k = 0; k < 6; ++k) {
      unsigned char* p = bytes.data() + (rng() % n) * es;
      std::memset(p, 0, es);
      if (k == 0) std::memset(p, 0xff, es);                 // NaN in every format
      if (k == 1) p[es - 1] = 0x80;                          // -0
      if (k == 2) p[0] = 1;                                  // smallest denormal
      if (k == 3 && t == mldiag::dtype::f32) { const float inf = INFINITY; std::memcpy(p, &inf, 4); }
      if (k == 4 && t == mldiag::dtype::bf16) { p[1] = 0xff; p[0] = 0x80; }  // -inf
    }
  }
  return bytes;
}

// Host and device each meet the contract of docs/stats.md against the exact values (1e-6 of
// the scale for formats of 32 bits or fewer, whose host kernel sums in float lanes; 1e-12 for
// float64), so they agree within the sum of the two bounds: `tol` is 2e-6, or 2e-12 where
// every element is float64.
void check_same(const mldiag::tensor_stats& d, const mldiag::tensor_stats& h, double tol) {
  CHECK(d.count == h.count);
  CHECK(d.nan == h.nan);
  CHECK(d.pos_inf == h.pos_inf);
  CHECK(d.neg_inf == h.neg_inf);
  CHECK(d.zeros == h.zeros);
  if (h.finite() == 0) return;
  CHECK(d.min == h.min);
  CHECK(d.max == h.max);
  CHECK(d.max_abs == h.max_abs);
  const double scale = std::fmax(std::fabs(h.mean()), h.stddev());
  CHECK(std::fabs(d.mean() - h.mean()) <= tol * scale);
  CHECK(std::fabs(d.stddev() - h.stddev()) <= tol * h.stddev() + 1e-300);
  CHECK(std::fabs(d.l2_norm() - h.l2_norm()) <= tol * h.l2_norm());
}

// Builds a list on host and device (each tensor at an odd element offset in its allocation,
// so starts are misaligned), computes both ways, compares.
void run_list(const std::vector<std::pair<mldiag::dtype, std::size_t>>& shapes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<unsigned char>> host;
  std::vector<std::unique_ptr<device_buffer>> device;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < shapes.size(); ++i) names.push_back("t" + std::to_string(i));
  std::vector<mldiag::tensor_ref> host_refs, device_refs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [t, n] = shapes[i];
    const std::size_t es = mldiag::size_of(t), offset = i % 3;
    host.push_back(random_bytes(t, n, rng));
    device.push_back(std::make_unique<device_buffer>((n + offset) * es));
    auto* d = static_cast<unsigned char*>(device.back()->ptr) + offset * es;
    REQUIRE(cudaMemcpy(d, host.back().data(), n * es, cudaMemcpyHostToDevice) == cudaSuccess);
    host_refs.emplace_back(names[i], host.back().data(), static_cast<std::int64_t>(n), t);
    device_refs.emplace_back(names[i], d, static_cast<std::int64_t>(n), t, mldiag::device::cuda(0));
  }
  mldiag::stats_plan reference(host_refs);
  mldiag::host_engine engine(1);
  reference.compute(engine);

  mldiag::cuda::stats_plan plan(device_refs);
  device_buffer ws(plan.workspace_bytes());
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  plan.upload(ws.ptr, stream);
  plan.compute(device_refs, ws.ptr, stream);
  std::vector<mldiag::tensor_stats> first(plan.size() + 1), second(plan.size() + 1);
  REQUIRE(cudaMemcpyAsync(first.data(), plan.d_results(ws.ptr), first.size() * sizeof(mldiag::tensor_stats),
                          cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  int flag = -1;
  REQUIRE(cudaMemcpyAsync(&flag, plan.d_any_non_finite(ws.ptr), sizeof flag, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  plan.compute(ws.ptr, stream);  // again: bit-identical
  REQUIRE(cudaMemcpyAsync(second.data(), plan.d_results(ws.ptr), second.size() * sizeof(mldiag::tensor_stats),
                          cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  cudaStreamDestroy(stream);
  bool all_f64 = true;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    CAPTURE(i);
    CAPTURE(mldiag::name(shapes[i].first));
    CAPTURE(shapes[i].second);
    const bool f64 = shapes[i].first == mldiag::dtype::f64;
    all_f64 = all_f64 && f64;
    check_same(first[i], reference[i], f64 ? 2e-12 : 2e-6);
    CHECK(std::memcmp(&first[i], &second[i], sizeof(mldiag::tensor_stats)) == 0);
  }
  check_same(first[plan.size()], reference.total(), all_f64 ? 2e-12 : 2e-6);
  CHECK(flag == (reference.total().non_finite() > 0 ? 1 : 0));
}

}  // namespace

TEST_CASE("every dtype at sizes around the chunk boundaries matches the host engine") {
  std::vector<std::pair<mldiag::dtype, std::size_t>> shapes;
  for (int d = 0; d < mldiag::dtype_count; ++d) {
    for (std::size_t n : {0, 1, 7, 4095, 4096, 65535, 65536, 65537, 200003}) shapes.emplace_back(static_cast<mldiag::dtype>(d), n);
  }
  run_list(shapes, 1);
}

TEST_CASE("lists of 1 and 2000 tensors match the host engine") {
  run_list({{mldiag::dtype::bf16, 1000003}}, 2);
  std::vector<std::pair<mldiag::dtype, std::size_t>> many;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) many.emplace_back(i % 2 ? mldiag::dtype::bf16 : mldiag::dtype::f32, rng() % 20000);
  run_list(many, 4);
}

TEST_CASE("row entropy on the device matches the host") {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::int64_t len : {8, 1000, 5000}) {
    const std::int64_t rows = 300;
    std::vector<float> z(static_cast<std::size_t>(rows * len));
    for (auto& v : z) v = normal(rng);
    z[3] = -INFINITY;  // masked
    z[static_cast<std::size_t>(len) + 1] = NAN;  // row 1 invalid
    device_buffer d(z.size() * 4), ws(mldiag::cuda::entropy_workspace_bytes(rows)), out(sizeof(mldiag::entropy_stats));
    REQUIRE(cudaMemcpy(d.ptr, z.data(), z.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    const mldiag::tensor_ref t("logits", d.ptr, static_cast<std::int64_t>(z.size()), mldiag::dtype::f32, mldiag::device::cuda(0));
    mldiag::cuda::entropy_rows(t, len, true, ws.ptr, mldiag::cuda::entropy_workspace_bytes(rows),
                               static_cast<mldiag::entropy_stats*>(out.ptr), nullptr);
    mldiag::entropy_stats got;
    REQUIRE(cudaMemcpy(&got, out.ptr, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    const auto want = mldiag::entropy_from_logits(z, len);
    CAPTURE(len);
    CHECK(got.rows == want.rows);
    CHECK(got.invalid_rows == want.invalid_rows);
    // The host's float-lane entropy of fp32 logits is within 2e-6 (1 + ln n) nats of the
    // exact value (docs/stats.md); the device's double one far closer: twice that bound.
    const double nats = 4e-6 * (1.0 + std::log(static_cast<double>(len)));
    CHECK(std::fabs(got.mean() - want.mean()) <= nats);
    CHECK(std::fabs(got.min - want.min) <= nats);
    CHECK(std::fabs(got.max - want.max) <= nats);
    CHECK(std::fabs(got.normalized_mean() - want.normalized_mean()) <= nats / std::log(static_cast<double>(len)));
  }
}

TEST_CASE("host pointers, wrong devices and a different list are clear errors") {
  std::vector<float> host(100, 1.0f);
  const mldiag::tensor_ref on_host("w", host.data(), 100, mldiag::dtype::f32, mldiag::device::cuda(0));
  CHECK_THROWS_WITH_AS(mldiag::cuda::stats_plan({on_host}), doctest::Contains("the pointer is host memory"), mldiag::error);
  device_buffer d(400);
  const mldiag::tensor_ref other("w", d.ptr, 100, mldiag::dtype::f32, mldiag::device::cuda(1));
  const mldiag::tensor_ref here("w", d.ptr, 100, mldiag::dtype::f32, mldiag::device::cuda(0));
  CHECK_THROWS_WITH_AS(mldiag::cuda::stats_plan({here, other}), doctest::Contains("but the plan is for device 0"), mldiag::error);
  mldiag::cuda::stats_plan plan({here});
  device_buffer ws(plan.workspace_bytes());
  const mldiag::tensor_ref shorter("w", d.ptr, 50, mldiag::dtype::f32, mldiag::device::cuda(0));
  CHECK_THROWS_WITH_AS(plan.compute({shorter}, ws.ptr, nullptr), doctest::Contains("differs from tensor 0"), mldiag::error);
}

TEST_CASE("readback copies results to pinned memory without blocking") {
  device_buffer d(4 * 1000);
  std::vector<float> x(1000, 2.0f);
  x[10] = NAN;
  REQUIRE(cudaMemcpy(d.ptr, x.data(), 4000, cudaMemcpyHostToDevice) == cudaSuccess);
  const mldiag::tensor_ref t("w", d.ptr, 1000, mldiag::dtype::f32, mldiag::device::cuda(0));
  mldiag::cuda::stats_plan plan({t});
  device_buffer ws(plan.workspace_bytes());
  mldiag::cuda::stats_readback readback(plan);
  CHECK(readback.latest() == nullptr);
  plan.upload(ws.ptr, nullptr);
  plan.compute(ws.ptr, nullptr);
  readback.enqueue(plan, ws.ptr, nullptr);
  readback.wait();
  REQUIRE(readback.latest() != nullptr);
  CHECK(readback.latest()[0].nan == 1);
  CHECK(readback.latest()[1].count == 1000);
  CHECK(readback.latest_any_non_finite() == 1);
}
