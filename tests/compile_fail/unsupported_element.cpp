// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: unsupported element type; mldiag reads double, float, mldiag::half
#include <mldiag/stats/compute.hpp>

#include <vector>

int main() {
#ifdef MLDIAG_BAD
  const std::vector<int> x = {1, 2};
#else
  const std::vector<double> x = {1, 2};
#endif
  return static_cast<int>(mldiag::compute_stats(x).count);
}
