// SPDX-License-Identifier: Apache-2.0
/// The four-phase method as a typestate: evidence -> pattern -> hypothesis -> fix and verify.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/protocol/evidence_summary.hpp"
#include "mldiag/protocol/pattern_tables.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mldiag::protocol {

// ---------------------------------------------------------------------------------------
// The transition table: the whole protocol on one screen. Each phase is a type; each event
// a tag; `next<From, Event>` the phase it leads to. The phase classes below take their
// return types from here, so the table is the single place the protocol is written.
//
//   phase                 event          next phase
//   evidence_phase        baseline       pattern_phase<0>
//   pattern_phase<S>      propose        hypothesis_phase<S>
//   hypothesis_phase<S>   confirmed      fix_phase
//   hypothesis_phase<S>   rejected       pattern_phase<S+1>        (S = 0, 1)
//   hypothesis_phase<2>   rejected       escalated                 (three strikes)
//   fix_phase             better         resolved
//   fix_phase             not_better     pattern_phase<0>          (back to phase 2, new evidence)
// ---------------------------------------------------------------------------------------
class evidence_phase;
template <int Strikes> class pattern_phase;
template <int Strikes> class hypothesis_phase;
class fix_phase;
class resolved;
class escalated;

struct on_baseline {};
struct on_propose {};
struct on_confirmed {};
struct on_rejected {};
struct on_better {};
struct on_not_better {};

template <class From, class Event> struct transition;
template <> struct transition<evidence_phase, on_baseline> { using type = pattern_phase<0>; };
template <int S> struct transition<pattern_phase<S>, on_propose> { using type = hypothesis_phase<S>; };
template <int S> struct transition<hypothesis_phase<S>, on_confirmed> { using type = fix_phase; };
template <int S> struct transition<hypothesis_phase<S>, on_rejected> { using type = pattern_phase<S + 1>; };
template <> struct transition<hypothesis_phase<2>, on_rejected> { using type = escalated; };
template <> struct transition<fix_phase, on_better> { using type = resolved; };
template <> struct transition<fix_phase, on_not_better> { using type = pattern_phase<0>; };

template <class From, class Event>
using next = typename transition<From, Event>::type;

namespace detail {
template <class...>
inline constexpr bool always_false = false;
}  // namespace detail

/// The one variable a hypothesis changes: its name and its value before and after.
struct change {
  std::string variable;
  double from = 0.0;
  double to = 0.0;
};

/// "I think `cause` because `evidence`; changing exactly one variable tests it."
struct hypothesis {
  std::string cause;
  std::string evidence;
  protocol::change change;

  hypothesis(std::string cause_, std::string evidence_, protocol::change one)
      : cause(std::move(cause_)), evidence(std::move(evidence_)), change(std::move(one)) {}
  /// More than one change does not compile: the method tests one variable at a time.
  template <class... More>
  hypothesis(std::string, std::string, protocol::change, protocol::change, More...) {
    static_assert(detail::always_false<More...>,
                  "mldiag: a hypothesis changes exactly one variable; split it and test one "
                  "change at a time (phase 3: hypothesis)");
  }
};

/// Runs training with one change for a fixed number of steps and returns its evidence,
/// summarized with the same checks as the baseline.
using experiment = std::function<evidence_summary(const change&)>;

// What every phase carries: the question, the baseline, the newest evidence, the log.
struct diagnosis_state {
  question q = question::convergence;
  evidence_summary baseline;
  evidence_summary current;
  std::vector<hypothesis> rejected;
  std::unique_ptr<hypothesis> confirmed;
  std::vector<std::string> log;  ///< phase by phase, for the report
  std::vector<std::string> focus;  ///< the symptoms that opened the diagnosis
};

/// Phase 1: collect the evidence for the question and record a baseline, including the
/// "check the obvious first" results. Nothing else is possible yet.
class evidence_phase {
 public:
  evidence_phase(question q, std::vector<finding> opened_by) : s_(std::make_unique<diagnosis_state>()) {
    s_->q = q;
    for (const auto& f : opened_by)
      if (std::find(s_->focus.begin(), s_->focus.end(), f.symptom) == s_->focus.end()) s_->focus.push_back(f.symptom);
    s_->current.findings = std::move(opened_by);
    s_->log.push_back("phase 1 (evidence): opened for " + std::string(name(q)));
  }

