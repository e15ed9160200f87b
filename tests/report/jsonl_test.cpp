// SPDX-License-Identifier: Apache-2.0
// report/jsonl.hpp: how non-finite values are written (strict strings by default, bare tokens
// on request) and read back. References: the values the test recorded, classified by their
// bits; Python's json module in strict mode (it refuses bare NaN / Infinity) and a plain scan
// of each line for tokens outside strings, as independent judges of "strict JSON"; the literal
// text of a schema-1 file for the old files.
#include <doctest/doctest.h>

#include "mldiag/report/jsonl.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>  // std::system
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

namespace {

namespace r = mldiag::report;

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("mldiag_jsonl_test_" + std::to_string(::getpid()) + "_" + name);
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// The same value in class: NaN and NaN, +Inf and +Inf, -Inf and -Inf, otherwise the same bits
// (so -0.0 is not 0.0). A NaN's payload and sign are not kept by either style (docs/formats.md).
bool same_class(double got, double want) {
  if (std::isnan(want)) return std::isnan(got) && !r::run_log::is_absent(got);
  return std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(want);
}

// Letters outside JSON strings, other than true/false/null and a number's exponent: where a bare
// NaN or Infinity token would be. An independent, deliberately plain check of "strict JSON".
bool has_bare_token(const std::string& line) {
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      bool keyword = false;
      for (const std::string_view k : {"true", "false", "null"})
        if (line.compare(i, k.size(), k) == 0) {
          keyword = true;
          i += k.size() - 1;
        }
      const bool exponent =
          (c == 'e' || c == 'E') && i > 0 && line[i - 1] >= '0' && line[i - 1] <= '9';
      if (!keyword && !exponent) return true;
    }
  }
  return false;
}

// What the test records: losses of every class, a NaN gradient element, a finding whose
// evidence and scores are non-finite.
const std::vector<double> losses = {2.5, nan_v, inf_v, -inf_v, -0.0, 1e-300, 0.1};

mldiag::finding non_finite_finding() {
  mldiag::finding f;
  f.question = mldiag::question::early_anomaly;
  f.symptom = "non-finite loss";
  f.severity = mldiag::severity::critical;
  f.first_step = 1;
  f.last_step = 3;
  f.where = {{"fc1.weight", inf_v}, {"fc2.weight", nan_v}};
  f.evidence = {{"loss", nan_v}, {"max", inf_v}, {"min", -inf_v}, {"ratio", 1.5}};
  f.detector = "non_finite";
  return f;
}

void write_run(const std::filesystem::path& path, r::jsonl_options options) {
  mldiag::recorder rec(8);
  r::jsonl_sink sink(path, "non-finite run", options);
  for (std::size_t i = 0; i < losses.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, losses[i]);
    rec.observe(mldiag::scalar::learning_rate, 1e-3);
    const std::vector<float> g = {3.0f, 4.0f, i == 1 ? NAN : 0.0f};
    rec.observe(mldiag::role::gradient, "fc1.weight", std::span<const float>(g));
    (void)rec.end_step();
    sink.step(rec);
    if (i == 3) sink.finding(3, non_finite_finding());
  }
}

void check_read_back(const r::run_log& log) {
  REQUIRE(log.steps.size() == losses.size());
  const auto* loss = log.metric("loss");
  REQUIRE(loss != nullptr);
  for (std::size_t i = 0; i < losses.size(); ++i)
    CHECK_MESSAGE(same_class((*loss)[i], losses[i]), "step " << i << ": " << (*loss)[i]);
  const auto* g = log.metric("grad/fc1.weight/norm");
  REQUIRE(g != nullptr);
  CHECK(same_class((*g)[0], 5.0));
  CHECK(same_class((*g)[1], nan_v));
  const auto* global = log.metric("grad/global_norm");
  REQUIRE(global != nullptr);
  CHECK(same_class((*global)[1], nan_v));
  REQUIRE(log.findings.size() == 1);
  const auto& f = log.findings[0].finding;
  const auto want = non_finite_finding();
  REQUIRE(f.evidence.size() == want.evidence.size());
  for (std::size_t k = 0; k < want.evidence.size(); ++k) {
    CHECK(f.evidence[k].first == want.evidence[k].first);
    CHECK_MESSAGE(same_class(f.evidence[k].second, want.evidence[k].second),
                  want.evidence[k].first);
  }
  REQUIRE(f.where.size() == 2);
  CHECK(same_class(f.where[0].second, inf_v));
  CHECK(same_class(f.where[1].second, nan_v));
}

