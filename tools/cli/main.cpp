// SPDX-License-Identifier: Apache-2.0
// The mldiag command-line tool: offline diagnosis of the files people already have.
//   mldiag scan LOG...            Q1/Q2 detectors over a training log's scalar series
//   mldiag stats CHECKPOINT...    per-tensor statistics of .safetensors / .npy / .npz
//   mldiag diff A B               per-tensor drift between two checkpoints
//   mldiag report RUN.jsonl       the self-contained HTML report of a monitor's JSON Lines
//   mldiag compare REF TEST       the first divergent layer of an inference engine against a reference
//   mldiag detectors              the detector catalogue as a Markdown table
// Exit codes: 0 nothing at warning or above, 1 something was, 2 bad input or usage
// (docs/cli.md).
#include "cli/checkpoint.hpp"
#include "cli/checkpoint_diff.hpp"
#include "cli/checkpoint_stats.hpp"
#include "cli/compare.hpp"
#include "cli/json_out.hpp"
#include "cli/logs.hpp"
#include "cli/scan.hpp"

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/describe.hpp"
#include "mldiag/report/episodes.hpp"
#include "mldiag/report/html.hpp"
#include "mldiag/report/jsonl.hpp"
#include "mldiag/report/text.hpp"
#include "mldiag/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace r = mldiag::report;
using mldiag::cli::json_out;

constexpr int exit_clean = 0, exit_found = 1, exit_bad = 2;

// A usage error: printed with a pointer to --help, exit code 2.
struct usage_error : mldiag::error {
  using mldiag::error::error;
};

constexpr std::string_view main_help = R"(mldiag — diagnose a training run from the files you already have

usage: mldiag <command> [options] [--json]

commands:
  scan LOG...             run the Q1/Q2 detectors over a training log's loss, validation loss,
                          gradient norm, learning rate and loss scale (CSV, JSON Lines,
                          trainer_state.json, Megatron/DeepSpeed text logs, TensorBoard events)
  stats CHECKPOINT...     per-tensor statistics of .safetensors, .npy and .npz files
  diff A B                per-tensor drift from checkpoint A to checkpoint B
  report RUN.jsonl        the HTML report of a monitor's JSON Lines (-o FILE)
  compare REF TEST        the first layer where an inference engine diverges from a reference,
                          and why, from two fingerprint files or two activation dumps
  detectors               every detector of the catalogue with its symptoms and defaults, as a
                          Markdown table (the one in docs/detectors.md)

every command:
  --json                  one JSON document on stdout (schema: docs/cli.md)
  --help                  the command's options and examples

exit codes: 0 nothing of severity warning or above found, 1 something was, 2 bad input or usage

examples:
  mldiag scan train_log.csv
  mldiag scan --json runs/llama/trainer_state.json | jq '.runs[0].findings'
  mldiag stats model.safetensors
  mldiag diff step1000.safetensors step2000.safetensors
  mldiag report run.jsonl -o report.html
  mldiag compare fp32.fingerprints.jsonl bf16.fingerprints.jsonl
)";

constexpr std::string_view scan_help = R"(usage: mldiag scan [options] LOG...

Runs mldiag's Q1/Q2 detectors (divergence, loss spikes, exploding gradients, plateaus,
oscillation, non-finite values, learning-rate sanity, loss-scale collapse, ...) over a
training log and prints the findings, grouped by question: one entry per episode (the
deliveries of one symptom at one place, at most 1000 steps apart) with its steps, count and peak.

Formats (detected from the content, then the extension):
  csv          a header line; columns step/iteration/iter, loss/train_loss/lm_loss, val_loss,
               grad_norm, lr/learning_rate, loss_scale (case-insensitive)
  jsonl        one JSON object per line with the same names (NaN/Infinity bare or as the
               strings "NaN", "Infinity", "-Infinity")
  hf           Hugging Face trainer_state.json (its log_history)
  megatron     Megatron-LM / Megatron-DeepSpeed text logs ("iteration N/ M | ... lm loss: X |")
  tensorboard  TensorBoard event files (events.out.tfevents.*), or a folder of them; a last
               record still being written is left out, with a note

options:
  --format F               force a format (csv, jsonl, hf, megatron, tensorboard)
  --column NAME=COLUMN     read metric NAME (loss, val_loss, grad_norm, lr, loss_scale) from
                           COLUMN, key or TensorBoard tag (repeatable); a log with none of
                           loss, val_loss, grad_norm is refused with its names listed
  --step-column COLUMN     the step column
  --group-by COLUMN        one run per value of a text column (e.g. several runs in one CSV)
  --all                    also list findings of severity info
  --json                   one JSON document on stdout

