// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: three attempts failed (hypotheses rejected or fixes not verified); stop tweaking parameters
#include <mldiag/protocol/diagnosis.hpp>

// Two rejected hypotheses and a fix that did not verify are three strikes: the way back to
// phase 2 keeps them, so a fourth tweak does not compile.
#ifdef MLDIAG_BAD
void after_failed_fix(mldiag::protocol::fix_phase<2>&& fix, const mldiag::protocol::evidence_summary& after) {
#else
void after_failed_fix(mldiag::protocol::fix_phase<1>&& fix, const mldiag::protocol::evidence_summary& after) {
#endif
  auto verified = std::move(fix).verify(after);
  if (!verified.was_better()) {
    auto back = std::move(verified).not_better();
    (void)std::move(back).propose({"momentum missing", "-", {"momentum", 0.0, 0.9}});
  }
}

int main() {}
