// SPDX-License-Identifier: Apache-2.0
/// {fmt} formatters for mldiag's public value types: `fmt::print("{}", x)` gives the compact
/// one-line form, `fmt::print("{:d}", x)` the detailed form.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// The heavy part (fmt) lives here, not in the core headers: a user of mldiag/stats pays
// nothing for the reports (tests/headers checks it).
#include "mldiag/vocab/finding.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/protocol/diagnosis.hpp"
#include "mldiag/protocol/evidence_summary.hpp"
#include "mldiag/report/episodes.hpp"  // step_span
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <fmt/format.h>

#include <iterator>
#include <type_traits>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::report {

/// A snapshot with the names its tensor ids refer to, for formatting with names:
/// `fmt::print("{:d}", mldiag::report::with_names(rec.current(), rec.names()))`.
struct named_snapshot {
  const snapshot& s;
  const name_table& names;
};
[[nodiscard]] inline named_snapshot with_names(const snapshot& s, const name_table& names) noexcept { return {s, names}; }

namespace detail {

// The format spec every mldiag formatter takes: empty (compact) or `d` (detailed).
struct spec_parser {
  bool detailed = false;
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == 'd') {
      detailed = true;
      ++it;
    } else if (it != ctx.end() && *it == 'c') {
      ++it;
    }
    if (it != ctx.end() && *it != '}') throw fmt::format_error("mldiag: use {} (compact) or {:d} (detailed) for mldiag types");
    return it;
  }
};

inline std::string_view check_name(protocol::obvious_checks::result r) noexcept {
  switch (r) {
    case protocol::obvious_checks::result::not_run: return "not run";
    case protocol::obvious_checks::result::passed: return "passed";
    case protocol::obvious_checks::result::failed: return "FAILED";
  }
  return "?";
}

template <class Out>
Out format_finding(Out out, const finding& f, bool detailed) {
  out = fmt::format_to(out, "{} {}: {} (", name(f.severity), name(f.question), f.symptom);
  // A configuration (L0) finding has no step (-1): "before training", not "steps -1--1".
  if (f.last_step < 0 || f.first_step < 0)
    out = fmt::format_to(out, "{})", step_span(f.first_step, f.last_step));
  else
    out = fmt::format_to(out, "steps {}-{})", f.first_step, f.last_step);
  if (!detailed) {
    if (!f.where.empty()) out = fmt::format_to(out, " at {}", f.where.front().first);
    return out;
  }
  if (!f.where.empty()) {
    out = fmt::format_to(out, "\n  where:");
    for (const auto& [n, score] : f.where) out = fmt::format_to(out, " {} ({:.4g})", n, score);
  }
  if (!f.evidence.empty()) {
    out = fmt::format_to(out, "\n  evidence:");
    for (const auto& [k, v] : f.evidence) out = fmt::format_to(out, " {}={:.6g}", k, v);
  }
  if (!f.detector.empty()) out = fmt::format_to(out, "\n  detector: {}", f.detector);
  return out;
}

template <class Out, class P>
Out format_diagnosis(Out out, const protocol::diagnosis<P>& d, bool detailed) {
  std::string_view where = protocol::label(d.phase);
  if constexpr (std::is_same_v<P, protocol::phases::resolved>) where = "resolved";
  if constexpr (std::is_same_v<P, protocol::phases::escalated>) where = "escalated (question the fundamentals)";
  out = fmt::format_to(out, "{} for {}: {} symptom(s) in focus, {} hypothesis(es) rejected", where, name(d.asked()),
                       d.focus().size(), d.rejected().size());
  if (d.proposed()) out = fmt::format_to(out, ", under test: '{}'", d.proposed()->cause);
  if (d.confirmed()) out = fmt::format_to(out, ", confirmed: '{}'", d.confirmed()->cause);
  if (detailed)
    for (const auto& e : d.log()) out = fmt::format_to(out, "\n  {}: {}", protocol::label(e.phase), e.text);
  return out;
}

