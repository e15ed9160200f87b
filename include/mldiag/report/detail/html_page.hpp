// SPDX-License-Identifier: Apache-2.0
/// The HTML report's page: header, loss chart, heatmap, findings and diagnosis log.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/finding.hpp"
#include "mldiag/report/detail/html_page_base.hpp"
#include "mldiag/report/detail/html_page_charts.hpp"
#include "mldiag/report/episodes.hpp"
#include "mldiag/report/html_options.hpp"
#include "mldiag/report/run_log.hpp"
#include "mldiag/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>  // std::back_inserter
#include <string>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// Writes the page; one object so that the charts share their x mapping.
class page : private page_charts {
 public:
  using page_charts::page_charts;

  [[nodiscard]] std::string render() {
    out_.reserve(1 << 20);
    head();
    summary();
    if (buckets_.count == 0) {
      out_ += "<p class=\"empty\">No steps were logged: nothing to plot.</p>\n";
    } else {
      loss_chart();
      heatmap();
    }
    findings_table();
    diagnosis_log();
    fmt::format_to(std::back_inserter(out_),
                   "<footer>mldiag {}.{}.{} &mdash; self-contained report: no script, no "
                   "network.</footer>\n</body>\n</html>\n",
                   MLDIAG_VERSION_MAJOR, MLDIAG_VERSION_MINOR, MLDIAG_VERSION_PATCH);
    return std::move(out_);
  }

