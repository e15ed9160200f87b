// SPDX-License-Identifier: Apache-2.0
/// The HTML page's charts: the loss curve with its finding markers, and the gradient heatmap.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/finding.hpp"
#include "mldiag/report/detail/base64.hpp"
#include "mldiag/report/detail/heatmap.hpp"
#include "mldiag/report/detail/html_page_base.hpp"
#include "mldiag/report/detail/html_text.hpp"
#include "mldiag/report/detail/png.hpp"
#include "mldiag/report/detail/step_buckets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// The page's two SVG charts, on the x mapping of page_base.
class page_charts : protected page_base {
 public:
  using page_base::page_base;

 protected:
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

    // Below the plot: the x labels, then the legend.
    constexpr double legend_y = bottom + 34;
    put("<svg class=\"loss-chart\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
        "role=\"img\" data-log-y=\"{}\">\n",
        opt_.width, legend_y + 16, opt_.width, legend_y + 16, log_y ? "true" : "false");
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
    put("<text x=\"{:.1f}\" y=\"14\" fill=\"#333\">{}{}</text>\n", plot_left_,
        loss ? (val ? "loss and val_loss" : "loss") : "val_loss",
        log_y ? fmt::format("; log scale (spans {:.1f} decades)", std::log10(hi / lo))
              : std::string("; linear scale"));

