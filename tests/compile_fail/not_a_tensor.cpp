// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: not a tensor; pass a contiguous range
#include <mldiag/stats/compute.hpp>

#include <vector>

int main() {
#ifdef MLDIAG_BAD
  const int x = 42;
#else
  const std::vector<float> x = {42.0f};
#endif
  return static_cast<int>(mldiag::compute_stats(x).count);
}
