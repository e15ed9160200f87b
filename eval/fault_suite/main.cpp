// SPDX-License-Identifier: Apache-2.0
// mldiag-fault-suite: plants every fault in every example (3 seeds each) and runs healthy
// runs (10 seeds each), then measures how well the monitor finds them: detected or not, the
// question and symptom reported first, whether its top-ranked location is the planted layer,
// and the steps from onset to detection. Prints a table and one JSON line. docs/accuracy.md
// records the results.
#include "../../examples/common/faults.hpp"
#include "../../examples/common/verdict.hpp"
#include "../../examples/eigen_mlp/mlp.hpp"
#include "../common/evidence_log.hpp"
#if MLDIAG_SUITE_HAS_TORCH
#include "../../examples/torch_transformer/transformer.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using examples::fault;

struct plan {
  std::string example;
  examples::run_options options;
};

// What the suite reads from one run: the shared verdict (examples/common/verdict.hpp), and
// which run it was.
struct verdict : examples::verdict {
  std::string example;
  fault planted = fault::none;
  std::uint64_t seed = 0;
};

verdict judge(const examples::run_result& r) {
  const auto& want = examples::info(r.options.planted);
  verdict v{examples::judge(r.findings, {.healthy = r.options.planted == fault::none,
                                         .onset = r.options.onset_step(),
                                         .expected = want.expected,
                                         .has_layer = want.has_layer,
                                         .layer = r.planted_layer})};
  v.example = r.example;
  v.planted = r.options.planted;
  v.seed = r.options.seed;
  return v;
}

struct settings {
  bool quick = false;
  bool check = false;
  int synthetic_time = -1;  // -1: the default (synthetic with --quick, real time otherwise)
  int seeds = 3, healthy = 10, jobs = 1;
  int entropy_stride = 0;  // 0: monitor_config's default
  std::string only;  // one example
  std::string evidence;  // --evidence DIR: each run's evidence log and findings
};

settings parse(int argc, char** argv) {
  settings s;
  auto usage = [](const std::string& why) {
    std::fprintf(stderr,
                 "mldiag: %s\nusage: mldiag-fault-suite [--quick] [--check] [--seeds N] [--healthy N] [--jobs N] "
                 "[--example eigen_mlp|torch_transformer] [--synthetic-time|--real-time] [--entropy-stride N]\n"
                 "       [--evidence DIR]\n"
                 "  --quick    a subset for CTest: every MLP fault and one transformer fault per question, 1 seed,\n"
                 "             3 healthy runs each, shorter runs\n"
                 "  --check    exit 1 when a target is missed (recall 100%% with the right question, top-1\n"
                 "             localization >= 90%%, median steps to detect <= 10, no alarm on healthy runs)\n"
                 "  --synthetic-time  step and layer times from a synthetic clock, the timing faults added\n"
                 "             to it (the default with --quick: a loaded machine cannot decide CTest)\n"
                 "  --real-time       the steady clock, faults that really sleep and spin (the default otherwise)\n"
                 "  --entropy-stride N  the transformer's monitor reads every N-th attention row (default: %u)\n"
                 "  --evidence DIR    write each run's evidence log and findings to DIR, for mldiag-replay\n",
                 why.c_str(), static_cast<unsigned>(mldiag::monitor_config{}.entropy.row_stride));
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto count = [&]() {
      if (i + 1 >= argc) usage(std::string(a) + " needs a number");
      const int v = std::atoi(argv[++i]);
      if (v < 1) usage(std::string(a) + " needs a number >= 1");
      return v;
    };
    if (a == "--quick") s.quick = true;
    else if (a == "--check") s.check = true;
    else if (a == "--seeds") s.seeds = count();
    else if (a == "--healthy") s.healthy = count();
    else if (a == "--jobs") s.jobs = count();
    else if (a == "--entropy-stride") s.entropy_stride = count();
    else if (a == "--synthetic-time") s.synthetic_time = 1;
    else if (a == "--real-time") s.synthetic_time = 0;
    else if (a == "--example" && i + 1 < argc) s.only = argv[++i];
    else if (a == "--evidence" && i + 1 < argc) {
      s.evidence = argv[++i];
      std::filesystem::create_directories(s.evidence);
    }
    else if (a == "--help" || a == "-h") usage("help");
    else usage("unknown flag " + std::string(a));
  }
  if (s.synthetic_time < 0) s.synthetic_time = s.quick ? 1 : 0;
  if (!s.only.empty() && s.only != "eigen_mlp" && s.only != "torch_transformer")
    usage("no example named '" + s.only + "'; there are eigen_mlp and torch_transformer");
  return s;
}

// The faults each example can carry.
bool applies(std::string_view example, fault f) {
  if (example == "eigen_mlp") {
    return f != fault::attention_temperature && f != fault::router_collapse && f != fault::embedding_lr_100x &&
           f != fault::residual_scale;
  }
  return true;
}

