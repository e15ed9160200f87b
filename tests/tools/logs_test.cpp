// SPDX-License-Identifier: Apache-2.0
// The training-log readers (tools/cli/logs.hpp): every format against values derived
// independently (the literal text of the input, the values the TensorBoard writer was given,
// the real CSVs read with a plain splitter), the step rules, and bad input.
//
// One source, two programs (tests/tools/logs.cmake): the unit tests, and with
// MLDIAG_LOGS_REAL_RUNS_MAIN the checks on ../shared/data/real-runs, which exit 77 (skipped)
// where that folder is absent.
#ifdef MLDIAG_LOGS_REAL_RUNS_MAIN
#define DOCTEST_CONFIG_IMPLEMENT
#include "../support/doctest_run.hpp"
#else
#include <doctest/doctest.h>
#endif

#include "cli/logs.hpp"
#ifdef MLDIAG_LOGS_REAL_RUNS_MAIN
#include "cli/scan.hpp"  // the short-series check on healthy real runs
#else
#include "mldiag/report/jsonl.hpp"  // mldiag's own JSON Lines, read back by the log reader
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

namespace {

using mldiag::cli::log_options;
using mldiag::cli::parse_log;
using mldiag::cli::read_log;
using mldiag::report::run_log;

const std::filesystem::path data = MLDIAG_LOGS_DATA_DIR;

[[maybe_unused]] std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The column of a metric (REQUIREd to exist).
[[maybe_unused]] const std::vector<double>& col(const run_log& r, const std::string& name) {
  const auto* c = r.metric(name);
  REQUIRE_MESSAGE(c != nullptr, "no column " << name);
  return *c;
}

// The error message of a call that must throw mldiag::error ("" if it did not throw).
template <class F>
[[maybe_unused]] std::string error_of(F&& f) {
  try {
    (void)f();
  } catch (const mldiag::error& e) {
    return e.what();
  }
  return "";
}

bool same(double a, double b) {  // equal, or both the same kind of NaN
  if (run_log::is_absent(a) || run_log::is_absent(b)) return run_log::is_absent(a) && run_log::is_absent(b);
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;
}

// A CSV line split at commas, as the real-run files are written (no quoting in them).
std::vector<std::string> split(const std::string& line, char sep = ',') {
  std::vector<std::string> out;
  std::string field;
  std::stringstream s(line);
  while (std::getline(s, field, sep)) out.push_back(field);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

struct csv_table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
csv_table plain_csv(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), "cannot open " << p.string());
  csv_table t;
  std::string line;
  auto next = [&] {
    if (!std::getline(in, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // the BigScience file has CRLF
    return true;
  };
  next();
  t.header = split(line);
  while (next())
    if (!line.empty()) t.rows.push_back(split(line));
  return t;
}
[[maybe_unused]] double cell(const std::string& s) { return s.empty() ? run_log::absent() : std::strtod(s.c_str(), nullptr); }

}  // namespace

#ifndef MLDIAG_LOGS_REAL_RUNS_MAIN

// ------------------------------------------------------------------------------- CSV

TEST_CASE("csv: canonical names absent cells and non-finite values") {
  const auto runs = parse_log(
      "Step,Train_Loss,val_loss,grad_norm,Learning_Rate,loss_scale,notes,Tokens\n"
      "0,2.5,,1.5,1e-3,65536,warm-up,100\n"
      "1,NaN,3.0,inf,2e-3,32768,,200\n"
      "2,-inf,,Infinity,3e-3,,\"a, b\",300\n"
      "3,nan,,-Infinity,4E-03,16384.0,x,\n",
      "run.csv");
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.title == "run.csv");
  CHECK(r.steps == std::vector<std::int64_t>{0, 1, 2, 3});
  const auto& loss = col(r, "loss");
  CHECK(loss[0] == 2.5);
  CHECK((std::isnan(loss[1]) && !run_log::is_absent(loss[1])));
  CHECK((std::isinf(loss[2]) && loss[2] < 0));
  CHECK((std::isnan(loss[3]) && !run_log::is_absent(loss[3])));
  const auto& val = col(r, "val_loss");
  CHECK(run_log::is_absent(val[0]));
  CHECK(val[1] == 3.0);
  CHECK(run_log::is_absent(val[2]));
  const auto& g = col(r, "grad/global_norm");
  CHECK(g[0] == 1.5);
  CHECK((std::isinf(g[1]) && g[1] > 0));
  CHECK((std::isinf(g[2]) && g[2] > 0));
  CHECK((std::isinf(g[3]) && g[3] < 0));
  CHECK(col(r, "lr") == std::vector<double>{1e-3, 2e-3, 3e-3, 4e-3});
  const auto& ls = col(r, "loss_scale");
  CHECK(ls[0] == 65536.0);
  CHECK(run_log::is_absent(ls[2]));
  CHECK(ls[3] == 16384.0);
  CHECK(r.metric("notes") == nullptr);  // text column: ignored
  const auto& tokens = col(r, "tokens");  // other numbers: kept, lower-cased
  CHECK(tokens[2] == 300.0);
  CHECK(run_log::is_absent(tokens[3]));
}

TEST_CASE("csv: step aliases no step column tabs CRLF and RFC 4180 quoting") {
  for (const char* name : {"iteration", "Iter", "global_step", "STEP"}) {
    const auto r = parse_log(std::string(name) + ",lm_loss\n10,1\n20,2\n", "a.csv")[0];
    CHECK(r.steps == std::vector<std::int64_t>{10, 20});
    CHECK(col(r, "loss") == std::vector<double>{1, 2});
  }
  // No step column: the row index (from 0) is the step.
  const auto r = parse_log("loss,lr\n5,0.1\n4,0.2\n3,0.3\n", "a.csv")[0];
  CHECK(r.steps == std::vector<std::int64_t>{0, 1, 2});
  CHECK(col(r, "loss") == std::vector<double>{5, 4, 3});

  const auto t = parse_log("step\tloss\n1\t0.5\n2\t\n", "a.tsv")[0];
  CHECK(t.steps == std::vector<std::int64_t>{1, 2});
  CHECK(col(t, "loss")[0] == 0.5);
  CHECK(run_log::is_absent(col(t, "loss")[1]));

  // A quoted text cell with a comma, a doubled quote and a line break; CRLF line ends; a
  // quoted number; steps written as 1.0 and 2e0.
  const auto q = parse_log("step,comment,loss\r\n1.0,\"say \"\"hi\"\", then\r\nbye\",\"0.25\"\r\n2e0,plain,0.5\r\n", "q.csv")[0];
  CHECK(q.steps == std::vector<std::int64_t>{1, 2});
  CHECK(col(q, "loss") == std::vector<double>{0.25, 0.5});
  // The error after a multi-line quoted field names the physical line.
  const auto e = error_of([] { return parse_log("step,comment,loss\n1,\"two\nlines\",1\n2,x,oops\n", "q.csv"); });
  CHECK(e.find("q.csv: line 4, column 'loss': 'oops' is not a number") != std::string::npos);
}

