// SPDX-License-Identifier: Apache-2.0
// The flagship demo (the README's first command runs it): a transformer language model in
// LibTorch — or, where LibTorch is absent, the Eigen MLP on the UCI digits — trained with a
// planted fault; the monitor finds it; the diagnosis is walked through the four phases with
// experiments that re-train with one change each; a text report in the terminal and the run's
// JSON Lines on disk.
#include "../common/faults.hpp"
#include "../eigen_mlp/mlp.hpp"
#if MLDIAG_DEMO_HAS_TORCH
#include "../torch_transformer/transformer.hpp"
#endif

#include <mldiag/protocol/diagnosis.hpp>
#include <mldiag/report/html.hpp>
#include <mldiag/report/jsonl.hpp>
#include <mldiag/report/text.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <set>
#include <string>
#include <variant>

namespace {

namespace p = mldiag::protocol;

// One example behind one interface: train with options, into a monitor.
struct demo_model {
  std::string title, fault_story, bug_variable, cause;  // cause: a row of the pattern tables
  double bug_value, fixed_value;  // the planted fault's magnitude, and the value without the fault
  examples::run_options faulty;
  std::function<examples::run_result(const examples::run_options&, mldiag::monitor&)> train;
  std::function<mldiag::monitor_config()> settings;
};

}  // namespace

int main(int argc, char** argv) try {
  std::string out_dir = "mldiag-demo";
  [[maybe_unused]] bool force_mlp = false;  // read only where LibTorch is
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_dir = argv[++i];
    else if (a == "--mlp") force_mlp = true;
    else {
      std::fprintf(stderr, "mldiag: unknown flag %s\nusage: mldiag_demo [--out DIR] [--mlp]\n", a.c_str());
      return 2;
    }
  }
  std::filesystem::create_directories(out_dir);

  demo_model m;
  const auto digits = examples::mlp::load_digits(MLDIAG_DIGITS_CSV);
#if MLDIAG_DEMO_HAS_TORCH
  torch::set_num_threads(1);
  const auto text = examples::lm::load_corpus(examples::lm::default_text);
  if (!force_mlp) {
    m.title = "a 4-block transformer LM (LibTorch, top-1 MoE) on " + text.source;
    // A fault that harms the run: its block's writes drown the residual stream and the loss
    // climbs (2.69 against 2.37 at the end). (Attention scores x50, the demo's fault before issue
    // 38, collapse a block's attention but move the loss less than its noise: an early signal
    // at info, and a hypothesis test that can only come out inconclusive.)
    m.fault_story = "from step 100, one block's residual branch is multiplied by 30 (a scale applied twice)";
    m.bug_variable = "residual_branch_scale";
    m.cause = "blocks overwrite the residual stream";
    m.bug_value = 30.0;
    m.fixed_value = 1.0;
    m.faulty.planted = examples::fault::residual_scale;
    m.train = [&](const examples::run_options& o, mldiag::monitor& mon) { return examples::lm::train(o, mon, text); };
    m.settings = [&] { return examples::lm::monitor_settings(text); };
  }
