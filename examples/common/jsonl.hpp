// SPDX-License-Identifier: Apache-2.0
/// A JSON Lines sink for the examples: one line per step with the metric names people already
/// log (`loss`, `lr`, `grad/<name>/norm`, `param/<name>/norm`, `grad/global_norm`) and one line
/// per finding. Non-finite numbers are written as NaN, Infinity and -Infinity, which Python's
/// json module and pandas read back. A provisional schema: the report issue (8) moves this
/// into mldiag's report/ layer with a documented, stable one.
#pragma once

#include <mldiag/detectors/finding.hpp>
#include <mldiag/evidence/recorder.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace examples {

class jsonl_writer {
 public:
  explicit jsonl_writer(const std::string& path) : f_(std::fopen(path.c_str(), "w")) {
    if (f_ == nullptr) throw std::runtime_error("mldiag: cannot write " + path + "; check that its folder exists and is writable");
  }
  jsonl_writer(const jsonl_writer&) = delete;
  jsonl_writer& operator=(const jsonl_writer&) = delete;
  ~jsonl_writer() {
    if (f_ != nullptr) std::fclose(f_);
  }

  /// The step the recorder just closed.
  void step(const mldiag::recorder& rec) {
    const auto& s = rec.current();
    std::fprintf(f_, "{\"step\":%lld", static_cast<long long>(s.step));
    if (s.has_loss) field("loss", s.loss);
    if (s.has_lr) field("lr", s.lr);
    for (const auto& g : s.gradients) field("grad/" + std::string(rec.names()[g.id]) + "/norm", g.stats.l2_norm());
    for (const auto& p : s.parameters) field("param/" + std::string(rec.names()[p.id]) + "/norm", p.stats.l2_norm());
    if (!s.gradients.empty()) field("grad/global_norm", s.global_grad_norm());
    std::fputs("}\n", f_);
  }

  void finding(std::int64_t step, const mldiag::finding& f) {
    std::fprintf(f_, "{\"step\":%lld,\"finding\":{\"question\":%d,\"symptom\":", static_cast<long long>(step),
                 static_cast<int>(f.question));
    string(f.symptom);
    std::fputs(",\"severity\":", f_);
    string(mldiag::name(f.severity));
    std::fprintf(f_, ",\"first_step\":%lld,\"last_step\":%lld,\"detector\":", static_cast<long long>(f.first_step),
                 static_cast<long long>(f.last_step));
    string(f.detector);
    std::fputs(",\"where\":[", f_);
    for (std::size_t i = 0; i < f.where.size(); ++i) {
      std::fputs(i ? ",[" : "[", f_);
      string(f.where[i].first);
      std::fputc(',', f_);
      number(f.where[i].second);
      std::fputc(']', f_);
    }
    std::fputs("],\"evidence\":{", f_);
    for (std::size_t i = 0; i < f.evidence.size(); ++i) {
      if (i) std::fputc(',', f_);
      string(f.evidence[i].first);
      std::fputc(':', f_);
      number(f.evidence[i].second);
    }
    std::fputs("}}}\n", f_);
  }

 private:
  void field(std::string_view key, double v) {
    std::fputc(',', f_);
    string(key);
    std::fputc(':', f_);
    number(v);
  }
  void number(double v) {
    if (std::isnan(v)) std::fputs("NaN", f_);
    else if (std::isinf(v)) std::fputs(v > 0 ? "Infinity" : "-Infinity", f_);
    else std::fprintf(f_, "%.17g", v);
  }
  void string(std::string_view s) {
    std::fputc('"', f_);
    for (char c : s) {
      if (c == '"' || c == '\\') std::fputc('\\', f_);
      if (static_cast<unsigned char>(c) < 0x20) std::fprintf(f_, "\\u%04x", c);
      else std::fputc(c, f_);
    }
    std::fputc('"', f_);
  }
  std::FILE* f_;
};

}  // namespace examples