template <class Out>
Out format_snapshot(Out out, const snapshot& s, const name_table* names, bool detailed) {
  out = fmt::format_to(out, "step {}:", s.step);
  if (s.loss) out = fmt::format_to(out, " loss={:.6g}", *s.loss);
  if (s.val_loss) out = fmt::format_to(out, " val_loss={:.6g}", *s.val_loss);
  if (s.lr) out = fmt::format_to(out, " lr={:.3g}", *s.lr);
  if (s.loss_scale) out = fmt::format_to(out, " loss_scale={:g}", *s.loss_scale);
  if (const auto g = s.global_grad_norm()) out = fmt::format_to(out, " grad_norm={:.4g}", *g);
  if (!detailed) {
    return fmt::format_to(out, " ({} gradients, {} parameters, {} activations)", s.gradients.size(), s.parameters.size(),
                          s.activations.size());
  }
  auto label = [&](std::uint32_t id) { return names != nullptr && id < names->size() ? std::string((*names)[id]) : fmt::format("#{}", id); };
  for (const role r : all_roles) {
    for (const auto& t : s.of(r)) {
      out = fmt::format_to(out, "\n  {} {}: n={} l2={:.6g} mean={:.4g} std={:.4g} min={:.4g} max={:.4g}", name(r),
                           label(t.id), t.stats.count, t.stats.l2_norm(), t.stats.mean(), t.stats.stddev(), t.stats.min, t.stats.max);
      if (t.stats.non_finite() > 0) out = fmt::format_to(out, " NaN={} +Inf={} -Inf={}", t.stats.nan, t.stats.pos_inf, t.stats.neg_inf);
    }
  }
  for (const auto& a : s.attention)
    out = fmt::format_to(out, "\n  entropy {}: mean={:.4g} normalized={:.4g} over {} rows", label(a.id), a.stats.mean(),
                         a.stats.normalized_mean(), a.stats.rows);
  for (const auto& r : s.routers)
    out = fmt::format_to(out, "\n  router {}: {} experts, {} dead, max/mean load={:.3g}", label(r.id), r.experts, r.dead, r.max_over_mean);
  for (const auto& [id, d] : s.drift) out = fmt::format_to(out, "\n  drift {}: {:.4g}", label(id), d);
  if (const auto& t = s.timings; t.total) {
    out = fmt::format_to(out, "\n  step time {:.4g} s", *t.total);
    if (t.data_wait) out = fmt::format_to(out, " (data wait {:.4g} s)", *t.data_wait);
  }
  for (const auto& l : s.layer_times) out = fmt::format_to(out, "\n  layer time {}: {:.4g} s", label(l.id), l.seconds);
  if (const auto& m = s.memory; m.allocated) {
    out = fmt::format_to(out, "\n  memory allocated {:.4g} B", *m.allocated);
    if (m.reserved) out = fmt::format_to(out, ", reserved {:.4g} B", *m.reserved);
  }
  return out;
}

}  // namespace detail
}  // namespace mldiag::report

/// `{}`: "n=4096 l2=12.5 mean=0.0012 std=0.19 [-0.81, 0.77]" (plus the non-finite counts
/// when there are any); `{:d}`: every field.
template <>
struct fmt::formatter<mldiag::tensor_stats> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::tensor_stats& s, Context& ctx) const {
    auto out = ctx.out();
    if (!detailed) {
      out = fmt::format_to(out, "n={} l2={:.6g} mean={:.4g} std={:.4g} [{:.4g}, {:.4g}]", s.count, s.l2_norm(), s.mean(), s.stddev(),
                           s.min, s.max);
      if (s.non_finite() > 0) out = fmt::format_to(out, " NaN={} +Inf={} -Inf={}", s.nan, s.pos_inf, s.neg_inf);
      return out;
    }
    return fmt::format_to(out,
                          "count={} finite={} nan={} pos_inf={} neg_inf={} zeros={} min={:.9g} max={:.9g} max_abs={:.9g} "
                          "mean={:.9g} std={:.9g} variance={:.9g} l2={:.9g} rms={:.9g}",
                          s.count, s.finite(), s.nan, s.pos_inf, s.neg_inf, s.zeros, s.min, s.max, s.max_abs, s.mean(), s.stddev(),
                          s.variance(), s.l2_norm(), s.rms());
  }
};