#endif
  if (!m.train) {
    m.title = "a hand-written Eigen MLP on " + digits.source;
    m.fault_story = "at step 100, one layer's biases are pushed 50 below zero (its ReLUs die)";
    m.bug_variable = "relu_bias_shift";
    m.cause = "gradients do not reach early layers";
    m.bug_value = 50.0;
    m.fixed_value = 0.0;
    m.faulty.planted = examples::fault::dead_relu;
    m.faulty.seed = 2;
    m.train = [&](const examples::run_options& o, mldiag::monitor& mon) { return examples::mlp::train(o, mon, digits); };
    m.settings = [] { return examples::mlp::monitor_settings(); };
  }
  std::printf("mldiag flagship demo\nmodel: %s\nplanted fault: %s\n\n", m.title.c_str(), m.fault_story.c_str());

  // The run, with its JSON Lines.
  const std::string jsonl_path = out_dir + "/run.jsonl";
  mldiag::report::jsonl_sink jsonl(jsonl_path, "mldiag flagship demo: " + m.title);
  examples::run_options o = m.faulty;
  std::set<std::string> shown;
  o.on_step = [&](std::int64_t step, const mldiag::monitor& mon, std::span<const mldiag::finding> found) {
    jsonl.step(mon.evidence());
    for (const auto& f : found) {
      jsonl.finding(step, f);
      // The terminal shows each symptom once per place; the JSON Lines keep every one.
      if (f.severity >= mldiag::severity::warning &&
          shown.insert(f.symptom + (f.where.empty() ? std::string() : f.where.front().first)).second)
        std::printf("step %4lld  %s: %s%s%s\n", static_cast<long long>(step), std::string(mldiag::name(f.question)).c_str(),
                    f.symptom.c_str(), f.where.empty() ? "" : " at ", f.where.empty() ? "" : f.where.front().first.c_str());
    }
    if (step % 50 == 0) std::printf("step %4lld  loss %.4f\n", static_cast<long long>(step), mon.evidence().current().loss.value_or(std::nan("")));
  };
  mldiag::monitor mon(m.settings());
  const auto run = m.train(o, mon);
  if (!run.planted_layer.empty()) std::printf("(the fault was planted in %s)\n", run.planted_layer.c_str());
  // The text report, from the JSON Lines just written (what `mldiag report` reads too).
  fmt::print("\n{}", mldiag::report::text_report(mldiag::report::read_jsonl(jsonl_path)));
  if (mon.open_diagnoses() == 0) {
    std::printf("mldiag: the monitor found nothing to diagnose\n");
    return 1;
  }

  // The method, phase by phase, on the most severe diagnosis the run opened (ties: the lower
  // question number, then the earlier one — the fault suite's rule for "reported first").
  std::size_t pick = 0;
  for (std::size_t i = 1; i < mon.open_diagnoses(); ++i) {
    const auto& a = mon.opened_by(i);
    const auto& b = mon.opened_by(pick);
    if (a.severity > b.severity || (a.severity == b.severity && a.question < b.question)) pick = i;
  }
  const auto opened = mon.opened_by(pick);
  std::printf("\n== diagnosis of '%s' (%s) ==\n", opened.symptom.c_str(), std::string(mldiag::name(opened.question)).c_str());
  auto pattern = mon.take_diagnosis(pick).with_baseline(mon.baseline());
  const auto where = pattern.where();
  std::printf("phase 2: since step %lld, %s, %s", static_cast<long long>(where.since_step),
              where.consistent ? "consistent" : "intermittent", where.all_tensors ? "all tensors" : "some tensors");
  if (!where.where.empty()) std::printf(", first at %s", where.where.front().first.c_str());
  std::printf("\n");
  for (const auto* row : pattern.candidates()) std::printf("phase 2: candidate cause: %s\n", std::string(row->cause).c_str());

  // Phase 3: experiments re-train with exactly one change.
  const p::experiment experiment = [&](const p::change& c) {
    examples::run_options e = m.faulty;
    if (c.variable == "learning_rate") e.lr_scale = c.to / c.from;
    if (c.variable == m.bug_variable) e.fault_magnitude = c.to;
    std::printf("  (experiment: %s %g -> %g, re-training)\n", c.variable.c_str(), c.from, c.to);
    mldiag::monitor variant(m.settings());
    (void)m.train(e, variant);
    return variant.baseline();
  };
  // Whichever phase the diagnosis ends in, its log is the record of the method: printed, in the
  // JSON Lines, and in the HTML report (loss curve and gradient-norm heatmap with the findings
  // marked, the findings with their evidence; `mldiag report run.jsonl` makes the same).
  const auto finish = [&](const std::vector<p::log_entry>& log) {
    std::printf("\n== diagnosis log ==\n");
    for (const auto& entry : log) {
      std::printf("%s: %s\n", std::string(p::label(entry.phase)).c_str(), entry.text.c_str());
      jsonl.diagnosis(entry);
    }
    const std::string html_path = out_dir + "/report.html";
    mldiag::report::write_html(mldiag::report::read_jsonl(jsonl_path), html_path);
    std::printf("\nreport files: %s (JSON Lines: one line per step, one per finding, one per diagnosis line), %s (HTML)\n",
                jsonl_path.c_str(), html_path.c_str());
  };
  const auto log_of = [](const auto& outcome) -> const std::vector<p::log_entry>& {
    return std::visit([](const auto& phase) -> const std::vector<p::log_entry>& { return phase.log(); }, outcome);
  };
  auto first = std::move(pattern)
                   .propose({"learning rate too high", "the symptom appeared mid-run", {"learning_rate", 1.0, 0.1}})
                   .test(experiment);
  if (!first.was_rejected()) {
    std::printf("mldiag: the demo expected the learning-rate hypothesis to be rejected\n");
    finish(log_of(first));
    return 1;
  }
  auto second = std::move(first).rejected()
                    .propose({m.cause, "the finding names one layer, from one step on", {m.bug_variable, m.bug_value, m.fixed_value}})
                    .test(experiment);
  if (second.was_inconclusive()) {
    // The change cleared the symptom, but the loss moved less than its noise: the method
    // neither confirms the cause nor counts a strike, and says so.
    std::printf("phase 3: inconclusive: removing the fault cleared the symptom, but the recent loss did not move "
                "beyond its noise; only more runs (seeds) of the baseline and the variant, pooled with "
                "protocol::pool, could decide\n");
    finish(log_of(second));
    return 0;
  }
  if (!second.was_confirmed()) {
    std::printf("mldiag: the demo expected the second hypothesis to be confirmed\n");
    finish(log_of(second));
    return 1;
  }
  auto fix = std::move(second).confirmed();
  for (auto action : fix.fixes()) std::printf("phase 4: first action: %s\n", std::string(action).c_str());
  examples::run_options fixed = m.faulty;
  fixed.fault_magnitude = m.fixed_value;
  mldiag::monitor after(m.settings());
  (void)m.train(fixed, after);
  auto verified = std::move(fix).verify(after.baseline());
  finish(log_of(verified));  // resolved, back to phase 2, or still in phase 4 (inside the noise)
  return verified.was_not_better() ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
