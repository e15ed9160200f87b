// SPDX-License-Identifier: Apache-2.0
// expect: mldiag: a hypothesis changes exactly one variable; split it and test one change at a time
#include <mldiag/protocol/diagnosis.hpp>

int main() {
#ifdef MLDIAG_BAD
  mldiag::protocol::hypothesis h{"lr too high", "oscillation", {"learning_rate", 1.0, 0.1}, {"batch_size", 32, 64}};
#else
  mldiag::protocol::hypothesis h{"lr too high", "oscillation", {"learning_rate", 1.0, 0.1}};
#endif
  return h.cause.empty() ? 1 : 0;
}