TEST_CASE("csv: --column --step-column and name clashes") {
  log_options o;
  o.columns = {{"loss", "My_Loss"}, {"grad/global_norm", "gnorm"}};
  o.step_column = "t";
  const auto r = parse_log("t,my_loss,gnorm,loss\n7,1.5,0.1,9\n8,1.25,0.2,8\n", "o.csv", o)[0];
  CHECK(r.steps == std::vector<std::int64_t>{7, 8});
  CHECK(col(r, "loss") == std::vector<double>{1.5, 1.25});
  CHECK(col(r, "grad/global_norm") == std::vector<double>{0.1, 0.2});
  CHECK(col(r, "raw/loss") == std::vector<double>{9, 8});  // the file's own "loss" column, kept apart

  // Two aliases of one name: the left-most gets it, the other keeps its own name.
  const auto c = parse_log("step,train_loss,lm_loss\n1,1,2\n", "c.csv")[0];
  CHECK(col(c, "loss")[0] == 1.0);
  CHECK(col(c, "lm_loss")[0] == 2.0);

  log_options missing;
  missing.columns = {{"loss", "nope"}};
  CHECK(error_of([&] { return parse_log("step,x\n1,2\n", "m.csv", missing); }).find("m.csv: --column loss=nope: the log has no column 'nope'") !=
        std::string::npos);
  log_options bad_step;
  bad_step.step_column = "when";
  CHECK(error_of([&] { return parse_log("step,loss\n1,2\n", "m.csv", bad_step); }).find("--step-column when") != std::string::npos);
}

TEST_CASE("csv: group_by splits a file into runs") {
  log_options o;
  o.group_by = "section";
  const auto runs = parse_log("section,iteration,lm_loss\nA,10,1\nA,20,2\nB b,5,3\nA,30,4\n", "g.csv", o);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].title == "g.csv: A");
  CHECK(runs[0].steps == std::vector<std::int64_t>{10, 20, 30});
  CHECK(col(runs[0], "loss") == std::vector<double>{1, 2, 4});
  CHECK(runs[1].title == "g.csv: B b");
  CHECK(runs[1].steps == std::vector<std::int64_t>{5});
  o.group_by = "nothere";
  CHECK(error_of([&] { return parse_log("step,loss\n1,2\n", "g.csv", o); }).find("group by 'nothere'") != std::string::npos);
}

