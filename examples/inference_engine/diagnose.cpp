// SPDX-License-Identifier: Apache-2.0
// mldiag's inference monitor and `compare` on the example engine (issue 39): every run of a
// split — healthy paths and variants, and planted faults — goes through the engine with the
// monitor on its tap hook, and through the fp32 reference fed the same tokens, both recording
// fingerprints. A fault is found by the monitor (a finding at warning or above, no reference
// needed) and localized by compare (its first divergent layer against the expected one); a
// healthy run must raise neither. The split was written down before anything was tuned:
// `calibration` may set the defaults, `heldout` is reported as measured (docs/accuracy.md).
//   mldiag_inference_diagnose --weights FILE --split calibration|heldout [--verbose]
#include "engine.hpp"
#include "monitor_tap.hpp"

#include "mldiag/inference/fingerprint.hpp"
#include "mldiag/inference/monitor.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace ex = examples::inference;
namespace mi = mldiag::inference;

// ---- The split (committed before the held-out split was run) --------------------------------

// Calibration prompts: the demo's (license texts the model trained on).
const std::vector<std::string> calibration_prompts{"This program is distributed in the hope", "Licensed under the",
                                                   "Permission is hereby granted", "You may "};
// Held-out prompts: license texts the model never saw (CC0, GFDL-1.3, MPL-1.1, BSD).
const std::vector<std::string> heldout_prompts{"CREATIVE COMMONS CORPORATION IS NOT A LAW FIRM",
                                               "Permission is granted to copy, distribute and/or modify this document",
                                               "The contents of this file are subject to the Mozilla Public License",
                                               "THIS SOFTWARE IS PROVIDED BY THE REGENTS AND CONTRIBUTORS"};
// The int8 path's calibration batch and fault (e)'s warm-up token (main.cpp's).
const std::vector<std::string> int8_calibration{"You should have received a copy of the GNU General Public",
                                                "Unless required by applicable law or agreed to in writing",
                                                "THE COPYRIGHT HOLDERS AND CONTRIBUTORS PROVIDE THE PROGRAM",
                                                "Redistribution and use in source and binary forms, with or"};

struct run_spec {
  std::string fault;  // "" = healthy
  int layer = -1;
  ex::precision path = ex::precision::fp32;
  ex::sampling sampling{};
  std::size_t batch = 4;  // the first `batch` prompts
  std::string expect_layer;  // compare's expected first divergent layer ("" for a healthy run)
};

std::vector<run_spec> split(const std::string& which) {
  using P = ex::precision;
  if (which == "calibration") {
    return {
        {"", -1, P::bf16}, {"", -1, P::fp16}, {"", -1, P::int8}, {"", -1, P::fp32, {.temperature = 0.8f, .top_k = 10, .seed = 3}},
        {"fp16_overflow", 2, P::fp16, {}, 4, "blocks.2.mlp.fc1"},
        {"attention_scale", 1, P::fp32, {}, 4, "blocks.1.attn.probs"},
        {"kv_padding", 2, P::fp32, {}, 4, "blocks.2.attn.k"},
        {"int8_calibration", 0, P::int8, {}, 4, "blocks.0.ln1"},
        {"transposed_weights", 3, P::fp32, {}, 4, "blocks.3.attn.out"},
        {"position_offset", -1, P::fp32, {}, 4, "embed"},
    };
  }
  if (which == "heldout") {
    return {
        {"", -1, P::bf16}, {"", -1, P::fp16}, {"", -1, P::int8}, {"", -1, P::bf16, {}, 1}, {"", -1, P::fp16, {}, 3},
        {"", -1, P::fp32, {.temperature = 0.8f, .top_k = 10, .seed = 1}}, {"", -1, P::bf16, {.temperature = 1.0f, .seed = 2}},
        {"fp16_overflow", 0, P::fp16, {}, 4, "blocks.0.mlp.fc1"},
        {"fp16_overflow", 3, P::fp16, {}, 4, "blocks.3.mlp.fc1"},
        {"attention_scale", 3, P::bf16, {}, 4, "blocks.3.attn.probs"},
        {"kv_padding", 0, P::fp32, {}, 4, "blocks.0.attn.k"},
        {"int8_calibration", 2, P::int8, {}, 4, "blocks.2.ln1"},
        {"transposed_weights", 1, P::bf16, {}, 4, "blocks.1.attn.out"},
        {"position_restart", -1, P::fp32, {}, 4, "embed"},
    };
  }
  throw std::runtime_error("mldiag: --split takes calibration or heldout, not '" + which + "'");
}

