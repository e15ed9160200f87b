// SPDX-License-Identifier: Apache-2.0
/// JSON Lines: a sink that writes a run as it goes (one line per step, one per finding, one
/// per diagnosis line) and a reader that turns such a file back into a `run_log`.
/// The schema is documented in docs/formats.md (schema version 2; the reader reads 1 too).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/protocol/log.hpp"
#include "mldiag/report/json.hpp"
#include "mldiag/report/run_log.hpp"
#include "mldiag/version.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::report {

/// The JSON Lines schema version this code writes (with the default, strict, non-finite
/// style) and the newest it reads (docs/formats.md). Schema 1 is the same lines with NaN and
/// Inf as bare tokens; the legacy style still writes it, and the reader reads both.
inline constexpr int jsonl_schema = 2;

/// How JSON Lines spell NaN, +Inf and -Inf, which JSON itself has no numbers for
/// (docs/formats.md). The header line says which one a file uses (`"non_finite"`).
enum class jsonl_non_finite : std::uint8_t {
  /// The JSON strings `"NaN"`, `"Infinity"`, `"-Infinity"` in place of the number: every line
  /// is strict JSON (jq, `JSON.parse`, Go, Rust, DuckDB, Python's `json` in strict mode all
  /// read it), and the value stays under its own key. Schema 2. The default.
  string,
  /// The bare tokens `NaN`, `Infinity`, `-Infinity`, as Python's `json.dump` writes them:
  /// Python and pandas read them as floats, strict parsers refuse the line. Schema 1 (what
  /// mldiag wrote before schema 2), for a consumer that wants numbers only.
  bare,
};

/// The name of a style as the header line writes it: "string" or "bare".
[[nodiscard]] constexpr std::string_view jsonl_style_name(jsonl_non_finite style) noexcept {
  return style == jsonl_non_finite::bare ? "bare" : "string";
}

/// Options of `jsonl_sink`.
struct jsonl_options {
  /// How non-finite values are written (default: as strings, so that every line is JSON).
  jsonl_non_finite non_finite = jsonl_non_finite::string;
};

namespace detail {

// A JSON number in its shortest round-trip form (a double read back is bit-identical);
// non-finite values as `style` says.
inline void append_number(std::string& out, double v, jsonl_non_finite style) {
  if (std::isfinite(v)) {
    fmt::format_to(std::back_inserter(out), "{}", v);
  } else if (style == jsonl_non_finite::bare) {
    out += json::non_finite_name(v);
  } else {
    out += '"';
    out += json::non_finite_name(v);
    out += '"';
  }
}

// A number as mldiag JSON Lines hold it: a JSON number (or a bare NaN / Infinity token, which
// the parser reads as one), or a string that spells a non-finite value.
[[nodiscard]] inline bool number_of(const json::value& v, double& out) noexcept {
  if (v.is_number()) {
    out = v.number();
    return true;
  }
  return v.is_string() && json::non_finite_from_string(v.string(), out);
}

}  // namespace detail

