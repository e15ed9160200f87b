// SPDX-License-Identifier: Apache-2.0
/// The HTML page's shared state and drawing helpers: the run, the step columns, the x mapping.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/report/detail/html_text.hpp"
#include "mldiag/report/detail/step_buckets.hpp"
#include "mldiag/report/episodes.hpp"
#include "mldiag/report/html_options.hpp"
#include "mldiag/report/run_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>  // std::back_inserter
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// The run's findings as episodes (report/episodes.hpp), in the order they began: one marker
// and one table row each, as the text report lists them.
[[nodiscard]] inline std::vector<episode> page_episodes(const run_log& run, std::int64_t gap) {
  auto out = group_episodes(run.findings, gap);
  std::stable_sort(out.begin(), out.end(),
                   [](const episode& a, const episode& b) { return a.first_step < b.first_step; });
  return out;
}

[[nodiscard]] inline int question_number(question q) noexcept {
  return static_cast<int>(q);
}

// What the parts of the page share (html_page_charts.hpp, html_page.hpp): the run, the
// options, the step columns, the episodes, the x mapping and the text written so far.
class page_base {
 public:
  page_base(const run_log& run, const html_options& opt)
      : run_(run),
        opt_(opt),
        buckets_(make_buckets(run.steps, opt.max_columns)),
        episodes_(page_episodes(run, opt.episode_gap)) {
    if (opt.width < opt.label_width + 200)
      throw error("html report: width must exceed label_width by at least 200 px");
    plot_left_ = static_cast<double>(opt.label_width);
    plot_width_ = static_cast<double>(opt.width - opt.label_width - 30);
  }

 protected:
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

  // A tooltip body for an episode: its span and count, then its peak delivery's numbers.
  [[nodiscard]] static std::string episode_tooltip(const episode& e) {
    const auto& f = e.peak;
    std::string t = fmt::format("{} ({}, {}), {}", e.symptom, name(e.severity()), name(e.question),
                                step_span(e.first_step, e.last_step));
    if (e.count > 1) t += fmt::format(", {} deliveries", e.count);
    if (!f.where.empty()) {
      t += "\nwhere:";
      for (const auto& [n, score] : f.where)
        t += fmt::format(" {} ({})", n, number(score));
    }
    if (!f.evidence.empty()) {
      t += e.count > 1 ? "\nevidence at the peak:" : "\nevidence:";
      for (const auto& [n, v] : f.evidence)
        t += fmt::format(" {}={}", n, number(v));
    }
    if (!f.detector.empty()) t += "\ndetector: " + f.detector;
    if (f.is_consequence())
      t += fmt::format("\na consequence of {} at step {}", f.consequence_of, f.consequence_of_step);
    return t;
  }

  [[nodiscard]] static std::string_view severity_colour(severity s) noexcept {
    switch (s) {
      case severity::critical:
        return "#c0392b";
      case severity::warning:
        return "#e09b00";
      case severity::info:
        return "#8a8a8a";  // grey: info is context, not an alarm
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

  const run_log& run_;
  const html_options& opt_;
  step_buckets buckets_;
  std::vector<episode> episodes_;
  double plot_left_ = 0, plot_width_ = 0;
  std::string out_;
};

}  // namespace mldiag::report::detail::html