declarations (docs/declarations.md):
  --objective KIND         minimized (the default): the loss falls toward a floor;
                           not_progress: adversarial, policy-gradient or any surrogate loss,
                           progress is read from --metric columns instead
  --metric NAME:higher     column NAME is a progress metric (return, accuracy); :lower when
                           lower is better (repeatable)
  --event STEP:KIND        a change made on purpose at STEP: data, fine_tuning, unfreezing,
                           optimizer; baselines restart there (repeatable)
  --classes N              the classes of a cross-entropy loss (its chance level is ln N)
  --chance-loss X          the loss of an uninformed model when it is not ln(classes)
  --loss-floor X           the lowest loss the objective can reach (label smoothing, mixup);
                           none: no lower bound (learned uncertainty weights)
  --validation-unlike-training
                           validation is drawn unlike training: judge the gap's trend

examples:
  mldiag scan train.csv
  mldiag scan --objective not_progress --metric return:higher ppo.csv
  mldiag scan --event 3000:data --event 9000:fine_tuning curriculum.jsonl
  mldiag scan --column loss=train/loss_avg --step-column global_step metrics.csv
  mldiag scan --group-by section bigscience_spike_excerpts.csv
  mldiag scan --json logs/ | jq '.runs[].findings[] | select(.severity == "critical")'
)";

constexpr std::string_view stats_help = R"(usage: mldiag stats [options] CHECKPOINT...

Per-tensor statistics of .safetensors (F64, F32, F16, BF16, F8_E4M3, F8_E5M2 and integer
dtypes), .npy and .npz files: count, NaN, +Inf, -Inf, zeros, finite min/max/max|x|, mean,
std and L2 norm. The file is memory-mapped and read once, in parallel: a 10 GB checkpoint
needs far less than 10 GB of memory. A tensor with a NaN or Inf is reported (exit code 1).

options:
  --threads N              worker threads (default: the machine's cores)
  --json                   one JSON document on stdout

examples:
  mldiag stats model.safetensors
  mldiag stats --json activations.npz | jq '.files[0].tensors[] | select(.nan > 0) | .name'
)";

constexpr std::string_view diff_help = R"(usage: mldiag diff [options] A B

Per-tensor drift from checkpoint A to checkpoint B: ||B-A|| / ||A||, max |B-A|, and the
tensors added, removed or reshaped. Both files are memory-mapped and compared in parallel.

options:
  --threads N              worker threads (default: the machine's cores)
  --top K                  list the K tensors that moved most (default 20; 0 = all)
  --json                   one JSON document on stdout (every tensor)

examples:
  mldiag diff init.safetensors step5000.safetensors
  mldiag diff --json a.npz b.npz | jq '.tensors | sort_by(-.relative_change) | .[0]'
)";

constexpr std::string_view report_help = R"(usage: mldiag report [options] RUN.jsonl

Writes the self-contained HTML report (loss curve with the findings marked, per-layer
gradient-norm heatmap, findings with their evidence, the diagnosis log) of the JSON Lines a
monitor wrote (mldiag::report::jsonl_sink; docs/formats.md). The page has no script and
loads nothing from the network: open it from disk.

options:
  -o, --output FILE        where to write (default: RUN.html beside RUN.jsonl)
  --title TEXT             the page title (default: the run's own)
  --json                   print a JSON summary instead of text

examples:
  mldiag report build/demo/run.jsonl -o report.html
)";

// ---------------------------------------------------------------------------------------------
// Arguments

struct args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // --name value (value "" for flags)
  bool json = false, help = false;

  [[nodiscard]] std::optional<std::string> get(std::string_view name) const {
    std::optional<std::string> v;
    for (const auto& [k, val] : options)
      if (k == name) v = val;
    return v;
  }
  [[nodiscard]] bool flag(std::string_view name) const {
    return std::any_of(options.begin(), options.end(), [&](const auto& o) { return o.first == name; });
  }
};

// Parses `argv[first..]`: flags in `flags`, options with a value in `valued`.
args parse_args(int argc, char** argv, int first, std::initializer_list<std::string_view> valued,
                std::initializer_list<std::string_view> flags) {
  args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--json") a.json = true;
    else if (s == "--help" || s == "-h") a.help = true;
    else if (s.size() > 1 && s[0] == '-') {
      std::string name = s, value;
      if (const auto eq = s.find('='); eq != std::string::npos && s.rfind("--", 0) == 0) {
        name = s.substr(0, eq);
        value = s.substr(eq + 1);
        if (std::find(valued.begin(), valued.end(), name) == valued.end())
          throw usage_error("unknown option " + name + "; see --help");
        a.options.emplace_back(name, value);
        continue;
      }
      if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
        a.options.emplace_back(name, "");
      } else if (std::find(valued.begin(), valued.end(), name) != valued.end()) {
        if (i + 1 >= argc) throw usage_error(name + " needs a value; see --help");
        a.options.emplace_back(name, argv[++i]);
      } else {
        throw usage_error("unknown option " + name + "; see --help");
      }
    } else {
      a.positional.push_back(std::move(s));
    }
  }
  return a;
}

