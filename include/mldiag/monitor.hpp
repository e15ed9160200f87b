// SPDX-License-Identifier: Apache-2.0
/// `monitor`: the one object for a training loop — evidence, detectors, findings, diagnoses.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/compiled.hpp"
#include "mldiag/core/concepts.hpp"
#include "mldiag/core/dtype.hpp"
#include "mldiag/detectors/registry.hpp"  // the detectors themselves only in header-only builds
#include "mldiag/detectors/configuration.hpp"
#include "mldiag/detectors/consequence.hpp"
#include "mldiag/detectors/task.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/persistence.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/protocol/diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <concepts>  // std::integral
#include <cstdint>
#include <cstdio>  // std::fprintf (the destructor's report errors)
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// A detector of the catalogue by name, with named parameters (the fields of its config):
/// `"loss_spike"` or `{"exploding_gradients", {{"warn_ratio", 20}}}`.
struct detector_entry {
  std::string name;
  detectors::parameters parameters = {};
  detector_entry(const char* n) : name(n) {}  // NOLINT: implicit, so a list of names reads as one
  detector_entry(std::string n, detectors::parameters p = {}) : name(std::move(n)), parameters(std::move(p)) {}
};

/// What the monitor starts with. `detectors` empty means the default set; entries may carry
/// parameters. Your own detectors are added with `monitor::add`.
struct monitor_config {
  std::size_t history = 512;
  /// What the monitor is told about the run (detectors/task.hpp): the number of classes, a
  /// start from a checkpoint, the learning rate and clipping bound, the data. It is checked
  /// before the first step, and it configures the detectors that read it (an entry of
  /// `detectors` that sets the same parameter keeps its own).
  mldiag::task task = {};
  std::vector<detector_entry> detectors = {};
  /// Which rows and steps `observe_logits` reads (stats/entropy.hpp). The default reads every
  /// fifth row, the first rotating with the step (every row once in five steps), on every
  /// step. The detectors read a tensor's mean row entropy, which the sample estimates; on
  /// recorded attention the sample gives every row's verdicts (docs/stats.md, "Sampling";
  /// docs/accuracy.md#attention_collapse). Why 5, not 4: an odd stride is coprime with a
  /// power-of-two context, so consecutive heads of [B, H, T, T] scores are sampled at
  /// different query positions; with 4 every head was sampled at the same ones, and the
  /// sampled mean swung with the offset by up to 0.12 (short causal rows, whose row 0 is
  /// one-hot) against 0.04 with 5. What it saves: docs/benchmarks.md. `{.row_stride = 1}`
  /// reads every row.
  entropy_sampling entropy = {.row_stride = 5};
};


class monitor;

/// A report attached to a monitor (`monitor::attach`): it sees every closed step, every
/// evaluation, every finding, and the end of the run. The report headers give ready ones in
/// one line each: `report::attach_jsonl(mon, "run.jsonl")` (report/jsonl.hpp),
/// `report::attach_html(mon, "report.html")` (report/html.hpp), and
/// `mon.attach(report::console_sink())` (report/console.hpp) for the terminal.
class monitor_sink {
 public:
  virtual ~monitor_sink() = default;
  /// A step closed (after the detectors ran on it; before its findings are delivered).
  virtual void on_step(const snapshot&, const name_table&) {}
  /// An evaluation recorded at a closed step (monitor::observe_evaluation).
  virtual void on_evaluation(const snapshot&, const name_table&) {}
  virtual void on_finding(const finding&) {}
  /// The run ended (monitor::finish, or the monitor's destruction): the monitor as it is then,
  /// with its open diagnoses.
  virtual void on_finish(const monitor&) {}
};

/// A sink that hands every finding to a callable (`monitor::attach(f)` makes one).
template <class F>
class finding_sink final : public monitor_sink {
 public:
  explicit finding_sink(F f) : f_(std::move(f)) {}
  void on_finding(const finding& f) override { f_(f); }

 private:
  F f_;
};