TEST_CASE("step rules: the same step merges a smaller step is a restart that replaces") {
  // Train and eval rows of step 2 merge; the later value of a metric given twice wins.
  const auto m = parse_log("step,loss,val_loss\n1,3,\n2,2,\n2,,2.5\n2,1.75,\n", "m.csv")[0];
  CHECK(m.steps == std::vector<std::int64_t>{1, 2});
  CHECK(col(m, "loss")[1] == 1.75);
  CHECK(col(m, "val_loss")[1] == 2.5);
  // Resumed from a checkpoint at step 2: steps 2 and 3 of the first attempt are replaced.
  const auto r = parse_log("step,loss\n0,5\n1,4\n2,3\n3,99\n2,2.9\n3,2.8\n4,2.7\n", "r.csv")[0];
  CHECK(r.steps == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(col(r, "loss") == std::vector<double>{5, 4, 2.9, 2.8, 2.7});
  // The same rule holds in every format (here JSON Lines).
  const auto j = parse_log("{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":1,\"loss\":3}\n", "r.jsonl")[0];
  CHECK(j.steps == std::vector<std::int64_t>{1});
  CHECK(col(j, "loss") == std::vector<double>{3});
}

TEST_CASE("csv: bad input names the file and line and says what to do") {
  auto e = error_of([] { return parse_log("", "e.csv"); });
  CHECK(e.rfind("mldiag: e.csv: empty file", 0) == 0);
  e = error_of([] { return parse_log("step,loss\n", "h.csv"); });
  CHECK(e.find("h.csv: a header but no data rows") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1,2\n2,abc\n", "n.csv"); });
  CHECK(e.find("n.csv: line 3, column 'loss': 'abc' is not a number") != std::string::npos);
  CHECK(e.find("--column") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1,2,3\n", "f.csv"); });
  CHECK(e.find("f.csv: line 2 has 3 fields where the header has 2") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1.5,2\n", "s.csv"); });
  CHECK(e.find("s.csv: line 2, column 'step': '1.5' is not an integer step") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1,\"2\n", "u.csv"); });
  CHECK(e.find("u.csv: line 2: a quoted field that is never closed") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1,0x10\n", "x.csv"); });
  CHECK(e.find("'0x10' is not a number") != std::string::npos);
  e = error_of([] { return parse_log("step,note\n1,a\n", "t.csv"); });
  CHECK(e.find("t.csv: no metric values") != std::string::npos);
  e = error_of([] { return parse_log("step,loss,Loss\n1,2,3\n", "d.csv"); });
  CHECK(e.find("names column 'Loss' twice") != std::string::npos);
  // Binary data, and a TensorBoard file, named .csv.
  e = error_of([] { return parse_log(std::string("PK\x03\x04\0\0\0junk", 11), "b.csv"); });
  CHECK(e.find("b.csv: the name says CSV but the content looks like a zip archive") != std::string::npos);
  e = error_of([] { return parse_log(std::string("step,loss\n1,\0\0\0\n", 16), "z.csv"); });
  CHECK(e.find("z.csv: the name says CSV but the content looks like binary data") != std::string::npos);
  const std::string events = slurp(data / "tensorboard" / "events.out.tfevents.1.simple");
  e = error_of([&] { return parse_log(events, "t.csv"); });
  CHECK(e.find("t.csv: the name says CSV but the content looks like a TensorBoard event file; pass --format tensorboard") !=
        std::string::npos);
  // Forced CSV on binary: the CSV reader refuses the NUL byte.
  log_options csv;
  csv.format = "csv";
  e = error_of([&] { return parse_log(std::string("step,loss\n1,\0\n", 14), "z.bin", csv); });
  CHECK(e.find("z.bin: line 2: a NUL byte") != std::string::npos);
}

// ------------------------------------------------------------------------ JSON Lines

TEST_CASE("jsonl: records bare NaN nested keys skipped lines") {
  const auto r = parse_log(
      "{\"mldiag\": \"0.1\", \"run\": \"x\"}\n"
      "{\"config\": {\"lr\": \"cosine\"}, \"name\": \"run 1\"}\n"
      "\n"
      "{\"step\": 0, \"loss\": 2.5, \"lr\": 0.001, \"grad/fc1.weight/norm\": 0.75, \"ok\": true}\n"
      "  {\"step\": 1, \"loss\": NaN, \"Grad_Norm\": Infinity, \"learning_rate\": null, \"opt\": {\"State\": {\"beta1\": 0.9}}}  \n"
      "{\"step\": 1, \"eval_loss\": 3.25}\n"
      "{\"finding\": \"loss_spike\", \"step\": 1}\n"
      "{\"diagnosis\": \"phase 1\"}\n"
      "{\"step\": 3, \"loss\": \"-Infinity\", \"epoch\": 0.5}\n",
      "r.jsonl")[0];
  CHECK(r.steps == std::vector<std::int64_t>{0, 1, 3});
  const auto& loss = col(r, "loss");
  CHECK(loss[0] == 2.5);
  CHECK((std::isnan(loss[1]) && !run_log::is_absent(loss[1])));  // a bare NaN
  CHECK((std::isinf(loss[2]) && loss[2] < 0));                    // a numeric string in a metric
  CHECK(col(r, "lr")[0] == 0.001);
  CHECK(run_log::is_absent(col(r, "lr")[1]));  // null: not logged
  CHECK(std::isinf(col(r, "grad/global_norm")[1]));
  CHECK(col(r, "val_loss")[1] == 3.25);
  CHECK(col(r, "grad/fc1.weight/norm")[0] == 0.75);
  CHECK(col(r, "epoch")[2] == 0.5);
  CHECK(col(r, "opt/state/beta1")[1] == 0.9);  // nested objects: keys joined with '/'
  CHECK(r.metric("ok") == nullptr);
  CHECK(r.metric("finding") == nullptr);

  // Without step keys, the record index is the step.
  const auto n = parse_log("{\"train\": {\"loss\": 1}}\n{\"train\": {\"loss\": 2}}\n", "n.jsonl")[0];
  CHECK(n.steps == std::vector<std::int64_t>{0, 1});
  CHECK(col(n, "loss") == std::vector<double>{1, 2});  // train/loss -> loss
}

TEST_CASE("jsonl: bad input") {
  auto e = error_of([] { return parse_log("{\"step\": 1, \"loss\": 2}\n[1, 2]\n", "a.jsonl"); });
  CHECK(e.find("a.jsonl: line 2 is not a JSON object") != std::string::npos);
  e = error_of([] { return parse_log("{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"loss\": }\n", "b.jsonl"); });
  CHECK(e.find("b.jsonl: line 2: invalid JSON") != std::string::npos);
  e = error_of([] { return parse_log("{\"step\": 1, \"loss\": \"high\"}\n{\"step\": 2}\n", "c.jsonl"); });
  CHECK(e.find("c.jsonl: line 1, key 'loss': \"high\" is not a number") != std::string::npos);
  e = error_of([] { return parse_log("{\"step\": 1, \"loss\": 1}\n{\"loss\": 2}\n", "d.jsonl"); });
  CHECK(e.find("d.jsonl: line 2: some records have a step and others not") != std::string::npos);
  e = error_of([] { return parse_log("{\"step\": 0.5, \"loss\": 1}\n{\"loss\": 2}\n", "s.jsonl"); });
  CHECK(e.find("s.jsonl: line 1: the step is not an integer") != std::string::npos);
  e = error_of([] { return parse_log("{\"finding\": 1}\n{\"name\": \"x\"}\n", "f.jsonl"); });
  CHECK(e.find("f.jsonl: no line with a numeric metric") != std::string::npos);
  e = error_of([] { return parse_log("step,loss\n1,2\n", "csv.jsonl"); });
  CHECK(e.find("csv.jsonl: the name says JSON Lines but the content looks like CSV; pass --format csv") != std::string::npos);
  log_options o;
  o.group_by = "run";
  const auto g = parse_log("{\"run\": \"a\", \"step\": 1, \"loss\": 1}\n{\"run\": \"b\", \"step\": 1, \"loss\": 2}\n", "g.jsonl", o);
  REQUIRE(g.size() == 2);
  CHECK(g[1].title == "g.jsonl: b");
  CHECK(col(g[1], "loss")[0] == 2.0);
}

// ---------------------------------------------------------------- Hugging Face Trainer

TEST_CASE("hf: trainer_state.json log_history train and eval of a step merged") {
  const char* state = R"({
  "best_metric": null, "epoch": 1.0, "global_step": 20,
  "log_history": [
    {"epoch": 0.5, "grad_norm": 1.25, "learning_rate": 4e-05, "loss": 2.75, "step": 10},
    {"epoch": 0.5, "eval_loss": 2.5, "eval_runtime": 1.5, "step": 10},
    {"epoch": 1.0, "grad_norm": NaN, "learning_rate": 2e-05, "loss": 2.25, "step": 20},
    {"epoch": 1.0, "step": 20, "total_flos": 1e15, "train_loss": 2.5, "train_runtime": 12.0}
  ],
  "max_steps": 20
})";
  const auto r = parse_log(state, "trainer_state.json")[0];
  CHECK(r.steps == std::vector<std::int64_t>{10, 20});
  CHECK(col(r, "loss") == std::vector<double>{2.75, 2.25});  // not the summary's mean train_loss
  CHECK(col(r, "lr") == std::vector<double>{4e-05, 2e-05});
  CHECK(col(r, "grad/global_norm")[0] == 1.25);
  CHECK(std::isnan(col(r, "grad/global_norm")[1]));
  CHECK(col(r, "val_loss")[0] == 2.5);
  CHECK(run_log::is_absent(col(r, "val_loss")[1]));
  CHECK(col(r, "eval_runtime")[0] == 1.5);
  CHECK(r.metric("train_runtime") == nullptr);

  auto e = error_of([] { return parse_log(R"({"global_step": 5, "best_metric": null})", "trainer_state.json"); });
  CHECK(e.find("trainer_state.json: no \"log_history\"") != std::string::npos);
  e = error_of([] { return parse_log(R"({"log_history": []})", "trainer_state.json"); });
  CHECK(e.find("has no logged values yet") != std::string::npos);
  e = error_of([] { return parse_log(R"({"log_history": [{"loss": 1}]})", "trainer_state.json"); });
  CHECK(e.find("log_history[0] has no \"step\"") != std::string::npos);
  log_options hf;
  hf.format = "hf";
  e = error_of([&] { return parse_log("{\"step\":1}\n{\"step\":2}\n", "x.json", hf); });
  CHECK(e.find("x.json: invalid JSON") != std::string::npos);
}

// -------------------------------------------------------------------------- Megatron

TEST_CASE("megatron: iteration and validation lines everything else ignored") {
  const char* log =
      "building GPT model ...\n"
      " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1000\n"
      " iteration      100/  500000 | consumed samples:       102400 | elapsed time per iteration (ms): 1234.5 | "
      "learning rate: 1.000E-04 | global batch size:  1024 | lm loss: 2.345678E+00 | loss scale: 65536.0 | "
      "grad norm: 0.345 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      "[2022-04-12 10:00:00] iteration      200/  500000 | learning rate: 9.000E-05 | lm loss: nan | "
      "loss scale: 32768.0 | number of skipped iterations:   1 | number of nan iterations:   1 |\n"
      "saving checkpoint at iteration     200 to /ckpt\n"
      "-----------------------------------------------------------------------------------------------\n"
      " validation loss at iteration 200 | lm loss value: 2.300000E+00 | lm loss PPL: 9.974182E+00 | \n"
      "-----------------------------------------------------------------------------------------------\n"
      " iteration      300/  500000 | learning rate: 8.000E-05 | loss scale: 16384.0 |\n";
  const auto r = parse_log(log, "train.log")[0];
  CHECK(r.steps == std::vector<std::int64_t>{100, 200, 300});
  const auto& loss = col(r, "loss");
  CHECK(loss[0] == 2.345678);
  CHECK((std::isnan(loss[1]) && !run_log::is_absent(loss[1])));
  CHECK(run_log::is_absent(loss[2]));  // no lm loss at iteration 300
  CHECK(col(r, "lr") == std::vector<double>{1e-4, 9e-5, 8e-5});
  CHECK(col(r, "loss_scale") == std::vector<double>{65536, 32768, 16384});
  CHECK(col(r, "grad/global_norm")[0] == 0.345);
  CHECK(col(r, "skipped_iterations")[1] == 1.0);
  CHECK(col(r, "nan_iterations")[1] == 1.0);
  CHECK(col(r, "consumed samples")[0] == 102400.0);
  CHECK(col(r, "elapsed time per iteration (ms)")[0] == 1234.5);
  CHECK(col(r, "val_loss")[1] == 2.3);
  CHECK(col(r, "validation lm loss ppl")[1] == 9.974182);
  CHECK(run_log::is_absent(col(r, "val_loss")[0]));

  auto e = error_of([] { return parse_log(" iteration 1/ 10 | lm loss: high |\n", "bad.log"); });
  CHECK(e.find("bad.log: line 1, field 'lm loss': 'high' is not a number") != std::string::npos);
  log_options m;
  m.format = "megatron";
  e = error_of([&] { return parse_log("hello\nworld\n", "x.log", m); });
  CHECK(e.find("x.log: no Megatron-LM \"iteration N/ M |\" lines") != std::string::npos);
  e = error_of([] { return parse_log("hello world\nnothing here\n", "x.log"); });
  CHECK(e.find("x.log: does not look like a training log") != std::string::npos);
}

TEST_CASE("megatron: the BigScience fixture hand-checked values") {
  // data/megatron_bigscience.log holds rows of bigscience_spike_excerpts.csv (real runs) in
  // Megatron-DeepSpeed's line format; these values are read off the fixture's text. The
  // real-runs program compares every row with the CSV.
  const auto r = read_log(data / "megatron_bigscience.log")[0];
  CHECK(r.steps.size() == 27);
  const auto at = [&](std::int64_t step) {
    for (std::size_t i = 0; i < r.steps.size(); ++i)
      if (r.steps[i] == step) return i;
    FAIL("no step " << step);
    return std::size_t{0};
  };
  CHECK(col(r, "loss")[at(8741)] == 7.267764);
  CHECK(col(r, "grad/global_norm")[at(8741)] == 3273877.676);
  CHECK(run_log::is_absent(col(r, "loss")[at(9027)]));  // Experiment 12: the missing lm loss
  CHECK(col(r, "loss_scale")[at(9027)] == 8192.0);
  CHECK(col(r, "loss_scale")[at(29050)] == 8192.0);
  CHECK(col(r, "loss")[at(29060)] == 8.715872);
  CHECK(run_log::is_absent(col(r, "loss_scale")[at(31214)]));  // BLOOM (bf16): no loss scale
  CHECK(col(r, "lr")[at(31250)] == 5.277e-05);
}

// ------------------------------------------------------------------------ TensorBoard

namespace {
// values.csv, written by scripts/make-tensorboard-fixture.py with the values it logged.
std::map<std::int64_t, std::map<std::string, double>> tensorboard_reference() {
  std::map<std::int64_t, std::map<std::string, double>> ref;
  const auto t = plain_csv(data / "tensorboard" / "values.csv");
  REQUIRE(t.header == std::vector<std::string>{"step", "tag", "value"});
  for (const auto& row : t.rows) ref[std::stoll(row[0])][row[1]] = std::strtod(row[2].c_str(), nullptr);
  return ref;
}
}  // namespace

TEST_CASE("tensorboard: a folder of event files (simple_value and TF2 tensors) equals what the writer logged") {
  const auto ref = tensorboard_reference();
  REQUIRE(ref.size() == 8);
  const auto runs = read_log(data / "tensorboard");
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.title == "tensorboard");
  REQUIRE(r.steps.size() == ref.size());
  // The tags as the brief maps them (hand-derived).
  const std::map<std::string, std::string> name = {{"train/loss", "loss"},
                                                   {"train/learning_rate", "lr"},
                                                   {"train/grad_norm", "grad/global_norm"},
                                                   {"eval/loss", "val_loss"},
                                                   {"Custom/Thing", "custom/thing"}};
  std::size_t checked = 0;
  std::size_t i = 0;
  // (plain variables, not structured bindings: clang 14 cannot capture those in doctest's lambdas)
  for (const auto& entry : ref) {
    const std::int64_t step = entry.first;
    const auto& values = entry.second;
    CHECK(r.steps[i] == step);
    for (const auto& tag_name : name) {
      const std::string& tag = tag_name.first;
      const auto it = values.find(tag);
      const double got = col(r, tag_name.second)[i];
      if (it == values.end()) {
        CHECK_MESSAGE(run_log::is_absent(got), tag << " at " << step);
      } else {
        CHECK_MESSAGE(same(got, it->second), tag << " at " << step << ": " << got << " vs " << it->second);
        ++checked;
      }
    }
    ++i;
  }
  CHECK(checked == 29);
  CHECK(r.metric("weights") == nullptr);  // a histogram
  CHECK(r.metric("vector") == nullptr);   // a tensor of shape [2]
  CHECK(r.metric_names.size() == 5);
}

