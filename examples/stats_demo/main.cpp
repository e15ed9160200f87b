// SPDX-License-Identifier: Apache-2.0
// The statistics of a tensor, the evidence every mldiag diagnosis starts from.
// (Until the flagship training demo lands, this is the program the README's first command runs.)
#include "mldiag/stats/compute.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace {

void print(const char* name, const mldiag::tensor_stats& s) {
  std::printf("%s\n", name);
  std::printf("  count %llu  finite %llu  nan %llu  +inf %llu  -inf %llu  zeros %llu\n",
              static_cast<unsigned long long>(s.count), static_cast<unsigned long long>(s.finite()),
              static_cast<unsigned long long>(s.nan), static_cast<unsigned long long>(s.pos_inf),
              static_cast<unsigned long long>(s.neg_inf), static_cast<unsigned long long>(s.zeros));
  std::printf("  min %.7g  max %.7g  max_abs %.7g\n", s.min, s.max, s.max_abs);
  std::printf("  mean %.7g  std %.7g  l2_norm %.10g  rms %.7g\n\n", s.mean(), s.stddev(), s.l2_norm(),
              s.rms());
}

}  // namespace

int main() {
  // 1..12: the L2 norm is sqrt(650) = 25.495097568, a value anyone can check by hand.
  std::vector<float> ramp(12);
  for (int i = 0; i < 12; ++i)
    ramp[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
  print("ramp 1..12 (fp32)", mldiag::compute_stats(std::span<const float>(ramp)));

  // A gradient-like tensor of one million values with a NaN and an Inf planted: the counts
  // say so, and the norm still describes the finite values instead of turning into NaN.
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> grad(1u << 20);
  for (auto& g : grad)
    g = normal(rng);
  grad[1234] = std::numeric_limits<float>::quiet_NaN();
  grad[98765] = std::numeric_limits<float>::infinity();
  grad[5] = 0.0f;
  print("gradient, N(0, 1e-3), one NaN and one +Inf planted (fp32)",
        mldiag::compute_stats(std::span<const float>(grad)));
  return 0;
}
