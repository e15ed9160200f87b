// SPDX-License-Identifier: Apache-2.0
// A consumer of mldiag::compiled: the monitor with its registry compiled once into this
// program (its source comes with the package). A planted NaN must be found.
#include <mldiag/monitor.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#ifndef MLDIAG_COMPILED
#error "mldiag::compiled did not define MLDIAG_COMPILED"
#endif

int main() {
  mldiag::monitor mon({.task = {.classes = 10}});
  std::vector<float> g(256, 0.01f);
  bool found = false;
  for (int step = 0; step < 20; ++step) {
    if (step == 10) g[7] = std::nanf("");
    mon.observe(mldiag::scalar::loss, 2.3 - 0.01 * step);
    mon.observe(mldiag::role::gradient, "fc.weight", g);
    for (const auto& f : mon.end_step()) found = found || f.symptom == mldiag::symptoms::non_finite_tensors;
  }
  std::printf("consumer_monitor: non-finite gradient %s\n", found ? "found" : "missed");
  return found ? 0 : 1;
}
