// SPDX-License-Identifier: Apache-2.0
// `mldiag scan` on short logs (epoch lines, pasted excerpts): evidence that is unmistakable
// on its face is reported without waiting for a window, a logged NaN gradient norm is
// evidence, and detectors that need more points than the log has say so.
#include <doctest/doctest.h>

#include "cli/logs.hpp"
#include "cli/scan.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace {

mldiag::cli::scan_result scan_text(const std::string& text, const std::string& file) {
  const auto runs = mldiag::cli::parse_log(text, file);
  REQUIRE(runs.size() == 1);
  return mldiag::cli::scan(runs[0]);
}

const mldiag::report::logged_finding* find(const mldiag::cli::scan_result& r, const std::string& symptom) {
  for (const auto& f : r.findings)
    if (f.finding.symptom == symptom) return &f;
  return nullptr;
}

bool has_note(const mldiag::cli::scan_result& r, const std::string& part) {
  return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

}  // namespace

TEST_CASE("scan: a Hugging Face log that blows up on its last line") {
  // The issue's log: loss 14.68, 14.36, 8195.77 with grad_norm NaN on the last line.
  const auto r = scan_text(R"({"log_history": [
    {"epoch": 1.0, "grad_norm": 3.1, "learning_rate": 5e-05, "loss": 14.68, "step": 10},
    {"epoch": 2.0, "grad_norm": 2.9, "learning_rate": 5e-05, "loss": 14.36, "step": 20},
    {"epoch": 3.0, "grad_norm": NaN, "learning_rate": 5e-05, "loss": 8195.77, "step": 30}
  ]})", "trainer_state.json");
  const auto* spike = find(r, "loss spike");
  REQUIRE(spike != nullptr);
  CHECK(spike->step == 30);
  CHECK(spike->finding.severity == mldiag::severity::critical);
  const auto* norm = find(r, "non-finite gradient norm");
  REQUIRE(norm != nullptr);
  CHECK(norm->step == 30);
  CHECK(has_note(r, "plateau: too few points to judge (it needs 500 loss values; the log has 3)"));
}

TEST_CASE("scan: seven epochs at the same loss, and a loss of exactly zero beside NaN gradient norms") {
  const auto flat = scan_text("step,loss\n1,2.3026\n2,2.3026\n3,2.3026\n4,2.3026\n5,2.3026\n6,2.3026\n7,2.3026\n", "e.csv");
  const auto* c = find(flat, "loss constant from the start");
  REQUIRE(c != nullptr);
  CHECK(c->step == 5);
  CHECK(c->finding.severity == mldiag::severity::warning);

  const auto zero = scan_text("step,loss,grad_norm\n1,2.1,1.5\n2,1.9,1.4\n3,0.0,nan\n4,0.0,nan\n5,0.0,nan\n", "z.csv");
  const auto* z = find(zero, "loss exactly zero");
  REQUIRE(z != nullptr);
  // Two zeros in a row (a loss that came back from one zero is a hinge's): found at step 4,
  // from step 3.
  CHECK(z->step == 4);
  CHECK(z->finding.first_step == 3);
  CHECK(z->finding.severity == mldiag::severity::warning);
  const auto* n = find(zero, "non-finite gradient norm");
  REQUIRE(n != nullptr);
  CHECK(n->step == 3);
  // Three in a row: critical, and what follows it is marked as its consequence.
  bool critical = false;
  for (const auto& f : zero.findings)
    critical = critical || (f.finding.symptom == "non-finite gradient norm" && f.finding.severity == mldiag::severity::critical && f.step == 5);
  CHECK(critical);
}

TEST_CASE("scan: a short healthy log is quiet and says what it cannot judge") {
  const auto r = scan_text("step,loss,val_loss\n1,1.9,1.95\n2,1.2,1.3\n3,0.9,1.0\n4,0.75,0.9\n5,0.66,0.86\n6,0.6,0.85\n", "ok.csv");
  for (const auto& f : r.findings) CHECK_MESSAGE(f.finding.severity < mldiag::severity::warning, f.finding.symptom);
  CHECK(has_note(r, "loss_not_decreasing: too few points to judge"));
  CHECK(has_note(r, "oscillation: too few points to judge (it needs 100 loss values; the log has 6)"));
}