TEST_CASE("tensorboard: one file from memory - damaged files name the byte offset") {
  const std::string bytes = slurp(data / "tensorboard" / "events.out.tfevents.2.tensor");
  const auto r = parse_log(bytes, "events.out.tfevents.2.tensor")[0];
  CHECK(r.steps == std::vector<std::int64_t>{5, 6, 7});
  CHECK(col(r, "loss")[0] == 1.6875);  // 2 - 5/16, exact in float

  // Record offsets, from the framing: each record is 8 + 4 + length + 4 bytes.
  std::vector<std::size_t> offsets;
  for (std::size_t off = 0; off + 12 <= bytes.size();) {
    offsets.push_back(off);
    std::uint64_t length = 0;
    for (int k = 7; k >= 0; --k) length = (length << 8) | static_cast<unsigned char>(bytes[off + static_cast<std::size_t>(k)]);
    off += 16 + static_cast<std::size_t>(length);
  }
  REQUIRE(offsets.size() >= 3);
  // A record header alone (12 to 15 bytes, length CRC good): the start of a record still being
  // written, and nothing before it. Found by fuzz_logs (fuzz/corpus/logs/h-short-record.tfevents).
  std::string e;
  for (std::size_t extra = 0; extra < 4; ++extra) {
    e = error_of([&] { return parse_log(bytes.substr(0, 12 + extra), "events.out.tfevents.x"); });
    CHECK_MESSAGE(e.find("events.out.tfevents.x: no scalar summaries in the event file(s) before "
                         "the incomplete record at the end") != std::string::npos,
                  e);
  }
  std::string flipped = bytes;
  flipped[offsets[1] + 20] = static_cast<char>(flipped[offsets[1] + 20] ^ 0x10);
  e = error_of([&] { return parse_log(flipped, "events.out.tfevents.x"); });
  CHECK(e.find("byte " + std::to_string(offsets[1]) + ": bad CRC of the record data") != std::string::npos);
  flipped = bytes;
  flipped[offsets[2] + 1] = static_cast<char>(flipped[offsets[2] + 1] ^ 0x01);
  e = error_of([&] { return parse_log(flipped, "events.out.tfevents.x"); });
  CHECK(e.find("byte " + std::to_string(offsets[2]) + ": bad CRC of the record length") != std::string::npos);
  CHECK(e.rfind("mldiag: ", 0) == 0);
  // Not an event file at all, named like one.
  e = error_of([] { return parse_log("step,loss\n1,2\n", "events.out.tfevents.1"); });
  CHECK(e.find("the name says a TensorBoard event file but the content looks like CSV") != std::string::npos);
  // CRC-32C check value (RFC 3720 B.4: 32 bytes of zeros).
  CHECK(mldiag::cli::tensorboard::detail::crc32c(std::string(32, '\0')) == 0x8A9136AAU);
  CHECK(mldiag::cli::tensorboard::detail::crc32c("123456789") == 0xE3069283U);
}

