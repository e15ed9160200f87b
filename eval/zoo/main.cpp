// SPDX-License-Identifier: Apache-2.0
// mldiag-zoo: a zoo of healthy training programs (fifty families, varied optimizers, schedules,
// learning rates, batch sizes, accumulation, seeds, short and long runs) and a zoo of planted
// faults, every run under a default mldiag monitor wired the README's way. It reports the
// detectors' false alarms on the healthy runs (split calibration / held-out / held-out round 2
// / held-out round 3 / held-out round 4 / held-out round 5 / held-out round 6 / held-out round 7 / held-out
// round 8 / held-out round 9 / held-out round 10 / held-out round 11 / held-out round 12 / held-out round 13 / held-out round 14 / held-out round 15 families), and recall, question, localization and delay on the faults (issue 15).
// `--losses-only` reports how the runs trained and nothing of what was found; `--curves` trains them with no
// monitor at all and prints their loss, progress metric and validation loss along the way.
#include "../../examples/common/faults.hpp"
#include "../../examples/common/verdict.hpp"
#include "data.hpp"
#include "spec.hpp"
#include "train.hpp"

#include <mldiag/report/json.hpp>

#include <torch/torch.h>

#include <dlfcn.h>  // dlsym: OpenBLAS's thread count, where LibTorch's BLAS is OpenBLAS

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifndef MLDIAG_DIGITS_CSV
#define MLDIAG_DIGITS_CSV "third_party/data/digits.csv"
#endif

namespace {

struct settings {
  bool quick = false, check = false, list = false, healthy_only = false, faults_only = false, verbose = false;
  bool losses_only = false;
  bool curves = false;
  std::int64_t curve_every = 50;
  int jobs = 1;
  std::string family, only;
};

std::string family_names(std::optional<zoo::split> only = std::nullopt) {
  std::string out;
  for (const auto f : zoo::families)
    if (!only || zoo::split_of(f) == *only) out += (out.empty() ? "" : ", ") + std::string(f);
  return out;
}

constexpr std::array<zoo::split, 16> splits = {zoo::split::calibration, zoo::split::heldout,   zoo::split::heldout2,
                                               zoo::split::heldout3,    zoo::split::heldout4,  zoo::split::heldout5,
                                               zoo::split::heldout6,    zoo::split::heldout7,  zoo::split::heldout8,
                                               zoo::split::heldout9,    zoo::split::heldout10, zoo::split::heldout11,
                                               zoo::split::heldout12,   zoo::split::heldout13, zoo::split::heldout14,
                                               zoo::split::heldout15};
constexpr std::size_t index(zoo::split s) {
  return static_cast<std::size_t>(s);
}

/// The split column of the tables.
constexpr const char* short_name(zoo::split s) {
  switch (s) {
    case zoo::split::calibration:
      return "calib";
    case zoo::split::heldout:
      return "held";
    case zoo::split::heldout2:
      return "held2";
    case zoo::split::heldout3:
      return "held3";
    case zoo::split::heldout4:
      return "held4";
    case zoo::split::heldout5:
      return "held5";
    case zoo::split::heldout6:
      return "held6";
    case zoo::split::heldout7:
      return "held7";
    case zoo::split::heldout8:
      return "held8";
    case zoo::split::heldout9:
      return "held9";
    case zoo::split::heldout10:
      return "held10";
    case zoo::split::heldout11:
      return "held11";
    case zoo::split::heldout12:
      return "held12";
    case zoo::split::heldout13:
      return "held13";
    case zoo::split::heldout14:
      return "held14";
    case zoo::split::heldout15:
      return "held15";
  }
  return "?";
}

[[noreturn]] void usage(const std::string& why, int code = 2) {
  std::fprintf(code ? stderr : stdout,
               "%s%s"
               "usage: mldiag-zoo [--quick] [--check] [--jobs N] [--family NAME] [--list] [--healthy-only] [--faults-only]\n"
               "                  [--only TEXT] [--verbose] [--losses-only] [--curves] [--curve-every N]\n"
               "                  [--entropy-stride N] [--entropy-gap] [--evidence DIR]\n"
               "  --quick         a deterministic subset (every family, a few faults) for CTest\n"
               "  --check         exit 1 when a target is missed (0 healthy false alarms; over fair faults recall\n"
               "                  >= 0.95, right question >= 0.9, top-1 localization >= 0.9, median steps <= 10)\n"
               "  --jobs N        runs at a time (one thread each)\n"
               "  --family NAME   one family: %s\n"
               "  --list          print the runs and exit\n"
               "  --only TEXT     the runs whose description (as --list prints it) contains TEXT\n"
               "  --verbose       every run's findings at warning or above, with their evidence\n"
               "  --losses-only   train the runs and print per run only how it trained (seconds, initial and final\n"
               "                  loss, first and last validation loss, trained or not), no findings, no judging;\n"
               "                  exit 1 when a healthy run did not train (held-out families' zoo-bug check)\n"
               "  --curves        train the runs with no monitor (nothing a detector says exists) and print, per run,\n"
               "                  its loss, progress metric and validation loss every N steps, then how it trained;\n"
               "                  how a held-out family's runs are checked before the round is measured\n"
               "  --curve-every N the steps between two lines of --curves (default 50)\n"
               "  --entropy-stride N  the monitor reads every N-th attention row (default: monitor_config's, %u)\n"
               "  --entropy-gap   also compare, per attention tensor and step, every row's mean normalized entropy\n"
               "                  with the sampled rows' (every N-th, at each offset), and print the largest difference\n"
               "  --evidence DIR  write each run's evidence log and findings to DIR, for mldiag-replay\n",
               why.empty() ? "" : ("mldiag: " + why + "\n").c_str(), "", family_names().c_str(),
               static_cast<unsigned>(mldiag::monitor_config{}.entropy.row_stride));
  std::exit(code);
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--quick") s.quick = true;
    else if (a == "--check") s.check = true;
    else if (a == "--list") s.list = true;
    else if (a == "--healthy-only") s.healthy_only = true;
    else if (a == "--faults-only") s.faults_only = true;
    else if (a == "--verbose") s.verbose = true;
    else if (a == "--losses-only") s.losses_only = true;
    else if (a == "--curves") s.curves = true;
    else if (a == "--curve-every") {
      if (i + 1 >= argc) usage("--curve-every needs a value");
      const int v = std::atoi(argv[++i]);
      if (v < 1) usage("--curve-every needs a number >= 1, not '" + std::string(argv[i]) + "'");
      s.curve_every = v;
    }
    else if (a == "--entropy-gap") zoo::entropy_flags.gap = true;
    else if (a == "--entropy-stride") {
      if (i + 1 >= argc) usage("--entropy-stride needs a value");
      const int v = std::atoi(argv[++i]);
      if (v < 1) usage("--entropy-stride needs a number >= 1, not '" + std::string(argv[i]) + "'");
      zoo::entropy_flags.row_stride = static_cast<std::uint32_t>(v);
    }
    else if (a == "--only") {
      if (i + 1 >= argc) usage("--only needs a value");
      s.only = argv[++i];
    }
    else if (a == "--evidence") {
      if (i + 1 >= argc) usage("--evidence needs a folder");
      zoo::evidence_dir = argv[++i];
      std::filesystem::create_directories(zoo::evidence_dir);
    }
    else if (a == "--help" || a == "-h") usage("", 0);
    else if (a == "--jobs" || a == "--family") {
      if (i + 1 >= argc) usage(std::string(a) + " needs a value");
      const std::string v = argv[++i];
      if (a == "--family") {
        if (std::find(zoo::families.begin(), zoo::families.end(), v) == zoo::families.end())
          usage("no family named '" + v + "'; pick one of " + family_names());
        s.family = v;
      } else {
        s.jobs = std::atoi(v.c_str());
        if (s.jobs < 1) usage("--jobs needs a number >= 1, not '" + v + "'");
      }
    } else usage("unknown flag " + std::string(a));
  }
  if (s.healthy_only && s.faults_only) usage("--healthy-only and --faults-only exclude each other");
  if (s.losses_only && (s.verbose || s.check)) usage("--losses-only prints no findings: not with --verbose or --check");
  if (s.curves && (s.verbose || s.check || s.losses_only))
    usage("--curves runs no monitor: not with --verbose, --check or --losses-only");
  return s;
}

