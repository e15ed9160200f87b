// SPDX-License-Identifier: Apache-2.0
// What the inference monitor costs per decode step of the example engine
// (examples/inference_engine), issue 39's targets: the default monitor at most 1% of a decode
// step on the CPU, the first-non-finite sentinel alone at most 0.5%. In one process, each row
// the median over repetitions of a greedy generation (a prompt, then `tokens` decode steps;
// prefill subtracted by a run of one token):
//   no hook        the engine without taps (the baseline);
//   hook           the engine calling an empty hook at its 46 tap points (the engine's own cost
//                  of exposing them; another engine's differs);
//   ceiling        the hook reading every tapped value once (a sum): the least any check of
//                  every value costs;
//   peer           LibTorch per tap: torch::isfinite(t).all() and t.abs().max() on the tap's
//                  values (from_blob, no copy), what an engine writer would reach for;
//   sentinel       mldiag's monitor with full statistics never sampled: the NaN/Inf pass only;
//   monitor /8     the monitor sampling its full statistics every 8th step;
//   monitor        every step.
// mldiag's share is the row's time over `hook` (what the monitor adds to an engine that has taps).
// Prints a table and one JSON line.
#include "engine.hpp"

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

mi::tap convert(const ex::tap& t) {
  mi::tap o;
  o.name = t.name;
  o.phase = t.phase == ex::phase::prefill ? mi::phase::prefill : mi::phase::decode;
  o.kind = t.kind == ex::tap_kind::residual ? mi::tap_kind::residual
           : t.kind == ex::tap_kind::kv_cache ? mi::tap_kind::kv_cache
           : t.kind == ex::tap_kind::logits   ? mi::tap_kind::logits
                                              : mi::tap_kind::activation;
  o.position = t.position;
  o.rows = t.rows;
  o.cols = t.cols;
  o.values = t.values;
  o.request = t.request;
  o.valid_rows = t.valid_rows;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::string weights;
  int reps = 15, tokens = 40;
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

  struct row {
    std::string name;
    std::function<ex::tap_hook()> make;  // a fresh hook per generation (fresh monitor state)
    double decode_us = 0.0;
  };
  volatile double sink = 0.0;
  std::vector<row> rows{
      {"no hook", [] { return ex::tap_hook{}; }},
      {"hook", [] { return ex::tap_hook([](const ex::tap&) {}); }},
      {"ceiling (read every value)", [&] {
         return ex::tap_hook([&](const ex::tap& t) {
           float s = 0.0f;
           for (const float v : t.values) s += v;
           sink = sink + s;
         });
       }},
      {"peer (LibTorch isfinite+amax)", [&] {
         return ex::tap_hook([&](const ex::tap& t) {
           const auto x = torch::from_blob(const_cast<float*>(t.values.data()), {static_cast<std::int64_t>(t.values.size())});
           sink = sink + static_cast<double>(torch::isfinite(x).all().item<bool>()) + x.abs().max().item<float>();
         });
       }},
      {"sentinel only", [&] {
         auto mon = std::make_shared<mi::monitor>(mi::monitor_config{.sample_every = 1u << 30});
         auto step = std::make_shared<std::int64_t>(-1);
         return ex::tap_hook([mon, step](const ex::tap& t) {
           if (t.step != *step) mon->begin_step(*step = t.step + 1);  // step 0 would be sampled
           mon->observe(convert(t));
         });
       }},
      {"monitor, full stats every 8th step", [&] {
         auto mon = std::make_shared<mi::monitor>(mi::monitor_config{.sample_every = 8});
         auto step = std::make_shared<std::int64_t>(-1);
         return ex::tap_hook([mon, step](const ex::tap& t) {
           if (t.step != *step) mon->begin_step(*step = t.step);
           const auto c = convert(t);
           mon->observe(c);
           if (t.kind == ex::tap_kind::logits) (void)mon->observe_logits(t.request, t.values.subspan((t.rows - 1) * t.cols, t.cols), c.phase);
         });
       }},
      {"monitor, every step", [&] {
         auto mon = std::make_shared<mi::monitor>();
         auto step = std::make_shared<std::int64_t>(-1);
         return ex::tap_hook([mon, step](const ex::tap& t) {
           if (t.step != *step) mon->begin_step(*step = t.step);
           const auto c = convert(t);
           mon->observe(c);
           if (t.kind == ex::tap_kind::logits) (void)mon->observe_logits(t.request, t.values.subspan((t.rows - 1) * t.cols, t.cols), c.phase);
         });
       }},
  };
  ex::engine e(m, {});
  const auto time_generate = [&](const ex::tap_hook& hook, int n) {
    e.set_hook(hook);
    const auto t0 = std::chrono::steady_clock::now();
    (void)e.generate(prompt, n);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  // Interleaved repetitions (each row once per round), so drift on a shared machine hits all rows alike.
  std::vector<std::vector<double>> full(rows.size()), one(rows.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < rows.size(); ++i) {
      full[i].push_back(time_generate(rows[i].make(), tokens + 1));
      one[i].push_back(time_generate(rows[i].make(), 1));
    }
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].decode_us = (median(full[i]) - median(one[i])) / tokens;
  const double base = rows[0].decode_us, hook = rows[1].decode_us;
  std::printf("decode step of the example engine (fp32, 1 request, %d tokens, %d repetitions, median)\n", tokens, reps);
  std::printf("%-36s %12s %14s %16s\n", "configuration", "us / step", "vs no hook", "added to hook");
  for (const auto& r : rows)
    std::printf("%-36s %12.2f %13.2f%% %15.2f%%\n", r.name.c_str(), r.decode_us, 100.0 * (r.decode_us - base) / base,
                100.0 * (r.decode_us - hook) / base);
  std::printf("{\"bench\":\"inference_cost\",\"quick\":%s,\"tokens\":%d,\"reps\":%d,\"decode_us_no_hook\":%.3f,\"decode_us_hook\":%.3f,"
              "\"decode_us_ceiling\":%.3f,\"decode_us_peer_libtorch\":%.3f,\"decode_us_sentinel\":%.3f,\"decode_us_monitor_every8\":%.3f,"
              "\"decode_us_monitor\":%.3f,\"sentinel_added_pct\":%.3f,\"monitor_every8_added_pct\":%.3f,\"monitor_added_pct\":%.3f}\n",
              quick ? "true" : "false", tokens, reps, rows[0].decode_us, rows[1].decode_us, rows[2].decode_us, rows[3].decode_us,
              rows[4].decode_us, rows[5].decode_us, rows[6].decode_us, 100.0 * (rows[4].decode_us - hook) / base,
              100.0 * (rows[5].decode_us - hook) / base, 100.0 * (rows[6].decode_us - hook) / base);
  return 0;
}
