// SPDX-License-Identifier: Apache-2.0
// update_ratio: an update too large or too small for its parameter.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/update_ratio.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::filled;
using mldiag::finding;
using mldiag::role;
}  // namespace

TEST_CASE("update_ratio reads parameters and updates: a bias is skipped, a step of 1.5x its tensor is too large") {
  std::vector<float> param(256, 1.0f), small(256, 1e-5f), huge(256, 1.5f);
  std::vector<float> bias(255, 0.01f), bias_step(255, 0.01f);  // ratio 1, but a bias: skipped
  mldiag::detectors::update_ratio u;
  CHECK(run(u, 50, [&](int, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::parameter, "w", param);
    r.observe(mldiag::role::update, "w", small);  // ratio 1e-5
    r.observe(mldiag::role::parameter, "b", bias);
    r.observe(mldiag::role::update, "b", bias_step);
  }).empty());
  mldiag::detectors::update_ratio u2;
  const auto g = run(u2, 50, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::parameter, "w", param);
    r.observe(mldiag::role::update, "w", step >= 30 ? huge : small);
  });
  REQUIRE(g.size() == 1);
  CHECK(g.front().symptom == "update ratio too large");
  CHECK(g.front().first_step == 30);
}

TEST_CASE("update_ratio: a step small because its gradient is small is not an update too small") {
  // SGD at 0.01 over three weight matrices of 256 elements at 1.0 (norm 16); a residual branch
  // behind a ReZero gate at ~0 gets a gradient of 5e-6 per element, so its step is 5e-8 of the
  // tensor. `rate` is each tensor's learning rate, `grad` its gradient per element.
  struct tensor_case {
    const char* name;
    double rate, grad;
  };
  const auto run = [](std::vector<tensor_case> tensors) {
    mldiag::detectors::update_ratio d;
    mldiag::recorder rec(4);
    std::vector<finding> out;
    const auto param = filled(256, 1.0f);
    for (int step = 0; step < 10; ++step) {
      rec.begin_step(step);
      for (const auto& t : tensors) {
        rec.observe(role::parameter, t.name, param);
        rec.observe(role::gradient, t.name, filled(256, static_cast<float>(t.grad)));
        rec.observe(role::update, t.name, filled(256, static_cast<float>(t.rate * t.grad)));
      }
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run({{"stem.weight", 0.01, 0.01}, {"blocks.0.conv.weight", 0.01, 5e-6}, {"head.weight", 0.01, 0.01}}).empty());
  // Twins: the branch in a parameter group of its own at 1e-8 (its gradient normal): stepped at
  // a millionth of the others' rate; and a learning rate of 1e-9 for all (nothing moves).
  const auto own_group = run({{"stem.weight", 0.01, 0.01}, {"blocks.0.conv.weight", 1e-8, 0.01}, {"head.weight", 0.01, 0.01}});
  REQUIRE(own_group.size() == 1);
  CHECK(own_group[0].symptom == "update ratio too small");
  CHECK(own_group[0].where.front().first == "param/blocks.0.conv.weight");
  const auto all_small = run({{"stem.weight", 1e-9, 0.01}, {"blocks.0.conv.weight", 1e-9, 0.01}, {"head.weight", 1e-9, 0.01}});
  REQUIRE(all_small.size() == 1);
  CHECK(all_small[0].symptom == "update ratio too small");
}
