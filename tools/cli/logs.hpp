// SPDX-License-Identifier: Apache-2.0
/// The training-log readers behind `mldiag scan LOG`: CSV (or TSV), JSON Lines, Hugging Face
/// `trainer_state.json`, Megatron-LM text logs and TensorBoard event files, each read into
/// `mldiag::report::run_log` columns with the metric names the detectors know (docs/cli.md).
#pragma once

// Standard library and mldiag only: fuzz/fuzz_logs.cpp builds this with plain clang.
#include "cli/tensorboard.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/report/json.hpp"
#include "mldiag/report/run_log.hpp"

#include <algorithm>
#include <charconv>  // std::from_chars
#include <cmath>
#include <cstdint>
#include <cstdio>  // std::snprintf
#include <cstdlib>  // std::strtod, for numbers out of double's range
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <tuple>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::cli {

// How to read a log. Every field is optional: by default the format is detected and the
// columns are recognized by name.
struct log_options {
  // "" (detect from the content, then the name), or csv, jsonl, hf, megatron, tensorboard.
  std::string format;
  // (canonical name, column in the file) pairs, as `--column loss=my_loss`: the file's column
  // gets the canonical name, overriding recognition. Matched case-insensitively.
  std::vector<std::pair<std::string, std::string>> columns;
  // The column (CSV) or key (JSON) that holds the step, as `--step-column`.
  std::string step_column;
  // Splits a CSV or JSON Lines log into one run per value of this text column or key.
  std::string group_by;
  // Refuse a log in which no run has a metric the detectors read (loss, val_loss, a gradient
  // norm), listing the names the log has and suggesting `--column loss=NAME`: what
  // `mldiag scan` sets, since a scan of such a log would read nothing and report nothing.
  bool need_detector_metric = false;
};

namespace detail {

// Bounds the dense columns a log can make (steps x metrics doubles: 1 GiB), so that a
// pathological file fails with a message instead of exhausting memory.
inline constexpr std::size_t max_cells = std::size_t{1} << 27;

[[nodiscard]] inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

[[nodiscard]] inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The lines of a text in order, without their '\n', numbered from 1.
class line_cursor {
 public:
  explicit line_cursor(std::string_view text) noexcept : text_(text) {}
  // The next line into `line`; false at the end of the text.
  bool next(std::string_view& line) noexcept {
    if (at_ >= text_.size()) return false;
    std::size_t end = text_.find('\n', at_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(at_, end - at_);
    at_ = end + 1;
    ++number_;
    return true;
  }
  // The number of the line `next` gave last (0 before the first).
  [[nodiscard]] std::size_t number() const noexcept { return number_; }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
  std::size_t number_ = 0;
};

// A cell shown in an error message: at most 40 bytes, control bytes as '?'.
[[nodiscard]] inline std::string shown(std::string_view s) {
  std::string out(s.substr(0, 40));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out + (s.size() > 40 ? "..." : "");
}

// Parses a whole cell as a number: decimal or scientific, with an optional sign, or
// nan / inf / infinity in any case. Hex floats and trailing text are refused.
[[nodiscard]] inline bool parse_number(std::string_view s, double& out) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  const std::string l = s.size() <= 8 ? lower(s) : std::string();
  if (l == "nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (l == "inf" || l == "infinity") {
    out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  if (!((s.front() >= '0' && s.front() <= '9') || s.front() == '.')) return false;
  double v = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (end != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) v = std::strtod(std::string(s).c_str(), nullptr);  // +/-HUGE_VAL or 0
  else if (ec != std::errc{}) return false;
  out = negative ? -v : v;
  return true;
}

[[nodiscard]] inline bool step_from_double(double d, std::int64_t& out) noexcept {
  // [-2^63, 2^63): the doubles that convert to int64 exactly.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != std::floor(d)) return false;
  out = static_cast<std::int64_t>(d);
  return true;
}

// Parses a step: an integer, or a number with an integral value ("100.0", "1e3").
[[nodiscard]] inline bool parse_step(std::string_view s, std::int64_t& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  if (const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out); ec == std::errc{} && end == s.data() + s.size())
    return true;
  double d = 0.0;
  if (!parse_number(s, d)) return false;
  return step_from_double(d, out);
}


// The canonical name of a recognized column (lower-cased), or "" for one kept as it is.
[[nodiscard]] inline std::string_view canonical_metric(std::string_view lowered) noexcept {
  struct alias {
    std::string_view name, canonical;
  };
  // The names people log under, by tool: plain scripts and llm.c, Hugging Face, Megatron-LM
  // (its " | name: value |" fields), TensorBoard tags.
  static constexpr alias table[] = {
      {"loss", "loss"},
      {"train_loss", "loss"},
      {"lm_loss", "loss"},
      {"lm loss", "loss"},
      {"train/loss", "loss"},
      {"val_loss", "val_loss"},
      {"eval_loss", "val_loss"},
      {"validation_loss", "val_loss"},
      {"valid_loss", "val_loss"},
      {"eval/loss", "val_loss"},
      {"val/loss", "val_loss"},
      {"validation lm loss value", "val_loss"},
      {"grad_norm", "grad/global_norm"},
      {"grad norm", "grad/global_norm"},
      {"train/grad_norm", "grad/global_norm"},
      {"grad/global_norm", "grad/global_norm"},
      {"lr", "lr"},
      {"learning_rate", "lr"},
      {"learning rate", "lr"},
      {"train/learning_rate", "lr"},
      {"loss_scale", "loss_scale"},
      {"loss scale", "loss_scale"},
      {"skipped_iterations", "skipped_iterations"},
      {"skipped_iters", "skipped_iterations"},
      {"number of skipped iterations", "skipped_iterations"},
      {"nan_iterations", "nan_iterations"},
      {"nan_iters", "nan_iterations"},
      {"number of nan iterations", "nan_iterations"},
  };
  for (const auto& a : table)
    if (a.name == lowered) return a.canonical;
  return {};
}

[[nodiscard]] inline bool is_step_name(std::string_view lowered) noexcept {
  return lowered == "step" || lowered == "iteration" || lowered == "iter" || lowered == "global_step" || lowered == "_step";
}

// Maps a log's column names (or keys, or tags) onto metric names, once per distinct name:
// `--column` overrides first, then the alias table; a canonical name goes to the first column
// that claims it, and a later column that would take it again keeps its own name (prefixed
// `raw/` where its own name is the canonical one).
class name_mapper {
 public:
  name_mapper(const log_options& options, std::string_view file) : file_(file) {
    for (const auto& [canonical, column] : options.columns) {
      if (canonical.empty() || column.empty())
        throw error(std::string(file_) + ": --column needs CANONICAL=COLUMN, both non-empty (got '" + canonical + "=" + column + "')");
      overrides_.emplace_back(lower(column), canonical, false);
      claimed_.emplace(canonical, true);
    }
  }

  // The metric name for a column of the log.
  const std::string& map(std::string_view name) {
    if (const auto it = cache_.find(std::string(name)); it != cache_.end()) return it->second;
    const std::string l = lower(name);
    std::string result;
    bool found = false;
    for (auto& [column, canonical, seen] : overrides_)
      if (column == l) {
        result = canonical;
        seen = true;
        found = true;
        break;
      }
    if (!found) {
      const std::string_view c = canonical_metric(l);
      if (!c.empty() && !claimed_.contains(std::string(c))) {
        result = std::string(c);
        claimed_.emplace(result, true);
      } else {
        result = claimed_.contains(l) ? "raw/" + l : l;
      }
    }
    originals_.emplace_back(name);
    return cache_.emplace(std::string(name), std::move(result)).first->second;
  }

  // The log's own names, as first spelled, in the order they were mapped.
  [[nodiscard]] const std::vector<std::string>& originals() const noexcept { return originals_; }

  // True when the column is one the detectors read (or one the user named): a text cell in it
  // is an error rather than a column to ignore.
  [[nodiscard]] bool is_metric(std::string_view name) {
    const std::string l = lower(name);
    for (const auto& o : overrides_)
      if (std::get<0>(o) == l) return true;
    return !canonical_metric(l).empty();
  }

  // Throws when a `--column` names a column the log never had.
  void check_overrides_seen() const {
    for (const auto& [column, canonical, seen] : overrides_)
      if (!seen)
        throw error(std::string(file_) + ": --column " + canonical + "=" + column + ": the log has no column '" + column +
                    "'; check the name (matched case-insensitively)");
  }

 private:
  std::string_view file_;
  std::vector<std::tuple<std::string, std::string, bool>> overrides_;  // lower(column), canonical, seen
  std::unordered_map<std::string, bool> claimed_;
  std::unordered_map<std::string, std::string> cache_;
  std::vector<std::string> originals_;
};

// The metrics `mldiag scan` gives the detectors to read (scan.hpp): a log without any of them
// leaves them nothing to judge. (lr and loss_scale are read too, but only beside these.)
inline constexpr std::string_view detector_metrics[] = {"loss", "val_loss", "grad/global_norm"};

// A name as the user would type it after --column: quoted for the shell when it needs it.
[[nodiscard]] inline std::string shell_word(std::string_view s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == '/' || c == ':' || c == '=' || c == '@' || c == '+' ||
           c == ',';
  });
  if (plain) return std::string(s);
  std::string out = "'";
  for (const char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// With options.need_detector_metric: throws when no run has a metric the detectors read. The
// message lists the log's own names (`what`: "columns", "keys", "fields", "scalar tags") and
// suggests the --column that would most likely help: the first name that reads like a loss
// (loss, cost, entropy, nll, perplexity), as val_loss when it reads like a validation one, or
// `loss=NAME` when none does (a guess at accuracy or tokens would mislead).
inline void check_detector_metric(const std::vector<report::run_log>& runs,
                                  const name_mapper& names, const std::string& file,
                                  std::string_view what, const log_options& options) {
  if (!options.need_detector_metric) return;
  for (const auto& run : runs)
    for (const auto m : detector_metrics)
      if (run.metric(m) != nullptr) return;
  const auto& seen = names.originals();
  std::string list;
  constexpr std::size_t shown_names = 20;
  for (std::size_t i = 0; i < seen.size() && i < shown_names; ++i)
    list += (i ? ", " : "") + shown(seen[i]);
  if (seen.size() > shown_names)
    list += ", and " + std::to_string(seen.size() - shown_names) + " more";
  std::string suggestion = "loss=NAME";
  auto has = [](const std::string& l, std::initializer_list<std::string_view> parts) {
    return std::any_of(parts.begin(), parts.end(),
                       [&](std::string_view p) { return l.find(p) != std::string::npos; });
  };
  std::string best, best_val;
  for (const auto& n : seen) {
    const std::string l = lower(n);
    if (!has(l, {"loss", "cost", "entropy", "nll", "perplexity", "ppl"})) continue;
    if (has(l, {"val", "eval", "test", "dev"})) {
      if (best_val.empty()) best_val = n;
    } else if (best.empty()) {
      best = n;
    }
  }
  if (!best.empty())
    suggestion = shell_word("loss=" + best);
  else if (!best_val.empty())
    suggestion = shell_word("val_loss=" + best_val);
  throw error(file + ": none of its " + std::string(what) +
              " is one the detectors read (loss, val_loss, grad_norm under the names of "
              "docs/cli.md), so a scan would read "
              "nothing; its " +
              std::string(what) + ": " + (list.empty() ? "(none)" : list) +
              "; name the one that holds the loss with --column, e.g. --column " + suggestion);
}

// Builds one run, step by step, enforcing the step rules (docs/cli.md):
// - the same step as the previous line merges into it (a metric given twice: the later wins);
// - a smaller step is a restart from a checkpoint: the steps from it on are dropped and the
//   later lines replace them, so that steps stay strictly increasing.
class run_builder {
 public:
  explicit run_builder(std::string title) { log_.title = std::move(title); }

  void step(std::int64_t s) {
    if (!log_.steps.empty()) {
      const std::int64_t last = log_.steps.back();
      if (s == last) return;
      if (s < last) {
        const auto keep = static_cast<std::size_t>(std::lower_bound(log_.steps.begin(), log_.steps.end(), s) - log_.steps.begin());
        log_.steps.resize(keep);
        for (auto& column : log_.metric_values) column.resize(keep);
        ++restarts_;
      }
    }
    // Adding a step writes a cell in every column; restarts drop steps without giving that work
    // back, so the work is bounded too (a log that restarts on every line stays linear in the
    // bound, not in lines x columns).
    const std::size_t width = std::max<std::size_t>(log_.metric_names.size(), 1);
    work_ += width;
    if ((log_.steps.size() + 1) * width > max_cells || work_ > 8 * max_cells) too_big();
    log_.add_step(s);
  }

  // Sets a metric at the current step (step() first).
  void set(const std::string& metric, double v) {
    if (!log_.metric(metric) && log_.steps.size() * (log_.metric_names.size() + 1) > max_cells) too_big();
    log_.metric_values[log_.column(metric)].back() = v;
  }

  [[nodiscard]] bool empty() const noexcept { return log_.steps.empty(); }
  [[nodiscard]] std::size_t restarts() const noexcept { return restarts_; }
  report::run_log take() { return std::move(log_); }

 private:
  [[noreturn]] void too_big() const {
    throw error(log_.title + ": more than " + std::to_string(max_cells) +
                " step x metric cells (or restarts rewriting them); split the log, or keep fewer columns");
  }
  report::run_log log_;
  std::size_t restarts_ = 0;
  std::size_t work_ = 0;
};

// The runs of a log in the order their groups first appear.
class run_set {
 public:
  explicit run_set(std::string file) : file_(std::move(file)) {}
  run_builder& group(std::string_view value, bool grouped) {
    const std::string key(value);
    if (const auto it = index_.find(key); it != index_.end()) return runs_[it->second];
    index_.emplace(key, runs_.size());
    runs_.emplace_back(grouped ? file_ + ": " + key : file_);
    return runs_.back();
  }
  [[nodiscard]] bool empty() const noexcept { return runs_.empty(); }
  std::vector<report::run_log> take(std::string_view what_to_do) {
    std::vector<report::run_log> out;
    for (auto& r : runs_) {
      report::run_log log = r.take();
      if (log.metric_names.empty())
        throw error(log.title + ": no metric values (only steps); " + std::string(what_to_do));
      out.push_back(std::move(log));
    }
    return out;
  }

 private:
  std::string file_;
  std::vector<run_builder> runs_;
  std::unordered_map<std::string, std::size_t> index_;
};

// ------------------------------------------------------------------------------------ CSV

// Splits CSV (RFC 4180: quoted fields, "" inside quotes, CRLF or LF) into records.
class csv_reader {
 public:
  csv_reader(std::string_view text, std::string_view file, char separator) : s_(text), file_(file), sep_(separator) {}

  // The next record's fields (false at the end); `line` gets the line it starts on. Blank
  // lines are skipped.
  bool next(std::vector<std::string>& fields, std::size_t& line) {
    for (;;) {
      if (i_ >= s_.size()) return false;
      line = line_;
      fields.clear();
      fields.emplace_back();
      bool any = false;
      for (;;) {
        if (i_ >= s_.size()) break;
        char c = s_[i_];
        if (c == '\0') fail(line_, "a NUL byte: this is binary data, not CSV");
        if (c == '\n' || c == '\r') {
          i_ += (c == '\r' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') ? 2 : 1;
          ++line_;
          break;
        }
        any = true;
        if (c == sep_) {
          fields.emplace_back();
          ++i_;
          continue;
        }
        if (c == '"' && fields.back().empty()) {  // a quoted field
          const std::size_t open_line = line_;
          ++i_;
          for (;;) {
            if (i_ >= s_.size()) fail(open_line, "a quoted field that is never closed");
            c = s_[i_++];
            if (c == '\0') fail(line_, "a NUL byte: this is binary data, not CSV");
            if (c == '"') {
              if (i_ < s_.size() && s_[i_] == '"') {
                fields.back() += '"';
                ++i_;
                continue;
              }
              break;
            }
            if (c == '\n') ++line_;
            fields.back() += c;
          }
          if (i_ < s_.size() && s_[i_] != sep_ && s_[i_] != '\n' && s_[i_] != '\r')
            fail(line_, "text after a closing quote (quote the whole field, doubling quotes inside it)");
          if (fields.back().empty()) fields.back() = std::string();  // "" is an empty cell
          continue;
        }
        // An unquoted field: up to the next separator or end of line.
        const std::size_t start = i_;
        while (i_ < s_.size() && s_[i_] != sep_ && s_[i_] != '\n' && s_[i_] != '\r' && s_[i_] != '\0') ++i_;
        fields.back().append(s_.substr(start, i_ - start));
      }
      if (any) return true;
    }
  }

 private:
  [[noreturn]] void fail(std::size_t line, std::string_view what) const {
    throw error(std::string(file_) + ": line " + std::to_string(line) + ": " + std::string(what));
  }
  std::string_view s_;
  std::string_view file_;
  char sep_;
  std::size_t i_ = 0;
  std::size_t line_ = 1;
};

[[nodiscard]] inline std::vector<report::run_log> parse_csv(std::string_view text, const std::string& file, const log_options& options) {
  // Tab-separated when the header has a tab and no comma.
  const std::string_view first_line = text.substr(0, text.find('\n'));
  const char sep = (first_line.find('\t') != std::string_view::npos && first_line.find(',') == std::string_view::npos) ? '\t' : ',';
  csv_reader reader(text, file, sep);
  std::vector<std::string> header;
  std::size_t line = 0;
  if (!reader.next(header, line))
    throw error(file + ": empty file; a CSV log needs a header line (step,loss,...) and one row per step");
  const std::size_t n = header.size();

  // Columns: the step, the group, and the rest (metrics, or text to ignore).
  name_mapper names(options, file);
  std::size_t step_col = n, group_col = n;
  for (std::size_t c = 0; c < n; ++c) {
    const std::string l = lower(trim(header[c]));
    if (!options.step_column.empty() ? l == lower(options.step_column) : (step_col == n && is_step_name(l))) step_col = c;
    if (!options.group_by.empty() && l == lower(options.group_by)) group_col = c;
  }
  if (!options.step_column.empty() && step_col == n)
    throw error(file + ": --step-column " + options.step_column + ": the header has no such column");
  if (!options.group_by.empty() && group_col == n)
    throw error(file + ": group by '" + options.group_by + "': the header has no such column");
  std::vector<std::string> metric(n);
  std::vector<bool> strict(n, false);
  std::unordered_map<std::string, std::size_t> seen_names;
  for (std::size_t c = 0; c < n; ++c) {
    if (c == step_col || c == group_col) continue;
    const std::string_view h = trim(header[c]);
    if (h.empty()) continue;  // pandas' unnamed index column
    if (!seen_names.emplace(lower(h), c).second)
      throw error(file + ": the header names column '" + shown(h) + "' twice; rename one");
    metric[c] = names.map(h);
    strict[c] = names.is_metric(h);
  }
  names.check_overrides_seen();

  // One pass: numbers into a dense table, and which columns hold text.
  struct text_seen {
    std::size_t line = 0;
    std::string cell;
  };
  std::vector<double> table;
  std::vector<std::int64_t> steps;
  std::vector<std::string> groups;
  std::vector<std::size_t> lines;
  std::vector<text_seen> text_in(n);
  std::vector<std::string> fields;
  while (reader.next(fields, line)) {
    if (fields.size() != n)
      throw error(file + ": line " + std::to_string(line) + " has " + std::to_string(fields.size()) + " fields where the header has " +
                  std::to_string(n) + "; every row needs one field per column (an empty field for a missing value)");
    if (table.size() + n > max_cells)
      throw error(file + ": more than " + std::to_string(max_cells) + " cells; split the log, or keep fewer columns");
    std::int64_t step = static_cast<std::int64_t>(lines.size());
    if (step_col != n && !parse_step(fields[step_col], step))
      throw error(file + ": line " + std::to_string(line) + ", column '" + shown(header[step_col]) + "': '" + shown(fields[step_col]) +
                  "' is not an integer step; fix the row, or name the step column with --step-column");
    for (std::size_t c = 0; c < n; ++c) {
      double v = report::run_log::absent();
      if (!metric[c].empty() && !trim(fields[c]).empty() && !parse_number(fields[c], v)) {
        if (strict[c])
          throw error(file + ": line " + std::to_string(line) + ", column '" + shown(header[c]) + "': '" + shown(fields[c]) +
                      "' is not a number (a metric cell holds a number, nan, inf or nothing); fix the row, or map "
                      "another column with --column");
        if (text_in[c].line == 0) text_in[c] = {line, fields[c]};
        v = report::run_log::absent();
      }
      table.push_back(v);
    }
    steps.push_back(step);
    lines.push_back(line);
    if (group_col != n) groups.push_back(std::string(trim(fields[group_col])));
  }
  if (steps.empty())
    throw error(file + ": a header but no data rows; scan a log once the run has written some steps");

  run_set runs(file);
  for (std::size_t r = 0; r < steps.size(); ++r) {
    run_builder& run = runs.group(group_col != n ? std::string_view(groups[r]) : std::string_view(), group_col != n);
    run.step(steps[r]);
    for (std::size_t c = 0; c < n; ++c)
      if (!metric[c].empty() && text_in[c].line == 0) {
        const double v = table[r * n + c];
        if (!report::run_log::is_absent(v)) run.set(metric[c], v);
      }
  }
  auto out = runs.take("a CSV log needs numeric columns such as loss, val_loss, grad_norm or lr");
  check_detector_metric(out, names, file, "columns", options);
  return out;
}

// ------------------------------------------------------------------- JSON Lines and HF

// Metrics of one JSON object (nested objects flattened with '/'), into the current step.
class json_record_reader {
 public:
  json_record_reader(const log_options& options, const std::string& file) : names_(options, file), options_(options), file_(file) {}

  // Reads one record; `where` names it in errors ("line 7", "log_history[3]").
  void read(const report::json::value& record, const std::string& where, run_set& runs) {
    const report::json::value* step = nullptr;
    std::string group;
    for (const auto& [key, value] : record.members()) {
      const std::string l = lower(key);
      if (!options_.step_column.empty() ? l == lower(options_.step_column) : is_step_name(l)) {
        if (step == nullptr) step = &value;
        continue;
      }
      if (!options_.group_by.empty() && l == lower(options_.group_by)) {
        group = value.is_string() ? value.string() : number_text(value);
        has_group_key_ = true;
      }
    }
    metrics_.clear();
    for (const auto& [key, value] : record.members()) {
      const std::string l = lower(key);
      if (step != nullptr && &value == step) continue;
      if (!options_.group_by.empty() && l == lower(options_.group_by)) continue;
      collect(key, value, where, 0);
    }
    if (metrics_.empty()) return;  // a config or event line: no numbers
    std::int64_t s = 0;
    if (step != nullptr) {
      if (!has_steps_ && records_ > 0) no_step(where);
      has_steps_ = true;
      bool ok = false;
      if (step->is_number()) ok = step_from_double(step->number(), s);
      else if (step->is_string()) ok = parse_step(step->string(), s);
      if (!ok) throw error(file_ + ": " + where + ": the step is not an integer; fix the line, or name the step key with --step-column");
    } else {
      if (has_steps_) no_step(where);
      s = static_cast<std::int64_t>(records_);
    }
    ++records_;
    run_builder& run = runs.group(group, !options_.group_by.empty());
    run.step(s);
    for (const auto& [name, v] : metrics_) run.set(name, v);
  }

  void finish() const {
    names_.check_overrides_seen();
    if (!options_.group_by.empty() && records_ > 0 && !has_group_key_)
      throw error(file_ + ": group by '" + options_.group_by + "': no record has that key");
  }
  [[nodiscard]] std::size_t records() const noexcept { return records_; }
  [[nodiscard]] const name_mapper& names() const noexcept { return names_; }

 private:
  [[noreturn]] void no_step(const std::string& where) const {
    throw error(file_ + ": " + where + ": some records have a step and others not; give every record a step, or "
                "name the step key with --step-column");
  }
  static std::string number_text(const report::json::value& v) {
    if (!v.is_number()) return {};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v.number());
    return buf;
  }
  void collect(const std::string& key, const report::json::value& value, const std::string& where, int depth) {
    if (value.is_object()) {
      if (depth < 8)
        for (const auto& [k, v] : value.members()) collect(key + "/" + k, v, where, depth + 1);
      return;
    }
    const std::string& name = names_.map(key);
    double v = 0.0;
    if (value.is_number()) {
      metrics_.emplace_back(name, value.number());
    } else if (value.is_string() && report::json::non_finite_from_string(value.string(), v)) {
      // "NaN", "Infinity", "-Infinity" under any key: how strict JSON (mldiag's own JSON Lines,
      // docs/formats.md) spells what it has no number for.
      metrics_.emplace_back(name, v);
    } else if (value.is_string() && names_.is_metric(key)) {
      if (!parse_number(value.string(), v))
        throw error(file_ + ": " + where + ", key '" + shown(key) + "': \"" + shown(value.string()) +
                    "\" is not a number; fix the line, or map another key with --column");
      metrics_.emplace_back(name, v);
    }
    // null: not logged; booleans, arrays and other text: not metrics.
  }

  name_mapper names_;
  const log_options& options_;
  std::string file_;
  std::vector<std::pair<std::string, double>> metrics_;
  std::size_t records_ = 0;
  bool has_steps_ = false;
  bool has_group_key_ = false;
};

[[nodiscard]] inline bool is_mldiag_line(const report::json::value& v) {
  return v.find("finding") != nullptr || v.find("diagnosis") != nullptr || v.find("mldiag") != nullptr;
}

[[nodiscard]] inline std::vector<report::run_log> parse_jsonl(std::string_view text, const std::string& file, const log_options& options) {
  json_record_reader reader(options, file);
  run_set runs(file);
  line_cursor lines(text);
  for (std::string_view row; lines.next(row);) {
    const std::size_t line = lines.number();
    row = trim(row);
    if (row.empty()) continue;
    report::json::value v;
    try {
      v = report::json::parse(row, "line " + std::to_string(line));
    } catch (const error& e) {
      throw error(file + ": " + std::string(e.what()).substr(error::prefix.size()) +
                  "; a JSON Lines log holds one JSON object per line");
    }
    if (!v.is_object())
      throw error(file + ": line " + std::to_string(line) + " is not a JSON object; a JSON Lines log holds one object per line");
    if (is_mldiag_line(v)) continue;
    reader.read(v, "line " + std::to_string(line), runs);
  }
  reader.finish();
  if (runs.empty())
    throw error(file + (lines.number() == 0 ? ": empty file" : ": no line with a numeric metric") +
                "; a JSON Lines log holds one object per line, such as {\"step\": 1, \"loss\": 2.3}");
  auto out = runs.take("a JSON Lines log needs numeric keys such as loss or lr");
  check_detector_metric(out, reader.names(), file, "keys", options);
  return out;
}

// `log_history` of a Hugging Face `trainer_state.json` (or a bare array of such entries).
[[nodiscard]] inline std::vector<report::run_log> parse_hf(const report::json::value& doc, const std::string& file, const log_options& options) {
  if (!options.group_by.empty()) throw error(file + ": group by applies to CSV and JSON Lines logs, not trainer_state.json");
  const report::json::value* history = doc.is_array() ? &doc : doc.find("log_history");
  if (history == nullptr)
    throw error(file + ": no \"log_history\" in this JSON object; pass the trainer_state.json that the Hugging Face "
                "Trainer writes into each checkpoint-N folder");
  if (!history->is_array()) throw error(file + ": \"log_history\" is not an array; the file is not a trainer_state.json");
  json_record_reader reader(options, file);
  run_set runs(file);
  for (std::size_t k = 0; k < history->items().size(); ++k) {
    const auto& entry = history->items()[k];
    const std::string where = "log_history[" + std::to_string(k) + "]";
    if (!entry.is_object()) throw error(file + ": " + where + " is not an object; the file is not a trainer_state.json");
    // The end-of-training summary (train_runtime, the run's mean train_loss): not a step's values.
    if (entry.find("train_runtime") != nullptr) continue;
    if (entry.find(options.step_column.empty() ? "step" : options.step_column) == nullptr)
      throw error(file + ": " + where + " has no \"step\"; the file is not a trainer_state.json");
    reader.read(entry, where, runs);
  }
  reader.finish();
  if (runs.empty())
    throw error(file + ": \"log_history\" has no logged values yet; scan it once the Trainer has logged (logging_steps)");
  auto out = runs.take("log_history needs numeric entries such as loss or learning_rate");
  check_detector_metric(out, reader.names(), file, "keys", options);
  return out;
}

// --------------------------------------------------------------------------- Megatron

// If `line` holds Megatron's " iteration N/ M |" (or "validation loss at iteration N |"),
// the step and where its fields start.
[[nodiscard]] inline bool megatron_line(std::string_view line, std::int64_t& step, std::size_t& fields_at, bool& validation) {
  auto digits = [&](std::size_t& i) {
    const std::size_t start = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    return line.substr(start, i - start);
  };
  auto spaces = [&](std::size_t& i) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  constexpr std::string_view val = "validation loss at iteration";
  if (const auto p = line.find(val); p != std::string_view::npos) {
    std::size_t i = p + val.size();
    spaces(i);
    const auto n = digits(i);
    const auto bar = line.find('|', i);
    if (n.empty() || bar == std::string_view::npos || !parse_step(n, step)) return false;
    fields_at = bar + 1;
    validation = true;
    return true;
  }
  for (std::size_t p = line.find("iteration"); p != std::string_view::npos; p = line.find("iteration", p + 1)) {
    if (p > 0 && ((line[p - 1] >= 'a' && line[p - 1] <= 'z') || (line[p - 1] >= 'A' && line[p - 1] <= 'Z'))) continue;
    std::size_t i = p + 9;
    spaces(i);
    const auto n = digits(i);
    spaces(i);
    if (n.empty() || i >= line.size() || line[i] != '/') continue;
    ++i;
    spaces(i);
    if (digits(i).empty()) continue;
    spaces(i);
    if (i >= line.size() || line[i] != '|' || !parse_step(n, step)) continue;
    fields_at = i + 1;
    validation = false;
    return true;
  }
  return false;
}

[[nodiscard]] inline std::vector<report::run_log> parse_megatron(std::string_view text, const std::string& file, const log_options& options) {
  if (!options.group_by.empty()) throw error(file + ": group by applies to CSV and JSON Lines logs, not Megatron logs");
  name_mapper names(options, file);
  run_set runs(file);
  line_cursor lines(text);
  for (std::string_view line; lines.next(line);) {
    std::int64_t step = 0;
    std::size_t at = 0;
    bool validation = false;
    if (!megatron_line(line, step, at, validation)) continue;
    run_builder& run = runs.group({}, false);
    run.step(step);
    for (std::size_t k = at; k < line.size();) {
      std::size_t bar = line.find('|', k);
      if (bar == std::string_view::npos) bar = line.size();
      const std::string_view field = line.substr(k, bar - k);
      k = bar + 1;
      const auto colon = field.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view key = trim(field.substr(0, colon));
      const std::string_view cell = trim(field.substr(colon + 1));
      if (key.empty()) continue;
      const std::string name = validation ? "validation " + std::string(key) : std::string(key);
      double v = 0.0;
      if (!parse_number(cell, v)) {
        if (names.is_metric(name))
          throw error(file + ": line " + std::to_string(lines.number()) + ", field '" + shown(key) + "': '" + shown(cell) +
                      "' is not a number; fix the line, or map another field with --column");
        continue;
      }
      run.set(names.map(name), v);
    }
  }
  names.check_overrides_seen();
  if (runs.empty())
    throw error(file + ": no Megatron-LM \"iteration N/ M |\" lines; pass the log the training printed, or name "
                "its format with --format");
  auto out = runs.take("the iteration lines hold no \"name: number\" fields");
  check_detector_metric(out, names, file, "fields", options);
  return out;
}

// ------------------------------------------------------------------------- TensorBoard

inline void add_event_file(std::string_view bytes, const std::string& file, name_mapper& names,
                           run_builder& run, std::vector<std::string>& notes,
                           std::size_t& partial_tails) {
  const auto events = tensorboard::read_event_file(bytes, file);
  for (const auto& s : events.scalars) {
    run.step(s.step);
    run.set(names.map(s.tag), s.value);
  }
  if (events.partial_tail > 0) {
    notes.push_back(tensorboard::partial_tail_note(events, file));
    ++partial_tails;
  }
}

[[nodiscard]] inline std::vector<report::run_log> finish_tensorboard(run_builder& run,
                                                                     name_mapper& names,
                                                                     const std::string& file,
                                                                     const log_options& options,
                                                                     std::size_t partial_tails) {
  names.check_overrides_seen();
  if (run.empty())
    throw error(file + ": no scalar summaries in the event file(s)" +
                (partial_tails > 0 ? " before the incomplete record at the end (the run is still "
                                     "writing it, or the copy was cut: "
                                     "scan it again once it has logged)"
                                   : "") +
                "; log scalars (add_scalar / tf.summary.scalar)");
  std::vector<report::run_log> out;
  out.push_back(run.take());
  check_detector_metric(out, names, file, "scalar tags", options);
  return out;
}

[[nodiscard]] inline std::vector<report::run_log> parse_tensorboard(
    std::string_view bytes, const std::string& file, const log_options& options,
    std::vector<std::string>& notes) {
  if (!options.group_by.empty()) throw error(file + ": group by applies to CSV and JSON Lines logs, not TensorBoard event files");
  name_mapper names(options, file);
  run_builder run(file);
  if (bytes.empty()) throw error(file + ": empty file; a TensorBoard event file holds at least its version record");
  std::size_t partial_tails = 0;
  add_event_file(bytes, file, names, run, notes, partial_tails);
  return finish_tensorboard(run, names, file, options, partial_tails);
}

// ------------------------------------------------------------------------- detection

// What binary content looks like, or "" for text.
[[nodiscard]] inline std::string_view binary_kind(std::string_view bytes) noexcept {
  if (tensorboard::looks_like_event_file(bytes)) return "a TensorBoard event file";
  if (bytes.starts_with("\x1f\x8b")) return "gzip-compressed data (decompress it first)";
  if (bytes.starts_with("PK\x03\x04")) return "a zip archive (a checkpoint or .npz?)";
  if (bytes.starts_with("\x89HDF")) return "an HDF5 file";
  const std::string_view head = bytes.substr(0, 8192);
  std::size_t control = 0;
  for (const char c : head) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0) return "binary data";
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') ++control;
  }
  return control * 20 > head.size() ? "binary data" : "";
}

