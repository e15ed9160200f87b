// SPDX-License-Identifier: Apache-2.0
// A real monitor's output, for check_html.py: a small training loop (600 steps, six tensors
// named as a user names them, two activations) with two planted faults, run through
// mldiag::monitor with the default detectors, a console sink and a JSON Lines sink; the JSON
// Lines are read back, the monitor's open diagnoses are added, and the HTML report is written.
//
//   mldiag_html_monitor_report OUT_DIR
//
// Faults: fc1.weight's gradients x100 at steps 300-319 and 325-339 (x1000 from 330: critical),
// a flicker the detector reports at many steps (one episode by the rule); conv2.relu all zeros
// from step 450 (dead activations at `act/conv2.relu`, which names conv2's rows). Writes
// OUT_DIR/run.jsonl and OUT_DIR/report.html; the console lines go to stderr.
#include "mldiag/monitor.hpp"
#include "mldiag/report/console.hpp"
#include "mldiag/report/html.hpp"
#include "mldiag/report/jsonl.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: mldiag_html_monitor_report OUT_DIR\n", stderr);
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    const auto jsonl_path = dir / "run.jsonl";
    mldiag::monitor mon;
    mon.attach(mldiag::report::console_sink());  // the one line a user writes
    mldiag::report::jsonl_sink jsonl(jsonl_path,
                                     "a real monitor: exploding fc1 gradients, dead conv2");
    std::int64_t step = 0;
    mon.attach([&](const mldiag::finding& f) { jsonl.finding(step, f); });

    const std::vector<std::string> grads{"conv2.weight", "conv2.bias", "fc1.weight",
                                         "fc1.bias",     "fc2.weight", "head.weight"};
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::normal_distribution<double> noise(0.0, 0.02);
    std::vector<float> x(256);
    for (step = 0; step < 600; ++step) {
      mon.begin_step(step);
      const double loss = 2.5 * std::exp(-static_cast<double>(step) / 200.0) + 0.3 + noise(rng);
      mon.observe(mldiag::scalar::loss, loss);
      if (step % 25 == 0) mon.observe(mldiag::scalar::val_loss, loss + 0.05);
      mon.observe(mldiag::scalar::learning_rate, 1e-3);
      for (std::size_t t = 0; t < grads.size(); ++t) {
        float scale = 0.01f * static_cast<float>(t + 1);
        const bool hot = (step >= 300 && step < 320) || (step >= 325 && step < 340);
        if (grads[t] == "fc1.weight" && hot) scale *= step >= 330 ? 1000.0f : 100.0f;
        for (auto& v : x)
          v = scale * normal(rng);
        mon.observe(mldiag::role::gradient, grads[t], std::span<const float>(x));
      }
      for (const char* act : {"conv2.relu", "fc1.relu"}) {
        const bool dead = std::string(act) == "conv2.relu" && step >= 450;
        for (auto& v : x)
          v = dead ? 0.0f : std::max(0.0f, normal(rng)) + 0.01f;
        mon.observe(mldiag::role::activation, act, std::span<const float>(x));
      }
      (void)mon.end_step();
      jsonl.step(mon.evidence());
    }

    // What the monitor side would add to the run: the diagnoses still open, with their logs.
    auto run = mldiag::report::read_jsonl(jsonl_path);
    while (mon.open_diagnoses() > 0) {
      const mldiag::finding opened = mon.opened_by(0);
      const auto dx = mon.take_diagnosis(0);
      run.open_diagnoses.push_back({opened.question, opened.symptom, opened.last_step,
                                    mldiag::protocol::phase_id::evidence, dx.log()});
    }
    mldiag::report::write_html(run, dir / "report.html");
    std::printf("wrote %s (%zu steps, %zu deliveries, %zu open diagnoses)\n",
                (dir / "report.html").string().c_str(), run.steps.size(), run.findings.size(),
                run.open_diagnoses.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
