// SPDX-License-Identifier: Apache-2.0
// probabilities_as_logits: a loss input that lies in [0, 1].
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/probabilities_as_logits.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("probabilities_as_logits fires when the loss input lies in [0 1]") {
  std::vector<float> logits(40), probs(40);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(i % 7) - 3.0f;
    probs[i] = 0.025f;
  }
  mldiag::detectors::probabilities_as_logits d;
  CHECK(run(d, 50, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::activation, "logits", logits); }).empty());
  mldiag::detectors::probabilities_as_logits other;  // a tensor not named logits is not read
  CHECK(run(other, 50, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::activation, "gate", probs); }).empty());
  mldiag::detectors::probabilities_as_logits bad;
  const auto f = run(bad, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::activation, "head.logits", step >= 10 ? probs : logits);
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 10);
  CHECK(f.front().last_step == 12);  // three steps in a row
  CHECK(f.front().where.front().first == "act/head.logits");
}