/// Appends the step line of a closed step (the recorder's current snapshot) to `out`,
/// without the newline, non-finite values written as `style` says. Keys: docs/formats.md.
inline void append_step_line(std::string& out, const snapshot& s, const name_table& names,
                             jsonl_non_finite style = jsonl_non_finite::string) {
  fmt::format_to(std::back_inserter(out), "{{\"step\":{}", s.step);
  auto field = [&](std::string_view key, double v) {
    out += ',';
    json::append_quoted(out, key);
    out += ':';
    detail::append_number(out, v, style);
  };
  auto named = [&](std::string_view prefix, std::uint32_t id, std::string_view suffix) {
    std::string key(prefix);
    key += '/';
    key += names[id];
    if (!suffix.empty()) {
      key += '/';
      key += suffix;
    }
    return key;
  };
  for (const scalar m : {scalar::loss, scalar::val_loss, scalar::learning_rate, scalar::loss_scale})
    if (const auto& v = s.of(m)) field(metric_name(m), *v);
  if (const auto g = s.global_grad_norm()) field(metric_name(scalar::grad_norm), *g);
  if (s.grad_cosine) field("grad/step_cosine", *s.grad_cosine);
  if (s.grad_increment_cosine) field("grad/increment_cosine", *s.grad_increment_cosine);
  for (const role r : all_roles) {
    for (const auto& t : s.of(r)) {
      field(named(prefix(r), t.id, "norm"), norm_of(t.stats));  // NaN at the blow-up, not 0
      if (t.stats.non_finite() > 0) field(named(prefix(r), t.id, "nonfinite"), static_cast<double>(t.stats.non_finite()));
      if (r == role::activation && t.stats.count > 0)
        field(named(prefix(role::activation), t.id, "zero_fraction"), static_cast<double>(t.stats.zeros) / static_cast<double>(t.stats.count));
    }
  }
  for (const auto& [id, d] : s.drift) field(named("drift", id, ""), d);
  for (const auto& a : s.attention) {
    if (a.stats.rows == 0) continue;
    field(named("attn", a.id, "entropy"), a.stats.mean());
    field(named("attn", a.id, "normalized_entropy"), a.stats.normalized_mean());
  }
  for (const auto& r : s.routers) {
    field(named("router", r.id, "max_over_mean"), r.max_over_mean);
    field(named("router", r.id, "dead_experts"), static_cast<double>(r.dead));
    field(named("router", r.id, "normalized_entropy"), r.normalized_entropy);
  }
  const auto& t = s.timings;
  for (const auto& [key, v] : {std::pair{"time/data_wait", t.data_wait}, std::pair{"time/forward", t.forward},
                               std::pair{"time/backward", t.backward}, std::pair{"time/optimizer", t.optimizer},
                               std::pair{"time/communication", t.communication}, std::pair{"time/step", t.total}}) {
    if (v) field(key, *v);
  }
  for (const auto& l : s.layer_times) field(named("time/layer", l.id, ""), l.seconds);
  for (const auto& x : s.metrics) field(named("progress", x.id, x.higher_is_better ? "higher" : "lower"), x.value);
  for (const auto& [id, lr] : s.group_lrs) field(named("lr", id, ""), lr);
  if (s.change) field("change/" + std::string(name(*s.change)), 1.0);
  const auto& m = s.memory;
  for (const auto& [key, v] : {std::pair{"memory/allocated", m.allocated}, std::pair{"memory/reserved", m.reserved},
                               std::pair{"memory/peak", m.peak}, std::pair{"memory/capacity", m.capacity}}) {
    if (v) field(key, *v);
  }
  out += '}';
}

/// Appends a finding line (without the newline): the step it was delivered at and the finding,
/// non-finite scores and evidence written as `style` says.
inline void append_finding_line(std::string& out, std::int64_t step, const finding& f,
                                jsonl_non_finite style = jsonl_non_finite::string) {
  fmt::format_to(std::back_inserter(out), "{{\"step\":{},\"finding\":{{\"question\":{},\"symptom\":", step,
                 static_cast<int>(f.question));
  json::append_quoted(out, f.symptom);
  out += ",\"severity\":";
  json::append_quoted(out, name(f.severity));
  fmt::format_to(std::back_inserter(out), ",\"first_step\":{},\"last_step\":{},\"location\":[", f.first_step, f.last_step);
  for (std::size_t i = 0; i < f.where.size(); ++i) {
    out += i ? ",{\"name\":" : "{\"name\":";
    json::append_quoted(out, f.where[i].first);
    out += ",\"score\":";
    detail::append_number(out, f.where[i].second, style);
    out += '}';
  }
  out += "],\"evidence\":{";
  for (std::size_t i = 0; i < f.evidence.size(); ++i) {
    if (i) out += ',';
    json::append_quoted(out, f.evidence[i].first);
    out += ':';
    detail::append_number(out, f.evidence[i].second, style);
  }
  out += "},\"detector\":";
  json::append_quoted(out, f.detector);
  // Why it has its severity (the escalation policy's reason) and what it is downstream of:
  // written only when there is something to say, so older logs and readers are unaffected.
  if (!f.why.empty()) {
    out += ",\"why\":";
    json::append_quoted(out, f.why);
  }
  if (f.is_consequence()) {
    out += ",\"consequence_of\":";
    json::append_quoted(out, f.consequence_of);
    out += ",\"consequence_of_step\":" + std::to_string(f.consequence_of_step);
  }
  out += "}}";
}

