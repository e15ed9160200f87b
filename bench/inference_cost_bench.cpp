// SPDX-License-Identifier: Apache-2.0
// What the inference monitor costs per decode step of the example engine
// (examples/inference_engine), issue 39's targets: the default monitor at most 1% of a decode
// step on the CPU, the first-non-finite sentinel alone at most 0.5%. In one process:
//   the decode step: the engine without a hook, greedy, 32 steps after a 27-byte prompt
//     (prefill subtracted by a run of one token), the median of interleaved runs;
//   then one generation's decode taps, recorded (46 a step), replayed through each row many
//     times, so that what a row adds is measured apart from the step's own noise (about 1%);
//   ceiling: a sum over every tapped value, the least any check of every value costs;
//   peer: LibTorch per tap, torch::isfinite(t).all() and t.abs().max() (from_blob, no copy);
//   mldiag: the sentinel alone (full statistics never sampled), the monitor sampling its
//     full statistics every 8th step, and every step; each on every tap, or on the residual
//     stream after each block and the logits (5 taps: a first NaN is then localized to a block,
//     not to a tensor inside it).
// Prints a table and one JSON line.
#include "engine.hpp"
#include "monitor_tap.hpp"

#include "mldiag/inference/monitor.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {
namespace ex = examples::inference;
namespace mi = mldiag::inference;

