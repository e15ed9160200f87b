// SPDX-License-Identifier: Apache-2.0
/// The per-layer profiler: time per named layer (forward and backward, self and total), the
/// layer that dominates, and roll-ups by substructure and by name prefix.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/efficiency/timing.hpp"  // monotonic_clock
#include "mldiag/evidence/observer.hpp"
#include "mldiag/evidence/substructure.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>  // names keep their address while more are added
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::efficiency {

/// Which pass of a layer a timed interval belongs to.
enum class pass : std::uint8_t { forward, backward };

[[nodiscard]] constexpr std::string_view pass_name(pass p) noexcept {
  return p == pass::forward ? "forward" : "backward";
}

/// Seconds split by pass.
struct pass_times {
  double forward = 0.0;
  double backward = 0.0;
  [[nodiscard]] double sum() const noexcept { return forward + backward; }
  [[nodiscard]] double operator[](pass p) const noexcept {
    return p == pass::forward ? forward : backward;
  }
  pass_times& operator+=(const pass_times& o) noexcept {
    forward += o.forward;
    backward += o.backward;
    return *this;
  }
};

/// One layer's time in one step.
struct layer_result {
  std::string_view name;    ///< valid while its profiler (or event timer) lives
  std::uint32_t id = 0;     ///< the profiler's id of the name
  pass_times self;          ///< in the layer and in no layer nested inside it
  pass_times total;         ///< from begin to end, nested layers included
  std::uint32_t calls = 0;  ///< begin/end pairs in the step, both passes
};

// The classifier is the evidence layer's (one for the profiler's roll-ups and the protocol's
// localization): evidence/substructure.hpp.
using mldiag::substructure;
using mldiag::substructure_count;
using mldiag::substructure_name;
using mldiag::substructure_patterns;

/// Self time summed by substructure (self times never count a nested layer twice).
struct substructure_times {
  std::array<pass_times, substructure_count> by_kind{};
  [[nodiscard]] const pass_times& operator[](substructure s) const noexcept {
    return by_kind[static_cast<std::size_t>(s)];
  }
  [[nodiscard]] double sum() const noexcept {
    double s = 0.0;
    for (const auto& k : by_kind)
      s += k.sum();
    return s;
  }
};

/// Sums the self time of `layers` by substructure.
[[nodiscard]] inline substructure_times rollup_by_substructure(
    std::span<const layer_result> layers, const substructure_patterns& patterns = {}) {
  substructure_times out;
  for (const auto& l : layers)
    out.by_kind[static_cast<std::size_t>(patterns.classify(l.name))] += l.self;
  return out;
}

/// True when `name` is `prefix` or begins with `prefix` followed by '.'.
[[nodiscard]] constexpr bool under_prefix(std::string_view name, std::string_view prefix) noexcept {
  return name.starts_with(prefix) && (name.size() == prefix.size() || name[prefix.size()] == '.');
}

/// The time spent under a name prefix: the self time of `prefix` and of every `prefix.*`
/// layer (`blocks.3` = `blocks.3` itself + `blocks.3.attn` + `blocks.3.mlp` + ...). Component
/// boundaries count: `blocks.3` does not include `blocks.30`.
[[nodiscard]] inline pass_times rollup_by_prefix(std::span<const layer_result> layers,
                                                 std::string_view prefix) {
  pass_times out;
  for (const auto& l : layers) {
    if (under_prefix(l.name, prefix)) out += l.self;
  }
  return out;
}

/// A name prefix and the self time under it.
struct prefix_time {
  std::string_view prefix;  ///< a prefix of a layer's name (same lifetime)
  pass_times self;
};

/// Groups `layers` by the first `components` dot-separated components of their names (2:
/// `blocks.3.attn.q` -> `blocks.3`), in order of first appearance, into `out` (cleared first;
/// its capacity is reused, so a kept vector stops allocating).
inline void rollup_by_depth(std::span<const layer_result> layers, std::size_t components,
                            std::vector<prefix_time>& out) {
  out.clear();
  for (const auto& l : layers) {
    std::size_t end = 0;
    for (std::size_t c = 0; c < components && end != std::string_view::npos; ++c) {
      end = l.name.find('.', c == 0 ? 0 : end + 1);
    }
    const std::string_view prefix = l.name.substr(0, end);
    bool found = false;
    for (auto& p : out) {
      if (p.prefix == prefix) {
        p.self += l.self;
        found = true;
        break;
      }
    }
    if (!found) out.push_back({prefix, l.self});
  }
}

/// The layer with the most self time.
struct dominance {
  std::string_view name;
  double seconds = 0.0;          ///< its self time, both passes
  double share_of_layers = 0.0;  ///< of all layers' self time
  double share_of_step = 0.0;    ///< of the step's wall time (NaN when it is not known)
};

/// The layer with the most self time (first in order on ties); empty when there is none.
/// `step_seconds` <= 0 or NaN gives a NaN `share_of_step`.
[[nodiscard]] inline std::optional<dominance> dominant_layer(std::span<const layer_result> layers,
                                                             double step_seconds) {
  if (layers.empty()) return std::nullopt;
  double sum = 0.0;
  const layer_result* top = &layers.front();
  for (const auto& l : layers) {
    sum += l.self.sum();
    if (l.self.sum() > top->self.sum()) top = &l;
  }
  dominance d;
  d.name = top->name;
  d.seconds = top->self.sum();
  d.share_of_layers = sum > 0.0 ? d.seconds / sum : 0.0;
  d.share_of_step =
      step_seconds > 0.0 ? d.seconds / step_seconds : std::numeric_limits<double>::quiet_NaN();
  return d;
}


/// Which time of a layer to pass on. `self` (the default) never counts nested time twice, so
/// shares add up; `total` suits profiles without nesting (where they are equal).
enum class time_basis : std::uint8_t { self, total };

/// Passes each layer's time (both passes) to an observer (the monitor), in order, so that
/// its `layer_dominates` detector reads them.
template <observes<layer_timing> O>
void observe_layer_times(O& to, std::span<const layer_result> layers, time_basis basis = time_basis::self) {
  for (const auto& l : layers) to.observe(layer_timing{l.name, basis == time_basis::self ? l.self.sum() : l.total.sum()});
}

namespace detail {

// Layer names interned to dense ids: allocation when a name is new, none after that.
// Names live in a deque, so views of them stay valid while more are added.
class layer_names {
 public:
  std::uint32_t intern(std::string_view name) {
    if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (name.empty())
      throw error("layer profiler: an empty layer name; name the layer (e.g. \"blocks.3.attn\")");
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.emplace_back(name);
    ids_.emplace(names_.back(), id);
    return id;
  }
  // The id of a known name, or -1 (no allocation).
  [[nodiscard]] std::int64_t find(std::string_view name) const noexcept {
    const auto it = ids_.find(name);
    return it == ids_.end() ? -1 : static_cast<std::int64_t>(it->second);
  }
  [[nodiscard]] std::string_view operator[](std::uint32_t id) const noexcept { return names_[id]; }
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }

 private:
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, std::uint32_t> ids_;  // keys view names_
};

// Per-layer sums over one step, in a duration type `T` (clock ticks on the host, seconds on
// the GPU), turned into `layer_result`s in order of first appearance.
template <class T>
class layer_sums {
 public:
  // Makes room for ids below `n` (allocation only when new names appeared).
  void resize(std::size_t n) {
    if (sums_.size() < n) {
      sums_.resize(n);
      order_.reserve(n);
    }
  }
  // Lists `id` in the step's order (of first begin) if it is not listed yet.
  void touch(std::uint32_t id) noexcept {
    auto& s = sums_[id];
    if (!s.listed) {
      s.listed = true;
      order_.push_back(id);  // capacity reserved in resize()
    }
  }
  void add(std::uint32_t id, pass p, T self, T total) noexcept {
    touch(id);
    auto& s = sums_[id];
    ++s.calls;
    s.self[static_cast<std::size_t>(p)] += self;
    s.total[static_cast<std::size_t>(p)] += total;
  }
  // Writes the step's results into `out` (capacity reused) and resets the sums.
  template <class ToSeconds>
  void finish(const layer_names& names, std::vector<layer_result>& out, ToSeconds to_seconds) {
    out.clear();
    for (const auto id : order_) {
      auto& s = sums_[id];
      layer_result r;
      r.name = names[id];
      r.id = id;
      r.self = {to_seconds(s.self[0]), to_seconds(s.self[1])};
      r.total = {to_seconds(s.total[0]), to_seconds(s.total[1])};
      r.calls = s.calls;
      out.push_back(r);
      s = entry{};
    }
    order_.clear();
  }
  void reset() noexcept {
    for (const auto id : order_)
      sums_[id] = entry{};
    order_.clear();
  }

 private:
  struct entry {
    std::array<T, 2> self{};
    std::array<T, 2> total{};
    std::uint32_t calls = 0;
    bool listed = false;
  };
  std::vector<entry> sums_;
  std::vector<std::uint32_t> order_;
};

}  // namespace detail

