// SPDX-License-Identifier: Apache-2.0
// saturation: tanh and sigmoid outputs at their bounds, read from tensors named by tag.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/saturation.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("saturation reads tanh and sigmoid outputs and names the saturated one") {
  std::vector<float> tanh_out(1000), sig(1000), fine(1000, 0.3f);
  for (std::size_t i = 0; i < 1000; ++i) {
    tanh_out[i] = i % 20 == 0 ? 0.1f : (i % 2 ? 0.999f : -0.999f);  // 95% saturated: the bound says >= 73%
    sig[i] = i % 2 ? 0.999f : 0.001f;
  }
  mldiag::detectors::saturation s;
  const auto g = run(s, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::activation, "rnn.tanh", step >= 10 ? tanh_out : fine);
    r.observe(mldiag::role::activation, "gate.sigmoid", fine);
  });
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 10);
  CHECK(g.front().where.front().first == "act/rnn.tanh");
  mldiag::detectors::saturation sg;
  const auto h = run(sg, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::activation, "gate.sigmoid", step >= 5 ? sig : fine);
  });
  REQUIRE(h.size() == 1);
  CHECK(h.front().first_step == 5);
}