/// One object for the training loop. A step is `observe` calls (the first one opens the step)
/// then `end_step()`, which runs the detectors (L1: runtime checks) and returns this step's
/// findings. Each new finding at warning or above whose question and symptom have no open
/// diagnosis opens one in phase 1, with its evidence already collected — the way a failed
/// validation check enters the method. Attached sinks see every finding.
///
/// **Example**
/// ```cpp
/// mldiag::monitor mon({.task = {.classes = 10}});
/// for (long step = 0; ; ++step) {
///   mon.observe(mldiag::scalar::loss, loss);
///   mon.observe(mldiag::scalar::learning_rate, lr);
///   for (auto& [name, g] : grads) mon.observe(mldiag::role::gradient, name, g);
///   for (const auto& f : mon.end_step()) log(f.symptom);
/// }
/// auto dx = mon.take_diagnosis(0);   // phase 1: record a baseline to go on
/// ```
class monitor {
 public:
  explicit monitor(monitor_config c = {});

  /// Adds a detector — your own (anything that models `detectors::detector`) or a configured
  /// one (`detectors::make_detector(name, parameters)`). One of the same name is replaced in
  /// its place: a name is one detector.
  ///
  /// **Example**: `mon.add(my_detector{});` or
  /// `mon.add(detectors::make_detector("loss_spike", {{"factor", 4}}));`
  template <detectors::detector D>
  void add(D d) {
    if constexpr (std::is_same_v<D, detectors::any_detector>) detectors_.replace(std::move(d));
    else detectors_.replace(detectors::any_detector(std::move(d)));
  }

  /// Opens step `step` explicitly (otherwise the first observe opens the next step).
  void begin_step(std::int64_t step) {
    recorder_.begin_step(step);
    open_ = true;
    next_step_ = step + 1;
  }

  /// Evidence of the open step (the first call opens the next step): whatever the recorder
  /// observes (evidence/recorder.hpp), in one overload set —
  /// - `observe(scalar::loss, 2.31)`: the loss, `val_loss`, `learning_rate`, `loss_scale`,
  ///   `grad_norm` (NaN and Inf are evidence);
  /// - `observe(role::gradient, name, x)`: any tensor the adapters take (a contiguous range, a
  ///   `strided_view`, a `tensor_ref`, an Eigen object, a `torch::Tensor`, a `dlib::tensor`,
  ///   a type of yours with a `view_traits` specialization) or its `tensor_stats`;
  /// - `observe(step_timings{...})`, `observe(memory_evidence{...})`,
  ///   `observe(efficiency_evidence{.mfu = 0.31})`, `observe(gradient_cosines)`,
  ///   `observe(layer_timing{"blocks.3", s})`, `observe(router_load{...})`,
  ///   `observe(router_assignments{...})`, `observe(row_entropy{...})`,
  ///   `observe(parameter_drift_of{...})`, `observe(rank_step_times{...})`
  ///   (evidence/observations.hpp).
  /// A type that is not a tensor fails to compile with "mldiag: not a tensor" and what to pass.
  template <class... A>
    requires requires(recorder& r, A&&... a) { r.observe(std::forward<A>(a)...); }
  void observe(A&&... a) {
    ensure_open();
    if constexpr (sizeof...(A) == 2) {
      if (repeated_loss(a...)) return;
    }
    recorder_.observe(std::forward<A>(a)...);
  }
  /// The row entropy of logits (`[..., row_len]`, -inf entries masked: attention scores
  /// before the softmax, router logits), recorded under `name` on the rows and steps that
  /// `monitor_config::entropy` selects; on the other steps nothing is recorded for `name`.
  ///
  /// **Example**: `mon.observe_logits("layers.3.attn", scores, context);`
  template <tensor V>
  void observe_logits(std::string_view name, const V& logits, std::int64_t row_len) {
    ensure_open();
    const std::int64_t step = recorder_.current().step;
    if (!config_.entropy.due(step)) return;
    recorder_.observe(row_entropy{name, entropy_from_logits(as_tensor_ref(name, logits), row_len, config_.entropy, step)});
  }
  /// An evaluation (a validation or test loss) measured after step `step` closed — between
  /// epochs, or after the last one. It joins that step's evidence (its snapshot's val_loss),
  /// the detectors that read evaluations see it, attached reports get it at that step, and
  /// the findings it raises are delivered and returned (valid until the next end_step or
  /// evaluation). Throws while a step is open: a value measured inside a step is
  /// `observe(scalar::val_loss, v)`.
  ///
  /// **Example**
  /// ```cpp
  /// for (int epoch = 0; epoch < epochs; ++epoch) {
  ///   for (auto& batch : loader) { ...; mon.end_step(); }
  ///   mon.observe_evaluation(test_loss(model));  // at the epoch's last step
  /// }
  /// ```
  std::span<const finding> observe_evaluation(std::int64_t step, double val_loss);
  /// An evaluation at the last closed step.
  std::span<const finding> observe_evaluation(double val_loss) {
    if (recorder_.past().empty() && !open_)
      throw error("monitor::observe_evaluation: no step has closed yet; evaluate after the first end_step()");
    return observe_evaluation(open_ ? recorder_.current().step : recorder_.past().back().step, val_loss);
  }