namespace {

// The records of an event file, from its framing: each is 8 + 4 + length + 4 bytes.
std::vector<std::size_t> record_offsets(const std::string& bytes) {
  std::vector<std::size_t> offsets;
  for (std::size_t off = 0; off + 12 <= bytes.size();) {
    offsets.push_back(off);
    std::uint64_t length = 0;
    for (int k = 7; k >= 0; --k)
      length = (length << 8) | static_cast<unsigned char>(bytes[off + static_cast<std::size_t>(k)]);
    off += 16 + static_cast<std::size_t>(length);
  }
  return offsets;
}

// The fixture's tags as the reader names them (docs/cli.md's alias table, by hand).
const std::map<std::string, std::string> fixture_metric = {{"train/loss", "loss"},
                                                           {"train/learning_rate", "lr"},
                                                           {"train/grad_norm", "grad/global_norm"},
                                                           {"eval/loss", "val_loss"},
                                                           {"Custom/Thing", "custom/thing"}};

struct logged_value {
  std::int64_t step;
  std::string tag;
  double value;
};

// values.csv in the order make-tensorboard-fixture.py logged them: one scalar record each, so
// the n-th row is the n-th scalar record of its file (file 1: steps 0-4, file 2: steps 5-7).
std::vector<logged_value> logged_rows(bool second_file) {
  std::vector<logged_value> rows;
  const auto t = plain_csv(data / "tensorboard" / "values.csv");
  for (const auto& row : t.rows) {
    const std::int64_t step = std::stoll(row[0]);
    if ((step >= 5) == second_file)
      rows.push_back({step, row[1], std::strtod(row[2].c_str(), nullptr)});
  }
  return rows;
}

// The run holds exactly `rows`: each at its step, and no other value.
void check_holds_exactly(const run_log& r, const std::vector<logged_value>& rows) {
  std::vector<std::int64_t> steps;
  for (const auto& v : rows)
    if (steps.empty() || steps.back() != v.step) steps.push_back(v.step);
  REQUIRE(r.steps == steps);
  for (const auto& v : rows) {
    const auto i =
        static_cast<std::size_t>(std::find(steps.begin(), steps.end(), v.step) - steps.begin());
    const double got = col(r, fixture_metric.at(v.tag))[i];
    CHECK_MESSAGE(same(got, v.value),
                  v.tag << " at " << v.step << ": " << got << " vs " << v.value);
  }
  std::size_t present = 0;
  for (const auto& column : r.metric_values)
    for (const double x : column)
      present += run_log::is_absent(x) ? 0 : 1;
  CHECK(present == rows.size());
}

}  // namespace

TEST_CASE(
    "tensorboard: a file still being written - every complete record read, the incomplete tail "
    "noted") {
  for (const bool second : {false, true}) {
    const std::string file =
        second ? "events.out.tfevents.2.tensor" : "events.out.tfevents.1.simple";
    CAPTURE(file);
    const std::string bytes = slurp(data / "tensorboard" / file);
    const auto offsets = record_offsets(bytes);
    const auto rows = logged_rows(second);
    // Record 0 is the file_version, records 1..rows.size() the scalars in order, the last one
    // a value that is not a scalar (a histogram, a [2] tensor).
    REQUIRE(offsets.size() == rows.size() + 2);
    for (std::size_t k = 1; k < offsets.size(); ++k) {
      const std::size_t begin = offsets[k];
      const std::size_t end = k + 1 < offsets.size() ? offsets[k + 1] : bytes.size();
      // Cuts in the length, at the length CRC's end, in the data, in the data CRC, one short.
      for (const std::size_t cut : {begin + 1, begin + 8, begin + 11, begin + 12, begin + 13,
                                    (begin + end) / 2, end - 4, end - 1}) {
        CAPTURE(k);
        CAPTURE(cut);
        std::vector<std::string> notes;
        const std::string part = bytes.substr(0, cut);
        if (k == 1) {  // nothing but the version record before the cut
          const auto e = error_of([&] { return parse_log(part, file, {}, notes); });
          CHECK_MESSAGE(e.find(file + ": no scalar summaries in the event file(s) before the "
                                      "incomplete record at the end") != std::string::npos,
                        e);
          continue;
        }
        const auto runs = parse_log(part, file, {}, notes);
        REQUIRE(runs.size() == 1);
        check_holds_exactly(
            runs[0], std::vector<logged_value>(rows.begin(),
                                               rows.begin() + static_cast<std::ptrdiff_t>(k - 1)));
        REQUIRE(notes.size() == 1);
        CHECK_MESSAGE(notes[0].find(file + ": the last " + std::to_string(cut - begin) +
                                    " bytes are an incomplete record") == 0,
                      notes[0]);
        CHECK_MESSAGE(notes[0].find("read the " + std::to_string(k) +
                                    " complete record(s) before them") != std::string::npos,
                      notes[0]);
      }
    }
    // The whole file: no note.
    std::vector<std::string> notes;
    check_holds_exactly(parse_log(bytes, file, {}, notes)[0], rows);
    CHECK(notes.empty());

    // Damage is still damage: a bad data CRC on the last complete record, and a bad length CRC
    // on a record whose header is whole, fail with the record's offset, however the file ends.
    const std::size_t last = offsets.back();
    std::string cut = bytes.substr(0, last + 14);
    std::string damaged = cut;
    damaged[offsets[offsets.size() - 2] + 14] =
        static_cast<char>(damaged[offsets[offsets.size() - 2] + 14] ^ 0x01);
    auto e = error_of([&] { return parse_log(damaged, file); });
    CHECK_MESSAGE(e.find(file + ": byte " + std::to_string(offsets[offsets.size() - 2]) +
                         ": bad CRC of the record data") != std::string::npos,
                  e);
    damaged = cut;
    damaged[last + 2] = static_cast<char>(damaged[last + 2] ^ 0x40);
    e = error_of([&] { return parse_log(damaged, file); });
    CHECK_MESSAGE(e.find(file + ": byte " + std::to_string(last) +
                         ": bad CRC of the record length") != std::string::npos,
                  e);
  }
}