unsigned parse_count(const std::string& text, std::string_view option, unsigned min, unsigned max) {
  unsigned v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max)
    throw usage_error(fmt::format("{} {}: expected a whole number from {} to {}", option, text, min, max));
  return v;
}

unsigned threads_option(const args& a) {
  if (const auto t = a.get("--threads")) return parse_count(*t, "--threads", 1, 1024);
  return std::max(1u, std::thread::hardware_concurrency());
}

void print_json(const json_out& j) { fmt::print("{}\n", j.str()); }

// A command's exit code: whether it found something of severity warning or above.
int exit_code(bool found) { return found ? exit_found : exit_clean; }

// Closes a command's JSON document (its last array still open) with the exit code, prints it
// and returns the code.
int finish_json(json_out& j, bool found) {
  j.end_array().member("exit_code", exit_code(found)).end_object();
  print_json(j);
  return exit_code(found);
}

// A command's --help: its text on stdout, exit code 0.
int print_help(std::string_view text) {
  fmt::print("{}", text);
  return exit_clean;
}

// ---------------------------------------------------------------------------------------------
// Findings, shared by scan and report

void finding_json(json_out& j, const r::finding_group& g) {
  const auto& f = g.f;
  j.begin_object()
      .member("question", static_cast<int>(f.question))
      .member("question_name", mldiag::name(f.question))
      .member("symptom", f.symptom)
      .member("severity", mldiag::name(f.severity))
      .member("first_step", static_cast<std::int64_t>(f.first_step))
      .member("last_step", static_cast<std::int64_t>(f.last_step))
      .member("reported", static_cast<std::uint64_t>(g.deliveries));
  j.key("location").begin_array();
  for (const auto& [name, score] : f.where) j.begin_object().member("name", name).member("score", score).end_object();
  j.end_array();
  j.key("evidence").begin_object();
  for (const auto& [k, v] : f.evidence) j.member(k, v);
  j.end_object();
  j.member("detector", f.detector).end_object();
}

// An episode (report/episodes.hpp): what the text report lists, one object per episode.
void episode_json(json_out& j, const r::episode& e) {
  j.begin_object()
      .member("question", static_cast<int>(e.question))
      .member("symptom", e.symptom)
      .member("place", e.place)
      .member("severity", mldiag::name(e.severity()))
      .member("first_step", e.first_step)
      .member("last_step", e.last_step)
      .member("deliveries", static_cast<std::uint64_t>(e.count))
      .member("peak_step", e.peak_delivered);
  j.key("places").begin_array();
  for (const auto& p : e.places) j.value(p);
  j.end_array();
  j.key("evidence").begin_object();
  for (const auto& [k, v] : e.peak.evidence) j.member(k, v);
  j.end_object();
  j.member("detector", e.peak.detector).end_object();
}

bool any_warning(const std::vector<r::finding_group>& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.f.severity >= mldiag::severity::warning; });
}

// ---------------------------------------------------------------------------------------------
// scan

// A number given to an option, whole and finite.
double parse_number(const std::string& text, std::string_view option) {
  double v = 0.0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
    throw usage_error(fmt::format("{} {}: expected a finite number", option, text));
  return v;
}

