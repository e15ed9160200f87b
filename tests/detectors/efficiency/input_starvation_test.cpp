// SPDX-License-Identifier: Apache-2.0
// input_starvation: a typical step that waits for its data.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/input_starvation.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("input_starvation reads the step timings: a starved typical step, not a loaded machine's runs") {
  mldiag::detectors::input_starvation d;
  const auto timings = [](double wait) {
    mldiag::step_timings t;
    t.data_wait = wait;
    t.total = 0.010 + wait;
    return t;
  };
  CHECK(run(d, 100, [&](int, mldiag::recorder& r, double&, double&) { r.observe(timings(0.001)); }).empty());
  mldiag::detectors::input_starvation starved;
  const auto f = run(starved, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(timings(step >= 40 ? 0.008 : 0.001));  // 0.008 / 0.018 = 0.44 > 0.3
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().question == mldiag::question::efficiency);
  CHECK(f.front().first_step == 40);  // the window's median crosses at 50 (11 of 20), five steps more: 54
  CHECK(f.front().last_step == 54);
  CHECK(f.front().evidence.front().second == doctest::Approx(0.008 / 0.018));
  // A machine loaded by another process now and then: runs of starved steps, but the typical
  // step is not starved.
  mldiag::detectors::input_starvation loaded;
  CHECK(run(loaded, 300, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(timings(step % 20 < 7 ? 0.02 : 0.001));  // 7 of every 20 steps at 0.67
  }).empty());

}
