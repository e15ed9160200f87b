// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: not a tensor; pass a contiguous range
#include <mldiag/monitor.hpp>

#include <vector>

int main() {
#ifdef MLDIAG_BAD
  const int x = 42;
#else
  const std::vector<float> x = {42.0f};
#endif
  mldiag::monitor mon;
  mon.observe(mldiag::scalar::loss, 1.0);
  mon.observe(mldiag::role::gradient, "w", x);
  return static_cast<int>(mon.end_step().size());
}
