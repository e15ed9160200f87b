// SPDX-License-Identifier: Apache-2.0
#include <mldiag/stats/compute.hpp>
#include <mldiag/version.hpp>

#include <cstdio>
#include <span>
#include <vector>

int main() {
  static_assert(mldiag::version >= 100, "mldiag 0.1 or later");
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const auto s = mldiag::compute_stats(std::span<const float>(x));
  std::printf("l2_norm=%.9f\n", s.l2_norm());
  return s.count == 12 ? 0 : 1;
}
