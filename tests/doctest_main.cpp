// SPDX-License-Identifier: Apache-2.0
// doctest's main, compiled once for every test executable.
#define DOCTEST_CONFIG_IMPLEMENT
#include "support/doctest_run.hpp"

int main(int argc, char** argv) {
  return mldiag_test::run(argc, argv);
}
