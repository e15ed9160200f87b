// SPDX-License-Identifier: Apache-2.0
/// Reports for a monitor in one line each: a JSON Lines file written as the run goes, and the
/// HTML report written at the end of the run.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/monitor.hpp"
#include "mldiag/report/html.hpp"
#include "mldiag/report/jsonl.hpp"
#include "mldiag/report/run_log.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace mldiag::inline MLDIAG_ABI::report {
namespace detail {

// The JSON Lines file of a monitor: a step line per closed step, an evaluation line, a line
// per finding (at the step it was delivered), and at the end the log of every diagnosis still
// open in the monitor.
class jsonl_report final : public monitor_sink {
 public:
  jsonl_report(const std::filesystem::path& path, std::string_view title) : out_(path, title) {}
  void on_step(const snapshot& s, const name_table& names) override {
    step_ = s.step;
    out_.step(s, names);
  }
  void on_evaluation(const snapshot& s, const name_table&) override {
    step_ = s.step;
    out_.evaluation(s.step, s.val_loss.value_or(std::numeric_limits<double>::quiet_NaN()));
  }
  void on_finding(const finding& f) override { out_.finding(step_, f); }
  void on_finish(const monitor& mon) override {
    for (std::size_t i = 0; i < mon.open_diagnoses(); ++i)
      for (const auto& e : mon.open_diagnosis(i).log()) out_.diagnosis(e);
  }

 private:
  jsonl_sink out_;
  std::int64_t step_ = -1;
};

// The run as the HTML page draws it, collected step by step: loss, val_loss, lr, loss scale,
// the global gradient norm and each gradient's norm (8 bytes per value and step), the
// findings, and at the end the open diagnoses (run_log::open_diagnoses).
class html_report final : public monitor_sink {
 public:
  html_report(std::filesystem::path path, std::string_view title, html_options o) : path_(std::move(path)), options_(std::move(o)) {
    run_.title = std::string(title);
  }
  void on_step(const snapshot& s, const name_table& names) override {
    step_ = s.step;
    run_.add_step(s.step);
    for (const scalar m : {scalar::loss, scalar::val_loss, scalar::learning_rate, scalar::loss_scale})
      if (const auto& v = s.of(m)) run_.set(metric_name(m), *v);
    if (const auto g = s.global_grad_norm()) run_.set(metric_name(scalar::grad_norm), *g);
    for (const auto& t : s.gradients) {
      key_.assign("grad/");
      key_ += names[t.id];
      key_ += "/norm";
      run_.set(key_, norm_of(t.stats));
    }
  }
  void on_evaluation(const snapshot& s, const name_table&) override {
    for (std::size_t i = run_.steps.size(); i-- > 0;) {
      if (run_.steps[i] != s.step) continue;
      run_.metric_values[run_.column("val_loss")][i] = s.val_loss.value_or(std::numeric_limits<double>::quiet_NaN());
      return;
    }
  }
  void on_finding(const finding& f) override { run_.findings.push_back({step_, f}); }
  void on_finish(const monitor& mon) override {
    for (std::size_t i = 0; i < mon.open_diagnoses(); ++i) {
      const finding& by = mon.opened_by(i);
      run_.open_diagnoses.push_back({by.question, by.symptom, by.first_step, protocol::phase_id::evidence, mon.open_diagnosis(i).log()});
    }
    write_html(run_, path_, options_);
  }

 private:
  std::filesystem::path path_;
  html_options options_;
  run_log run_;
  std::string key_;
  std::int64_t step_ = -1;
};

}  // namespace detail

/// Writes the monitor's run to `path` as JSON Lines (docs/formats.md) while it goes: each
/// line flushed when written, so a crash keeps the log up to the crash. Throws mldiag::error
/// naming the file when it cannot be written.
///
/// **Example**
/// ```cpp
/// mldiag::monitor mon({.classes = 10});
/// mldiag::report::attach_jsonl(mon, "run.jsonl");
/// ```
inline void attach_jsonl(monitor& mon, const std::filesystem::path& path, std::string_view title = {}) {
  mon.attach(std::make_unique<detail::jsonl_report>(path, title));
}

/// Writes the HTML report of the monitor's run (report/html.hpp) to `path` when the run ends:
/// at `mon.finish()`, or when the monitor is destroyed. It keeps what the page draws — the
/// loss, validation loss, learning rate, the global and each gradient's norm at every step
/// (8 bytes a value: 10,000 steps of 300 gradients are 24 MB) — and the findings.
///
/// **Example**
/// ```cpp
/// mldiag::report::attach_html(mon, "report.html");
/// ```
inline void attach_html(monitor& mon, const std::filesystem::path& path, std::string_view title = {},
                        html_options options = {}) {
  mon.attach(std::make_unique<detail::html_report>(path, title, std::move(options)));
}

}  // namespace mldiag::report