  /// A progress metric of the open step (a return, an accuracy, a score): what the
  /// convergence verdicts read when the loss is not a progress measure
  /// (`task::objective = objective::not_progress`), and a second opinion otherwise
  /// (metric_not_improving). Same as `observe(progress_metric{name, value, higher_is_better})`.
  ///
  /// **Example**: `mon.observe_metric("return", episode_return, true);`
  void observe_metric(std::string_view name, double value, bool higher_is_better) {
    observe(progress_metric{name, value, higher_is_better});
  }

  /// Declares that tensor `name` (or every tensor under it: `"emb"` covers `"emb.weight"`) is
  /// meant to grow (embeddings started small): the detectors of growth (embedding_growth,
  /// parameter_drift) report it as info, with the declaration as its reason.
  ///
  /// **Example**: `mon.expect_growth("item_embedding");`
  void expect_growth(std::string_view name) {
    for (const std::string_view d : {std::string_view("embedding_growth"), std::string_view("parameter_drift")})
      quiet(d, name, "declared to grow");
  }
  /// Switches detector `detector`'s opinion of tensor `name` (or of every tensor under it) to
  /// info, without switching the detector off for the others. `reason` goes into the finding's
  /// `why`.
  ///
  /// **Example**: `mon.quiet("update_ratio", "bn.running_mean", "a buffer, not trained");`
  void quiet(std::string_view detector, std::string_view name, std::string_view reason = "declared");

  /// Closes the step and runs the detectors. The returned findings stay valid until the
  /// next end_step(). Allocates nothing on a step where nothing fires, from the second step
  /// on (the first learns the names and reserves the history for steps like it).
  std::span<const finding> end_step();

  /// Attaches a report (see monitor_sink); the monitor owns it from now on.
  void attach(std::unique_ptr<monitor_sink> sink) { reports_.push_back(std::move(sink)); }
  /// Attaches anything callable with a finding (a log line, an alert, `report::console_sink()`):
  /// it is called with every finding, in order.
  ///
  /// **Example**: `mon.attach([](const mldiag::finding& f) { std::puts(f.symptom.c_str()); });`
  template <class F>
    requires std::invocable<F&, const finding&>
  void attach(F on_finding) {
    attach(std::make_unique<finding_sink<F>>(std::move(on_finding)));
  }

  /// Ends the run: attached reports finish (an HTML report is written now). Called by the
  /// destructor if not before, which prints a report's error to stderr instead of throwing;
  /// call it yourself to get the error as an exception. A second call does nothing.
  void finish();

  monitor(const monitor&) = delete;
  monitor& operator=(const monitor&) = delete;
  monitor(monitor&&) = default;
  monitor& operator=(monitor&&) = default;
  ~monitor();

  /// Steps a convergence finding that waits for the progress metric (`objective::not_progress`)
  /// must keep recurring before it is a warning without a consequence.
  static constexpr std::int64_t progress_persist = 100;
  /// Steps after a run-breaking event was last seen during which later findings are still
  /// marked as its consequences (finding::consequence_of).
  static constexpr std::int64_t consequence_horizon = 100;
  /// Steps without a repetition after which the same detector, symptom and place start a new
  /// episode. Within an episode a finding is delivered (to the sinks, the baseline and
  /// end_step's return) when it starts and each time its severity rises, never once per step:
  /// one loss spike held for 7,503 steps was 7,503 lines of JSON Lines (12 MB).
  static constexpr std::int64_t episode_gap = 50;
  /// Steps after a finding that waits for a consequence (an early signal at info,
  /// finding::awaits_consequence) during which harm seen in the run (detectors::harm_watch: the
  /// progress measure or validation worsening, a loss turning non-finite) escalates it to a
  /// warning, delivered once with the harm in its `why`.
  static constexpr std::int64_t consequence_window = 500;