// Each held-out round's one and only first measurement: the fraction of its healthy runs with
// a warning or above, when it was judged for the first time (warned, runs). Fixed once taken —
// what a later measurement of the same round shows is the JSON line's heldoutN_* keys, a
// figure on runs the defaults have since met. docs/accuracy.md has each round's story.
struct first_contact_figure {
  const char* round;
  int warned, runs;
};
constexpr first_contact_figure first_contacts[] = {
    {"heldout", 60, 150}, {"heldout2", 5, 75},  {"heldout3", 15, 75}, {"heldout4", 1, 81},   {"heldout5", 39, 81},
    {"heldout6", 22, 81}, {"heldout7", 23, 81}, {"heldout8", 25, 81}, {"heldout9", 13, 108},
    {"heldout10", 40, 108}, {"heldout11", 4, 81}, {"heldout12", 5, 81}, {"heldout13", 2, 81},
    {"heldout14", 6, 81}, {"heldout15", 1, 81},
};

// "first_contact_heldout":0.4000,... and their total, for the JSON line.
std::string first_contact_json() {
  std::string out;
  int warned = 0, runs = 0;
  char buffer[96];
  for (const auto& f : first_contacts) {
    std::snprintf(buffer, sizeof buffer, "%s\"first_contact_%s\":%.4f", out.empty() ? "" : ",", f.round,
                  static_cast<double>(f.warned) / f.runs);
    out += buffer;
    warned += f.warned;
    runs += f.runs;
  }
  std::snprintf(buffer, sizeof buffer, ",\"first_contact_warned\":%d,\"first_contact_runs\":%d", warned, runs);
  return out + buffer;
}

// One thread per run: LibTorch's own (OpenMP, a per-thread setting, so every worker sets it)
// and OpenBLAS's pthreads, which LibTorch does not control. Two runs each spinning OpenBLAS's
// threads on 2 cores took 25 s where one thread took 4 s (the LSTM quick run, 2026-12-01).
void one_thread_per_run() {
  torch::set_num_threads(1);
  using set_threads = void (*)(int);
  if (void* f = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) reinterpret_cast<set_threads>(f)(1);
}

std::string fraction(int a, int b) { return std::to_string(a) + "/" + std::to_string(b); }

/// The CPU the runs ran on: the first "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

struct judged {
  const zoo::result* r;
  examples::verdict v;
};

