// SPDX-License-Identifier: Apache-2.0
// Reports attached to a monitor in one line: the JSON Lines file read back against what the
// monitor delivered, evaluations at their step, the HTML page written at the end (by finish()
// or by the destructor) with the open diagnoses.
#include <doctest/doctest.h>

#include "mldiag/report/attach.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 3 epochs of 50 steps; from step 100 the learning rate is 100x and the loss climbs.
void run(mldiag::monitor& mon, std::vector<mldiag::finding>& delivered) {
  mon.attach([&](const mldiag::finding& f) { delivered.push_back(f); });
  std::vector<float> g(32, 0.02f);
  double loss = 1.0;
  for (int step = 0; step < 150; ++step) {
    loss = step < 100 ? 1.0 * std::exp(-step / 80.0) + 0.3 : loss * 1.25;
    for (auto& v : g) v = static_cast<float>(0.02 * (step < 100 ? 1.0 : std::pow(1.25, step - 99)));
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, step < 100 ? 1e-3 : 0.1);
    mon.observe(mldiag::role::gradient, "fc1.weight", g);
    mon.end_step();
    if (step % 50 == 49) mon.observe_evaluation(0.5 + step / 1000.0);
  }
}

}  // namespace

TEST_CASE("attach_jsonl and attach_html: one line each, read back") {
  const auto dir = std::filesystem::temp_directory_path() / "mldiag_attach_test";
  std::filesystem::create_directories(dir);
  const auto jsonl = dir / "run.jsonl", html = dir / "report.html";
  std::filesystem::remove(html);
  std::vector<mldiag::finding> delivered;
  std::size_t open = 0;
  {
    mldiag::monitor mon;
    mldiag::report::attach_jsonl(mon, jsonl, "attach test");
    mldiag::report::attach_html(mon, html, "attach test");
    run(mon, delivered);
    open = mon.open_diagnoses();
    CHECK(!std::filesystem::exists(html));  // written at the end of the run
    mon.finish();
    CHECK(std::filesystem::exists(html));
    mon.finish();  // a second call does nothing
  }
  REQUIRE(!delivered.empty());
  REQUIRE(open >= 1);

  const auto log = mldiag::report::read_jsonl(jsonl);
  CHECK(log.title == "attach test");
  REQUIRE(log.steps.size() == 150);
  CHECK(log.steps.front() == 0);
  CHECK(log.steps.back() == 149);
  CHECK(log.findings.size() == delivered.size());
  for (std::size_t i = 0; i < std::min(log.findings.size(), delivered.size()); ++i) {
    CHECK(log.findings[i].finding.symptom == delivered[i].symptom);
    CHECK(log.findings[i].step >= delivered[i].first_step);
  }
  // The evaluations sit at the epochs' last steps, the last one included.
  const auto* val = log.metric("val_loss");
  REQUIRE(val != nullptr);
  for (std::size_t i = 0; i < log.steps.size(); ++i) {
    if (log.steps[i] % 50 == 49) CHECK((*val)[i] == doctest::Approx(0.5 + static_cast<double>(log.steps[i]) / 1000.0));
    else CHECK(mldiag::report::run_log::is_absent((*val)[i]));
  }
  // Every open diagnosis's log is in the file.
  std::size_t opened = 0;
  for (const auto& d : log.diagnosis) opened += d.text.rfind("opened for", 0) == 0 ? 1 : 0;
  CHECK(opened == open);

  const std::string page = slurp(html);
  CHECK(page.find("<html") != std::string::npos);
  CHECK(page.find("attach test") != std::string::npos);
  CHECK(page.find("opened for") != std::string::npos);
}

TEST_CASE("attach_html: the monitor's destructor writes the page, and reports a write error on stderr") {
  const auto dir = std::filesystem::temp_directory_path() / "mldiag_attach_test";
  std::filesystem::create_directories(dir);
  const auto html = dir / "by_destructor.html";
  std::filesystem::remove(html);
  std::vector<mldiag::finding> delivered;
  {
    mldiag::monitor mon;
    mldiag::report::attach_html(mon, html);
    run(mon, delivered);
  }
  CHECK(std::filesystem::exists(html));
  // A folder that does not exist: finish() throws an mldiag: error naming the file.
  mldiag::monitor mon;
  mldiag::report::attach_html(mon, dir / "no" / "such" / "dir" / "r.html");
  run(mon, delivered);
  CHECK_THROWS_WITH_AS(mon.finish(), doctest::Contains("mldiag: html report: cannot open"), mldiag::error);
}