enum class log_format { csv, jsonl, hf, megatron, tensorboard };

[[nodiscard]] inline std::string_view format_name(log_format f) noexcept {
  switch (f) {
    case log_format::csv: return "csv";
    case log_format::jsonl: return "jsonl";
    case log_format::hf: return "hf";
    case log_format::megatron: return "megatron";
    case log_format::tensorboard: return "tensorboard";
  }
  return "";
}
[[nodiscard]] inline std::string_view format_description(log_format f) noexcept {
  switch (f) {
    case log_format::csv: return "CSV";
    case log_format::jsonl: return "JSON Lines";
    case log_format::hf: return "a Hugging Face trainer_state.json";
    case log_format::megatron: return "a Megatron-LM text log";
    case log_format::tensorboard: return "a TensorBoard event file";
  }
  return "";
}

[[nodiscard]] inline bool has_megatron_line(std::string_view text) {
  for (std::size_t p = text.find("iteration"); p != std::string_view::npos; p = text.find("iteration", p + 1)) {
    const std::size_t begin = text.rfind('\n', p);
    const std::size_t start = begin == std::string_view::npos ? 0 : begin + 1;
    std::size_t end = text.find('\n', p);
    if (end == std::string_view::npos) end = text.size();
    std::int64_t step = 0;
    std::size_t at = 0;
    bool validation = false;
    if (megatron_line(text.substr(start, end - start), step, at, validation)) return true;
    p = end;  // one look per line
  }
  return false;
}

}  // namespace detail

