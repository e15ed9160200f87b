// SPDX-License-Identifier: Apache-2.0
/// Planted faults for the examples: what each one breaks, when, where, and which question of
/// the method it belongs to; the options every example takes; what a run reports back.
/// Shared by the examples, the fault suite and the overhead benchmark.
#pragma once

#include <mldiag/vocab/finding.hpp>
#include <mldiag/monitor.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace examples {

/// One fault at a time. `none` is a healthy run.
enum class fault {
  none,
  lr_100x,                ///< learning rate times 100 from the onset
  lr_zero,                ///< learning rate 0 from the onset
  bad_init,               ///< every weight initialized 1000x too small (vanishing signal)
  nan_grad,               ///< one NaN written into one layer's gradient at the onset
  dead_relu,              ///< one layer's bias pushed far negative: its ReLUs die
  labels_shuffled,        ///< targets replaced by random ones (the data pipeline's bug)
  wrong_loss,             ///< softmax applied twice: probabilities fed to cross-entropy
  attention_temperature,  ///< one layer's attention scores times 50 (entropy collapse)
  router_collapse,        ///< one MoE router biased onto a single expert
  embedding_lr_100x,      ///< the embedding's learning rate times 100
  residual_scale,         ///< one block's residual branch times 30
  frozen_layer,           ///< one layer left out of the optimizer
  input_starvation,       ///< data loading sleeps far longer than a step
  slow_layer,             ///< one layer's forward made slow
};

struct fault_info {
  fault id;
  std::string_view name;
  /// The question of the method this fault's symptom belongs to (docs/accuracy.md says why).
  mldiag::question expected;
  /// Faults that are bugs present from the first step start there; events start mid-run.
  bool from_start;
  /// Whether the fault lives in one layer (which the suite then checks the location against).
  bool has_layer;
};

inline constexpr fault_info fault_table[] = {
    {fault::none, "none", mldiag::question::convergence, false, false},
    {fault::lr_100x, "lr_100x", mldiag::question::convergence, false, false},
    {fault::lr_zero, "lr_zero", mldiag::question::convergence, false, false},
    {fault::bad_init, "bad_init", mldiag::question::convergence, true, false},
    {fault::nan_grad, "nan_grad", mldiag::question::convergence, false, true},
    {fault::dead_relu, "dead_relu", mldiag::question::convergence, false, true},
    {fault::labels_shuffled, "labels_shuffled", mldiag::question::convergence, true, false},
    {fault::wrong_loss, "wrong_loss", mldiag::question::convergence, true, false},
    {fault::attention_temperature, "attention_temperature", mldiag::question::early_anomaly, false, true},
    {fault::router_collapse, "router_collapse", mldiag::question::early_anomaly, false, true},
    {fault::embedding_lr_100x, "embedding_lr_100x", mldiag::question::early_anomaly, false, true},
    {fault::residual_scale, "residual_scale", mldiag::question::early_anomaly, false, true},
    {fault::frozen_layer, "frozen_layer", mldiag::question::convergence, false, true},
    {fault::input_starvation, "input_starvation", mldiag::question::efficiency, false, false},
    {fault::slow_layer, "slow_layer", mldiag::question::efficiency, false, true},
};

[[nodiscard]] inline const fault_info& info(fault f) {
  for (const auto& i : fault_table)
    if (i.id == f) return i;
  return fault_table[0];
}

[[nodiscard]] inline std::optional<fault> parse_fault(std::string_view name) {
  for (const auto& i : fault_table)
    if (i.name == name) return i.id;
  return std::nullopt;
}

