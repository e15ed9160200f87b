// SPDX-License-Identifier: Apache-2.0
// The default detector set on real training logs (../shared/data/real-runs, not ours): quiet
// on healthy runs, the right symptom near each documented BigScience event. The executable
// exits 77 (CTest: Skipped) with a message when the folder is absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include "../support/doctest_run.hpp"

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/evidence/recorder.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("MLDIAG_REAL_RUNS")) return env;
  return MLDIAG_REAL_RUNS_DIR;
}

// A CSV as rows of named fields (strings; empty where the log had nothing).
std::vector<std::map<std::string, std::string>> read_csv(const std::string& file) {
  std::ifstream in(data_dir() / file);
  REQUIRE_MESSAGE(in.good(), "cannot open " << (data_dir() / file).string());
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string h; std::getline(hs, h, ',');) header.push_back(h);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> row;
    std::stringstream ls(line);
    std::string field;
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (!std::getline(ls, field, ',')) field.clear();
      row[header[i]] = field;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

double number(const std::map<std::string, std::string>& row, const std::string& key) {
  const auto it = row.find(key);
  if (it == row.end() || it->second.empty()) return NAN;
  return std::stod(it->second);
}

struct run_result {
  std::vector<mldiag::finding> findings;
};

// Feeds rows (in order) through the default set: loss, lr, global grad norm, loss scale.
run_result replay(const std::vector<std::map<std::string, std::string>>& rows, const std::string& step_key,
                  const std::string& loss_key) {
  mldiag::recorder rec(64);
  auto set = mldiag::detectors::default_set();
  run_result r;
  for (const auto& row : rows) {
    rec.begin_step(static_cast<std::int64_t>(number(row, step_key)));
    if (const double loss = number(row, loss_key); !std::isnan(loss)) rec.observe(mldiag::scalar::loss, loss);
    if (const double lr = number(row, "lr"); !std::isnan(lr)) rec.observe(mldiag::scalar::learning_rate, lr);
    if (const double lr = number(row, "learning_rate"); !std::isnan(lr)) rec.observe(mldiag::scalar::learning_rate, lr);
    // BigScience's 13B logged 0.000 for the grad norm: not a measurement.
    if (const double g = number(row, "grad_norm"); g > 0.0) rec.observe(mldiag::scalar::grad_norm, g);
    if (const double s = number(row, "loss_scale"); !std::isnan(s)) rec.observe(mldiag::scalar::loss_scale, s);
    const auto& now = rec.end_step();
    set.observe({now, rec.past(), rec.names()}, r.findings);
  }
  return r;
}

std::size_t at_least_warning(const run_result& r) {
  std::size_t n = 0;
  for (const auto& f : r.findings) n += f.severity >= mldiag::severity::warning;
  return n;
}

std::string describe(const run_result& r) {
  std::string s;
  for (const auto& f : r.findings) {
    s += std::string(mldiag::name(f.severity)) + " '" + f.symptom + "' at " + std::to_string(f.first_step) + "-" +
         std::to_string(f.last_step) + "; ";
  }
  return s;
}

// The first finding with this symptom at warning or above, or nullptr.
const mldiag::finding* first(const run_result& r, const std::string& symptom) {
  for (const auto& f : r.findings)
    if (f.symptom == symptom && f.severity >= mldiag::severity::warning) return &f;
  return nullptr;
}

// The rows of one BigScience logbook section, in order.
std::vector<std::map<std::string, std::string>> section(const std::string& source, const std::string& name) {
  std::vector<std::map<std::string, std::string>> out;
  for (auto& row : read_csv("bigscience_spike_excerpts.csv"))
    if (row["source_file"].find(source) != std::string::npos && row["section"] == name) out.push_back(row);
  return out;
}

}  // namespace

TEST_CASE("healthy runs raise no finding of severity warning or above") {
  for (const auto& [file, loss_key] : {std::pair{"llmc_gpt2_124M_train.csv", "train_loss"},
                                       std::pair{"adamw_baseline_train.csv", "train_loss"},
                                       std::pair{"scaleup1b_87bd51fd_train.csv", "train_loss"}}) {
    const auto r = replay(read_csv(file), "step", loss_key);
    CAPTURE(file);
    CAPTURE(describe(r));
    CHECK(at_least_warning(r) == 0);
  }
}

TEST_CASE("BLOOM-176B: exploding gradients at 31215-31219") {
  const auto r = replay(section("tr11-176B-ml", "2022-04-12 First lm loss spike"), "iteration", "lm_loss");
  CAPTURE(describe(r));
  const auto* f = first(r, "exploding gradients");
  REQUIRE(f != nullptr);
  CHECK(f->first_step >= 31215);
  CHECK(f->first_step <= 31219);
}

TEST_CASE("13B: a loss spike at 29050 with the loss scale halving") {
  const auto r = replay(section("tr1-13B-base", "A huge lm loss spike"), "iteration", "lm_loss");
  CAPTURE(describe(r));
  const auto* f = first(r, "loss spike");
  REQUIRE(f != nullptr);
  CHECK(f->first_step == 29050);
  CHECK(f->severity == mldiag::severity::critical);  // 8.72 / 2.77 = 3.1x
}

TEST_CASE("104B: spikes and divergence") {
  {  // Experiment 2: 6.37 -> 10.24 over 6900-6940, a climb rather than a jump
    const auto r = replay(section("tr8-104B-wide", "Experiment 2"), "iteration", "lm_loss");
    CAPTURE(describe(r));
    const auto* f = first(r, "sustained loss increase");
    REQUIRE(f != nullptr);
    CHECK(f->first_step >= 6920);
    CHECK(f->first_step <= 6940);
  }
  {  // Analyzing spike: grad norm 1.3e4 -> 2.6e5 at 11447, loss 3.11 -> 7.71 at 11448
    const auto r = replay(section("tr8-104B-wide", "Analyzing Spike"), "iteration", "lm_loss");
    CAPTURE(describe(r));
    const auto* f = first(r, "exploding gradients");
    REQUIRE(f != nullptr);
    CHECK(f->first_step == 11447);
  }
  {  // Experiment 12: grad norm 2.3e5 -> 3.27e6, then a missing lm loss and the scale halving
    const auto r = replay(section("tr8-104B-wide", "Experiment 12"), "iteration", "lm_loss");
    CAPTURE(describe(r));
    const auto* f = first(r, "missing loss value");
    REQUIRE(f != nullptr);
    CHECK(f->first_step == 9027);
    CHECK(f->severity == mldiag::severity::critical);
  }
  {  // Embed-norm experiment 7: loss 2.667 -> 4.374 at 17062, loss scale halving 1048576 -> 32768
    const auto r = replay(section("tr8b-104B", "Embed-Norm Experiment 7"), "iteration", "lm_loss");
    CAPTURE(describe(r));
    const auto* spike = first(r, "loss spike");
    REQUIRE(spike != nullptr);
    CHECK(spike->first_step == 17062);
    const auto* scale = first(r, "loss scale halving step after step");
    REQUIRE(scale != nullptr);
    CHECK(scale->first_step >= 17064);
    CHECK(scale->first_step <= 17068);
  }
}

int main(int argc, char** argv) {
  if (!std::filesystem::is_directory(data_dir())) {
    std::printf("mldiag: real-run tests skipped: %s not found (set MLDIAG_REAL_RUNS to the folder)\n",
                data_dir().string().c_str());
    return 77;
  }
  return mldiag_test::run(argc, argv);
}
