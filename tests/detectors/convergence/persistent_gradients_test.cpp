// SPDX-License-Identifier: Apache-2.0
// persistent_gradients through the default monitor, fed by a real gradient_persistence: a
// gradient that is never zeroed (the sum of every step's) is found as Q1 within 51 steps;
// independent mini-batch gradients stay quiet, also when one direction dominates every batch
// (consecutive gradients agree, increments do not); full-batch training (gradients and
// increments agree, a loss that falls smoothly) is info at most.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/detectors/convergence/persistent_gradients.hpp"
#include "mldiag/evidence/persistence.hpp"
#include "mldiag/monitor.hpp"

#include "../support.hpp"

#include <cmath>
#include <cstddef>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

// "w<t>", built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive) on
// "w" + std::to_string(t).
std::string tensor_name(std::size_t t) {
  std::string s = "w";
  s += std::to_string(t);
  return s;
}

using mldiag::severity;

enum class regime { minibatch, dominant_direction, never_zeroed, full_batch };

using mldiag_test::evidence;

struct outcome {
  std::vector<mldiag::finding> findings;  // every delivered finding
  [[nodiscard]] const mldiag::finding* first(std::string_view symptom) const {
    for (const auto& f : findings)
      if (f.symptom == symptom) return &f;
    return nullptr;
  }
  [[nodiscard]] std::size_t at_least(severity s) const {
    std::size_t n = 0;
    for (const auto& f : findings) n += f.severity >= s ? 1 : 0;
    return n;
  }
};

// A model of three tensors; each step's "fresh" gradient is a shared direction (what every
// batch agrees on, shrinking as the loss falls) plus batch noise. The loss falls with noise
// (mini-batches) or smoothly (full batch).
outcome simulate(regime r, int steps, unsigned seed) {
  mldiag::monitor mon;
  auto out = std::make_shared<outcome>();
  mon.attach([out](const mldiag::finding& f) { out->findings.push_back(f); });
  mldiag::gradient_persistence persist;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n01;
  const std::vector<std::size_t> sizes = {64 * 32, 32, 10 * 64};
  std::vector<std::vector<double>> direction(sizes.size()), second(sizes.size()), accumulated(sizes.size());
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    direction[t].resize(sizes[t]);
    second[t].resize(sizes[t]);
    accumulated[t].assign(sizes[t], 0.0);
    for (auto& v : direction[t]) v = n01(gen);
    for (auto& v : second[t]) v = 0.5 * n01(gen);
  }
  for (int i = 0; i < steps; ++i) {
    mon.begin_step(i);
    const double progress = std::exp(-static_cast<double>(i) / 150.0);
    const double noise = r == regime::full_batch ? 0.0 : 0.05 * n01(gen);
    mon.observe(mldiag::scalar::loss, 2.3 * (0.3 + 0.7 * progress) + noise);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> g(sizes[t]);
      for (std::size_t e = 0; e < sizes[t]; ++e) {
        // Mini-batches add noise three times the shared direction (consecutive cosines near
        // 0.1, as the zoo's are).
        // A dominant direction: every batch agrees on a direction three times the noise (the
        // zoo's autoencoders pulled toward the mean image), so consecutive gradients agree too.
        // Never zeroed: fresh gradients like the dominant case's, summed.
        // Full batch: no batch noise; the gradient turns smoothly from one direction toward a
        // second as the loss falls (gradient descent's trajectory), so increments agree too.
        const double fresh = r == regime::full_batch ? direction[t][e] * progress + second[t][e] * (1.0 - progress)
                             : r == regime::minibatch ? 0.3 * progress * direction[t][e] + n01(gen)
                                                      : 3.0 * direction[t][e] + n01(gen);
        accumulated[t][e] = (r == regime::never_zeroed ? accumulated[t][e] : 0.0) + fresh;
        g[e] = static_cast<float>(accumulated[t][e]);
      }
      persist.add(tensor_name(t), std::span<const float>(g));
    }
    if (const auto c = persist.finish_step()) mon.observe(*c);
    (void)mon.end_step();
  }
  return *out;
}

}  // namespace

TEST_CASE("persistent_gradients finds gradients never zeroed as Q1 within 51 steps") {
  for (unsigned seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    const auto o = simulate(regime::never_zeroed, 200, seed);
    const auto* f = o.first("gradients persist across steps");
    REQUIRE(f != nullptr);
    // Found at once, as a claim awaiting its consequence: this simulated loss goes on falling
    // (the next test case's twin makes it climb, and the claim a warning).
    CHECK(f->severity == severity::info);
    CHECK(f->awaits_consequence);
    CHECK(f->question == mldiag::question::convergence);
    CHECK(f->detector == "persistent_gradients");
    CHECK(f->last_step <= 51);  // window 20 + sustain 30 after the first increments (step 2)
    CHECK(f->first_step <= 3);
    CHECK(evidence(*f, "median_cosine") >= 0.85);
    CHECK(evidence(*f, "median_increment_cosine") >= 0.0);
    CHECK(evidence(*f, "loss_rise_fraction") >= 0.1);
  }
}