  /// L0: what the checks of `monitor_config::task` found before the first step
  /// (`detectors::check_configuration`), at step -1. They open diagnoses at once, and reach the
  /// attached sinks when the first step closes, before that step's own findings (a sink is
  /// attached after construction); `end_step()` returns a step's own findings only.
  [[nodiscard]] std::span<const finding> configuration_findings() const noexcept { return configuration_; }
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
  /// Diagnosis `i` as it is, in phase 1 (its log says what opened it).
  [[nodiscard]] const protocol::evidence_phase& open_diagnosis(std::size_t i) const { return diagnoses_.at(i).second; }
  /// Takes diagnosis `i` out of the monitor, to walk it through the method.
  [[nodiscard]] protocol::evidence_phase take_diagnosis(std::size_t i);

  [[nodiscard]] const recorder& evidence() const noexcept { return recorder_; }
  /// The detectors the monitor runs, in order.
  [[nodiscard]] const detectors::dynamic_set& detector_set() const noexcept { return detectors_; }
  /// The phase-1 baseline of the run so far: its findings, recent loss, obvious checks.
  [[nodiscard]] protocol::evidence_summary baseline() const;

 private:
  void ensure_open() {
    if (!open_) begin_step(next_step_);
  }
  // task::line_search: L-BFGS evaluates the loss at trial points after the step's own; the
  // first loss of a step is the loss at its parameters (what LBFGS::step returns).
  template <class S, class V>
  [[nodiscard]] bool repeated_loss(const S& s, const V&) const {
    if constexpr (std::is_same_v<std::remove_cvref_t<S>, scalar>)
      return s == scalar::loss && config_.task.line_search && recorder_.current().loss.has_value();
    else return false;
  }
  // objective::not_progress: a convergence warning read from the loss's or the gradients'
  // own numbers waits for the progress metric's harm (or lasts progress_persist steps).
  void await_progress(std::int64_t step, std::size_t from);
  // A progress metric's own verdict this step (metric_not_improving at warning or above), in
  // words: harm for what waits.
  [[nodiscard]] std::string progress_verdict(std::size_t from) const;
  // A critical non-finite value or a lost loss breaks the run: what other detectors report
  // from that step on (while it was seen in the last consequence_horizon steps) is downstream
  // of it — vanishing gradients from the zeros left in NaN gradients, an update ratio of NaN
  // parameters — and is marked so instead of being reported as a cause.
  void mark_consequences(std::int64_t step, std::size_t from);

  // A finding to the sinks (notify), and into the baseline and a diagnosis of its own
  // (open_diagnosis_for); deliver does both.
  void notify(const finding& f);
  void deliver(const finding& f);
  void open_diagnosis_for(const finding& f);
  // The user's per-tensor declarations (quiet, expect_growth) applied to new findings.
  void apply_declarations(std::size_t from);
  // Drops a finding that repeats an ongoing episode (same detector, symptom and first place,
  // delivered or repeated within episode_gap steps) at no higher severity: an episode is
  // delivered when it starts and each time it escalates, not once per step.
  void drop_repeats(std::int64_t step, std::size_t from);
  struct episode_state {
    std::string detector, symptom, place;
    std::int64_t last = -1;
    severity top = severity::info;
    std::int64_t first = -1;
    // Where the progress metrics stood when this claim (detector, symptom, place) was first
    // made in the run: one that comes and goes is the same claim, refuted by the same gain.
    detectors::harm_watch::progress_mark progress;
  };
  [[nodiscard]] const episode_state* episode_of(const finding& f) const;
  std::vector<episode_state> episodes_;
  // Findings delivered at info that wait for a consequence, and what counts as one.
  void escalate_awaiting(std::int64_t step, const std::string& harm);
  std::vector<finding> awaiting_;
  detectors::harm_watch harm_;

