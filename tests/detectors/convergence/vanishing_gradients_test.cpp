// SPDX-License-Identifier: Apache-2.0
// vanishing_gradients: gradients too small to train, or dying from the output back to the input.
#include <doctest/doctest.h>

#include "mldiag/detectors/convergence/vanishing_gradients.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace {
using mldiag_test::run;
using mldiag_test::healthy;
using mldiag_test::filled;
using mldiag::finding;
using mldiag::role;
}  // namespace

TEST_CASE("vanishing_gradients fires on tiny gradients and on a first-to-last layer collapse") {
  mldiag::detectors::vanishing_gradients d;
  CHECK(run(d, 100, healthy).empty());
  mldiag::detectors::vanishing_gradients t;
  const auto f = run(t, 100, [](int step, mldiag::recorder&, double&, double& g) { if (step >= 50) g = 1e-12; });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 50);
  CHECK(f.front().last_step == 54);
  mldiag::detectors::vanishing_gradients layers;
  std::vector<float> tiny(64, 1e-6f), normal(64, 1e-2f);
  const auto g = run(layers, 100, [&](int step, mldiag::recorder& r, double&, double&) {
    r.observe(mldiag::role::gradient, "embed", step >= 30 ? tiny : normal);  // first in layer order
    r.observe(mldiag::role::gradient, "embed.scale", step >= 30 ? tiny : normal);
  });
  // "embed" and "embed.scale" are recorded before "layers.0.w" each step: the first layer.
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 30);
  CHECK(g.front().where.front().first == "grad/embed");
}

TEST_CASE("vanishing_gradients: the merged RMS decides the line wherever a bound cannot") {
  // 64 tensors of 64 elements: the largest |g| over sqrt(4096) is far below the line at 1e-9,
  // so the RMS comes from the merged statistics; one element of 1e-6 among zeros is decided
  // by the bound (1.6e-8, far above the line), one of 1e-8 is not (its RMS is 64 times below).
  const auto rms_findings = [](double value, bool single) {
    mldiag::detectors::vanishing_gradients d;
    mldiag::recorder rec(8);
    std::vector<mldiag::finding> out;
    std::vector<float> g(64);
    for (int step = 0; step < 10; ++step) {
      rec.begin_step(step);
      for (int t = 0; t < 64; ++t) {
        for (std::size_t i = 0; i < g.size(); ++i)
          g[i] = single ? (t == 5 && i == 0 ? static_cast<float>(value) : 0.0f)
                        : static_cast<float>(i % 2 ? value : -value);
        rec.observe(mldiag::role::gradient, "layers." + std::to_string(t), g);
      }
      const auto& now = rec.end_step();
      d.observe({now, rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(rms_findings(1.5e-9, false).empty());
  CHECK(rms_findings(1e-7, false).empty());
  CHECK(rms_findings(1e-6, true).empty());
  const auto f = rms_findings(0.9e-9, false);
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 0);
  CHECK(f.front().evidence.front().first == "grad_rms");
  CHECK(f.front().evidence.front().second == doctest::Approx(0.9e-9).epsilon(1e-6));
  // Its largest |g| is above the line, its RMS 64 times below.
  const auto one = rms_findings(1e-8, true);
  REQUIRE(one.size() == 1);
  CHECK(one.front().evidence.front().second == doctest::Approx(1e-8 / 64).epsilon(1e-6));
}

// Round 6 of the zoo (held-out, measured once) exposed three assumptions that a tensor
// starting at zero and a checkpoint break; each mechanism below has its twin that must still
// fire.
TEST_CASE("vanishing_gradients: a gradient through a factor that starts at zero is not vanishing through depth") {
  // LoRA (PEFT's initialization): lora_B = 0, so lora_A's gradient s B^T delta x^T is exactly 0
  // at step 0 and grows with ||B|| (the zoo's round 6: 2.9e-4 of the new head's RMS at step 4,
  // 1e-3 near step 17), while lora_B's gradient s delta (A x)^T is normal from the start.
  enum class first_layer { lora, vanishing };
  const auto run = [](first_layer kind, std::size_t input_tensors) {
    mldiag::detectors::vanishing_gradients::config c;
    c.input_tensors = input_tensors;
    mldiag::detectors::vanishing_gradients d(c);
    mldiag::recorder rec(4);
    std::vector<finding> out;
    for (int step = 0; step < 40; ++step) {
      rec.begin_step(step);
      const bool lora = kind == first_layer::lora;
      const double a_rms = lora ? 3e-6 * step : 1e-6, b_rms = lora ? 0.01 : 1e-6;
      rec.observe(role::gradient, "fc1.lora_A.weight", filled(256, static_cast<float>(a_rms)));
      rec.observe(role::gradient, "fc1.lora_B.weight", filled(256, static_cast<float>(b_rms)));
      rec.observe(role::gradient, "head.weight", filled(64, 0.05f));
      d.observe({rec.end_step(), rec.past(), rec.names()}, out);
    }
    return out;
  };
  CHECK(run(first_layer::lora, 2).empty());
  // The mechanism's twin: the first tensor alone as the input side (the rule before round 6)
  // reads lora_A's ratio, 2.4e-4 at step 4, as vanishing.
  CHECK(run(first_layer::lora, 1).size() == 1);
  // And the fault's: both tensors of the first layer at 2e-5 of the last, found at step 4.
  const auto vanishing = run(first_layer::vanishing, 2);
  REQUIRE(vanishing.size() == 1);
  CHECK(vanishing[0].first_step == 0);
  CHECK(vanishing[0].last_step == 4);
  CHECK(vanishing[0].where.front().first == "grad/fc1.lora_A.weight");
}

TEST_CASE("vanishing_gradients: all-zero gradients of a batch fit exactly (loss 0) are not vanishing") {
  // The zoo's triplet runs at batch 8 (issue 38): a margin loss met by every triplet of a batch
  // is exactly 0 and so is every gradient, for runs of several steps. A dead network (its
  // gradients exactly 0, its loss stuck well above 0) is the twin that must still fire.
  mldiag::detectors::vanishing_gradients fit;
  CHECK(run(fit, 100, [](int step, mldiag::recorder&, double& loss, double& g) {
          if (step >= 50 && step < 70) loss = 0.0, g = 0.0;
        }).empty());
  mldiag::detectors::vanishing_gradients dead;
  const auto f = run(dead, 100, [](int step, mldiag::recorder&, double& loss, double& g) {
    if (step >= 50 && step < 70) loss = 2.3, g = 0.0;
  });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 50);
  CHECK(f.front().evidence.front().second == 0.0);  // grad_rms
  // A loss of exactly 0 does not excuse gradients that are not 0 but tiny (a loss that reads 0
  // in its own rounding while a signal is lost through depth still says so).
  mldiag::detectors::vanishing_gradients tiny;
  CHECK(run(tiny, 100, [](int step, mldiag::recorder&, double& loss, double& g) {
          if (step >= 50 && step < 70) loss = 0.0, g = 1e-12;
        }).size() == 1);
}