TEST_CASE("persistent_gradients stays quiet on independent mini-batch gradients, dominant direction or not") {
  for (const regime r : {regime::minibatch, regime::dominant_direction}) {
    for (unsigned seed : {4u, 5u, 6u}) {
      CAPTURE(seed);
      CAPTURE(r == regime::minibatch);
      const auto o = simulate(r, 400, seed);
      CHECK(o.first("gradients persist across steps") == nullptr);
      CHECK(o.first("gradients nearly identical step to step (full-batch training?)") == nullptr);
      CHECK(o.at_least(severity::warning) == 0);
    }
  }
}

TEST_CASE("persistent_gradients: full-batch training's agreeing gradients are info, not a warning") {
  const auto o = simulate(regime::full_batch, 200, 7);
  CHECK(o.first("gradients persist across steps") == nullptr);
  const auto* f = o.first("gradients nearly identical step to step (full-batch training?)");
  REQUIRE(f != nullptr);
  CHECK(f->severity == severity::info);
  CHECK(evidence(*f, "loss_rise_fraction") < 0.1);
}

TEST_CASE("persistent_gradients: bad parameters are refused with an mldiag: message") {
  using C = mldiag::detectors::persistent_gradients::config;
  CHECK_THROWS_WITH_AS(mldiag::detectors::persistent_gradients(C{.window = 0}), doctest::Contains("mldiag:"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::detectors::persistent_gradients(C{.min_cosine = 1.0}), doctest::Contains("min_cosine"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::detectors::make_detector("persistent_gradients", {{"windw", 3.0}}),
                       doctest::Contains("min_loss_rises"), mldiag::error);
}

TEST_CASE("persistent gradients wait for their consequence: a warning when the loss worsens or the agreement lasts") {
  // Consecutive gradients that agree (cosine 0.95, increments at 0.1) while the loss moves up
  // on a third of the steps: the signature of gradients never zeroed, and of a healthy CTC
  // network's first 50 steps under Adam (round 12), whose agreement then ends. It is info
  // awaiting its consequence; the monitor makes it a warning when the loss's mean rises 10%
  // above its best (harm_watch), the detector when the agreement lasts `persist` (100) more steps.
  const auto run_with = [](bool loss_worsens, int agree_until) {
    mldiag::monitor mon;
    return mldiag_test::run_monitor(mon, 200, [&](int step, mldiag::monitor& m) {
      m.observe(step < agree_until ? mldiag::gradient_cosines{0.95, 0.1} : mldiag::gradient_cosines{0.1, -0.5});
      const double trend = loss_worsens && step >= 120 ? 1.0 + 0.02 * (step - 120) : 1.0 - 0.001 * step;
      m.observe(mldiag::scalar::loss, trend * (step % 3 == 0 ? 1.02 : 1.0));
    });
  };
  // The agreement ends at step 100 (its onset at 48), the loss goes on falling: info only.
  const auto quiet = run_with(false, 100);
  const auto persist = quiet.named(mldiag::symptoms::gradients_persist.text);
  REQUIRE(persist.size() == 1);
  CHECK(persist[0].severity == mldiag::severity::info);
  CHECK(persist[0].awaits_consequence);
  CHECK(persist[0].last_step == 48);  // the window full at step 19, then sustain 30
  CHECK(quiet.at_least(mldiag::severity::warning).empty());
  // Twin: the loss climbs from step 120: the same claim, escalated with the harm in its reason.
  const auto harmed = run_with(true, 100).named(mldiag::symptoms::gradients_persist.text);
  REQUIRE(harmed.size() == 2);
  CHECK(harmed[1].severity == mldiag::severity::warning);
  CHECK(harmed[1].why.find("consequence observed") != std::string::npos);
  // Twin: the agreement lasts, the loss still falls: a warning 100 steps after the onset.
  const auto lasting = run_with(false, 200).named(mldiag::symptoms::gradients_persist.text);
  REQUIRE(lasting.size() == 2);
  CHECK(lasting[1].severity == mldiag::severity::warning);
  CHECK(lasting[1].last_step == 148);  // 100 after the onset
  CHECK(lasting[1].first_step == persist[0].first_step);
  CHECK(lasting[1].why.find("held 100 of 100") != std::string::npos);
}