  struct quieted {
    std::string detector, tensor, reason;
  };
  std::vector<quieted> quieted_;
  monitor_config config_;
  recorder recorder_;
  detectors::dynamic_set detectors_;
  std::vector<finding> step_findings_, all_findings_, pending_, configuration_;
  std::vector<std::unique_ptr<monitor_sink>> reports_;
  std::vector<std::pair<finding, protocol::evidence_phase>> diagnoses_;
  std::int64_t next_step_ = 0;
  std::int64_t breaking_step_ = -1, breaking_last_ = -1;
  std::string breaking_symptom_;
  bool open_ = false, finished_ = false, configuration_delivered_ = false;
  static constexpr std::size_t max_kept_findings = 1024;
};

static_assert(observer<monitor>);

// The monitor's costly members: inline, or compiled once (core/compiled.hpp).
#if MLDIAG_DEFINE_COMPILED
MLDIAG_COMPILED_INLINE monitor::monitor(monitor_config c)
    : harm_(c.task.objective == objective::minimized, !(c.task.loss_floor && std::isinf(*c.task.loss_floor))), config_(std::move(c)), recorder_(config_.history) {
  const task& t = config_.task;
  if (t.max_grad_norm && (!std::isfinite(*t.max_grad_norm) || *t.max_grad_norm <= 0.0))
    throw error("task::max_grad_norm is " + std::to_string(*t.max_grad_norm) +
                ": give the positive bound the gradient norm is clipped to, or leave it unset when "
                "gradients are not clipped");
  if (t.chance_loss && !(std::isfinite(*t.chance_loss) && *t.chance_loss > 0.0))
    throw error("task::chance_loss is " + std::to_string(*t.chance_loss) +
                ": give the positive loss of an uninformed model (ln(batch) for an in-batch contrastive loss), or leave it unset");
  if (t.loss_floor && !std::isfinite(*t.loss_floor) && *t.loss_floor != no_lower_bound)
    throw error("task::loss_floor is " + std::to_string(*t.loss_floor) +
                ": give the lowest loss the objective can reach, mldiag::no_lower_bound for a loss without one, or leave it unset");
  const bool loss_is_progress = t.objective == objective::minimized;
  const bool bounded = !(t.loss_floor && *t.loss_floor == no_lower_bound);
  std::vector<detector_entry> entries = config_.detectors;
  if (entries.empty()) {
    for (std::size_t i = 0; i < detectors::detector_infos.size(); ++i) {
      const auto& info = detectors::detector_infos[i];
      if (t.from_checkpoint && info.name == "initial_loss") continue;
      // A loss that is not a progress measure: its progress verdicts would judge an
      // equilibrium or a surrogate; metric_not_improving reads the user's metrics instead.
      if (!loss_is_progress && info.traits.judges_loss_progress) continue;
      entries.emplace_back(std::string(info.name));
    }
  }
  // What the task tells the detectors that read it, unless an entry set the parameter itself.
  const auto tell = [&](detector_entry& e, std::string_view parameter, detectors::parameter_value v) {
    if (detectors::has_parameter(e.name, parameter)) e.parameters.try_emplace(std::string(parameter), v);
  };
  for (auto& e : entries) {
    if (t.classes > 1) tell(e, "classes", t.classes);
    if (e.name == "configured_lr" && t.learning_rate && std::isfinite(*t.learning_rate) && *t.learning_rate > 0.0)
      tell(e, "peak", *t.learning_rate);
    if (e.name == "exploding_gradients" && t.max_grad_norm) tell(e, "clip_norm", *t.max_grad_norm);
    if (e.name == "repeated_batch" && t.full_batch) tell(e, "full_batch", true);
    if (e.name == "divergence" && !loss_is_progress) tell(e, "loss_is_progress", false);
    if (e.name == "train_val_gap" && t.validation_unlike_training) tell(e, "trend", true);
    if ((e.name == "initial_loss" || e.name == "chance_level") && t.chance_loss) tell(e, "chance", *t.chance_loss);
    if (e.name == "loss_not_decreasing" && t.loss_floor && bounded) tell(e, "floor", *t.loss_floor);
    if (!bounded) tell(e, "bounded_loss", false);
    if (t.line_search) tell(e, "stops_at_tolerance", true);
    add(detectors::make_detector(e.name, e.parameters));
  }
  step_findings_.reserve(16);
  configuration_ = detectors::check_configuration(t);
  for (const auto& f : configuration_) open_diagnosis_for(f);
}

