// SPDX-License-Identifier: Apache-2.0
/// `mldiag::cuda::event_timer`: step phases and named layers timed on the GPU with CUDA
/// events on the caller's stream, read back a step later without ever blocking the host.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/cuda/check.cuh"
#include "mldiag/efficiency/profiler.hpp"
#include "mldiag/efficiency/timing.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// What `event_timer::try_readback()` found.
enum class readback_status : std::uint8_t {
  ready,         ///< the oldest unread step's times are in `phases()` / `layers()`
  not_ready,     ///< the GPU has not reached that step's last event yet: try again later
  none_pending,  ///< every ended step has been read (or none has ended)
};

/// Times the phases of a step and named layers on the GPU, like `efficiency::step_timer` and
/// `efficiency::layer_profiler` on the host, with CUDA events recorded on the stream you pass.
///
/// **How it stays off the host's critical path.** The events are created once, in the
/// constructor: a ring of `steps_in_flight` slots of `max_events_per_step` events each. A mark
/// is one `cudaEventRecord` (asynchronous) plus a few stores. Results are read *a step later*:
/// `try_readback()` asks with `cudaEventQuery` whether the oldest ended step's last event has
/// completed; if it has not, it returns `readback_status::not_ready` at once and the step stays
/// pending; if it has, `cudaEventElapsedTime` gives every interval. No call of the step path
/// (`begin_step`, `mark`, `begin`, `end`, `end_step`, `try_readback`) waits for the GPU, creates
/// an event or allocates once the layer names are known. Only `finish()` waits (for the end of a
/// run or a test), and the destructor releases the events (`cudaEventDestroy` does not wait).
/// tests/cuda/device_test.cu checks this with a kernel that spins for 200 ms: after every call
/// the stream is still busy (`cudaStreamQuery` says `cudaErrorNotReady`); and the CTest
/// `efficiency.event_timer_no_host_sync` scans this file for synchronizing calls outside the
/// constructor, the destructor and `finish()`.
///
/// **Ring.** With the default two slots, step N records into one slot while step N-1 waits to be
/// read in the other. If a slot is needed again before it was read (steps ended faster than
/// they were read, or `try_readback` kept answering not_ready), its step is dropped, counted in
/// `dropped_steps()`, and never waited for. Raise `steps_in_flight` when the host runs further
/// ahead of the GPU.
///
/// **Semantics.** Phases partition the step exactly as on the host (`begin_step` starts in
/// `phase::other`; each `mark` switches). Layers nest; a layer's self time is its total minus
/// the totals of the layers begun and ended inside it. Times are GPU time between the events,
/// in the order the stream reaches them; events of one step may be recorded on different
/// streams of the same device (e.g. communication on its own stream), and the step is ready
/// only when all of its intervals are. Event timing resolution is about 0.5 µs.
///
/// Misuse is an `mldiag::error` (as on the host): marks outside a step, `end()` with nothing
/// open, `end_step()` with layers open, more events in a step than the slot holds. One timer per
/// host thread; every stream must belong to the device that was current at construction.
///
/// **Example**
/// ```cpp
/// mldiag::cuda::event_timer gpu;  // once: creates the events
/// using mldiag::efficiency::phase;
/// for (;;) {
///   gpu.begin_step(stream);
///   gpu.mark(phase::forward, stream);   model_forward(stream);
///   gpu.mark(phase::backward, stream);  model_backward(stream);
///   gpu.end_step(stream);
///   // the previous step's times, if the GPU is done with them; never waits
///   if (gpu.try_readback() == mldiag::cuda::readback_status::ready) {
///     monitor.observe(gpu.phases().to_step_timings());
///     mldiag::efficiency::observe_layer_times(monitor, gpu.layers());
///   }
/// }
/// gpu.finish();  // end of the run: waits for the last steps, then read them
/// ```
class event_timer {
 public:
  struct config {
    /// Events one step may record: 2 for the step, 1 per phase mark, 2 per layer interval.
    std::uint32_t max_events_per_step = 1024;
    /// Steps that may be recorded or waiting to be read at once (>= 2).
    std::uint32_t steps_in_flight = 2;
  };

  event_timer() : event_timer(config{}) {}

