// SPDX-License-Identifier: Apache-2.0
/// Step-phase timing on the host clock: how one training step splits into data wait, forward,
/// backward, optimizer, communication and the rest.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::efficiency {

/// The phases of a training step. `other` is everything not marked as one of the named
/// phases (the time between `begin_step()` and the first mark, logging, checkpointing, ...).
enum class phase : std::uint8_t { data_wait, forward, backward, optimizer, communication, other };
inline constexpr std::size_t phase_count = 6;

/// "data_wait", "forward", ... (the names used in messages and reports).
[[nodiscard]] constexpr std::string_view phase_name(phase p) noexcept {
  switch (p) {
    case phase::data_wait:
      return "data_wait";
    case phase::forward:
      return "forward";
    case phase::backward:
      return "backward";
    case phase::optimizer:
      return "optimizer";
    case phase::communication:
      return "communication";
    case phase::other:
      return "other";
  }
  return "unknown phase";
}

/// What the timers need from a clock: `std::chrono::steady_clock`'s shape (a static `now()`,
/// monotonic). Tests pass a clock they advance by hand, so that expected times are exact.
template <class C>
concept monotonic_clock = requires {
  typename C::duration;
  typename C::time_point;
  { C::now() } -> std::same_as<typename C::time_point>;
}
&&C::is_steady;

/// One step split by phase, in seconds. Every instant of the step belongs to exactly one
/// phase, so the phases add up to `total` (up to the rounding of the conversion to seconds).
struct phase_times {
  std::array<double, phase_count> seconds{};  ///< by `phase`; 0 for a phase not entered
  std::uint8_t entered = 0;                   ///< bit i set: phase i was marked in the step
  double total = 0.0;                         ///< begin_step() to end_step()

  [[nodiscard]] double operator[](phase p) const noexcept {
    return seconds[static_cast<std::size_t>(p)];
  }
  [[nodiscard]] bool was_entered(phase p) const noexcept {
    return ((entered >> static_cast<unsigned>(p)) & 1U) != 0U;
  }
  /// The snapshot's form: a named phase that was never marked is absent ("not measured", so a
  /// detector that needs it stays quiet rather than reading 0). The snapshot has no `other`
  /// field: it is `total` minus the named phases.
  [[nodiscard]] step_timings to_step_timings() const noexcept {
    const auto get = [this](phase p) { return was_entered(p) ? std::optional<double>((*this)[p]) : std::nullopt; };
    step_timings t;
    t.data_wait = get(phase::data_wait);
    t.forward = get(phase::forward);
    t.backward = get(phase::backward);
    t.optimizer = get(phase::optimizer);
    t.communication = get(phase::communication);
    t.total = total;
    return t;
  }
};

/// Marks the phases of a training step with a monotonic host clock and returns the step's
/// `step_timings` for `mon.observe(timings)`.
///
/// The timer is always in exactly one phase while a step is open: `begin_step()` starts in
/// `phase::other`, `mark(p)` switches to `p` (the time since the last switch goes to the phase
/// being left), `end_step()` closes the last phase. A `scope(p)` guard switches to `p` and, when
/// it ends, back to the phase that was current when it began, so nested scopes take their time
/// out of the enclosing phase (communication inside backward counts as communication only).
///
/// Cost: one clock read, a subtraction and an add per mark; no allocation, no lock (see
/// bench/timer_bench.cpp and docs/benchmarks.md). One timer per thread: it is not synchronized.
///
/// Misuse is an `mldiag::error` naming the call: a mark, scope or `end_step()` with no step
/// open, `begin_step()` while one is open, `end_step()` while a scope guard is still alive, or
/// guards that ended out of order (possible only when a guard lives on the heap). After an
/// error, `abandon_step()` discards the step so the next `begin_step()` starts clean.
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::step_timer timer;
/// using mldiag::efficiency::phase;
/// for (;;) {
///   timer.begin_step();
///   timer.mark(phase::data_wait);  auto batch = loader.next();
///   timer.mark(phase::forward);    auto loss = model.forward(batch);
///   {
///     auto g = timer.scope(phase::backward);
///     loss.backward();
///   }
///   timer.mark(phase::optimizer);  opt.step();
///   monitor.observe(timer.end_step());
/// }
/// ```
template <monotonic_clock Clock = std::chrono::steady_clock>
class basic_step_timer {
 public:
  using clock = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  /// Switches back to the enclosing phase when it ends; from `scope()`. Not copyable or
  /// movable: keep it on the stack, so guards end in reverse order of their beginning.
  class [[nodiscard]] phase_scope {
   public:
    phase_scope(const phase_scope&) = delete;
    phase_scope& operator=(const phase_scope&) = delete;
    ~phase_scope() { timer_->close_scope(previous_, depth_, generation_); }