MLDIAG_COMPILED_INLINE std::span<const finding> monitor::observe_evaluation(std::int64_t step, double val_loss) {
  if (open_) {
    throw error("monitor::observe_evaluation: step " + std::to_string(recorder_.current().step) +
                " is open; call it after end_step(), or observe(scalar::val_loss, v) for the open step");
  }
  const snapshot& at = recorder_.record_evaluation(step, val_loss);
  step_findings_.clear();
  detectors_.observe_evaluation({at, recorder_.past(), recorder_.names()}, step_findings_);
  await_progress(step, 0);
  escalate_awaiting(step, harm_.validation(val_loss));
  apply_declarations(0);
  for (auto& s : reports_) s->on_evaluation(at, recorder_.names());
  for (const auto& f : step_findings_) deliver(f);
  return step_findings_;
}

MLDIAG_COMPILED_INLINE std::span<const finding> monitor::end_step() {
  ensure_open();
  open_ = false;
  step_findings_.clear();
  // The task's checks predate every step: they come first, and are nobody's consequence.
  if (!configuration_delivered_) {
    configuration_delivered_ = true;
    for (const auto& f : configuration_) notify(f);
  }
  const std::size_t from = step_findings_.size();
  const snapshot& now = recorder_.end_step();
  detectors_.observe({now, recorder_.past(), recorder_.names()}, step_findings_);
  for (auto& f : pending_) step_findings_.push_back(std::move(f));
  pending_.clear();
  mark_consequences(now.step, from);
  await_progress(now.step, from);
  std::string harm = harm_.observe(now);
  if (const std::string verdict = progress_verdict(from); !verdict.empty()) harm += harm.empty() ? verdict : "; " + verdict;
  escalate_awaiting(now.step, harm);
  apply_declarations(from);
  drop_repeats(now.step, from);
  for (auto& s : reports_) s->on_step(now, recorder_.names());
  for (std::size_t i = from; i < step_findings_.size(); ++i) deliver(step_findings_[i]);
  return step_findings_;
}

MLDIAG_COMPILED_INLINE void monitor::finish() {
  if (finished_) return;
  finished_ = true;
  if (!configuration_delivered_) {  // a run that ended before its first step
    configuration_delivered_ = true;
    for (const auto& f : configuration_) notify(f);
  }
  for (auto& s : reports_) s->on_finish(*this);
}

MLDIAG_COMPILED_INLINE monitor::~monitor() {
  if (finished_ || reports_.empty()) return;
  try {
    finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
}

MLDIAG_COMPILED_INLINE protocol::evidence_phase monitor::take_diagnosis(std::size_t i) {
  if (i >= diagnoses_.size()) {
    throw error("monitor::take_diagnosis: index " + std::to_string(i) + " but " +
                std::to_string(diagnoses_.size()) + " diagnoses are open");
  }
  auto dx = std::move(diagnoses_[i].second);
  diagnoses_.erase(diagnoses_.begin() + static_cast<std::ptrdiff_t>(i));
  return dx;
}

MLDIAG_COMPILED_INLINE protocol::evidence_summary monitor::baseline() const {
  const task& t = config_.task;
  return protocol::summarize(recorder_.past(), all_findings_,
                             protocol::check_obvious(recorder_.past(), t.from_checkpoint ? 0.0 : static_cast<double>(t.classes)));
}

MLDIAG_COMPILED_INLINE void monitor::mark_consequences(std::int64_t step, std::size_t from) {
  // The run-breaking evidence itself is never a consequence; its critical findings start the horizon.
  const auto breaking_kind = [](const finding& f) { return is_run_breaking(f); };
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    const finding& f = step_findings_[i];
    if (f.severity != severity::critical || !breaking_kind(f)) continue;
    if (breaking_step_ < 0 || step - breaking_last_ > consequence_horizon) {
      breaking_step_ = step;
      breaking_symptom_ = f.symptom;
    }
    breaking_last_ = step;
  }
  if (breaking_step_ < 0 || step - breaking_last_ > consequence_horizon) return;
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    finding& f = step_findings_[i];
    if (breaking_kind(f)) continue;
    f.consequence_of = breaking_symptom_;
    f.consequence_of_step = breaking_step_;
  }
}

