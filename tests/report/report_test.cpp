// SPDX-License-Identifier: Apache-2.0
// report/: formatters, the text report, JSON Lines written and read back. References are
// hand-derived values (3-4-5 norms, counts) and the values the test itself recorded.
#include <doctest/doctest.h>

#include "mldiag/report/format.hpp"
#include "mldiag/report/jsonl.hpp"
#include "mldiag/report/text.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>  // std::system
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

namespace {

namespace r = mldiag::report;

mldiag::finding sample_finding() {
  mldiag::finding f;
  f.question = mldiag::question::convergence;
  f.symptom = "exploding gradients";
  f.severity = mldiag::severity::critical;
  f.first_step = 12;
  f.last_step = 15;
  f.where = {{"fc1.weight", 66.0}, {"fc2.weight", 3.5}};
  f.evidence = {{"ratio_to_median", 66.0}, {"norm", std::numeric_limits<double>::infinity()}};
  f.detector = "exploding_gradients";
  return f;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("mldiag_report_test_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST_CASE("tensor_stats formats compactly and in detail with the numbers it holds") {
  const std::vector<float> x = {3.0f, 4.0f, 0.0f, NAN, INFINITY};
  const auto s = mldiag::compute_stats(std::span<const float>(x));
  const auto compact = fmt::format("{}", s);
  CHECK(contains(compact, "n=5"));
  CHECK(contains(compact, "l2=5"));  // sqrt(9 + 16 + 0)
  CHECK(contains(compact, "[0, 4]"));
  CHECK(contains(compact, "NaN=1 +Inf=1 -Inf=0"));
  const auto detailed = fmt::format("{:d}", s);
  CHECK(contains(detailed, "count=5 finite=3 nan=1 pos_inf=1 neg_inf=0 zeros=1"));
  CHECK(contains(detailed, "mean=2.33333333"));  // 7 / 3
  CHECK(contains(detailed, "max_abs=4"));
  CHECK_THROWS_AS((void)fmt::format(fmt::runtime("{:x}"), s), fmt::format_error);
}

TEST_CASE("entropy_stats, findings, questions and severities format") {
  mldiag::entropy_stats e;
  e.add_row(std::log(4.0), 4);  // a uniform row over 4: normalized 1
  e.add_row(0.0, 4);
  CHECK(fmt::format("{}", e) == fmt::format("H={:.4g} (0.5 of max) over 2 rows", std::log(4.0) / 2));
  CHECK(contains(fmt::format("{:d}", e), "invalid rows=0"));

  const auto f = sample_finding();
  CHECK(fmt::format("{}", f) == "critical Q1 convergence: exploding gradients (steps 12-15) at fc1.weight");
  const auto d = fmt::format("{:d}", f);
  CHECK(contains(d, "where: fc1.weight (66) fc2.weight (3.5)"));
  CHECK(contains(d, "evidence: ratio_to_median=66 norm=inf"));
  CHECK(contains(d, "detector: exploding_gradients"));
  CHECK(fmt::format("{} {}", mldiag::question::efficiency, mldiag::severity::warning) == "Q3 efficiency warning");
}

TEST_CASE("a snapshot formats with ids, or with names through with_names") {
  mldiag::recorder rec(4);
  rec.begin_step(7);
  rec.observe(mldiag::scalar::loss, 2.5);
  rec.observe(mldiag::scalar::learning_rate, 1e-3);
  const std::vector<float> g = {3.0f, 4.0f};
  rec.observe(mldiag::role::gradient, "fc1.weight", std::span<const float>(g));
  const auto& s = rec.end_step();
  CHECK(fmt::format("{}", s) == "step 7: loss=2.5 lr=0.001 grad_norm=5 (1 gradients, 0 parameters, 0 activations)");
  CHECK(contains(fmt::format("{:d}", s), "gradient #0: n=2 l2=5"));
  CHECK(contains(fmt::format("{:d}", r::with_names(s, rec.names())), "gradient fc1.weight: n=2 l2=5"));
}

TEST_CASE("diagnosis phases format with their log") {
  auto dx = mldiag::protocol::diagnose(mldiag::question::convergence, {sample_finding()});
  CHECK(fmt::format("{}", dx) == "phase 1 (evidence) for Q1 convergence: 1 symptom(s) in focus, 0 hypothesis(es) rejected");
  CHECK(contains(fmt::format("{:d}", dx), "\n  phase 1 (evidence): opened for Q1 convergence"));
  mldiag::protocol::evidence_summary base;
  base.findings = {sample_finding()};
  base.obvious.no_nan_inf = mldiag::protocol::obvious_checks::result::passed;
  auto pattern = std::move(dx).with_baseline(base);
  CHECK(contains(fmt::format("{}", pattern), "phase 2 (pattern) for Q1 convergence"));
  CHECK(contains(fmt::format("{:d}", pattern), "\n  phase 1 (evidence): baseline recorded"));
  CHECK(fmt::format("{}", pattern.log().back()).find("phase 1 (evidence): baseline recorded") == 0);
  CHECK(contains(fmt::format("{}", base), "1 finding(s)"));
  CHECK(contains(fmt::format("{}", base), "no NaN/Inf passed"));
}

TEST_CASE("JSON Lines: a run written by the sink reads back to the same numbers") {
  const auto path = temp_file("roundtrip.jsonl");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> losses = {2.302585092994046, 1.0 / 3.0, nan, inf, 1e-300};
  mldiag::recorder rec(8);
  {
    r::jsonl_sink sink(path, "round \"trip\"\n");
    for (std::size_t i = 0; i < losses.size(); ++i) {
      rec.begin_step(static_cast<std::int64_t>(10 * i));
      rec.observe(mldiag::scalar::loss, losses[i]);
      if (i != 1) rec.observe(mldiag::scalar::learning_rate, 1e-3 * static_cast<double>(i + 1));  // absent at step 10
      const std::vector<float> g = {3.0f * static_cast<float>(i), 4.0f * static_cast<float>(i), i == 4 ? NAN : 0.0f};
      rec.observe(mldiag::role::gradient, "blocks.0/w \"q\"", std::span<const float>(g));
      (void)rec.end_step();
      sink.step(rec);
      if (i == 3) sink.finding(30, sample_finding());
    }
    sink.diagnosis({mldiag::protocol::phase_id::evidence, "opened for Q1 convergence"});
    sink.diagnosis({mldiag::protocol::phase_id::hypothesis, "escalate: three attempts failed; question the fundamentals"});
  }
  const auto log = r::read_jsonl(path);
  CHECK(log.title == "round \"trip\"\n");
  REQUIRE(log.steps == std::vector<std::int64_t>{0, 10, 20, 30, 40});
  const auto* loss = log.metric("loss");
  REQUIRE(loss != nullptr);
  for (std::size_t i = 0; i < losses.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(losses[i])) {
      CHECK(std::isnan((*loss)[i]));
      CHECK_FALSE(r::run_log::is_absent((*loss)[i]));  // logged as NaN: evidence, not a gap
    } else {
      CHECK(std::bit_cast<std::uint64_t>((*loss)[i]) == std::bit_cast<std::uint64_t>(losses[i]));  // exact round trip
    }
  }
  const auto* lr = log.metric("lr");
  REQUIRE(lr != nullptr);
  CHECK(r::run_log::is_absent((*lr)[1]));
  CHECK((*lr)[2] == doctest::Approx(3e-3).epsilon(1e-15));
  const auto* g = log.metric("grad/blocks.0/w \"q\"/norm");
  REQUIRE(g != nullptr);
  CHECK((*g)[2] == 10.0);  // |(6, 8, 0)|
  // A tensor holding a NaN has a NaN norm, as torch.linalg.norm reports it: a plot shows the
  // blow-up, not a norm that falls (issue 15: an all-NaN gradient was written as 0) ...
  CHECK(std::isnan((*g)[4]));
  CHECK_FALSE(r::run_log::is_absent((*g)[4]));
  const auto* global = log.metric("grad/global_norm");
  REQUIRE(global != nullptr);
  CHECK((*global)[2] == 10.0);
  CHECK(std::isnan((*global)[4]));
  const auto* nf = log.metric("grad/blocks.0/w \"q\"/nonfinite");
  REQUIRE(nf != nullptr);
  CHECK((*nf)[4] == 1.0);  // ... and the non-finite elements are counted
  CHECK(r::run_log::is_absent((*nf)[3]));
  REQUIRE(log.findings.size() == 1);
  CHECK(log.findings[0].step == 30);
  const auto& f = log.findings[0].finding;
  CHECK(f.symptom == "exploding gradients");
  CHECK(f.severity == mldiag::severity::critical);
  CHECK(f.where == sample_finding().where);
  CHECK(f.evidence.size() == 2);
  CHECK(std::isinf(f.evidence[1].second));
  REQUIRE(log.diagnosis.size() == 2);
  CHECK(log.diagnosis[0].phase == mldiag::protocol::phase_id::evidence);
  CHECK(log.diagnosis[0].text == "opened for Q1 convergence");  // no phase prefix to parse back
  CHECK(log.diagnosis[1].phase == mldiag::protocol::phase_id::hypothesis);

  // Python's json module (what pandas.read_json(lines=True) and most notebooks use) reads the
  // same file, in strict mode (the default sink writes strict JSON, tests/report/jsonl_test.cpp):
  // NaN and Infinity are the strings "NaN" and "Infinity", which float() reads back.
  if (std::system("python3 -c 'import json' > /dev/null 2>&1") == 0) {
    const std::string script =
        "import json, math, sys\n"
        "def bare(t): raise ValueError('bare ' + t)\n"
        "rows = [json.loads(l, parse_constant=bare) for l in open(sys.argv[1])]\n"
        "steps = [r for r in rows if 'loss' in r]\n"
        "assert len(steps) == 5, len(steps)\n"
        "assert steps[0]['loss'] == 2.302585092994046\n"
        "assert math.isnan(float(steps[2]['loss'])) and float(steps[3]['loss']) == float('inf')\n"
        "assert 'lr' not in steps[1]\n"
        "f = [r for r in rows if 'finding' in r][0]['finding']\n"
        "assert float(f['evidence']['norm']) == float('inf') and f['location'][0]['name'] == "
        "'fc1.weight'\n";
    const auto script_path = temp_file("read.py");
    std::ofstream(script_path) << script;
    CHECK(std::system(("python3 " + script_path.string() + " " + path.string()).c_str()) == 0);
    std::filesystem::remove(script_path);
  } else {
    MESSAGE("python3 not found: the Python read-back check did not run");
  }
  std::filesystem::remove(path);
}

TEST_CASE("JSON Lines: bad input gets an mldiag error naming the file and line") {
  auto fails = [](const std::string& text, const std::string& expected) {
    CAPTURE(text);
    try {
      (void)r::parse_jsonl(text, "bad.jsonl");
      FAIL("no error");
    } catch (const mldiag::error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.rfind("mldiag: bad.jsonl", 0) == 0);
      CHECK(contains(what, expected));
    }
  };
  fails("", "no mldiag JSON Lines");
  fails("{\"step\": 1, \"loss\": 2}\n[1, 2]\n", "bad.jsonl:2: a line must be a JSON object");
  fails("{\"loss\": 2}\n", "without \"step\"");
  fails("{\"step\": 1.5}\n", "not an integer");
  fails("{\"step\": 1, \"loss\": nan}\n", "invalid JSON at line 1");
  fails("{\"mldiag\": {\"schema\": 99}}\n", "schema 99");
  fails("{\"step\": 1, \"finding\": {\"question\": 4}}\n", "\"question\" must be 1, 2 or 3");
  fails("{\"step\": 1, \"finding\": {\"question\": 1, \"symptom\": \"x\", \"severity\": \"bad\"}}\n", "\"severity\"");
  CHECK_THROWS_WITH_AS((void)r::read_jsonl("/nonexistent/run.jsonl"), doctest::Contains("mldiag: /nonexistent/run.jsonl: cannot open"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(r::jsonl_sink("/nonexistent/dir/run.jsonl"), doctest::Contains("cannot write"), mldiag::error);
}

TEST_CASE("the text report groups repeated findings by question, with evidence and the diagnosis log") {
  r::run_log log;
  log.title = "demo";
  for (std::int64_t s = 0; s < 4; ++s) {
    log.add_step(s);
    log.set("loss", 3.0 - static_cast<double>(s));
  }
  auto f = sample_finding();
  log.findings.push_back({12, f});
  f.last_step = 16;
  f.evidence[0].second = 70.0;
  log.findings.push_back({13, f});  // the same finding, delivered again
  auto spike = sample_finding();
  spike.question = mldiag::question::early_anomaly;
  spike.symptom = "loss spike";
  spike.severity = mldiag::severity::warning;
  log.findings.push_back({20, spike});
  auto quiet = spike;
  quiet.severity = mldiag::severity::info;
  quiet.symptom = "something small";
  log.findings.push_back({21, quiet});
  log.diagnosis.push_back({mldiag::protocol::phase_id::evidence, "opened for Q1 convergence"});
  const auto text = r::text_report(log);
  CAPTURE(text);
  CHECK(contains(text, "== mldiag report: demo =="));
  CHECK(contains(text, "steps 0-3 (4 logged), last loss 0"));
  CHECK(contains(text, "2 episode(s) at warning or above, from 3 deliveries (1 below, not listed)"));
  // One episode of two deliveries: its span, its count, and its peak's numbers (the first of
  // the equally critical deliveries: 66, not the newer 70).
  CHECK(contains(text, "exploding gradients — steps 12-16, 2 deliveries, peak critical at step 12\n"));
  CHECK(contains(text, "evidence: ratio_to_median=66 "));
  CHECK_FALSE(contains(text, "ratio_to_median=70"));
  CHECK(text.find("Q1 convergence") < text.find("Q2 early anomaly"));
  CHECK_FALSE(contains(text, "something small"));
  CHECK(contains(text, "diagnosis log\n  phase 1 (evidence)"));
  CHECK(r::group_findings(log.findings).size() == 3);
  CHECK_FALSE(contains(text, "open diagnoses"));
}

TEST_CASE("the text report lists episodes: deliveries within the gap are one entry, beyond it two") {
  r::run_log log;
  auto f = sample_finding();
  // Every 7th step from 100 to 2000 (a flickering detector), then again at 4000.
  for (std::int64_t s = 100; s <= 2000; s += 7) {
    f.first_step = f.last_step = s;
    log.findings.push_back({s, f});
  }
  f.first_step = f.last_step = 4000;
  log.findings.push_back({4000, f});
  const auto text = r::text_report(log);
  CAPTURE(text);
  CHECK(contains(text, "2 episode(s) at warning or above, from 273 deliveries"));  // 272 + 1
  CHECK(contains(text, "exploding gradients — steps 100-1997, 272 deliveries, peak critical at step 100"));
  CHECK(contains(text, "exploding gradients — step 4000\n"));
  // A gap of 5 steps splits the flicker into one episode per delivery.
  CHECK(contains(r::text_report(log, {.episode_gap = 5}), "273 episode(s) at warning or above"));
}

TEST_CASE("configuration findings say before training, not steps -1--1") {
  mldiag::finding config;
  config.question = mldiag::question::efficiency;
  config.symptom = "attention without a fused kernel";
  config.severity = mldiag::severity::warning;
  config.where = {{"fused_attention", 0.0}};
  config.detector = "configuration";
  CHECK(fmt::format("{}", config) == "warning Q3 efficiency: attention without a fused kernel (before training) at fused_attention");
  CHECK_FALSE(contains(fmt::format("{:d}", config), "-1"));
  r::run_log log;
  log.findings.push_back({-1, config});
  const auto text = r::text_report(log);
  CAPTURE(text);
  CHECK(contains(text, "attention without a fused kernel — before training\n"));
  CHECK_FALSE(contains(text, "-1"));
}

TEST_CASE("the text report shows the diagnoses still open with their log lines") {
  r::run_log log;
  auto f = sample_finding();
  log.findings.push_back({12, f});
  log.open_diagnoses.push_back({mldiag::question::convergence, "exploding gradients", 12, mldiag::protocol::phase_id::evidence,
                                {{mldiag::protocol::phase_id::evidence, "opened by exploding gradients at step 12"}}});
  const auto text = r::text_report(log);
  CAPTURE(text);
  CHECK(contains(text, "\nopen diagnoses\n  open, phase 1 (evidence): Q1 convergence: exploding gradients, opened at step 12\n"
                       "    phase 1 (evidence): opened by exploding gradients at step 12\n"));
}

TEST_CASE("run_log keeps absent and NaN apart and refuses misuse") {
  r::run_log log;
  CHECK_THROWS_AS(log.set("loss", 1.0), mldiag::error);
  log.add_step(0);
  log.set("loss", std::numeric_limits<double>::quiet_NaN());
  log.add_step(1);
  log.set("lr", 0.1);
  CHECK(std::isnan((*log.metric("loss"))[0]));
  CHECK_FALSE(r::run_log::is_absent((*log.metric("loss"))[0]));
  CHECK(r::run_log::is_absent((*log.metric("loss"))[1]));
  CHECK(r::run_log::is_absent((*log.metric("lr"))[0]));
  log.rename("lr", "learning_rate");
  CHECK(log.metric("lr") == nullptr);
  CHECK((*log.metric("learning_rate"))[1] == 0.1);
  CHECK_THROWS_AS(log.rename("learning_rate", "loss"), mldiag::error);
}
