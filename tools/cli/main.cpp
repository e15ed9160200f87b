// SPDX-License-Identifier: Apache-2.0
// The mldiag command-line tool (skeleton; the commands land with issue 8).
#include <cstdio>
int main() {
  std::fputs("mldiag: not built yet\n", stderr);
  return 2;
}