[[nodiscard]] inline std::string fault_names() {
  std::string s;
  for (const auto& i : fault_table) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

/// What every example takes on its command line.
struct run_options {
  fault planted = fault::none;
  std::int64_t onset = -1;  ///< -1: the fault's default (0 from the start, else steps / 3)
  std::uint64_t seed = 1;
  std::int64_t steps = 300;
  bool verbose = false;
  bool moe = true;  ///< transformer: mixture-of-experts feed-forward in odd blocks
  std::string data;  ///< a data file where the example reads one ("" = its default)
  /// Experiments change one variable: the learning rate (times this) or the planted fault's
  /// magnitude (dead_relu: the bias shift, 50; attention_temperature: the score factor, 50;
  /// NaN = the fault's default).
  double lr_scale = 1.0;
  /// Called after each step's end_step() with the monitor and that step's findings (a report
  /// writer, a progress line).
  std::function<void(std::int64_t, const mldiag::monitor&, std::span<const mldiag::finding>)> on_step;
  double fault_magnitude = std::numeric_limits<double>::quiet_NaN();
  /// Step and layer times from `synthetic_clock` instead of the steady clock, and the timing
  /// faults added to them instead of slept or spun: a test that reads timing detectors then
  /// cannot be decided by a loaded machine (issue 15). Real time stays for the benchmarks and
  /// for a person's runs.
  bool synthetic_time = false;
  [[nodiscard]] double magnitude(double default_value) const {
    return fault_magnitude == fault_magnitude ? fault_magnitude : default_value;
  }

  [[nodiscard]] std::int64_t onset_step() const {
    if (onset >= 0) return onset;
    return info(planted).from_start ? 0 : steps / 3;
  }
  [[nodiscard]] bool active(std::int64_t step) const { return planted != fault::none && step >= onset_step(); }
  [[nodiscard]] bool active(fault f, std::int64_t step) const { return planted == f && step >= onset_step(); }
};

/// A finding as the run saw it: the step whose end_step() returned it.
struct seen_finding {
  std::int64_t step;
  mldiag::finding f;
};

/// What a run reports back to the suite.
struct run_result {
  std::string example;
  run_options options;
  std::string planted_layer;  ///< "" when the fault has no layer
  std::vector<seen_finding> findings;  ///< severity warning and above, and early signals at info, in order
  std::vector<double> losses;
  double seconds_per_step = 0.0;
  double monitor_seconds_per_step = 0.0;  ///< what the monitor's calls cost, per step
};

/// Keeps the findings the targets count: severity warning and above, and early signals at info
/// (finding::awaits_consequence: they appear at once, and become warnings with a consequence or
/// a persistence; verdict.hpp counts them as found, never as false alarms).
inline void keep(run_result& r, std::int64_t step, std::span<const mldiag::finding> fs) {
  for (const auto& f : fs)
    if (f.severity >= mldiag::severity::warning || f.awaits_consequence) r.findings.push_back({step, f});
}

/// Ends a run's step: the monitor's end_step(), the findings kept, the step hook, the loss.
inline void close_step(run_result& r, const run_options& o, mldiag::monitor& mon, std::int64_t step, double loss) {
  const auto found = mon.end_step();
  keep(r, step, found);
  if (o.on_step) o.on_step(step, mon, found);
  r.losses.push_back(loss);
}

/// The per-step times of a run that took `total` seconds, `monitor` of them in the monitor.
inline void finish(run_result& r, double total, double monitor) {
  const auto steps = static_cast<double>(r.losses.empty() ? 1 : r.losses.size());
  r.seconds_per_step = (total - monitor) / steps;
  r.monitor_seconds_per_step = monitor / steps;
}

/// Parses the flags every example shares; unknown flags are errors that list the known ones.
inline run_options parse_options(int argc, char** argv, std::string_view program) {
  run_options o;
  auto usage = [&](const std::string& why) {
    std::fprintf(stderr,
                 "mldiag: %s\nusage: %.*s [--fault NAME] [--onset STEP] [--seed N] [--steps N] [--data FILE] "
                 "[--no-moe] [--verbose]\nfaults: %s\n",
                 why.c_str(), static_cast<int>(program.size()), program.data(), fault_names().c_str());
    std::exit(2);
  };
  auto number = [&](const char* flag, const char* text) -> std::int64_t {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 0) usage(std::string(flag) + " wants a whole number >= 0, not '" + text + "'");
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--verbose") o.verbose = true;
    else if (a == "--no-moe") o.moe = false;
    else if (a == "--help" || a == "-h") usage("help");
    else if (!has_value) usage("flag " + std::string(a) + " needs a value (or is unknown)");
    else if (a == "--fault") {
      const auto f = parse_fault(argv[++i]);
      if (!f) usage(std::string("no fault named '") + argv[i] + "'");
      o.planted = *f;
    } else if (a == "--onset") o.onset = number("--onset", argv[++i]);
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(number("--seed", argv[++i]));
    else if (a == "--steps") o.steps = number("--steps", argv[++i]);
    else if (a == "--data") o.data = argv[++i];
    else usage("unknown flag " + std::string(a));
  }
  if (o.steps < 1) usage("--steps must be at least 1");
  return o;
}

