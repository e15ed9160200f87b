// SPDX-License-Identifier: Apache-2.0
// Memory evidence: host RSS against an independent reading, fragmentation by hand, growth per
// step robust to noise, the probe, and the snapshot's new fields through the recorder.
#include <doctest/doctest.h>

#include "mldiag/efficiency/memory.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support/count_allocations.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace eff = mldiag::efficiency;

namespace {

// VmRSS from /proc/self/status (kB): a different file and parser than read_host_memory's.
double status_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      return kb * 1024.0;
    }
    std::getline(in, key);
  }
  return std::nan("");
}

}  // namespace

TEST_CASE("host RSS grows by the 200 MB a buffer touches and agrees with /proc/self/status") {
  if (!eff::host_memory_supported) {
    CHECK(!eff::read_host_memory().rss);
    return;
  }
  const auto before = eff::read_host_memory();
  REQUIRE(before.rss > 0.0);
  REQUIRE(before.peak_rss);
  CHECK(*before.peak_rss >= *before.rss * 0.99);
  constexpr std::size_t bytes = 200u * 1000u * 1000u;
  auto buffer = std::make_unique<char[]>(bytes);  // untouched pages are not resident yet
  std::memset(buffer.get(), 1, bytes);
  const auto after = eff::read_host_memory();
  const double independent = status_rss_bytes();
  volatile char sink = buffer[bytes / 2];  // keep the buffer alive past the reading
  (void)sink;
  REQUIRE(after.rss);
  REQUIRE(after.peak_rss);
  CHECK(*after.rss - *before.rss >= 190e6);
  CHECK(*after.rss - *before.rss <= 230e6);
  CHECK(*after.peak_rss >= *after.rss * 0.99);
  // Two readings a moment apart, of the same process: within 2 MB (a few pages may move).
  CHECK(std::fabs(*after.rss - independent) < 2e6);
  const auto m = eff::with_host_memory({});
  CHECK(m.host_rss > 0.0);
  CHECK(!m.allocated);  // absent, not NaN
}

TEST_CASE("fragmentation is 1 - allocated / reserved, by hand") {
  CHECK(eff::fragmentation(6e9, 8e9) == doctest::Approx(0.25));  // 2 GB of 8 GB cached free
  CHECK(eff::fragmentation(8e9, 8e9) == 0.0);
  CHECK(!eff::fragmentation(0.0, 0.0));
  CHECK_THROWS_WITH_AS((void)eff::fragmentation(9e9, 8e9),
                       doctest::Contains("need 0 <= allocated <= reserved"), mldiag::error);
  CHECK_THROWS_AS((void)eff::fragmentation(-1.0, 8e9), mldiag::error);
  mldiag::memory_evidence m;
  CHECK(!m.fragmentation());
  CHECK(!m.fill());
  m.allocated = 50e9;
  m.reserved = 76e9;
  m.capacity = 80e9;
  CHECK(m.fragmentation() == doctest::Approx(1.0 - 50.0 / 76.0));  // 0.342
  CHECK(m.fill() == doctest::Approx(0.95));                        // reserved is the fullest
  m.used = 79e9;                                                   // the driver sees more
  CHECK(m.fill() == doctest::Approx(79.0 / 80.0));
}

TEST_CASE(
    "growth_tracker: a leak of 1 MB per step under 5 MB noise and spikes, and a flat series") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 5e6);
  eff::growth_tracker leak(64), flat(64), sparse(32);
  for (int step = 0; step < 200; ++step) {
    const double spike = step % 17 == 0 ? 500e6 : 0.0;  // a temporary buffer now and then
    leak.push(step, 10e9 + 1e6 * step + noise(rng) + spike);
    flat.push(step, 10e9 + noise(rng) + spike);
    if (step % 5 == 0) sparse.push(step, 10e9 + 1e6 * step + noise(rng));  // sampled every 5 steps
  }
  CHECK(leak.bytes_per_step() == doctest::Approx(1e6).epsilon(0.1));
  CHECK(std::fabs(flat.bytes_per_step().value()) < 0.1e6);
  CHECK(sparse.bytes_per_step() == doctest::Approx(1e6).epsilon(0.1));
  eff::growth_tracker few(8);
  few.push(0, 1.0);
  CHECK(!few.bytes_per_step());
  CHECK_THROWS_WITH_AS(few.push(0, 2.0), doctest::Contains("does not come after step 0"),
                       mldiag::error);
  CHECK_THROWS_AS(eff::growth_tracker(2), mldiag::error);
}