TEST_CASE("tensorboard: a folder whose newest file is still being written") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mldiag_logs_test_partial_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(data / "tensorboard" / "events.out.tfevents.1.simple",
                             dir / "events.out.tfevents.1.simple");
  const std::string second = slurp(data / "tensorboard" / "events.out.tfevents.2.tensor");
  const auto offsets = record_offsets(second);
  const std::size_t last_scalar = offsets[offsets.size() - 2];  // step 7's train/grad_norm
  std::ofstream(dir / "events.out.tfevents.2.tensor", std::ios::binary)
      << second.substr(0, last_scalar + 20);
  std::vector<std::string> notes;
  const auto runs = read_log(dir, {}, notes);
  REQUIRE(runs.size() == 1);
  auto rows = logged_rows(false);
  auto rows2 = logged_rows(true);
  rows2.pop_back();  // the record that was cut
  rows.insert(rows.end(), rows2.begin(), rows2.end());
  check_holds_exactly(runs[0], rows);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find((dir / "events.out.tfevents.2.tensor").string() +
                      ": the last 20 bytes are an incomplete record") == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tensorboard: tag aliases and --column on tags") {
  // An event file made by the reader's own framing would not be independent; instead reuse
  // the fixture and map one of its tags with --column.
  log_options o;
  o.columns = {{"my_metric", "custom/thing"}};
  const auto r = read_log(data / "tensorboard" / "events.out.tfevents.1.simple", o)[0];
  CHECK(col(r, "my_metric")[1] == 0.0);  // a simple_value of +0.0 is present, not absent
  CHECK(col(r, "val_loss")[4] == 2.75);
  auto e = error_of([] {
    log_options bad;
    bad.format = "csv";
    return read_log(data / "tensorboard", bad);
  });
  CHECK(e.find("only TensorBoard logs are read from a folder") != std::string::npos);
  e = error_of([] { return read_log(data / "does-not-exist.csv"); });
  CHECK(e.find("cannot open it") != std::string::npos);
}

TEST_CASE(
    "no known metric: the error lists the log's names and suggests --column, in every format") {
  log_options scan;
  scan.need_detector_metric = true;  // what `mldiag scan` asks for
  // TensorBoard: the fixture with its loss, grad-norm and eval tags mapped away by --column, so
  // that none the detectors read is left; the tags listed as written, in the order logged.
  log_options tb = scan;
  tb.columns = {{"a", "train/loss"}, {"b", "train/grad_norm"}, {"c", "eval/loss"}};
  auto e =
      error_of([&] { return read_log(data / "tensorboard" / "events.out.tfevents.1.simple", tb); });
  CHECK_MESSAGE(
      e.find("events.out.tfevents.1.simple: none of its scalar tags is one the detectors read") !=
          std::string::npos,
      e);
  CHECK_MESSAGE(e.find("its scalar tags: train/loss, train/learning_rate, train/grad_norm, "
                       "Custom/Thing, eval/loss;") != std::string::npos,
                e);
  CHECK_MESSAGE(e.find("--column loss=train/loss") != std::string::npos, e);
  CHECK(e.rfind("mldiag: ", 0) == 0);
  tb.need_detector_metric = false;  // the reader alone reads such a log
  CHECK(read_log(data / "tensorboard" / "events.out.tfevents.1.simple", tb)[0].metric("a") !=
        nullptr);

  // --column on a TensorBoard tag gives the detectors their loss.
  log_options mapped = scan;
  mapped.columns = {{"loss", "Custom/Thing"}};
  const auto r = read_log(data / "tensorboard" / "events.out.tfevents.1.simple", mapped)[0];
  CHECK(col(r, "loss")[0] == -1.0);       // values.csv: step 0, Custom/Thing
  CHECK(col(r, "train/loss")[0] == 2.5);  // train/loss keeps its value under its own name
  CHECK(col(r, "grad/global_norm")[0] == 0.5);

  // CSV, JSON Lines, trainer_state.json, Megatron: the same message, their own word for names.
  e = error_of([&] {
    return parse_log("step,accuracy,cost/cross_entropy\n1,0.5,2.1\n2,0.6,1.9\n", "c.csv", scan);
  });
  CHECK_MESSAGE(e.find("c.csv: none of its columns is one the detectors read") != std::string::npos,
                e);
  CHECK_MESSAGE(e.find("its columns: accuracy, cost/cross_entropy; name the one that holds the "
                       "loss with --column, e.g. --column "
                       "loss=cost/cross_entropy") != std::string::npos,
                e);
  log_options csv_mapped = scan;
  csv_mapped.columns = {{"loss", "cost/cross_entropy"}};
  CHECK(col(parse_log("step,accuracy,cost/cross_entropy\n1,0.5,2.1\n2,0.6,1.9\n", "c.csv",
                      csv_mapped)[0],
            "loss") == std::vector<double>{2.1, 1.9});
  e = error_of([&] {
    return parse_log("{\"step\": 1, \"acc\": 0.5, \"val/nll\": 2.0}\n", "j.jsonl", scan);
  });
  CHECK_MESSAGE(e.find("its keys: acc, val/nll; name the one that holds the loss with --column, "
                       "e.g. --column val_loss=val/nll") != std::string::npos,
                e);
  e = error_of([&] {
    return parse_log("{\"log_history\": [{\"step\": 1, \"my loss\": 2.0}]}", "trainer_state.json",
                     scan);
  });
  CHECK_MESSAGE(e.find("its keys: my loss; name the one that holds the loss with --column, e.g. "
                       "--column 'loss=my loss'") != std::string::npos,
                e);
  e = error_of([&] {
    return parse_log(" iteration 10/ 100 | tokens: 5 | mystery: 2.0 |\n", "m.log", scan);
  });
  CHECK_MESSAGE(e.find("its fields: tokens, mystery; name the one that holds the loss with "
                       "--column, e.g. --column loss=NAME") != std::string::npos,
                e);
  // A log with any one of them, or one run of several that has one, is read.
  CHECK(parse_log("step,grad_norm\n1,0.5\n", "g.csv", scan)[0].metric("grad/global_norm") !=
        nullptr);
  CHECK(parse_log("run,step,x,loss\na,1,1,\nb,1,1,2.0\n", "two.csv",
                  [&] {
                    log_options o = scan;
                    o.group_by = "run";
                    return o;
                  }())
            .size() == 2);
}

