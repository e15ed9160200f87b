// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: this range is not contiguous; wrap its memory in mldiag::strided_view
#include <mldiag/stats/compute.hpp>

#include <list>
#include <vector>

int main() {
#ifdef MLDIAG_BAD
  const std::list<float> x = {1.0f, 2.0f};
#else
  const std::vector<float> x = {1.0f, 2.0f};
#endif
  return static_cast<int>(mldiag::compute_stats(x).count);
}
