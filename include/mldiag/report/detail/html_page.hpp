// SPDX-License-Identifier: Apache-2.0
/// The HTML report's page: header, loss chart, heatmap, findings and diagnosis log.
#pragma once

#include "mldiag/core/error.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/report/detail/base64.hpp"
#include "mldiag/report/detail/heatmap.hpp"
#include "mldiag/report/detail/html_text.hpp"
#include "mldiag/report/detail/png.hpp"
#include "mldiag/report/detail/step_buckets.hpp"
#include "mldiag/report/html_options.hpp"
#include "mldiag/report/run_log.hpp"
#include "mldiag/report/text.hpp"  // group_findings
#include "mldiag/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>  // std::back_inserter
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::report::detail::html {

// Repeated deliveries of one finding as one row and one marker: the grouping of the text
// report (report/text.hpp, `group_findings`), so both reports count the same.
struct collapsed_finding {
  finding f;
  std::size_t count = 0;
  std::int64_t first_delivered = 0, last_delivered = 0;
};

[[nodiscard]] inline std::vector<collapsed_finding> collapse(
    const std::vector<logged_finding>& findings, const std::vector<std::int64_t>& steps) {
  std::vector<collapsed_finding> out;
  for (auto& g : group_findings(findings, steps))
    out.push_back({std::move(g.f), g.deliveries, g.delivered_first, g.delivered_last});
  // In the order they were first delivered (group_findings orders by question for the text).
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first_delivered < b.first_delivered;
  });
  return out;
}

[[nodiscard]] inline int question_number(question q) noexcept {
  return static_cast<int>(q);
}


