// SPDX-License-Identifier: Apache-2.0
// `mldiag scan` on short logs (epoch lines, pasted excerpts): evidence that is unmistakable
// on its face is reported without waiting for a window, a logged NaN gradient norm is
// evidence, and detectors that need more points than the log has say so.
#include <doctest/doctest.h>

#include "cli/logs.hpp"
#include "cli/scan.hpp"

#include <algorithm>
#include <cmath>
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

bool any_warning(const mldiag::cli::scan_result& r) {
  return std::any_of(r.findings.begin(), r.findings.end(),
                     [](const auto& f) { return f.finding.severity >= mldiag::severity::warning; });
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
  CHECK(c->step == 3);  // a short series: three equal values, not five
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

TEST_CASE("scan: short logs - a jump that never recovers, a gradient-norm jump after two rows, a loss constant for three") {
  // Issue 38's epoch logs. A 4x jump after the third epoch that stays: found on the second
  // value that holds it (the mean of two at 3x the best mean of two).
  const auto jump = scan_text("step,loss\n1,2.30\n2,1.10\n3,0.80\n4,3.2\n5,3.1\n6,3.05\n7,3.0\n", "j.csv");
  const auto* far = find(jump, "loss far above its best");
  REQUIRE(far != nullptr);
  CHECK(far->step == 5);
  CHECK(far->finding.severity == mldiag::severity::warning);
  CHECK(has_note(jump, "a short series (7 loss values)"));
  // Twin: one epoch at 4x that comes back is not a jump that holds.
  const auto back = scan_text("step,loss\n1,2.30\n2,1.10\n3,0.80\n4,3.2\n5,0.75\n6,0.7\n7,0.68\n", "b.csv");
  CHECK(!any_warning(back));

  // A 13x gradient-norm jump after two rows while the loss rises: a warning once the loss,
  // up on two rows of the jump, is still up on the next (it has not come back: issue 38).
  const auto norm = scan_text("step,loss,grad_norm\n1,2.30,1.2\n2,2.05,1.0\n3,2.2,13.5\n4,2.4,14.2\n5,2.6,15.0\n6,2.7,15.5\n", "g.csv");
  const auto* exploding = find(norm, "exploding gradients");
  REQUIRE(exploding != nullptr);
  CHECK(exploding->finding.severity == mldiag::severity::warning);
  CHECK(exploding->finding.first_step == 3);
  CHECK(exploding->step <= 6);
  // Twin: the loss comes back on the next row: info, "the loss came back".
  const auto back_norm = scan_text("step,loss,grad_norm\n1,2.30,1.2\n2,2.05,1.0\n3,2.2,13.5\n4,2.4,14.2\n5,2.6,15.0\n6,2.0,15.5\n7,1.9,15.1\n", "gb.csv");
  CHECK(find(back_norm, "exploding gradients") == nullptr);
  // Twin: the norm grows as the loss falls (a network leaving its first plateau).
  const auto leaving = scan_text("step,loss,grad_norm\n1,2.30,0.5\n2,1.5,2.5\n3,1.1,6.0\n4,0.9,5.8\n5,0.8,5.6\n6,0.75,5.5\n", "l.csv");
  CHECK(!any_warning(leaving));

  // A loss constant to four decimals: found at the third value, not the fifth.
  const auto flat = scan_text("step,loss\n1,0.6931\n2,0.6931\n3,0.6931\n4,0.6931\n5,0.6931\n", "c.csv");
  const auto* c = find(flat, "loss constant from the start");
  REQUIRE(c != nullptr);
  CHECK(c->step == 3);
  // Twin: the fourth decimal moves on every epoch.
  CHECK(find(scan_text("step,loss\n1,0.6931\n2,0.6925\n3,0.6911\n4,0.6890\n5,0.6861\n", "m.csv"), "loss constant from the start") == nullptr);

  // A long log keeps the windows sized for batch losses: the same jump, held for two steps
  // after 100 steps of a falling loss, is judged by loss_spike, not by the short-series rule.
  std::string text = "step,loss\n";
  for (int i = 0; i < 100; ++i) text += std::to_string(i) + "," + std::to_string(2.3 * std::exp(-i / 40.0) + 0.5) + "\n";
  const auto longer = scan_text(text, "long.csv");
  CHECK(!has_note(longer, "a short series"));
}

TEST_CASE("scan: a short healthy log is quiet and says what it cannot judge") {
  const auto r = scan_text("step,loss,val_loss\n1,1.9,1.95\n2,1.2,1.3\n3,0.9,1.0\n4,0.75,0.9\n5,0.66,0.86\n6,0.6,0.85\n", "ok.csv");
  for (const auto& f : r.findings) CHECK_MESSAGE(f.finding.severity < mldiag::severity::warning, f.finding.symptom);
  CHECK(has_note(r, "loss_not_decreasing: too few points to judge"));
  CHECK(has_note(r, "oscillation: too few points to judge (it needs 100 loss values; the log has 6)"));
}

namespace {

// A policy-gradient run's log: the surrogate loss hovers near 0 while the return climbs (or,
// with `flat_return`, does not).
std::string policy_gradient_csv(bool flat_return, const std::string& return_column = "return") {
  std::string text = "step,loss," + return_column + "\n";
  for (int i = 0; i < 400; ++i) {
    const double loss = 0.01 * std::sin(i * 0.7) + 0.004 * std::cos(i * 1.9);
    const double ret = flat_return ? 20.0 + 3.0 * std::sin(i * 0.37) : 20.0 + 180.0 * (1.0 - std::exp(-i / 120.0)) + 3.0 * std::sin(i * 0.37);
    text += std::to_string(i) + "," + std::to_string(loss) + "," + std::to_string(ret) + "\n";
  }
  return text;
}

mldiag::cli::scan_result scan_declared(const std::string& text, const std::string& file, const mldiag::cli::scan_options& o) {
  const auto runs = mldiag::cli::parse_log(text, file);
  REQUIRE(runs.size() == 1);
  return mldiag::cli::scan(runs[0], o);
}

bool any_warning_in(const mldiag::cli::scan_result& r) {
  return std::any_of(r.findings.begin(), r.findings.end(),
                     [](const auto& f) { return f.finding.severity >= mldiag::severity::warning; });
}

}  // namespace

TEST_CASE("scan: --objective not_progress with --metric reads progress from the return") {
  mldiag::cli::scan_options declared;
  declared.task.objective = mldiag::objective::not_progress;
  declared.metrics.emplace_back("return", true);
  // Declared: a surrogate near 0 with a climbing return is a healthy run.
  CHECK(!any_warning_in(scan_declared(policy_gradient_csv(false), "pg.csv", declared)));
  // Twin: undeclared, the surrogate reads as a loss that does not decrease.
  CHECK(find(scan_text(policy_gradient_csv(false), "pg.csv"), "loss not decreasing") != nullptr);
  // Twin: declared, a return that does not climb is the verdict.
  const auto flat = scan_declared(policy_gradient_csv(true), "pg.csv", declared);
  const auto* stalled = find(flat, "progress metric not improving");
  REQUIRE(stalled != nullptr);
  CHECK(stalled->finding.severity == mldiag::severity::warning);
  // A metric column the log does not have is named in a note, not ignored in silence.
  mldiag::cli::scan_options missing = declared;
  missing.metrics = {{"episode_return", true}};
  CHECK(has_note(scan_declared(policy_gradient_csv(false), "pg.csv", missing), "--metric episode_return: the log has no such column"));
}

TEST_CASE("scan: a JSON Lines report's progress/ and change/ columns are read as declarations") {
  // What report::jsonl writes for observe_metric("return", v, true) and regime_change{data}.
  std::string text;
  for (int i = 0; i < 400; ++i) {
    const double ret = 20.0 + 3.0 * std::sin(i * 0.37);
    text += "{\"step\":" + std::to_string(i) + ",\"loss\":1.0,\"progress/return/higher\":" + std::to_string(ret) + "}\n";
  }
  mldiag::cli::scan_options declared;
  declared.task.objective = mldiag::objective::not_progress;
  const auto r = scan_declared(text, "run.jsonl", declared);
  REQUIRE(find(r, "progress metric not improving") != nullptr);
  CHECK(find(r, "progress metric not improving")->finding.where.at(0).first == "return");
}

TEST_CASE("scan: --event at a step the log does not have takes effect at the next logged one") {
  // A loss that falls, then jumps at step 300 (a harder curriculum stage), logged every 2 steps.
  std::string text = "step,loss\n";
  for (int i = 0; i < 600; i += 2) {
    const double level = i < 300 ? 0.5 + 2.5 * std::exp(-i / 60.0) : 0.5 + 2.0 * std::exp(-(i - 300) / 60.0);
    text += std::to_string(i) + "," + std::to_string(level * (1.0 + 0.01 * std::sin(i))) + "\n";
  }
  CHECK(find(scan_text(text, "c.csv"), "loss spike") != nullptr);  // twin: undeclared
  mldiag::cli::scan_options declared;
  declared.events = {{299, mldiag::change::data}};
  CHECK(!any_warning_in(scan_declared(text, "c.csv", declared)));
  declared.events = {{5000, mldiag::change::data}};
  CHECK(has_note(scan_declared(text, "c.csv", declared), "--event 5000:data: after the log's last step"));
}
