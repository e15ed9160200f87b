// SPDX-License-Identifier: Apache-2.0
// The inference engine demo: generates text from a batch of prompts with the fp32 reference and
// the bf16, fp16 and int8 paths, and says how far each path is from the reference. With
// --fault NAME it plants one of the faults engine writers hit and shows where it starts.
// The weights come from mldiag_inference_train (run here when the build folder has none).
#include "engine.hpp"

#include <algorithm>
#include <bit>  // std::bit_cast: the fingerprints hash the values' bits
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace inf = examples::inference;

// Prompts of different lengths, so the batch has padding slots: (39, 18, 28, 8) bytes.
const std::vector<std::string> demo_prompts{"This program is distributed in the hope",
                                            "Licensed under the", "Permission is hereby granted",
                                            "You may "};
// Other text of the same kind sets the int8 scales. Fault (e) calibrates on a warm-up batch
// instead: one dummy token of id 0 (a tab here), the input engines warm up with.
const std::vector<std::string> calibration_prompts{
    "You should have received a copy of the GNU General Public",
    "Unless required by applicable law or agreed to in writing",
    "THE COPYRIGHT HOLDERS AND CONTRIBUTORS PROVIDE THE PROGRAM",
    "Redistribution and use in source and binary forms, with or"};
const std::vector<std::string> unrepresentative_prompts{"\t"};
constexpr int new_tokens = 24;

// Each fault: its switch, the layer it lives in by default, and the path it shows on.
struct fault_entry {
  const char* name;
  int layer;  // -1: not in a block
  inf::precision path;
  const char* what;
};
constexpr fault_entry faults[] = {
    {"fp16_overflow", 2, inf::precision::fp16, "fc1 output past 65504 in fp16 (blocks.L.mlp.fc1)"},
    {"position_offset", -1, inf::precision::fp32,
     "first decode position n-1 instead of n (embed, decode)"},
    {"position_restart", -1, inf::precision::fp32,
     "decode positions restart at 0 after prefill (embed, decode)"},
    {"attention_scale", 1, inf::precision::fp32,
     "scores x 1/d_head instead of 1/sqrt(d_head) (blocks.L.attn)"},
    {"kv_padding", 2, inf::precision::fp32,
     "padding slots uncleared (NaN) and read through a multiplied mask (blocks.L.attn)"},
    {"int8_calibration", 0, inf::precision::int8,
     "static int8 scales calibrated on a warm-up token (blocks.L)"},
    {"transposed_weights", 3, inf::precision::fp32,
     "attention output projection loaded transposed (blocks.L.attn.proj)"},
};

// What the demo's hook keeps: a count, the first non-finite value's tap, and optionally a
// fingerprint (a hash of the bits) of every tap, to find where two runs first part. The mldiag
// inference monitor takes this hook's place.
struct tap_log {
  struct where {
    std::string name;
    inf::phase phase;
    std::int64_t step, position;
    int request;
    std::int64_t slot = -1;  // a KV-cache row: its slot
    bool padding = false;    // ... and it is a padding slot
  };
  bool fingerprints = false;
  std::uint64_t taps = 0, values = 0, non_finite = 0;
  std::optional<where> first_non_finite;
  std::vector<std::uint64_t> hashes;
  std::vector<where> places;

  void operator()(const inf::tap& t) {
    ++taps;
    values += t.values.size();
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      if (std::isfinite(t.values[i])) continue;
      ++non_finite;
      if (first_non_finite) continue;
      const std::size_t row = i / t.cols;
      first_non_finite = where{std::string(t.name), t.phase, t.step,
                               t.position + static_cast<std::int64_t>(row), t.request};
      if (t.kind == inf::tap_kind::kv_cache) {
        first_non_finite->slot = t.slot + static_cast<std::int64_t>(row);
        first_non_finite->padding = row >= t.valid_rows;
      }
    }
    if (!fingerprints) return;
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the values' bits
    for (float v : t.values)
      h = (h ^ std::bit_cast<std::uint32_t>(v)) * 1099511628211ull;
    hashes.push_back(h);
    places.push_back(where{std::string(t.name), t.phase, t.step, t.position, t.request});
  }
};

