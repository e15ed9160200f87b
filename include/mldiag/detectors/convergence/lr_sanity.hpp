// SPDX-License-Identifier: Apache-2.0
/// Q1 `lr_sanity`: a learning rate that cannot work: not finite, zero, absurdly large, jumping.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/detectors/detector.hpp"
#include "mldiag/signals/window.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::detectors {

/// Q1: a learning rate that cannot work: not finite or negative (critical), zero for
/// `zero_steps` steps in a row before it was ever positive (warning; schedules may start at
/// exactly 0 for a step or two, and llm.c's decays to exactly 0 at the end, which is info;
/// where the rate was first seen after training's first `zero_steps` steps — a log excerpt
/// from step 19500 of a schedule printed as 0.000000 — its start is unseen, and the zero waits
/// for a consequence: info, escalated when the progress measure stops improving), or
/// above `max_lr` (5: plain SGD at 1 with gradient clipping is a classic recipe for
/// recurrent language models, Zaremba et al. 2014, and trains healthy ones;
/// docs/accuracy.md#lr_sanity; info that waits for a consequence — the progress measure or
/// validation worsening, a non-finite loss — and is a warning then: word2vec's SGD at 10 over
/// sparse rows trains, so a rate line is not proof that a rate cannot),
/// or that rises by more than `max_jump` (10x) from one step to the next (warning: a scheduler
/// restored with the wrong state, a factor applied twice). A drop by as much is info: step
/// decay by 0.1 is an ordinary schedule (docs/accuracy.md#lr_sanity). Reports onsets.
/// Each parameter group's rate (`group_learning_rate`, read from the optimizer) is judged the
/// same way, named in the finding. Where both are recorded, a logged rate that changes
/// `unapplied_changes` (5) times while no group's rate ever moves is a schedule the optimizer
/// never received (warning: the rate the program thinks it uses is not the one it trains with).
class lr_sanity {
 public:
  struct config {
    std::size_t zero_steps = 10;
    double max_lr = thresholds::max_learning_rate;
    double max_jump = 10.0;  ///< a change by more than this factor in one step (a rise warns, a drop is info)
    std::size_t unapplied_changes = 5;  ///< changes of the logged rate while no group's rate moved
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"zero_steps", &config::zero_steps},
          field<config>{"max_lr", &config::max_lr},
          field<config>{"max_jump", &config::max_jump},
          field<config>{"unapplied_changes", &config::unapplied_changes}};
    }
  };
  lr_sanity() : lr_sanity(config{}) {}
  explicit lr_sanity(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"lr_sanity", question::convergence, {symptoms::lr_not_finite_or_negative, symptoms::lr_reached_zero, symptoms::lr_is_zero, symptoms::lr_absurdly_large, symptoms::lr_jumped, symptoms::lr_dropped, symptoms::lr_not_applied}, "a learning rate that cannot work: not finite, zero, absurdly large, jumping, or never given to the optimizer", {.restarts_on_change = true, .consequence = "a rate that cannot train (not finite, negative, zero from the start): at once; one above max_lr: the progress measure or validation worsening; a schedule never applied: after its fifth change; a decay to 0 or a step drop is expected (info)"}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    if (o.now.lr) judge(scalar_, *o.now.lr, {}, o, out);
    for (const auto& [id, lr] : o.now.group_lrs) judge(group(id), lr, o.names[id], o, out);
    applied(o, out);
  }

 private:
  // One learning rate's state: the step's scalar, or one parameter group's.
  struct rate {
    std::uint32_t id = 0;
    bool seen_positive = false;
    std::int64_t first_step = -1;  // the step the rate was first seen at; -1: not yet
    double previous = 0.0;
    edge invalid, zero, large, jump, drop;
  };

  // Training's start was seen: the rate's first observation is among its first zero_steps steps.
  [[nodiscard]] bool seen_from_start(const rate& r) const {
    return r.first_step < static_cast<std::int64_t>(std::max<std::size_t>(c_.zero_steps, 1));
  }

  rate& group(std::uint32_t id) {
    for (auto& g : groups_)
      if (g.id == id) return g;
    groups_.push_back({id});
    return groups_.back();
  }

  void judge(rate& r, double lr, std::string_view group_name, const observation& o, std::vector<finding>& out) {
    const auto place = [&](finding f) {
      if (!group_name.empty()) f.where.emplace_back(std::string(group_name), lr);
      return f;
    };
    const bool was_positive = r.seen_positive;
    r.seen_positive = r.seen_positive || lr > 0.0;
    if (r.first_step < 0) r.first_step = o.now.step;
    if (r.invalid.rise(!std::isfinite(lr) || lr < 0.0)) {
      out.push_back(escalate(place(make_finding(question::convergence, symptoms::lr_not_finite_or_negative, severity::info,
                                                o.now.step, name(), {{"lr", lr}})),
                             {.unambiguous = true, .note = "no optimizer steps with such a rate"}));
    }
    if (r.zero.observe(lr == 0.0, c_.zero_steps)) {
      out.push_back(escalate(place(make_finding(question::convergence, was_positive ? symptoms::lr_reached_zero : symptoms::lr_is_zero,
                                                severity::info, o.now.step, name(),
                                                {{"lr", lr}, {"steps_at_zero", static_cast<double>(r.zero.run())}})),
                             was_positive ? grounds{.expected = true, .note = "a schedule that decays to zero"}
                             : seen_from_start(r)
                                 ? grounds{.held = r.zero.run(), .horizon = std::max<std::size_t>(c_.zero_steps, 1),
                                           .note = "a rate of zero from the start trains nothing"}
                                 : grounds{.awaits_consequence = true,
                                           .note = "zero since the first step seen, not training's start: a schedule may have reached 0 before it"}));
    }
    if (r.large.rise(std::isfinite(lr) && lr > c_.max_lr)) {
      out.push_back(escalate(place(make_finding(question::convergence, symptoms::lr_absurdly_large, severity::info, o.now.step,
                                                name(), {{"lr", lr}, {"max_lr", c_.max_lr}})),
                             // A line of rates, not a proof: SGD on sparse word2vec rows trains at 10 (issue 38).
                             {.awaits_consequence = true, .note = "above the rates known to train; the run's progress decides"}));
    }
    // A schedule moves smoothly (warm-up, decay); a jump by 10x in one step is a bug — a
    // scheduler restored with the wrong state on resume, a group given the wrong factor.
    const bool valid = r.previous > 0.0 && lr > 0.0 && std::isfinite(lr);
    if (r.jump.rise(valid && lr > c_.max_jump * r.previous)) {
      out.push_back(escalate(place(make_finding(question::convergence, symptoms::lr_jumped, severity::info, o.now.step, name(),
                                                {{"lr", lr}, {"previous_lr", r.previous}, {"factor", lr / r.previous}})),
                             {.horizon = 1, .note = "a schedule moves smoothly"}));
    }
    if (r.drop.rise(valid && r.previous >= c_.max_jump * lr * (1.0 - 1e-9))) {
      out.push_back(escalate(place(make_finding(question::convergence, symptoms::lr_dropped, severity::info, o.now.step, name(),
                                                {{"lr", lr}, {"previous_lr", r.previous}, {"factor", lr / r.previous}})),
                             {.expected = true, .note = "step decay is an ordinary schedule"}));
    }
    r.previous = std::isfinite(lr) ? lr : r.previous;
  }

  // The rate the program logs (its schedule) changes while no optimizer group's rate moves: the
  // schedule is computed and logged but never written into the optimizer.
  void applied(const observation& o, std::vector<finding>& out) {
    if (!o.now.lr || o.now.group_lrs.empty() || !std::isfinite(*o.now.lr)) return;
    if (first_group_lrs_.empty())
      for (const auto& [id, lr] : o.now.group_lrs) first_group_lrs_.emplace_back(id, lr);
    // A group that appears later counts as a move (its first rate is unknown: NaN != lr).
    for (const auto& [id, lr] : o.now.group_lrs) groups_ever_moved_ = groups_ever_moved_ || lr != first_group_lr(id);
    const double logged = *o.now.lr;
    if (logged_last_ > 0.0 && std::fabs(logged - logged_last_) > 1e-6 * logged_last_) ++logged_changes_;
    logged_last_ = logged;
    if (groups_ever_moved_ || unapplied_ || logged_changes_ < c_.unapplied_changes) return;
    unapplied_ = true;
    finding f = make_finding(question::convergence, symptoms::lr_not_applied, severity::info, o.now.step, name(),
                             {{"logged_lr", logged}, {"logged_changes", static_cast<double>(logged_changes_)}});
    for (const auto& [id, lr] : o.now.group_lrs) f.where.emplace_back(std::string(o.names[id]), lr);
    out.push_back(escalate(std::move(f), {.held = logged_changes_, .horizon = std::max<std::size_t>(c_.unapplied_changes, 1),
                                          .note = "the optimizer never received the schedule's rates"}));
  }
  [[nodiscard]] double first_group_lr(std::uint32_t id) const {
    for (const auto& [x, lr] : first_group_lrs_)
      if (x == id) return lr;
    return std::numeric_limits<double>::quiet_NaN();
  }

  config c_;
  rate scalar_;
  std::vector<rate> groups_;
  std::vector<std::pair<std::uint32_t, double>> first_group_lrs_;
  double logged_last_ = 0.0;
  std::size_t logged_changes_ = 0;
  bool groups_ever_moved_ = false, unapplied_ = false;
};

}  // namespace mldiag::detectors
