// SPDX-License-Identifier: Apache-2.0
// Each detector fires on a synthetic run with its fault, at the expected step, and stays
// silent on the same run without it; combinators and sets behave as documented.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "../support/count_allocations.hpp"

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace {

// A healthy synthetic run: loss decaying with noise, gradient norm around 1 with noise,
// fp16 loss scale steady. `fault(step, rec)` may change the step's evidence.
template <class Detector>
std::vector<mldiag::finding> run(Detector& d, int steps, const std::function<void(int, mldiag::recorder&, double&, double&)>& fault) {
  mldiag::recorder rec(64);
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<float> grad(64);
  std::vector<mldiag::finding> out;
  for (int step = 0; step < steps; ++step) {
    rec.begin_step(step);
    double loss = 2.0 + 3.0 * std::exp(-step / 200.0) + 0.05 * noise(rng);
    double grad_scale = 1.0 + 0.1 * noise(rng);
    fault(step, rec, loss, grad_scale);
    rec.record_loss(loss);
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(grad_scale * 0.125 * ((i % 2) ? 1 : -1));
    rec.record(mldiag::role::gradient, "layers.0.w", grad);
    if (!rec.current().has_loss_scale) rec.record_loss_scale(65536.0);
    const auto& now = rec.end_step();
    d.observe({now, rec.past(), rec.names()}, out);
  }
  return out;
}

const auto healthy = [](int, mldiag::recorder&, double&, double&) {};

}  // namespace

TEST_CASE("non_finite fires at the first NaN and names the first tensor in layer order") {
  mldiag::detectors::non_finite d;
  CHECK(run(d, 300, healthy).empty());
  std::vector<float> bad = {1.0f, NAN, INFINITY};
  const auto f = run(d, 300, [&](int step, mldiag::recorder& rec, double&, double&) {
    if (step >= 120) rec.record(mldiag::role::activation, "layers.3.act", bad);
  });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 120);
  CHECK(f.front().severity == mldiag::severity::critical);
  CHECK(f.front().where.front().first == "act/layers.3.act");
  const auto l = run(d, 300, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 77) loss = NAN; });
  REQUIRE(l.size() == 1);
  CHECK(l.front().symptom == "non-finite loss");
  CHECK(l.front().first_step == 77);
}

TEST_CASE("exploding_gradients fires when the norm jumps 50x and not on 5x noise") {
  mldiag::detectors::exploding_gradients d;
  CHECK(run(d, 300, healthy).empty());
  mldiag::detectors::exploding_gradients d2;
  CHECK(run(d2, 300, [](int step, mldiag::recorder&, double&, double& g) { if (step % 50 == 10) g *= 5; }).empty());
  mldiag::detectors::exploding_gradients d3;
  const auto f = run(d3, 300, [](int step, mldiag::recorder&, double&, double& g) { if (step >= 200) g *= 50 * (step - 199); });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 200);
  CHECK(f.front().severity == mldiag::severity::warning);
  CHECK(f.back().severity == mldiag::severity::critical);  // 50 x 100 by the end
  CHECK(f.front().where.front().first == "grad/layers.0.w");
}

TEST_CASE("loss_spike fires on a sustained 2x loss and not on single-step outliers") {
  mldiag::detectors::loss_spike d;
  CHECK(run(d, 400, healthy).empty());
  mldiag::detectors::loss_spike d2;
  CHECK(run(d2, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step % 97 == 50) loss *= 1.9; }).empty());
  mldiag::detectors::loss_spike d3;
  const auto f = run(d3, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step >= 300 && step < 330) loss *= 2.0; });
  REQUIRE(!f.empty());
  CHECK(f.front().first_step == 300);  // the run began at 300; reported at 301 (sustain 2)
  CHECK(f.front().last_step == 301);
  CHECK(f.front().question == mldiag::question::early_anomaly);
  // The method's rule (10x the moving average) ignores a 2x spike and catches a 12x one.
  auto rule = mldiag::detectors::loss_spike::method_rule();
  CHECK(run(rule, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step >= 300) loss *= 2.0; }).empty());
  auto rule2 = mldiag::detectors::loss_spike::method_rule();
  const auto g = run(rule2, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 350) loss *= 12.0; });
  REQUIRE(g.size() == 1);
  CHECK(g.front().first_step == 350);
}