/// `{}`: "H=2.31 (0.83 of max) over 512 rows"; `{:d}`: with min/max and invalid rows.
template <>
struct fmt::formatter<mldiag::entropy_stats> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::entropy_stats& e, Context& ctx) const {
    auto out = fmt::format_to(ctx.out(), "H={:.4g} ({:.3g} of max) over {} rows", e.mean(), e.normalized_mean(), e.rows);
    if (!detailed) return out;
    if (e.rows > 0)
      out = fmt::format_to(out, "; min={:.4g} max={:.4g}; normalized min={:.3g} max={:.3g}", e.min, e.max, e.normalized_min,
                           e.normalized_max);
    return fmt::format_to(out, "; invalid rows={}", e.invalid_rows);
  }
};

template <>
struct fmt::formatter<mldiag::question> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(mldiag::question q, Context& ctx) const { return fmt::formatter<std::string_view>::format(mldiag::name(q), ctx); }
};

template <>
struct fmt::formatter<mldiag::severity> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(mldiag::severity s, Context& ctx) const { return fmt::formatter<std::string_view>::format(mldiag::name(s), ctx); }
};

/// `{}`: "critical Q1 convergence: exploding gradients (steps 12-15) at fc1.weight" ("(before
/// training)" for a configuration finding, which has no step);
/// `{:d}`: every location with its score, the evidence and the detector, one per line.
template <>
struct fmt::formatter<mldiag::finding> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::finding& f, Context& ctx) const { return mldiag::report::detail::format_finding(ctx.out(), f, detailed); }
};

/// `{}`: the step's scalars and tensor counts; `{:d}`: every tensor by id (use
/// `mldiag::report::with_names` for names).
template <>
struct fmt::formatter<mldiag::snapshot> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::snapshot& s, Context& ctx) const {
    return mldiag::report::detail::format_snapshot(ctx.out(), s, nullptr, detailed);
  }
};

template <>
struct fmt::formatter<mldiag::report::named_snapshot> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::report::named_snapshot& n, Context& ctx) const {
    return mldiag::report::detail::format_snapshot(ctx.out(), n.s, &n.names, detailed);
  }
};

/// `{}`: "4 finding(s), recent loss 2.31, obvious checks: ..."; `{:d}`: every finding.
template <>
struct fmt::formatter<mldiag::protocol::evidence_summary> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::protocol::evidence_summary& e, Context& ctx) const {
    using mldiag::report::detail::check_name;
    auto out = fmt::format_to(ctx.out(),
                              "steps {}-{}: {} finding(s), recent loss {:.4g}; obvious checks: learning rate {}, loss matches "
                              "task {}, labels in range {}, no NaN/Inf {}",
                              e.first_step, e.last_step, e.findings.size(), e.recent_loss, check_name(e.obvious.learning_rate_sane),
                              check_name(e.obvious.loss_matches_task), check_name(e.obvious.labels_in_range),
                              check_name(e.obvious.no_nan_inf));
    if (detailed)
      for (const auto& f : e.findings) out = mldiag::report::detail::format_finding(fmt::format_to(out, "\n  "), f, false);
    return out;
  }
};

/// The diagnosis phases: `{}` says the phase, the question and the hypotheses; `{:d}` adds
/// the diagnosis log, phase by phase.
template <class P>
struct fmt::formatter<mldiag::protocol::diagnosis<P>> : mldiag::report::detail::spec_parser {
  template <class Context>
  auto format(const mldiag::protocol::diagnosis<P>& d, Context& ctx) const {
    return mldiag::report::detail::format_diagnosis(ctx.out(), d, detailed);
  }
};

/// A diagnosis log record: "phase 3 (hypothesis): 'learning rate too high' rejected (...)".
template <>
struct fmt::formatter<mldiag::protocol::log_entry> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const mldiag::protocol::log_entry& e, Context& ctx) const {
    return fmt::format_to(ctx.out(), "{}: {}", mldiag::protocol::label(e.phase), e.text);
  }
};