// scan's declarations (--objective, --metric, --event, --classes, --chance-loss, --loss-floor,
// --validation-unlike-training) as the monitor takes them.
mldiag::cli::scan_options scan_declarations(const args& a) {
  mldiag::cli::scan_options d;
  if (const auto o = a.get("--objective")) {
    const auto kind = mldiag::objective_named(*o);
    if (!kind) throw usage_error("--objective " + *o + ": expected minimized or not_progress");
    d.task.objective = *kind;
  }
  if (const auto c = a.get("--classes")) d.task.classes = parse_count(*c, "--classes", 2, 100000000);
  if (const auto c = a.get("--chance-loss")) {
    d.task.chance_loss = parse_number(*c, "--chance-loss");
    if (!(*d.task.chance_loss > 0.0)) throw usage_error("--chance-loss " + *c + ": expected a positive loss (ln(batch) for an in-batch contrastive loss)");
  }
  if (const auto f = a.get("--loss-floor")) {
    // "none": a loss without a lower bound (learned uncertainty weights); the level-ratio checks stand aside.
    double v = 0.0;
    const auto [p, ec] = std::from_chars(f->data(), f->data() + f->size(), v);
    if (*f != "none" && (ec != std::errc() || p != f->data() + f->size() || !std::isfinite(v)))
      throw usage_error("--loss-floor " + *f + ": expected a finite loss, or none for a loss without a lower bound");
    d.task.loss_floor = *f == "none" ? mldiag::no_lower_bound : v;
  }
  d.task.validation_unlike_training = a.flag("--validation-unlike-training");
  for (const auto& [k, v] : a.options) {
    const auto colon = v.rfind(':');
    if (k == "--metric") {
      const std::string way = colon == std::string::npos ? "" : v.substr(colon + 1);
      if (colon == std::string::npos || colon == 0 || (way != "higher" && way != "lower"))
        throw usage_error("--metric " + v + ": expected NAME:higher or NAME:lower, e.g. --metric return:higher");
      d.metrics.emplace_back(v.substr(0, colon), way == "higher");
    } else if (k == "--event") {
      const auto kind = colon == std::string::npos ? std::nullopt : mldiag::change_named(v.substr(colon + 1));
      std::int64_t step = -1;
      const char* end = v.data() + (colon == std::string::npos ? 0 : colon);
      const auto [p, ec] = std::from_chars(v.data(), end, step);
      if (!kind || ec != std::errc() || p != end || step < 0)
        throw usage_error("--event " + v + ": expected STEP:KIND with KIND one of data, fine_tuning, unfreezing, optimizer, "
                          "e.g. --event 3000:data");
      d.events.emplace_back(step, *kind);
    }
  }
  return d;
}

int scan_command(const args& a) {
  if (a.help) return print_help(scan_help);
  if (a.positional.empty()) throw usage_error("scan needs a log file; see mldiag scan --help");
  mldiag::cli::log_options o;
  if (const auto f = a.get("--format")) o.format = *f;
  if (const auto s = a.get("--step-column")) o.step_column = *s;
  if (const auto g = a.get("--group-by")) o.group_by = *g;
  for (const auto& [k, v] : a.options) {
    if (k != "--column") continue;
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
      throw usage_error("--column " + v + ": expected NAME=COLUMN, e.g. --column loss=train/loss_avg");
    std::string name = v.substr(0, eq);
    if (name == "grad_norm") name = "grad/global_norm";
    o.columns.emplace_back(name, v.substr(eq + 1));
  }
  // A log in which the detectors would find nothing to read is bad input, not a clean run: the
  // reader says which names it has and which --column would map the loss.
  o.need_detector_metric = true;
  const auto min_severity = a.flag("--all") ? mldiag::severity::info : mldiag::severity::warning;
  const mldiag::cli::scan_options declared = scan_declarations(a);

  bool found = false;
  json_out j;
  j.begin_object().member("command", "scan").member("mldiag_version", fmt::format("{}.{}.{}", MLDIAG_VERSION_MAJOR,
                                                                                    MLDIAG_VERSION_MINOR, MLDIAG_VERSION_PATCH));
  j.key("runs").begin_array();
  for (const auto& file : a.positional) {
    std::vector<std::string>
        read_notes;  // what the reader left out (an incomplete last record), first
    for (auto& run : mldiag::cli::read_log(file, o, read_notes)) {
      auto result = mldiag::cli::scan(run, declared);
      result.notes.insert(result.notes.begin(), read_notes.begin(), read_notes.end());
      const auto groups = r::group_findings(result.findings, run.steps);
      found = found || any_warning(groups);
      if (a.json) {
        j.begin_object().member("file", file).member("title", run.title).member("steps", static_cast<std::uint64_t>(result.steps));
        if (!run.steps.empty()) j.member("first_step", run.steps.front()).member("last_step", run.steps.back());
        j.key("metrics").begin_array();
        for (const auto& m : run.metric_names) j.value(m);
        j.end_array();
        j.key("notes").begin_array();
        for (const auto& n : result.notes) j.value(n);
        j.end_array();
        j.key("findings").begin_array();
        for (const auto& g : groups)
          if (g.f.severity >= min_severity) finding_json(j, g);
        j.end_array();
        // The text report's entries: the findings above grouped into episodes.
        j.key("episodes").begin_array();
        for (const auto& e : r::group_episodes(result.findings))
          if (e.severity() >= min_severity) episode_json(j, e);
        j.end_array().end_object();
        continue;
      }
      r::run_log shown;  // the text report of the findings only (the metrics are the user's log)
      shown.title = run.title;
      shown.steps = run.steps;
      shown.findings = result.findings;
      auto text = r::text_report(shown, {.min_severity = min_severity});
      for (const auto& n : result.notes) text += "note: " + n + "\n";
      fmt::print("{}\n", text);
    }
  }
  return a.json ? finish_json(j, found) : exit_code(found);
}