/// The input-starvation fault's loader: a sleep twice as long as the step itself took before
/// the onset (a slow disk, a loader with no workers).
inline void starve_input(double step_seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(2.0 * step_seconds));
}

/// The slow-layer fault: the layer spins for as long as a whole step took before the onset
/// (a missing fused kernel, a debug path left on), so the step takes twice as long and that
/// layer holds half of it or more. Spinning rather than sleeping: it is compute the step pays
/// for.
inline void slow_down_layer(double step_seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(step_seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// The synthetic clock of `run_options::synthetic_time`: every step takes the same nominal
/// phase times (a 3.6 ms step), and the timing faults add what a real run would feel — the
/// starved loader waits twice a step, the slow layer takes a whole step more.
struct synthetic_clock {
  static constexpr double data_wait = 0.1e-3, forward = 1.0e-3, backward = 2.0e-3, optimizer = 0.5e-3;
  static constexpr double step = data_wait + forward + backward + optimizer;
  [[nodiscard]] static mldiag::step_timings timings(bool starving, bool slow_layer) {
    mldiag::step_timings t;
    t.data_wait = data_wait + (starving ? 2.0 * step : 0.0);
    t.forward = forward + (slow_layer ? step : 0.0);
    t.backward = backward;
    t.optimizer = optimizer;
    t.total = *t.data_wait + *t.forward + *t.backward + *t.optimizer;
    return t;
  }
  /// One of `layers` timed layers' forward time.
  [[nodiscard]] static double layer(std::size_t layers, bool slow) {
    return forward / static_cast<double>(layers) + (slow ? step : 0.0);
  }
};

/// The running mean of a run's step time before the onset, which the timing faults scale
/// from (so they mean the same on a fast and a slow machine).
struct time_baseline {
  double step = 0.0;
  std::int64_t n = 0;
  void add(double step_seconds) {
    ++n;
    step += (step_seconds - step) / static_cast<double>(n);
  }
};

/// Seconds since `t0`.
[[nodiscard]] inline double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The finding lines a person reads in an example's output.
inline void print_finding(std::FILE* out, const seen_finding& s) {
  std::fprintf(out, "  step %4lld  %-8s %-16s %s", static_cast<long long>(s.step),
               std::string(mldiag::name(s.f.severity)).c_str(), std::string(mldiag::name(s.f.question)).c_str(),
               s.f.symptom.c_str());
  if (!s.f.where.empty()) std::fprintf(out, "  at %s", s.f.where.front().first.c_str());
  for (std::size_t i = 0; i < s.f.evidence.size() && i < 3; ++i)
    std::fprintf(out, "  %s=%.4g", s.f.evidence[i].first.c_str(), s.f.evidence[i].second);
  std::fputc('\n', out);
}

/// What an example's main prints after its run.
inline void print_run(const run_result& r) {
  if (!r.planted_layer.empty()) std::printf("planted in layer: %s\n", r.planted_layer.c_str());
  for (std::size_t i = 0; i < r.losses.size(); i += r.losses.size() / 10 + 1) std::printf("step %4zu  loss %.4f\n", i, r.losses[i]);
  std::printf("final loss %.4f; %.3f ms/step training, %.3f ms/step monitor\n", r.losses.back(), 1e3 * r.seconds_per_step,
              1e3 * r.monitor_seconds_per_step);
  std::printf("findings (warning and above): %zu\n", r.findings.size());
  for (const auto& f : r.findings) print_finding(stdout, f);
}

}  // namespace examples