std::vector<plan> make_plans(const settings& s) {
  std::vector<plan> plans;
  std::vector<std::string> names = {"eigen_mlp"};
#if MLDIAG_SUITE_HAS_TORCH
  names.emplace_back("torch_transformer");
#endif
  for (const auto& ex : names) {
    if (!s.only.empty() && s.only != ex) continue;
    const bool lm = ex == "torch_transformer";
    const int seeds = s.quick ? 1 : s.seeds, healthy = s.quick ? 3 : s.healthy;
    for (const auto& fi : examples::fault_table) {
      if (fi.id == fault::none || !applies(ex, fi.id)) continue;
      // The quick transformer subset: one fault per question, the ones no MLP run covers.
      if (s.quick && lm && fi.id != fault::nan_grad && fi.id != fault::attention_temperature &&
          fi.id != fault::router_collapse && fi.id != fault::slow_layer)
        continue;
      for (int k = 0; k < seeds; ++k) {
        examples::run_options o;
        o.planted = fi.id;
        o.seed = static_cast<std::uint64_t>(k + 1);
        if (s.quick && lm) o.steps = 120;
        o.synthetic_time = s.synthetic_time == 1;
        plans.push_back({ex, o});
      }
    }
    for (int k = 0; k < healthy; ++k) {
      examples::run_options o;
      o.seed = static_cast<std::uint64_t>(100 + k);
      if (s.quick && lm) o.steps = 120;
      o.synthetic_time = s.synthetic_time == 1;
      plans.push_back({ex, o});
    }
  }
  return plans;
}

using examples::median;

}  // namespace