  /// Records the baseline and moves to phase 2. Throws if no obvious check was run.
  next<evidence_phase, on_baseline> with_baseline(evidence_summary baseline) &&;

  template <class Deferred = void>
  void fixes() const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: record a baseline before asking for fixes (phase 1: evidence)");
  }
  template <class Deferred = void>
  void propose(const hypothesis&) const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: record a baseline and look at the pattern before proposing a "
                  "hypothesis (phase 1: evidence)");
  }
  template <class Deferred = void>
  void verify(const evidence_summary&) const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: there is nothing to verify yet; evidence comes first, then pattern, "
                  "hypothesis and fix (phase 1: evidence)");
  }
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

/// Phase 2: compare with expected behaviour and localize; rank candidate causes.
template <int Strikes>
class pattern_phase {
 public:
  explicit pattern_phase(std::unique_ptr<diagnosis_state> s) : s_(std::move(s)) {}
  static constexpr int strikes = Strikes;

  /// Which tensors, since when, consistent or intermittent, by substructure.
  [[nodiscard]] localization where() const { return localize(s_->current); }

  /// Rows of the pattern tables whose signature the evidence matches, most matching first;
  /// causes already rejected come last. Causes only: first actions wait for phase 4.
  [[nodiscard]] std::vector<std::string_view> candidates() const {
    std::vector<std::pair<int, const pattern_row*>> ranked;
    for (const auto& row : pattern_tables) {
      int hits = 0;
      for (const auto& f : s_->current.findings) hits += matches(row, f.symptom) ? 1 : 0;
      if (hits == 0) continue;
      const bool was_rejected = std::any_of(s_->rejected.begin(), s_->rejected.end(),
                                            [&](const hypothesis& h) { return h.cause == row.cause; });
      ranked.emplace_back(was_rejected ? -hits : hits, &row);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string_view> out;
    for (const auto& [score, row] : ranked)
      if (std::find(out.begin(), out.end(), row->cause) == out.end()) out.push_back(row->cause);
    return out;
  }

  /// States a hypothesis (one cause, its evidence, exactly one change): phase 3.
  next<pattern_phase, on_propose> propose(hypothesis h) && {
    s_->log.push_back("phase 2 (pattern): proposing '" + h.cause + "', changing " + h.change.variable);
    s_->confirmed = std::make_unique<hypothesis>(std::move(h));  // held until tested
    return next<pattern_phase, on_propose>(std::move(s_));
  }

  template <class Deferred = void>
  void fixes() const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: fixes come in phase 4; propose a hypothesis and confirm it first "
                  "(phase 2: pattern)");
  }
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

/// Phase 3: test the hypothesis — the same checks on a run with the one change — against the
/// baseline. The outcome is known at run time, so the next phase comes back as a variant:
/// confirmed -> fix_phase; rejected -> phase 2 with one more strike, or escalated at three.
template <int Strikes>
class hypothesis_phase {
 public:
  explicit hypothesis_phase(std::unique_ptr<diagnosis_state> s) : s_(std::move(s)) {}
  static constexpr int strikes = Strikes;
  using outcome = std::variant<next<hypothesis_phase, on_confirmed>, next<hypothesis_phase, on_rejected>>;

  [[nodiscard]] const hypothesis& tested() const noexcept { return *s_->confirmed; }

  /// Runs the experiment with the hypothesis's one change and decides.
  outcome test(const experiment& run) && {
    if (!run) throw error("hypothesis_phase::test: an empty experiment; pass a callable that trains with the change");
    evidence_summary variant = run(s_->confirmed->change);
    return std::move(*this).conclude(std::move(variant));
  }

  /// Decides from a variant run you made yourself (same checks as the baseline).
  outcome conclude(evidence_summary variant) && {
    const bool confirmed = better(variant, s_->baseline, s_->focus);
    const hypothesis& h = *s_->confirmed;
    s_->log.push_back("phase 3 (hypothesis): '" + h.cause + "' " + (confirmed ? "confirmed" : "rejected") +
                      " (" + h.change.variable + " " + std::to_string(h.change.from) + " -> " +
                      std::to_string(h.change.to) + ": recent loss " + std::to_string(variant.recent_loss) +
                      " vs baseline " + std::to_string(s_->baseline.recent_loss) + ")");
    if (confirmed) {
      s_->current = std::move(variant);
      return outcome(std::in_place_index<0>, std::move(s_));
    }
    s_->rejected.push_back(std::move(*s_->confirmed));
    s_->confirmed.reset();
    if constexpr (Strikes == 2) {
      s_->log.push_back("escalate: three hypotheses rejected; question the fundamentals");
    }
    return outcome(std::in_place_index<1>, std::move(s_));
  }

