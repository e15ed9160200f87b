// SPDX-License-Identifier: Apache-2.0
/// `console_sink`: a monitor sink that prints a finding once per episode onset, and again when
/// its severity rises or a new place joins — one readable line each, to stderr or a stream.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/vocab/finding.hpp"
#include "mldiag/report/episodes.hpp"
#include "mldiag/report/format.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>  // std::back_inserter
#include <memory>    // std::shared_ptr: copies of a sink share its episodes
#include <ostream>
#include <string>

namespace mldiag::inline MLDIAG_ABI::report {

/// What a console sink prints.
struct console_options {
  /// Episodes below this severity are tracked (a rise out of them is news) but not printed.
  mldiag::severity min_severity = mldiag::severity::warning;
  /// The episode rule's gap in steps (`default_episode_gap`, episodes.hpp).
  std::int64_t gap = default_episode_gap;
  /// At most this many evidence numbers on a line.
  std::size_t max_evidence = 3;
};

/// Prints findings as they are delivered, once per episode (episodes.hpp): a line at the
/// onset, and a line when the episode's severity rises above its peak or a place it had not
/// named joins; nothing for the repeats in between. A detector that fires at every step for
/// 7,500 steps prints one line. Lines start with "mldiag: " and are flushed as written, so a
/// run that crashes keeps them:
///
///     mldiag: warning Q1 convergence: exploding gradients (steps 120-131) at grad/fc1.weight
///     [grad_norm=31.6 ratio_to_median=30.2] (new) mldiag: critical Q1 convergence: exploding
///     gradients (steps 120-140) at grad/fc1.weight [...] (up from warning; episode since step 120,
///     21 deliveries)
///
/// Copies share one state (the episodes seen so far): keep a copy to read `episodes()` after
/// the run. The stream or FILE* must outlive the sink; the sink is for one thread (the
/// monitor's).
///
/// **Example**
/// ```cpp
/// mldiag::monitor mon;
/// mon.attach(mldiag::report::console_sink());  // stderr, warnings and above
/// ```
class console_sink {
 public:
  /// Prints to `out` (stderr by default). Throws mldiag::error on a null FILE* or a negative gap.
  explicit console_sink(std::FILE* out = stderr, const console_options& o = {})
      : s_(std::make_shared<state>(o)) {
    if (out == nullptr)
      throw error("console_sink: the FILE* is null; pass stderr, stdout or an open file");
    s_->file = out;
  }
  /// Prints to `out`, which must outlive the sink.
  explicit console_sink(std::ostream& out, const console_options& o = {})
      : s_(std::make_shared<state>(o)) {
    s_->stream = &out;
  }

  void operator()(const finding& f) const {
    state& s = *s_;
    const episode_news news = s.tracker.add(f);
    if (!news.is_news() || f.severity < s.options.min_severity) return;
    s.line.clear();
    append_line(s.line, f, news, s.tracker.episodes()[news.episode], s.options);
    if (s.file != nullptr) {
      std::fputs(s.line.c_str(), s.file);
      std::fflush(s.file);
    } else {
      s.stream->write(s.line.data(), static_cast<std::streamsize>(s.line.size()));
      s.stream->flush();
    }
    ++s.lines;
  }

  /// The episodes seen so far (printed or not).
  [[nodiscard]] const std::vector<episode>& episodes() const noexcept {
    return s_->tracker.episodes();
  }
  /// How many lines the sink has printed.
  [[nodiscard]] std::size_t lines() const noexcept { return s_->lines; }

  /// The line the sink prints for a delivery with this news (ending in '\n'), appended to `out`.
  static void append_line(std::string& out, const finding& f, const episode_news& news,
                          const episode& e, const console_options& o = {}) {
    auto it = std::back_inserter(out);
    out += "mldiag: ";
    detail::format_finding(it, f, false);
    if (!f.evidence.empty() && o.max_evidence > 0) {
      out += " [";
      for (std::size_t i = 0; i < f.evidence.size() && i < o.max_evidence; ++i)
        fmt::format_to(it, "{}{}={:.4g}", i ? " " : "", f.evidence[i].first, f.evidence[i].second);
      if (f.evidence.size() > o.max_evidence) out += " ...";
      out += ']';
    }
    if (f.is_consequence())
      fmt::format_to(it, " (a consequence of {} at step {})", f.consequence_of,
                     f.consequence_of_step);
    if (news.onset) {
      out += " (new)\n";
      return;
    }
    out += " (";
    if (news.severity_rose) fmt::format_to(it, "up from {}", name(news.previous_peak));
    if (!news.new_places.empty()) {
      if (news.severity_rose) out += "; ";
      out += "now also at ";
      for (std::size_t i = 0; i < news.new_places.size() && i < 3; ++i)
        fmt::format_to(it, "{}{}", i ? ", " : "", news.new_places[i]);
      if (news.new_places.size() > 3)
        fmt::format_to(it, " and {} more", news.new_places.size() - 3);
    }
    fmt::format_to(it, "; episode since {}, {} deliveries)\n",
                   e.before_training() ? "before training" : "step " + std::to_string(e.first_step),
                   e.count);
  }

 private:
  struct state {
    explicit state(const console_options& o) : options(o), tracker(o.gap) {}
    console_options options;
    episode_tracker tracker;
    std::FILE* file = nullptr;
    std::ostream* stream = nullptr;
    std::string line;  // reused: a printed line allocates only when longer than any before
    std::size_t lines = 0;
  };
  std::shared_ptr<state> s_;
};

}  // namespace mldiag::report