/// Writes a run as JSON Lines while it goes: a header line, then `step()` after each
/// `end_step()`, `finding()` for each finding, `diagnosis()` for each line of a diagnosis
/// log. Each line is flushed when written, so a run that crashes keeps its log up to the
/// crash. Writing a step formats into a reused buffer: no allocation once the largest step
/// has been seen. Every line is strict JSON unless `options.non_finite` asks for the bare
/// NaN / Infinity tokens of schema 1.
///
/// **Example**
/// ```cpp
/// mldiag::report::jsonl_sink jsonl("run.jsonl", "my run");  // or ..., {.non_finite =
/// mldiag::report::jsonl_non_finite::bare} mon.attach([&](const mldiag::finding& f) {
/// jsonl.finding(mon.evidence().current().step, f); });
/// // in the loop, after mon.end_step():
/// jsonl.step(mon.evidence());
/// ```
class jsonl_sink {
 public:
  /// Opens (truncates) `path` and writes the header line. Throws mldiag::error naming the
  /// file when it cannot be written.
  explicit jsonl_sink(const std::filesystem::path& path, std::string_view title = {},
                      jsonl_options options = {})
      : path_(path.string()), f_(std::fopen(path_.c_str(), "w")), style_(options.non_finite) {
    if (f_ == nullptr)
      throw error(path_ + ": cannot write (" + std::strerror(errno) + "); check that the folder exists and is writable");
    line_.reserve(4096);
    // Bare tokens are schema 1: a reader of schema 1 reads such a file as it always did, and
    // refuses a strict one (whose "NaN" strings it would skip as text, losing the evidence).
    const int schema = style_ == jsonl_non_finite::bare ? 1 : jsonl_schema;
    line_ = fmt::format("{{\"mldiag\":{{\"schema\":{},\"version\":\"{}.{}.{}\",\"title\":", schema,
                        MLDIAG_VERSION_MAJOR, MLDIAG_VERSION_MINOR, MLDIAG_VERSION_PATCH);
    json::append_quoted(line_, title);
    fmt::format_to(std::back_inserter(line_), ",\"non_finite\":\"{}\"}}}}",
                   jsonl_style_name(style_));
    write();
  }
  jsonl_sink(const jsonl_sink&) = delete;
  jsonl_sink& operator=(const jsonl_sink&) = delete;
  ~jsonl_sink() {
    if (f_ != nullptr) std::fclose(f_);
  }

  /// The step the recorder just closed.
  void step(const recorder& rec) { step(rec.current(), rec.names()); }
  /// A closed step's snapshot.
  void step(const snapshot& s, const name_table& names) {
    line_.clear();
    append_step_line(line_, s, names, style_);
    write();
  }
  /// An evaluation at a closed step: `{"step":N,"val_loss":v}`, after that step's line (the
  /// reader adds it to the step).
  void evaluation(std::int64_t step, double val_loss) {
    line_ = fmt::format("{{\"step\":{},\"val_loss\":", step);
    detail::append_number(line_, val_loss, style_);
    line_ += '}';
    write();
  }
  /// A finding delivered at `step`.
  void finding(std::int64_t step, const mldiag::finding& f) {
    line_.clear();
    append_finding_line(line_, step, f, style_);
    write();
  }
  /// One record of a diagnosis log: `{"diagnosis":{"phase":N,"text":...}}`.
  void diagnosis(const protocol::log_entry& e) {
    line_ = fmt::format("{{\"diagnosis\":{{\"phase\":{},\"text\":", e.number());
    json::append_quoted(line_, e.text);
    line_ += "}}";
    write();
  }

