// SPDX-License-Identifier: Apache-2.0
/// Q3 detectors: why isn't it fast enough — from the step-phase and per-layer timings, the
/// efficiency evidence (MFU, throughput, communication, per-rank times) and the memory evidence
/// of the snapshot. docs/detectors.md gives each one's defaults and sources. A detector whose
/// evidence was not recorded says nothing.
#pragma once

#include "mldiag/detectors/detector.hpp"
#include "mldiag/detectors/finding.hpp"
#include "mldiag/signals/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::detectors {

/// Q3: input starvation — the step waits for data: the median of data_wait / total over the
/// last `window` (20) steps above `max_share` (0.3: the method's "GPU idle while the loader
/// works"; a healthy loader that prefetches keeps it near 0) for `sustain` (5) steps in a row.
/// Judged once the window is full (a run's first batches load cold). Needs `step_timings`
/// with data_wait and total. Reports onsets.
class input_starvation {
 public:
  struct config {
    double max_share = 0.3;
    std::size_t sustain = 5;
    std::size_t window = 20;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"sustain", &config::sustain},
          field<config>{"window", &config::window}};
    }
  };
  input_starvation() : input_starvation(config{}) {}
  explicit input_starvation(config c) : c_(c), shares_(c.window == 0 ? 1 : c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"input_starvation", question::efficiency, {symptoms::input_starvation}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.timings;
    if (std::isnan(t.data_wait) || !(t.total > 0.0)) return;
    const double share = t.data_wait / t.total;
    shares_.push(share);
    // The typical step of the window, not a run of unlucky ones: another process that loads
    // the machine for a few steps stretches the loader's wait with it (the LibTorch
    // MNIST example, healthy, warned while a compile ran beside it).
    const double typical = shares_.full() ? shares_.median() : 0.0;
    if (onset_.observe(typical > c_.max_share, c_.sustain)) {
      finding f = make_finding(question::efficiency, symptoms::input_starvation, severity::warning, o.now.step, name(),
                               {{"data_wait_share", share}, {"median_share_in_window", typical}, {"data_wait_s", t.data_wait},
                                {"step_s", t.total}, {"max_share", c_.max_share}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain + c_.window / 2) + 1;
      f.where.emplace_back("data_loading", typical);
      out.push_back(std::move(f));
    }
  }

 private:
  config c_;
  signals::window shares_;
  onset onset_;
};

/// Q3: one layer dominates the step — among the layers timed in a step (at least three), one
/// takes more than `max_share` (0.5) of their summed time and more than `min_ratio` (4) times
/// the median layer's, for `sustain` steps in a row. The location is that layer. A model whose
/// layers differ by design (a huge vocabulary head) can raise this honestly: the finding is
/// where the time goes, phase 2 decides whether that is wrong. Reports onsets.
class layer_dominates {
 public:
  struct config {
    double max_share = 0.5;
    double min_ratio = 4.0;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"sustain", &config::sustain}};
    }
  };
  layer_dominates() : layer_dominates(config{}) {}
  explicit layer_dominates(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"layer_dominates", question::efficiency, {symptoms::layer_dominates}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& lt = o.now.layer_times;
    if (lt.size() < 3) {
      onset_.reset();
      return;
    }
    double total = 0.0;
    std::size_t top = 0;
    times_.clear();
    for (std::size_t i = 0; i < lt.size(); ++i) {
      total += lt[i].seconds;
      times_.push_back(lt[i].seconds);
      if (lt[i].seconds > lt[top].seconds) top = i;
    }
    const double median = median_of(times_);
    const double share = total > 0.0 ? lt[top].seconds / total : 0.0;
    const double ratio = median > 0.0 ? lt[top].seconds / median : 0.0;
    const bool dominating = share > c_.max_share && ratio > c_.min_ratio;
    // The state is the dominating layer (id + 1): another layer dominating is a new run.
    if (onset_.observe(dominating ? static_cast<int>(lt[top].id) + 1 : 0, c_.sustain)) {
      finding f = make_finding(question::efficiency, symptoms::layer_dominates, severity::warning, o.now.step,
                               name(), {{"share_of_layer_time", share}, {"ratio_to_median_layer", ratio},
                                        {"layer_s", lt[top].seconds}});
      f.first_step = o.now.step - static_cast<std::int64_t>(c_.sustain) + 1;
      f.where.emplace_back(std::string(o.names[lt[top].id]), share);
      out.push_back(std::move(f));
    }
  }

 private:
  static double median_of(std::vector<double>& v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (v.size() % 2 == 1) return *mid;
    const double upper = *mid;
    const double lower = *std::max_element(v.begin(), mid);
    return 0.5 * (lower + upper);
  }

  config c_;
  onset onset_;
  std::vector<double> times_;  // scratch: grows to the number of layers once
};

