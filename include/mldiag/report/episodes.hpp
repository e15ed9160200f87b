// SPDX-License-Identifier: Apache-2.0
/// Episodes: the deliveries of one symptom at one place, close together in steps, as one
/// event with a start, an end, a count and a peak — what every report lists, and what tells
/// a console sink whether a delivery is news.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// Standard library only (and finding / run_log, which are too): the console sink, the
// monitor's users and the log readers include this without paying for fmt.
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/report/run_log.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>  // std::less<> (heterogeneous lookup)
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report {

/// The default gap of the episode rule, in steps: a delivery whose `first_step` is at most
/// this many steps after its episode's end joins the episode.
//
// 1000 = twice the longest window of the default detectors (plateau: 500 losses). A windowed
// detector's delivery at step t judged the losses (t - W, t]; the next one at t' judged
// (t' - W, t']. Only when t' - t > 2W lies a whole window, (t, t' - W], between them that
// neither delivery looked at: the earliest point at which the run can have shown a full
// window of healthy evidence, so the earliest at which a re-delivery is a new event rather
// than the same condition re-judged. On the healthy llm.c GPT-2 log (../shared/data) the 174
// plateau deliveries are 2-821 steps apart: one episode at 1000, 11 at 500, 33 at 100.
// A per-step check (a NaN, a spike) that recurs within 1000 steps is one episode with a count
// and a span, not a new onset; pass a smaller gap to see such recurrences apart.
inline constexpr std::int64_t default_episode_gap = 1000;

/// One episode: consecutive deliveries (by the gap rule) of the same question and symptom at
/// the same place — the finding's top `where` entry, or none.
struct episode {
  mldiag::question question = mldiag::question::convergence;
  std::string symptom;
  std::string place;                  ///< the top `where` name of its deliveries; "" when none
  std::int64_t first_step = -1;       ///< start: the smallest `first_step` of its deliveries
  std::int64_t last_step = -1;        ///< end: the largest `last_step` of its deliveries
  std::int64_t first_delivered = -1;  ///< the step the first delivery came at (-1: not known)
  std::int64_t last_delivered = -1;   ///< the step the newest delivery came at (-1: not known)
  std::size_t count = 0;              ///< deliveries
  /// The peak delivery, whole (its evidence, ranked places with scores, detector,
  /// consequence_of): the delivery of the highest severity, the first among equals — the
  /// numbers of the moment the episode was worst, not of whatever came last.
  mldiag::finding peak;
  std::int64_t peak_delivered = -1;  ///< the step the peak was delivered at (-1: not known)
  /// Every `where` name of every delivery, in the order first seen.
  std::vector<std::string> places;

  [[nodiscard]] mldiag::severity severity() const noexcept { return peak.severity; }
  /// A configuration (L0) episode: its findings carry no step (first_step = last_step = -1).
  [[nodiscard]] bool before_training() const noexcept { return last_step < 0; }
};

/// What one delivery changed: whether a console should say something.
struct episode_news {
  std::size_t episode = 0;     ///< the episode it joined or opened (index into `episodes()`)
  bool onset = false;          ///< it opened a new episode
  bool severity_rose = false;  ///< its severity is above the episode's peak before it
  mldiag::severity previous_peak = mldiag::severity::info;  ///< the peak before, when it rose
  /// `where` names the episode had not seen (empty at an onset: every place is new then).
  std::vector<std::string> new_places;

  [[nodiscard]] bool is_news() const noexcept {
    return onset || severity_rose || !new_places.empty();
  }
};

/// Groups findings into episodes as they are delivered, and says for each whether it is news.
///
/// The rule: a delivery belongs to the newest episode of its key (question, symptom, top
/// `where` name or none) when its `first_step` is at most `gap` steps after that episode's
/// end (the largest `last_step` so far); otherwise it opens a new episode. A detector that
/// fires at every step while its condition holds, or re-reports one finding with a growing
/// `last_step`, makes one episode; so does one that flickers on and off within `gap` steps.
/// Findings without a step (configuration checks, -1) join each other.
///
/// `add` does not allocate when a delivery joins an episode without news (a detector firing
/// at every step); an onset, a rise or a new place copies what it must keep.
///
/// **Example**
/// ```cpp
/// mldiag::report::episode_tracker episodes;
/// mon.attach([&](const mldiag::finding& f) {
///   if (episodes.add(f).is_news()) alert(f);  // once per onset, rise or new place
/// });
/// ```
class episode_tracker {
 public:
  /// Throws mldiag::error when `gap` is negative.
  explicit episode_tracker(std::int64_t gap = default_episode_gap) : gap_(gap) {
    if (gap < 0)
      throw error("episodes: the gap is " + std::to_string(gap) +
                  " steps; it must be 0 or more (0: only overlapping deliveries join)");
  }

  /// Adds a delivery; `delivered_at` is the step the monitor delivered it at, when known.
  episode_news add(const finding& f, std::int64_t delivered_at = -1) {
    const std::string_view place = f.where.empty() ? std::string_view{} : f.where.front().first;
    const key_view k{static_cast<int>(f.question), f.symptom, place};
    const std::int64_t end_of_f = f.last_step > f.first_step ? f.last_step : f.first_step;
    episode_news news;
    auto it = newest_.find(k);
    if (it != newest_.end() && joins(episodes_[it->second].last_step, f.first_step)) {
      const std::size_t i = it->second;
      episode& e = episodes_[i];
      news.episode = i;
      ++e.count;
      if (f.first_step < e.first_step) e.first_step = f.first_step;
      if (end_of_f > e.last_step) e.last_step = end_of_f;
      if (delivered_at >= 0) {
        if (e.first_delivered < 0) e.first_delivered = delivered_at;
        e.last_delivered = delivered_at;
      }
      if (f.severity > e.peak.severity) {
        news.severity_rose = true;
        news.previous_peak = e.peak.severity;
        e.peak = f;
        e.peak_delivered = delivered_at;
      }
      auto& seen = seen_[i];
      for (const auto& [name, score] : f.where) {
        if (seen.find(std::string_view(name)) != seen.end()) continue;
        seen.emplace(name);
        e.places.push_back(name);
        news.new_places.push_back(name);
      }
      return news;
    }
    episode e;
    e.question = f.question;
    e.symptom = f.symptom;
    e.place = std::string(place);
    e.first_step = f.first_step;
    e.last_step = end_of_f;
    e.first_delivered = e.last_delivered = e.peak_delivered = delivered_at;
    e.count = 1;
    e.peak = f;
    std::set<std::string, std::less<>> seen;
    for (const auto& [name, score] : f.where)
      if (seen.emplace(name).second) e.places.push_back(name);
    news.episode = episodes_.size();
    news.onset = true;
    episodes_.push_back(std::move(e));
    seen_.push_back(std::move(seen));
    if (it != newest_.end())
      it->second = news.episode;
    else
      newest_.emplace(key{k.question, std::string(k.symptom), std::string(k.place)}, news.episode);
    return news;
  }

  /// Every episode so far, in the order they began (by delivery).
  [[nodiscard]] const std::vector<episode>& episodes() const noexcept { return episodes_; }
  [[nodiscard]] std::int64_t gap() const noexcept { return gap_; }

 private:
  // Whether a delivery starting at `first` joins an episode ending at `end`: first - end <=
  // gap, in unsigned arithmetic (the steps may be anywhere in int64).
  [[nodiscard]] bool joins(std::int64_t end, std::int64_t first) const noexcept {
    if (first <= end) return true;
    return static_cast<std::uint64_t>(first) - static_cast<std::uint64_t>(end) <=
           static_cast<std::uint64_t>(gap_);
  }

  struct key_view {
    int question;
    std::string_view symptom, place;
  };
  struct key {
    int question;
    std::string symptom, place;
  };
  // Ordered by (question, symptom, place); compares owned keys with views, so a lookup
  // allocates nothing.
  struct key_less {
    using is_transparent = void;
    static key_view view(const key& k) noexcept { return {k.question, k.symptom, k.place}; }
    static key_view view(const key_view& k) noexcept { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      const key_view x = view(a), y = view(b);
      if (x.question != y.question) return x.question < y.question;
      if (x.symptom != y.symptom) return x.symptom < y.symptom;
      return x.place < y.place;
    }
  };

  std::int64_t gap_;
  std::vector<episode> episodes_;
  std::vector<std::set<std::string, std::less<>>> seen_;  // [episode] -> its places
  std::map<key, std::size_t, key_less> newest_;           // key -> its newest episode
};

/// A run's deliveries (in the order delivered) as episodes, in the order they began.
///
/// **Example**
/// ```cpp
/// for (const auto& e : mldiag::report::group_episodes(run.findings))
///   std::printf("%s: %zu deliveries\n", e.symptom.c_str(), e.count);
/// ```
[[nodiscard]] inline std::vector<episode> group_episodes(
    const std::vector<logged_finding>& findings, std::int64_t gap = default_episode_gap) {
  episode_tracker t(gap);
  for (const auto& lf : findings)
    t.add(lf.finding, lf.step);
  return t.episodes();
}

/// When a finding or episode happened, as the reports print it: "step 12", "steps 12-15",
/// and "before training" for configuration (L0) findings, which carry no step (-1).
[[nodiscard]] inline std::string step_span(std::int64_t first, std::int64_t last) {
  if (last < 0) return "before training";
  if (first < 0) return "before training to step " + std::to_string(last);
  if (first == last) return "step " + std::to_string(first);
  return "steps " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace mldiag::report
