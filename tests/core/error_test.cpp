// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include "mldiag/core/error.hpp"

#include <string>

TEST_CASE("error messages start with 'mldiag: ' and keep the caller's text") {
  const mldiag::error e("compute_stats: null pointer with a non-zero size");
  const std::string what = e.what();
  CHECK(what == "mldiag: compute_stats: null pointer with a non-zero size");
  CHECK(what.rfind("mldiag: ", 0) == 0);
}

TEST_CASE("error is catchable as std::invalid_argument") {
  bool caught = false;
  try {
    throw mldiag::error("x");
  } catch (const std::invalid_argument& e) {
    caught = std::string(e.what()) == "mldiag: x";
  }
  CHECK(caught);
}