  // mldiag:sync-allowed begin (the constructor creates every event the timer will use)
  explicit event_timer(config c) : config_(c) {
    if (c.max_events_per_step < 2 || c.steps_in_flight < 2) {
      throw error(
          "cuda::event_timer: max_events_per_step must be >= 2 and steps_in_flight >= 2 (one step "
          "recorded while the previous one is read); got " +
          std::to_string(c.max_events_per_step) + " and " + std::to_string(c.steps_in_flight));
    }
    slots_.resize(c.steps_in_flight);
    events_.all.reserve(static_cast<std::size_t>(c.max_events_per_step) * c.steps_in_flight);
    for (auto& s : slots_) {
      s.first_event = events_.all.size();
      for (std::uint32_t i = 0; i < c.max_events_per_step; ++i) {
        cudaEvent_t e = nullptr;
        check(cudaEventCreateWithFlags(&e, cudaEventDefault),
              "cuda::event_timer: creating the timing events");
        events_.all.push_back(e);
      }
      s.phase_marks.reserve(c.max_events_per_step);
      s.spans.reserve(c.max_events_per_step / 2);
    }
    open_stack_.reserve(c.max_events_per_step / 2);
    span_totals_.resize(c.max_events_per_step / 2);
    span_children_.resize(c.max_events_per_step / 2);
  }
  // mldiag:sync-allowed end

  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  // The destructor: cudaEventDestroy returns at once, even for an event the GPU has not
  // reached (the driver frees it when it completes), so ending a run does not wait either.
  ~event_timer() = default;

  /// The id of a layer name, interning it (one allocation) the first time.
  std::uint32_t intern(std::string_view name) {
    const auto id = names_.intern(name);
    sums_.resize(names_.size());
    open_count_.resize(names_.size(), 0);
    return id;
  }

  /// Opens a step: records its first event on `stream`, in `phase::other`. Reuses the ring's
  /// next slot; a step still unread there is dropped (`dropped_steps()`), never waited for.
  void begin_step(cudaStream_t stream) {
    if (recording_ != nullptr) {
      throw error("cuda::event_timer::begin_step: a step is already open; call end_step() first");
    }
    slot& s = slots_[next_slot_];
    if (s.pending) {
      s.pending = false;
      ++dropped_;
    }
    s.used = 0;
    s.phase_marks.clear();
    s.spans.clear();
    s.step = next_step_;
    recording_ = &s;
    s.phase_marks.push_back({record(s, stream, "begin_step"), efficiency::phase::other});
  }

  /// From now on the step is in phase `p` (an event on `stream`).
  void mark(efficiency::phase p, cudaStream_t stream) {
    slot& s = open_slot("mark");
    s.phase_marks.push_back({record(s, stream, "mark"), p});
  }

  /// Starts timing layer `name` in pass `p` (an event on `stream`).
  void begin(std::string_view name, efficiency::pass p, cudaStream_t stream) {
    const auto known = names_.find(name);
    begin(known >= 0 ? static_cast<std::uint32_t>(known) : intern(name), p, stream);
  }
  void begin(std::uint32_t id, efficiency::pass p, cudaStream_t stream) {
    slot& s = open_slot("begin");
    if (id >= names_.size()) {
      throw error("cuda::event_timer::begin: layer id " + std::to_string(id) +
                  " was not made by intern()");
    }
    const std::uint32_t e = record(s, stream, "begin");
    const bool outermost = open_count_[id]++ == 0;
    s.spans.push_back({id, e, e,
                       open_stack_.empty() ? -1 : static_cast<std::int32_t>(open_stack_.back()), p,
                       outermost});
    open_stack_.push_back(static_cast<std::uint32_t>(s.spans.size() - 1));
  }

  /// Ends the innermost open layer (an event on `stream`).
  void end(cudaStream_t stream) {
    slot& s = open_slot("end");
    if (open_stack_.empty())
      throw error("cuda::event_timer::end: no layer is open; every end() needs a begin()");
    auto& span = s.spans[open_stack_.back()];
    span.end_event = record(s, stream, "end");
    --open_count_[span.id];
    open_stack_.pop_back();
  }