// ---------------------------------------------------------------------------------------------
// report

int report_command(const args& a) {
  if (a.help) return print_help(report_help);
  if (a.positional.size() != 1) throw usage_error("report needs exactly one JSON Lines file; see mldiag report --help");
  const fs::path in = a.positional.front();
  fs::path out = in;
  out.replace_extension(".html");
  if (const auto o = a.get("--output")) out = *o;
  if (const auto o = a.get("-o")) out = *o;
  if (fs::exists(out) && fs::equivalent(out, in)) throw usage_error("report: the output " + out.string() + " is the input; pass -o FILE");
  auto run = r::read_jsonl(in);
  if (const auto t = a.get("--title")) run.title = *t;
  r::write_html(run, out);
  const auto groups = r::group_findings(run.findings, run.steps);
  const bool found = any_warning(groups);
  if (a.json) {
    json_out j;
    j.begin_object().member("command", "report").member("file", in.string()).member("output", out.string());
    j.member("steps", static_cast<std::uint64_t>(run.steps.size()));
    j.key("findings").begin_array();
    for (const auto& g : groups) finding_json(j, g);
    return finish_json(j, found);
  }
  fmt::print("wrote {} ({} steps, {} finding(s), {} diagnosis line(s))\n", out.string(), run.steps.size(), groups.size(),
             run.diagnosis.size());
  return exit_code(found);
}


// ---------------------------------------------------------------------------------------------
// stats

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

void shape_json(json_out& j, std::string_view key, const std::vector<std::uint64_t>& shape) {
  j.key(key).begin_array();
  for (const auto d : shape) j.value(static_cast<std::uint64_t>(d));
  j.end_array();
}

// A tensor with a NaN or an Inf in a checkpoint is a finding of severity critical (the only
// one `stats` makes: everything else is numbers for the user to read).
bool has_non_finite(const mldiag::tensor_stats& s) { return s.non_finite() > 0; }

int stats_command(const args& a) {
  if (a.help) return print_help(stats_help);
  if (a.positional.empty()) throw usage_error("stats needs a checkpoint file; see mldiag stats --help");
  const unsigned threads = threads_option(a);
  bool found = false;
  json_out j;
  j.begin_object().member("command", "stats").key("files").begin_array();
  for (const auto& file : a.positional) {
    const auto ckpt = mldiag::cli::checkpoint::open(file);
    const auto reports = mldiag::cli::checkpoint_stats(ckpt, threads);
    std::uint64_t elements = 0, bad_tensors = 0;
    for (const auto& t : reports) {
      elements += t.stats.count;
      bad_tensors += has_non_finite(t.stats);
    }
    found = found || bad_tensors > 0;
    if (a.json) {
      j.begin_object().member("file", file).member("format", mldiag::cli::format_name(ckpt.format()));
      j.member("tensor_count", static_cast<std::uint64_t>(reports.size())).member("elements", elements);
      j.key("skipped_members").begin_array();
      for (const auto& m : ckpt.skipped_members()) j.value(m);
      j.end_array();
      j.key("tensors").begin_array();
      for (const auto& t : reports) {
        const auto& st = t.stats;
        j.begin_object().member("name", t.name).member("dtype", t.dtype);
        shape_json(j, "shape", t.shape);
        j.member("count", st.count).member("nan", st.nan).member("pos_inf", st.pos_inf).member("neg_inf", st.neg_inf);
        j.member("zeros", st.zeros);
        const bool any_finite = st.finite() > 0;  // extrema and moments describe the finite elements
        if (any_finite) {
          j.member("min", st.min).member("max", st.max).member("max_abs", st.max_abs).member("mean", st.mean());
          j.member("std", st.stddev()).member("l2", st.l2_norm());
        } else {
          for (const auto* k : {"min", "max", "max_abs", "mean", "std"}) j.key(k).value(std::numeric_limits<double>::quiet_NaN());
          j.member("l2", 0.0);
        }
        j.end_object();
      }
      j.end_array().end_object();
      continue;
    }
    fmt::print("{} ({}): {} tensors, {} elements\n", file, mldiag::cli::format_name(ckpt.format()), reports.size(), elements);
    fmt::print("  {:<40} {:<8} {:<18} {:>12} {:>6} {:>6} {:>7} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "tensor", "dtype", "shape",
               "count", "nan", "inf", "zeros", "min", "max", "mean", "std", "l2");
    for (const auto& t : reports) {
      const auto& st = t.stats;
      const double zero_pct = st.count ? 100.0 * static_cast<double>(st.zeros) / static_cast<double>(st.count) : 0.0;
      fmt::print("  {:<40} {:<8} {:<18} {:>12} {:>6} {:>6} {:>6.2f}% {:>11.4g} {:>11.4g} {:>11.4g} {:>11.4g} {:>11.4g}{}\n", t.name, t.dtype,
                 shape_string(t.shape), st.count, st.nan, st.pos_inf + st.neg_inf, zero_pct, st.min, st.max, st.mean(), st.stddev(),
                 st.l2_norm(), has_non_finite(st) ? "   <- NaN/Inf" : "");
    }
    for (const auto& m : ckpt.skipped_members()) fmt::print("  (skipped archive member {}: not a .npy)\n", m);
    if (bad_tensors > 0) fmt::print("critical: {} tensor(s) hold NaN or Inf\n", bad_tensors);
  }
  return a.json ? finish_json(j, found) : exit_code(found);
}