TEST_CASE(
    "memory_probe: an allocator callback, host RSS and growth, without allocating per sample") {
  double allocated = 1e9;
  eff::memory_probe probe(
      [&] {
        mldiag::memory_evidence m;
        m.allocated = allocated;
        m.reserved = 2e9;
        m.largest_free_block = 0.5e9;
        return m;
      },
      32);
  for (int step = 0; step < 10; ++step, allocated += 4096.0)
    (void)probe.sample(step);
  const auto before = mldiag_test::allocations();
  mldiag::memory_evidence last;
  for (int step = 10; step < 100; ++step, allocated += 4096.0)
    last = probe.sample(step);
  CHECK(mldiag_test::allocations() == before);
  CHECK(last.allocated == 1e9 + 99 * 4096.0);
  CHECK(last.largest_free_block == 0.5e9);
  if (eff::host_memory_supported) CHECK(last.host_rss > 0.0);
  CHECK(probe.growth_per_step() == doctest::Approx(4096.0));
  eff::memory_probe host_only;
  (void)host_only.sample(0);
  CHECK(!host_only.growth_per_step());
}

TEST_CASE("the recorder checks memory and efficiency evidence and a step clears it") {
  mldiag::recorder rec(8);
  rec.begin_step(0);
  mldiag::memory_evidence bad;
  bad.allocated = 3e9;
  bad.reserved = 2e9;
  CHECK_THROWS_WITH_AS(rec.observe(bad),
                       doctest::Contains("mldiag: recorder::observe(memory_evidence): allocated"),
                       mldiag::error);
  bad.allocated = -1.0;
  CHECK_THROWS_WITH_AS(rec.observe(bad), doctest::Contains("allocated is -1"), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::efficiency_evidence{.mfu = 1.2}),
                       doctest::Contains("the FLOP count or the peak is wrong"), mldiag::error);
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::efficiency_evidence{.tensor_core_activity = 45.0}), doctest::Contains("not a percentage"),
                       mldiag::error);
  CHECK_THROWS_AS(rec.observe(mldiag::efficiency_evidence{.throughput = -1.0}), mldiag::error);
  const double ranks_bad[] = {0.1, NAN};
  CHECK_THROWS_WITH_AS(rec.observe(mldiag::rank_step_times{ranks_bad}), doctest::Contains("rank 1 has time"),
                       mldiag::error);
  mldiag::efficiency_evidence e;
  e.mfu = 0.35;
  e.throughput = 9e4;
  e.throughput_target = 1e5;
  e.communication_bytes = 1e9;
  e.link_bandwidth = 4e11;
  rec.observe(e);
  rec.observe(mldiag::efficiency_evidence{.tensor_core_activity = 0.5});
  const double ranks[] = {0.10, 0.11, 0.12};
  rec.observe(mldiag::rank_step_times{ranks});
  mldiag::memory_evidence m;
  m.allocated = 1e9;
  m.reserved = 2e9;
  m.largest_free_block = 1e8;
  rec.observe(m);
  const auto& s = rec.end_step();
  CHECK(s.efficiency.mfu == 0.35);
  CHECK(s.efficiency.tensor_core_activity == 0.5);
  CHECK(s.efficiency.throughput_target == 1e5);
  CHECK(s.efficiency.link_bandwidth == 4e11);
  CHECK(s.rank_step_times.size() == 3);
  CHECK(s.memory.largest_free_block == 1e8);
  CHECK(rec.past().back().rank_step_times[2] == 0.12);
  rec.begin_step(1);
  CHECK(!rec.current().efficiency.mfu);
  CHECK(!rec.current().efficiency.communication_bytes);
  CHECK(!rec.current().memory.largest_free_block);
  CHECK(rec.current().rank_step_times.empty());
  rec.end_step();
}

TEST_CASE("a step with memory efficiency and rank evidence allocates nothing after warm-up") {
  mldiag::recorder rec(16);
  const double ranks[] = {0.1, 0.1, 0.1, 0.1};
  auto step = [&](int i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, 1.0);
    mldiag::memory_evidence m;
    m.allocated = 1e9;
    m.reserved = 2e9;
    m.capacity = 8e9;
    rec.observe(m);
    rec.observe(mldiag::efficiency_evidence{.mfu = 0.45});
    rec.observe(mldiag::efficiency_evidence{.throughput = 1e5, .throughput_target = 1e5});
    rec.observe(mldiag::efficiency_evidence{.communication_bytes = 1e9, .link_bandwidth = 1e11});
    rec.observe(mldiag::rank_step_times{ranks});
    rec.end_step();
  };
  for (int i = 0; i < 40; ++i)
    step(i);
  const auto before = mldiag_test::allocations();
  for (int i = 40; i < 200; ++i)
    step(i);
  CHECK(mldiag_test::allocations() == before);
}
