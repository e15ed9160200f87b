// SPDX-License-Identifier: Apache-2.0
// memory_fragmentation: a caching allocator whose free memory is fragmented.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/memory_fragmentation.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <optional>

namespace det = mldiag::detectors;

namespace {
using mldiag_test::run_filled;
using mldiag_test::gauss;
using mldiag_test::memory;
using mldiag_test::evidence;
}  // namespace

TEST_CASE("memory_fragmentation: a third of the pool unusable, or splinters, near capacity only") {
  det::memory_fragmentation d;
  const auto f = run_filled(d, 20, [](int, auto& r, auto&) { r.observe(memory(50e9, 76e9, 80e9)); });
  REQUIRE(f.size() == 1);
  CHECK(f[0].last_step == 4);
  CHECK(evidence(f[0], "fragmentation") == doctest::Approx(1.0 - 50.0 / 76.0));  // 0.342
  CHECK(evidence(f[0], "fill") == doctest::Approx(0.95));
  CHECK(f[0].where.front().first == "allocator");
  det::memory_fragmentation splinters;
  const auto g = run_filled(splinters, 20, [](int, auto& r, auto&) {
    auto m = memory(70e9, 76e9, 80e9);  // fragmentation 0.079, but the 6 GB free are in pieces
    m.largest_free_block = 0.3e9;
    r.observe(m);
  });
  REQUIRE(g.size() == 1);
  CHECK(evidence(g[0], "block_fraction") == doctest::Approx(0.05));  // 0.3 / (76 - 70)
  det::memory_fragmentation far;  // half the pool cached free, but a quarter of the device used
  CHECK(
      run_filled(far, 50, [](int, auto& r, auto&) { r.observe(memory(10e9, 20e9, 80e9)); }).empty());
  det::memory_fragmentation healthy;
  CHECK(run_filled(healthy, 300, [](int, auto& r, auto& rng) {
          auto m = memory(gauss(rng, 70e9, 0.01), 74e9, 80e9);
          m.largest_free_block = 3e9;
          r.observe(m);
        }).empty());
  det::memory_fragmentation unknown;  // no capacity: not judged
  CHECK(run_filled(unknown, 50, [](int, auto& r, auto&) {
          r.observe(memory(10e9, 40e9, std::nullopt));
        }).empty());
}
