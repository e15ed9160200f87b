// SPDX-License-Identifier: Apache-2.0
// Writes an HTML report of a generated run with a planted fault, for check_html.py to open in
// headless Chromium: exploding gradients in block2.attn.* from step 120 (finding located at
// `block2.attn`), a NaN loss at step 200, val_loss every 25 steps.
//
//   mldiag_html_report_sample OUT.html [STEPS [TENSORS]]
//
// With STEPS/TENSORS (e.g. 100000 500) it writes the scale page instead; the fault stays at
// step 120 (and the NaN at 200) as long as STEPS > 200.
#include "mldiag/report/html.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fputs("usage: mldiag_html_report_sample OUT.html [STEPS [TENSORS]]\n", stderr);
    return 2;
  }
  const std::size_t steps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 300;
  const std::size_t tensors = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 14;
  if (steps <= 200 || tensors < 4) {
    std::fputs("mldiag_html_report_sample: need STEPS > 200 and TENSORS >= 4\n", stderr);
    return 2;
  }
  try {
    mldiag::report::run_log run;
    run.title = "planted fault: exploding gradients in block2.attn";
    for (std::size_t s = 0; s < steps; ++s)
      run.steps.push_back(static_cast<std::int64_t>(s));
    std::mt19937 rng(42);
    std::lognormal_distribution<double> noise(0.0, 0.15);
    std::vector<double> loss(steps), val(steps, mldiag::report::run_log::absent());
    for (std::size_t i = 0; i < steps; ++i) {
      loss[i] =
          2.3 * std::exp(-static_cast<double>(i) / static_cast<double>(steps / 3)) * noise(rng) +
          0.1;
      if (i >= 120 && i < 130) loss[i] *= 4;
      if (i % 25 == 0) val[i] = loss[i] * 1.05;
    }
    loss[200] = std::numeric_limits<double>::quiet_NaN();
    run.metric_values[run.column("loss")] = loss;
    run.metric_values[run.column("val_loss")] = val;
    // Tensors: embed, block<k>.{attn.qkv,attn.out,mlp.fc1,mlp.fc2}.weight, head.
    std::vector<std::string> names{"embed.weight"};
    for (std::size_t k = 0; names.size() + 1 < tensors; ++k)
      for (const char* leaf :
           {"attn.qkv.weight", "attn.out.weight", "mlp.fc1.weight", "mlp.fc2.weight"})
        if (names.size() + 1 < tensors) names.push_back("block" + std::to_string(k) + "." + leaf);
    names.push_back("head.weight");
    std::vector<double> g(steps);
    for (std::size_t t = 0; t < names.size(); ++t) {
      const double scale =
          std::pow(10.0, -2.0 + 2.0 * static_cast<double>(t) / static_cast<double>(names.size()));
      for (std::size_t i = 0; i < steps; ++i) {
        g[i] = scale * noise(rng);
        if (names[t].starts_with("block2.attn.") && i >= 120) g[i] *= 1e3;
      }
      run.metric_values[run.column("grad/" + names[t] + "/norm")] = g;
    }
    mldiag::finding f;
    f.question = mldiag::question::early_anomaly;
    f.symptom = "exploding gradients";
    f.severity = mldiag::severity::critical;
    f.first_step = 120;
    f.last_step = 140;
    f.where = {{"block2.attn", 812.0}};
    f.evidence = {{"ratio_to_median", 1000.0}};
    f.detector = "grad_explosion";
    run.findings.push_back({121, f});
    mldiag::finding nan;
    nan.question = mldiag::question::early_anomaly;
    nan.symptom = "non-finite loss";
    nan.severity = mldiag::severity::critical;
    nan.first_step = nan.last_step = 200;
    nan.detector = "nonfinite";
    run.findings.push_back({200, nan});
    run.diagnosis = {{mldiag::protocol::phase_id{1}, "baseline recorded: loss 2.3 at step 0"},
                     {mldiag::protocol::phase_id{2}, "pattern: gradient norm x1000 in block2.attn from step 120"},
                     {mldiag::protocol::phase_id{3}, "hypothesis: attention logits overflow"},
                     {mldiag::protocol::phase_id{4}, "fix: qk-norm; verify: gradient norm back within 10x of median"}};
    const auto t0 = std::chrono::steady_clock::now();
    mldiag::report::write_html(run, argv[1]);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s (%zu steps x %zu tensors) in %.3f s\n", argv[1], steps, names.size(),
                seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
