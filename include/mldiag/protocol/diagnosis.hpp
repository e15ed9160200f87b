// SPDX-License-Identifier: Apache-2.0
/// The four-phase method as a typestate: evidence -> pattern -> hypothesis -> fix and verify.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/protocol/evidence_summary.hpp"
#include "mldiag/protocol/log.hpp"
#include "mldiag/protocol/pattern_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>  // std::snprintf: the log's numbers
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::protocol {

/// The one variable a hypothesis changes: its name and its value before and after.
struct change {
  std::string variable;
  double from = 0.0;
  double to = 0.0;
};

namespace detail {
template <class...>
inline constexpr bool always_false = false;
}  // namespace detail

/// "I think `cause` because `evidence`; changing exactly one variable tests it." Built from a
/// pattern-table row (what `candidates()` returns), it names the row's cause and variable and
/// phase 4 hands out that row's first action; built from free text, phase 4 looks the cause up
/// in the tables (a cause no row has gets no first action).
struct hypothesis {
  std::string cause;
  std::string evidence;
  protocol::change change;
  const pattern_row* row = nullptr;  ///< the table row it came from, if any

  hypothesis(std::string cause_, std::string evidence_, protocol::change one)
      : cause(std::move(cause_)), evidence(std::move(evidence_)), change(std::move(one)) {}
  /// The row's cause, changing the row's variable from `from` to `to`.
  hypothesis(const pattern_row& r, std::string evidence_, double from, double to)
      : cause(r.cause), evidence(std::move(evidence_)), change{std::string(r.variable), from, to}, row(&r) {}
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

/// The phases, as types: the strike count (hypotheses rejected or fixes not verified so far)
/// is part of phases 2-4.
namespace phases {
struct evidence {};
template <int Strikes> struct pattern {};
template <int Strikes> struct hypothesis {};
template <int Strikes> struct fix {};
struct resolved {};
struct escalated {};
}  // namespace phases

/// What can happen to a diagnosis: the actions a user takes and the outcomes they have.
namespace events {
struct record_baseline {};  ///< `with_baseline(summary)`
struct look {};             ///< `where()`, `candidates()`
struct propose {};          ///< `propose(hypothesis)`
struct confirmed {};        ///< `test(run)` / `conclude(summary)`: better than the baseline
struct rejected {};         ///< ... not better
struct ask_fixes {};        ///< `fixes()`
struct verified {};         ///< `verify(summary)`: better than the baseline
struct not_verified {};     ///< ... not better
struct inconclusive {};     ///< a test or verification inside the noise: neither of the above
}  // namespace events

namespace detail {
// What every phase carries. Only the transitions below create and change it.
struct diagnosis_state {
  question asked = question::convergence;
  evidence_summary baseline;
  evidence_summary current;
  std::vector<hypothesis> rejected;      // and the hypotheses whose fix did not verify
  std::optional<hypothesis> proposed;    // stated in phase 2, under test in phase 3
  std::optional<hypothesis> confirmed;   // tested better than the baseline: phase 4's
  std::vector<log_entry> log;
  std::vector<std::string> focus;        // the symptoms that opened the diagnosis
};

struct obvious_checks_run {
  static bool holds(const diagnosis_state&, const evidence_summary& b) { return b.obvious.any_run(); }
};
template <verdict V>
struct comparison_is {
  static bool holds(const diagnosis_state& s, const evidence_summary& v) { return compare(v, s.baseline, s.focus).result == V; }
};
// The three are exclusive and cover every comparison (protocol::compare).
using better_than_baseline = comparison_is<verdict::better>;
using not_better_than_baseline = comparison_is<verdict::worse>;
using inside_the_noise = comparison_is<verdict::inconclusive>;
struct always {};

template <class Next, class Guard = always>
struct go {
  using next = Next;
  using guard = Guard;
};
template <class P>
using stay = go<P>;

// A failed attempt (a rejected hypothesis, a fix that did not verify) is a strike: back to
// phase 2 with one more, or, at the third, the end of tweaking.
template <int S>
using strike = std::conditional_t<(S < 2), phases::pattern<S + 1>, phases::escalated>;
}  // namespace detail

// =======================================================================================
// The protocol: every transition and every refusal, one table.
//
//   phase                  + event                          [guard]                   = next phase
template <class P, class E> struct row;  // no row: the phase has no such action
template <>      struct row<phases::evidence,      events::record_baseline> : detail::go<phases::pattern<0>,    detail::obvious_checks_run> {};
template <int S> struct row<phases::pattern<S>,    events::look>            : detail::stay<phases::pattern<S>> {};
template <int S> struct row<phases::pattern<S>,    events::propose>         : detail::go<phases::hypothesis<S>> {};
template <int S> struct row<phases::hypothesis<S>, events::confirmed>       : detail::go<phases::fix<S>,        detail::better_than_baseline> {};
template <int S> struct row<phases::hypothesis<S>, events::rejected>        : detail::go<detail::strike<S>,     detail::not_better_than_baseline> {};
template <int S> struct row<phases::hypothesis<S>, events::inconclusive>    : detail::go<phases::hypothesis<S>, detail::inside_the_noise> {};
template <int S> struct row<phases::fix<S>,        events::ask_fixes>       : detail::stay<phases::fix<S>> {};
template <int S> struct row<phases::fix<S>,        events::verified>        : detail::go<phases::resolved,      detail::better_than_baseline> {};
template <int S> struct row<phases::fix<S>,        events::not_verified>    : detail::go<detail::strike<S>,     detail::not_better_than_baseline> {};
template <int S> struct row<phases::fix<S>,        events::inconclusive>    : detail::go<phases::fix<S>,        detail::inside_the_noise> {};
//
//   refused: phase + event -> the compile error that says what to do instead
template <class P, class E, class D> struct refusal {
  static_assert(detail::always_false<D>, "mldiag: this phase of the method has no such action; see the table in mldiag/protocol/diagnosis.hpp");
};
template <class D> struct refusal<phases::evidence, events::ask_fixes, D> {
  static_assert(detail::always_false<D>, "mldiag: record a baseline before asking for fixes (phase 1: evidence)");
};
template <class D> struct refusal<phases::evidence, events::propose, D> {
  static_assert(detail::always_false<D>, "mldiag: record a baseline and look at the pattern before proposing a hypothesis (phase 1: evidence)");
};
template <class D> struct refusal<phases::evidence, events::verified, D> {
  static_assert(detail::always_false<D>, "mldiag: there is nothing to verify yet; evidence comes first, then pattern, hypothesis and fix (phase 1: evidence)");
};
template <int S, class D> struct refusal<phases::pattern<S>, events::ask_fixes, D> {
  static_assert(detail::always_false<D>, "mldiag: fixes come in phase 4; propose a hypothesis and confirm it first (phase 2: pattern)");
};
template <int S, class D> struct refusal<phases::hypothesis<S>, events::ask_fixes, D> {
  static_assert(detail::always_false<D>, "mldiag: the hypothesis is not confirmed yet; test it first (phase 3: hypothesis)");
};
template <int S, class D> struct refusal<phases::fix<S>, events::propose, D> {
  static_assert(detail::always_false<D>, "mldiag: verify the fix against the baseline first; a fix that is not better returns to phase 2 (phase 4: fix and verify)");
};
template <class D> struct refusal<phases::escalated, events::propose, D> {
  static_assert(detail::always_false<D>, "mldiag: three attempts failed (hypotheses rejected or fixes not verified); stop tweaking parameters and question the fundamentals (architecture, data, recipe, known-working reference)");
};
template <class D> struct refusal<phases::escalated, events::ask_fixes, D> {
  static_assert(detail::always_false<D>, "mldiag: escalated diagnoses offer no parameter fixes; question the fundamentals (architecture, data, recipe, known-working reference)");
};
template <class D> struct refusal<phases::resolved, events::propose, D> {
  static_assert(detail::always_false<D>, "mldiag: this diagnosis is resolved; a new symptom opens a new diagnosis (monitor::take_diagnosis)");
};
//   and in `hypothesis` itself: two changes at once -> "mldiag: a hypothesis changes exactly one variable"
// =======================================================================================

/// Whether phase `P` has action or outcome `E` (a row in the table).
template <class P, class E>
concept allows = requires { typename row<P, E>::next; };

template <class P> class diagnosis;
using evidence_phase = diagnosis<phases::evidence>;
/// Opens a diagnosis for a question in phase 1, with the findings that prompted it.
[[nodiscard]] inline evidence_phase diagnose(question q, std::vector<finding> opened_by = {});

/// The phase that event `E` leads to from phase `P`.
template <class P, class E>
using next = diagnosis<typename row<P, E>::next>;

template <int S> using pattern_phase = diagnosis<phases::pattern<S>>;
template <int S> using hypothesis_phase = diagnosis<phases::hypothesis<S>>;
template <int S> using fix_phase = diagnosis<phases::fix<S>>;
using resolved = diagnosis<phases::resolved>;
using escalated = diagnosis<phases::escalated>;

namespace detail {
template <class P> struct phase_traits;
template <> struct phase_traits<phases::evidence> { static constexpr phase_id id = phase_id::evidence; static constexpr int strikes = 0; };
template <int S> struct phase_traits<phases::pattern<S>> { static constexpr phase_id id = phase_id::pattern; static constexpr int strikes = S; };
template <int S> struct phase_traits<phases::hypothesis<S>> { static constexpr phase_id id = phase_id::hypothesis; static constexpr int strikes = S; };
template <int S> struct phase_traits<phases::fix<S>> { static constexpr phase_id id = phase_id::fix; static constexpr int strikes = S; };
template <> struct phase_traits<phases::resolved> { static constexpr phase_id id = phase_id::fix; static constexpr int strikes = -1; };
template <> struct phase_traits<phases::escalated> { static constexpr phase_id id = phase_id::hypothesis; static constexpr int strikes = 3; };

}  // namespace detail

/// A run-time outcome with three possible next phases, by name: `confirmed()`/`rejected()`/
/// `inconclusive()` after a test, `better()`/`not_better()`/`inconclusive()` after a
/// verification. Still a `std::variant` of the three phases, for `std::visit`. Taking the
/// phase it does not hold is an error that says which it holds.
template <class Yes, class No, class Same, class Names>
class outcome : public std::variant<Yes, No, Same> {
 public:
  using std::variant<Yes, No, Same>::variant;
  [[nodiscard]] bool held() const noexcept { return this->index() == 0; }
  [[nodiscard]] bool was_inconclusive() const noexcept { return this->index() == 2; }
  [[nodiscard]] Yes take_yes() && { return take<0>(std::move(*this)); }
  [[nodiscard]] No take_no() && { return take<1>(std::move(*this)); }
  /// Inside the noise: the same phase, the same hypothesis, no strike. Pool more runs
  /// (`protocol::pool`) and decide again.
  [[nodiscard]] Same inconclusive() && { return take<2>(std::move(*this)); }

 private:
  template <std::size_t I, class Self>
  static auto take(Self&& self) {
    if (self.index() != I) {
      static constexpr std::string_view names[] = {Names::yes, Names::no, "inconclusive"};
      const std::string_view holds = self.index() < 3 ? names[self.index()] : "valueless";
      throw error(std::string("the outcome is not '") + std::string(names[I]) + "' but '" + std::string(holds) +
                  "'; check it first (" + std::string(Names::check) + ")");
    }
    return std::get<I>(std::move(self));
  }
};

namespace detail {
struct test_names {
  static constexpr std::string_view yes = "confirmed", no = "rejected",
                                    check = "was_confirmed(), was_rejected(), was_inconclusive()";
};
struct verify_names {
  static constexpr std::string_view yes = "better", no = "not better",
                                    check = "was_better(), was_not_better(), was_inconclusive()";
};
}  // namespace detail

/// After `test`/`conclude`: confirmed (phase 4), rejected (phase 2 with one more strike, or
/// escalated at the third), or inconclusive (still phase 3, the same hypothesis, no strike).
template <class Yes, class No, class Same>
class test_outcome : public outcome<Yes, No, Same, detail::test_names> {
 public:
  using outcome<Yes, No, Same, detail::test_names>::outcome;
  [[nodiscard]] bool was_confirmed() const noexcept { return this->held(); }
  [[nodiscard]] bool was_rejected() const noexcept { return this->index() == 1; }
  [[nodiscard]] Yes confirmed() && { return std::move(*this).take_yes(); }
  [[nodiscard]] No rejected() && { return std::move(*this).take_no(); }
};

/// After `verify`: better than the baseline (resolved), not better (phase 2 with one more
/// strike, or escalated at the third), or inconclusive (still phase 4, the same confirmed
/// hypothesis, no strike).
template <class Yes, class No, class Same>
class verify_outcome : public outcome<Yes, No, Same, detail::verify_names> {
 public:
  using outcome<Yes, No, Same, detail::verify_names>::outcome;
  [[nodiscard]] bool was_better() const noexcept { return this->held(); }
  [[nodiscard]] bool was_not_better() const noexcept { return this->index() == 1; }
  [[nodiscard]] Yes better() && { return std::move(*this).take_yes(); }
  [[nodiscard]] No not_better() && { return std::move(*this).take_no(); }
};

namespace detail {
// The log's numbers: the change as written ("10 -> 1"); losses to four decimals, or more
// where the standard error needs them to show two significant digits.
inline std::string number(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}
inline std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
inline std::string describe(const change& c) { return c.variable + " " + number(c.from) + " -> " + number(c.to); }
// "recent loss 2.6108 vs baseline 2.6155, effect 0.0047 +- 0.0120, z 0.39"
inline std::string describe(const comparison& c, const evidence_summary& v, const evidence_summary& base) {
  int d = 4;
  for (double scale : {c.loss.se, std::fabs(base.recent_loss)})
    if (std::isfinite(scale) && scale > 0) d = std::max(d, std::min(12, 1 - static_cast<int>(std::floor(std::log10(scale)))));
  const auto runs = [](const evidence_summary& e) {
    return e.runs > 1 ? " (" + std::to_string(e.runs) + " runs)" : std::string();
  };
  std::string out = "recent loss " + number(v.recent_loss, d) + runs(v) + " vs baseline " + number(base.recent_loss, d) + runs(base);
  if (c.loss.noise_known) {
    out += ", effect " + number(c.loss.effect, d) + " +- " + number(c.loss.se, d) + ", z " + number(c.loss.z, 2);
  } else {
    out += ", noise unknown: judged without it (not higher is better)";
  }
  return out;
}
// Why a comparison is not better, for the log.
inline std::string why_not(const comparison& c) {
  if (!c.new_symptom.empty()) return "; new symptom: " + c.new_symptom;
  if (!c.remaining.empty()) return "; still shows " + c.remaining;
  if (!std::isfinite(c.loss.effect)) return ": no finite recent loss";
  return c.loss.noise_known ? ": the loss is worse beyond the noise" : ": the loss is higher";
}
}  // namespace detail

/// A diagnosis in phase `P`. Every phase can be read; what it can *do* is the table's. An
/// action the table refuses fails to compile with the refusal's message; a transition consumes
/// the object (`std::move(dx).with_baseline(...)`) and returns the next phase. No phase can be
/// constructed except by `diagnose` (or the monitor) and the transitions.
template <class P>
class diagnosis {
 public:
  static constexpr phase_id phase = detail::phase_traits<P>::id;
  /// Failed attempts so far (3 once escalated; -1 once resolved).
  static constexpr int strikes = detail::phase_traits<P>::strikes;

  diagnosis(diagnosis&&) noexcept = default;
  diagnosis& operator=(diagnosis&&) noexcept = default;

  [[nodiscard]] mldiag::question asked() const noexcept { return s_->asked; }
  [[nodiscard]] const evidence_summary& baseline() const noexcept { return s_->baseline; }
  [[nodiscard]] const evidence_summary& current() const noexcept { return s_->current; }
  [[nodiscard]] const std::vector<hypothesis>& rejected() const noexcept { return s_->rejected; }
  [[nodiscard]] const std::optional<hypothesis>& proposed() const noexcept { return s_->proposed; }
  [[nodiscard]] const std::optional<hypothesis>& confirmed() const noexcept { return s_->confirmed; }
  [[nodiscard]] const std::vector<log_entry>& log() const noexcept { return s_->log; }
  [[nodiscard]] const std::vector<std::string>& focus() const noexcept { return s_->focus; }
  /// The hypothesis under test (phase 3).
  [[nodiscard]] const hypothesis& tested() const {
    if (!s_->proposed) throw error("no hypothesis is under test in this phase");
    return *s_->proposed;
  }
  /// Escalated: stop tweaking parameters and question the fundamentals.
  [[nodiscard]] static constexpr std::string_view message() noexcept
    requires std::is_same_v<P, phases::escalated> {
    return "three attempts failed (hypotheses rejected or fixes not verified): stop tweaking parameters and question the "
           "fundamentals - the architecture, the data, the recipe - and compare with a "
           "known-working reference implementation";
  }

  // Called on an lvalue: the table's refusal where the phase has no such action, else a
  // reminder that a transition consumes the diagnosis.
  template <class D = void> void with_baseline(const evidence_summary&) const& { consume<events::record_baseline, D>(); }
  template <class D = void> void propose(const hypothesis&) const& { consume<events::propose, D>(); }
  template <class D = void> void test(const experiment&) const& { consume<events::confirmed, D>(); }
  template <class D = void> void conclude(const evidence_summary&) const& { consume<events::confirmed, D>(); }
  template <class D = void> void verify(const evidence_summary&) const& { consume<events::verified, D>(); }

  /// Phase 1: records the baseline (with its "check the obvious first" results) and moves to
  /// phase 2. Throws if no obvious check was run.
  template <class D = void>
  auto with_baseline(evidence_summary b) && {
    using E = events::record_baseline;
    if constexpr (!allows<P, E>) return refuse<E, D>();
    else {
      if (!guard<E>(b)) {
        throw error("with_baseline: the baseline has no 'check the obvious first' results; run "
                    "check_obvious(history) (learning rate, loss vs task, labels, NaN/Inf) and record them");
      }
      write("baseline recorded, " + std::to_string(b.findings.size()) + " symptom(s), recent loss " +
            detail::number(b.recent_loss, 6) +
            (std::isnan(b.recent_loss_se) ? std::string(" (noise unknown)") : " +- " + detail::number(b.recent_loss_se, 6)) +
            (b.runs > 1 ? " over " + std::to_string(b.runs) + " runs" : std::string()));
      if (b.findings.empty()) b.findings = s_->current.findings;  // the opening findings count
      s_->current = b;
      s_->baseline = std::move(b);
      return go<E>();
    }
  }

  /// Phase 2: which tensors, since when, consistent or intermittent, by substructure.
  template <class D = void>
  [[nodiscard]] auto where() const {
    if constexpr (!allows<P, events::look>) return refuse<events::look, D>();
    else return localize(s_->current, s_->focus);
  }

  /// Phase 2: the pattern-table rows whose signature the evidence matches, most matching
  /// first; rows whose cause was rejected come last. Causes and variables only: first actions
  /// wait for phase 4. `hypothesis(row, evidence, from, to)` proposes one.
  template <class D = void>
  [[nodiscard]] auto candidates() const {
    if constexpr (!allows<P, events::look>) return refuse<events::look, D>();
    else {
      // A row qualifies by the diagnosis's own symptoms (the focus); the run's other findings
      // only rank the qualified rows (co-occurring evidence), so each diagnosis gets its own
      // candidates.
      std::vector<std::pair<int, const pattern_row*>> ranked;
      for (const auto& r : pattern_tables) {
        const bool qualified = s_->focus.empty() || std::any_of(s_->focus.begin(), s_->focus.end(),
                                                                [&](const std::string& f) { return matches(r, f); });
        if (!qualified) continue;
        int hits = 0;
        for (const auto& f : s_->current.findings) hits += matches(r, f.symptom) ? 1 : 0;
        if (hits == 0) continue;
        const bool was_rejected = std::any_of(s_->rejected.begin(), s_->rejected.end(),
                                              [&](const hypothesis& h) { return h.cause == r.cause; });
        ranked.emplace_back(was_rejected ? -hits : hits, &r);
      }
      std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      std::vector<const pattern_row*> out;
      for (const auto& [score, r] : ranked)
        if (std::none_of(out.begin(), out.end(), [&](const pattern_row* o) { return o->cause == r->cause; })) out.push_back(r);
      return out;
    }
  }

  /// Phase 2: states a hypothesis (one cause, its evidence, exactly one change): phase 3.
  template <class D = void>
  auto propose(hypothesis h) && {
    using E = events::propose;
    if constexpr (!allows<P, E>) return refuse<E, D>();
    else {
      write("proposing '" + h.cause + "', changing " + h.change.variable);
      s_->proposed = std::move(h);
      return go<E>();
    }
  }

  /// Phase 3: runs the experiment with the hypothesis's one change and decides (as
  /// `conclude`). An experiment is one run: where the outcome is inconclusive, run the change
  /// with more seeds yourself and `conclude(pool(...))`.
  template <class D = void>
  auto test(const experiment& run) && {
    if constexpr (!allows<P, events::confirmed>) return refuse<events::confirmed, D>();
    else {
      if (!run) throw error("hypothesis test: an empty experiment; pass a callable that trains with the change");
      evidence_summary v = run(s_->proposed->change);
      return std::move(*this).conclude(std::move(v));
    }
  }

  /// Phase 3: decides from a variant run you made yourself (the same checks as the baseline;
  /// `pool(...)` of several seeds where one run is too noisy). Confirmed when the focus
  /// symptoms cleared, none is new and the loss is better beyond the noise; inconclusive when
  /// only the loss is inside the noise (the same phase and hypothesis, no strike: pool more
  /// runs and conclude again); rejected otherwise.
  template <class D = void>
  auto conclude(evidence_summary v) && {
    using Yes = events::confirmed;
    using No = events::rejected;
    using Same = events::inconclusive;
    if constexpr (!allows<P, Yes>) return refuse<Yes, D>();
    else {
      using result = test_outcome<next<P, Yes>, next<P, No>, next<P, Same>>;
      const hypothesis& h = *s_->proposed;
      const comparison c = compare(v, s_->baseline, s_->focus);
      const std::string how = detail::describe(h.change) + ": " + detail::describe(c, v, s_->baseline);
      if (guard<Yes>(v)) {
        write("'" + h.cause + "' confirmed (" + how + ")");
        s_->current = std::move(v);
        s_->confirmed = std::move(s_->proposed);
        s_->proposed.reset();
        return result(std::in_place_index<0>, go<Yes>());
      }
      if (guard<Same>(v)) {
        write("'" + h.cause + "' inconclusive (" + how + ": inside the noise; pool more runs)");
        return result(std::in_place_index<2>, go<Same>());
      }
      write("'" + h.cause + "' rejected (" + how + detail::why_not(c) + ")");
      s_->rejected.push_back(std::move(*s_->proposed));
      s_->proposed.reset();
      if constexpr (std::is_same_v<typename row<P, No>::next, phases::escalated>) write(escalation());
      return result(std::in_place_index<1>, go<No>());
    }
  }

  /// Phase 4: the method's first actions for the confirmed cause (only here).
  template <class D = void>
  [[nodiscard]] auto fixes() const {
    if constexpr (!allows<P, events::ask_fixes>) return refuse<events::ask_fixes, D>();
    else {
      const hypothesis& h = *s_->confirmed;
      std::vector<std::string_view> out;
      if (h.row != nullptr) out.push_back(h.row->first_action);
      else
        for (const auto& r : pattern_tables)
          if (r.cause == h.cause) out.push_back(r.first_action);
      return out;
    }
  }

  /// Phase 4: re-runs the failed checks (your run with the fix applied, or `pool(...)` of
  /// several) and compares with the phase-1 baseline. Not better is a strike: back to phase 2,
  /// or escalated at the third. Inside the noise is neither: still phase 4, the same confirmed
  /// hypothesis; pool more runs of the fix and verify again.
  template <class D = void>
  auto verify(evidence_summary after_fix) && {
    using Yes = events::verified;
    using No = events::not_verified;
    using Same = events::inconclusive;
    if constexpr (!allows<P, Yes>) return refuse<Yes, D>();
    else {
      using result = verify_outcome<next<P, Yes>, next<P, No>, next<P, Same>>;
      const comparison c = compare(after_fix, s_->baseline, s_->focus);
      const std::string how = detail::describe(c, after_fix, s_->baseline);
      const bool ok = guard<Yes>(after_fix);
      const bool same = !ok && guard<Same>(after_fix);
      if (ok) write("better than the baseline: resolved (" + how + ")");
      else if (same) write("inside the noise: still in phase 4 (" + how + "); pool more runs of the fix and verify again");
      else write("not better than the baseline: back to phase 2 (" + how + detail::why_not(c) + ")");
      s_->current = std::move(after_fix);
      if (ok) return result(std::in_place_index<0>, go<Yes>());
      if (same) return result(std::in_place_index<2>, go<Same>());
      s_->rejected.push_back(std::move(*s_->confirmed));
      s_->confirmed.reset();
      if constexpr (std::is_same_v<typename row<P, No>::next, phases::escalated>) write(escalation());
      return result(std::in_place_index<1>, go<No>());
    }
  }

 private:
  template <class>
  friend class diagnosis;
  friend evidence_phase diagnose(question, std::vector<finding>);

  explicit diagnosis(std::unique_ptr<detail::diagnosis_state> s) : s_(std::move(s)) {}

  template <class E, class D>
  static void refuse() {
    (void)sizeof(refusal<P, E, D>);  // instantiating the refusal fails with its message
  }
  template <class E, class D>
  static void consume() {
    if constexpr (!allows<P, E>) refuse<E, D>();
    else static_assert(detail::always_false<D>, "mldiag: a transition consumes the diagnosis: write std::move(dx).action(...)");
  }
  template <class E>
  bool guard(const evidence_summary& v) const {
    using G = typename row<P, E>::guard;
    if constexpr (std::is_same_v<G, detail::always>) return true;
    else return G::holds(*s_, v);
  }
  template <class E>
  next<P, E> go() {
    return next<P, E>(std::move(s_));
  }
  void write(std::string text) { s_->log.push_back({phase, std::move(text)}); }
  static std::string escalation() {
    return "escalate: three attempts failed (hypotheses rejected or fixes not verified); question the fundamentals";
  }

  std::unique_ptr<detail::diagnosis_state> s_;
};

inline evidence_phase diagnose(question q, std::vector<finding> opened_by) {
  auto s = std::make_unique<detail::diagnosis_state>();
  s->asked = q;
  for (const auto& f : opened_by)
    if (std::find(s->focus.begin(), s->focus.end(), f.symptom) == s->focus.end()) s->focus.push_back(f.symptom);
  s->current.findings = std::move(opened_by);
  std::string opened = "opened for " + std::string(name(q));
  if (!s->current.findings.empty()) {
    const finding& f = s->current.findings.front();
    opened += ": " + f.symptom + (f.first_step >= 0 ? " since step " + std::to_string(f.first_step) : std::string());
  }
  s->log.push_back({phase_id::evidence, std::move(opened)});
  return evidence_phase(std::move(s));
}

}  // namespace mldiag::protocol