 private:
  void head() {
    out_ += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    // The policy makes the promise checkable: nothing loads from anywhere but the page itself
    // and data: URIs, and no script runs; a violation shows as a console error.
    out_ +=
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'\">\n<title>";
    text(title());
    out_ += " &mdash; mldiag report</title>\n<style>\n";
    out_ +=
        R"css(body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:14px 0 6px}h4{font-size:14px;margin:4px 0}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums}
.sev-critical{color:#fff;background:#c0392b}.sev-warning{background:#f5c242}.sev-info{background:#d6e9f8}
.sev{padding:0 5px;border-radius:3px;font-size:12px}
.counts td,.counts th{padding:2px 8px}svg{display:block;font:11px monospace}
.where,.evidence{font-family:monospace;font-size:12px;margin:0;padding-left:14px}
.phase{border-left:4px solid #888;padding:2px 10px;margin:6px 0}.phase-1{border-color:#3b7dd8}
.phase-2{border-color:#8e44ad}.phase-3{border-color:#e67e22}.phase-4{border-color:#27ae60}
.phase ul{margin:2px 0;padding-left:18px}.note{color:#555;font-size:12px}
footer{margin-top:30px;color:#777;font-size:12px}
)css";
    out_ += "</style>\n</head>\n<body>\n";
  }

  void summary() {
    out_ += "<header>\n<h1>";
    text(title());
    out_ += "</h1>\n<p class=\"steps\">";
    if (buckets_.count == 0) {
      out_ += "no steps logged";
    } else {
      put("steps {} &ndash; {} ({} logged", buckets_.first, buckets_.last, run_.steps.size());
      if (buckets_.width > 1) put("; charts group {} steps per column", buckets_.width);
      out_ += ")";
    }
    put("; {} finding episodes ({} deliveries)", episodes_.size(), run_.findings.size());
    if (!run_.open_diagnoses.empty()) put("; {} open diagnoses", run_.open_diagnoses.size());
    out_ += "</p>\n";
    std::array<std::size_t, 3> by_severity{}, by_question{};
    for (const auto& e : episodes_) {
      const auto s = static_cast<std::size_t>(e.severity());
      if (s < by_severity.size()) ++by_severity[s];
      const auto q = static_cast<std::size_t>(question_number(e.question));
      if (q >= 1 && q <= 3) ++by_question[q - 1];
    }
    out_ += "<table class=\"counts\"><tr>";
    for (const auto s : {severity::critical, severity::warning, severity::info})
      put("<th>{}</th>", name(s));
    for (const auto q : {question::convergence, question::early_anomaly, question::efficiency})
      put("<th>{}</th>", name(q));
    out_ += "</tr><tr>";
    for (const auto s : {severity::critical, severity::warning, severity::info})
      put("<td class=\"num\" data-severity=\"{}\">{}</td>", name(s),
          by_severity[static_cast<std::size_t>(s)]);
    for (int q = 1; q <= 3; ++q)
      put("<td class=\"num\" data-question=\"{}\">{}</td>", q,
          by_question[static_cast<std::size_t>(q - 1)]);
    out_ += "</tr></table>\n</header>\n";
  }

  void findings_table() {
    out_ += "<section id=\"findings\">\n<h2>Findings</h2>\n";
    out_ +=
        "<p class=\"note\">One row per episode: the deliveries of one symptom at one place "
        "(its top location) with at most ";
    put("{} steps between them; the numbers are the peak delivery's (highest severity, the "
        "first among equals).</p>\n",
        opt_.episode_gap);
    for (const auto q : {question::convergence, question::early_anomaly, question::efficiency}) {
      put("<h3 data-question=\"{}\">{}</h3>\n", question_number(q), name(q));
      std::vector<const episode*> rows;
      for (const auto& e : episodes_)
        if (e.question == q) rows.push_back(&e);
      if (rows.empty()) {
        out_ += "<p class=\"note\">No findings.</p>\n";
        continue;
      }
      // Most severe first, then by start.
      std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
        if (a->severity() != b->severity()) return a->severity() > b->severity();
        return a->first_step < b->first_step;
      });
      out_ +=
          "<table class=\"findings\"><tr><th>peak severity</th><th>symptom</th><th>steps</th>"
          "<th>deliveries</th><th>peak at</th><th>where (score at the peak)</th>"
          "<th>evidence at the peak</th><th>detector</th></tr>\n";
      for (const auto* e : rows) {
        const auto& f = e->peak;
        put("<tr class=\"finding\" data-question=\"{0}\" data-severity=\"{1}\" data-step=\"{2}\" "
            "data-last-step=\"{3}\" data-count=\"{4}\"><td><span class=\"sev sev-{1}\">{1}</span>"
            "</td><td>",
            question_number(q), name(e->severity()), e->first_step, e->last_step, e->count);
        text(e->symptom);
        put("</td><td class=\"steps\">{}</td><td class=\"num\">{}</td><td class=\"num\">",
            step_span(e->first_step, e->last_step), e->count);
        const auto at = e->peak_delivered >= 0 ? e->peak_delivered : f.last_step;
        out_ += e->count > 1 ? step_span(at, at) : std::string("&mdash;");
        out_ += "</td><td><ol class=\"where\">";
        for (const auto& [n, score] : f.where) {
          out_ += "<li>";
          text(n);
          put(" ({})</li>", number(score));
        }
        out_ += "</ol>";
        // Places other deliveries named and the peak did not.
        bool first = true;
        for (const auto& p : e->places) {
          if (std::any_of(f.where.begin(), f.where.end(),
                          [&](const auto& w) { return w.first == p; }))
            continue;
          out_ += first ? "<p class=\"note also\">also at: " : ", ";
          first = false;
          text(p);
        }
        if (!first) out_ += "</p>";
        out_ += "</td><td><ul class=\"evidence\">";
        for (const auto& [n, v] : f.evidence) {
          out_ += "<li>";
          text(n);
          put(" = {}</li>", number(v));
        }
        out_ += "</ul>";
        if (!f.why.empty()) {  // the escalation policy's reason for this severity
          out_ += "<p class=\"note why\">why ";
          out_ += std::string(name(f.severity));
          out_ += ": ";
          text(f.why);
          out_ += "</p>";
        }
        if (f.is_consequence()) {
          out_ += "<p class=\"note\">a consequence of ";
          text(f.consequence_of);
          put(" at step {}</p>", f.consequence_of_step);
        }
        out_ += "</td><td>";
        text(f.detector);
        out_ += "</td></tr>\n";
      }
      out_ += "</table>\n";
    }
    out_ += "</section>\n";
  }

  void diagnosis_log() {
    out_ += "<section id=\"diagnosis\">\n<h2>Diagnosis log</h2>\n";
    if (run_.diagnosis.empty() && run_.open_diagnoses.empty()) {
      out_ += "<p class=\"note\">No diagnosis was recorded for this run.</p>\n</section>\n";
      return;
    }
    // Diagnoses still open first: what the run left to do.
    if (!run_.open_diagnoses.empty()) {
      put("<h3 class=\"open-diagnoses\">{} open {}</h3>\n", run_.open_diagnoses.size(),
          run_.open_diagnoses.size() == 1 ? "diagnosis" : "diagnoses");
      for (const auto& d : run_.open_diagnoses) {
        const int n = static_cast<int>(d.phase);
        put("<div class=\"open-diagnosis phase phase-{0}\" data-phase=\"{0}\" "
            "data-question=\"{1}\" "
            "data-opened-at=\"{2}\" data-symptom=\"",
            n, question_number(d.question), d.opened_at);
        text(d.symptom);
        put("\"><h4>open, phase {}: {} &mdash; {}: ", n, protocol::title(d.phase),
            name(d.question));
        text(d.symptom);
        put(", opened {}</h4>", d.opened_at >= 0 ? fmt::format("at step {}", d.opened_at)
                                                 : std::string("before training"));
        if (!d.log.empty()) {
          out_ += "<ul>";
          for (const auto& line : d.log) {
            out_ += "<li>";
            if (line.phase != d.phase) {
              text(protocol::label(line.phase));
              out_ += ": ";
            }
            text(line.text);
            out_ += "</li>";
          }
          out_ += "</ul>";
        }
        out_ += "</div>\n";
      }
    }
    if (run_.diagnosis.empty()) {
      out_ += "</section>\n";
      return;
    }
    if (!run_.open_diagnoses.empty()) out_ += "<h3>Recorded</h3>\n";
    // In order: a new block whenever the phase changes, so a rejected hypothesis and the
    // return to phase 3 stay visible.
    bool open = false;
    auto current = protocol::phase_id::unknown;
    for (const auto& line : run_.diagnosis) {
      if (!open || line.phase != current) {
        if (open) out_ += "</ul></div>\n";
        open = true;
        current = line.phase;
        put("<div class=\"phase phase-{0}\" data-phase=\"{0}\"><h3>Phase {0}: {1}</h3><ul>",
            line.number(), protocol::title(current));
      }
      out_ += "<li>";
      text(line.text);
      out_ += "</li>";
    }
    out_ += "</ul></div>\n</section>\n";
  }
};

}  // namespace mldiag::report::detail::html
