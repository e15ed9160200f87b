// SPDX-License-Identifier: Apache-2.0
// Compiled with -ffast-math (its own executable, so no inline function compiled with it is
// shared with the other tests). Classification is by bits, so the counts stay exact; the
// expected values are known by construction (std::isnan cannot be trusted here).
#include <doctest/doctest.h>

#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/stats_plan.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#ifndef __FAST_MATH__
#error "this test must be compiled with -ffast-math"
#endif

TEST_CASE("under fast-math NaN and Inf are still counted and kept out of the moments") {
  std::vector<float> x(10000, 2.0f);
  const std::uint32_t nan_bits[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fffffffu};
  for (std::size_t i = 0; i < 4; ++i) x[100 + i * 997] = std::bit_cast<float>(nan_bits[i]);
  x[7] = std::bit_cast<float>(0x7f800000u);  // +inf
  x[9999] = std::bit_cast<float>(0xff800000u);  // -inf
  x[5000] = 0.0f;
  x[5001] = std::bit_cast<float>(1u);  // a denormal, not a zero
  const auto s = mldiag::compute_stats(x);
  CHECK(s.nan == 4);
  CHECK(s.pos_inf == 1);
  CHECK(s.neg_inf == 1);
  CHECK(s.zeros == 1);
  CHECK(s.finite() == 9994);
  CHECK(s.max == 2.0);
  CHECK(s.min == 0.0);
  // 9992 twos, one zero, one denormal: sqrt(9992 * 4) to within the denormal.
  CHECK(s.l2_norm() == doctest::Approx(std::sqrt(9992.0 * 4.0)).epsilon(1e-14));

  std::vector<mldiag::bfloat16> b(3000, mldiag::bfloat16::from_bits(0x3f80));  // 1.0
  b[1] = mldiag::bfloat16::from_bits(0x7fc0);
  b[2] = mldiag::bfloat16::from_bits(0xff80);
  mldiag::stats_plan plan({mldiag::tensor_ref("b", std::span<const mldiag::bfloat16>(b))});
  mldiag::host_engine engine(2);
  plan.compute(engine);
  CHECK(plan[0].nan == 1);
  CHECK(plan[0].neg_inf == 1);
  CHECK(plan[0].l2_norm() == doctest::Approx(std::sqrt(2998.0)).epsilon(1e-14));
}