std::string describe(const tap_log::where& w) {
  std::string s = w.name + " (" + std::string(inf::name(w.phase));
  if (w.phase == inf::phase::decode) s += " step " + std::to_string(w.step);
  s += ", request " + std::to_string(w.request);
  if (w.padding)
    s += ", padding slot " + std::to_string(w.slot);
  else
    s += ", position " + std::to_string(w.position);
  return s + ")";
}

// A path's logits against the reference's along the same tokens.
struct agreement {
  double top1 = 0.0;  // decode rows whose largest logit is the reference's
  double max_diff =
      0.0;  // largest |logit difference| over prompt and decode rows (NaN if any row is NaN)
  bool finite = true;
};

int argmax(const float* row, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return static_cast<int>(best);
}

agreement compare(const std::vector<inf::request_result>& ref,
                  const std::vector<inf::request_result>& test, std::size_t V) {
  agreement a;
  std::size_t same = 0, rows = 0;
  const auto diff = [&](const std::vector<float>& r, const std::vector<float>& t) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (!std::isfinite(t[i])) a.finite = false;
      a.max_diff = std::max(a.max_diff, static_cast<double>(std::fabs(r[i] - t[i])));
    }
  };
  for (std::size_t b = 0; b < ref.size(); ++b) {
    diff(ref[b].prompt_logits, test[b].prompt_logits);
    diff(ref[b].step_logits, test[b].step_logits);
    for (std::size_t s = 0; s < ref[b].tokens.size(); ++s, ++rows)
      same += argmax(&ref[b].step_logits[s * V], V) == argmax(&test[b].step_logits[s * V], V);
  }
  a.top1 = rows ? static_cast<double>(same) / static_cast<double>(rows) : 1.0;
  if (!a.finite) a.max_diff = std::nan("");
  return a;
}

std::vector<std::vector<int>> tokens_of(const std::vector<inf::request_result>& r) {
  std::vector<std::vector<int>> out;
  for (const auto& x : r)
    out.push_back(x.tokens);
  return out;
}

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return out;
}

struct options {
  std::string weights = MLDIAG_INFERENCE_WEIGHTS;
  bool default_weights = true;
  std::string fault;
  std::optional<int> layer;
  std::optional<inf::precision> path;
};

inf::precision parse_path(const std::string& s) {
  if (s == "fp32") return inf::precision::fp32;
  if (s == "bf16") return inf::precision::bf16;
  if (s == "fp16") return inf::precision::fp16;
  if (s == "int8") return inf::precision::int8;
  throw std::runtime_error("mldiag: --path takes fp32, bf16, fp16 or int8, not '" + s + "'");
}

void usage() {
  std::printf(
      "usage: mldiag_inference_engine [--weights FILE] [--fault NAME [--layer L] [--path "
      "fp32|bf16|fp16|int8]]\n"
      "Without --fault: the fp32 reference and the bf16, fp16 and int8 paths on a batch of "
      "prompts.\n"
      "Faults (default layer, path it shows on):\n");
  for (const auto& f : faults)
    std::printf("  %-19s layer %2d  %-5s %s\n", f.name, f.layer,
                std::string(inf::name(f.path)).c_str(), f.what);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("mldiag: " + a + " needs a value; see --help");
      return argv[++i];
    };
    if (a == "--weights") {
      o.weights = value();
      o.default_weights = false;
    } else if (a == "--fault")
      o.fault = value();
    else if (a == "--layer")
      o.layer = std::stoi(value());
    else if (a == "--path")
      o.path = parse_path(value());
    else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else
      throw std::runtime_error("mldiag: unknown option " + a + "; see --help");
  }
  return o;
}

