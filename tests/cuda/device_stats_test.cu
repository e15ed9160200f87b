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
#include <type_traits>
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
  // Again, over results made garbage first: bit-identical, and not left over from the first
  // compute (a merge counter not reset would leave them so).
  REQUIRE(cudaMemsetAsync(const_cast<mldiag::tensor_stats*>(plan.d_results(ws.ptr)), 0xff,
                          (plan.size() + 1) * sizeof(mldiag::tensor_stats), stream) == cudaSuccess);
  plan.compute(ws.ptr, stream);
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

// The entropy of one row of logits in long double (the reference): -inf entries masked; an
// invalid row (NaN, +Inf, nothing left) gives support 0.
struct exact_row {
  long double h = 0.0L;
  std::size_t support = 0;
};
exact_row exact_logits_row(const std::vector<double>& z) {
  long double m = -INFINITY;
  for (double v : z) {
    if (std::isnan(v) || v == INFINITY) return {};
    if (v != -INFINITY) m = std::fmax(m, static_cast<long double>(v));
  }
  exact_row r;
  long double s = 0.0L, u = 0.0L;
  for (double v : z) {
    if (v == -INFINITY) continue;
    ++r.support;
    const long double d = static_cast<long double>(v) - m, e = std::exp(d);
    s += e;
    u += d * e;
  }
  if (r.support == 0) return {};
  r.h = std::log(s) - u / s;
  return r;
}