// Reads a training log held in memory: `file_name` names it in errors and titles, and its
// extension is checked against the content when the format is detected. One run per group
// (one run unless `options.group_by`); each run's title is the file name (": " and the group
// value when grouped). Bad input throws mldiag::error naming the file and the line (or byte
// offset) and saying what to do. What the reader left out without calling it an error (an
// event file's incomplete last record) is appended to `notes`, one line each, for the user.
//
// **Example**
// ```cpp
// std::vector<std::string> notes;
// const auto runs = mldiag::cli::parse_log("step,loss\n0,2.3\n1,2.1\n", "run.csv", {}, notes);
// const auto& loss = *runs[0].metric("loss");  // {2.3, 2.1}
// ```
[[nodiscard]] inline std::vector<report::run_log> parse_log(std::string_view bytes,
                                                            std::string_view file_name,
                                                            const log_options& options,
                                                            std::vector<std::string>& notes) {
  using detail::log_format;
  const std::string file(file_name);
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.remove_prefix(3);  // a UTF-8 byte-order mark
  if (!options.format.empty()) {
    const std::string f = detail::lower(options.format);
    if (f == "csv" || f == "tsv") return detail::parse_csv(bytes, file, options);
    if (f == "jsonl" || f == "ndjson") return detail::parse_jsonl(bytes, file, options);
    if (f == "megatron") return detail::parse_megatron(bytes, file, options);
    if (f == "tensorboard") return detail::parse_tensorboard(bytes, file, options, notes);
    if (f == "hf" || f == "trainer_state") {
      if (detail::trim(bytes).empty()) throw error(file + ": empty file; pass a trainer_state.json");
      return detail::parse_hf(report::json::parse(bytes, file), file, options);
    }
    throw error("unknown log format '" + options.format + "'; use csv, jsonl, hf, megatron or tensorboard");
  }

  // What the content looks like.
  std::size_t first = 0;
  while (first < bytes.size() && (bytes[first] == ' ' || bytes[first] == '\t' || bytes[first] == '\n' || bytes[first] == '\r')) ++first;
  if (first == bytes.size())
    throw error(file + ": empty file; scan a log once the run has written some steps");
  log_format content = log_format::csv;
  std::string_view binary;
  report::json::value doc;
  bool parsed_doc = false;
  if (tensorboard::looks_like_event_file(bytes)) content = log_format::tensorboard;
  else if (binary = detail::binary_kind(bytes); !binary.empty()) {
  } else if (bytes[first] == '{' || bytes[first] == '[') {
    content = log_format::jsonl;
    try {
      doc = report::json::parse(bytes, file);
      parsed_doc = true;
    } catch (const error&) {  // more than one value: JSON Lines (whose reader reports bad lines)
    }
    if (parsed_doc && (doc.is_array() || doc.find("log_history") != nullptr)) content = log_format::hf;
    else if (parsed_doc && (doc.find("global_step") != nullptr || doc.find("best_metric") != nullptr || doc.find("max_steps") != nullptr))
      return detail::parse_hf(doc, file, options);  // a trainer_state.json without log_history: its error
    else if (parsed_doc && bytes[first] == '[')
      throw error(file + ": a JSON array that is not a log_history; mldiag reads JSON Lines (one object per line)");
  } else if (detail::has_megatron_line(bytes)) {
    content = log_format::megatron;
  }

  // What the name says.
  const std::string name = detail::lower(std::filesystem::path(file).filename().string());
  const std::string ext = detail::lower(std::filesystem::path(file).extension().string());
  std::string_view expected;
  bool matches = true;
  if (ext == ".csv" || ext == ".tsv") {
    expected = "CSV";
    matches = content == log_format::csv;
  } else if (ext == ".jsonl" || ext == ".ndjson") {
    expected = "JSON Lines";
    matches = content == log_format::jsonl;
  } else if (ext == ".json") {
    expected = "JSON";
    matches = content == log_format::jsonl || content == log_format::hf;
  } else if (name.find("tfevents") != std::string::npos) {
    expected = "a TensorBoard event file";
    matches = content == log_format::tensorboard;
  }
  const std::string_view looks = !binary.empty() ? binary : detail::format_description(content);
  if (!matches || !binary.empty()) {
    if (expected.empty()) expected = "a training log";
    throw error(file + ": the name says " + std::string(expected) + " but the content looks like " + std::string(looks) +
                (binary.empty() ? "; pass --format " + std::string(detail::format_name(content)) + " to read it as that"
                                : "; pass a text log (CSV, JSON Lines, Megatron) or a TensorBoard event file"));
  }
  if (content == log_format::csv && expected.empty()) {
    const std::string_view header = bytes.substr(first, bytes.find('\n', first) - first);
    if (header.find(',') == std::string_view::npos && header.find('\t') == std::string_view::npos)
      throw error(file + ": does not look like a training log (CSV with a header, JSON Lines, trainer_state.json, "
                  "Megatron-LM log or TensorBoard event file); name its format with --format");
  }
  switch (content) {
    case log_format::csv: return detail::parse_csv(bytes, file, options);
    case log_format::jsonl: return detail::parse_jsonl(bytes, file, options);
    case log_format::hf: return detail::parse_hf(doc, file, options);
    case log_format::megatron: return detail::parse_megatron(bytes, file, options);
    case log_format::tensorboard:
      return detail::parse_tensorboard(bytes, file, options, notes);
  }
  return {};
}