// The weights: the file given, or the build folder's, trained here the first time (about a minute).
inf::model_weights load_weights(const options& o) {
  if (!std::filesystem::exists(o.weights)) {
    if (!o.default_weights)
      throw std::runtime_error("mldiag: no weights file " + o.weights +
                               "; train one with mldiag_inference_train --out FILE");
    std::printf("no weights at %s yet: training them (mldiag_inference_train, about a minute)\n",
                o.weights.c_str());
    const std::string command =
        std::string("\"") + MLDIAG_INFERENCE_TRAINER + "\" --out \"" + o.weights + "\"";
    if (std::system(command.c_str()) != 0)
      throw std::runtime_error("mldiag: training failed: " + command);
  }
  return inf::model_weights::load(o.weights);
}

std::vector<std::vector<int>> encode_all(const inf::model_weights& m,
                                         const std::vector<std::string>& texts) {
  std::vector<std::vector<int>> out;
  for (const auto& t : texts)
    out.push_back(m.encode(t));
  return out;
}

inf::engine_options path_options(const inf::model_weights& m, inf::precision p) {
  return {.path = p,
          .calibration = encode_all(m, calibration_prompts),
          .unrepresentative = encode_all(m, unrepresentative_prompts)};
}

// Healthy: every path on the batch, greedy; its agreement with fp32 along fp32's tokens.
int healthy(const inf::model_weights& m) {
  const auto prompts = encode_all(m, demo_prompts);
  const auto V = static_cast<std::size_t>(m.cfg.vocab);
  tap_log log;
  inf::engine reference(m, path_options(m, inf::precision::fp32));
  reference.set_hook([&](const inf::tap& t) { log(t); });
  const auto ref = reference.generate(prompts, new_tokens);
  std::printf("fp32 reference, greedy, %d new tokens:\n", new_tokens);
  for (std::size_t b = 0; b < prompts.size(); ++b)
    std::printf("  [%zu] \"%s\" -> \"%s\"\n", b, demo_prompts[b].c_str(),
                printable(m.decode(ref[b].tokens)).c_str());
  const auto taps = log.taps;

  bool ok = log.non_finite == 0;
  // Floors for a healthy path on this model, set below what the trained model gives (README).
  struct floor {
    inf::precision p;
    double top1;
  };
  std::printf("\npath  top-1 agree  max |dlogit|  non-finite  own greedy text of request 0\n");
  for (const floor f : {floor{inf::precision::bf16, 0.90}, floor{inf::precision::fp16, 0.97},
                        floor{inf::precision::int8, 0.85}}) {
    tap_log path_log;
    inf::engine e(m, path_options(m, f.p));
    e.set_hook([&](const inf::tap& t) { path_log(t); });
    const auto forced_tokens = tokens_of(ref);
    const auto forced = e.generate(prompts, new_tokens, {}, &forced_tokens);
    const auto own = e.generate(prompts, new_tokens);
    const auto a = compare(ref, forced, V);
    const bool pass = a.finite && path_log.non_finite == 0 && a.top1 >= f.top1;
    ok = ok && pass;
    std::printf("%-5s %10.1f%%  %12.4f  %10llu  \"%s\"%s\n", std::string(inf::name(f.p)).c_str(),
                100.0 * a.top1, a.max_diff, static_cast<unsigned long long>(path_log.non_finite),
                printable(m.decode(own[0].tokens)).c_str(), pass ? "" : "   <- below its floor");
  }

  // Healthy variants: sampling (seeded, so repeatable), and each request alone, which must give
  // the batch's logits bit for bit (padding is masked, never read).
  inf::engine fp32(m, {});
  const auto sampled =
      fp32.generate(prompts, new_tokens, {.temperature = 0.8f, .top_k = 10, .seed = 3});
  std::printf("\nfp32 sampled (temperature 0.8, top-k 10, seed 3):\n");
  for (std::size_t b = 0; b < prompts.size(); ++b)
    std::printf("  [%zu] -> \"%s\"\n", b, printable(m.decode(sampled[b].tokens)).c_str());
  bool alone_same = true;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    const auto one = fp32.generate({prompts[b]}, new_tokens);
    alone_same =
        alone_same && one[0].tokens == ref[b].tokens && one[0].step_logits == ref[b].step_logits;
  }
  std::printf("each request alone = in the batch: %s\n", alone_same ? "yes" : "NO");
  ok = ok && alone_same;
  std::printf("taps observed in the fp32 run: %llu (%llu values)\n",
              static_cast<unsigned long long>(taps), static_cast<unsigned long long>(log.values));
  std::printf("%s\n", ok ? "healthy: every path finite and within its floor"
                         : "FAILED: a healthy path is off (see above)");
  return ok ? 0 : 1;
}

