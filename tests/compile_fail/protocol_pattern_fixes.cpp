// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: fixes come in phase 4; propose a hypothesis and confirm it first (phase 2: pattern)
#include <mldiag/protocol/diagnosis.hpp>

int main() {
  mldiag::protocol::evidence_summary baseline;
  baseline.obvious.no_nan_inf = mldiag::protocol::obvious_checks::result::passed;
  auto pattern = mldiag::protocol::diagnose(mldiag::question::convergence).with_baseline(baseline);
#ifdef MLDIAG_BAD
  pattern.fixes();
#else
  (void)pattern.where();
#endif
}