 private:
  void write() {
    line_ += '\n';
    if (std::fwrite(line_.data(), 1, line_.size(), f_) != line_.size() || std::fflush(f_) != 0)
      throw error(path_ + ": write failed (" + std::strerror(errno) + "); check the free disk space");
  }
  std::string path_;
  std::FILE* f_;
  jsonl_non_finite style_;
  std::string line_;
};

namespace detail {

inline std::int64_t as_step(const json::value& v, std::string_view where) {
  if (!v.is_number() || !std::isfinite(v.number()) || v.number() != std::floor(v.number()) || std::fabs(v.number()) > 9.0e15)
    throw error(std::string(where) + ": \"step\" is not an integer; every line needs an integer \"step\"");
  return static_cast<std::int64_t>(v.number());
}

inline finding parse_finding(const json::value& f, std::string_view where) {
  auto need = [&](std::string_view key) -> const json::value& {
    const auto* v = f.find(key);
    if (v == nullptr) throw error(std::string(where) + ": a finding without \"" + std::string(key) + "\"");
    return *v;
  };
  finding out;
  const auto& q = need("question");
  if (!q.is_number() || (q.number() != 1 && q.number() != 2 && q.number() != 3))
    throw error(std::string(where) + ": a finding's \"question\" must be 1, 2 or 3");
  out.question = static_cast<question>(static_cast<int>(q.number()));
  const auto& symptom = need("symptom");
  if (!symptom.is_string()) throw error(std::string(where) + ": a finding's \"symptom\" must be a string");
  out.symptom = symptom.string();
  const auto& sev = need("severity");
  if (sev.is_string() && sev.string() == "info") out.severity = severity::info;
  else if (sev.is_string() && sev.string() == "warning") out.severity = severity::warning;
  else if (sev.is_string() && sev.string() == "critical") out.severity = severity::critical;
  else throw error(std::string(where) + ": a finding's \"severity\" must be \"info\", \"warning\" or \"critical\"");
  out.first_step = as_step(need("first_step"), where);
  out.last_step = as_step(need("last_step"), where);
  if (const auto* loc = f.find("location"); loc != nullptr) {
    if (!loc->is_array()) throw error(std::string(where) + ": a finding's \"location\" must be an array");
    for (const auto& l : loc->items()) {
      const auto* n = l.find("name");
      const auto* s = l.find("score");
      double score = 0.0;
      if (n == nullptr || !n->is_string() || s == nullptr || !number_of(*s, score))
        throw error(std::string(where) + ": each location needs a string \"name\" and a number \"score\"");
      out.where.emplace_back(n->string(), score);
    }
  }
  if (const auto* ev = f.find("evidence"); ev != nullptr) {
    if (!ev->is_object()) throw error(std::string(where) + ": a finding's \"evidence\" must be an object");
    for (const auto& [k, v] : ev->members()) {
      double x = 0.0;
      if (!number_of(v, x))
        throw error(std::string(where) + ": evidence \"" + k + "\" is not a number");
      out.evidence.emplace_back(k, x);
    }
  }
  if (const auto* d = f.find("detector"); d != nullptr && d->is_string()) out.detector = d->string();
  if (const auto* w = f.find("why"); w != nullptr && w->is_string()) out.why = w->string();
  if (const auto* c = f.find("consequence_of"); c != nullptr && c->is_string()) {
    const auto* cs = f.find("consequence_of_step");
    double step = -1.0;
    if (cs == nullptr || !number_of(*cs, step) || step < 0 || step != std::floor(step))
      throw error(std::string(where) + ": \"consequence_of\" needs a whole \"consequence_of_step\" >= 0");
    out.consequence_of = c->string();
    out.consequence_of_step = static_cast<std::int64_t>(step);
  }
  return out;
}

}  // namespace detail