// Writes the page; one object so that the charts share their x mapping.
class page {
 public:
  page(const run_log& run, const html_options& opt)
      : run_(run),
        opt_(opt),
        buckets_(make_buckets(run.steps, opt.max_columns)),
        findings_(collapse(run.findings, run.steps)) {
    if (opt.width < opt.label_width + 200)
      throw error("html report: width must exceed label_width by at least 200 px");
    plot_left_ = static_cast<double>(opt.label_width);
    plot_width_ = static_cast<double>(opt.width - opt.label_width - 30);
  }

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
  template <typename... Args>
  void put(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out_), f, std::forward<Args>(args)...);
  }
  void text(std::string_view s) { escape_to(out_, s); }

  [[nodiscard]] double column_width() const noexcept {
    return plot_width_ / static_cast<double>(buckets_.count);
  }
  [[nodiscard]] double x_of_bucket(std::size_t b) const noexcept {
    return plot_left_ + (static_cast<double>(b) + 0.5) * column_width();
  }
  [[nodiscard]] double x_of_step(std::int64_t step) const noexcept {
    return x_of_bucket(buckets_.of(step));
  }

  [[nodiscard]] std::string title() const {
    return run_.title.empty() ? std::string("mldiag run") : run_.title;
  }

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
h3{font-size:15px;margin:14px 0 6px}
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
    put("; {} findings ({} deliveries)</p>\n", findings_.size(), run_.findings.size());
    std::array<std::size_t, 3> by_severity{}, by_question{};
    for (const auto& c : findings_) {
      const auto s = static_cast<std::size_t>(c.f.severity);
      if (s < by_severity.size()) ++by_severity[s];
      const auto q = static_cast<std::size_t>(question_number(c.f.question));
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

  // A tooltip body for a finding.
  [[nodiscard]] static std::string finding_tooltip(const collapsed_finding& c) {
    const auto& f = c.f;
    std::string t = fmt::format("{} ({}, {}) at step {}", f.symptom, name(f.severity),
                                name(f.question), f.first_step);
    if (f.last_step != f.first_step) t += fmt::format(" to {}", f.last_step);
    if (!f.where.empty()) {
      t += "\nwhere:";
      for (const auto& [n, score] : f.where)
        t += fmt::format(" {} ({})", n, number(score));
    }
    if (!f.evidence.empty()) {
      t += "\nevidence:";
      for (const auto& [n, v] : f.evidence)
        t += fmt::format(" {}={}", n, number(v));
    }
    if (!f.detector.empty()) t += "\ndetector: " + f.detector;
    if (c.count > 1) t += fmt::format("\ndelivered {} times", c.count);
    return t;
  }

  [[nodiscard]] static std::string_view severity_colour(severity s) noexcept {
    switch (s) {
      case severity::critical:
        return "#c0392b";
      case severity::warning:
        return "#e09b00";
      case severity::info:
        return "#3b7dd8";
    }
    return "#555";
  }

  // The round value (1, 2 or 5 times a power of ten) at or above `raw`.
  [[nodiscard]] static double round_tick(double raw) noexcept {
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    return raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
  }

  void x_axis(double y_top, double y_bottom) {
    // About 8 ticks at round step values (1, 2 or 5 times a power of ten, at least 1), in
    // integers: near 1e18 a double cannot step by a small tick.
    const std::uint64_t d = step_buckets::distance(buckets_.first, buckets_.last);
    const auto tick = static_cast<std::int64_t>(
        std::min(round_tick(std::max(1.0, static_cast<double>(d) / 8)), 4e18));
    const std::int64_t rem = ((buckets_.first % tick) + tick) % tick;
    const std::uint64_t offset = rem == 0 ? 0 : static_cast<std::uint64_t>(tick - rem);
    out_ += "<g class=\"x-axis\" stroke=\"#ddd\">";
    for (std::uint64_t k = 0; k < 12; ++k) {
      const std::uint64_t at = offset + k * static_cast<std::uint64_t>(tick);
      if (at > d || (k > 0 && at < offset)) break;
      const auto s = static_cast<std::int64_t>(static_cast<std::uint64_t>(buckets_.first) + at);
      const double x = x_of_step(s);
      put("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", x, x, y_top, y_bottom);
      put("<text x=\"{:.1f}\" y=\"{:.1f}\" stroke=\"none\" fill=\"#555\" "
          "text-anchor=\"middle\">{}</text>",
          x, y_bottom + 13, s);
    }
    out_ += "</g>\n";
  }

  void loss_chart() {
    const auto* loss = run_.metric("loss");
    const auto* val = run_.metric("val_loss");
    out_ += "<section id=\"loss\">\n<h2>Loss</h2>\n";
    if (!loss && !val) {
      out_ += "<p class=\"empty\">This run logged no <code>loss</code>.</p>\n</section>\n";
      return;
    }
    std::vector<envelope_cell> env_loss, env_val;
    if (loss) envelope(buckets_, run_.steps, *loss, env_loss);
    if (val) envelope(buckets_, run_.steps, *val, env_val);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto* env : {&env_loss, &env_val})
      for (const auto& c : *env)
        if (c.finite) {
          lo = std::min(lo, c.min);
          hi = std::max(hi, c.max);
        }
    const bool any = hi >= lo;
    if (!any) lo = 0, hi = 1;
    const bool log_y = any && lo > 0 && std::log10(hi / lo) > opt_.log_scale_decades;
    const auto tr = [log_y](double v) { return log_y ? std::log10(v) : v; };
    double t_lo = tr(lo), t_hi = tr(hi);
    if (t_hi - t_lo <= 0) t_lo -= 0.5, t_hi += 0.5;
    const double pad = (t_hi - t_lo) * 0.05;
    t_lo -= pad;
    t_hi += pad;
    constexpr double top = 34, height = 300, bottom = top + height;
    const auto y = [&](double v) { return bottom - (tr(v) - t_lo) / (t_hi - t_lo) * height; };

    put("<svg class=\"loss-chart\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
        "role=\"img\" data-log-y=\"{}\">\n",
        opt_.width, bottom + 40, opt_.width, bottom + 40, log_y ? "true" : "false");
    put("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fcfcfc\" "
        "stroke=\"#bbb\"/>\n",
        plot_left_, top, plot_width_, height);
    x_axis(top, bottom);
    // y ticks: decades on a log axis, ~6 round values on a linear one.
    out_ += "<g class=\"y-axis\" stroke=\"#e4e4e4\">";
    const auto y_tick = [&](double v, std::string_view label) {
      put("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text x=\"{:.1f}\" "
          "y=\"{:.1f}\" stroke=\"none\" fill=\"#555\" text-anchor=\"end\">{}</text>",
          plot_left_, plot_left_ + plot_width_, y(v), y(v), plot_left_ - 4, y(v) + 4, label);
    };
    if (log_y) {
      // At most ~12 labels: every decade, or every n-th over a wide range.
      const double every = std::max(1.0, std::ceil((t_hi - t_lo) / 12));
      for (int k = 0; k < 14; ++k) {
        const double d = std::ceil(t_lo / every) * every + k * every;
        if (d > t_hi) break;
        y_tick(std::pow(10.0, d), fmt::format("1e{}", d));
      }
    } else {
      // Counted, not accumulated: near 1e17 a small tick would not move a double.
      const double tick = round_tick((t_hi - t_lo) / 6);
      const double start = std::ceil(t_lo / tick) * tick;
      for (int k = 0; k < 14; ++k) {
        const double v = start + k * tick;
        if (v > t_hi) break;
        y_tick(v, number(std::abs(v) < tick * 1e-9 ? 0.0 : v));
      }
    }
    out_ += "</g>\n";
    put("<text x=\"{:.1f}\" y=\"14\" fill=\"#333\">loss{}{}</text>\n", plot_left_,
        val ? " (blue) and val_loss (orange)" : "",
        log_y ? fmt::format("; log scale (spans {:.1f} decades)", std::log10(hi / lo))
              : std::string("; linear scale"));
    put("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#666\">band: min-max of each column; line: "
        "mean</text>\n",
        plot_left_, bottom + 30);

    if (loss) series(env_loss, "loss", "#2c6fbb", "#9cc3ea", y);
    if (val) series(env_val, "val_loss", "#e67e22", "#f6c89a", y);
    if (loss) nonfinite_marks(env_loss, "loss", top);
    if (val) nonfinite_marks(env_val, "val_loss", top);

    // Finding markers: a dashed line at the first step and a triangle on top, stacked when
    // several fall in one column.
    std::unordered_map<std::size_t, int> stacked;
    for (const auto& c : findings_) {
      const auto& f = c.f;
      const std::size_t b = buckets_.of(f.first_step);
      const double x = x_of_bucket(b);
      const double ty = top - 4 - 7.0 * stacked[b]++;
      out_ += "<g class=\"finding-marker\" data-step=\"";
      put("{}\" data-symptom=\"", f.first_step);
      text(f.symptom);
      put("\" data-question=\"{}\" data-severity=\"{}\" data-detector=\"",
          question_number(f.question), name(f.severity));
      text(f.detector);
      out_ += "\"><title>";
      text(finding_tooltip(c));
      put("</title><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"{3}\" "
          "stroke-dasharray=\"3,3\"/><path d=\"M{0:.1f},{4:.1f}l-5,-7h10z\" fill=\"{3}\" "
          "stroke=\"#fff\" stroke-width=\"0.5\"/></g>\n",
          x, top, bottom, severity_colour(f.severity), ty);
    }
    out_ += "</svg>\n</section>\n";
  }

  template <typename Y>
  void series(const std::vector<envelope_cell>& env, std::string_view metric,
              std::string_view line_colour, std::string_view band_colour, const Y& y) {
    // The band: one vertical segment per column from min to max, at least 1 px wide, so a
    // one-step spike stays visible however many steps share its column.
    put("<path class=\"envelope\" data-metric=\"{}\" stroke=\"{}\" stroke-width=\"{:.2f}\" "
        "fill=\"none\" d=\"",
        metric, band_colour, std::max(1.0, column_width()));
    for (std::size_t b = 0; b < env.size(); ++b)
      if (env[b].finite && env[b].max > env[b].min)
        put("M{:.1f},{:.1f}V{:.1f}", x_of_bucket(b), y(env[b].max), y(env[b].min));
    out_ += "\"/>\n";
    // The mean line, broken where a column has no finite value (absent steps leave gaps;
    // non-finite ones get their own marks); a lone column becomes a dot.
    put("<path class=\"mean\" data-metric=\"{}\" stroke=\"{}\" stroke-width=\"1.3\" fill=\"none\" "
        "d=\"",
        metric, line_colour);
    std::vector<std::size_t> lone;
    for (std::size_t b = 0; b < env.size(); ++b) {
      if (!env[b].finite) continue;
      const bool starts = b == 0 || !env[b - 1].finite;
      const bool ends = b + 1 == env.size() || !env[b + 1].finite;
      if (starts && ends) {
        lone.push_back(b);
        continue;
      }
      put("{}{:.1f},{:.1f}", starts ? 'M' : 'L', x_of_bucket(b), y(env[b].mean()));
    }
    out_ += "\"/>\n";
    if (!lone.empty()) {
      put("<g class=\"points\" data-metric=\"{}\" fill=\"{}\">", metric, line_colour);
      for (const auto b : lone)
        put("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\"/>", x_of_bucket(b), y(env[b].mean()));
      out_ += "</g>\n";
    }
  }

  void nonfinite_marks(const std::vector<envelope_cell>& env, std::string_view metric, double top) {
    bool labelled = false;
    for (std::size_t b = 0; b < env.size(); ++b) {
      const auto& c = env[b];
      if (!c.nonfinite()) continue;
      const double x = x_of_bucket(b);
      put("<g class=\"nonfinite-mark\" data-metric=\"{}\" data-step=\"{}\" data-value=\"{}\">"
          "<title>{} {} at step {}",
          metric, c.first_nonfinite_step, number(c.first_nonfinite_value), metric,
          number(c.first_nonfinite_value), c.first_nonfinite_step);
      if (c.nonfinite() > 1 || c.finite)
        put(" ({} NaN, {} +Inf, {} -Inf, {} finite in steps {}-{})", c.nan, c.pos_inf, c.neg_inf,
            c.finite, buckets_.begin(b), buckets_.end(b));
      put("</title><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"#d00\" stroke-width=\"{3:.1f}\"/>",
          x, top, top + 14, std::max(2.0, column_width()));
      if (!labelled) {
        put("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d00\">NaN/Inf at step {}</text>", x + 4,
            top + 12, c.first_nonfinite_step);
        labelled = true;
      }
      out_ += "</g>\n";
    }
  }

  void heatmap() {
    out_ += "<section id=\"heatmap\">\n<h2>Gradient norm per tensor</h2>\n";
    const heatmap_grid g = make_heatmap(run_, buckets_);
    const std::size_t rows = g.metric.size();
    if (rows == 0) {
      out_ +=
          "<p class=\"empty\">This run logged no per-tensor gradient norms "
          "(<code>grad/&lt;tensor&gt;/norm</code>).</p>\n</section>\n";
      return;
    }
    const double row_h =
        std::clamp(opt_.max_heatmap_height / static_cast<double>(rows), opt_.min_row_height, 14.0);
    // Labels are 11 px tall: label every k-th row so that they never overlap.
    const auto every = static_cast<std::size_t>(std::ceil(11.0 / row_h));
    constexpr double top = 60;
    const double height = row_h * static_cast<double>(rows);
    const double bottom = top + height;
    put("<p class=\"note\">Colour: log10 of the largest norm in each column; magenta: NaN/Inf in "
        "the column; black: zero; grey: not logged.{}</p>\n",
        every > 1 ? fmt::format(" {} rows: every {}th is labelled (hover a label area for each "
                                "row's full name).",
                                rows, every)
                  : std::string());
    put("<svg class=\"heatmap\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
        "role=\"img\" data-rows=\"{}\" data-columns=\"{}\">\n",
        opt_.width, bottom + 24, opt_.width, bottom + 24, rows, g.columns);
    legend(g);

    std::vector<unsigned char> pixels(rows * g.columns);
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = g.index(g.cell[i]);
    const auto palette = heatmap_palette();
    const std::string png = png_indexed(g.columns, rows, palette, pixels);
    // image-rendering: each cell stays a sharp block when the image is stretched.
    put("<image x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" "
        "href=\"data:image/png;base64,",
        plot_left_, top, plot_width_, height);
    out_ += base64(png);
    out_ += "\"/>\n";
    put("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
        "stroke=\"#bbb\"/>\n",
        plot_left_, top, plot_width_, height);
    x_axis(bottom, bottom + 2);

    // Row labels: each row has a hover area with its full name; every k-th shows it.
    out_ += "<g class=\"row-labels\">\n";
    const std::size_t max_chars = static_cast<std::size_t>(std::max(8, opt_.label_width / 7 - 2));
    for (std::size_t r = 0; r < rows; ++r) {
      const double ry = top + row_h * static_cast<double>(r);
      out_ += "<g class=\"heatmap-row\" data-tensor=\"";
      text(g.tensor[r]);
      put("\" data-row=\"{}\"><title>", r);
      text(g.tensor[r]);
      put("</title><rect x=\"0\" y=\"{:.2f}\" width=\"{:.1f}\" height=\"{:.2f}\" "
          "fill=\"transparent\"/>",
          ry, plot_left_ - 2, row_h);
      if (r % every == 0) {
        std::string_view label = g.tensor[r];
        // Long names keep their tail: the leaf (`...attn.qkv.weight`) tells layers apart.
        const bool cut = label.size() > max_chars;
        if (cut) label = label.substr(label.size() - (max_chars - 1));
        put("<text x=\"{:.1f}\" y=\"{:.2f}\" text-anchor=\"end\" font-size=\"10\">{}",
            plot_left_ - 4, ry + std::min(row_h, 11.0) / 2 + 4, cut ? "\u2026" : "");
        text(label);
        out_ += "</text>";
      }
      out_ += "</g>\n";
    }
    out_ += "</g>\n";

    // Finding markers: a line across the map at the first step, and a box on every row whose
    // tensor the finding's locations name.
    for (const auto& c : findings_) {
      const auto& f = c.f;
      const double x = x_of_step(f.first_step);
      put("<line class=\"heatmap-step-line\" data-step=\"{0}\" x1=\"{1:.1f}\" x2=\"{1:.1f}\" "
          "y1=\"{2:.1f}\" y2=\"{3:.1f}\" stroke=\"{4}\" stroke-opacity=\"0.6\" "
          "stroke-dasharray=\"2,3\"/>\n",
          f.first_step, x, top - 6, bottom, severity_colour(f.severity));
      const std::string tip = finding_tooltip(c);
      const double w = std::max(5.0, column_width() + 2);
      std::vector<std::string_view> locations;
      for (const auto& loc : f.where)
        if (const auto l = heatmap_location(loc.first, g.tensor); !l.empty())
          locations.push_back(l);
      for (std::size_t r = 0; r < rows; ++r) {
        const bool named =
            std::any_of(locations.begin(), locations.end(),
                        [&](std::string_view loc) { return location_matches(loc, g.tensor[r]); });
        if (!named) continue;
        out_ += "<rect class=\"heatmap-marker\" data-tensor=\"";
        text(g.tensor[r]);
        put("\" data-step=\"{}\" data-symptom=\"", f.first_step);
        text(f.symptom);
        put("\" x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"none\" "
            "stroke=\"{}\" stroke-width=\"1.5\"><title>",
            x - w / 2, top + row_h * static_cast<double>(r) - 1, w, row_h + 2, "#ff2020");
        text(g.tensor[r]);
        out_ += ": ";
        text(tip);
        out_ += "</title></rect>\n";
      }
    }
    out_ += "</svg>\n</section>\n";
  }

  void legend(const heatmap_grid& g) {
    const auto palette = heatmap_palette();
    constexpr double y0 = 8, h = 12, cell = 8;
    const double x0 = plot_left_;
    out_ += "<g class=\"legend\">";
    const auto hex = [](const rgb& c) {
      return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
    };
    for (int i = 0; i < heatmap_levels; ++i)
      put("<rect x=\"{:.1f}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", x0 + cell * i, y0,
          cell, h, hex(palette[static_cast<std::size_t>(cell_first_level + i)]));
    const double x_end = x0 + cell * heatmap_levels;
    if (g.any_positive)
      put("<text class=\"legend-lo\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
          "<text class=\"legend-hi\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
          "<text x=\"{:.1f}\" y=\"{}\">norm (log10 {:.2f} to {:.2f})</text>",
          x0, y0 + h + 12, number(std::pow(10.0, g.lo)), x_end, y0 + h + 12,
          number(std::pow(10.0, g.hi)), x_end + 40, y0 + 10, g.lo, g.hi);
    else
      put("<text x=\"{:.1f}\" y=\"{}\">no positive finite norm</text>", x_end + 40, y0 + 10);
    const double x1 = x_end + 260;
    const std::array<std::pair<unsigned char, std::string_view>, 3> special{
        {{cell_nonfinite, "NaN/Inf"}, {cell_nonpositive, "zero"}, {cell_absent, "not logged"}}};
    for (std::size_t i = 0; i < special.size(); ++i) {
      const double x = x1 + 110.0 * static_cast<double>(i);
      put("<rect x=\"{:.1f}\" y=\"{}\" width=\"12\" height=\"{}\" fill=\"{}\" stroke=\"#999\"/>"
          "<text x=\"{:.1f}\" y=\"{}\">{}</text>",
          x, y0, h, hex(palette[special[i].first]), x + 16, y0 + 10, special[i].second);
    }
    out_ += "</g>\n";
  }

  void findings_table() {
    out_ += "<section id=\"findings\">\n<h2>Findings</h2>\n";
    for (const auto q : {question::convergence, question::early_anomaly, question::efficiency}) {
      put("<h3 data-question=\"{}\">{}</h3>\n", question_number(q), name(q));
      std::vector<const collapsed_finding*> rows;
      for (const auto& c : findings_)
        if (c.f.question == q) rows.push_back(&c);
      if (rows.empty()) {
        out_ += "<p class=\"note\">No findings.</p>\n";
        continue;
      }
      // Most severe first, then by first step.
      std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
        if (a->f.severity != b->f.severity) return a->f.severity > b->f.severity;
        return a->f.first_step < b->f.first_step;
      });
      out_ +=
          "<table class=\"findings\"><tr><th>severity</th><th>symptom</th><th>first step</th>"
          "<th>last step</th><th>where (score)</th><th>evidence</th><th>detector</th>"
          "<th>deliveries</th></tr>\n";
      for (const auto* c : rows) {
        const auto& f = c->f;
        put("<tr class=\"finding\" data-question=\"{0}\" data-severity=\"{1}\" data-step=\"{2}\">"
            "<td><span class=\"sev sev-{1}\">{1}</span></td><td>",
            question_number(q), name(f.severity), f.first_step);
        text(f.symptom);
        put("</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td><ol class=\"where\">",
            f.first_step, f.last_step);
        for (const auto& [n, score] : f.where) {
          out_ += "<li>";
          text(n);
          put(" ({})</li>", number(score));
        }
        out_ += "</ol></td><td><ul class=\"evidence\">";
        for (const auto& [n, v] : f.evidence) {
          out_ += "<li>";
          text(n);
          put(" = {}</li>", number(v));
        }
        out_ += "</ul></td><td>";
        text(f.detector);
        put("</td><td class=\"num\" data-count=\"{0}\">{0}", c->count);
        if (c->count > 1) put(" (steps {}&ndash;{})", c->first_delivered, c->last_delivered);
        out_ += "</td></tr>\n";
      }
      out_ += "</table>\n";
    }
    out_ += "</section>\n";
  }

  void diagnosis_log() {
    out_ += "<section id=\"diagnosis\">\n<h2>Diagnosis log</h2>\n";
    if (run_.diagnosis.empty()) {
      out_ += "<p class=\"note\">No diagnosis was recorded for this run.</p>\n</section>\n";
      return;
    }
    // In order: a new block whenever the phase changes, so a rejected hypothesis and the
    // return to phase 3 stay visible.
    bool open = false;
    auto current = protocol::phase_id::unknown;
    for (const auto& line : run_.diagnosis) {
      if (!open || line.phase != current) {
        if (open) out_ += "</ul></div>\n";
        open = true;
        current = line.phase;
        put("<div class=\"phase phase-{0}\" data-phase=\"{0}\"><h3>Phase {0}: {1}</h3><ul>", line.number(),
            protocol::title(current));
      }
      out_ += "<li>";
      text(line.text);
      out_ += "</li>";
    }
    out_ += "</ul></div>\n</section>\n";
  }

  const run_log& run_;
  const html_options& opt_;
  step_buckets buckets_;
  std::vector<collapsed_finding> findings_;
  double plot_left_ = 0, plot_width_ = 0;
  std::string out_;
};

}  // namespace mldiag::report::detail::html
