// SPDX-License-Identifier: Apache-2.0
// update_stats: the statistics of current - previous and previous = current in one pass,
// against compute_stats of the difference formed separately (bit for bit for float and
// double) and a long double reference (bf16 and fp16, whose difference is formed exactly).
#include <doctest/doctest.h>

#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/host_isa.hpp"
#include "mldiag/stats/update.hpp"

#include "../support/reference.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, sd);
  std::vector<T> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(static_cast<T>(normal(rng)));
  return x;
}
}  // namespace

TEST_CASE_TEMPLATE("update_stats equals compute_stats of the difference, bit for bit, and keeps the value", T, float,
                   double) {
  for (std::size_t n : {0, 1, 15, 4095, 4097, 65536, 65537, 200003}) {
    CAPTURE(n);
    auto previous = random_values<T>(n, n + 1, 1.0), current = previous;
    const auto step = random_values<T>(n, n + 2, 1e-3);
    for (std::size_t i = 0; i < n; ++i) current[i] += step[i];
    if (n > 100) current[99] = std::numeric_limits<T>::quiet_NaN();  // a NaN update is evidence
    std::vector<T> difference(n);
    for (std::size_t i = 0; i < n; ++i) difference[i] = current[i] - previous[i];
    const auto got = mldiag::update_stats(std::span<T>(previous), std::span<const T>(current));
    CHECK(got == mldiag::compute_stats(difference));
    CHECK(got.nan == (n > 100 ? 1u : 0u));
    bool same = true;
    for (std::size_t i = 0; i < n; ++i) same = same && std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(previous[i]) ==
                                                           std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(current[i]);
    CHECK(same);
  }
}

TEST_CASE_TEMPLATE("update_stats of narrow parameters is the exact difference within the contract", T, mldiag::bfloat16,
                   mldiag::half) {
  const std::size_t n = 70001;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> previous, current;
  std::vector<double> exact;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = normal(rng);
    previous.emplace_back(p);
    current.emplace_back(p + 0.01 * normal(rng));
    exact.push_back(static_cast<double>(static_cast<float>(current.back())) - static_cast<double>(static_cast<float>(previous.back())));
  }
  const auto kept = current;
  const auto got = mldiag::update_stats(std::span<T>(previous), std::span<const T>(current));
  mldiag_test::check_against(got, mldiag_test::reference_of(std::span<const double>(exact)), 1e-6);
  CHECK(std::memcmp(previous.data(), kept.data(), n * sizeof(T)) == 0);
}

TEST_CASE_TEMPLATE("parameter_and_update_stats equals compute_stats and update_stats, bit for bit, on every ISA", T,
                   float, double, mldiag::bfloat16, mldiag::half) {
  for (const mldiag::host_isa isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(mldiag::host_isa_name(isa));
    for (std::size_t n : {0, 1, 17, 4095, 4097, 65536, 65537, 140001}) {
      CAPTURE(n);
      std::mt19937_64 rng(n + 7);
      std::normal_distribution<double> normal(0.0, 1.0);
      std::vector<T> previous, current;
      for (std::size_t i = 0; i < n; ++i) {
        const double p = normal(rng);
        previous.push_back(static_cast<T>(p));
        current.push_back(static_cast<T>(p + 0.01 * normal(rng)));
      }
      if (n > 5000) {  // non-finite values are evidence in both results
        current[4099] = static_cast<T>(std::numeric_limits<float>::infinity());
        previous[70] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
      }
      auto previous_two = previous;
      const auto got = mldiag::parameter_and_update_stats(std::span<T>(previous), std::span<const T>(current));
      CHECK(got.parameter == mldiag::compute_stats(std::span<const T>(current)));
      CHECK(got.update == mldiag::update_stats(std::span<T>(previous_two), std::span<const T>(current)));
      CHECK((n == 0 || std::memcmp(previous.data(), current.data(), n * sizeof(T)) == 0));  // memcmp of null: UB
      if (n > 5000) {
        CHECK(got.parameter.pos_inf == 1);
        CHECK(got.update.nan == 1);
        CHECK(got.update.pos_inf == 1);
      }
    }
  }
  mldiag::select_host_isa(mldiag::detail::detect_host_isa());
}

TEST_CASE("the update's difference is the same on every ISA, bit for bit (float)") {
  // The vector subtraction in each width rounds like the scalar one: an independent reference
  // is the difference formed element by element here.
  const std::size_t n = 9000;
  auto previous = random_values<float>(n, 11, 1.0), current = previous;
  const auto step = random_values<float>(n, 12, 1e-2);
  for (std::size_t i = 0; i < n; ++i) current[i] += step[i];
  std::vector<float> difference(n);
  for (std::size_t i = 0; i < n; ++i) difference[i] = current[i] - previous[i];
  for (const mldiag::host_isa isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(mldiag::host_isa_name(isa));
    auto kept = previous;
    CHECK(mldiag::update_stats(std::span<float>(kept), std::span<const float>(current)) ==
          mldiag::compute_stats(difference));
  }
  mldiag::select_host_isa(mldiag::detail::detect_host_isa());
}

TEST_CASE("update_stats refuses buffers of different sizes with a message") {
  std::vector<float> previous(10), current(11);
  try {
    (void)mldiag::update_stats(std::span<float>(previous), std::span<const float>(current));
    FAIL("no error");
  } catch (const mldiag::error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("mldiag: update_stats:", 0) == 0);
    CHECK(what.find("10") != std::string::npos);
  }
}
