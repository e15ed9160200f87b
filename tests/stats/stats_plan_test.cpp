// SPDX-License-Identifier: Apache-2.0
// stats_plan: many tensors of mixed sizes and dtypes, any number of threads, same bits.
#include <doctest/doctest.h>

#include "mldiag/stats/stats_plan.hpp"

#include "../support/count_allocations.hpp"
#include "../support/reference.hpp"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace {

// A list shaped like a transformer's gradients: embeddings, per-layer matrices and vectors,
// in four dtypes, 1 KiB to a few MiB, plus an empty tensor.
struct model_grads {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<mldiag::bfloat16>> bf16;
  std::vector<std::vector<mldiag::half>> f16;
  std::vector<std::vector<double>> f64;
  std::vector<std::string> names;
  std::vector<mldiag::tensor_ref> refs;

  explicit model_grads(int layers) {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> normal(0.0, 1e-2);
    const std::size_t shapes[] = {256, 1024, 4096, 65536, 65537, 131072 + 5, 300000};
    int k = 0;
    for (int l = 0; l < layers; ++l) {
      for (std::size_t n : shapes) {
        const int kind = k++ % 4;
        names.push_back("layers." + std::to_string(l) + ".p" + std::to_string(k));
        if (kind == 0) {
          auto& v = f32.emplace_back(n);
          for (auto& e : v) e = static_cast<float>(normal(rng));
        } else if (kind == 1) {
          auto& v = bf16.emplace_back(n);
          for (auto& e : v) e = mldiag::bfloat16(normal(rng));
        } else if (kind == 2) {
          auto& v = f16.emplace_back(n);
          for (auto& e : v) e = mldiag::half(normal(rng));
        } else {
          auto& v = f64.emplace_back(n);
          for (auto& e : v) e = normal(rng);
        }
      }
    }
    f32.front()[17] = std::numeric_limits<float>::quiet_NaN();  // one bad gradient
    names.push_back("empty");
    std::size_t i32 = 0, ib = 0, ih = 0, i64 = 0, name = 0;
    for (int l = 0, kk = 0; l < layers; ++l) {
      for (std::size_t s = 0; s < std::size(shapes); ++s, ++kk) {
        const auto& nm = names[name++];
        switch (kk % 4) {
          case 0: refs.emplace_back(nm, std::span<const float>(f32[i32++])); break;
          case 1: refs.emplace_back(nm, std::span<const mldiag::bfloat16>(bf16[ib++])); break;
          case 2: refs.emplace_back(nm, std::span<const mldiag::half>(f16[ih++])); break;
          default: refs.emplace_back(nm, std::span<const double>(f64[i64++])); break;
        }
      }
    }
    refs.emplace_back(names[name], nullptr, 0, mldiag::dtype::f32);
  }
};

}  // namespace

TEST_CASE("every tensor and the total are bit-identical on 1 2 and 8 threads and run to run") {
  const model_grads g(6);  // 43 tensors, about 3.5 M elements
  mldiag::stats_plan plan(g.refs);
  REQUIRE(plan.size() == g.refs.size());

  std::vector<mldiag::tensor_stats> first;
  mldiag::tensor_stats first_total;
  for (unsigned threads : {1u, 2u, 8u}) {
    mldiag::host_engine engine(threads);
    for (int run = 0; run < 2; ++run) {
      plan.compute(engine);
      if (first.empty()) {
        first.assign(plan.per_tensor().begin(), plan.per_tensor().end());
        first_total = plan.total();
        continue;
      }
      CAPTURE(threads);
      for (std::size_t i = 0; i < plan.size(); ++i) CHECK(plan[i] == first[i]);
      CHECK(plan.total() == first_total);
    }
  }
}

TEST_CASE("each tensor in the plan equals compute_stats alone and the reference") {
  const model_grads g(3);
  mldiag::stats_plan plan(g.refs);
  mldiag::host_engine engine(2);
  plan.compute(engine);
  mldiag::tensor_stats merged;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    CAPTURE(plan.name(i));
    CHECK(plan[i] == mldiag::compute_stats(g.refs[i]));
    merged.merge(plan[i]);
  }
  CHECK(plan.total() == merged);
  CHECK(plan.total().nan == 1);
  CHECK(plan[0].nan == 1);
  CHECK(plan.name(plan.size() - 1) == "empty");
  CHECK(plan[plan.size() - 1].empty());
  // The global L2 norm against long double over every finite value.
  long double sum_sq = 0;
  for (const auto& v : g.f32)
    for (float e : v)
      if (std::isfinite(e)) sum_sq += static_cast<long double>(e) * e;
  for (const auto& v : g.bf16)
    for (auto e : v) sum_sq += static_cast<long double>(static_cast<double>(e)) * static_cast<double>(e);
  for (const auto& v : g.f16)
    for (auto e : v) sum_sq += static_cast<long double>(static_cast<double>(e)) * static_cast<double>(e);
  for (const auto& v : g.f64)
    for (double e : v) sum_sq += static_cast<long double>(e) * e;
  // fp32, bf16 and fp16 tensors in the list: the 1e-6 contract of docs/stats.md.
  CHECK(mldiag_test::relative_error(plan.total().l2_norm(), std::sqrt(sum_sq)) < 1e-6);
}

TEST_CASE("compute allocates nothing once the plan and engine exist") {
  const model_grads g(2);
  mldiag::stats_plan plan(g.refs);
  mldiag::host_engine engine(2);
  plan.compute(engine);  // warm
  const auto before = mldiag_test::allocations();
  for (int i = 0; i < 5; ++i) plan.compute(engine);
  CHECK(mldiag_test::allocations() == before);
}

TEST_CASE("the plan keeps its own copy of the names and rebind points a tensor at new memory") {
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  std::string name = "w";
  mldiag::stats_plan plan({mldiag::tensor_ref(name, std::span<const float>(a))});
  name = "overwritten";
  mldiag::host_engine engine(1);
  plan.compute(engine);
  CHECK(plan.name(0) == "w");
  CHECK(plan[0].mean() == 1.0);
  plan.rebind(0, b.data());
  plan.compute(engine);
  CHECK(plan[0].mean() == 2.0);
  CHECK_THROWS_WITH_AS(plan.rebind(0, nullptr), doctest::Contains("mldiag: tensor_ref 'w': null pointer"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(plan.rebind(3, b.data()), doctest::Contains("mldiag: stats_plan::rebind: index 3"),
                       mldiag::error);
}

TEST_CASE("the chunk table uses 64-bit offsets for tensors above 2^32 elements") {
  // No memory is read: the plan only cuts the tensor into units.
  const auto* fake = reinterpret_cast<const void*>(std::uintptr_t{1} << 20);
  const std::int64_t n = (std::int64_t{1} << 33) + 5;
  mldiag::stats_plan plan({mldiag::tensor_ref("huge", fake, n, mldiag::dtype::bf16)});
  const std::uint64_t units = (static_cast<std::uint64_t>(n) + 65535) / 65536;
  CHECK(plan.unit_count() == units);
  CHECK(plan.tensor(0).numel() == static_cast<std::uint64_t>(n));
}

TEST_CASE("a host_engine with no threads is refused") {
  CHECK_THROWS_WITH_AS(mldiag::host_engine(0), doctest::Contains("mldiag: host_engine: 0 threads"),
                       mldiag::error);
}