bool have_python() {
  return std::system("python3 -c 'import json' > /dev/null 2>&1") == 0;
}

// Runs a Python script on `path`; its exit code. `quiet`: without its stderr (a failure the
// test expects).
int python(const std::string& script, const std::filesystem::path& path, bool quiet = false) {
  const auto script_path = temp_file("check.py");
  std::ofstream(script_path) << script;
  const int rc = std::system(
      ("python3 " + script_path.string() + " " + path.string() + (quiet ? " 2>/dev/null" : ""))
          .c_str());
  std::filesystem::remove(script_path);
  return rc;
}

// Strict: any bare constant (NaN, Infinity, -Infinity) makes json.loads raise.
constexpr std::string_view python_strict_reader =
    "import json, math, sys\n"
    "def bare(t): raise ValueError('bare token ' + t)\n"
    "rows = [json.loads(l, parse_constant=bare) for l in open(sys.argv[1])]\n";

}  // namespace

TEST_CASE(
    "JSON Lines: strict by default - every line is JSON, non-finite values are strings, read back "
    "in class") {
  const auto path = temp_file("strict.jsonl");
  write_run(path, {});
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 1 + losses.size() + 1);
  CHECK(lines[0].find("\"schema\":2") != std::string::npos);
  CHECK(lines[0].find("\"non_finite\":\"string\"") != std::string::npos);
  for (const auto& l : lines)
    CHECK_MESSAGE(!has_bare_token(l), l);
  CHECK(lines[2].find("\"loss\":\"NaN\"") != std::string::npos);
  CHECK(lines[3].find("\"loss\":\"Infinity\"") != std::string::npos);
  CHECK(lines[4].find("\"loss\":\"-Infinity\"") != std::string::npos);
  // mldiag's own reader: every value in its class, finite ones bit for bit.
  check_read_back(r::read_jsonl(path));

  if (have_python()) {
    const std::string script =
        std::string(python_strict_reader) +
        "h = rows[0]['mldiag']\n"
        "assert h['schema'] == 2 and h['non_finite'] == 'string', h\n"
        "steps = [r for r in rows if 'loss' in r]\n"
        "assert [r['loss'] for r in steps[1:4]] == ['NaN', 'Infinity', '-Infinity']\n"
        "assert steps[0]['loss'] == 2.5 and steps[6]['loss'] == 0.1\n"
        "x = [float(r['loss']) for r in steps]\n"  // float() reads the strings back
        "assert math.isnan(x[1]) and x[2] == math.inf and x[3] == -math.inf\n"
        "assert x[4] == 0.0 and x[5] == 1e-300\n"  // Python reads the -0 fmt writes as int 0
        "f = [r for r in rows if 'finding' in r][0]['finding']\n"
        "assert f['evidence'] == {'loss': 'NaN', 'max': 'Infinity', 'min': '-Infinity', 'ratio': "
        "1.5}, f\n"
        "assert [l['score'] for l in f['location']] == ['Infinity', 'NaN']\n";
    CHECK(python(script, path) == 0);
  } else {
    MESSAGE("python3 not found: the strict Python check did not run");
  }
  std::filesystem::remove(path);
}

TEST_CASE(
    "JSON Lines: the bare style writes schema 1 with bare tokens, which a strict parser refuses, "
    "and reads back the same") {
  const auto path = temp_file("bare.jsonl");
  write_run(path, {.non_finite = r::jsonl_non_finite::bare});
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 1 + losses.size() + 1);
  CHECK(lines[0].find("\"schema\":1") != std::string::npos);
  CHECK(lines[0].find("\"non_finite\":\"bare\"") != std::string::npos);
  CHECK(lines[2].find("\"loss\":NaN") != std::string::npos);
  CHECK(lines[4].find("\"loss\":-Infinity") != std::string::npos);
  CHECK(has_bare_token(lines[2]));  // the plain check can fail
  CHECK_FALSE(has_bare_token(lines[1]));
  check_read_back(r::read_jsonl(path));
  if (have_python()) {
    // The same strict reader as above fails on this file (so its pass above means something),
    // and Python's default reader takes the bare tokens as floats.
    CHECK(python(std::string(python_strict_reader), path, true) != 0);
    CHECK(python("import json, math, sys\n"
                 "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
                 "assert math.isnan(rows[2]['loss']) and rows[4]['loss'] == -math.inf\n",
                 path) == 0);
  }
  std::filesystem::remove(path);
}

