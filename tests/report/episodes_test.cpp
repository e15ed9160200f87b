// SPDX-License-Identifier: Apache-2.0
// report/episodes.hpp: the gap rule at its boundary, the peak, the places, the news, findings
// without a step, and random delivery sequences against a naive reference written here (every
// delivery compared with every earlier episode, no index).
#include "mldiag/report/episodes.hpp"

// The console sink and run_log users include episodes.hpp: it must not pull in fmt.
#if defined(FMT_VERSION)
#error "mldiag/report/episodes.hpp pulled in fmt; it must need only the standard library"
#endif

#include "../support/count_allocations.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

namespace r = mldiag::report;
using mldiag::severity;

mldiag::finding at(std::int64_t step, severity s = severity::warning,
                   std::vector<std::string> where = {},
                   std::string symptom = "exploding gradients") {
  mldiag::finding f;
  f.question = mldiag::question::convergence;
  f.symptom = std::move(symptom);
  f.severity = s;
  f.first_step = f.last_step = step;
  double score = 10.0;
  for (auto& w : where)
    f.where.emplace_back(std::move(w), score--);
  f.evidence = {{"step_seen", static_cast<double>(step)}};
  f.detector = "d";
  return f;
}

// The reference: for each delivery, the newest earlier episode with the same question,
// symptom and top place, found by scanning all of them from the back; it joins when its
// first step is at most `gap` after that episode's largest last step.
struct ref_episode {
  int question;
  std::string symptom, place;
  std::int64_t first, last;
  std::size_t count;
  severity peak;
  double peak_evidence;
  std::vector<std::string> places;
};

