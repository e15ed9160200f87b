// SPDX-License-Identifier: Apache-2.0
// attention_collapse: attention rows that are nearly one-hot, one episode per collapse.
#include <doctest/doctest.h>

#include "mldiag/detectors/early_anomaly/attention_collapse.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <algorithm>
#include <cmath>

namespace {
using mldiag_test::run;
}  // namespace

TEST_CASE("attention_collapse: one finding per collapse, released halfway back to a uniform row") {
  mldiag::detectors::attention_collapse a;
  const auto f = run(a, 50, [](int step, mldiag::recorder& r, double&, double&) {
    mldiag::entropy_stats e;
    e.add_row(step >= 25 ? 0.05 * std::log(128.0) : 0.8 * std::log(128.0), 128);
    r.observe(mldiag::row_entropy{"layers.3.attn", e});
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 25);
  // An entropy that hovers around the line after a collapse (0.05, 0.12, 0.09, 0.15, 0.08,
  // ... of log 128, the shape of the fault suite's transformer) is one episode; it ends only
  // above twice the line (0.2), and a collapse after that is a new one.
  mldiag::detectors::attention_collapse hover;
  const double level[] = {0.05, 0.12, 0.09, 0.15, 0.08, 0.199, 0.07};
  const auto hovered = run(hover, 60, [&](int step, mldiag::recorder& r, double&, double&) {
    double x = 0.8;                                           // healthy until step 19
    if (step >= 20) x = level[std::min(6, (step - 20) / 4)];  // each level for 4 steps: 20..47
    if (step >= 48) x = 0.21;                                 // recovered: above 0.2
    if (step >= 55) x = 0.06;                                 // and collapsed again
    mldiag::entropy_stats e;
    e.add_row(x * std::log(128.0), 128);
    r.observe(mldiag::row_entropy{"layers.3.attn", e});
  });
  REQUIRE(hovered.size() == 2);
  CHECK(hovered[0].first_step == 20);
  CHECK(hovered[1].first_step == 55);
  CHECK(hovered[1].evidence.front().second == doctest::Approx(0.06).epsilon(1e-9));
  // A threshold of 0.6 releases halfway to 1 (0.8), not at 1.2, which no entropy reaches.
  mldiag::detectors::attention_collapse high({.min_normalized_entropy = 0.6});
  const auto twice = run(high, 40, [&](int step, mldiag::recorder& r, double&, double&) {
    const double x = step < 10 ? 0.9 : step < 20 ? 0.5 : step < 30 ? 0.81 : 0.5;  // collapse, release, collapse
    mldiag::entropy_stats e;
    e.add_row(x * std::log(128.0), 128);
    r.observe(mldiag::row_entropy{"layers.3.attn", e});
  });
  REQUIRE(twice.size() == 2);
  CHECK(twice[1].first_step == 30);
}
