// SPDX-License-Identifier: Apache-2.0
/// `monitor`: the one object for a training loop — evidence, detectors, findings, diagnoses.
#pragma once

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/dtype.hpp"
#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/evidence/persistence.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/protocol/diagnosis.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag {

/// What the monitor starts with. `detectors` empty means the default set.
struct monitor_config {
  std::size_t history = 512;
  /// Number of classes of a cross-entropy task (enables the initial-loss check); 0 = unknown.
  double classes = 0;
  std::vector<std::string> detectors = {};
};

/// The L0 checks: static configuration, before the first step. Each field that is set is
/// checked; findings map to the method's questions (see docs/method.md).
struct training_config {
  std::optional<double> learning_rate = {};
  std::optional<double> classes = {};
  std::optional<double> label_min = {}, label_max = {};  ///< the labels' range in the data
  bool fp16 = false;
  bool loss_scaling = true;
  std::optional<int> data_loader_workers = {};
  /// Tokens (or samples) one device processes per step (micro-batch x sequence length).
  std::optional<double> tokens_per_step = {};
  // 4096: a GEMM of a d=768 layer fills one wave of an H100's 132 SMs with 128x128 tiles only
  // from M = 132 / (768 / 128) x 128 = 2816 rows; below ~4k tokens the kernels are too small.
  double min_tokens_per_step = 4096;
  /// Whether fused (flash) attention is on; unset = not known.
  std::optional<bool> fused_attention = {};
  /// The dtype the matmuls actually run in, and whether mixed precision (bf16/fp16 autocast)
  /// was meant: f32 compute with mixed precision meant is the "fp32 where bf16 was meant" fault.
  std::optional<dtype> compute_dtype = {};
  bool mixed_precision = false;
};

/// One object for the training loop. A step is `observe_*` calls (the first one opens the
/// step) then `end_step()`, which runs the detectors (L1: runtime checks) and returns this
/// step's findings. Each new finding at warning or above whose question and symptom have no
/// open diagnosis opens one in phase 1, with its evidence already collected — the way a failed
/// validation check enters the method. Sinks see every finding.
///
/// **Example**
/// ```cpp
/// mldiag::monitor mon({.classes = 10});
/// for (long step = 0; ; ++step) {
///   mon.observe_loss(loss);
///   mon.observe_lr(lr);
///   for (auto& [name, g] : grads) mon.observe(mldiag::role::gradient, name, g);
///   for (const auto& f : mon.end_step()) log(f.symptom);
/// }
/// auto dx = mon.take_diagnosis(0);   // phase 1: record a baseline to go on
/// ```
class monitor {
 public:
  explicit monitor(monitor_config c = {}) : config_(std::move(c)), recorder_(config_.history) {
    if (config_.detectors.empty()) {
      detectors_ = detectors::default_set();
    } else {
      for (const auto& n : config_.detectors) detectors_.add(detectors::make_detector(n));
    }
    // The detectors that need the number of classes get it in their place (once each).
    if (config_.classes > 1) {
      detectors_.replace(detectors::make_detector("initial_loss", {{"classes", config_.classes}}));
      detectors_.replace(detectors::make_detector("chance_level", {{"classes", config_.classes}}));
    }
    step_findings_.reserve(16);
  }

  /// Opens step `step` explicitly (otherwise the first observe_* opens the next step).
  void begin_step(std::int64_t step) {
    recorder_.begin_step(step);
    open_ = true;
    next_step_ = step + 1;
  }

  void observe_loss(double loss) { ensure_open(); recorder_.record_loss(loss); }
  void observe_val_loss(double v) { ensure_open(); recorder_.record_val_loss(v); }
  void observe_lr(double lr) { ensure_open(); recorder_.record_lr(lr); }
  void observe_loss_scale(double s) { ensure_open(); recorder_.record_loss_scale(s); }
  void observe_grad_norm(double n) { ensure_open(); recorder_.record_grad_norm(n); }
  /// The cosines between consecutive steps' gradients and between their increments, from a
  /// gradient_persistence (evidence/persistence.hpp): the evidence for gradients never zeroed.
  void observe_grad_cosines(const gradient_cosines& c) {
    ensure_open();
    recorder_.record_grad_cosine(c.consecutive, c.increments);
  }
  void observe_timings(const step_timings& t) { ensure_open(); recorder_.record_timings(t); }
  void observe_memory(const memory_evidence& m) { ensure_open(); recorder_.record_memory(m); }
  void observe_efficiency(const efficiency_evidence& e) { ensure_open(); recorder_.record_efficiency(e); }
  void observe_mfu(double mfu) { ensure_open(); recorder_.record_mfu(mfu); }
  void observe_tensor_core_activity(double tca) { ensure_open(); recorder_.record_tensor_core_activity(tca); }
  void observe_throughput(double achieved, double target = std::numeric_limits<double>::quiet_NaN()) {
    ensure_open();
    recorder_.record_throughput(achieved, target);
  }
  void observe_communication(double bytes, double link_bandwidth = std::numeric_limits<double>::quiet_NaN()) {
    ensure_open();
    recorder_.record_communication(bytes, link_bandwidth);
  }
  void observe_rank_step_times(std::span<const double> seconds) { ensure_open(); recorder_.record_rank_step_times(seconds); }
  void observe_layer_time(std::string_view layer, double seconds) { ensure_open(); recorder_.record_layer_time(layer, seconds); }
  void observe_entropy(std::string_view name, const entropy_stats& e) { ensure_open(); recorder_.record_entropy(name, e); }
  void observe_router_load(std::string_view name, std::span<const double> loads) {
    ensure_open();
    recorder_.record_router_load(name, loads);
  }
  void observe_drift(std::string_view name, double drift) { ensure_open(); recorder_.record_drift(name, drift); }
  void observe(role r, std::string_view name, const tensor_stats& s) { ensure_open(); recorder_.record(r, name, s); }
  template <tensor V>
  void observe(role r, std::string_view name, const V& x) {
    ensure_open();
    recorder_.record(r, name, x);
  }