  /// Closes the step: records its last event on `stream`. Its times are read by a later
  /// `try_readback()`.
  void end_step(cudaStream_t stream) {
    slot& s = open_slot("end_step");
    if (!open_stack_.empty()) {
      throw error("cuda::event_timer::end_step: " + std::to_string(open_stack_.size()) +
                  " layer(s) still open (innermost '" +
                  std::string(names_[s.spans[open_stack_.back()].id]) +
                  "'); end every layer before end_step()");
    }
    s.last_event = record(s, stream, "end_step");
    s.pending = true;
    recording_ = nullptr;
    next_slot_ = (next_slot_ + 1) % slots_.size();
    ++next_step_;
  }

  /// Reads the oldest ended, unread step if the GPU has finished it; never waits. On `ready`
  /// its times are in `step()`, `phases()` and `layers()` until the next ready readback.
  readback_status try_readback() {
    slot* oldest = nullptr;
    for (auto& s : slots_) {
      if (s.pending && (oldest == nullptr || s.step < oldest->step)) oldest = &s;
    }
    if (oldest == nullptr) return readback_status::none_pending;
    slot& s = *oldest;
    const cudaError_t done = cudaEventQuery(event(s, s.last_event));
    if (done == cudaErrorNotReady) return readback_status::not_ready;
    check(done, "cuda::event_timer::try_readback: querying the step's last event");

    // Phases: from each mark to the next, the last one to the step's end.
    efficiency::phase_times t;
    for (std::size_t i = 0; i < s.phase_marks.size(); ++i) {
      const auto& m = s.phase_marks[i];
      const std::uint32_t to =
          i + 1 < s.phase_marks.size() ? s.phase_marks[i + 1].event : s.last_event;
      double seconds = 0.0;
      if (!elapsed(s, m.event, to, seconds)) return readback_status::not_ready;
      t.seconds[static_cast<std::size_t>(m.p)] += seconds;
      if (i > 0)
        t.entered = static_cast<std::uint8_t>(t.entered | (1U << static_cast<unsigned>(m.p)));
    }
    if (!elapsed(s, 0, s.last_event, t.total)) return readback_status::not_ready;

    // Layers: totals first (an interval on another stream may still be running: then the whole
    // step waits for a later call), then self = total - the totals of the spans directly inside.
    for (std::size_t i = 0; i < s.spans.size(); ++i) {
      if (!elapsed(s, s.spans[i].begin_event, s.spans[i].end_event, span_totals_[i]))
        return readback_status::not_ready;
      span_children_[i] = 0.0;
    }
    for (std::size_t i = 0; i < s.spans.size(); ++i) {
      if (s.spans[i].parent >= 0)
        span_children_[static_cast<std::size_t>(s.spans[i].parent)] += span_totals_[i];
    }
    sums_.reset();
    for (std::size_t i = 0; i < s.spans.size(); ++i) {
      const auto& sp = s.spans[i];
      sums_.add(sp.id, sp.p, span_totals_[i] - span_children_[i],
                sp.outermost ? span_totals_[i] : 0.0);
    }
    sums_.finish(names_, layers_, [](double x) { return x; });
    phases_ = t;
    read_step_ = s.step;
    s.pending = false;
    return readback_status::ready;
  }

  // mldiag:sync-allowed begin (finish: the one call that waits, for the end of a run or a test)
  /// Waits until the GPU has passed every ended step, so that `try_readback()` returns them
  /// (ready, until none_pending). The only call that blocks the host: not for the step path.
  void finish() {
    for (auto& s : slots_) {
      if (s.pending)
        check(cudaEventSynchronize(event(s, s.last_event)), "cuda::event_timer::finish");
    }
  }
  // mldiag:sync-allowed end

  /// The step number (0, 1, ... in order of begin_step) of the last ready readback; -1 before.
  [[nodiscard]] std::int64_t step() const noexcept { return read_step_; }
  /// Phase times of the last ready readback (GPU time, seconds).
  [[nodiscard]] const efficiency::phase_times& phases() const noexcept { return phases_; }
  /// Layer times of the last ready readback, in order of first begin; the same form as the
  /// host profiler's, so `efficiency::rollup_by_substructure`, `dominant_layer` and
  /// `observe_layer_times` apply.
  [[nodiscard]] std::span<const efficiency::layer_result> layers() const noexcept {
    return layers_;
  }
  /// Steps dropped because their slot was needed before they were read.
  [[nodiscard]] std::uint64_t dropped_steps() const noexcept { return dropped_; }
  [[nodiscard]] bool step_open() const noexcept { return recording_ != nullptr; }
  [[nodiscard]] const config& configuration() const noexcept { return config_; }