// ---------------------------------------------------------------------------------------------
// diff

int diff_command(const args& a) {
  if (a.help) return print_help(diff_help);
  if (a.positional.size() != 2) throw usage_error("diff needs two checkpoints, A and B; see mldiag diff --help");
  const unsigned threads = threads_option(a);
  const std::size_t top = a.get("--top") ? parse_count(*a.get("--top"), "--top", 0, 1u << 30) : 20;
  const auto ca = mldiag::cli::checkpoint::open(a.positional[0]);
  const auto cb = mldiag::cli::checkpoint::open(a.positional[1]);
  const auto d = mldiag::cli::diff_checkpoints(ca, cb, threads);
  // Findings: a position that is NaN or Inf in either file (critical); tensors added, removed
  // or reshaped (warning: the two files do not hold the same model). Drift itself is a number
  // for the user to judge: how much is too much depends on the steps between the files.
  std::uint64_t non_finite_tensors = 0;
  for (const auto& t : d.common) non_finite_tensors += t.non_finite > 0;
  const bool structural = !d.added.empty() || !d.removed.empty() || !d.reshaped.empty();
  const bool found = non_finite_tensors > 0 || structural;
  if (a.json) {
    json_out j;
    j.begin_object().member("command", "diff").member("a", a.positional[0]).member("b", a.positional[1]);
    j.key("tensors").begin_array();
    for (const auto& t : d.common) {
      j.begin_object().member("name", t.name).member("dtype_a", t.dtype_a).member("dtype_b", t.dtype_b);
      shape_json(j, "shape", t.shape);
      j.member("count", t.count).member("non_finite", t.non_finite).member("norm_a", t.norm_a).member("norm_b", t.norm_b);
      j.member("norm_diff", t.norm_diff).member("relative_change", t.relative).member("max_abs_diff", t.max_abs_diff).end_object();
    }
    j.end_array().key("added").begin_array();
    for (const auto& n : d.added) j.value(n);
    j.end_array().key("removed").begin_array();
    for (const auto& n : d.removed) j.value(n);
    j.end_array().key("reshaped").begin_array();
    for (const auto& rt : d.reshaped) {
      j.begin_object().member("name", rt.name);
      shape_json(j, "shape_a", rt.shape_a);
      shape_json(j, "shape_b", rt.shape_b);
      j.end_object();
    }
    j.end_array().key("uncompared").begin_array();
    for (const auto& u : d.uncompared) j.begin_object().member("name", u.name).member("reason", u.reason).end_object();
    return finish_json(j, found);
  }
  fmt::print("{} -> {}: {} tensors compared, {} added, {} removed, {} reshaped\n", a.positional[0], a.positional[1], d.common.size(),
             d.added.size(), d.removed.size(), d.reshaped.size());
  std::vector<const mldiag::cli::tensor_diff*> order;
  for (const auto& t : d.common) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* x, const auto* y) { return x->relative > y->relative; });
  if (top > 0 && order.size() > top) order.resize(top);
  fmt::print("  {:<40} {:>12} {:>12} {:>12} {:>12} {:>10}\n", "tensor (largest relative change first)", "||B-A||/||A||", "max|B-A|",
             "||A||", "||B||", "non-finite");
  for (const auto* t : order)
    fmt::print("  {:<40} {:>12.4g} {:>12.4g} {:>12.4g} {:>12.4g} {:>10}\n", t->name, t->relative, t->max_abs_diff, t->norm_a, t->norm_b,
               t->non_finite);
  if (top > 0 && d.common.size() > top) fmt::print("  ... {} more (--top 0 lists all)\n", d.common.size() - top);
  for (const auto& n : d.added) fmt::print("warning: added (only in B): {}\n", n);
  for (const auto& n : d.removed) fmt::print("warning: removed (only in A): {}\n", n);
  for (const auto& rt : d.reshaped) fmt::print("warning: reshaped: {} {} -> {}\n", rt.name, shape_string(rt.shape_a), shape_string(rt.shape_b));
  for (const auto& u : d.uncompared) fmt::print("note: not compared: {} ({})\n", u.name, u.reason);
  if (non_finite_tensors > 0) fmt::print("critical: {} tensor(s) have NaN or Inf in A or B\n", non_finite_tensors);
  return exit_code(found);
}