// One planted fault: where it first shows against the same path without it, then what it does
// to the output against the fp32 reference.
int faulty(const inf::model_weights& m, const options& o) {
  const fault_entry* entry = nullptr;
  for (const auto& f : faults)
    if (o.fault == f.name) entry = &f;
  if (!entry) {
    usage();
    throw std::runtime_error("mldiag: no fault named '" + o.fault + "'");
  }
  const int layer = o.layer.value_or(entry->layer);
  if (entry->layer >= 0 && (layer < 0 || layer >= m.cfg.layers))
    throw std::runtime_error("mldiag: --layer must be in [0, " + std::to_string(m.cfg.layers) +
                             ")");
  const inf::precision path = o.path.value_or(entry->path);
  const auto prompts = encode_all(m, demo_prompts);
  const auto V = static_cast<std::size_t>(m.cfg.vocab);

  inf::engine reference(m, {});
  const auto ref = reference.generate(prompts, new_tokens);
  const auto ref_tokens = tokens_of(ref);

  // The same path with and without the fault, along the reference's tokens, fingerprinting taps.
  tap_log clean_log{.fingerprints = true}, fault_log{.fingerprints = true};
  inf::engine clean(m, path_options(m, path));
  clean.set_hook([&](const inf::tap& t) { clean_log(t); });
  (void)clean.generate(prompts, new_tokens, {}, &ref_tokens);
  auto fo = path_options(m, path);
  inf::plant(fo.faults, entry->name, layer);
  inf::engine broken(m, fo);
  broken.set_hook([&](const inf::tap& t) { fault_log(t); });
  const auto forced = broken.generate(prompts, new_tokens, {}, &ref_tokens);

  std::printf("fault: %s, %s, layer %d, on the %s path\n", entry->name, entry->what, layer,
              std::string(inf::name(path)).c_str());
  std::size_t i = 0;
  while (i < clean_log.hashes.size() && i < fault_log.hashes.size() &&
         clean_log.hashes[i] == fault_log.hashes[i])
    ++i;
  if (i < fault_log.places.size())
    std::printf("differs first at: %s\n", describe(fault_log.places[i]).c_str());
  else
    std::printf("differs first at: nowhere (the fault changed no tap)\n");
  if (fault_log.first_non_finite)
    std::printf("first non-finite: %s\n", describe(*fault_log.first_non_finite).c_str());
  else
    std::printf("first non-finite: none\n");

  const auto a = compare(ref, forced, V);
  std::printf(
      "against fp32: top-1 agreement %.1f%%, max |dlogit| %.4f, non-finite values in taps %llu\n",
      100.0 * a.top1, a.max_diff, static_cast<unsigned long long>(fault_log.non_finite));
  const auto own = broken.generate(prompts, new_tokens);
  for (std::size_t b = 0; b < prompts.size(); ++b)
    std::printf("  [%zu] \"%s\" -> \"%s\"   (fp32: \"%s\")\n", b, demo_prompts[b].c_str(),
                printable(m.decode(own[b].tokens)).c_str(),
                printable(m.decode(ref[b].tokens)).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const options o = parse(argc, argv);
  const auto m = load_weights(o);
  std::printf("model: %d blocks, d=%d, %d heads, context %d, vocabulary %d bytes (%s)\n",
              m.cfg.layers, m.cfg.d, m.cfg.heads, m.cfg.context, m.cfg.vocab, o.weights.c_str());
  return o.fault.empty() ? healthy(m) : faulty(m, o);
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
