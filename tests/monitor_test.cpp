// SPDX-License-Identifier: Apache-2.0
// The monitor in a real (small) training loop: findings out, diagnoses opened in phase 1,
// sinks, the L0 configuration checks, and no allocation on quiet steps.
#include <doctest/doctest.h>

#include "mldiag/monitor.hpp"

#include "support/count_allocations.hpp"
#include "support/softmax_trainer.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace {
void feed(mldiag::monitor& mon, const mldiag_test::trainer_config& c, std::vector<std::string>* seen = nullptr) {
  mldiag_test::train_softmax(c, [&](int, double loss, const std::vector<float>& gw, const std::vector<float>& gb) {
    mon.observe_loss(loss);
    mon.observe_lr(c.lr);
    mon.observe(mldiag::role::gradient, "classifier.weight", gw);
    mon.observe(mldiag::role::gradient, "classifier.bias", gb);
    for (const auto& f : mon.end_step())
      if (seen) seen->push_back(f.symptom);
  });
}
}  // namespace

TEST_CASE("a healthy run stays quiet and a planted LR fault opens diagnoses in phase 1") {
  mldiag::monitor quiet({.classes = 3});
  std::vector<std::string> none;
  feed(quiet, {.lr = 0.5}, &none);
  CHECK(none.empty());
  CHECK(quiet.open_diagnoses() == 0);

  mldiag::monitor mon({.classes = 3});
  std::vector<std::string> seen, sunk;
  mon.add_sink([&](const mldiag::finding& f) { sunk.push_back(f.symptom); });
  feed(mon, {.lr = 10.0}, &seen);
  REQUIRE(!seen.empty());
  CHECK(sunk == seen);  // every finding reaches the sinks
  REQUIRE(mon.open_diagnoses() >= 1);
  // One diagnosis per question and symptom, however often it fired.
  for (std::size_t i = 0; i < mon.open_diagnoses(); ++i)
    for (std::size_t j = i + 1; j < mon.open_diagnoses(); ++j)
      CHECK(mon.opened_by(i).symptom != mon.opened_by(j).symptom);
  auto dx = mon.take_diagnosis(0);
  CHECK(dx.log().front().phase == mldiag::protocol::phase_id::evidence);
  auto pattern = std::move(dx).with_baseline(mon.baseline());
  const auto candidates = pattern.candidates();
  CHECK(std::any_of(candidates.begin(), candidates.end(), [](const auto* row) { return row->cause == "learning rate too high"; }));
  CHECK_THROWS_WITH_AS((void)mon.take_diagnosis(99), doctest::Contains("mldiag: monitor::take_diagnosis: index 99"), mldiag::error);
}

TEST_CASE("L0: the static configuration is checked before the first step") {
  mldiag::monitor mon;
  const auto f = mon.check_configuration({.learning_rate = -1e-3, .classes = 10, .label_min = 0, .label_max = 10,
                                          .fp16 = true, .loss_scaling = false, .data_loader_workers = 0});
  REQUIRE(f.size() == 4);
  CHECK(f[0].symptom == "learning rate not finite or negative");
  CHECK(f[1].symptom == "labels out of range");
  CHECK(f[2].symptom == "fp16 without loss scaling");
  CHECK(f[3].question == mldiag::question::efficiency);
  CHECK(mon.open_diagnoses() == 3);  // info findings open none
  CHECK(mon.check_configuration({.learning_rate = 3e-4, .classes = 10, .label_min = 0, .label_max = 9}).empty());
}

TEST_CASE("a quiet step allocates nothing after warm-up") {
  mldiag::monitor mon;
  std::vector<float> g(512, 0.01f);
  auto step = [&](int i) {
    mon.observe_loss(1.0 + 3.0 * std::exp(-i / 300.0));
    mon.observe_lr(1e-3);
    mon.observe(mldiag::role::gradient, "w", g);
    return mon.end_step().size();
  };
  std::size_t fired = 0;
  for (int i = 0; i < 600; ++i) fired += step(i);  // beyond the history (512): every slot has grown
  REQUIRE(fired == 0);
  const auto before = mldiag_test::allocations();
  for (int i = 600; i < 1600; ++i) fired += step(i);
  CHECK(fired == 0);
  CHECK(mldiag_test::allocations() == before);
}