using ex::convert;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) try {
  std::string weights;
  int reps = 31, tokens = 32;  // the prompt's 27 bytes + 32 new tokens fit the model's 64 slots
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--weights" && i + 1 < argc) weights = argv[++i];
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "mldiag: unknown flag %s\nusage: mldiag_bench_inference_cost --weights FILE [--quick]\n", a.c_str());
      return 2;
    }
  }
  if (weights.empty()) {
    std::fprintf(stderr, "mldiag: --weights FILE is required (mldiag_inference_train --out FILE makes one)\n");
    return 2;
  }
  if (quick) reps = 3, tokens = 8;
  torch::set_num_threads(1);
  const auto m = ex::model_weights::load(weights);
  const std::vector<std::vector<int>> prompt{m.encode("This program is distributed")};

  // 1. The decode step itself: the engine without a hook, greedy, `tokens` steps after the
  // prompt, prefill subtracted by a run of one token; the median over `reps` interleaved runs.
  ex::engine e(m, {});
  const auto time_generate = [&](int n) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)e.generate(prompt, n);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> full, one;
  for (int r = 0; r < reps; ++r) full.push_back(time_generate(tokens + 1)), one.push_back(time_generate(1));
  const double step_us = (median(full) - median(one)) / tokens;

  // 2. The decode steps' taps, recorded once (values copied), then replayed through each
  // configuration many times: what each adds per decode step, measured apart from the step's
  // own noise (which on a 70 us step is about 1%, the size of the targets).
  struct recorded {
    ex::tap t;
    std::string name;
    std::vector<float> values;
  };
  std::vector<recorded> taps;
  e.set_hook([&](const ex::tap& t) {
    if (t.phase != ex::phase::decode) return;
    taps.push_back({t, std::string(t.name), std::vector<float>(t.values.begin(), t.values.end())});
  });
  (void)e.generate(prompt, tokens + 1);
  e.set_hook({});
  for (auto& r : taps) r.t.name = r.name, r.t.values = r.values;
  const auto decode_steps = static_cast<double>(tokens);

  volatile double sink = 0.0;
  struct row {
    std::string name;
    std::function<void(const std::vector<recorded>&)> replay;  // one generation's decode taps
    double added_us = 0.0;
  };
  const auto residual_or_logits = [](const ex::tap& t) { return t.kind == ex::tap_kind::residual || t.kind == ex::tap_kind::logits; };
  const auto monitor_replay = [&](mi::monitor_config c, bool only_residual) {
    return [&, c, only_residual](const std::vector<recorded>& all) {
      mi::monitor mon(c);
      std::int64_t step = -1;
      for (const auto& r : all) {
        if (only_residual && !residual_or_logits(r.t)) continue;
        if (r.t.step != step) mon.begin_step(step = r.t.step);
        const auto x = convert(r.t);
        mon.observe(x);
        if (r.t.kind == ex::tap_kind::logits)
          (void)mon.observe_logits(r.t.request, r.t.values.subspan((r.t.rows - 1) * r.t.cols, r.t.cols), x.phase);
      }
      sink = sink + static_cast<double>(mon.sampled_taps());
    };
  };
  constexpr std::uint32_t never = 1u << 30;
  std::vector<row> rows{
      {"ceiling (read every value)", [&](const std::vector<recorded>& all) {
         float s = 0.0f;
         for (const auto& r : all)
           for (const float v : r.t.values) s += v;
         sink = sink + s;
       }},
      {"peer (LibTorch isfinite+amax)", [&](const std::vector<recorded>& all) {
         for (const auto& r : all) {
           const auto x = torch::from_blob(const_cast<float*>(r.t.values.data()), {static_cast<std::int64_t>(r.t.values.size())});
           sink = sink + static_cast<double>(torch::isfinite(x).all().item<bool>()) + x.abs().max().item<float>();
         }
       }},
      {"sentinel, every tap", monitor_replay({.sample_every = never}, false)},
      {"sentinel, residual stream + logits", monitor_replay({.sample_every = never}, true)},
      {"default monitor (/8), residual + logits", monitor_replay({}, true)},
      {"monitor /8, every tap", monitor_replay({.sample_every = 8}, false)},
      {"monitor, every tap, every step", monitor_replay({.sample_every = 1}, false)},
  };
  const int replays = quick ? 20 : 2000;
  for (auto& r : rows) {
    std::vector<double> t;
    for (int k = 0; k < 5; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < replays / 5; ++i) r.replay(taps);
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / (replays / 5));
    }
    r.added_us = median(t) / decode_steps;
  }
  std::printf("decode step of the example engine: %.2f us (fp32, 1 request, %d tokens, median of %d); %zu taps a step\n", step_us,
              tokens, reps, taps.size() / static_cast<std::size_t>(tokens));
  std::printf("%-38s %14s %14s\n", "what runs on each decode step's taps", "us / step", "% of a step");
  for (const auto& r : rows) std::printf("%-38s %14.3f %13.2f%%\n", r.name.c_str(), r.added_us, 100.0 * r.added_us / step_us);
  std::printf("{\"bench\":\"inference_cost\",\"quick\":%s,\"tokens\":%d,\"reps\":%d,\"replays\":%d,\"decode_step_us\":%.3f,"
              "\"taps_per_step\":%zu,\"ceiling_us\":%.4f,\"peer_libtorch_us\":%.4f,\"sentinel_us\":%.4f,\"sentinel_residual_us\":%.4f,"
              "\"monitor_every8_residual_us\":%.4f,\"monitor_every8_us\":%.4f,\"monitor_us\":%.4f,\"ceiling_pct\":%.3f,"
              "\"peer_libtorch_pct\":%.3f,\"sentinel_pct\":%.3f,\"sentinel_residual_pct\":%.3f,\"monitor_every8_residual_pct\":%.3f,"
              "\"monitor_every8_pct\":%.3f,\"monitor_pct\":%.3f}\n",
              quick ? "true" : "false", tokens, reps, replays, step_us, taps.size() / static_cast<std::size_t>(tokens), rows[0].added_us,
              rows[1].added_us, rows[2].added_us, rows[3].added_us, rows[4].added_us, rows[5].added_us, rows[6].added_us,
              100.0 * rows[0].added_us / step_us, 100.0 * rows[1].added_us / step_us, 100.0 * rows[2].added_us / step_us,
              100.0 * rows[3].added_us / step_us, 100.0 * rows[4].added_us / step_us, 100.0 * rows[5].added_us / step_us,
              100.0 * rows[6].added_us / step_us);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
