// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: this Eigen expression has no direct memory access
#include <mldiag/adapters/eigen.hpp>
#include <mldiag/stats/compute.hpp>

int main() {
  const Eigen::MatrixXf a = Eigen::MatrixXf::Ones(3, 3), b = Eigen::MatrixXf::Ones(3, 3);
#ifdef MLDIAG_BAD
  const auto s = mldiag::compute_stats(a + b);
#else
  const auto s = mldiag::compute_stats(Eigen::MatrixXf(a + b));
#endif
  return static_cast<int>(s.count);
}