 private:
  struct phase_mark {
    std::uint32_t event;
    efficiency::phase p;
  };
  struct span {
    std::uint32_t id;
    std::uint32_t begin_event;
    std::uint32_t end_event;
    std::int32_t parent;  // index of the enclosing span in the step, -1 at top level
    efficiency::pass p;
    bool outermost;  // not nested in an interval of the same layer: counts toward its total
  };
  struct slot {
    std::size_t first_event = 0;  // in events_.all
    std::uint32_t used = 0;
    std::uint32_t last_event = 0;
    std::int64_t step = -1;
    bool pending = false;                 // ended, not read yet
    std::vector<phase_mark> phase_marks;  // capacity reserved in the constructor
    std::vector<span> spans;              // capacity reserved in the constructor
  };
  // Owns the events, so that a constructor failing half-way still destroys those it made.
  struct owned_events {
    std::vector<cudaEvent_t> all;
    owned_events() = default;
    owned_events(const owned_events&) = delete;
    owned_events& operator=(const owned_events&) = delete;
    ~owned_events() {
      for (cudaEvent_t e : all)
        (void)cudaEventDestroy(e);
    }
  };

  cudaEvent_t event(const slot& s, std::uint32_t i) const noexcept {
    return events_.all[s.first_event + i];
  }

  slot& open_slot(std::string_view what) {
    if (recording_ == nullptr) [[unlikely]] {
      throw error("cuda::event_timer::" + std::string(what) +
                  ": no step is open; call begin_step(stream) first");
    }
    return *recording_;
  }

  // Records the slot's next event on `stream`; the index of that event in the slot.
  std::uint32_t record(slot& s, cudaStream_t stream, std::string_view what) {
    // One event is kept for end_step, so a full step can still be closed.
    const std::uint32_t limit = config_.max_events_per_step - (what == "end_step" ? 0U : 1U);
    if (s.used >= limit) [[unlikely]] {
      recording_ = nullptr;
      open_stack_.clear();
      for (auto& c : open_count_)
        c = 0;
      throw error(
          "cuda::event_timer::" + std::string(what) + ": more than " +
          std::to_string(config_.max_events_per_step) +
          " events in one step (2 per step, 1 per mark, 2 per layer); construct the timer with a "
          "larger config::max_events_per_step. The step was discarded");
    }
    const std::uint32_t i = s.used++;
    check(cudaEventRecord(event(s, i), stream),
          "cuda::event_timer::" + std::string(what) + ": cudaEventRecord");
    return i;
  }

  // Seconds between two events of a slot; false when one of them has not completed yet.
  bool elapsed(const slot& s, std::uint32_t from, std::uint32_t to, double& seconds) const {
    float ms = 0.0F;
    const cudaError_t status = cudaEventElapsedTime(&ms, event(s, from), event(s, to));
    if (status == cudaErrorNotReady) return false;
    check(status, "cuda::event_timer::try_readback: cudaEventElapsedTime");
    seconds = static_cast<double>(ms) * 1e-3;
    return true;
  }

  config config_;
  owned_events events_;
  std::vector<slot> slots_;
  std::size_t next_slot_ = 0;
  std::int64_t next_step_ = 0;
  std::int64_t read_step_ = -1;
  std::uint64_t dropped_ = 0;
  slot* recording_ = nullptr;
  efficiency::detail::layer_names names_;
  efficiency::detail::layer_sums<double> sums_;
  std::vector<std::uint32_t> open_count_;  // by layer id: intervals open now
  std::vector<std::uint32_t> open_stack_;  // spans of the open step, innermost last
  std::vector<double> span_totals_;        // scratch for the readback, by span
  std::vector<double> span_children_;      // scratch for the readback, by span
  efficiency::phase_times phases_;
  std::vector<efficiency::layer_result> layers_;
};

}  // namespace mldiag::cuda