// parse_log without the notes (they are dropped).
[[nodiscard]] inline std::vector<report::run_log> parse_log(std::string_view bytes,
                                                            std::string_view file_name,
                                                            const log_options& options = {}) {
  std::vector<std::string> notes;
  return parse_log(bytes, file_name, options, notes);
}

namespace detail {
[[nodiscard]] inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw error(file.string() + ": cannot open it; check the path and its permissions");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw error(file.string() + ": read error");
  return bytes;
}
}  // namespace detail

// Reads a training log file, or a folder of TensorBoard event files (every file whose name
// holds "tfevents", in name order, as one run; subfolders are not read). See parse_log, also
// for `notes`.
//
// **Example**
// ```cpp
// mldiag::cli::log_options options;
// options.columns = {{"loss", "my_loss"}};  // --column loss=my_loss
// std::vector<std::string> notes;
// for (const auto& run : mldiag::cli::read_log("train.csv", options, notes))
// std::puts(run.title.c_str()); for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
// ```
[[nodiscard]] inline std::vector<report::run_log> read_log(const std::filesystem::path& file,
                                                           const log_options& options,
                                                           std::vector<std::string>& notes) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    const std::string title = file.filename().empty() ? file.parent_path().filename().string() : file.filename().string();
    if (!options.format.empty() && detail::lower(options.format) != "tensorboard")
      throw error(file.string() + ": a folder; only TensorBoard logs are read from a folder (pass a file for --format " + options.format + ")");
    if (!options.group_by.empty()) throw error(file.string() + ": group by applies to CSV and JSON Lines logs, not TensorBoard event files");
    std::vector<std::filesystem::path> events;
    for (const auto& entry : std::filesystem::directory_iterator(file, ec))
      if (entry.is_regular_file(ec) && entry.path().filename().string().find("tfevents") != std::string::npos) events.push_back(entry.path());
    if (ec) throw error(file.string() + ": cannot list the folder (" + ec.message() + ")");
    if (events.empty())
      throw error(file.string() + ": no events.out.tfevents.* files in this folder (subfolders are not read: pass each run's folder)");
    std::sort(events.begin(), events.end());
    detail::name_mapper names(options, title);
    detail::run_builder run(title);
    std::size_t partial_tails = 0;
    for (const auto& e : events)
      detail::add_event_file(detail::read_bytes(e), e.string(), names, run, notes, partial_tails);
    return detail::finish_tensorboard(run, names, file.string(), options, partial_tails);
  }
  const std::string bytes = detail::read_bytes(file);
  return parse_log(bytes, file.filename().string(), options, notes);
}

// read_log without the notes (they are dropped).
[[nodiscard]] inline std::vector<report::run_log> read_log(const std::filesystem::path& file,
                                                           const log_options& options = {}) {
  std::vector<std::string> notes;
  return read_log(file, options, notes);
}

}  // namespace mldiag::cli