constexpr std::string_view compare_help = R"(usage: mldiag compare [options] REFERENCE TEST

The first layer at which an inference engine (TEST) diverges from a reference (REFERENCE: the
same model in fp32, or another engine), and the likely cause. Both files are fingerprint files
(JSON Lines, written by mldiag::inference::fingerprint_recorder) or both are activation dumps
(.safetensors, .npy, .npz: each floating tensor one tap in file order, its first dimension the
token positions). Rows are matched by request, token position and layer name; a row diverges
when its relative error is past tolerance-factor x the unit roundoff of the two formats.

options:
  --tolerance-factor X     the tolerance in units of the formats' roundoff (default 16)
  --json                   one JSON document on stdout

exit codes: 0 no row diverged, 1 a row diverged, 2 bad input or usage

examples:
  mldiag compare ref.fingerprints.jsonl int8.fingerprints.jsonl
  mldiag compare --json fp32_acts.safetensors fp16_acts.safetensors | jq '.first'
)";

int compare_command(const args& a) {
  if (a.help) return print_help(compare_help);
  if (a.positional.size() != 2) throw usage_error("compare needs two files, REFERENCE and TEST; see mldiag compare --help");
  mldiag::inference::compare_options o;
  if (const auto t = a.get("--tolerance-factor")) {
    o.tolerance_factor = parse_number(*t, "--tolerance-factor");
    if (!(o.tolerance_factor > 0.0)) throw usage_error("--tolerance-factor " + *t + ": expected a positive number");
  }
  const bool ja = mldiag::cli::looks_like_jsonl(a.positional[0]), jb = mldiag::cli::looks_like_jsonl(a.positional[1]);
  if (ja != jb) throw usage_error("compare: one file is a fingerprint file and the other an activation dump; give two of the same kind");
  std::vector<std::string> skipped;
  const auto load = [&](const std::string& p) {
    return ja ? mldiag::cli::read_fingerprints(p) : mldiag::cli::dump_fingerprints(p, skipped);
  };
  const auto ref = load(a.positional[0]);
  const auto test = load(a.positional[1]);
  const auto d = mldiag::inference::compare(ref, test, o);
  const bool found = d.first.has_value();
  if (a.json) {
    json_out j;
    j.begin_object().member("command", "compare").member("reference", a.positional[0]).member("test", a.positional[1]);
    j.member("matched_rows", static_cast<double>(d.matched)).member("unmatched_rows", static_cast<double>(d.unmatched));
    j.member("diverged_rows", static_cast<double>(d.diverged_rows));
    if (d.first) {
      const auto& f = *d.first;
      j.key("first").begin_object().member("layer", f.test.name).member("request", static_cast<double>(f.test.request));
      j.member("position", static_cast<double>(f.test.position)).member("phase", std::string(mldiag::inference::name(f.test.phase)));
      j.member("relative_error", f.relative_error).member("tolerance", f.tolerance).member("cosine", f.cosine);
      j.member("norm_ratio", f.norm_ratio).member("cause", std::string(mldiag::inference::name(d.cause)));
      j.member("explanation", d.explanation).end_object();
    }
    j.key("layers").begin_array();
    for (const auto& l : d.per_layer) {
      j.begin_object().member("layer", l.test.name).member("worst_relative_error", l.relative_error);
      j.member("tolerance", l.tolerance).member("cosine", l.cosine).member("position", static_cast<double>(l.test.position)).end_object();
    }
    return finish_json(j, found);
  }
  fmt::print("{} rows matched ({} unmatched), {} diverged\n", d.matched, d.unmatched, d.diverged_rows);
  fmt::print("  {:<40} {:>14} {:>10} {:>9} {:>9}\n", "layer (forward order)", "worst rel.err", "tolerance", "cosine", "position");
  for (const auto& l : d.per_layer)
    fmt::print("  {:<40} {:>14.4g} {:>10.3g} {:>9.5f} {:>9}{}\n", l.test.name, l.relative_error, l.tolerance, l.cosine, l.test.position,
               l.diverged() ? "  diverged" : "");
  for (const auto& n : skipped) fmt::print("note: not compared (not floating point): {}\n", n);
  if (d.first) {
    const auto& f = *d.first;
    fmt::print("first divergent: {} at {} position {} (request {}): {}\n  {}\n", f.test.name, mldiag::inference::name(f.test.phase),
               f.test.position, f.test.request, mldiag::inference::name(d.cause), d.explanation);
  } else {
    fmt::print("no row diverged\n");
  }
  return exit_code(found);
}
}  // namespace