TEST_CASE("divergence fires on a missing loss a steady climb and a halving loss scale") {
  mldiag::detectors::divergence d;
  CHECK(run(d, 300, healthy).empty());
  // Missing loss: a step without one after steps with one.
  mldiag::recorder rec(8);
  std::vector<mldiag::finding> out;
  mldiag::detectors::divergence m;
  for (int step = 0; step < 5; ++step) {
    rec.begin_step(step);
    if (step != 3) rec.record_loss(1.0);
    m.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  REQUIRE(out.size() == 1);
  CHECK(out.front().symptom == "missing loss value");
  CHECK(out.front().first_step == 3);
  // A climb: +15% per step from step 200.
  mldiag::detectors::divergence c;
  const auto f = run(c, 260, [](int step, mldiag::recorder&, double& loss, double&) {
    if (step >= 200) loss *= std::pow(1.15, step - 199);
  });
  REQUIRE(!f.empty());
  CHECK(f.front().symptom == "sustained loss increase");
  CHECK(f.front().first_step == 202);  // three rises, all 10% above the baseline, 30% in all
  // The loss scale halving four times in a row from step 100.
  mldiag::detectors::divergence s;
  const auto h = run(s, 200, [](int step, mldiag::recorder& r, double&, double&) {
    if (step >= 100 && step < 104) r.record_loss_scale(65536.0 / std::pow(2.0, step - 99));
    else if (step >= 104) r.record_loss_scale(4096.0);
  });
  REQUIRE(!h.empty());
  CHECK(h.front().symptom == "loss scale halving step after step");
  CHECK(h.front().first_step == 102);  // the third halving
}

TEST_CASE("combinators: after_warmup drops early findings and sustained needs a run") {
  using namespace mldiag::detectors;
  after_warmup<non_finite> w(50, non_finite{});
  const auto f = run(w, 100, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 10 || step == 60) loss = NAN; });
  REQUIRE(f.size() == 1);
  CHECK(f.front().first_step == 60);
  sustained<non_finite> s(3, non_finite{});
  const auto g = run(s, 100, [](int step, mldiag::recorder&, double& loss, double&) {
    if (step == 10 || step == 11 || (step >= 40 && step < 45)) loss = NAN;
  });
  REQUIRE(g.size() == 3);  // steps 42, 43, 44 of the run that began at 40
  CHECK(g.front().first_step == 40);
  CHECK(g.front().last_step == 42);
  any_of<non_finite, non_finite> once(non_finite{}, non_finite{});
  CHECK(run(once, 30, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 5) loss = NAN; }).size() == 1);
  static_set<non_finite, loss_spike> both(non_finite{}, loss_spike{});
  CHECK(run(both, 30, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 5) loss = NAN; }).size() == 1);
}

TEST_CASE("detectors are configured by name and unknown names or parameters are refused") {
  using namespace mldiag::detectors;
  auto d = make_detector("loss_spike", {{"factor", 3.0}, {"sustain", 1.0}});
  CHECK(d.name() == "loss_spike");
  const auto f = run(d, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 350) loss *= 2.5; });
  CHECK(f.empty());  // 2.5x is below the configured factor 3
  CHECK_THROWS_WITH_AS(make_detector("loss_spikes"), doctest::Contains("mldiag: make_detector: no detector named 'loss_spikes'"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(make_detector("loss_spike", {{"threshold", 2.0}}),
                       doctest::Contains("unknown parameter 'threshold'; its parameters are: factor, sustain"), mldiag::error);
  CHECK(default_set().size() == 4);
}

TEST_CASE("the default set allocates nothing on a step where nothing fires") {
  auto set = mldiag::detectors::default_set();
  mldiag::recorder rec(64);
  std::vector<float> grad(256, 0.01f);
  std::vector<mldiag::finding> out;
  out.reserve(16);
  auto step = [&](int i) {
    rec.begin_step(i);
    rec.record_loss(3.0 + 0.01 * (i % 7));
    rec.record_loss_scale(65536.0);
    rec.record(mldiag::role::gradient, "w", grad);
    set.observe({rec.end_step(), rec.past(), rec.names()}, out);
  };
  for (int i = 0; i < 200; ++i) step(i);
  REQUIRE(out.empty());
  const auto before = mldiag_test::allocations();
  for (int i = 200; i < 1200; ++i) step(i);
  CHECK(mldiag_test::allocations() == before);
  CHECK(out.empty());
}