TEST_CASE(
    "JSON Lines: old files (schema 1, no non_finite key) still read, and strings only in their "
    "three spellings") {
  // The literal text mldiag wrote before schema 2.
  const std::string old_file =
      "{\"mldiag\":{\"schema\":1,\"version\":\"0.1.0\",\"title\":\"old\"}}\n"
      "{\"step\":0,\"loss\":2.5,\"grad/global_norm\":Infinity}\n"
      "{\"step\":1,\"loss\":NaN,\"grad/global_norm\":-Infinity}\n"
      "{\"step\":1,\"finding\":{\"question\":2,\"symptom\":\"s\",\"severity\":\"warning\",\"first_"
      "step\":1,\"last_step\":1,"
      "\"location\":[{\"name\":\"a\",\"score\":NaN}],\"evidence\":{\"x\":-Infinity},\"detector\":"
      "\"d\"}}\n";
  const auto log = r::parse_jsonl(old_file, "old.jsonl");
  CHECK(log.title == "old");
  REQUIRE(log.steps == std::vector<std::int64_t>{0, 1});
  CHECK(same_class((*log.metric("loss"))[1], nan_v));
  CHECK(same_class((*log.metric("grad/global_norm"))[0], inf_v));
  CHECK(same_class((*log.metric("grad/global_norm"))[1], -inf_v));
  REQUIRE(log.findings.size() == 1);
  CHECK(same_class(log.findings[0].finding.where[0].second, nan_v));
  CHECK(same_class(log.findings[0].finding.evidence[0].second, -inf_v));

  // A string is a number only when it is one of the three spellings, exactly: "nan" or "inf"
  // in a step line is text (not a metric), and in evidence an error.
  const auto text = r::parse_jsonl(
      "{\"step\":0,\"loss\":\"nan\",\"lr\":\"Infinity\",\"note\":\"NaN!\"}\n", "t.jsonl");
  CHECK(text.metric("loss") == nullptr);
  CHECK(text.metric("note") == nullptr);
  REQUIRE(text.metric("lr") != nullptr);
  CHECK(same_class((*text.metric("lr"))[0], inf_v));
  CHECK_THROWS_WITH_AS((void)r::parse_jsonl("{\"step\":1,\"finding\":{\"question\":1,\"symptom\":"
                                            "\"s\",\"severity\":\"info\",\"first_step\":1,"
                                            "\"last_step\":1,\"evidence\":{\"x\":\"inf\"}}}\n",
                                            "e.jsonl"),
                       doctest::Contains("e.jsonl:1: evidence \"x\" is not a number"),
                       mldiag::error);
  // A style or a schema this reader does not know is refused, with what to do.
  CHECK_THROWS_WITH_AS(
      (void)r::parse_jsonl("{\"mldiag\":{\"schema\":2,\"non_finite\":\"null\"}}\n", "n.jsonl"),
      doctest::Contains("\"non_finite\" must be \"string\" or \"bare\""), mldiag::error);
  CHECK_THROWS_WITH_AS((void)r::parse_jsonl("{\"mldiag\":{\"schema\":3}}\n", "s.jsonl"),
                       doctest::Contains("this mldiag reads schema 2 and older: update mldiag"),
                       mldiag::error);
}