MLDIAG_COMPILED_INLINE void monitor::quiet(std::string_view detector, std::string_view name, std::string_view reason) {
  if (detector.empty() || name.empty())
    throw error("monitor::quiet: give a detector's name and a tensor's name (or the prefix of its tensors)");
  if (std::find(detectors::detector_names.begin(), detectors::detector_names.end(), detector) == detectors::detector_names.end() &&
      !detectors_.contains(detector))
    throw error("monitor::quiet: no detector named '" + std::string(detector) + "'; `mldiag detectors` lists them");
  quieted_.push_back({std::string(detector), std::string(name), std::string(reason)});
}

MLDIAG_COMPILED_INLINE void monitor::apply_declarations(std::size_t from) {
  if (quieted_.empty()) return;
  // A name covers itself and what lies under it ("emb" covers "emb.weight" and "emb/0"), with
  // or without the role's prefix a finding's place carries ("param/emb.weight").
  const auto covers = [](std::string_view declared, std::string_view place) {
    const auto under = [&](std::string_view tensor) {
      return tensor == declared || (tensor.size() > declared.size() && tensor.starts_with(declared) &&
                                    (tensor[declared.size()] == '.' || tensor[declared.size()] == '/'));
    };
    if (under(place)) return true;
    for (const role r : all_roles) {
      const std::string_view p = prefix(r);
      if (place.size() > p.size() && place.starts_with(p) && place[p.size()] == '/') return under(place.substr(p.size() + 1));
    }
    return false;
  };
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    finding& f = step_findings_[i];
    if (f.where.empty() || (f.severity == severity::info && !f.awaits_consequence)) continue;
    const quieted* reason = nullptr;
    std::size_t declared = 0;
    for (const auto& [place, score] : f.where) {
      for (const auto& q : quieted_) {
        if (q.detector == f.detector && covers(q.tensor, place)) {
          ++declared;
          reason = &q;
          break;
        }
      }
    }
    // Info only when every place it names was declared: one undeclared tensor keeps it.
    if (declared == f.where.size()) {
      f.severity = severity::info;
      f.awaits_consequence = false;  // what was declared does not escalate
      f.why = "declared: " + reason->tensor + " " + reason->reason + (f.why.empty() ? "" : "; was: " + f.why);
    }
  }
}

MLDIAG_COMPILED_INLINE void monitor::escalate_awaiting(std::int64_t step, const std::string& harm) {
  // Too old to be the cause of what follows: no longer watched.
  std::erase_if(awaiting_, [&](const finding& f) { return step - f.last_step > consequence_window; });
  if (harm.empty() || awaiting_.empty()) return;
  const bool read_on_metric = config_.task.objective != objective::minimized;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < awaiting_.size(); ++i) {
    finding& f = awaiting_[i];
    // objective::not_progress: a claim that held while the progress metric made most of its
    // gain is refuted by the run itself; a later dip of a noisy return is not its consequence.
    // Every delivered finding has its episode (drop_repeats), and episodes are never dropped.
    const episode_state* e = episode_of(f);
    if (read_on_metric && e != nullptr && harm_.progressed_since(e->progress)) {
      if (kept != i) awaiting_[kept] = std::move(f);
      ++kept;
      continue;
    }
    f.severity = severity::warning;
    f.why = "consequence observed at step " + std::to_string(step) + ": " + harm;
    f.awaits_consequence = false;
    f.last_step = step;
    step_findings_.push_back(std::move(f));
  }
  awaiting_.resize(kept);
}

MLDIAG_COMPILED_INLINE const monitor::episode_state* monitor::episode_of(const finding& f) const {
  const std::string_view place = f.where.empty() ? std::string_view() : std::string_view(f.where.front().first);
  for (const auto& x : episodes_)
    if (x.detector == f.detector && x.symptom == f.symptom && x.place == place) return &x;
  return nullptr;
}

