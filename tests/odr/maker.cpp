// SPDX-License-Identifier: Apache-2.0
// One side of a program: builds mldiag values and hands them to a function the other side
// defines (odr/check.cmake compiles the two sides with the same or different configurations).
#include "mldiag/stats/tensor_stats.hpp"
#include "mldiag/vocab/finding.hpp"

#include <cstdio>

double read_elsewhere(const mldiag::tensor_stats& s, const mldiag::finding& f);

int main() {
  mldiag::tensor_stats s{};
  s.count = 3;
  mldiag::finding f{};
  f.last_step = 7;
  const double got = read_elsewhere(s, f);
  std::printf("read %.0f\n", got);
  return got == 10.0 ? 0 : 1;  // 3 + 7: the other side read the same layout
}
