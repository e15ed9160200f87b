// SPDX-License-Identifier: Apache-2.0
// Detectors made of detectors: after_warmup, sustained, per_tensor, any_of and static_set
// behave as documented.
#include <doctest/doctest.h>

#include "mldiag/detectors/combinators.hpp"
#include "mldiag/detectors/convergence/non_finite.hpp"
#include "mldiag/detectors/convergence/tensor_norm_jump.hpp"
#include "mldiag/detectors/early_anomaly/loss_spike.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "support.hpp"

#include <cmath>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("combinators: after_warmup drops early findings and sustained needs a run") {
  using namespace mldiag::detectors;
  after_warmup<non_finite> w(50, non_finite{});
  const auto f = run(w, 100, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 10 || step == 60) loss = NAN; });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 60);
  sustained<non_finite> s(3, non_finite{});
  const auto g = run(s, 100, [](int step, mldiag::recorder&, double& loss, double&) {
    if (step == 10 || step == 11 || (step >= 40 && step < 45)) loss = NAN;
  });
  REQUIRE(g.size() == 3);  // steps 42, 43, 44 of the run that began at 40
  CHECK(g.front().first_step == 40);
  CHECK(g.front().last_step == 42);
  any_of<non_finite, non_finite> once(non_finite{}, non_finite{});
  CHECK(run(once, 30, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 5) loss = NAN; }).size() == 1);
  static_set<non_finite, loss_spike> both(non_finite{}, loss_spike{});
  CHECK(run(both, 30, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 5) loss = NAN; }).size() == 1);
}

TEST_CASE("per_tensor gives each tensor its own state and names the one that jumped") {
  using namespace mldiag::detectors;
  per_tensor<tensor_norm_jump> d(mldiag::role::gradient, tensor_norm_jump{});
  std::vector<float> calm(64, 0.01f), wild(64, 1.0f);
  const auto f = run(d, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::gradient, "layers.5.mlp", step >= 70 ? wild : calm);  // 100x from step 70
  });
  REQUIRE(f.size() == 1);  // "layers.0.w" (the run's own gradient) stays calm
  CHECK(f.front().first_step == 70);
  CHECK(f.front().where.front().first == "layers.5.mlp");
}

TEST_CASE("static_set observes every detector in order and any_of keeps the first that fired") {
  using namespace mldiag::detectors;
  // A NaN loss at step 5: non_finite reports it; with a loss of 1e8 at step 20 loss_spike
  // reports that (a 10^8x jump is critical at once). Both sets see both steps.
  const auto fault = [](int step, mldiag::recorder&, double& loss, double&) {
    if (step == 5) loss = NAN;
    if (step == 20) loss = 1e8;
  };
  static_set<non_finite, loss_spike> both(non_finite{}, loss_spike{});
  const auto f = run(both, 30, fault);
  REQUIRE(f.size() == 2);
  CHECK(f[0].detector == "non_finite");
  CHECK(f[0].first_step == 5);
  CHECK(f[1].detector == "loss_spike");
  CHECK(f[1].first_step == 20);
  // any_of in the other order: at step 20 loss_spike fires first; at step 5 only non_finite does.
  any_of<loss_spike, non_finite> first(loss_spike{}, non_finite{});
  const auto g = run(first, 30, fault);
  REQUIRE(g.size() == 2);
  CHECK(g[0].detector == "non_finite");
  CHECK(g[1].detector == "loss_spike");
}