/// Times named layers on the host clock: per layer and pass, self time (in the layer and in no
/// layer nested inside it) and total time; then the dominating layer, roll-ups by substructure
/// and by prefix, and a hand-off to the monitor.
///
/// Layers are marked with `begin(name, pass)` / `end()` or a `scope(name, pass)` guard, inside
/// `begin_step()` / `end_step()`; they nest (`blocks.3` around `blocks.3.attn`). A layer timed
/// several times in a step (gradient accumulation, a shared module) adds up; a layer nested in
/// itself counts its total once (the outermost interval). The time outside every layer is
/// `step_seconds()` minus the layers' self times.
///
/// Cost: two clock reads and one hash lookup of the name per begin/end pair; a name is interned
/// (allocated) the first time it is seen, and nothing is allocated after the first step with
/// the same layers (pass an id from `intern()` to skip the lookup). Not synchronized: one
/// profiler per thread.
///
/// Misuse is an `mldiag::error` naming the layer: begin or end outside a step, `end()` with no
/// open layer, `end(name, pass)` that is not the innermost open layer, `end_step()` with
/// layers open, guards ended out of order. After an error, `abandon_step()` starts clean.
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::layer_profiler prof;
/// using mldiag::efficiency::pass;
/// prof.begin_step();
/// for (int b = 0; b < n_blocks; ++b) {
///   auto block = prof.scope(block_names[b], pass::forward);   // "blocks.3"
///   { auto a = prof.scope(attn_names[b], pass::forward); attention(x); }  // "blocks.3.attn"
///   { auto m = prof.scope(mlp_names[b], pass::forward); mlp(x); }         // "blocks.3.mlp"
/// }
/// prof.end_step();
/// prof.observe(monitor);  // feeds layer_dominates
/// auto attn = prof.by_substructure()[mldiag::efficiency::substructure::attention].sum();
/// ```
template <monotonic_clock Clock = std::chrono::steady_clock>
class basic_layer_profiler {
 public:
  using clock = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using layer_id = std::uint32_t;

