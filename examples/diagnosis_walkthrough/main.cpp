// SPDX-License-Identifier: Apache-2.0
// A diagnosis from symptom to verified fix, the way the method goes: a small linear-regression
// training loop with a planted fault (a learning rate far too high), watched by mldiag's
// monitor; the finding opens a diagnosis; a wrong hypothesis is rejected, the right one
// confirmed by an experiment with exactly one change; the fix is verified against the baseline.
#include <mldiag/monitor.hpp>
#include <mldiag/protocol/diagnosis.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace {

struct settings {
  double lr = 0.05;
  double batch = 64;
};

// Trains y = w.x + noise (4 features, MSE) for 300 steps under a monitor.
mldiag::monitor train(const settings& s) {
  mldiag::monitor mon;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n01;
  const double truth[4] = {3.0, -2.0, 0.5, 1.0};
  double w[4] = {0, 0, 0, 0};
  for (int step = 0; step < 300; ++step) {
    std::vector<float> grad(4, 0.0f);
    double loss = 0.0;
    const int batch = static_cast<int>(s.batch);
    for (int k = 0; k < batch; ++k) {
      double x[4], y = 0.5 * n01(rng), pred = 0.0;
      for (int j = 0; j < 4; ++j) {
        x[j] = n01(rng);
        y += truth[j] * x[j];
        pred += w[j] * x[j];
      }
      const double err = pred - y;
      loss += err * err / batch;
      for (int j = 0; j < 4; ++j) grad[static_cast<std::size_t>(j)] += static_cast<float>(2.0 * err * x[j] / batch);
    }
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, s.lr);
    mon.observe(mldiag::role::gradient, "linear.weight", grad);
    (void)mon.end_step();
    for (int j = 0; j < 4; ++j) w[j] -= s.lr * grad[static_cast<std::size_t>(j)];
  }
  return mon;
}

}  // namespace

int main() {
  // [walkthrough]
  namespace p = mldiag::protocol;
  const settings faulty{.lr = 0.9};  // the planted fault: stable up to about 0.5 here
  mldiag::monitor run = train(faulty);
  if (run.open_diagnoses() == 0) {
    std::puts("no finding: nothing to diagnose");
    return 1;
  }
  std::printf("finding: %s (%s)\n", run.opened_by(0).symptom.c_str(), std::string(mldiag::name(run.opened_by(0).question)).c_str());

  // Phase 1: the evidence, with the obvious checks, becomes the baseline.
  auto pattern = run.take_diagnosis(0).with_baseline(run.baseline());
  // Phase 2: where and when, and the likely causes from the pattern tables.
  const auto where = pattern.where();
  std::printf("since step %lld, %s\n", static_cast<long long>(where.since_step), where.consistent ? "consistent" : "intermittent");
  for (const auto* row : pattern.candidates()) std::printf("candidate: %s (changes %s)\n", std::string(row->cause).c_str(), std::string(row->variable).c_str());

  // Phase 3: each hypothesis changes exactly one variable; an experiment runs it.
  const p::experiment experiment = [&](const p::change& c) {
    settings s = faulty;
    if (c.variable == "learning_rate") s.lr = c.to;
    if (c.variable == "batch_size") s.batch = c.to;
    return train(s).baseline();
  };
  auto first = std::move(pattern).propose({"batch too large", "the loss stalls between spikes", {"batch_size", 64, 16}}).test(experiment);
  if (!first.was_rejected()) return 1;  // a bigger batch does not fix a learning rate that is too high
  auto second = std::move(first).rejected()
                    .propose({"learning rate too high", "the loss swings and climbs", {"learning_rate", 0.9, 0.09}})
                    .test(experiment);
  if (second.was_inconclusive()) {  // inside the noise: neither a confirmation nor a strike
    std::puts("inconclusive: run the change with more seeds, pool them (protocol::pool) and conclude again");
    return 1;
  }
  if (!second.was_confirmed()) return 1;

  // Phase 4: the first actions exist only now; verify against the phase-1 baseline.
  auto fix = std::move(second).confirmed();
  for (auto action : fix.fixes()) std::printf("fix: %s\n", std::string(action).c_str());
  auto verified = std::move(fix).verify(train({.lr = 0.09}).baseline());
  // Either way (resolved, or back to phase 2) the log is the same record of the method.
  const auto& log = std::visit([](const auto& phase) -> const std::vector<p::log_entry>& { return phase.log(); }, verified);
  for (const auto& entry : log) std::printf("%s: %s\n", std::string(p::label(entry.phase)).c_str(), entry.text.c_str());
  return verified.was_better() ? 0 : 1;
  // [walkthrough]
}