TEST_CASE(
    "JSON Lines: a diagnosis line's phase is read as written (0-4), and a damaged phase is "
    "refused, not cast") {
  // Written by mldiag's own writer, read back in class: phases 1 and 4, and 0 (unknown).
  const auto path = temp_file("diagnosis.jsonl");
  {
    r::jsonl_sink w(path, "diagnosis", {});
    w.diagnosis({mldiag::protocol::phase_id::evidence, "baseline recorded"});
    w.diagnosis({mldiag::protocol::phase_id::fix, "re-ran the failed checks"});
    w.diagnosis({mldiag::protocol::phase_id::unknown, "a note"});
  }
  const auto log = r::read_jsonl(path);
  REQUIRE(log.diagnosis.size() == 3);
  CHECK(log.diagnosis[0].phase == mldiag::protocol::phase_id::evidence);
  CHECK(log.diagnosis[0].text == "baseline recorded");
  CHECK(log.diagnosis[1].phase == mldiag::protocol::phase_id::fix);
  CHECK(log.diagnosis[2].phase == mldiag::protocol::phase_id::unknown);
  std::filesystem::remove(path);

  // No phase at all is phase 0, as before.
  const std::string head = "{\"mldiag\":{\"schema\":2}}\n{\"step\":0,\"loss\":1}\n";
  const auto none = r::parse_jsonl(head + "{\"diagnosis\":{\"text\":\"t\"}}\n", "d.jsonl");
  REQUIRE(none.diagnosis.size() == 1);
  CHECK(none.diagnosis[0].phase == mldiag::protocol::phase_id::unknown);
  // The fuzzer's find: a phase far outside any integer type was cast (undefined behaviour).
  // Every value that is not an integer 0-4 is now an error that says the file is damaged.
  for (const char* bad : {"2.11111e+101", "-1", "5", "2.5", "\"2\"", "1e400"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(
        (void)r::parse_jsonl(head + "{\"diagnosis\":{\"phase\":" + bad + ",\"text\":\"t\"}}\n",
                             "d.jsonl"),
        doctest::Contains("d.jsonl:3: a diagnosis line's \"phase\" must be an integer 0-4"),
        mldiag::error);
  }
}

TEST_CASE("JSON Lines: a finding's why and consequence_of are written when set and read back") {
  const auto path = temp_file("why.jsonl");
  mldiag::finding with_reason = mldiag::make_finding(mldiag::question::convergence, mldiag::symptoms::exploding_gradients,
                                                     mldiag::severity::warning, 12, "exploding_gradients", {{"ratio", 14.0}});
  with_reason.where = {{"grad/fc1.weight", 14.0}};
  with_reason.why = "consequence observed; the loss rose \"above\" its median";  // a quote to escape
  mldiag::finding downstream = with_reason;
  downstream.why.clear();
  downstream.consequence_of = "non-finite loss";
  downstream.consequence_of_step = 9;
  {
    r::jsonl_sink sink(path, "why", {});
    sink.finding(12, with_reason);
    sink.finding(13, downstream);
  }
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].find(R"("why":"consequence observed; the loss rose \"above\" its median")") != std::string::npos);
  CHECK(lines[1].find("consequence_of") == std::string::npos);  // not a consequence: not written
  CHECK(lines[2].find("\"why\"") == std::string::npos);         // no reason given: not written
  CHECK(lines[2].find(R"("consequence_of":"non-finite loss","consequence_of_step":9)") != std::string::npos);
  const auto log = r::read_jsonl(path);
  REQUIRE(log.findings.size() == 2);
  CHECK(log.findings[0].finding.why == with_reason.why);
  CHECK_FALSE(log.findings[0].finding.is_consequence());
  CHECK(log.findings[1].finding.why.empty());
  CHECK(log.findings[1].finding.consequence_of == "non-finite loss");
  CHECK(log.findings[1].finding.consequence_of_step == 9);
  // A consequence without its step is a damaged line: refused, naming it.
  CHECK_THROWS_WITH_AS((void)r::parse_jsonl("{\"step\":1,\"finding\":{\"question\":1,\"symptom\":\"s\",\"severity\":"
                                            "\"info\",\"first_step\":1,\"last_step\":1,\"consequence_of\":\"x\"}}\n",
                                            "c.jsonl"),
                       doctest::Contains("c.jsonl:1: \"consequence_of\" needs a whole \"consequence_of_step\" >= 0"),
                       mldiag::error);
  std::filesystem::remove(path);
}
