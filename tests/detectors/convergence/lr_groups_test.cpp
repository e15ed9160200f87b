// SPDX-License-Identifier: Apache-2.0
// lr_sanity on parameter groups (group_learning_rate): each group judged by the same rules and
// named, and a schedule that is logged but never given to the optimizer; each with its twin.
#include "../support.hpp"
#include "mldiag/detectors/convergence/lr_sanity.hpp"

#include <cmath>
#include <functional>

namespace {

// A run of lr_sanity over `steps` steps whose evidence `fill` records.
std::vector<mldiag::finding> lr_run(int steps, const std::function<void(int, mldiag::recorder&)>& fill) {
  mldiag::detectors::lr_sanity d;
  return mldiag_test::run_filled(d, steps, [&](int step, mldiag::recorder& rec, std::mt19937_64&) { fill(step, rec); });
}

double cosine_schedule(int step) { return 1e-3 * 0.5 * (1.0 + std::cos(3.141592653589793 * step / 100.0)); }

}  // namespace

TEST_CASE("lr_sanity: a group's rate that jumps 100x is named — discriminative rates that differ are not a jump") {
  const auto out = lr_run(40, [](int step, mldiag::recorder& rec) {
    rec.observe(mldiag::group_learning_rate{"backbone/0", 1e-5});
    rec.observe(mldiag::group_learning_rate{"head/0", step < 20 ? 1e-3 : 1e-1});
  });
  REQUIRE(out.size() == 1);  // the jump alone: 0.1 is below max_lr (5)
  CHECK(out[0].symptom == mldiag::symptoms::lr_jumped);
  CHECK(out[0].first_step == 20);
  REQUIRE(out[0].where.size() == 1);
  CHECK(out[0].where[0].first == "head/0");
  CHECK(mldiag_test::evidence(out[0], "factor") == doctest::Approx(100.0));
}

TEST_CASE("lr_sanity: twin — two groups at rates 100x apart, each steady, raise nothing") {
  const auto out = lr_run(40, [](int, mldiag::recorder& rec) {
    rec.observe(mldiag::group_learning_rate{"backbone/0", 1e-5});
    rec.observe(mldiag::group_learning_rate{"head/0", 1e-3});
  });
  CHECK(out.empty());
}

TEST_CASE("lr_sanity: a cosine schedule logged but never written into the optimizer") {
  const auto out = lr_run(60, [](int step, mldiag::recorder& rec) {
    rec.observe(mldiag::scalar::learning_rate, cosine_schedule(step));
    rec.observe(mldiag::group_learning_rate{"adamw/0", 1e-3});  // stays at its initial rate
  });
  REQUIRE(out.size() == 1);
  CHECK(out[0].symptom == mldiag::symptoms::lr_not_applied);
  CHECK(out[0].severity == mldiag::severity::warning);
  CHECK(out[0].first_step == 5);  // the logged rate's fifth change (steps 1..5)
  CHECK(out[0].where.at(0).first == "adamw/0");
}

TEST_CASE("lr_sanity: twin — the same schedule applied to the optimizer raises nothing") {
  const auto out = lr_run(60, [](int step, mldiag::recorder& rec) {
    rec.observe(mldiag::scalar::learning_rate, cosine_schedule(step));
    rec.observe(mldiag::group_learning_rate{"adamw/0", cosine_schedule(step)});
  });
  CHECK(out.empty());
}