TEST_CASE(
    "jsonl: mldiag's own JSON Lines, strict (the default) and bare, read back the same values") {
  const double nan_v = std::numeric_limits<double>::quiet_NaN(),
               inf_v = std::numeric_limits<double>::infinity();
  const std::vector<double> losses = {2.5, nan_v, inf_v, -inf_v, 0.125};
  for (const auto style :
       {mldiag::report::jsonl_non_finite::string, mldiag::report::jsonl_non_finite::bare}) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("mldiag_logs_test_" + std::to_string(::getpid()) + "_" +
                       std::string(jsonl_style_name(style)) + ".jsonl");
    {
      mldiag::recorder rec(8);
      mldiag::report::jsonl_sink sink(path, "run", {.non_finite = style});
      for (std::size_t i = 0; i < losses.size(); ++i) {
        rec.begin_step(static_cast<std::int64_t>(100 + i));
        rec.observe(mldiag::scalar::loss, losses[i]);
        const std::vector<float> g = {3.0f, 4.0f, i == 1 ? NAN : 0.0f};
        rec.observe(mldiag::role::gradient, "fc1.weight", std::span<const float>(g));
        (void)rec.end_step();
        sink.step(rec);
      }
    }
    const auto r = read_log(path)[0];
    CAPTURE(jsonl_style_name(style));
    CHECK(r.steps == std::vector<std::int64_t>{100, 101, 102, 103, 104});
    const auto& loss = col(r, "loss");
    for (std::size_t i = 0; i < losses.size(); ++i)
      CHECK_MESSAGE(same(loss[i], losses[i]), i << ": " << loss[i]);
    CHECK(std::signbit(loss[3]));
    // Under any key, not only the ones the detectors read.
    const auto& g = col(r, "grad/fc1.weight/norm");
    CHECK(g[0] == 5.0);
    CHECK((std::isnan(g[1]) && !run_log::is_absent(g[1])));
    std::filesystem::remove(path);
  }
}

// ------------------------------------------------------------------- detection, limits

TEST_CASE("detection: content first the name second") {
  CHECK(parse_log("step,loss\n1,2\n", "train.log")[0].steps.size() == 1);                 // CSV in a .log
  CHECK(parse_log("{\"step\":1,\"loss\":2}\n", "metrics.txt")[0].steps.size() == 1);      // JSON Lines in a .txt
  CHECK(parse_log("{\"step\":1,\"loss\":2}\n{\"step\":2,\"loss\":1}\n", "m.json")[0].steps.size() == 2);
  CHECK(parse_log("\xEF\xBB\xBFstep,loss\n1,2\n", "bom.csv")[0].steps.size() == 1);       // a UTF-8 BOM
  CHECK(parse_log(" iteration 1/ 2 | lm loss: 1.0 |\n", "train.csv", {.format = "megatron", .columns = {}, .step_column = {}, .group_by = {}})[0]
            .steps.size() == 1);
  const auto e = error_of([] { return parse_log(" iteration 1/ 2 | lm loss: 1.0 |\n", "train.csv"); });
  CHECK(e.find("the name says CSV but the content looks like a Megatron-LM text log; pass --format megatron") != std::string::npos);
  CHECK(error_of([] { return parse_log("x", "a", {.format = "parquet", .columns = {}, .step_column = {}, .group_by = {}}); })
            .find("unknown log format 'parquet'") != std::string::npos);
}

TEST_CASE("limits: many columns and many lines stay linear") {
  // 4000 columns x 60 rows, and 100000 JSON lines: each well under a second when linear.
  std::string wide = "step";
  for (int c = 0; c < 4000; ++c) {
    wide += ",m";  // (not "," + to_string(): GCC 12 -Wrestrict false positive)
    wide += std::to_string(c);
  }
  wide += '\n';
  for (int r = 0; r < 60; ++r) {
    wide += std::to_string(r);
    for (int c = 0; c < 4000; ++c) {
      wide += ',';
      wide += std::to_string(r + c);
    }
    wide += '\n';
  }
  std::string lines;
  for (int r = 0; r < 100000; ++r) lines += "{\"step\": " + std::to_string(r) + ", \"loss\": " + std::to_string(r % 7) + "}\n";
  const auto t0 = std::chrono::steady_clock::now();
  const auto w = parse_log(wide, "wide.csv")[0];
  const auto l = parse_log(lines, "long.jsonl")[0];
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(w.metric_names.size() == 4000);
  CHECK(col(w, "m3999")[59] == 59.0 + 3999.0);
  CHECK(l.steps.size() == 100000);
  CHECK(col(l, "loss")[99999] == 99999 % 7);
  MESSAGE("4000x60 CSV + 100000-line JSONL: " << seconds << " s");
  CHECK(seconds < 30.0);  // generous for sanitizer builds; a quadratic reader takes minutes
}

#else  // MLDIAG_LOGS_REAL_RUNS_MAIN

namespace {
std::filesystem::path real_runs() {
  if (const char* env = std::getenv("MLDIAG_REAL_RUNS")) return env;
  return MLDIAG_REAL_RUNS_DIR;
}
// How the readers must name the real files' columns (hand-derived from docs/cli.md's table).
const std::map<std::string, std::string> expected_name = {
    {"train_loss", "loss"},         {"val_loss", "val_loss"},       {"lr", "lr"},
    {"grad_norm", "grad/global_norm"}, {"lm_loss", "loss"},         {"learning_rate", "lr"},
    {"loss_scale", "loss_scale"},   {"skipped_iters", "skipped_iterations"}, {"nan_iters", "nan_iterations"},
    {"global_batch_size", "global_batch_size"}, {"md_line", "md_line"}};
}  // namespace

TEST_CASE("real runs: every CSV every value against a plain reading") {
  std::size_t files = 0;
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(real_runs()))
    if (e.path().extension() == ".csv" && e.path().filename() != "bigscience_spike_excerpts.csv") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    const auto t = plain_csv(p);
    const auto runs = read_log(p);
    REQUIRE(runs.size() == 1);
    const auto& r = runs[0];
    CHECK(r.title == p.filename().string());
    REQUIRE_MESSAGE(r.steps.size() == t.rows.size(), p.filename().string());
    MESSAGE(p.filename().string() << ": " << r.steps.size() << " steps, metrics " << r.metric_names.size());
    REQUIRE(t.header[0] == "step");
    for (std::size_t c = 1; c < t.header.size(); ++c) {
      const auto& column = col(r, expected_name.at(t.header[c]));
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < t.rows.size(); ++i) {
        if (r.steps[i] != std::stoll(t.rows[i][0])) ++mismatches;
        if (!same(column[i], cell(t.rows[i][c]))) ++mismatches;
      }
      CHECK_MESSAGE(mismatches == 0, p.filename().string() << " column " << t.header[c]);
    }
    ++files;
  }
  CHECK(files == 7);
}