  template <class Deferred = void>
  void fixes() const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: the hypothesis is not confirmed yet; test it first (phase 3: hypothesis)");
  }
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

/// Phase 4: the first actions for the confirmed cause, then verification against the phase-1
/// baseline. Not better -> back to phase 2 with the new evidence.
class fix_phase {
 public:
  explicit fix_phase(std::unique_ptr<diagnosis_state> s) : s_(std::move(s)) {}
  using outcome = std::variant<next<fix_phase, on_better>, next<fix_phase, on_not_better>>;

  [[nodiscard]] const hypothesis& confirmed() const noexcept { return *s_->confirmed; }
  /// The method's first actions for the confirmed cause (only here).
  [[nodiscard]] std::vector<std::string_view> fixes() const {
    std::vector<std::string_view> out;
    for (const auto& row : pattern_tables)
      if (row.cause == s_->confirmed->cause) out.push_back(row.first_action);
    return out;
  }
  /// Re-runs the failed checks (the caller's run with the fix applied) and compares with the
  /// baseline.
  outcome verify(evidence_summary after_fix) &&;
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

/// Done: the fix verified better than the baseline.
class resolved {
 public:
  explicit resolved(std::unique_ptr<diagnosis_state> s) : s_(std::move(s)) {}
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

/// Three hypotheses rejected: stop tweaking parameters and question the fundamentals.
class escalated {
 public:
  explicit escalated(std::unique_ptr<diagnosis_state> s) : s_(std::move(s)) {}
  [[nodiscard]] static constexpr std::string_view message() noexcept {
    return "three hypotheses were rejected: stop tweaking parameters and question the "
           "fundamentals - the architecture, the data, the recipe - and compare with a "
           "known-working reference implementation";
  }
  template <class Deferred = void>
  void propose(const hypothesis&) const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: three hypotheses were rejected; stop tweaking parameters and question "
                  "the fundamentals (architecture, data, recipe, known-working reference)");
  }
  template <class Deferred = void>
  void fixes() const {
    static_assert(detail::always_false<Deferred>,
                  "mldiag: escalated diagnoses offer no parameter fixes; question the "
                  "fundamentals (architecture, data, recipe, known-working reference)");
  }
  [[nodiscard]] const diagnosis_state& state() const noexcept { return *s_; }

 private:
  std::unique_ptr<diagnosis_state> s_;
};

inline next<evidence_phase, on_baseline> evidence_phase::with_baseline(evidence_summary baseline) && {
  if (!baseline.obvious.any_run()) {
    throw error("evidence_phase::with_baseline: the baseline has no 'check the obvious first' results; "
                "run check_obvious(history) (learning rate, loss vs task, labels, NaN/Inf) and record them");
  }
  const auto symptoms = baseline.findings.size();
  s_->log.push_back("phase 1 (evidence): baseline recorded, " + std::to_string(symptoms) +
                    " symptom(s), recent loss " + std::to_string(baseline.recent_loss));
  if (baseline.findings.empty()) baseline.findings = s_->current.findings;  // the opening findings count
  s_->current = baseline;
  s_->baseline = std::move(baseline);
  return next<evidence_phase, on_baseline>(std::move(s_));
}

inline fix_phase::outcome fix_phase::verify(evidence_summary after_fix) && {
  const bool ok = better(after_fix, s_->baseline, s_->focus);
  s_->log.push_back(std::string("phase 4 (fix and verify): ") + (ok ? "better than the baseline: resolved"
                                                                     : "not better than the baseline: back to phase 2"));
  s_->current = std::move(after_fix);
  if (ok) return outcome(std::in_place_index<0>, std::move(s_));
  s_->confirmed.reset();
  return outcome(std::in_place_index<1>, std::move(s_));
}

/// Opens a diagnosis for a question in phase 1, with the findings that prompted it.
[[nodiscard]] inline evidence_phase diagnose(question q, std::vector<finding> opened_by = {}) {
  return evidence_phase(q, std::move(opened_by));
}

}  // namespace mldiag::protocol