/// Reads mldiag JSON Lines (as `jsonl_sink` writes them) from memory. `name` is used in
/// errors. Steps repeat across finding lines; a step line whose step equals the previous step
/// line's adds to it. Unknown keys in a step line become metrics when they are numbers and
/// are ignored otherwise; an unknown line kind is an error, so a file that is not mldiag's
/// says so. Both non-finite styles read back (schema 1 and 2, strings and bare tokens, in any
/// mix): a string `"NaN"`, `"Infinity"` or `"-Infinity"` where a number belongs is that value.
///
/// **Example**
/// ```cpp
/// auto log = mldiag::report::parse_jsonl(text, "run.jsonl");
/// const auto* loss = log.metric("loss");
/// ```
[[nodiscard]] inline run_log parse_jsonl(std::string_view text, std::string_view name) {
  run_log log;
  log.title = std::string(name);
  std::size_t line_no = 0, pos = 0;
  bool header = false;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = std::string(name) + ":" + std::to_string(line_no);
    const auto v = json::parse(line, where);
    if (!v.is_object()) throw error(where + ": a line must be a JSON object");
    if (const auto* h = v.find("mldiag")) {
      const auto* schema = h->find("schema");
      if (schema == nullptr || !schema->is_number() || schema->number() > jsonl_schema)
        throw error(where + ": mldiag JSON Lines schema " + (schema && schema->is_number() ? fmt::format("{}", schema->number()) : "?") +
                    "; this mldiag reads schema " + std::to_string(jsonl_schema) + " and older: update mldiag");
      // A style this reader does not know would be a new schema; refuse it rather than misread.
      if (const auto* nf = h->find("non_finite");
          nf != nullptr &&
          !(nf->is_string() && (nf->string() == jsonl_style_name(jsonl_non_finite::string) ||
                                nf->string() == jsonl_style_name(jsonl_non_finite::bare))))
        throw error(where +
                    ": \"non_finite\" must be \"string\" or \"bare\" (the file is damaged, or "
                    "newer than this mldiag: update mldiag)");
      if (const auto* t = h->find("title"); t != nullptr && t->is_string() && !t->string().empty()) log.title = t->string();
      header = true;
      continue;
    }
    if (const auto* d = v.find("diagnosis")) {
      const auto* t = d->find("text");
      const auto* p = d->find("phase");
      if (t == nullptr || !t->is_string()) throw error(where + ": a diagnosis line needs a string \"text\"");
      // The phase is a number written beside the text, 0 (unknown) to 4; a line without one is of
      // phase 0. Any other value is damage: refuse it rather than cast it.
      if (p != nullptr && !(p->is_number() && p->number() >= 0.0 && p->number() <= 4.0 && p->number() == std::floor(p->number())))
        throw error(where + ": a diagnosis line's \"phase\" must be an integer 0-4 (the file is damaged; mldiag writes 1-4)");
      log.diagnosis.push_back({p != nullptr ? protocol::phase_from_number(static_cast<long long>(p->number())) : protocol::phase_id::unknown, t->string()});
      continue;
    }
    const auto* step = v.find("step");
    if (step == nullptr) throw error(where + ": a line without \"step\"; is this mldiag JSON Lines (docs/formats.md)?");
    const auto s = detail::as_step(*step, where);
    if (const auto* f = v.find("finding")) {
      log.findings.push_back({s, detail::parse_finding(*f, where)});
      continue;
    }
    // A line of an earlier step still among the last steps (an evaluation recorded after
    // later steps closed) adds to that step; any other step is a new row.
    std::size_t row = log.steps.size();
    while (row > 0 && log.steps.size() - row < 1024 && log.steps[row - 1] > s) --row;
    if (row == 0 || log.steps[row - 1] != s) row = log.add_step(s) + 1;
    for (const auto& [key, value] : v.members()) {
      double x = 0.0;
      if (key == "step" || !detail::number_of(value, x)) continue;
      log.metric_values[log.column(key)][row - 1] = x;
    }
  }
  if (!header && log.steps.empty() && log.findings.empty())
    throw error(std::string(name) + ": no mldiag JSON Lines in it (empty, or not written by mldiag)");
  return log;
}

/// Reads a JSON Lines file written by `jsonl_sink`. Throws mldiag::error naming the file (and
/// line) on anything it cannot read.
[[nodiscard]] inline run_log read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path.string() + ": cannot open (" + std::strerror(errno) + "); check the path");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw error(path.string() + ": read failed");
  return parse_jsonl(text, path.string());
}

}  // namespace mldiag::report
