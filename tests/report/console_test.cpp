// SPDX-License-Identifier: Apache-2.0
// report/console.hpp: one line per episode onset, severity rise and new place, counted in the
// sink's output (a stream and a FILE*); through a real monitor with one line to attach.
#include "mldiag/report/console.hpp"

#include "../support/count_allocations.hpp"
#include "mldiag/monitor.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace r = mldiag::report;
using mldiag::severity;

mldiag::finding fired(std::int64_t step, severity s, std::vector<std::string> where) {
  mldiag::finding f;
  f.question = mldiag::question::convergence;
  f.symptom = "exploding gradients";
  f.severity = s;
  f.first_step = 100;
  f.last_step = step;
  double score = 50.0;
  for (auto& w : where)
    f.where.emplace_back(std::move(w), score--);
  f.evidence = {
      {"ratio_to_median", 30.0}, {"grad_norm", 3.0}, {"steps_up", 1.0}, {"loss_rose", 0.0}};
  f.detector = "exploding_gradients";
  return f;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("console: 7500 deliveries print 1 line, a rise a 2nd, a new place a 3rd") {
  std::ostringstream out;
  const r::console_sink sink(out);
  for (std::int64_t s = 100; s < 7600; ++s)
    sink(fired(s, severity::warning, {"grad/fc1.weight"}));
  auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "mldiag: warning Q1 convergence: exploding gradients (steps 100-100) at grad/fc1.weight "
        "[ratio_to_median=30 grad_norm=3 steps_up=1 ...] (new)");

  sink(fired(7600, severity::critical, {"grad/fc1.weight"}));
  for (std::int64_t s = 7601; s < 7700; ++s)
    sink(fired(s, severity::critical, {"grad/fc1.weight"}));
  lines = lines_of(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].find("mldiag: critical Q1 convergence: exploding gradients (steps 100-7600)") ==
        0);
  CHECK(lines[1].find("(up from warning; episode since step 100, 7501 deliveries)") !=
        std::string::npos);

  sink(fired(7700, severity::warning, {"grad/fc1.weight", "grad/fc2.weight"}));
  for (std::int64_t s = 7701; s < 7800; ++s)
    sink(fired(s, severity::warning, {"grad/fc1.weight", "grad/fc2.weight"}));
  lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[2].find("(now also at grad/fc2.weight; episode since step 100, 7601 deliveries)") !=
        std::string::npos);
  CHECK(sink.lines() == 3);
  REQUIRE(sink.episodes().size() == 1);
  CHECK(sink.episodes()[0].count == 7700);

  // After a quiet gap longer than the rule's, the same symptom is a new episode: a 4th line.
  auto later = fired(7799 + r::default_episode_gap + 1, severity::warning, {"grad/fc1.weight"});
  later.first_step = later.last_step;
  sink(later);
  lines = lines_of(out.str());
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].find("(new)") != std::string::npos);
  CHECK(sink.episodes().size() == 2);
}

TEST_CASE("console: below min_severity is tracked, not printed, and a rise out of it prints") {
  std::ostringstream out;
  const r::console_sink sink(out);  // default: warnings and above
  for (std::int64_t s = 0; s < 50; ++s)
    sink(fired(s, severity::info, {"grad/fc1.weight"}));
  CHECK(out.str().empty());
  sink(fired(50, severity::warning, {"grad/fc1.weight"}));
  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("(up from info;") != std::string::npos);
  std::ostringstream all;
  const r::console_sink everything(all, {.min_severity = severity::info});
  everything(fired(0, severity::info, {}));
  CHECK(lines_of(all.str()).size() == 1);
}

TEST_CASE(
    "console: a configuration finding says before training, and a FILE* gets the same lines") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const r::console_sink sink(file);
  mldiag::finding config;
  config.question = mldiag::question::efficiency;
  config.symptom = "attention without a fused kernel";
  config.severity = severity::warning;
  config.where = {{"fused_attention", 0.0}};
  config.detector = "configuration";
  sink(config);
  sink(config);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;)
    text += static_cast<char>(c);
  std::fclose(file);
  CAPTURE(text);
  CHECK(lines_of(text).size() == 1);
  CHECK(text.find("attention without a fused kernel (before training) at fused_attention") !=
        std::string::npos);
  CHECK(text.find("-1") == std::string::npos);
  CHECK_THROWS_WITH_AS(r::console_sink(static_cast<std::FILE*>(nullptr)),
                       doctest::Contains("mldiag: console_sink"), mldiag::error);
}

TEST_CASE("console: a repeat allocates nothing, and copies share the episodes") {
  std::ostringstream out;
  const r::console_sink sink(out);
  const auto f = fired(100, severity::warning, {"grad/fc1.weight"});
  sink(f);
  const auto before = mldiag_test::allocations();
  for (int i = 0; i < 1000; ++i)
    sink(f);
  CHECK(mldiag_test::allocations() == before);
  const r::console_sink copy = sink;
  copy(f);
  CHECK(sink.episodes()[0].count == 1002);
  CHECK(lines_of(out.str()).size() == 1);
}

TEST_CASE("console: attached to a monitor in one line, a fault held for 300 steps prints once") {
  std::ostringstream out;
  mldiag::monitor mon;
  mon.attach(r::console_sink(out));
  // Gradients steady at 1 for 200 steps, then 50x for 300 steps while the loss stays flat.
  const std::vector<float> calm(64, 0.125f), hot(64, 6.25f);
  std::size_t delivered = 0;
  mon.attach(
      [&](const mldiag::finding& f) { delivered += f.symptom == "exploding gradients" ? 1 : 0; });
  for (std::int64_t step = 0; step < 500; ++step) {
    mon.observe(mldiag::scalar::loss, 2.0 + 0.01 * static_cast<double>(step % 3));
    mon.observe(mldiag::role::gradient, "fc1.weight",
                std::span<const float>(step < 200 ? calm : hot));
    (void)mon.end_step();
  }
  CAPTURE(out.str());
  // The detector fires at many steps; the monitor delivers the episode once per escalation
  // (monitor::episode_gap)...
  CHECK(delivered >= 1);
  CHECK(delivered <= 2);
  std::size_t printed = 0;
  for (const auto& line : lines_of(out.str()))
    printed += line.find("exploding gradients") != std::string::npos ? 1 : 0;
  CHECK(printed >= 1);
  CHECK(printed <= 2);  // ...the console says it once (twice if it rose from warning to critical)
}
