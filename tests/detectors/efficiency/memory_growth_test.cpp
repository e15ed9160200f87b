// SPDX-License-Identifier: Apache-2.0
// memory_growth: memory that grows step after step.
#include <doctest/doctest.h>

#include "mldiag/detectors/efficiency/memory_growth.hpp"
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

TEST_CASE("memory_growth: a linear leak under noise fires but noise, spikes and a staircase do not") {
  det::memory_growth d;
  const auto f = run_filled(d, 600, [](int step, auto& r, auto& rng) {
    const double reserved =
        20e9 + 10e6 * step + gauss(rng, 1.0, 1.0) * 50e6 - 50e6;  // 10 MB/step, 50 MB noise
    r.observe(memory(std::nullopt, reserved, 80e9));
  });
  REQUIRE(f.size() == 1);
  CHECK(f[0].symptom == "memory growth");
  CHECK(f[0].last_step == 219);  // 20 warm-up steps and a full window of 200
  CHECK(f[0].first_step == 20);
  CHECK(evidence(f[0], "bytes_per_step") == doctest::Approx(10e6).epsilon(0.1));
  CHECK(evidence(f[0], "rising_segments") == 7);
  CHECK(f[0].where.front().first == "reserved");
  det::memory_growth noisy;
  CHECK(run_filled(noisy, 1500, [](int step, auto& r, auto& rng) {
          const double spike = step % 37 == 0 ? 2e9 : 0.0;
          r.observe(memory(gauss(rng, 15e9, 0.01), 20e9 + spike, 80e9));
        }).empty());
  det::memory_growth stairs;  // the allocator grows for a new longest batch, then holds
  CHECK(run_filled(stairs, 1500, [](int step, auto& r, auto& rng) {
          const double reserved = 20e9 + 1e9 * ((step >= 30) + (step >= 90) + (step >= 200) +
                                                (step >= 400) + (step >= 700));
          r.observe(memory(std::nullopt, reserved + gauss(rng, 1.0, 1.0) * 20e6 - 20e6, 80e9));
        }).empty());
  det::memory_growth host({.window = 80, .segments = 8, .min_rising = 7});
  const auto h = run_filled(host, 300, [](int step, auto& r, auto&) {
    mldiag::memory_evidence m;
    m.host_rss = 1e9 + 4e6 * step;  // 4 MB/step of host memory
    r.observe(m);
  });
  REQUIRE(h.size() == 1);
  CHECK(h[0].where.front().first == "host_rss");
  CHECK(evidence(h[0], "bytes_per_step") == doctest::Approx(4e6));
  CHECK_THROWS_WITH_AS(det::memory_growth({.window = 10, .segments = 8}),
                       doctest::Contains("window >= 2 x segments"), mldiag::error);
}