constexpr std::string_view detectors_help = R"(mldiag detectors — the detector catalogue

usage: mldiag detectors [--json]

Every detector of the default set, in its order: name, question, the symptoms it can raise,
what it finds, and its parameters with their defaults (the names make_detector and
monitor_config::detectors take). Printed as the Markdown table docs/detectors.md holds; with
--json, one JSON document: {"command":"detectors","detectors":[{"name","question","symptoms",
"summary","restarts_on_change","judges_loss_progress","consequence","parameters":[{"name","kind","default"}]}]},
a flag's default true or false. restarts_on_change: a declared change restarts its baselines;
judges_loss_progress: it stands aside when the loss is declared not a progress measure
(docs/declarations.md); consequence: what earns its findings a warning.
)";

int detectors_command(int argc, char** argv) {
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      fmt::print("{}", detectors_help);
      return exit_clean;
    }
    if (a == "--json") json = true;
    else throw usage_error("'detectors' takes --json or --help, not '" + std::string(a) + "' (mldiag detectors --help)");
  }
  namespace det = mldiag::detectors;
  if (!json) {
    fmt::print("{}", det::describe_markdown(det::all_detectors{}));
    return exit_clean;
  }
  json_out j;
  j.begin_object().member("command", "detectors").key("detectors").begin_array();
  for (const det::detector_description& d : det::describe(det::all_detectors{})) {
    j.begin_object().member("name", d.name).member("question", static_cast<double>(d.question)).key("symptoms").begin_array();
    for (const std::string_view s : d.symptoms) j.value(s);
    j.end_array().member("summary", d.summary).member("restarts_on_change", d.traits.restarts_on_change);
    j.member("judges_loss_progress", d.traits.judges_loss_progress).member("consequence", d.traits.consequence);
    j.key("parameters").begin_array();
    for (const det::parameter_description& p : d.parameters) {
      using kind = det::parameter_value::kind;
      const kind k = p.value.what();
      j.begin_object().member("name", p.name).member("kind", k == kind::flag ? "flag" : k == kind::whole ? "count" : "number");
      j.key("default");
      if (k == kind::flag) j.value(p.value.number() != 0.0);
      else j.value(p.value.number());
      j.end_object();
    }
    j.end_array().end_object();
  }
  j.end_array().end_object();
  print_json(j);
  return exit_clean;
}

int main(int argc, char** argv) {
  std::string command = argc > 1 ? argv[1] : "";
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string_view(argv[i]) == "--json";
  try {
    if (command.empty() || command == "--help" || command == "-h" || command == "help") {
      fmt::print("{}", main_help);
      return command.empty() ? exit_bad : exit_clean;
    }
    if (command == "--version") {
      fmt::print("mldiag {}.{}.{}\n", MLDIAG_VERSION_MAJOR, MLDIAG_VERSION_MINOR, MLDIAG_VERSION_PATCH);
      return exit_clean;
    }
    if (command == "scan")
      return scan_command(parse_args(argc, argv, 2,
                                     {"--format", "--column", "--step-column", "--group-by", "--objective", "--metric", "--event",
                                      "--classes", "--chance-loss", "--loss-floor"},
                                     {"--all", "--validation-unlike-training"}));
    if (command == "stats") return stats_command(parse_args(argc, argv, 2, {"--threads"}, {}));
    if (command == "diff") return diff_command(parse_args(argc, argv, 2, {"--threads", "--top"}, {}));
    if (command == "report") return report_command(parse_args(argc, argv, 2, {"-o", "--output", "--title"}, {}));
    if (command == "compare") return compare_command(parse_args(argc, argv, 2, {"--tolerance-factor"}, {}));
    if (command == "detectors") return detectors_command(argc, argv);
    throw usage_error("unknown command '" + command + "'; the commands are scan, stats, diff, report, compare, detectors (mldiag --help)");
  } catch (const std::exception& e) {
    // One line, starting with "mldiag:", naming the file and what is wrong (mldiag::error's
    // messages do); anything else unexpected is reported the same way, never a crash.
    std::string what = e.what();
    if (what.rfind("mldiag:", 0) != 0) what = "mldiag: " + what;
    if (json) {
      json_out j;
      j.begin_object().member("command", command).member("error", what).member("exit_code", exit_bad).end_object();
      print_json(j);
    }
    fmt::print(stderr, "{}\n", what);
    return exit_bad;
  }
}