/// `--curves`: a run's loss, progress metric and validation loss, each window of `every` steps
/// its mean loss and mean metric and the last evaluation in it, then how it trained.
void print_curve(std::FILE* out, const zoo::result& r, std::int64_t every, const std::string& line) {
  std::fprintf(out, "\n%s  %.1f s%s\n", line.c_str(), r.seconds, r.skipped.empty() ? "" : ("  skipped: " + r.skipped).c_str());
  if (!r.skipped.empty()) return;
  const auto& L = r.run.losses;
  const auto& M = r.metric_values;
  std::fprintf(out, "  %-11s %12s %18s %12s\n", "steps", "mean loss",
               r.metric_name.empty() ? "metric" : (r.metric_name + (r.metric_higher_is_better ? " (+)" : " (-)")).c_str(),
               "val loss");
  const auto n = static_cast<std::int64_t>(L.size());
  for (std::int64_t a = 0; a < n; a += every) {
    const auto b = std::min(n, a + every);
    double loss = 0.0, metric = 0.0;
    for (auto i = a; i < b; ++i) loss += L[static_cast<std::size_t>(i)];
    for (auto i = a; i < b && i < static_cast<std::int64_t>(M.size()); ++i) metric += M[static_cast<std::size_t>(i)];
    double val = std::numeric_limits<double>::quiet_NaN();
    for (const auto& [step, v] : r.val_losses)
      if (step >= a && step < b) val = v;
    const std::string range = std::to_string(a) + "-" + std::to_string(b - 1);
    std::fprintf(out, "  %-11s %12.4f %18.4f %12.4f\n", range.c_str(), loss / static_cast<double>(b - a),
                 M.empty() ? std::numeric_limits<double>::quiet_NaN() : metric / static_cast<double>(b - a), val);
  }
  std::fprintf(out, "  loss %.4f -> %.4f, %s %.4f -> %.4f, val %.4f -> %.4f: trained %s (judged by the %s)\n",
               r.initial_loss, r.final_loss, r.metric_name.empty() ? "metric" : r.metric_name.c_str(), r.initial_metric,
               r.final_metric, r.val_first, r.val_last, r.trained() ? "yes" : "no",
               r.loss_not_progress ? "metric: the loss is not a progress measure" : "loss");
}

}  // namespace

