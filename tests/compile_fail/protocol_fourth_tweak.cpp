// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: three attempts failed (hypotheses rejected or fixes not verified); stop tweaking parameters and question the fundamentals
#include <mldiag/protocol/diagnosis.hpp>

#include <string>

// An escalated diagnosis (three hypotheses rejected) offers no fourth tweak.
void after_three_strikes(const mldiag::protocol::escalated& e) {
#ifdef MLDIAG_BAD
  e.propose({"momentum missing", "-", {"momentum", 0.0, 0.9}});
#else
  (void)std::string(e.message());
#endif
}

int main() {}
