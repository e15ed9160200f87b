// SPDX-License-Identifier: Apache-2.0
// The escalation policy: `decide` over the grounds a detector states, `explain` in words, and
// `escalate` writing both into the finding. The policy is a constexpr function: its table is
// checked at compile time, and once more at run time so that a failure names the row.
#include <doctest/doctest.h>

#include "mldiag/detectors/escalation.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/vocab/symptom.hpp"

#include <string>

namespace {

using mldiag::severity;
using mldiag::detectors::decide;
using mldiag::detectors::explain;
using mldiag::detectors::grounds;

// The policy's rows, as detectors/escalation.hpp states them.
constexpr grounds unambiguous{.unambiguous = true};
constexpr grounds expected_harm{.expected = true, .harm = true, .magnitude = 10.0, .critical_at = 2.0};
constexpr grounds harm{.harm = true};
constexpr grounds reached{.held = 5, .horizon = 5};
constexpr grounds below{.held = 4, .horizon = 5};
constexpr grounds never{.held = 1000, .horizon = 0};  // a horizon of 0: persistence never counts
constexpr grounds harm_at_line{.harm = true, .magnitude = 2.5, .critical_at = 2.5};
constexpr grounds harm_below_line{.harm = true, .magnitude = 2.49, .critical_at = 2.5};
constexpr grounds persisted_at_line{.held = 5, .horizon = 5, .magnitude = 3.0, .critical_at = 2.5};
constexpr grounds magnitude_alone{.held = 1, .horizon = 5, .magnitude = 100.0, .critical_at = 2.5};

static_assert(decide(unambiguous) == severity::critical);
static_assert(decide(expected_harm) == severity::info);
static_assert(decide(harm) == severity::warning);
static_assert(decide(reached) == severity::warning);
static_assert(decide(below) == severity::info);
static_assert(decide(never) == severity::info);
static_assert(decide(harm_at_line) == severity::critical);
static_assert(decide(harm_below_line) == severity::warning);
static_assert(decide(persisted_at_line) == severity::critical);
static_assert(decide(magnitude_alone) == severity::info);
static_assert(decide(grounds{}) == severity::info);  // nothing stated: no consequence yet

bool says(const std::string& why, const char* part) { return why.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("decide: unambiguous is critical, expected is info, harm or persistence a warning, critical at the line") {
  CHECK(decide(unambiguous) == severity::critical);
  // Unambiguous wins over expected: a NaN is critical whatever explains the run.
  CHECK(decide({.unambiguous = true, .expected = true}) == severity::critical);
  // Expected wins over harm and magnitude.
  CHECK(decide(expected_harm) == severity::info);
  CHECK(decide(harm) == severity::warning);
  // Persistence: harm on its own once it reaches the horizon, not before, and never with a
  // horizon of 0.
  CHECK(decide(reached) == severity::warning);
  CHECK(decide({.held = 6, .horizon = 5}) == severity::warning);
  CHECK(decide(below) == severity::info);
  CHECK(decide(never) == severity::info);
  // The critical line: at or above it, with harm or persistence, critical; below, a warning.
  CHECK(decide(harm_at_line) == severity::critical);
  CHECK(decide(harm_below_line) == severity::warning);
  CHECK(decide(persisted_at_line) == severity::critical);
  // Magnitude alone, without harm or persistence, is info however large.
  CHECK(decide(magnitude_alone) == severity::info);
  CHECK(decide({.magnitude = 1e300, .critical_at = 1.0}) == severity::info);
}

TEST_CASE("explain: the reason names what decided, the critical line and the detector's note") {
  CHECK(explain(unambiguous) == "unambiguous");
  CHECK(says(explain(expected_harm), "expected"));
  CHECK_FALSE(says(explain(expected_harm), "critical line"));  // expected: the line is not reached
  CHECK(explain(harm) == "consequence observed");
  CHECK(explain(reached) == "held 5 of 5 observations");
  CHECK(explain(below) == "no consequence yet");
  CHECK(explain(magnitude_alone) == "no consequence yet");
  CHECK(explain(harm_at_line) == "consequence observed; at or above its critical line");
  CHECK(explain(persisted_at_line) == "held 5 of 5 observations; at or above its critical line");
  CHECK(explain({.unambiguous = true, .magnitude = 10.0, .critical_at = 1.0}) == "unambiguous");
  CHECK(explain({.harm = true, .note = "the loss rose with the norm"}) == "consequence observed; the loss rose with the norm");
  CHECK(explain({.expected = true, .note = "full-batch training"}) == "expected; full-batch training");
}

TEST_CASE("escalate: the finding gets the policy's severity and reason, and keeps the rest") {
  const mldiag::finding f = mldiag::make_finding(mldiag::question::early_anomaly, mldiag::symptoms::loss_spike,
                                                 mldiag::severity::info, 42, "loss_spike", {{"ratio_to_median", 3.0}});
  const auto up = mldiag::detectors::escalate(f, {.harm = true, .magnitude = 3.0, .critical_at = 2.5, .note = "the loss stayed up"});
  CHECK(up.severity == severity::critical);
  CHECK(up.why == "consequence observed; at or above its critical line; the loss stayed up");
  CHECK(up.symptom == f.symptom);
  CHECK(up.first_step == 42);
  CHECK(up.last_step == 42);
  CHECK(up.detector == "loss_spike");
  CHECK(up.evidence == f.evidence);
  // Whatever severity the finding was made with, the policy decides: a critical one with no
  // grounds becomes info.
  mldiag::finding loud = f;
  loud.severity = severity::critical;
  const auto quiet = mldiag::detectors::escalate(loud, {});
  CHECK(quiet.severity == severity::info);
  CHECK(quiet.why == "no consequence yet");
}