// Rows of logits of format T with masks and invalid rows planted, as the device reads them:
// the device's row entropy against the long double one (the contract's 2e-6 (1 + ln n) nats
// for each row's entropy, so the mean, minimum and maximum too) and the host's counts.
template <class T>
void check_logit_rows(std::int64_t len, std::int64_t rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<T> z(static_cast<std::size_t>(rows * len));
  for (auto& v : z) v = T(normal(rng));
  auto at = [&](std::int64_t r, std::int64_t i) -> T& { return z[static_cast<std::size_t>(r * len + i)]; };
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r % 5 == 2) {  // causal: row r keeps its first (r mod len) + 1 keys
      for (std::int64_t i = r % len + 1; i < len; ++i) at(r, i) = T(-INFINITY);
    }
  }
  at(1, len - 1) = T(NAN);                     // row 1 invalid
  if (rows > 3) at(3, 0) = T(INFINITY);        // row 3 invalid (+Inf)
  if (rows > 4) for (std::int64_t i = 0; i < len; ++i) at(4, i) = T(-INFINITY);  // nothing left: invalid
  if (rows > 6 && len > 2) at(6, len / 2) = T(40.0f);  // one dominant key: entropy near 0
  constexpr mldiag::dtype type = std::is_same_v<T, float> ? mldiag::dtype::f32
                                 : std::is_same_v<T, mldiag::bfloat16> ? mldiag::dtype::bf16
                                                                       : mldiag::dtype::f16;
  device_buffer d(z.size() * sizeof(T)), ws(mldiag::cuda::entropy_workspace_bytes(static_cast<std::uint64_t>(rows)));
  device_buffer out(sizeof(mldiag::entropy_stats));
  REQUIRE(cudaMemcpy(d.ptr, z.data(), z.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  const mldiag::tensor_ref t("logits", d.ptr, static_cast<std::int64_t>(z.size()), type, mldiag::device::cuda(0));
  mldiag::cuda::entropy_rows(t, len, true, ws.ptr, mldiag::cuda::entropy_workspace_bytes(static_cast<std::uint64_t>(rows)),
                             static_cast<mldiag::entropy_stats*>(out.ptr), nullptr);
  mldiag::entropy_stats got;
  REQUIRE(cudaMemcpy(&got, out.ptr, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);

  long double sum = 0.0L, lo = INFINITY, hi = -INFINITY, nsum = 0.0L;
  std::uint64_t valid = 0, invalid = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(static_cast<std::size_t>(len));
    for (std::int64_t i = 0; i < len; ++i) row[static_cast<std::size_t>(i)] = static_cast<double>(static_cast<float>(at(r, i)));
    const exact_row e = exact_logits_row(row);
    if (e.support == 0) {
      ++invalid;
      continue;
    }
    ++valid;
    sum += e.h;
    lo = std::fmin(lo, e.h);
    hi = std::fmax(hi, e.h);
    nsum += e.support > 1 ? e.h / std::log(static_cast<long double>(e.support)) : 0.0L;
  }
  const auto host = mldiag::entropy_from_logits(mldiag::tensor_ref("logits", z.data(), static_cast<std::int64_t>(z.size()), type), len);
  CAPTURE(mldiag::name(type));
  CAPTURE(len);
  CHECK(got.rows == valid);
  CHECK(got.invalid_rows == invalid);
  CHECK(host.rows == valid);
  CHECK(host.invalid_rows == invalid);
  const double nats = 2e-6 * (1.0 + std::log(static_cast<double>(len)));
  CHECK(std::fabs(got.mean() - static_cast<double>(sum / valid)) <= nats);
  CHECK(std::fabs(got.min - static_cast<double>(lo)) <= nats);
  CHECK(std::fabs(got.max - static_cast<double>(hi)) <= nats);
  if (len > 1) CHECK(std::fabs(got.normalized_mean() - static_cast<double>(nsum / valid)) <= nats);
  // Host and device each within the bound: within twice it of each other.
  CHECK(std::fabs(got.mean() - host.mean()) <= 2 * nats);
}

TEST_CASE("tensors of more than 256 chunks merge in groups and match the host engine") {
  // 611 chunks (three groups, the last short), 257 (two, the second of one chunk), 256 (one):
  // with small tensors between them, so groups of different tensors interleave.
  run_list({{mldiag::dtype::bf16, 40000003}, {mldiag::dtype::f32, 7}, {mldiag::dtype::f32, 257 * 65536},
            {mldiag::dtype::f16, 256 * 65536}, {mldiag::dtype::bf16, 0}},
           11);
  run_list({{mldiag::dtype::bf16, 40000003}}, 12);
}

TEST_CASE("row entropy of logits on the device is within the contract of a long double softmax") {
  // 8, 1000, 2048, 5000: 16-byte loads (warp and block rows); 7, 1001, 4097: element by element.
  for (std::int64_t len : {1, 7, 8, 1000, 1001, 2048, 4096, 4097, 5000}) {
    const std::int64_t rows = len > 2048 ? 21 : 300;
    check_logit_rows<float>(len, rows, 5);
    check_logit_rows<mldiag::bfloat16>(len, rows, 6);
    check_logit_rows<mldiag::half>(len, rows, 7);
  }
  // More rows than the grid has warps (1024 blocks of 8): a warp adds several rows in order;
  // and more long rows than blocks.
  check_logit_rows<mldiag::bfloat16>(16, 20000, 9);
  check_logit_rows<float>(5000, 1100, 10);
}

TEST_CASE("row entropy of probabilities on the device matches a long double reference") {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (std::int64_t len : {3, 64, 4095, 6000}) {
    const std::int64_t rows = 40;
    std::vector<float> p(static_cast<std::size_t>(rows * len));
    for (std::int64_t r = 0; r < rows; ++r) {
      double total = 0.0;
      for (std::int64_t i = 0; i < len; ++i) total += p[static_cast<std::size_t>(r * len + i)] = unit(rng) * unit(rng);
      for (std::int64_t i = 0; i < len; ++i) p[static_cast<std::size_t>(r * len + i)] = static_cast<float>(p[static_cast<std::size_t>(r * len + i)] / total);
    }
    p[static_cast<std::size_t>(len)] = -0.25f;  // row 1 invalid: a negative probability
    device_buffer d(p.size() * 4), ws(mldiag::cuda::entropy_workspace_bytes(rows)), out(sizeof(mldiag::entropy_stats));
    REQUIRE(cudaMemcpy(d.ptr, p.data(), p.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    const mldiag::tensor_ref t("p", d.ptr, static_cast<std::int64_t>(p.size()), mldiag::dtype::f32, mldiag::device::cuda(0));
    mldiag::cuda::entropy_rows(t, len, false, ws.ptr, mldiag::cuda::entropy_workspace_bytes(rows),
                               static_cast<mldiag::entropy_stats*>(out.ptr), nullptr);
    mldiag::entropy_stats got;
    REQUIRE(cudaMemcpy(&got, out.ptr, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    long double sum = 0.0L;
    for (std::int64_t r = 0; r < rows; ++r) {
      if (r == 1) continue;
      long double s = 0.0L, tt = 0.0L;
      for (std::int64_t i = 0; i < len; ++i) {
        const long double x = p[static_cast<std::size_t>(r * len + i)];
        if (x > 0.0L) {
          s += x;
          tt += x * std::log(x);
        }
      }
      sum += std::log(s) - tt / s;
    }
    CAPTURE(len);
    CHECK(got.rows == static_cast<std::uint64_t>(rows - 1));
    CHECK(got.invalid_rows == 1);
    CHECK(std::fabs(got.mean() - static_cast<double>(sum / (rows - 1))) <= 1e-9 * (1.0 + std::log(static_cast<double>(len))));
  }
}

TEST_CASE("no rows: empty statistics, nothing launched over the data") {
  device_buffer out(sizeof(mldiag::entropy_stats));
  const mldiag::tensor_ref t("logits", out.ptr, 0, mldiag::dtype::bf16, mldiag::device::cuda(0));
  mldiag::cuda::entropy_rows(t, 16, true, nullptr, 0, static_cast<mldiag::entropy_stats*>(out.ptr), nullptr);
  mldiag::entropy_stats got;
  got.rows = 99;
  REQUIRE(cudaMemcpy(&got, out.ptr, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got == mldiag::entropy_stats{});
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

// A tensor whose value is the step, so each copy says which step it holds.
void fill_step(const device_buffer& d, int step, cudaStream_t stream) {
  static std::vector<float> host(1000);  // pinned or not, the copy is stream-ordered
  for (auto& v : host) v = static_cast<float>(step);
  REQUIRE(cudaMemcpyAsync(d.ptr, host.data(), 4000, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);  // the host buffer is reused next step
}

TEST_CASE("readback hands over each step once, in order, and counts what a full ring drops") {
  device_buffer d(4 * 1000);
  const mldiag::tensor_ref t("w", d.ptr, 1000, mldiag::dtype::f32, mldiag::device::cuda(0));
  mldiag::cuda::stats_plan plan({t});
  device_buffer ws(plan.workspace_bytes());
  plan.upload(ws.ptr, nullptr);
  CHECK_THROWS_WITH_AS(mldiag::cuda::stats_readback(plan, 1), doctest::Contains("give at least 2"), mldiag::error);

  SUBCASE("nothing read while six steps are enqueued: the last four come out, two dropped") {
    mldiag::cuda::stats_readback readback(plan, 4);
    CHECK_FALSE(readback.next());
    for (int step = 0; step < 6; ++step) {
      fill_step(d, step, nullptr);
      plan.compute(ws.ptr, nullptr);
      readback.enqueue(plan, ws.ptr, nullptr, 100 + step);
    }
    CHECK(readback.pending() == 4);
    CHECK(readback.dropped() == 2);
    readback.wait();
    for (int step = 2; step < 6; ++step) {
      const auto r = readback.next();
      REQUIRE(r);
      CHECK(r.step == 100 + step);
      CHECK(r.stats[0].max == static_cast<double>(step));
      CHECK(r.stats[0].count == 1000);
      CHECK(r.any_non_finite == 0);
    }
    CHECK_FALSE(readback.next());
    CHECK(readback.pending() == 0);
  }
  SUBCASE("waiting for the oldest when the ring is full loses nothing") {
    mldiag::cuda::stats_readback readback(plan, 2);
    std::vector<std::int64_t> seen;
    for (int step = 0; step < 9; ++step) {
      fill_step(d, step, nullptr);
      plan.compute(ws.ptr, nullptr);
      readback.enqueue(plan, ws.ptr, nullptr);  // default tag: the enqueue's number
      if (readback.pending() == readback.slots()) readback.wait_oldest();
      while (const auto r = readback.next()) {
        CHECK(r.stats[0].max == static_cast<double>(r.step));
        seen.push_back(r.step);
      }
    }
    readback.wait();
    while (const auto r = readback.next()) seen.push_back(r.step);
    CHECK(readback.dropped() == 0);
    CHECK(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  }
}