   private:
    friend class basic_step_timer;
    phase_scope(basic_step_timer* timer, phase previous, std::uint32_t depth,
                std::uint64_t generation) noexcept
        : timer_(timer), generation_(generation), depth_(depth), previous_(previous) {}
    basic_step_timer* timer_;
    std::uint64_t generation_;
    std::uint32_t depth_;
    phase previous_;
  };

  /// Opens a step, in `phase::other`.
  void begin_step() {
    if (open_) {
      throw error("step_timer::begin_step: a step is already open (in phase '" +
                  std::string(phase_name(current_)) +
                  "'); call end_step() (or abandon_step()) first");
    }
    ticks_.fill(duration::zero());
    entered_ = 0;
    depth_ = 0;
    scopes_out_of_order_ = false;
    current_ = phase::other;
    open_ = true;
    ++generation_;
    start_ = last_ = Clock::now();
  }

  /// From now on the step is in phase `p`.
  void mark(phase p) {
    const time_point now = Clock::now();
    if (!open_) [[unlikely]]
      not_open("mark", p);
    switch_to(p, now);
  }

  /// Switches to `p` until the returned guard ends, then back to the current phase.
  ///
  /// **Example**
  /// ```cpp
  /// { auto g = timer.scope(phase::communication); all_reduce(grads); }
  /// ```
  phase_scope scope(phase p) {
    const time_point now = Clock::now();
    if (!open_) [[unlikely]]
      not_open("scope", p);
    const phase previous = current_;
    switch_to(p, now);
    return phase_scope(this, previous, depth_++, generation_);
  }

  /// Closes the step and returns its timings (named phases never marked are absent).
  step_timings end_step() {
    const time_point now = Clock::now();
    if (!open_) throw error("step_timer::end_step: no step is open; call begin_step() first");
    if (scopes_out_of_order_) {
      open_ = false;
      throw error(
          "step_timer::end_step: phase scopes ended out of order (a guard outlived a guard "
          "made after it); keep scope guards on the stack. The step was discarded");
    }
    if (depth_ != 0) {
      throw error("step_timer::end_step: " + std::to_string(depth_) +
                  " phase scope(s) still open (current phase '" +
                  std::string(phase_name(current_)) +
                  "'); let every scope guard end before end_step()");
    }
    switch_to(current_, now);
    open_ = false;
    last_times_.entered = entered_;
    for (std::size_t i = 0; i < phase_count; ++i)
      last_times_.seconds[i] = seconds(ticks_[i]);
    last_times_.total = seconds(now - start_);
    return last_times_.to_step_timings();
  }

  /// Discards an open step (after a misuse error, or when a step is skipped).
  void abandon_step() noexcept {
    open_ = false;
    depth_ = 0;
  }

  /// The last ended step, with `other` and which phases were marked.
  [[nodiscard]] const phase_times& last_step() const noexcept { return last_times_; }
  [[nodiscard]] bool step_open() const noexcept { return open_; }
  /// The phase the open step is in.
  [[nodiscard]] phase current() const noexcept { return current_; }

 private:
  static double seconds(duration d) noexcept { return std::chrono::duration<double>(d).count(); }

  void switch_to(phase p, time_point now) noexcept {
    ticks_[static_cast<std::size_t>(current_)] += now - last_;
    last_ = now;
    current_ = p;
    entered_ = static_cast<std::uint8_t>(entered_ | (1U << static_cast<unsigned>(p)));
  }

  void close_scope(phase previous, std::uint32_t depth, std::uint64_t generation) noexcept {
    const time_point now = Clock::now();
    // A guard of an abandoned step has nothing left to close.
    if (!open_ || generation != generation_ || depth_ == 0) return;
    if (depth + 1 != depth_) scopes_out_of_order_ = true;
    --depth_;
    switch_to(previous, now);
  }

  [[noreturn]] static void not_open(std::string_view what, phase p) {
    throw error("step_timer::" + std::string(what) + "(" + std::string(phase_name(p)) +
                "): no step is open; call begin_step() first");
  }

  std::array<duration, phase_count> ticks_{};
  time_point start_{};
  time_point last_{};
  std::uint64_t generation_ = 0;
  std::uint32_t depth_ = 0;
  std::uint8_t entered_ = 0;
  phase current_ = phase::other;
  bool open_ = false;
  bool scopes_out_of_order_ = false;
  phase_times last_times_;
};

/// The step timer on `std::chrono::steady_clock`.
using step_timer = basic_step_timer<>;

}  // namespace mldiag::efficiency