MLDIAG_COMPILED_INLINE void monitor::await_progress(std::int64_t step, std::size_t from) {
  if (config_.task.objective == objective::minimized) return;
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    finding& f = step_findings_[i];
    // Critical stays immediate; the progress metric's own verdict is the consequence itself.
    if (f.question != question::convergence || f.severity != severity::warning || f.is_consequence() ||
        f.detector == std::string_view("metric_not_improving"))
      continue;
    const episode_state* e = episode_of(f);
    // Persistence is harm only where the progress metric did not rise meanwhile.
    if (e != nullptr && step - e->last <= episode_gap && step - e->first >= progress_persist && !harm_.progressed_since(e->progress)) {
      f.why += (f.why.empty() ? "" : "; ") + std::string("recurring for ") + std::to_string(step - e->first) + " steps";
      continue;
    }
    f.severity = severity::info;
    f.awaits_consequence = true;
    f.why = "the loss is not a progress measure (declared): a warning when the progress metric worsens or stops "
            "improving, or after " + std::to_string(progress_persist) + " steps" + (f.why.empty() ? "" : "; was: " + f.why);
  }
}

MLDIAG_COMPILED_INLINE std::string monitor::progress_verdict(std::size_t from) const {
  std::string verdict;
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    const finding& f = step_findings_[i];
    if (f.detector != std::string_view("metric_not_improving") || f.severity < severity::warning) continue;
    const episode_state* e = episode_of(f);
    if (e != nullptr && e->top >= f.severity) continue;  // an ongoing verdict was harm when it started
    verdict += (verdict.empty() ? "" : "; ") + std::string(f.symptom) +
               (f.where.empty() ? std::string() : " (" + f.where.front().first + ")");
  }
  return verdict;
}

MLDIAG_COMPILED_INLINE void monitor::drop_repeats(std::int64_t step, std::size_t from) {
  std::size_t kept = from;
  for (std::size_t i = from; i < step_findings_.size(); ++i) {
    finding& f = step_findings_[i];
    const std::string_view place = f.where.empty() ? std::string_view() : std::string_view(f.where.front().first);
    episode_state* e = nullptr;
    for (auto& x : episodes_)
      if (x.detector == f.detector && x.symptom == f.symptom && x.place == place) e = &x;
    const bool ongoing = e != nullptr && e->last >= 0 && step - e->last <= episode_gap;
    bool deliver = true;
    if (e == nullptr) {
      episodes_.push_back({f.detector, f.symptom, std::string(place), step, f.severity, step, harm_.mark()});
    } else {
      deliver = !ongoing || f.severity > e->top;
      e->top = ongoing ? std::max(e->top, f.severity) : f.severity;
      if (!ongoing) e->first = step;  // `progress` stays the claim's first: it may come and go
      e->last = step;
    }
    if (deliver) {
      if (kept != i) step_findings_[kept] = std::move(f);
      ++kept;
    }
  }
  step_findings_.resize(kept);
}

MLDIAG_COMPILED_INLINE void monitor::notify(const finding& f) {
  for (auto& s : reports_) s->on_finding(f);
}

MLDIAG_COMPILED_INLINE void monitor::deliver(const finding& f) {
  notify(f);
  open_diagnosis_for(f);
  // Bounded: one run's early signals, not one per step (episodes are delivered once).
  if (f.awaits_consequence && f.severity == severity::info && awaiting_.size() < 64) awaiting_.push_back(f);
}

MLDIAG_COMPILED_INLINE void monitor::open_diagnosis_for(const finding& f) {
  if (f.severity < severity::warning) return;
  // The baseline keeps the first findings: bounded, so a fault that fires every step of a
  // long run does not grow memory.
  if (all_findings_.size() < max_kept_findings) all_findings_.push_back(f);
  if (f.is_consequence()) return;  // evidence of the breaking event, not a cause of its own
  for (const auto& [opened, dx] : diagnoses_)
    if (opened.question == f.question && opened.symptom == f.symptom) return;
  diagnoses_.emplace_back(f, protocol::diagnose(f.question, {f}));
}
#endif

}  // namespace mldiag
