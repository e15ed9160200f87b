// SPDX-License-Identifier: Apache-2.0
// frozen_parameters: parameters that stop changing.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/frozen_parameters.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("frozen_parameters reads parameters: unchanged for three snapshots from the step they stopped") {
  std::vector<float> w(64, 0.5f);
  mldiag::detectors::frozen_parameters d;
  const auto f = run(d, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    if (step < 20) w[static_cast<std::size_t>(step)] += 0.01f;  // changes until step 20
    r.observe(mldiag::role::parameter, "layers.0.w", w);
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 21);  // unchanged at 20 and 21: three equal snapshots from 19
}

TEST_CASE("frozen_parameters: a tensor that changes every step, or one that no gradient asks to move, is not frozen") {
  std::vector<float> w(64, 0.5f);
  mldiag::detectors::frozen_parameters d;
  CHECK(run(d, 50, [&](int step, mldiag::recorder& r, double&, double&) {
          w[static_cast<std::size_t>(step % 64)] += 0.01f;
          r.observe(mldiag::role::parameter, "layers.0.w", w);  // the run's gradient has this name
        }).empty());
  // Unchanged for 50 steps, but no gradient of its name is recorded: nothing asked it to move.
  const std::vector<float> still(64, 0.5f);
  mldiag::detectors::frozen_parameters e;
  CHECK(run(e, 50, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::parameter, "norm.bias", still); }).empty());
  // The same tensor under the gradient's name is frozen: found at the third equal snapshot.
  mldiag::detectors::frozen_parameters f;
  const auto found = run(f, 50, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::parameter, "layers.0.w", still); });
  REQUIRE(found.size() == 1);
  CHECK(found[0].first_step == 2);
  CHECK(found[0].where.front().first == "param/layers.0.w");
  CHECK(found[0].severity == mldiag::severity::warning);  // held for its `steps` (3)
}