int main(int argc, char** argv) try {
  const settings s = parse(argc, argv);
  auto specs = zoo::make_specs(s.quick);
  // The line --list prints, and --only matches.
  const auto line = [](const zoo::run_spec& r) {
    return r.describe() + " fault " + (r.planted == zoo::fault::none ? "none" : std::string(zoo::info(r.planted)->name)) +
           " onset " + std::to_string(r.onset);
  };
  std::erase_if(specs, [&](const zoo::run_spec& r) {
    return (!s.family.empty() && r.family != s.family) || (s.healthy_only && r.planted != zoo::fault::none) ||
           (s.faults_only && r.planted == zoo::fault::none) ||
           (!s.only.empty() && line(r).find(s.only) == std::string::npos);
  });
  if (s.list) {
    for (const auto& r : specs) std::printf("%s\n", line(r).c_str());
    return 0;
  }
  one_thread_per_run();
  const auto data = zoo::load_all(MLDIAG_DIGITS_CSV);
  if (data.digits) std::printf("digits: %s\n", data.digits->source.c_str());
  if (data.fashion) std::printf("fashion-mnist: %s\n", data.fashion->source.c_str());
  if (data.gpl) std::printf("text: %s\n", data.gpl->c.source.c_str());
  if (data.apache) std::printf("text: %s\n", data.apache->c.source.c_str());
  if (data.licenses) std::printf("license windows: %s\n", data.licenses->source.c_str());
  if (data.words) std::printf("license words: %s\n", data.words->source.c_str());
  for (const auto* t : {&data.breast_cancer, &data.wine, &data.iris, &data.diabetes, &data.breast_cancer_smoothness})
    if (*t) std::printf("table: %s\n", (*t)->z.source.c_str());
  for (const auto* t : {&data.digits_step10, &data.fashion_lt20, &data.fashion_lt10})
    if (*t) std::printf("imbalanced: %s\n", (*t)->source.c_str());
  for (const auto& m : data.missing) std::printf("%s\n", m.c_str());
  const std::string cpu = cpu_model();
  const unsigned hw_threads = std::thread::hardware_concurrency();
  std::string cpu_json;  // the model name as a JSON string, for the last line
  mldiag::report::json::append_quoted(cpu_json, cpu);
  std::printf("cpu: %s, %u hardware threads\n", cpu.c_str(), hw_threads);
  std::printf("calibration families: %s; held-out families: %s; held-out round 2 families: %s; held-out round 3 "
              "families: %s; held-out round 4 families: %s; held-out round 5 families: %s; held-out round 6 "
              "families: %s; held-out round 7 families: %s; held-out round 8 families: %s; held-out round 9 "
              "families: %s; held-out round 10 families: %s; held-out round 11 families: %s; held-out round 12 "
              "families: %s; held-out round 13 families: %s; held-out round 14 families: %s; held-out round 15 "
              "families: %s\n",
              family_names(zoo::split::calibration).c_str(), family_names(zoo::split::heldout).c_str(),
              family_names(zoo::split::heldout2).c_str(), family_names(zoo::split::heldout3).c_str(),
              family_names(zoo::split::heldout4).c_str(), family_names(zoo::split::heldout5).c_str(),
              family_names(zoo::split::heldout6).c_str(), family_names(zoo::split::heldout7).c_str(),
              family_names(zoo::split::heldout8).c_str(), family_names(zoo::split::heldout9).c_str(),
              family_names(zoo::split::heldout10).c_str(), family_names(zoo::split::heldout11).c_str(),
              family_names(zoo::split::heldout12).c_str(), family_names(zoo::split::heldout13).c_str(),
              family_names(zoo::split::heldout14).c_str(), family_names(zoo::split::heldout15).c_str());
  std::printf("%zu runs, %d at a time\n", specs.size(), s.jobs);
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<zoo::result> results(specs.size());
  std::atomic<std::size_t> next{0};
  std::mutex print;
  auto worker = [&] {
    // Per thread: with OpenMP the thread count is a per-thread setting, so each worker sets it.
    one_thread_per_run();
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      results[i] = zoo::train(specs[i], data, /*monitored=*/!s.curves);
      const auto& r = results[i];
      const std::lock_guard<std::mutex> lock(print);
      if (s.curves) {
        print_curve(stdout, r, s.curve_every, "[" + std::to_string(i + 1) + "/" + std::to_string(specs.size()) + "] " + line(r.spec));
        std::fflush(stdout);
        continue;
      }
      if (s.losses_only) {
        std::fprintf(stderr, "  [%zu/%zu] %s  loss %.3f -> %.3f  %.1f s%s\n", i + 1, specs.size(),
                     line(r.spec).c_str(), r.initial_loss, r.final_loss, r.seconds,
                     r.skipped.empty() ? "" : ("  skipped: " + r.skipped).c_str());
        continue;
      }
      std::fprintf(stderr, "  [%zu/%zu] %-52s %-24s loss %.3f -> %.3f  %zu finding(s)  %.1f s%s\n", i + 1, specs.size(),
                   r.spec.describe().c_str(),
                   r.spec.planted == zoo::fault::none ? "healthy" : std::string(zoo::info(r.spec.planted)->name).c_str(),
                   r.initial_loss, r.final_loss, r.run.findings.size(), r.seconds,
                   r.skipped.empty() ? "" : ("  skipped: " + r.skipped).c_str());
      if (s.verbose)
        for (const auto& f : r.run.findings) examples::print_finding(stderr, f);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < s.jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (s.curves) {
    int healthy = 0, healthy_failed = 0, skipped = 0;
    double seconds = 0.0, slowest = 0.0;
    for (const auto& r : results) {
      if (!r.skipped.empty()) {
        ++skipped;
        continue;
      }
      seconds += r.seconds;
      slowest = std::max(slowest, r.seconds);
      if (r.spec.planted != zoo::fault::none) continue;
      ++healthy;
      if (!r.trained()) {
        ++healthy_failed;
        std::printf("did not train: %s\n", line(r.spec).c_str());
      }
    }
    std::printf("\nCURVES (no monitor): healthy runs that did not train: %d of %d; skipped: %d; %.1f s of runs, the "
                "slowest %.1f s; wall time %.1f s with %d job(s)\n",
                healthy_failed, healthy, skipped, seconds, slowest, wall, s.jobs);
    std::fflush(stdout);
    return healthy_failed == 0 ? 0 : 1;
  }
  if (s.losses_only) {
    // How each run trained and nothing of what the monitor found: the check a held-out
    // family's configurations may be tuned on (every healthy run trains) without its
    // findings being seen.
    std::printf("\nLOSSES ONLY (no findings, no judging; initial = mean of the first 5 steps, final = of the last 10%%; "
                "trained: final < 0.85 x initial)\n");
    int healthy = 0, healthy_failed = 0, faulted = 0, faulted_failed = 0, skipped = 0;
    for (const auto& r : results) {
      if (!r.skipped.empty()) {
        ++skipped;
        std::printf("%s  skipped: %s\n", line(r.spec).c_str(), r.skipped.c_str());
        continue;
      }
      const bool ok = r.trained(), is_healthy = r.spec.planted == zoo::fault::none;
      ++(is_healthy ? healthy : faulted);
      if (!ok) ++(is_healthy ? healthy_failed : faulted_failed);
      std::string metric;  // a family judged by its progress metric prints it
      if (!r.metric_name.empty()) {
        char text[160];
        std::snprintf(text, sizeof text, "  %s %.4f -> %.4f", r.metric_name.c_str(), r.initial_metric, r.final_metric);
        metric = text;
      }
      std::printf("%s  %.1f s  loss %.4f -> %.4f%s  val %.4f -> %.4f  trained %s  monitor %.1f%% of the step\n",
                  line(r.spec).c_str(), r.seconds, r.initial_loss, r.final_loss, metric.c_str(), r.val_first, r.val_last,
                  ok ? "yes" : "no", 100.0 * r.run.monitor_seconds_per_step / r.run.seconds_per_step);
    }
    std::printf("\nhealthy runs that did not train: %d of %d", healthy_failed, healthy);
    if (faulted > 0)
      std::printf("; faulted runs that did not train: %d of %d (a fault may stop training)", faulted_failed, faulted);
    if (skipped > 0) std::printf("; skipped: %d", skipped);
    std::printf("\nwall time %.1f s with %d job(s)\n", wall, s.jobs);
    std::fflush(stdout);
    return healthy_failed == 0 ? 0 : 1;
  }

  // Judge every run that happened.
  std::vector<judged> js;
  for (const auto& r : results) {
    if (!r.skipped.empty()) continue;
    examples::expectation want;
    if (r.spec.planted != zoo::fault::none) {
      const auto* fi = zoo::info(r.spec.planted);
      want = {.healthy = false, .onset = r.spec.onset, .expected = fi->expected, .has_layer = fi->has_layer,
              .layer = r.run.planted_layer};
    }
    js.push_back({&r, examples::judge(r.run.findings, want)});
  }
  std::set<std::string> skipped;
  for (const auto& r : results)
    if (!r.skipped.empty()) skipped.insert(r.spec.family + "/" + r.spec.variant + ": " + r.skipped);
  for (const auto& m : skipped) std::printf("mldiag: skipped %s\n", m.c_str());

  // Healthy runs, per family.
  std::printf("\nHEALTHY RUNS (every one must train: final loss = mean of the last 10%% of steps, initial = first 5)\n");
  std::printf("%-15s %-6s %5s %8s %12s %8s  %s\n", "family", "split", "runs", "trained", "final/init", "alarmed",
              "first false alarm (Qn: symptom at location at step S) [run]");
  int healthy = 0, healthy_alarmed = 0;
  std::array<int, splits.size()> split_runs{}, split_alarmed{};  // by zoo::split
  std::vector<std::string> not_trained;
  std::map<std::string, std::array<int, splits.size()>> by_detector;  // detector -> healthy runs it fired in, by split
  for (const auto family : zoo::families) {
    int n = 0, trained = 0, alarmed = 0;
    std::vector<double> ratios;
    std::string first;
    const auto sp = index(zoo::split_of(family));
    for (const auto& j : js) {
      if (j.r->spec.planted != zoo::fault::none || j.r->spec.family != family) continue;
      ++n;
      trained += j.r->trained();
      ratios.push_back(j.r->final_loss / j.r->initial_loss);
      if (!j.r->trained())
        not_trained.push_back(j.r->spec.describe() + ": loss " + std::to_string(j.r->initial_loss) + " -> " +
                              std::to_string(j.r->final_loss));
      if (j.v.healthy_alarms > 0) {
        ++alarmed;
        if (first.empty()) first = j.v.false_alarm + " [" + j.r->spec.describe() + "]";
      }
      std::set<std::string> fired;
      // The run keeps the findings that wait for a consequence too (info): not alarms.
      for (const auto& f : j.r->run.findings)
        if (f.f.severity >= mldiag::severity::warning) fired.insert(f.f.detector.empty() ? f.f.symptom : f.f.detector);
      for (const auto& d : fired) by_detector[d][sp]++;
    }
    if (n == 0) continue;
    healthy += n;
    healthy_alarmed += alarmed;
    split_runs[sp] += n;
    split_alarmed[sp] += alarmed;
    std::printf("%-15.*s %-6s %5d %8s %12.3f %8d  %s\n", static_cast<int>(family.size()), family.data(),
                short_name(zoo::split_of(family)), n, fraction(trained, n).c_str(), examples::median(ratios), alarmed,
                first.empty() ? "-" : first.c_str());
  }
  std::printf("\nFALSE ALARMS BY DETECTOR (healthy runs in which it raised a finding at warning or above)\n");
  std::printf("%-28s %12s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "detector", "calibration", "held-out",
              "round 2", "round 3", "round 4", "round 5", "round 6", "round 7", "round 8", "round 9", "round 10",
              "round 11", "round 12", "round 13", "round 14", "round 15");
  for (const auto& [d, c] : by_detector)
    std::printf("%-28s %5d/%-6d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d "
                "%4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d %4d/%-4d\n",
                d.c_str(), c[0], split_runs[0], c[1], split_runs[1], c[2], split_runs[2], c[3], split_runs[3], c[4],
                split_runs[4], c[5], split_runs[5], c[6], split_runs[6], c[7], split_runs[7], c[8], split_runs[8], c[9],
                split_runs[9], c[10], split_runs[10], c[11], split_runs[11], c[12], split_runs[12], c[13],
                split_runs[13], c[14], split_runs[14], c[15], split_runs[15]);
  if (by_detector.empty()) std::printf("(none)\n");
  for (const auto& t : not_trained) std::printf("mldiag: zoo bug: a healthy run did not train: %s\n", t.c_str());

  // Faults.
  std::printf("\nFAULTS (fair ones count toward recall; unfair ones are reported only)\n");
  std::printf("%-26s %-15s %-6s %-5s %4s %8s %7s %6s %5s  %s\n", "fault", "family", "split", "fair", "runs", "detected",
              "right Q", "top-1", "steps", "first finding (Qn: symptom at location) (runs)");
  int faulted = 0, fair_runs = 0, detected = 0, right = 0, located = 0, with_layer = 0, before_onset = 0;
  // Fair faulted runs that reached a warning or above from the onset on: a finding that waits
  // for a consequence counts as found (verdict.hpp); this says how many became warnings, and when.
  std::vector<double> steps_to_warning;  // one per fair faulted run that reached a warning
  // Fair faults first found by a claim that waited for its consequence (info), by the detector
  // that found them: how many became warnings, and the steps from the finding to the warning.
  struct gated_delay {
    int found = 0;
    std::vector<double> steps;  // one per run that reached a warning
  };
  std::map<std::string, gated_delay> gated;
  std::array<int, splits.size()> split_fair{}, split_detected{};  // fair faulted runs by zoo::split
  std::vector<double> steps;
  std::vector<std::string> misses, quiet_lines, unfair_runs;
  for (const auto& fi : zoo::fault_table()) {
    for (const auto family : fi.in) {
      int n = 0, d = 0, q = 0, t = 0, tl = 0, quiet = 0;
      // The same over the runs that count toward recall (zoo::fair_for).
      int nf = 0, df = 0, qf = 0, tf = 0, tlf = 0;
      std::vector<double> st, stf;
      std::map<std::string, int> reported;
      for (const auto& j : js) {
        if (j.r->spec.planted != fi.id || j.r->spec.family != family) continue;
        ++n;
        const auto& v = j.v;
        const std::string run = std::string(fi.name) + " in " + j.r->spec.describe();
        if (fi.quiet) {
          // Quiet cases: any finding at warning or above from the onset on is a false alarm.
          quiet += !v.detected;
          if (v.detected) quiet_lines.push_back(run + ": " + v.question.substr(0, 2) + ": " + v.symptom +
                                                (v.location.empty() ? "" : " at " + v.location) + " at onset+" +
                                                std::to_string(v.steps_to_detect));
          continue;
        }
        before_onset += v.alarms_before_onset;
        const bool fair = zoo::fair_for(fi, j.r->spec);
        d += v.detected;
        q += v.right_question;
        if (v.top1) {
          ++tl;
          t += *v.top1;
        }
        if (v.detected) {
          st.push_back(static_cast<double>(v.steps_to_detect));
          ++reported[v.question.substr(0, 2) + ": " + v.symptom + (v.location.empty() ? "" : " at " + v.location)];
        }
        if (fair) {
          ++nf;
          df += v.detected;
          qf += v.right_question;
          if (v.top1) {
            ++tlf;
            tf += *v.top1;
          }
          if (v.detected) stf.push_back(static_cast<double>(v.steps_to_detect));
          if (v.steps_to_warning >= 0) steps_to_warning.push_back(static_cast<double>(v.steps_to_warning));
          if (v.detected && v.steps_to_warning != v.steps_to_detect) {  // first found at info, waiting
            auto& g = gated[v.detector];
            ++g.found;
            if (v.steps_to_warning >= 0) g.steps.push_back(static_cast<double>(v.steps_to_warning - v.steps_to_detect));
          }
        } else if (fi.fair) {
          unfair_runs.push_back(run + (v.detected ? ": found anyway" : ": not found"));
        }
        if (fair) {
          std::string why;
          if (v.alarms_before_onset > 0) why += "alarm before the onset: " + v.false_alarm + "; ";
          if (!v.detected) why += "nothing at warning or above from step " + std::to_string(j.r->spec.onset) + " on";
          else if (!v.right_question) why += "reported as " + v.question + " (" + v.symptom + "), expected " + std::string(mldiag::name(fi.expected));
          else if (v.top1 && !*v.top1) why += "located at " + v.location + ", planted in " + j.r->run.planted_layer;
          if (!why.empty()) misses.push_back(run + ": " + why);
        }
      }
      if (n == 0) continue;
      const double m = examples::median(st);
      std::string first;
      for (const auto& [text_, count] : reported) first += (first.empty() ? "" : "; ") + text_ + " (" + std::to_string(count) + ")";
      if (fi.quiet) {
        std::printf("%-26.*s %-15.*s %-6s %-5s %4d %8s %7s %6s %5s  stayed quiet (no warning or above): %d/%d\n",
                    static_cast<int>(fi.name.size()), fi.name.data(), static_cast<int>(family.size()), family.data(),
                    short_name(zoo::split_of(family)), "quiet", n, "-", "-", "-", "-", quiet, n);
        continue;
      }
      faulted += n;
      fair_runs += nf;
      detected += df;
      right += qf;
      located += tf;
      with_layer += tlf;
      steps.insert(steps.end(), stf.begin(), stf.end());
      split_fair[index(zoo::split_of(family))] += nf;
      split_detected[index(zoo::split_of(family))] += df;
      const std::string fair_text = nf == n ? "yes" : nf == 0 ? "no" : fraction(nf, n);
      std::printf("%-26.*s %-15.*s %-6s %-5s %4d %8s %7s %6s %5s  %s\n", static_cast<int>(fi.name.size()), fi.name.data(),
                  static_cast<int>(family.size()), family.data(), short_name(zoo::split_of(family)), fair_text.c_str(),
                  n, fraction(d, n).c_str(),
                  fraction(q, n).c_str(), tl ? fraction(t, tl).c_str() : "-",
                  m < 0 ? "-" : std::to_string(static_cast<long long>(m)).c_str(), first.empty() ? "(nothing)" : first.c_str());
    }
  }
  std::printf("\nunfair faults (reported, not counted):\n");
  for (const auto& fi : zoo::fault_table())
    if (!fi.fair) std::printf("  %.*s: %.*s\n", static_cast<int>(fi.name.size()), fi.name.data(), static_cast<int>(fi.why.size()), fi.why.data());
  // Runs of fair faults whose own recipe undoes the fault (zoo::fair_for).
  for (const auto& l : unfair_runs) std::printf("  %s (the recipe undoes the fault: BatchNorm + Adam are invariant to the input scale)\n", l.c_str());
  std::printf("\nshould-stay-quiet cases with a finding:\n");
  for (const auto& l : quiet_lines) std::printf("  %s\n", l.c_str());
  if (quiet_lines.empty()) std::printf("  (none)\n");
  std::printf("\nmisses (fair faults):\n");
  for (const auto& l : misses) std::printf("  %s\n", l.c_str());
  if (misses.empty()) std::printf("  (none)\n");

  const double recall = fair_runs ? static_cast<double>(detected) / fair_runs : 0.0;
  const double right_q = fair_runs ? static_cast<double>(right) / fair_runs : 0.0;
  const double top1 = with_layer ? static_cast<double>(located) / with_layer : 0.0;
  const double med = examples::median(steps);
  std::array<double, splits.size()> split_recall{};
  for (const auto sp : splits) {
    const auto i = index(sp);
    split_recall[i] = split_fair[i] ? static_cast<double>(split_detected[i]) / split_fair[i] : 0.0;
  }
  const double held_recall = split_recall[index(zoo::split::heldout)];
  const double held2_recall = split_recall[index(zoo::split::heldout2)];
  const double held3_recall = split_recall[index(zoo::split::heldout3)];
  const double held4_recall = split_recall[index(zoo::split::heldout4)];
  const double held5_recall = split_recall[index(zoo::split::heldout5)];
  const double held6_recall = split_recall[index(zoo::split::heldout6)];
  const double held7_recall = split_recall[index(zoo::split::heldout7)];
  const double held8_recall = split_recall[index(zoo::split::heldout8)];
  const double held9_recall = split_recall[index(zoo::split::heldout9)];
  const double held10_recall = split_recall[index(zoo::split::heldout10)];
  const double held11_recall = split_recall[index(zoo::split::heldout11)];
  const double held12_recall = split_recall[index(zoo::split::heldout12)];
  const double held13_recall = split_recall[index(zoo::split::heldout13)];
  const double held14_recall = split_recall[index(zoo::split::heldout14)];
  const double held15_recall = split_recall[index(zoo::split::heldout15)];
  std::printf("\nhealthy runs %d, with a finding at warning or above: %d (calibration %d/%d, held-out %d/%d, held-out round 2 "
              "%d/%d, held-out round 3 %d/%d, held-out round 4 %d/%d, held-out round 5 %d/%d, held-out round 6 %d/%d, "
              "held-out round 7 %d/%d, held-out round 8 %d/%d, held-out round 9 %d/%d, held-out round 10 %d/%d, "
              "held-out round 11 %d/%d, held-out round 12 %d/%d, held-out round 13 %d/%d, held-out round 14 %d/%d, "
              "held-out round 15 %d/%d)\n",
              healthy, healthy_alarmed, split_alarmed[0], split_runs[0], split_alarmed[1], split_runs[1], split_alarmed[2],
              split_runs[2], split_alarmed[3], split_runs[3], split_alarmed[4], split_runs[4], split_alarmed[5],
              split_runs[5], split_alarmed[6], split_runs[6], split_alarmed[7], split_runs[7], split_alarmed[8],
              split_runs[8], split_alarmed[9], split_runs[9], split_alarmed[10], split_runs[10], split_alarmed[11],
              split_runs[11], split_alarmed[12], split_runs[12], split_alarmed[13], split_runs[13], split_alarmed[14],
              split_runs[14], split_alarmed[15], split_runs[15]);
  std::printf("fair faulted runs %d of %d: recall %.3f, right question %.3f, top-1 localization %.3f (%d/%d), median steps "
              "to detect %.1f, recall by split: calibration %.3f (%d/%d), held-out %.3f (%d/%d), held-out round 2 %.3f "
              "(%d/%d), held-out round 3 %.3f (%d/%d), held-out round 4 %.3f (%d/%d), held-out round 5 %.3f (%d/%d), "
              "held-out round 6 %.3f (%d/%d), held-out round 7 %.3f (%d/%d), held-out round 8 %.3f (%d/%d), "
              "held-out round 9 %.3f (%d/%d), held-out round 10 %.3f (%d/%d), held-out round 11 %.3f (%d/%d), "
              "held-out round 12 %.3f (%d/%d), held-out round 13 %.3f (%d/%d), held-out round 14 %.3f (%d/%d), "
              "held-out round 15 %.3f (%d/%d); findings "
              "before the onset in faulted runs: %d\n",
              fair_runs, faulted, recall, right_q, top1, located, with_layer, med, split_recall[0], split_detected[0],
              split_fair[0], held_recall, split_detected[1], split_fair[1], held2_recall, split_detected[2], split_fair[2],
              held3_recall, split_detected[3], split_fair[3], held4_recall, split_detected[4], split_fair[4], held5_recall,
              split_detected[5], split_fair[5], held6_recall, split_detected[6], split_fair[6], held7_recall,
              split_detected[7], split_fair[7], held8_recall, split_detected[8], split_fair[8], held9_recall,
              split_detected[9], split_fair[9], held10_recall, split_detected[10], split_fair[10], held11_recall,
              split_detected[11], split_fair[11], held12_recall, split_detected[12], split_fair[12], held13_recall,
              split_detected[13], split_fair[13], held14_recall, split_detected[14], split_fair[14], held15_recall,
              split_detected[15], split_fair[15], before_onset);
  const int warned_fair = static_cast<int>(steps_to_warning.size());
  const double warned_recall = fair_runs ? static_cast<double>(warned_fair) / fair_runs : 0.0;
  const double med_warning = examples::median(steps_to_warning);
  std::printf("fair faulted runs with a warning or above from the onset on (not only a finding awaiting its consequence): "
              "%d of %d (%.3f), median steps to that warning %.1f\n",
              warned_fair, fair_runs, warned_recall, med_warning);
  if (!gated.empty()) {
    std::printf("fair faults first found by a claim waiting for its consequence, by that claim's detector: runs, how "
                "many reached a warning (from any detector) within the run, median steps from the claim to it\n");
    for (const auto& [detector, g] : gated) {
      char delay[32] = "-";
      if (!g.steps.empty()) std::snprintf(delay, sizeof delay, "%.1f steps", examples::median(g.steps));
      std::printf("  %-28s %3d found at info, %3d warned, median delay %s\n", detector.c_str(), g.found, static_cast<int>(g.steps.size()), delay);
    }
  }
  std::printf("wall time %.1f s with %d job(s)\n", wall, s.jobs);
  if (zoo::entropy_flags.gap) {
    const auto& g = zoo::entropy_gaps;
    for (const auto* p : {&g.healthy, &g.faulted}) {
      std::printf("entropy sampling in %s runs, a row in %u at each offset against every row: %llu tensor-steps, "
                  "largest |difference| of the mean normalized entropy %.4f (every row's mean there %.4f); %llu "
                  "tensor-steps with every row's mean below 0.3, largest difference there %.4f; lowest mean %.4f; %llu "
                  "tensor-steps where an offset falls on the other side of attention_collapse's 0.1\n",
                  p == &g.healthy ? "healthy" : "faulted", zoo::entropy_flags.row_stride, static_cast<unsigned long long>(p->tensor_steps),
                  p->largest, p->full_at_largest, static_cast<unsigned long long>(p->low), p->largest_low, p->lowest,
                  static_cast<unsigned long long>(p->disagreements));
    }
  }
  std::printf("{\"bench\":\"zoo\",\"quick\":%s,\"cpu\":%s,\"hardware_threads\":%u,\"families\":%d,"
              "\"healthy_runs\":%d,\"healthy_false_alarms\":%d,\"calibration_healthy_runs\":%d,\"calibration_healthy_false_alarms\":%d,\"heldout_healthy_runs\":%d,"
              "\"heldout_healthy_false_alarms\":%d,\"heldout2_healthy_runs\":%d,\"heldout2_healthy_false_alarms\":%d,"
              "\"heldout3_healthy_runs\":%d,\"heldout3_healthy_false_alarms\":%d,"
              "\"heldout4_healthy_runs\":%d,\"heldout4_healthy_false_alarms\":%d,"
              "\"heldout5_healthy_runs\":%d,\"heldout5_healthy_false_alarms\":%d,"
              "\"heldout6_healthy_runs\":%d,\"heldout6_healthy_false_alarms\":%d,"
              "\"heldout7_healthy_runs\":%d,\"heldout7_healthy_false_alarms\":%d,"
              "\"heldout8_healthy_runs\":%d,\"heldout8_healthy_false_alarms\":%d,"
              "\"heldout9_healthy_runs\":%d,\"heldout9_healthy_false_alarms\":%d,"
              "\"heldout10_healthy_runs\":%d,\"heldout10_healthy_false_alarms\":%d,"
              "\"heldout11_healthy_runs\":%d,\"heldout11_healthy_false_alarms\":%d,"
              "\"heldout12_healthy_runs\":%d,\"heldout12_healthy_false_alarms\":%d,"
              "\"heldout13_healthy_runs\":%d,\"heldout13_healthy_false_alarms\":%d,"
              "\"heldout14_healthy_runs\":%d,\"heldout14_healthy_false_alarms\":%d,"
              "\"heldout15_healthy_runs\":%d,\"heldout15_healthy_false_alarms\":%d,"
              "\"faulted_runs\":%d,\"fair_faulted_runs\":%d,\"recall\":%.4f,"
              "\"right_question\":%.4f,\"localization_top1\":%.4f,\"median_steps_to_detect\":%.1f,\"heldout_recall\":%.4f,"
              "\"heldout2_recall\":%.4f,\"heldout3_recall\":%.4f,\"heldout4_recall\":%.4f,\"heldout5_recall\":%.4f,"
              "\"heldout6_recall\":%.4f,\"heldout7_recall\":%.4f,\"heldout8_recall\":%.4f,\"heldout9_recall\":%.4f,"
              "\"heldout10_recall\":%.4f,\"heldout11_recall\":%.4f,\"heldout12_recall\":%.4f,\"heldout13_recall\":%.4f,"
              "\"heldout14_recall\":%.4f,\"heldout15_recall\":%.4f,\"warned_recall\":%.4f,\"median_steps_to_warning\":%.1f,%s}\n",
              s.quick ? "true" : "false", cpu_json.c_str(), hw_threads, static_cast<int>(zoo::families.size()),
              healthy, healthy_alarmed, split_runs[0], split_alarmed[0], split_runs[1], split_alarmed[1], split_runs[2],
              split_alarmed[2], split_runs[3], split_alarmed[3], split_runs[4], split_alarmed[4], split_runs[5],
              split_alarmed[5], split_runs[6], split_alarmed[6], split_runs[7], split_alarmed[7], split_runs[8],
              split_alarmed[8], split_runs[9], split_alarmed[9], split_runs[10], split_alarmed[10], split_runs[11],
              split_alarmed[11], split_runs[12], split_alarmed[12], split_runs[13], split_alarmed[13], split_runs[14],
              split_alarmed[14], split_runs[15], split_alarmed[15], faulted, fair_runs,
              recall, right_q, top1, med, held_recall, held2_recall, held3_recall, held4_recall, held5_recall,
              held6_recall, held7_recall, held8_recall, held9_recall, held10_recall, held11_recall, held12_recall,
              held13_recall, held14_recall, held15_recall, warned_recall, med_warning, first_contact_json().c_str());
  std::fflush(stdout);
  if (!s.check) return 0;
  const bool met = healthy_alarmed == 0 && recall >= 0.95 && right_q >= 0.9 && (with_layer == 0 || top1 >= 0.9) &&
                   med <= 10.0 && not_trained.empty();
  if (!met) std::printf("mldiag: a target is missed (see the tables above)\n");
  return met ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