std::vector<ref_episode> reference(const std::vector<mldiag::finding>& fs, std::int64_t gap) {
  std::vector<ref_episode> out;
  for (const auto& f : fs) {
    const std::string place = f.where.empty() ? "" : f.where[0].first;
    ref_episode* hit = nullptr;
    for (auto it = out.rbegin(); it != out.rend(); ++it)
      if (it->question == static_cast<int>(f.question) && it->symptom == f.symptom &&
          it->place == place) {
        hit = &*it;
        break;
      }
    const std::int64_t end = std::max(f.first_step, f.last_step);
    if (hit != nullptr && f.first_step - hit->last < gap + 1) {
      hit->first = std::min(hit->first, f.first_step);
      hit->last = std::max(hit->last, end);
      ++hit->count;
      if (f.severity > hit->peak) {
        hit->peak = f.severity;
        hit->peak_evidence = f.evidence[0].second;
      }
      for (const auto& [n, s] : f.where) {
        bool seen = false;
        for (const auto& p : hit->places)
          seen = seen || p == n;
        if (!seen) hit->places.push_back(n);
      }
      continue;
    }
    ref_episode e{static_cast<int>(f.question), f.symptom, place, f.first_step, end, 1, f.severity,
                  f.evidence[0].second,         {}};
    for (const auto& [n, s] : f.where) {
      bool seen = false;
      for (const auto& p : e.places)
        seen = seen || p == n;
      if (!seen) e.places.push_back(n);
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

TEST_CASE("a detector firing at every step for 7500 steps is one episode and news once") {
  r::episode_tracker t;
  std::size_t news = 0;
  for (std::int64_t s = 0; s < 7500; ++s)
    news += t.add(at(s), s).is_news() ? 1 : 0;
  CHECK(news == 1);
  REQUIRE(t.episodes().size() == 1);
  const auto& e = t.episodes()[0];
  CHECK(e.count == 7500);
  CHECK(e.first_step == 0);
  CHECK(e.last_step == 7499);
  CHECK(e.first_delivered == 0);
  CHECK(e.last_delivered == 7499);
  CHECK(e.peak.evidence[0].second == 0.0);  // the first among equals
}

TEST_CASE("the gap rule: at most gap steps after the end joins, one more opens a new episode") {
  constexpr std::int64_t gap = 50;
  r::episode_tracker t(gap);
  CHECK(t.add(at(100)).onset);
  CHECK_FALSE(t.add(at(100 + gap)).is_news());  // exactly gap after the end: joins
  CHECK(t.episodes().size() == 1);
  CHECK(t.add(at(100 + 2 * gap + 1)).onset);  // gap + 1 after the end (150): new
  CHECK(t.episodes().size() == 2);
  // A finding re-reported with a growing last_step and a fixed first_step stays one episode.
  mldiag::finding grow = at(1000);
  CHECK(t.add(grow).onset);
  for (std::int64_t last = 1001; last < 1400; last += 100) {
    grow.last_step = last;
    CHECK_FALSE(t.add(grow).is_news());
  }
  CHECK(t.episodes().size() == 3);
  CHECK(t.episodes()[2].last_step == 1301);
  // The default gap is the documented one; 0 joins only overlapping deliveries.
  CHECK(r::episode_tracker().gap() == r::default_episode_gap);
  r::episode_tracker tight(0);
  CHECK(tight.add(at(5)).onset);
  CHECK_FALSE(tight.add(at(5)).onset);
  CHECK(tight.add(at(6)).onset);
  CHECK_THROWS_WITH_AS(r::episode_tracker(-1), doctest::Contains("mldiag: episodes: the gap is -1"),
                       mldiag::error);
}

TEST_CASE(
    "peak is the highest severity, the first among equals, and a rise or a new place is news") {
  r::episode_tracker t;
  auto n = t.add(at(10, severity::info, {"grad/fc1.weight"}));
  CHECK(n.onset);
  CHECK(n.new_places.empty());
  n = t.add(at(11, severity::warning, {"grad/fc1.weight"}));
  CHECK(n.severity_rose);
  CHECK(n.previous_peak == severity::info);
  CHECK_FALSE(n.onset);
  n = t.add(at(12, severity::critical, {"grad/fc1.weight"}));
  CHECK(n.severity_rose);
  CHECK(n.previous_peak == severity::warning);
  n = t.add(at(13, severity::critical, {"grad/fc1.weight"}));  // equal: not news, not the peak
  CHECK_FALSE(n.is_news());
  n = t.add(at(14, severity::warning, {"grad/fc1.weight", "grad/fc2.weight"}));
  CHECK_FALSE(n.severity_rose);  // lower than the peak
  REQUIRE(n.new_places.size() == 1);
  CHECK(n.new_places[0] == "grad/fc2.weight");
  CHECK_FALSE(t.add(at(15, severity::warning, {"grad/fc1.weight", "grad/fc2.weight"})).is_news());
  REQUIRE(t.episodes().size() == 1);
  const auto& e = t.episodes()[0];
  CHECK(e.severity() == severity::critical);
  CHECK(e.peak.evidence[0].second == 12.0);
  CHECK(e.count == 6);
  CHECK(e.places == std::vector<std::string>{"grad/fc1.weight", "grad/fc2.weight"});
  // Another top place is another episode, and news; so is another symptom at the same place.
  CHECK(t.add(at(16, severity::warning, {"grad/fc2.weight", "grad/fc1.weight"})).onset);
  CHECK(t.add(at(16, severity::warning, {"grad/fc1.weight"}, "vanishing gradients")).onset);
  CHECK(t.episodes().size() == 3);
}

TEST_CASE("configuration findings (no step) are one episode, before training") {
  r::episode_tracker t;
  CHECK(t.add(at(-1, severity::warning, {"tokens_per_step"})).onset);
  CHECK_FALSE(t.add(at(-1, severity::warning, {"tokens_per_step"})).is_news());
  REQUIRE(t.episodes().size() == 1);
  CHECK(t.episodes()[0].before_training());
  CHECK(r::step_span(-1, -1) == "before training");
  CHECK(r::step_span(-1, 7) == "before training to step 7");
  CHECK(r::step_span(4, 4) == "step 4");
  CHECK(r::step_span(4, 9) == "steps 4-9");
}

TEST_CASE("random delivery sequences group as the naive reference does") {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t gap = std::uniform_int_distribution<std::int64_t>(0, 40)(rng);
    std::vector<mldiag::finding> fs;
    std::int64_t step = 0;
    const int n = std::uniform_int_distribution<int>(1, 120)(rng);
    for (int i = 0; i < n; ++i) {
      step += std::uniform_int_distribution<std::int64_t>(0, 30)(rng);
      const auto s = static_cast<severity>(std::uniform_int_distribution<int>(0, 2)(rng));
      std::vector<std::string> where;
      const int places = std::uniform_int_distribution<int>(0, 3)(rng);
      static const std::string names[] = {"t0", "t1", "t2", "t3"};
      for (int k = 0; k < places; ++k)
        where.push_back(names[std::uniform_int_distribution<int>(0, 3)(rng)]);
      auto f = at(step, s, where, std::uniform_int_distribution<int>(0, 1)(rng) ? "a" : "b");
      f.evidence[0].second = static_cast<double>(i);
      if (std::uniform_int_distribution<int>(0, 4)(rng) == 0)
        f.first_step -= 10;  // started earlier
      fs.push_back(f);
    }
    const auto want = reference(fs, gap);
    std::vector<r::logged_finding> logged;
    for (const auto& f : fs)
      logged.push_back({f.last_step, f});
    const auto got = r::group_episodes(logged, gap);
    CAPTURE(trial);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].symptom == want[i].symptom);
      CHECK(got[i].place == want[i].place);
      CHECK(got[i].first_step == want[i].first);
      CHECK(got[i].last_step == want[i].last);
      CHECK(got[i].count == want[i].count);
      CHECK(got[i].severity() == want[i].peak);
      CHECK(got[i].peak.evidence[0].second == want[i].peak_evidence);
      CHECK(got[i].places == want[i].places);
    }
  }
}

TEST_CASE("a repeat that is not news allocates nothing") {
  r::episode_tracker t;
  const auto f = at(0, severity::warning, {"grad/fc1.weight", "grad/fc2.weight"});
  (void)t.add(f);
  const auto before = mldiag_test::allocations();
  for (int i = 0; i < 1000; ++i)
    (void)t.add(f);
  CHECK(mldiag_test::allocations() == before);
  CHECK(t.episodes()[0].count == 1001);
}
