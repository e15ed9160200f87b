// SPDX-License-Identifier: Apache-2.0
// residual_write_ratio: a block that writes more into the residual stream than it carries.
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/residual_write_ratio.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <vector>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("residual_write_ratio names the block that writes louder than its stream, not the first block") {
  std::vector<float> stream(100, 1.0f), write(100, 0.2f), loud(100, 3.0f);
  mldiag::detectors::residual_write_ratio w;
  const auto h = run(w, 60, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::residual_input, "block.0", stream);  // the first block rewrites the
    r.observe(mldiag::role::block_output, "block.0", loud);      // embedding: not judged
    r.observe(mldiag::role::residual_input, "block.7", stream);
    r.observe(mldiag::role::block_output, "block.7", step >= 40 ? loud : write);
  });
  REQUIRE(h.size() == 1);
  CHECK(h.front().first_step == 40);
  CHECK(h.front().where.front().first == "block.7");
}
