// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: record a baseline before asking for fixes (phase 1: evidence)
#include <mldiag/protocol/diagnosis.hpp>

int main() {
  auto dx = mldiag::protocol::diagnose(mldiag::question::convergence);
#ifdef MLDIAG_BAD
  dx.fixes();
#else
  (void)dx.log();
#endif
}
