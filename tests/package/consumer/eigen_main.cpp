// SPDX-License-Identifier: Apache-2.0
// mldiag::eigen brings Eigen's include directory and mldiag's with it.
#include <mldiag/stats/compute.hpp>

#include <Eigen/Core>

#include <span>

int main() {
  Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(12, 1.0f, 12.0f);
  const auto s =
      mldiag::compute_stats(std::span<const float>(v.data(), static_cast<std::size_t>(v.size())));
  return s.count == 12 ? 0 : 1;
}