// ---- Running one --------------------------------------------------------------------------------

struct observed {
  std::vector<mldiag::finding> findings;  // warning or above
  std::vector<mi::fingerprint> rows;
  std::vector<std::vector<int>> tokens;
};

// One engine run with the monitor and a fingerprint recorder on its hook; `forced` feeds the
// reference the test's tokens so that both read the same inputs at every position. The hook is
// the README's inference snippet (a test checks that it is this code).
observed run_engine(const ex::model_weights& m, const ex::engine_options& opt, const std::vector<std::vector<int>>& prompts,
                    const ex::sampling& s, const std::vector<std::vector<int>>* forced) {
  mi::monitor mon({.sample_every = 1});  // hunting a fault: every step, every tap
  mi::fingerprint_recorder rec;
  std::int64_t step = -1;
  std::vector<bool> unusable(prompts.size(), false);
  ex::engine e(m, opt);
  // [readme_inference]
  e.set_hook([&](const ex::tap& t) {  // at each tap point: layer name, phase, token position, request, values, format
    if (t.step != step) mon.begin_step(step = t.step), rec.begin_step();
    const mi::tap c = convert(t);
    mon.observe(c);  // the first NaN/Inf with its layer and token; range against the format; KV padding; outliers
    rec.observe(c);  // fingerprints, for `mldiag compare` against a reference run
    if (t.kind == ex::tap_kind::logits)  // false for a row holding NaN or Inf: abort the request, do not sample it
      unusable[static_cast<std::size_t>(t.request)] =
          !mon.observe_logits(t.request, t.values.subspan((t.rows - 1) * t.cols, t.cols), c.phase);
  });
  // [readme_inference]
  const auto out = e.generate(prompts, 24, s, forced);
  observed o;
  for (auto& f : mon.take_findings())
    if (f.severity != mldiag::severity::info) o.findings.push_back(std::move(f));
  o.rows = rec.rows();
  for (const auto& r : out) o.tokens.push_back(r.tokens);
  return o;
}