  /// Closes the step and runs the detectors. The returned findings stay valid until the
  /// next end_step(). Allocates nothing on a step where nothing fires (after warm-up).
  std::span<const finding> end_step() {
    ensure_open();
    open_ = false;
    step_findings_.clear();
    const snapshot& now = recorder_.end_step();
    detectors_.observe({now, recorder_.past(), recorder_.names()}, step_findings_);
    for (auto& f : pending_) step_findings_.push_back(std::move(f));
    pending_.clear();
    mark_consequences(now.step);
    for (const auto& f : step_findings_) deliver(f);
    return step_findings_;
  }

  /// Steps after a run-breaking event was last seen during which later findings are still
  /// marked as its consequences (finding::consequence_of).
  static constexpr std::int64_t consequence_horizon = 100;

  /// L0: checks a static training configuration before the first step; findings are
  /// delivered (and open diagnoses) like runtime ones.
  std::vector<finding> check_configuration(const training_config& c) {
    std::vector<finding> out;
    auto add = [&](question q, std::string symptom, severity s, std::vector<std::pair<std::string, double>> ev) {
      out.push_back(detectors::make_finding(q, std::move(symptom), s, -1, "configuration", std::move(ev)));
    };
    if (c.learning_rate && (!std::isfinite(*c.learning_rate) || *c.learning_rate <= 0.0)) {
      add(question::convergence, "learning rate not finite or negative", severity::critical, {{"lr", *c.learning_rate}});
    } else if (const double max_lr = detectors::lr_sanity::config{}.max_lr; c.learning_rate && *c.learning_rate > max_lr) {
      // The same line as lr_sanity's at run time (one policy; issue 15: a VAE trained with SGD
      // at 4 was "absurd" here and sane there).
      add(question::convergence, "learning rate absurdly large", severity::warning,
          {{"lr", *c.learning_rate}, {"max_lr", max_lr}});
    }
    // The observed learning rate is compared with the configured peak from now on.
    if (c.learning_rate && std::isfinite(*c.learning_rate) && *c.learning_rate > 0.0)
      detectors_.replace(detectors::make_detector("configured_lr", {{"peak", *c.learning_rate}}));
    if (c.classes && c.label_min && c.label_max && (*c.label_min < 0 || *c.label_max >= *c.classes)) {
      add(question::convergence, "labels out of range", severity::critical,
          {{"label_min", *c.label_min}, {"label_max", *c.label_max}, {"classes", *c.classes}});
    }
    if (c.fp16 && !c.loss_scaling) {
      add(question::convergence, "fp16 without loss scaling", severity::warning, {});
    }
    if (c.data_loader_workers && *c.data_loader_workers == 0) {
      add(question::efficiency, "input starvation", severity::info, {{"data_loader_workers", 0.0}});
    }
    // The efficiency settings predict "low MFU"; info where the setting can be deliberate (a
    // small fine-tuning batch, an attention mask flash kernels do not support), warning where
    // the configuration contradicts itself.
    if (c.tokens_per_step && *c.tokens_per_step < c.min_tokens_per_step) {
      add(question::efficiency, "low MFU", severity::info,
          {{"tokens_per_step", *c.tokens_per_step}, {"min_tokens_per_step", c.min_tokens_per_step}});
      out.back().where.emplace_back("tokens_per_step", *c.tokens_per_step);
    }
    if (c.fused_attention && !*c.fused_attention) {
      add(question::efficiency, "low MFU", severity::info, {{"fused_attention", 0.0}});
      out.back().where.emplace_back("fused_attention", 0.0);
    }
    if (c.mixed_precision && c.compute_dtype && (*c.compute_dtype == dtype::f32 || *c.compute_dtype == dtype::f64)) {
      add(question::efficiency, "low MFU", severity::warning,
          {{"compute_dtype_bytes", static_cast<double>(size_of(*c.compute_dtype))}, {"mixed_precision", 1.0}});
      out.back().where.emplace_back("compute_dtype", static_cast<double>(size_of(*c.compute_dtype)));
    }
    for (const auto& f : out) deliver(f);
    return out;
  }

