// SPDX-License-Identifier: Apache-2.0
// memory_pressure: device memory near capacity.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/memory_pressure.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::memory;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("memory_pressure: reserved above 95% of capacity for five steps") {
  det::memory_pressure healthy;
  CHECK(run_filled(healthy, 300, [](int, auto& r, auto& rng) {
          const double reserved = gauss(rng, 68e9, 0.02);  // 85% of 80 GB
          r.observe(memory(0.8 * reserved, reserved, 80e9));
        }).empty());
  det::memory_pressure d;
  const auto f = run_filled(d, 100, [](int step, auto& r, auto&) {
    const double reserved = step >= 30 ? 77.6e9 : 68e9;
    r.observe(memory(60e9, reserved, 80e9));
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].first_step == 30);
  CHECK(f[0].last_step == 34);
  CHECK(evidence(f[0], "fill") == doctest::Approx(0.97));  // 77.6 / 80
  CHECK(f[0].where.front().first == "device_memory");
  det::memory_pressure used;  // cudaMemGetInfo alone: used / capacity
  const auto g = run_filled(used, 20, [](int, auto& r, auto&) {
    mldiag::memory_evidence m;
    m.capacity = 141e9;
    m.used = 139e9;
    r.observe(m);
  });
  REQUIRE(g.size() == 1);
  CHECK(evidence(g[0], "fill") == doctest::Approx(139.0 / 141.0));
}
