// SPDX-License-Identifier: Apache-2.0
// expect: is private within this context
#include <mldiag/protocol/diagnosis.hpp>

#include <memory>

// No phase can be made from a state by hand: fixes without evidence do not compile.
int main() {
#ifdef MLDIAG_BAD
  mldiag::protocol::fix_phase<0> f(std::make_unique<mldiag::protocol::detail::diagnosis_state>());
  (void)f.fixes();
#else
  mldiag::protocol::evidence_summary baseline;
  baseline.obvious.no_nan_inf = mldiag::protocol::obvious_checks::result::passed;
  auto pattern = mldiag::protocol::diagnose(mldiag::question::convergence).with_baseline(baseline);
  auto test = std::move(pattern).propose({"learning rate too high", "-", {"learning_rate", 1.0, 0.1}});
  auto outcome = std::move(test).conclude(baseline);
  if (outcome.was_confirmed()) (void)std::move(outcome).confirmed().fixes();
#endif
}