namespace detail {

// The Q3 detectors' warm-up/sustain logic is the shared onset primitive (detector.hpp).
using onset = detectors::onset;

}  // namespace detail

/// Q3: low MFU — the method's efficiency table by band: MFU below `low` (0.2) is a warning
/// (input-bound or the wrong backend: unfused attention, fp32 math); from `low` to `moderate`
/// (0.4) an info finding (memory-bound kernels or poor overlap) — published large runs sit
/// there (GPT-3 21%, Gopher 32%, MT-NLG 30%, by the PaLM paper's count; PaLM 46%), so it is
/// not an alarm. Reads `efficiency.mfu`, else `efficiency.tensor_core_activity` (TCA counts
/// partly used tensor pipes as active, so it reads at or above MFU: judging it by the same
/// bands errs towards silence). Skips the first `warmup` (20) observations (compilation,
/// autotuning, allocator growth) and needs the same band for `sustain` (10) in a row (MFU of
/// one step jitters with its data). The finding's evidence has the band's bounds. Reports
/// onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::low_mfu d;          // or make_detector("low_mfu", {{"low", 0.25}})
/// mon.observe_mfu(model_flops_utilization(flops_per_step, seconds, peak).mfu);  // efficiency/mfu.hpp
/// ```
class low_mfu {
 public:
  struct config {
    double low = 0.2;       // the method's table: < 20% is input-bound or the wrong backend
    double moderate = 0.4;  // 20-40%: memory-bound or poor overlap; above: the hardware is busy
    std::size_t warmup = 20;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"low", &config::low},
          field<config>{"moderate", &config::moderate},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  low_mfu() : low_mfu(config{}) {}
  explicit low_mfu(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"low_mfu", question::efficiency, {symptoms::low_mfu}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& e = o.now.efficiency;
    const bool from_mfu = !std::isnan(e.mfu);
    const double v = from_mfu ? e.mfu : e.tensor_core_activity;
    if (std::isnan(v) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const int band = v < c_.low ? 1 : (v < c_.moderate ? 2 : 0);
    if (!onset_.observe(band, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::low_mfu, band == 1 ? severity::warning : severity::info, o.now.step,
                             name(), {{from_mfu ? "mfu" : "tensor_core_activity", v},
                                      {"band_low", band == 1 ? 0.0 : c_.low},
                                      {"band_high", band == 1 ? c_.low : c_.moderate}});
    if (from_mfu && !std::isnan(e.tensor_core_activity)) f.evidence.emplace_back("tensor_core_activity", e.tensor_core_activity);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("step", v);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  detail::onset onset_;
};

/// Q3: throughput below target while the hardware is busy — `efficiency.throughput` below
/// `min_fraction` (0.9) of `throughput_target` for `sustain` (10) observations after `warmup`
/// (20), with MFU unknown or at least `busy_mfu` (0.4). The method's table expects this of a
/// memory-bound model: an info finding (the target may be what is wrong). With MFU below
/// `busy_mfu`, `low_mfu` speaks instead. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe_throughput(tokens / seconds, 250'000.0);  // achieved, target (tokens/s)
/// ```
class throughput_below_target {
 public:
  struct config {
    double min_fraction = 0.9;  // 10%: steps of one run vary by a few percent
    double busy_mfu = 0.4;      // low_mfu's upper band edge
    std::size_t warmup = 20;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_fraction", &config::min_fraction},
          field<config>{"busy_mfu", &config::busy_mfu},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  throughput_below_target() : throughput_below_target(config{}) {}
  explicit throughput_below_target(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"throughput_below_target", question::efficiency, {symptoms::throughput_below_target}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& e = o.now.efficiency;
    if (std::isnan(e.throughput) || !(e.throughput_target > 0.0) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const double ratio = e.throughput / e.throughput_target;
    const bool slow = ratio < c_.min_fraction && !(e.mfu < c_.busy_mfu);
    if (!onset_.observe(slow ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::throughput_below_target, severity::info, o.now.step, name(),
                             {{"throughput_fraction", ratio}, {"throughput", e.throughput}, {"target", e.throughput_target}});
    if (!std::isnan(e.mfu)) f.evidence.emplace_back("mfu", e.mfu);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("step", ratio);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  detail::onset onset_;
};

/// Q3: communication overhead — `timings.communication / timings.total` above `max_share`
/// (0.25) for `sustain` (10) observations after `warmup` (10); or, when the step's bytes and
/// the link's bandwidth are given (`record_communication`), an achieved bandwidth (bytes /
/// communication time) below `min_bandwidth_fraction` (0.5) of the link's while communication
/// takes at least `min_share` (0.1) of the step. Give as `communication` the time the step
/// waits for collectives (not the part hidden behind backward); the achieved bandwidth then
/// counts waiting as transfer and errs low. Location `communication`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe_timings(t);                               // t.communication, t.total
/// mon.observe_communication(grad_bytes * 2.0, 400e9);   // ring all-reduce, NVLink-class link
/// ```
class communication_overhead {
 public:
  struct config {
    // A quarter of the step waiting on the network: data-parallel training that overlaps its
    // gradient all-reduce with backward exposes a few percent.
    double max_share = 0.25;
    // Half the link's nominal rate: NCCL's ring all-reduce reaches 70-90% of it on large
    // messages (nccl-tests "busbw"), so below half something else is wrong.
    double min_bandwidth_fraction = 0.5;
    double min_share = 0.1;  // a slow link matters only where the step waits for it
    std::size_t warmup = 10;
    std::size_t sustain = 10;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_share", &config::max_share},
          field<config>{"min_bandwidth_fraction", &config::min_bandwidth_fraction},
          field<config>{"min_share", &config::min_share},
          field<config>{"warmup", &config::warmup},
          field<config>{"sustain", &config::sustain}};
    }
  };
  communication_overhead() : communication_overhead(config{}) {}
  explicit communication_overhead(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"communication_overhead", question::efficiency, {symptoms::communication_overhead}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.timings;
    const auto& e = o.now.efficiency;
    if (std::isnan(t.communication) || !(t.total > 0.0) || seen_++ < c_.warmup) {
      onset_.reset();
      return;
    }
    const double share = t.communication / t.total;
    const double bandwidth = t.communication > 0.0 ? e.communication_bytes / t.communication
                                                   : std::numeric_limits<double>::quiet_NaN();
    const double fraction = e.link_bandwidth > 0.0 ? bandwidth / e.link_bandwidth : std::numeric_limits<double>::quiet_NaN();
    const bool overhead = share > c_.max_share || (fraction < c_.min_bandwidth_fraction && share >= c_.min_share);
    if (!onset_.observe(overhead ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::communication_overhead, severity::warning, o.now.step, name(),
                             {{"communication_share", share}, {"communication_s", t.communication}, {"step_s", t.total},
                              {"max_share", c_.max_share}});
    if (!std::isnan(bandwidth)) f.evidence.emplace_back("achieved_bandwidth", bandwidth);
    if (!std::isnan(fraction)) {
      f.evidence.emplace_back("link_bandwidth", e.link_bandwidth);
      f.evidence.emplace_back("bandwidth_fraction", fraction);
    }
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("communication", share);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  std::size_t seen_ = 0;
  detail::onset onset_;
};

/// Q3: memory pressure — the fullest of allocated, reserved and used over capacity
/// (`memory_evidence::fill`) above `max_fill` (0.95) for `sustain` (5) observations. Needs
/// capacity. Location `device_memory`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe_memory(mldiag::cuda::device_memory(0));  // kernels/mldiag/cuda/memory.cuh
/// ```
class memory_pressure {
 public:
  struct config {
    // Runs tuned for memory sit at 85-90% of capacity; above 95% a longer sequence or a
    // larger activation OOMs, and the caching allocator starts flushing its cache and retrying
    // (cudaFree synchronizes the device).
    double max_fill = 0.95;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_fill", &config::max_fill},
          field<config>{"sustain", &config::sustain}};
    }
  };
  memory_pressure() : memory_pressure(config{}) {}
  explicit memory_pressure(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_pressure", question::efficiency, {symptoms::memory_pressure}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const double fill = m.fill();
    if (std::isnan(fill)) {
      onset_.reset();
      return;
    }
    if (!onset_.observe(fill > c_.max_fill ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::memory_pressure, severity::warning, o.now.step, name(),
                             {{"fill", fill}, {"capacity", m.capacity}, {"max_fill", c_.max_fill}});
    for (const auto& [key, v] : {std::pair{"allocated", m.allocated}, std::pair{"reserved", m.reserved}, std::pair{"used", m.used}})
      if (!std::isnan(v)) f.evidence.emplace_back(key, v);
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("device_memory", fill);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  detail::onset onset_;
};

/// Q3: memory fragmentation — near capacity (fill above `near_capacity`, 0.8), either
/// 1 - allocated/reserved above `max_fragmentation` (0.3), or the largest free block below
/// `min_block_fraction` (0.1) of the allocator's cached free memory (reserved - allocated,
/// when that is at least 5% of reserved), for `sustain` (5) observations. Far from capacity
/// fragmentation costs nothing, so it is not judged there; without capacity, not at all.
/// Location `allocator`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::memory_evidence m;
/// m.allocated = 50e9; m.reserved = 76e9; m.capacity = 80e9;  // 1 - 50/76 = 0.34, fill 0.95
/// mon.observe_memory(m);
/// ```
class memory_fragmentation {
 public:
  struct config {
    // A third of the pool cached but unusable: with steady shapes a caching allocator keeps
    // a few percent cached-free; OOMs "with memory free" come from this.
    double max_fragmentation = 0.3;
    double near_capacity = 0.8;
    // The largest block a tenth of the cached free memory: the free memory is in splinters.
    double min_block_fraction = 0.1;
    std::size_t sustain = 5;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"max_fragmentation", &config::max_fragmentation},
          field<config>{"near_capacity", &config::near_capacity},
          field<config>{"min_block_fraction", &config::min_block_fraction},
          field<config>{"sustain", &config::sustain}};
    }
  };
  memory_fragmentation() : memory_fragmentation(config{}) {}
  explicit memory_fragmentation(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_fragmentation", question::efficiency, {symptoms::memory_fragmentation}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const double fill = m.fill();
    const double frag = m.fragmentation();
    if (std::isnan(fill) || std::isnan(frag)) {
      onset_.reset();
      return;
    }
    const double cached_free = m.reserved - m.allocated;
    const double block_fraction = cached_free > 0.05 * m.reserved ? m.largest_free_block / cached_free
                                                                  : std::numeric_limits<double>::quiet_NaN();
    const bool fragmented = fill > c_.near_capacity && (frag > c_.max_fragmentation || block_fraction < c_.min_block_fraction);
    if (!onset_.observe(fragmented ? 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::memory_fragmentation, severity::warning, o.now.step, name(),
                             {{"fragmentation", frag}, {"fill", fill}, {"cached_free", cached_free},
                              {"max_fragmentation", c_.max_fragmentation}});
    if (!std::isnan(block_fraction)) {
      f.evidence.emplace_back("largest_free_block", m.largest_free_block);
      f.evidence.emplace_back("block_fraction", block_fraction);
    }
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("allocator", frag);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  detail::onset onset_;
};

/// Q3: memory growth (a leak) — over the last `window` (200) observations after `warmup` (20),
/// split into `segments` (8) equal parts, at least `min_rising` (7) of the consecutive
/// segment medians rise (each by at least a quarter of the mean rise), and the last
/// segment's median exceeds the first's by at least `min_growth_fraction` (2%) of it and
/// `min_growth_bytes` (1 MiB). Medians ignore noise and
/// single spikes; needing nearly every segment to rise rejects the staircase of a caching
/// allocator that grows a few times (a new longest sequence) and then holds. Reads allocated,
/// else reserved, else host RSS (the first known; the window restarts when that changes).
/// The rate is (last median - first median) / the steps between their centres. Location: the
/// quantity read. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::memory_growth d({.window = 100});  // a shorter window: earlier, noisier
/// ```
class memory_growth {
 public:
  struct config {
    std::size_t window = 200;
    std::size_t segments = 8;
    std::size_t min_rising = 7;
    double min_growth_fraction = 0.02;
    double min_growth_bytes = 1024.0 * 1024.0;
    std::size_t warmup = 20;  // allocators and optimizers allocate their state in the first steps
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"segments", &config::segments},
          field<config>{"min_rising", &config::min_rising},
          field<config>{"min_growth_fraction", &config::min_growth_fraction},
          field<config>{"min_growth_bytes", &config::min_growth_bytes},
          field<config>{"warmup", &config::warmup}};
    }
  };
  memory_growth() : memory_growth(config{}) {}
  explicit memory_growth(config c) : c_(c), values_(c.window), segment_(c.window), medians_(c.segments) {
    if (c.segments < 2 || c.window < 2 * c.segments || c.min_rising >= c.segments) {
      throw error("memory_growth: window " + std::to_string(c.window) + ", segments " + std::to_string(c.segments) +
                  ", min_rising " + std::to_string(c.min_rising) +
                  "; need segments >= 2, window >= 2 x segments and min_rising < segments");
    }
  }
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"memory_growth", question::efficiency, {symptoms::memory_growth}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& m = o.now.memory;
    const int source = !std::isnan(m.allocated) ? 1 : !std::isnan(m.reserved) ? 2 : !std::isnan(m.host_rss) ? 3 : 0;
    if (source != source_) {
      values_.clear();
      seen_ = 0;
      fired_ = false;
      source_ = source;
    }
    if (source == 0 || seen_++ < c_.warmup) return;
    values_.push(source == 1 ? m.allocated : source == 2 ? m.reserved : m.host_rss);
    if (!values_.full()) return;
    const std::size_t len = c_.window / c_.segments;
    const std::size_t skip = c_.window - len * c_.segments;  // the oldest values that do not fill a segment
    for (std::size_t k = 0; k < c_.segments; ++k) {
      for (std::size_t i = 0; i < len; ++i) segment_[i] = values_[skip + k * len + i];
      medians_[k] = median_of(len);
    }
    const double growth = medians_.back() - medians_.front();
    // A rise counts when it is at least a quarter of the mean rise: in a staircase (a few big
    // jumps, flat between) the flat stretches rise only by noise, far below the mean.
    const double min_rise = 0.25 * growth / static_cast<double>(c_.segments - 1);
    std::size_t rising = 0;
    for (std::size_t k = 1; k < c_.segments; ++k) rising += medians_[k] - medians_[k - 1] >= min_rise ? 1 : 0;
    const bool leaking = rising >= c_.min_rising && growth >= c_.min_growth_bytes &&
                         growth >= c_.min_growth_fraction * medians_.front();
    const bool rise = leaking && !fired_;
    fired_ = leaking;
    if (!rise) return;
    const double rate = growth / static_cast<double>((c_.segments - 1) * len);
    finding f = make_finding(question::efficiency, symptoms::memory_growth, severity::warning, o.now.step, name(),
                             {{"bytes_per_step", rate}, {"growth_over_window", growth}, {"start_bytes", medians_.front()},
                              {"end_bytes", medians_.back()}, {"rising_segments", static_cast<double>(rising)}});
    f.first_step = o.now.step - static_cast<std::int64_t>(c_.window) + 1;
    f.where.emplace_back(source == 1 ? "allocated" : source == 2 ? "reserved" : "host_rss", rate);
    out.push_back(std::move(f));
  }

 private:
  double median_of(std::size_t n) noexcept {
    const auto first = segment_.begin();
    const auto mid = first + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(first, mid, first + static_cast<std::ptrdiff_t>(n));
    if (n % 2 == 1) return *mid;
    return 0.5 * (*std::max_element(first, mid) + *mid);
  }

  config c_;
  signals::window values_;
  std::vector<double> segment_, medians_;  // scratch, sized at construction
  std::size_t seen_ = 0;
  int source_ = 0;
  bool fired_ = false;
};

/// Q3: step-time outliers — a step whose `timings.total` exceeds the median of the last
/// `window` (200) steps by more than `mads` (6) scaled MADs and by `min_ratio` (1.5x), at least
/// `min_outliers` (3) times within the window, judged once `min_history` (50) steps are in it.
/// Intermittent slow steps (garbage collection, checkpoints, evaluation, a host sync, another
/// process) are an info finding: phase 2 lines them up with what the run does then. Location
/// `step` with the worst ratio. Reports onsets.
///
/// **Example**
/// ```cpp
/// mldiag::detectors::step_time_outliers d({.mads = 8.0});
/// ```
class step_time_outliers {
 public:
  struct config {
    std::size_t window = 200;
    std::size_t min_history = 50;
    // 6 scaled MADs: a normal series passes it once in ~10^9 steps; host scheduling jitter on
    // a shared machine reaches it, hence also the 1.5x ratio and several outliers.
    double mads = 6.0;
    double min_ratio = 1.5;
    std::size_t min_outliers = 3;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"window", &config::window},
          field<config>{"min_history", &config::min_history},
          field<config>{"mads", &config::mads},
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"min_outliers", &config::min_outliers}};
    }
  };
  step_time_outliers() : step_time_outliers(config{}) {}
  explicit step_time_outliers(config c) : c_(c), times_(c.window), flags_(c.window) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"step_time_outliers", question::efficiency, {symptoms::step_time_outliers}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const double t = o.now.timings.total;
    if (!(t > 0.0) || !std::isfinite(t)) return;
    bool outlier = false;
    double median = std::numeric_limits<double>::quiet_NaN(), mad = median;
    if (times_.size() >= c_.min_history) {
      median = times_.median();
      mad = times_.mad();
      outlier = t > median + c_.mads * mad && t > c_.min_ratio * median;
    }
    times_.push(t);
    flags_.push(outlier ? t / median : 0.0);
    std::size_t count = 0, first = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < flags_.size(); ++i) {
      if (flags_[i] == 0.0) continue;
      if (count++ == 0) first = i;
      worst = flags_[i] > worst ? flags_[i] : worst;
    }
    const bool intermittent = count >= c_.min_outliers;
    const bool rise = intermittent && !fired_;
    fired_ = intermittent;
    if (!rise) return;
    finding f = make_finding(question::efficiency, symptoms::step_time_outliers, severity::info, o.now.step, name(),
                             {{"outliers_in_window", static_cast<double>(count)}, {"worst_ratio_to_median", worst},
                              {"step_s", t}, {"median_s", median}, {"mad_s", mad}});
    f.first_step = o.now.step - static_cast<std::int64_t>(flags_.size() - 1 - first);
    f.where.emplace_back("step", worst);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  signals::window times_, flags_;  // flags_: the ratio to the median of each outlier, else 0
  bool fired_ = false;
};