int main(int argc, char** argv) try {
  const settings s = parse(argc, argv);
  const auto digits = examples::mlp::load_digits(MLDIAG_DIGITS_CSV);
  std::printf("eigen_mlp data: %s\n", digits.source.c_str());
#if MLDIAG_SUITE_HAS_TORCH
  torch::set_num_threads(1);
  const auto text = examples::lm::load_corpus(examples::lm::default_text);
  std::printf("torch_transformer data: %s\n", text.source.c_str());
#else
  std::printf("torch_transformer: off (built without LibTorch: apt-get install libtorch-dev)\n");
#endif
  const auto plans = make_plans(s);
  std::printf("%zu runs, %d at a time, %s\n", plans.size(), s.jobs,
              s.synthetic_time == 1 ? "synthetic step times (timing faults added, not slept)" : "real step times");
  std::fflush(stdout);

  std::vector<verdict> verdicts(plans.size());
  std::atomic<std::size_t> next{0};
  std::mutex print;
  auto worker = [&] {
    for (std::size_t i = next++; i < plans.size(); i = next++) {
      const auto& p = plans[i];
      examples::run_result r;
      // --evidence: the run's evidence and findings, for replay (eval/common/evidence_log.hpp).
      const auto record = [&](mldiag::monitor& mon, const mldiag::monitor_config& c) {
        if (s.evidence.empty()) return;
        const std::string base = s.evidence + "/" + eval::file_name(p.example + " " + std::string(examples::info(p.options.planted).name) +
                                                                   " seed " + std::to_string(p.options.seed));
        auto w = std::make_unique<eval::evidence_writer>(base + ".evd", base + ".findings");
        w->configured({.task = c.task});
        mon.attach(std::move(w));
      };
      if (p.example == "eigen_mlp") {
        const auto config = examples::mlp::monitor_settings();
        mldiag::monitor mon(config);
        record(mon, config);
        r = examples::mlp::train(p.options, mon, digits);
      }
#if MLDIAG_SUITE_HAS_TORCH
      else {
        auto config = examples::lm::monitor_settings(text);
        if (s.entropy_stride > 0) config.entropy.row_stride = static_cast<std::uint32_t>(s.entropy_stride);
        mldiag::monitor mon(config);
        record(mon, config);
        r = examples::lm::train(p.options, mon, text);
      }
#endif
      verdicts[i] = judge(r);
      const std::lock_guard<std::mutex> lock(print);
      std::fprintf(stderr, "  [%zu/%zu] %s %s seed %llu\n", i + 1, plans.size(), p.example.c_str(),
                   std::string(examples::info(p.options.planted).name).c_str(),
                   static_cast<unsigned long long>(p.options.seed));
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < s.jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  // One row per example and fault.
  // "steps": onset to the first finding (an early signal at info counts: it appears at once);
  // "to warn": onset to the first warning (the delay a consequence or a persistence adds).
  std::printf("\n%-18s %-22s %5s %9s %9s %8s %7s %7s  %s\n", "example", "fault", "runs", "detected", "right Q", "top-1",
              "steps", "to warn", "first finding (question: symptom at location)");
  int faulted = 0, detected = 0, right = 0, located = 0, with_layer = 0, healthy_runs = 0, healthy_alarmed = 0,
      before_onset = 0;
  std::vector<double> steps, to_warning;
  int warned = 0;
  std::vector<std::string> false_alarms;
  std::map<std::pair<std::string, int>, std::vector<const verdict*>> rows;
  for (const auto& v : verdicts) rows[{v.example, static_cast<int>(v.planted)}].push_back(&v);
  for (const auto& [key, vs] : rows) {
    const auto f = static_cast<fault>(key.second);
    int d = 0, q = 0, t = 0, tl = 0, alarms = 0;
    std::vector<double> st, sw;
    std::map<std::string, int> reported;
    for (const auto* v : vs) {
      d += v->detected;
      q += v->right_question;
      if (v->top1) {
        ++tl;
        t += *v->top1;
      }
      if (v->steps_to_warning >= 0 && f != fault::none) sw.push_back(static_cast<double>(v->steps_to_warning));
      if (v->detected) {
        st.push_back(static_cast<double>(v->steps_to_detect));
        ++reported[v->question.substr(0, 2) + ": " + v->symptom + (v->location.empty() ? "" : " at " + v->location)];
      }
      alarms += f == fault::none ? (v->healthy_alarms > 0) : 0;
      before_onset += v->alarms_before_onset;
      if (!v->false_alarm.empty()) false_alarms.push_back(v->example + " seed " + std::to_string(v->seed) + ": " + v->false_alarm);
    }
    const int n = static_cast<int>(vs.size());
    std::string first;
    for (const auto& [text_, count] : reported) first += (first.empty() ? "" : "; ") + text_ + (count > 1 ? " (x" + std::to_string(count) + ")" : "");
    if (f == fault::none) {
      healthy_runs += n;
      healthy_alarmed += alarms;
      std::printf("%-18s %-22s %5d %9s %9s %8s %7s %7s  %d run(s) with a finding at warning or above\n", key.first.c_str(),
                  "healthy", n, "-", "-", "-", "-", "-", alarms);
      continue;
    }
    faulted += n;
    detected += d;
    right += q;
    located += t;
    with_layer += tl;
    steps.insert(steps.end(), st.begin(), st.end());
    to_warning.insert(to_warning.end(), sw.begin(), sw.end());
    warned += static_cast<int>(sw.size());
    const std::string top = tl ? std::to_string(t) + "/" + std::to_string(tl) : "-";
    const double m = median(st), mw = median(sw);
    std::printf("%-18s %-22s %5d %6d/%-2d %6d/%-2d %8s %7s %7s  %s\n", key.first.c_str(),
                std::string(examples::info(f).name).c_str(), n, d, n, q, n, top.c_str(),
                m < 0 ? "-" : std::to_string(static_cast<long long>(m)).c_str(),
                mw < 0 ? "-" : std::to_string(static_cast<long long>(mw)).c_str(), first.empty() ? "(nothing)" : first.c_str());
  }
  const double recall = faulted ? static_cast<double>(detected) / faulted : 0.0;
  const double right_q = faulted ? static_cast<double>(right) / faulted : 0.0;
  const double top1 = with_layer ? static_cast<double>(located) / with_layer : 0.0;
  const double med = median(steps), med_warning = median(to_warning);
  std::printf("\nrecall %.3f (%d/%d)  right question %.3f  top-1 localization %.3f (%d/%d)  median steps to detect %.1f\n",
              recall, detected, faulted, right_q, top1, located, with_layer, med);
  std::printf("warned %d/%d faulted runs within the run, median %.1f steps from onset to the first warning\n", warned, faulted,
              med_warning);
  std::printf("healthy runs %d, with a finding at warning or above: %d; findings before the onset in faulted runs: %d\n",
              healthy_runs, healthy_alarmed, before_onset);
  for (const auto& a : false_alarms) std::printf("  false alarm: %s\n", a.c_str());
  std::printf("{\"bench\":\"fault_suite\",\"quick\":%s,\"faulted_runs\":%d,\"recall\":%.4f,\"right_question\":%.4f,"
              "\"localization_top1\":%.4f,\"median_steps_to_detect\":%.1f,\"healthy_runs\":%d,\"healthy_false_alarms\":%d,"
              "\"false_alarms_before_onset\":%d,\"warned_runs\":%d,\"median_steps_to_warning\":%.1f}\n",
              s.quick ? "true" : "false", faulted, recall, right_q, top1, med, healthy_runs, healthy_alarmed, before_onset, warned,
              med_warning);
  if (!s.check) return 0;
  const bool met = detected == faulted && right == faulted && (with_layer == 0 || top1 >= 0.9) && med <= 10.0 &&
                   healthy_alarmed == 0 && before_onset == 0;
  if (!met) std::printf("mldiag: a target is missed (see the table above)\n");
  return met ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
