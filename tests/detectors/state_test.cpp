// SPDX-License-Identifier: Apache-2.0
// The state detectors keep: onset (warm-up, sustain, "report the start, not every step"),
// episode (news when a place joins or the severity rises) and name_tag (a name searched once).
#include <doctest/doctest.h>

#include "mldiag/detectors/state.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include "../support/count_allocations.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

TEST_CASE("onset: true once, on the observation where a run of one state reaches sustain") {
  mldiag::detectors::onset o;
  // false, then true for five observations with sustain 3: reported on the third only.
  CHECK_FALSE(o.observe(false, 3));
  CHECK_FALSE(o.active());
  CHECK_FALSE(o.observe(true, 3));
  CHECK_FALSE(o.observe(true, 3));
  CHECK(o.observe(true, 3));
  CHECK(o.run() == 3);
  CHECK(o.active());
  CHECK(o.start(12) == 10);  // observed at step 12 after three: the run began at 10
  CHECK_FALSE(o.observe(true, 3));
  CHECK_FALSE(o.observe(true, 3));
  CHECK(o.run() == 5);
  // It stops: the next run is a new onset, counted from 1.
  CHECK_FALSE(o.observe(false, 3));
  CHECK(o.run() == 0);
  CHECK_FALSE(o.observe(true, 3));
  CHECK(o.run() == 1);
  CHECK_FALSE(o.observe(true, 3));
  CHECK(o.observe(true, 3));
}

TEST_CASE("onset: a change of state starts a new run, rise is an edge and reset forgets") {
  mldiag::detectors::onset o;
  CHECK_FALSE(o.observe(1, 2));
  CHECK(o.observe(1, 2));
  CHECK_FALSE(o.observe(2, 2));  // another non-zero state: a new run, counted from 1
  CHECK(o.run() == 1);
  CHECK(o.observe(2, 2));  // and reported when it reaches sustain
  CHECK(o.start(7) == 6);
  CHECK_FALSE(o.observe(2, 2));
  CHECK_FALSE(o.observe(0, 2));  // 0 is "nothing to report"
  CHECK(o.run() == 0);
  CHECK_FALSE(o.active());
  mldiag::detectors::edge e;
  CHECK(e.rise(true));
  CHECK_FALSE(e.rise(true));
  CHECK_FALSE(e.rise(false));
  CHECK(e.rise(true));
  e.reset();
  CHECK(e.run() == 0);
  CHECK_FALSE(e.active());
  CHECK(e.rise(true));  // forgotten: the condition starts again
  // A sustain of 0 holds at once, and still reports once.
  mldiag::detectors::onset zero;
  CHECK(zero.observe(true, 0));
  CHECK_FALSE(zero.observe(true, 0));
}

TEST_CASE("episode: news when the condition starts, when a place joins and when the severity rises") {
  using mldiag::severity;
  using places = std::vector<std::pair<std::string, double>>;
  mldiag::detectors::episode e;
  CHECK_FALSE(e.report(false, severity::warning, {}));
  CHECK(e.report(true, severity::warning, places{{"a", 1.0}}));  // it starts
  CHECK(e.active());
  CHECK_FALSE(e.report(true, severity::warning, places{{"a", 0.9}}));  // the same place, the same level
  CHECK(e.report(true, severity::warning, places{{"a", 1.0}, {"b", 1.0}}));  // b joins
  CHECK_FALSE(e.report(true, severity::warning, places{{"b", 1.0}, {"a", 1.0}}));
  CHECK(e.report(true, severity::critical, places{{"a", 1.0}}));  // the severity rises
  CHECK_FALSE(e.report(true, severity::warning, places{{"a", 1.0}}));  // and a fall is no news
  CHECK_FALSE(e.report(true, severity::critical, places{{"b", 1.0}}));
  // It stops and starts again: a new episode, at its own level, with its places forgotten.
  CHECK_FALSE(e.report(false, severity::critical, {}));
  CHECK_FALSE(e.active());
  CHECK(e.report(true, severity::info, places{{"b", 1.0}}));
  CHECK(e.report(true, severity::warning, places{{"b", 1.0}}));
}

TEST_CASE("name_tag searches each name once and allocates only for new names") {
  mldiag::name_table names;
  const auto embed_id = names.intern("tok.embed"), other_id = names.intern("layers.0.w");
  mldiag::detectors::name_tag embed("embed");
  CHECK(embed(names, embed_id));
  CHECK_FALSE(embed(names, other_id));
  const auto later = names.intern("pos.embed");  // a name interned after the first question
  CHECK(embed(names, later));
  const auto before = mldiag_test::allocations();
  std::size_t found = 0;
  for (std::uint32_t i = 0; i < 300; ++i)
    found += embed(names, i % 3) ? 1 : 0;
  CHECK(mldiag_test::allocations() == before);
  CHECK(found == 200);
}