  /// Called with every finding, in order (a log, a JSON Lines writer, an alert).
  void add_sink(std::function<void(const finding&)> sink) { sinks_.push_back(std::move(sink)); }
  /// Adds a finding made outside the detectors (by a step hook, or by the caller) to the
  /// findings of the next end_step(), which delivers it like the detectors' own.
  void add_finding(finding f) { pending_.push_back(std::move(f)); }
  /// Runs `hook` on each step's snapshot before the detectors (see recorder::set_step_hook);
  /// distributed::snapshot_merger::attach uses it to merge across ranks.
  void set_step_hook(std::function<void(snapshot&, name_table&)> hook) { recorder_.set_step_hook(std::move(hook)); }

  /// Diagnoses opened by findings and not yet taken, in phase 1.
  [[nodiscard]] std::size_t open_diagnoses() const noexcept { return diagnoses_.size(); }
  /// The question and symptom that opened diagnosis `i`.
  [[nodiscard]] const finding& opened_by(std::size_t i) const { return diagnoses_.at(i).first; }
  /// Takes diagnosis `i` out of the monitor, to walk it through the method.
  [[nodiscard]] protocol::evidence_phase take_diagnosis(std::size_t i) {
    if (i >= diagnoses_.size()) {
      throw error("monitor::take_diagnosis: index " + std::to_string(i) + " but " +
                  std::to_string(diagnoses_.size()) + " diagnoses are open");
    }
    auto dx = std::move(diagnoses_[i].second);
    diagnoses_.erase(diagnoses_.begin() + static_cast<std::ptrdiff_t>(i));
    return dx;
  }

  [[nodiscard]] const recorder& evidence() const noexcept { return recorder_; }
  /// The detectors the monitor runs, in order.
  [[nodiscard]] const detectors::dynamic_set& detector_set() const noexcept { return detectors_; }
  /// The phase-1 baseline of the run so far: its findings, recent loss, obvious checks.
  [[nodiscard]] protocol::evidence_summary baseline() const {
    return protocol::summarize(recorder_.past(), all_findings_, protocol::check_obvious(recorder_.past(), config_.classes));
  }

 private:
  void ensure_open() {
    if (!open_) begin_step(next_step_);
  }
  // A critical non-finite value or a lost loss breaks the run: what other detectors report
  // from that step on (while it was seen in the last consequence_horizon steps) is downstream
  // of it — vanishing gradients from the zeros left in NaN gradients, an update ratio of NaN
  // parameters — and is marked so instead of being reported as a cause.
  void mark_consequences(std::int64_t step) {
    // The run-breaking evidence itself is never a consequence; its critical findings start the horizon.
    const auto breaking_kind = [](const finding& f) { return f.detector == "non_finite" || f.symptom == "missing loss value"; };
    for (const auto& f : step_findings_) {
      if (f.severity != severity::critical || !breaking_kind(f)) continue;
      if (breaking_step_ < 0 || step - breaking_last_ > consequence_horizon) {
        breaking_step_ = step;
        breaking_symptom_ = f.symptom;
      }
      breaking_last_ = step;
    }
    if (breaking_step_ < 0 || step - breaking_last_ > consequence_horizon) return;
    for (auto& f : step_findings_) {
      if (breaking_kind(f)) continue;
      f.consequence_of = breaking_symptom_;
      f.consequence_of_step = breaking_step_;
    }
  }

  void deliver(const finding& f) {
    for (auto& s : sinks_) s(f);
    if (f.severity < severity::warning) return;
    // The baseline keeps the first findings: bounded, so a fault that fires every step of a
    // long run does not grow memory.
    if (all_findings_.size() < max_kept_findings) all_findings_.push_back(f);
    if (f.is_consequence()) return;  // evidence of the breaking event, not a cause of its own
    for (const auto& [opened, dx] : diagnoses_)
      if (opened.question == f.question && opened.symptom == f.symptom) return;
    diagnoses_.emplace_back(f, protocol::diagnose(f.question, {f}));
  }

  monitor_config config_;
  recorder recorder_;
  detectors::dynamic_set detectors_;
  std::vector<finding> step_findings_, all_findings_, pending_;
  std::vector<std::function<void(const finding&)>> sinks_;
  std::vector<std::pair<finding, protocol::evidence_phase>> diagnoses_;
  std::int64_t next_step_ = 0;
  std::int64_t breaking_step_ = -1, breaking_last_ = -1;
  std::string breaking_symptom_;
  bool open_ = false;
  static constexpr std::size_t max_kept_findings = 1024;
};

}  // namespace mldiag