    if (loss) series(env_loss, "loss", loss_colour, "#9cc3ea", y);
    if (val) validation_series(env_val, y);
    if (loss) nonfinite_marks(env_loss, "loss", top);
    if (val) nonfinite_marks(env_val, "val_loss", top);
    const std::size_t unplaced = episode_markers(top, bottom);
    loss_legend(legend_y, loss != nullptr, val != nullptr, unplaced);
    out_ += "</svg>\n</section>\n";
  }

  static constexpr std::string_view loss_colour = "#2c6fbb", val_colour = "#d35400";

  // One marker per episode at its start. Warnings and critical ones are alarms: a line across
  // the plot (dashed amber, solid red), a triangle on top, and a bar over the episode's span.
  // Info is context: a short thin grey tick at the top edge, no line across the curve. Markers
  // in one column stack. Configuration episodes (no step) are not drawn; they are counted in
  // the legend and listed in the table. Returns how many were not drawn.
  std::size_t episode_markers(double top, double bottom) {
    std::unordered_map<std::size_t, int> stacked;
    std::size_t unplaced = 0;
    for (const auto& e : episodes_) {
      if (e.before_training()) {
        ++unplaced;
        continue;
      }
      const std::int64_t start = std::max<std::int64_t>(e.first_step, 0);
      const std::size_t b = buckets_.of(start);
      const double x = x_of_bucket(b);
      const bool alarm = e.severity() >= severity::warning;
      const std::string_view colour = severity_colour(e.severity());
      out_ += "<g class=\"finding-marker\" data-step=\"";
      put("{}\" data-last-step=\"{}\" data-count=\"{}\" data-symptom=\"", start, e.last_step,
          e.count);
      text(e.symptom);
      put("\" data-question=\"{}\" data-severity=\"{}\" data-detector=\"",
          question_number(e.question), name(e.severity()));
      text(e.peak.detector);
      out_ += "\"><title>";
      text(episode_tooltip(e));
      out_ += "</title>";
      if (!alarm) {
        put("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
            "stroke-width=\"1\"/></g>\n",
            x, top, top + 8, colour);
        continue;
      }
      const double ty = top - 4 - 8.0 * stacked[b]++;
      const bool critical = e.severity() >= severity::critical;
      put("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
          "stroke-width=\"{4}\"{5}/>",
          x, top, bottom, colour, critical ? "1.5" : "1.2",
          critical ? "" : " stroke-dasharray=\"4,3\"");
      if (e.last_step > start) {
        const double x_end = x_of_step(e.last_step);
        if (x_end > x)
          put("<line class=\"episode-span\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" "
              "y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"3\" stroke-opacity=\"0.6\"/>",
              x, x_end, ty - 3.5, ty - 3.5, colour);
      }
      put("<path d=\"M{0:.1f},{1:.1f}l-5,-7h10z\" fill=\"{2}\" stroke=\"#fff\" "
          "stroke-width=\"0.5\"/></g>\n",
          x, ty, colour);
    }
    return unplaced;
  }

  // What each mark on the loss chart means, in one row under the x axis.
  void loss_legend(double y0, bool loss, bool val, std::size_t unplaced) {
    out_ += "<g class=\"loss-legend\" font-size=\"11\"><text x=\"";
    put("{:.1f}\" y=\"{:.1f}\" fill=\"#555\" text-anchor=\"end\">legend:</text>", plot_left_ - 6,
        y0 + 4);
    double x = plot_left_;
    const auto item = [&](std::string_view kind, std::string_view swatch, std::string_view label) {
      put("<g class=\"legend-item\" data-kind=\"{}\" transform=\"translate({:.1f},{:.1f})\">{}"
          "<text x=\"22\" y=\"4\" fill=\"#333\">{}</text></g>",
          kind, x, y0, swatch, label);
      x += 34 + 6.7 * static_cast<double>(label.size());  // 11 px monospace: ~6.6 px a character
    };
    if (loss) {
      item("loss",
           fmt::format("<line x1=\"0\" x2=\"18\" y1=\"0\" y2=\"0\" stroke=\"{}\" "
                       "stroke-width=\"1.5\"/>",
                       loss_colour),
           "loss (mean; band: min-max)");
    }
    if (val) {
      item("val_loss",
           fmt::format("<line x1=\"0\" x2=\"18\" y1=\"0\" y2=\"0\" stroke=\"{0}\"/><circle "
                       "cx=\"9\" cy=\"0\" r=\"3.5\" fill=\"{0}\" stroke=\"#fff\"/>",
                       val_colour),
           "val_loss (evaluations)");
    }
    item("nonfinite",
         "<line x1=\"9\" x2=\"9\" y1=\"-6\" y2=\"6\" stroke=\"#d00\" stroke-width=\"3\"/>",
         "NaN/Inf");
    for (const auto sev : {severity::critical, severity::warning}) {
      item(name(sev),
           fmt::format("<line x1=\"9\" x2=\"9\" y1=\"-2\" y2=\"8\" stroke=\"{0}\"{1}/><path "
                       "d=\"M9,-1l-5,-7h10z\" fill=\"{0}\"/>",
                       severity_colour(sev),
                       sev == severity::warning ? " stroke-dasharray=\"2,2\"" : ""),
           name(sev));
    }
    item("info",
         fmt::format("<line x1=\"9\" x2=\"9\" y1=\"-5\" y2=\"3\" stroke=\"{}\"/>",
                     severity_colour(severity::info)),
         "info");
    if (unplaced > 0) {
      put("<text class=\"legend-note\" x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#555\">{} before "
          "training (no step): see the table</text>",
          x, y0 + 4, unplaced);
    }
    out_ += "</g>\n";
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

  // Validation losses are few and far between (an evaluation every N steps): each column that
  // has one is a point — a dark orange disc with a white rim, visible on top of the training
  // loss's band — and a thin line joins them across the steps without an evaluation (broken
  // only at a non-finite value, which gets its own mark).
  template <typename Y>
  void validation_series(const std::vector<envelope_cell>& env, const Y& y) {
    std::size_t points = 0;
    for (const auto& c : env)
      points += c.finite ? 1 : 0;
    if (points == 0) return;
    put("<path class=\"val-line\" data-metric=\"val_loss\" stroke=\"{}\" stroke-width=\"1.2\" "
        "stroke-opacity=\"0.8\" fill=\"none\" d=\"",
        val_colour);
    bool open = false;
    for (std::size_t b = 0; b < env.size(); ++b) {
      if (env[b].nonfinite() > 0 && !env[b].finite) open = false;
      if (!env[b].finite) continue;
      put("{}{:.1f},{:.1f}", open ? 'L' : 'M', x_of_bucket(b), y(env[b].mean()));
      open = true;
    }
    out_ += "\"/>\n";
    // Smaller discs when there are many, so that they stay apart.
    const double r = points <= 200 ? 3.5 : 2.5;
    put("<g class=\"val-points\" data-metric=\"val_loss\" data-points=\"{}\" fill=\"{}\" "
        "stroke=\"#fff\" stroke-width=\"1\">",
        points, val_colour);
    for (std::size_t b = 0; b < env.size(); ++b) {
      if (!env[b].finite) continue;
      put("<circle class=\"val-point\" data-step=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\">"
          "<title>val_loss {} (steps {}-{})</title></circle>",
          buckets_.begin(b), x_of_bucket(b), y(env[b].mean()), r, number(env[b].mean()),
          buckets_.begin(b), buckets_.end(b));
    }
    out_ += "</g>\n";
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

    // Episode markers: a line across the map at the start of each warning or critical
    // episode, and a box over the episode's span on every row its places name (red for an
    // alarm, grey for info). Configuration episodes have no step: not drawn.
    const double w = std::max(5.0, column_width() + 2);
    for (const auto& e : episodes_) {
      if (e.before_training()) continue;
      const std::int64_t start = std::max<std::int64_t>(e.first_step, 0);
      const bool alarm = e.severity() >= severity::warning;
      const double x = x_of_step(start), x_end = x_of_step(std::max(start, e.last_step));
      if (alarm)
        put("<line class=\"heatmap-step-line\" data-step=\"{0}\" x1=\"{1:.1f}\" x2=\"{1:.1f}\" "
            "y1=\"{2:.1f}\" y2=\"{3:.1f}\" stroke=\"{4}\" stroke-opacity=\"0.6\" "
            "stroke-dasharray=\"2,3\"/>\n",
            start, x, top - 6, bottom, severity_colour(e.severity()));
      std::vector<std::string_view> locations;
      for (const auto& place : e.places)
        if (const auto l = heatmap_location(place, g.tensor); !l.empty()) locations.push_back(l);
      if (locations.empty()) continue;
      const std::string tip = episode_tooltip(e);
      for (std::size_t r = 0; r < rows; ++r) {
        const bool named =
            std::any_of(locations.begin(), locations.end(),
                        [&](std::string_view loc) { return location_matches(loc, g.tensor[r]); });
        if (!named) continue;
        out_ += "<rect class=\"heatmap-marker\" data-tensor=\"";
        text(g.tensor[r]);
        put("\" data-step=\"{}\" data-last-step=\"{}\" data-severity=\"{}\" data-symptom=\"", start,
            e.last_step, name(e.severity()));
        text(e.symptom);
        put("\" x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"none\" "
            "stroke=\"{}\" stroke-width=\"{}\"><title>",
            x - w / 2, top + row_h * static_cast<double>(r) - 1, x_end - x + w, row_h + 2,
            alarm ? "#ff2020" : "#9a9a9a", alarm ? "1.5" : "1");
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
};

}  // namespace mldiag::report::detail::html
