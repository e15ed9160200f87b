// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: there is nothing to verify yet; evidence comes first, then pattern, hypothesis and fix
#include <mldiag/protocol/diagnosis.hpp>

int main() {
  auto dx = mldiag::protocol::diagnose(mldiag::question::convergence);
  mldiag::protocol::evidence_summary after;
#ifdef MLDIAG_BAD
  dx.verify(after);  // skipping from phase 1 to phase 4
#else
  after.obvious.no_nan_inf = mldiag::protocol::obvious_checks::result::passed;
  auto pattern = std::move(dx).with_baseline(after);
  (void)pattern.candidates();
#endif
}