TEST_CASE("real runs: the BigScience excerpts grouped by section") {
  const auto p = real_runs() / "bigscience_spike_excerpts.csv";
  const auto t = plain_csv(p);
  log_options o;
  o.group_by = "section";
  const auto runs = read_log(p, o);
  // Expected groups: the sections in order of first appearance, with their rows.
  std::vector<std::string> sections;
  std::map<std::string, std::vector<const std::vector<std::string>*>> rows;
  for (const auto& row : t.rows) {
    if (!rows.contains(row[2])) sections.push_back(row[2]);
    rows[row[2]].push_back(&row);
  }
  REQUIRE(runs.size() == sections.size());
  CHECK(runs.size() == 15);
  std::size_t values = 0;
  for (std::size_t g = 0; g < runs.size(); ++g) {
    const auto& r = runs[g];
    CHECK(r.title == "bigscience_spike_excerpts.csv: " + sections[g]);
    const auto& rs = rows[sections[g]];
    REQUIRE(r.steps.size() == rs.size());
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const auto& row = *rs[i];
      CHECK(r.steps[i] == std::stoll(row[3]));
      for (std::size_t c = 4; c < t.header.size(); ++c) {
        const auto* column = r.metric(expected_name.at(t.header[c]));
        const double want = cell(row[c]);
        const double got = column != nullptr ? (*column)[i] : run_log::absent();
        CHECK_MESSAGE(same(got, want), sections[g] << " " << row[3] << " " << t.header[c]);
        ++values;
      }
    }
  }
  MESSAGE(runs.size() << " sections, " << values << " values compared");
  const auto e12_at = std::find_if(runs.begin(), runs.end(), [](const run_log& r) { return r.title.ends_with(": Experiment 12"); });
  REQUIRE(e12_at != runs.end());
  const auto& e12 = *e12_at;
  CHECK(e12.steps.back() == 9027);
  CHECK(run_log::is_absent(col(e12, "loss").back()));
}

TEST_CASE("real runs: the Megatron fixture equals the excerpt rows it was written from") {
  const auto t = plain_csv(real_runs() / "bigscience_spike_excerpts.csv");
  const auto r = read_log(data / "megatron_bigscience.log")[0];
  std::map<std::int64_t, const std::vector<std::string>*> by_iteration;
  for (const auto& row : t.rows)
    if (row[2] == "Experiment 12" || row[2] == "A huge lm loss spike" || row[2] == "2022-04-12 First lm loss spike")
      by_iteration[std::stoll(row[3])] = &row;
  REQUIRE(r.steps.size() == by_iteration.size());
  std::size_t i = 0;
  for (const auto& entry : by_iteration) {  // the fixture is in increasing order
    const std::int64_t iteration = entry.first;
    const auto* row = entry.second;
    CHECK(r.steps[i] == iteration);
    for (std::size_t c = 4; c < t.header.size(); ++c) {
      const std::string name = t.header[c] == "global_batch_size" ? "global batch size" : expected_name.at(t.header[c]);
      CHECK_MESSAGE(same(col(r, name)[i], cell((*row)[c])), iteration << " " << t.header[c]);
    }
    ++i;
  }
}

namespace {
// A short series cut from a healthy run: `steps` and `loss` (and, where the file has them, the
// gradient norm and learning rate), as a user would paste or log them.
run_log short_series(const run_log& r, std::size_t from, std::size_t count, std::size_t block) {
  run_log s;
  s.title = r.title;
  const auto* loss = r.metric("loss") != nullptr ? r.metric("loss") : r.metric("val_loss");
  for (std::size_t k = 0; k < count; ++k) {
    // block 1: the rows as they are; block > 1: the mean of `block` consecutive rows, an
    // epoch's summary, numbered as epochs from 1.
    double sum = 0.0, norm = 0.0;
    for (std::size_t j = 0; j < block; ++j) {
      sum += (*loss)[from + k * block + j];
      if (r.metric("grad/global_norm") != nullptr) norm += (*r.metric("grad/global_norm"))[from + k * block + j];
    }
    s.add_step(block == 1 ? r.steps[from + k] : static_cast<std::int64_t>(k + 1));
    s.set("loss", sum / static_cast<double>(block));
    if (r.metric("grad/global_norm") != nullptr) s.set("grad/global_norm", norm / static_cast<double>(block));
    if (block == 1 && r.metric("lr") != nullptr) s.set("lr", (*r.metric("lr"))[from + k]);
  }
  return s;
}
}  // namespace

// Held out: written before it was run (issue 38's short logs). Every short series a user could
// cut from the healthy real runs — windows of 15 and 30 evaluations, the whole run as 15 and 30
// epoch means, and 30-step excerpts of per-step losses every 500 steps — is read as scan reads a
// short log; none may raise a warning. The counts are in docs/accuracy.md#short-logs.
TEST_CASE("real runs: short series cut from healthy runs raise no warning") {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(real_runs()))
    if (e.path().extension() == ".csv" && e.path().filename() != "bigscience_spike_excerpts.csv") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::size_t series = 0, warned = 0;
  std::map<std::string, std::size_t> by_symptom;
  auto judge = [&](const run_log& s, const std::string& what) {
    ++series;
    const auto r = mldiag::cli::scan(s);
    bool any = false;
    for (const auto& f : r.findings) {
      if (f.finding.severity < mldiag::severity::warning) continue;
      if (!any) MESSAGE(what << ": " << f.finding.symptom << " at " << f.step);
      any = true;
      ++by_symptom[f.finding.symptom];
    }
    warned += any ? 1 : 0;
  };
  for (const auto& p : paths) {
    const auto r = read_log(p)[0];
    const std::size_t n = r.steps.size();
    const bool evaluations = r.metric("val_loss") != nullptr;
    const std::string name = p.filename().string();
    if (evaluations) {
      for (const std::size_t len : {std::size_t{15}, std::size_t{30}})
        for (std::size_t from = 0; from + len <= n; from += 5)
          judge(short_series(r, from, len, 1), name + " rows " + std::to_string(from) + "+" + std::to_string(len));
    } else {
      for (std::size_t from = 0; from + 30 <= n; from += 500)
        judge(short_series(r, from, 30, 1), name + " rows " + std::to_string(from) + "+30");
    }
    for (const std::size_t epochs : {std::size_t{15}, std::size_t{30}})
      judge(short_series(r, 0, epochs, n / epochs), name + " as " + std::to_string(epochs) + " epoch means");
  }
  for (const auto& [symptom, count] : by_symptom) MESSAGE(symptom << ": " << count);
  MESSAGE(series << " short series from " << paths.size() << " healthy runs, " << warned << " with a warning or above");
  CHECK(series > 300);
  CHECK(warned == 0);
}

int main(int argc, char** argv) {
  if (!std::filesystem::is_directory(real_runs())) {
    std::printf("mldiag: real-run log tests skipped: %s not found (set MLDIAG_REAL_RUNS to the folder)\n",
                real_runs().string().c_str());
    return 77;
  }
  return mldiag_test::run(argc, argv);
}

#endif