std::vector<std::vector<int>> encode_all(const ex::model_weights& m, const std::vector<std::string>& texts) {
  std::vector<std::vector<int>> out;
  for (const auto& t : texts) out.push_back(m.encode(t));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string weights, which = "calibration";
    bool verbose = false;
    double tolerance_factor = mi::compare_options{}.tolerance_factor;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto value = [&] {
        if (i + 1 >= argc) throw std::runtime_error("mldiag: " + a + " needs a value");
        return std::string(argv[++i]);
      };
      if (a == "--weights") weights = value();
      else if (a == "--split") which = value();
      else if (a == "--tolerance-factor") tolerance_factor = std::stod(value());
      else if (a == "--verbose") verbose = true;
      else throw std::runtime_error("mldiag: unknown option " + a + " (--weights FILE --split calibration|heldout [--verbose])");
    }
    if (weights.empty()) throw std::runtime_error("mldiag: --weights FILE is required (mldiag_inference_train --out FILE makes one)");
    const auto m = ex::model_weights::load(weights);
    // The held-out prompts as first written ran past the model's context of 64 (69 bytes + 24
    // new tokens); each is cut to its first 36 bytes (found before any held-out run produced a
    // result: the first attempt stopped at the engine's check).
    std::vector<std::string> texts = which == "heldout" ? heldout_prompts : calibration_prompts;
    for (auto& t : texts) t = t.substr(0, 36);
    const auto prompts_all = encode_all(m, texts);
    const auto specs = split(which);
    int healthy = 0, healthy_alarmed = 0, faults = 0, found = 0, localized = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("split %s: %zu runs\n", which.c_str(), specs.size());
    std::printf("%-20s %5s %-5s %-26s %-8s %-46s %s\n", "run", "layer", "path", "monitor (warning+)", "found", "compare: first divergent",
                "cause");
    for (const auto& s : specs) {
      const std::vector<std::vector<int>> prompts(prompts_all.begin(), prompts_all.begin() + static_cast<std::ptrdiff_t>(s.batch));
      ex::engine_options opt{.path = s.path, .calibration = encode_all(m, int8_calibration),
                             .unrepresentative = {m.encode("\t")}};
      ex::plant(opt.faults, s.fault, s.layer);
      const auto test = run_engine(m, opt, prompts, s.sampling, nullptr);
      const auto ref = run_engine(m, {}, prompts, s.sampling, &test.tokens);  // its findings are not used
      // The formats the path computes with: int8's weights and inputs feed taps stored in fp32.
      const double compute = s.path == ex::precision::int8   ? mi::storage_format{mi::number_format::int8}.unit_roundoff()
                             : s.path == ex::precision::bf16 ? mi::storage_format{mi::number_format::bf16}.unit_roundoff()
                             : s.path == ex::precision::fp16 ? mi::storage_format{mi::number_format::fp16}.unit_roundoff()
                                                             : 0.0;
      const auto d = mi::compare(ref.rows, test.rows, {.tolerance_factor = tolerance_factor, .compute_roundoff = compute});
      const bool is_healthy = s.fault.empty();
      const bool monitor_found = !test.findings.empty();
      const bool diverged = d.first.has_value();
      const std::string first = diverged ? d.first->test.name + " @" + std::to_string(d.first->test.position) + " " +
                                               std::string(mi::name(d.first->test.phase))
                                         : "-";
      std::string monitor_text = monitor_found ? test.findings.front().symptom.substr(0, 26) : "-";
      if (is_healthy) {
        ++healthy;
        healthy_alarmed += (monitor_found || diverged) ? 1 : 0;
      } else {
        ++faults;
        found += (monitor_found || diverged) ? 1 : 0;
        localized += diverged && d.first->test.name == s.expect_layer ? 1 : 0;
      }
      std::printf("%-20s %5d %-5s %-26s %-8s %-46s %s\n", is_healthy ? "healthy" : s.fault.c_str(), s.layer,
                  std::string(ex::name(s.path)).c_str(), monitor_text.c_str(),
                  is_healthy ? ((monitor_found || diverged) ? "ALARM" : "quiet") : ((monitor_found || diverged) ? "yes" : "MISSED"),
                  (first + (is_healthy || !diverged ? "" : (d.first->test.name == s.expect_layer ? " (top-1)" : " (expected " + s.expect_layer + ")")))
                      .c_str(),
                  diverged ? std::string(mi::name(d.cause)).c_str() : "-");
      if (verbose) {
        for (const auto& f : test.findings)
        {
          std::printf("    %s %s at %s: %s", std::string(mldiag::name(f.severity)).c_str(), f.symptom.c_str(),
                      f.where.empty() ? "?" : f.where.front().first.c_str(), f.why.c_str());
          for (const auto& [k, v] : f.evidence) std::printf(" %s=%.4g", k.c_str(), v);
          std::printf("\n");
        }
        for (const auto& l : d.per_layer)
          std::printf("    %-22s worst rel.err %.4g (tolerance %.3g) at position %lld\n", l.test.name.c_str(), l.relative_error,
                      l.tolerance, static_cast<long long>(l.test.position));
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("healthy runs alarmed: %d / %d; faults found: %d / %d; first divergent layer top-1: %d / %d (%.1f s)\n",
                healthy_alarmed, healthy, found, faults, localized, faults, seconds);
    std::printf("{\"bench\":\"inference_faults\",\"split\":\"%s\",\"tolerance_factor\":%g,\"healthy_runs\":%d,\"healthy_alarmed\":%d,"
                "\"faulted_runs\":%d,\"found\":%d,\"localized_top1\":%d}\n",
                which.c_str(), tolerance_factor, healthy, healthy_alarmed, faults, found, localized);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