  /// Ends the layer it began, from `scope()`. Not copyable or movable: keep it on the stack.
  class [[nodiscard]] layer_scope {
   public:
    layer_scope(const layer_scope&) = delete;
    layer_scope& operator=(const layer_scope&) = delete;
    ~layer_scope() { profiler_->close_scope(depth_, generation_); }

   private:
    friend class basic_layer_profiler;
    layer_scope(basic_layer_profiler* p, std::size_t depth, std::uint64_t generation) noexcept
        : profiler_(p), generation_(generation), depth_(depth) {}
    basic_layer_profiler* profiler_;
    std::uint64_t generation_;
    std::size_t depth_;
  };

  basic_layer_profiler() { stack_.reserve(16); }

  /// The id of a layer name, interning it (one allocation) the first time.
  layer_id intern(std::string_view name) {
    const auto id = names_.intern(name);
    sums_.resize(names_.size());
    open_count_.resize(names_.size(), 0);
    return id;
  }
  [[nodiscard]] std::string_view name(layer_id id) const noexcept { return names_[id]; }
  /// Names interned so far.
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }

  void begin_step() {
    if (open_) {
      throw error(
          "layer_profiler::begin_step: a step is already open; call end_step() (or abandon_step()) "
          "first");
    }
    open_ = true;
    out_of_order_ = false;
    ++generation_;
    start_ = Clock::now();
  }

  /// Starts timing layer `name` in pass `p`.
  void begin(std::string_view name, pass p) {
    const auto known = names_.find(name);
    begin(known >= 0 ? static_cast<layer_id>(known) : intern(name), p);
  }
  void begin(layer_id id, pass p) {
    if (!open_) [[unlikely]]
      fail("begin", id, p, "no step is open; call begin_step() first");
    if (id >= names_.size()) [[unlikely]]
      throw error("layer_profiler::begin: layer id " + std::to_string(id) +
                  " was not made by intern()");
    ++open_count_[id];
    sums_.touch(id);
    // Read the clock last, so the bookkeeping above is not inside the layer's time.
    stack_.push_back({id, p, duration::zero(), Clock::now()});
  }

  /// Ends the innermost open layer.
  void end() {
    const time_point now = Clock::now();
    if (stack_.empty()) [[unlikely]]
      throw error(
          open_ ? "layer_profiler::end: no layer is open; every end() needs a begin() before it"
                : "layer_profiler::end: no step is open; call begin_step() first");
    close(now);
  }
  /// Ends layer `name` in pass `p`, which must be the innermost open layer.
  void end(std::string_view name, pass p) {
    const time_point now = Clock::now();
    if (stack_.empty()) [[unlikely]]
      throw error("layer_profiler::end('" + std::string(name) + "', " + std::string(pass_name(p)) +
                  "): no layer is open; every end() needs a begin() before it");
    const auto& top = stack_.back();
    if (top.p != p || names_[top.id] != name) [[unlikely]] {
      throw error("layer_profiler::end('" + std::string(name) + "', " + std::string(pass_name(p)) +
                  "): the innermost open layer is '" + std::string(names_[top.id]) + "' (" +
                  std::string(pass_name(top.p)) + "); end layers in reverse order of begin");
    }
    close(now);
  }

  /// Times layer `name` in pass `p` until the returned guard ends.
  layer_scope scope(std::string_view name, pass p) {
    begin(name, p);
    return layer_scope(this, stack_.size() - 1, generation_);
  }
  layer_scope scope(layer_id id, pass p) {
    begin(id, p);
    return layer_scope(this, stack_.size() - 1, generation_);
  }

  /// Closes the step; its results are then in `layers()`.
  void end_step() {
    const time_point now = Clock::now();
    if (!open_) throw error("layer_profiler::end_step: no step is open; call begin_step() first");
    if (out_of_order_) {
      abandon_step();
      throw error(
          "layer_profiler::end_step: layer scopes ended out of order (a guard outlived a guard "
          "made "
          "after it, or end() closed a guarded layer); keep guards on the stack. The step was "
          "discarded");
    }
    if (!stack_.empty()) {
      const auto& top = stack_.back();
      throw error("layer_profiler::end_step: " + std::to_string(stack_.size()) +
                  " layer(s) still open (innermost '" + std::string(names_[top.id]) + "', " +
                  std::string(pass_name(top.p)) + "); end every layer before end_step()");
    }
    open_ = false;
    step_seconds_ = seconds(now - start_);
    sums_.finish(names_, results_, seconds);
  }

  /// Discards the open step and its open layers.
  void abandon_step() noexcept {
    for (const auto& f : stack_)
      --open_count_[f.id];
    stack_.clear();
    sums_.reset();
    open_ = false;
  }

  [[nodiscard]] bool step_open() const noexcept { return open_; }

  /// The last ended step's layers, in order of first `begin`. Names stay valid while the
  /// profiler lives; the span until the next `end_step()`.
  [[nodiscard]] std::span<const layer_result> layers() const noexcept { return results_; }
  /// The last ended step's wall time, begin_step() to end_step().
  [[nodiscard]] double step_seconds() const noexcept { return step_seconds_; }
  /// The layer with the most self time in the last step, with its share of the step.
  [[nodiscard]] std::optional<dominance> dominant() const {
    return dominant_layer(results_, step_seconds_);
  }
  [[nodiscard]] substructure_times by_substructure(
      const substructure_patterns& patterns = {}) const {
    return rollup_by_substructure(results_, patterns);
  }
  [[nodiscard]] pass_times by_prefix(std::string_view prefix) const {
    return rollup_by_prefix(results_, prefix);
  }
  /// Passes the last step's layer times to an observer (the monitor).
  template <observes<layer_timing> S>
  void observe(S& sink, time_basis basis = time_basis::self) const {
    observe_layer_times(sink, results_, basis);
  }

 private:
  struct frame {
    layer_id id;
    pass p;
    duration children;
    time_point start;
  };

  static double seconds(duration d) noexcept { return std::chrono::duration<double>(d).count(); }

  void close(time_point now) noexcept {
    const frame f = stack_.back();
    stack_.pop_back();
    const duration elapsed = now - f.start;
    // A layer nested in itself (recursion) adds its total once, at the outermost interval.
    const bool outermost = --open_count_[f.id] == 0;
    sums_.add(f.id, f.p, elapsed - f.children, outermost ? elapsed : duration::zero());
    if (!stack_.empty()) stack_.back().children += elapsed;
  }

  void close_scope(std::size_t depth, std::uint64_t generation) noexcept {
    const time_point now = Clock::now();
    if (generation != generation_ || stack_.size() <= depth) {
      // The layer was already closed by hand (or the step abandoned): nothing to end here.
      if (generation == generation_ && open_) out_of_order_ = true;
      return;
    }
    if (stack_.size() != depth + 1) out_of_order_ = true;
    close(now);
  }

  [[noreturn]] void fail(std::string_view what, layer_id id, pass p, std::string_view why) const {
    const std::string name =
        id < names_.size() ? std::string(names_[id]) : "#" + std::to_string(id);
    throw error("layer_profiler::" + std::string(what) + "('" + name + "', " +
                std::string(pass_name(p)) + "): " + std::string(why));
  }

  detail::layer_names names_;
  detail::layer_sums<duration> sums_;
  std::vector<std::uint32_t> open_count_;  // by id: intervals of the layer open now
  std::vector<frame> stack_;               // open layers, innermost last
  std::vector<layer_result> results_;
  time_point start_{};
  double step_seconds_ = 0.0;
  std::uint64_t generation_ = 0;
  bool open_ = false;
  bool out_of_order_ = false;
};

/// The layer profiler on `std::chrono::steady_clock`.
using layer_profiler = basic_layer_profiler<>;

}  // namespace mldiag::efficiency