/// Q3: straggler — across ranks (`record_rank_step_times`), the slowest rank's time over the
/// median rank's above `min_ratio` (1.15), the same rank for `sustain` (20) steps in a row.
/// Location `rank <r>`. Reports onsets.
///
/// **Example**
/// ```cpp
/// mon.observe_rank_step_times(all_gathered_seconds);  // rank r at index r
/// ```
class straggler {
 public:
  struct config {
    // Healthy ranks of one job differ by a few percent (boost clocks, sequence lengths); a
    // rank 15% slower costs every other rank 15% at each synchronizing collective.
    double min_ratio = 1.15;
    std::size_t sustain = 20;
    /// The named parameters (`make_detector`'s keys), each beside its default above.
    static constexpr auto fields() {
      return std::array{
          field<config>{"min_ratio", &config::min_ratio},
          field<config>{"sustain", &config::sustain}};
    }
  };
  straggler() : straggler(config{}) {}
  explicit straggler(config c) : c_(c) {}
  /// What this detector is: its name (`make_detector`'s key), question and symptoms.
  static constexpr detector_info about{"straggler", question::efficiency, {symptoms::straggler}};
  [[nodiscard]] std::string_view name() const { return about.name; }
  void observe(const observation& o, std::vector<finding>& out) {
    const auto& t = o.now.rank_step_times;
    if (t.size() < 2) {
      onset_.reset();
      return;
    }
    scratch_.assign(t.begin(), t.end());  // grows once, to the rank count
    const auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.end());
    const double median = scratch_.size() % 2 == 1 ? *mid : 0.5 * (*std::max_element(scratch_.begin(), mid) + *mid);
    const auto slowest = static_cast<std::size_t>(std::max_element(t.begin(), t.end()) - t.begin());
    const double ratio = median > 0.0 ? t[slowest] / median : 0.0;
    // The state is the rank (+1): a different rank being slowest restarts the run.
    if (!onset_.observe(ratio > c_.min_ratio ? static_cast<int>(slowest) + 1 : 0, c_.sustain)) return;
    finding f = make_finding(question::efficiency, symptoms::straggler, severity::warning, o.now.step, name(),
                             {{"ratio_to_median_rank", ratio}, {"rank", static_cast<double>(slowest)},
                              {"rank_s", t[slowest]}, {"median_rank_s", median}, {"ranks", static_cast<double>(t.size())}});
    f.first_step = onset_.start(o.now.step);
    f.where.emplace_back("rank " + std::to_string(slowest), ratio);
    out.push_back(std::move(f));
  }

 private:
  config c_;
  detail::onset onset_;
  std::vector<double> scratch_;
};

}  // namespace mldiag::detectors
