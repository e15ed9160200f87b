// SPDX-License-Identifier: Apache-2.0
/// `mldiag::cuda::stats_plan`: tensor_stats of every tensor of a device list in one launch per
/// dtype group, on the caller's stream, into the caller's workspace; no allocation, no sync.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/cuda/block_stats.cuh"
#include "mldiag/cuda/check.cuh"
#include "mldiag/stats/chunk_table.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// A plan for the statistics of a fixed list of CUDA tensors (pointers, sizes, dtypes, names).
///
/// Built once, it checks every tensor (device memory of the plan's device, contiguous), cuts
/// the list into chunks of 65536 elements grouped by dtype, and says how much workspace it
/// needs; the caller allocates the workspace (CUB style) and calls `upload` once. Then every
/// `compute` enqueues one kernel per dtype present in the list and two small merge kernels on
/// the caller's stream: no allocation, no host synchronization, no per-tensor launch. Results
/// stay in device memory (`d_results`: one `tensor_stats` per tensor, then the total;
/// `d_any_non_finite`: an int a kernel of yours can branch on); `stats_readback` copies them to
/// pinned host memory without stalling.
///
/// Determinism: chunks are merged per tensor, and tensors into the total, in fixed trees, so
/// results are bit-identical run to run and do not depend on the GPU's SM count; which thread
/// reads which element of a chunk depends on its address modulo 16, so the same data at
/// another alignment can differ in the moments' last bits. Counts and extrema equal the host
/// engine's exactly; the L2 norm is within 1e-6 relative of a float64 reference, mean and
/// standard deviation within 1e-6 relative to the data's scale (the accuracy contract,
/// docs/stats.md; nothing stricter is promised).
///
/// **Example**
/// ```cpp
/// std::vector<mldiag::tensor_ref> grads;  // name, d_ptr, count, dtype, mldiag::device::cuda(0)
/// mldiag::cuda::stats_plan plan(grads);
/// void* d_ws; cudaMalloc(&d_ws, plan.workspace_bytes());
/// plan.upload(d_ws, stream);
/// for (;;) {                              // every step
///   plan.compute(d_ws, stream);           // async
///   readback.enqueue(plan, d_ws, stream); // async; read a step later
/// }
/// ```
class stats_plan {
 public:
  /// Elements per chunk: the host engine's unit, so partials cover the same elements.
  static constexpr std::uint64_t chunk_elems = mldiag::detail::unit_elems;

  explicit stats_plan(std::span<const tensor_ref> tensors) {
    device_ = tensors.empty() ? 0 : tensors.front().device().index;
    for (const auto& t : tensors) {
      if (!t.is_contiguous()) {
        mldiag::detail::fail("cuda::stats_plan", t.name(),
                             "strided device tensors are not supported yet; pass a contiguous "
                             "tensor (or one per contiguous block)");
      }
      require_device_memory(t, device_, "cuda::stats_plan");
      names_.emplace_back(t.name());
      fingerprint_.push_back({t.data(), t.numel(), t.dtype()});
    }
    std::vector<tensor_ref> refs(tensors.begin(), tensors.end());
    table_ = mldiag::detail::make_chunk_table(refs, chunk_elems);
    layout_workspace();
    // The image of the tables the device reads, in pinned memory so `upload` is asynchronous.
    check(cudaMallocHost(&staging_, tables_bytes_), "cuda::stats_plan: pinned staging buffer");
    fill_staging();
  }
  stats_plan(std::initializer_list<tensor_ref> tensors)
      : stats_plan(std::span<const tensor_ref>(tensors.begin(), tensors.size())) {}
  stats_plan(const stats_plan&) = delete;
  stats_plan& operator=(const stats_plan&) = delete;
  ~stats_plan() {
    if (staging_ != nullptr) (void)cudaFreeHost(staging_);
  }

  /// Bytes of device memory `compute` needs, 256-byte aligned.
  [[nodiscard]] std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  [[nodiscard]] std::size_t size() const noexcept { return names_.size(); }
  [[nodiscard]] std::string_view name(std::size_t i) const noexcept { return names_[i]; }
  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] const mldiag::detail::chunk_table& table() const noexcept { return table_; }
  /// Kernels `compute` enqueues: one per dtype present, plus the two merges.
  [[nodiscard]] int launches() const noexcept {
    int groups = 0;
    for (int d = 0; d < dtype_count; ++d) groups += table_.group_size(static_cast<dtype>(d)) > 0;
    return groups + 2;
  }

  /// Copies the tensor and chunk tables into the workspace (asynchronously, from pinned
  /// memory). Once after allocating the workspace, and again after `rebind`.
  void upload(void* d_workspace, cudaStream_t stream) const {
    require_workspace(d_workspace);
    check(cudaMemcpyAsync(d_workspace, staging_, tables_bytes_, cudaMemcpyHostToDevice, stream),
          "cuda::stats_plan::upload");
  }

  /// Enqueues the statistics of every tensor and the total on `stream`.
  void compute(void* d_workspace, cudaStream_t stream) const {
    require_workspace(d_workspace);
    auto* base = static_cast<unsigned char*>(d_workspace);
    const auto* d_tensors = reinterpret_cast<const detail::device_tensor*>(base + tensors_at_);
    const auto* d_chunks = reinterpret_cast<const mldiag::detail::chunk*>(base + chunks_at_);
    const auto* d_first = reinterpret_cast<const std::uint64_t*>(base + first_at_);
    const auto* d_count = reinterpret_cast<const std::uint64_t*>(base + count_at_);
    auto* d_partials = reinterpret_cast<tensor_stats*>(base + partials_at_);
    auto* d_out = reinterpret_cast<tensor_stats*>(base + results_at_);
    auto* d_flag = reinterpret_cast<int*>(base + flag_at_);
    for (int d = 0; d < dtype_count; ++d) {
      const auto t = static_cast<dtype>(d);
      const std::uint64_t count = table_.group_size(t);
      if (count == 0) continue;
      const std::uint64_t first = table_.group_begin[static_cast<std::size_t>(d)];
      // One block per chunk up to the grid's limit; the kernel strides beyond it.
      const auto blocks = static_cast<unsigned>(count < max_blocks ? count : max_blocks);
      mldiag::detail::with_format(t, [&](auto tag) {
        launch<typename decltype(tag)::type>(blocks, stream, d_tensors, d_chunks, first, count, d_partials);
      });
      check(cudaGetLastError(), "cuda::stats_plan::compute: statistics kernel launch");
    }
    const std::uint64_t n = names_.size(), groups = group_count_;
    const auto* d_group_tensor = reinterpret_cast<const std::uint64_t*>(base + group_tensor_at_);
    const auto* d_group_first = reinterpret_cast<const std::uint64_t*>(base + group_first_at_);
    auto* d_done = reinterpret_cast<unsigned int*>(base + done_at_);
    auto* d_group_results = reinterpret_cast<tensor_stats*>(base + group_results_at_);
    const auto merge_blocks = static_cast<unsigned>(groups == 0 ? 1 : (groups < max_blocks ? groups : max_blocks));
    detail::merge_tensors_kernel<><<<merge_blocks, detail::block_threads, 0, stream>>>(
        d_partials, d_first, d_count, d_group_tensor, d_group_first, groups, d_done, d_group_results, d_out);
    check(cudaGetLastError(), "cuda::stats_plan::compute: merge kernel launch");
    detail::merge_total_kernel<><<<1, detail::block_threads, 0, stream>>>(d_out, n, d_flag);
    check(cudaGetLastError(), "cuda::stats_plan::compute: total kernel launch");
  }

  /// Checks that `tensors` is the list this plan was built for (same order, pointers, sizes
  /// and dtypes), then computes. A plan reused with a different list is an error.
  void compute(std::span<const tensor_ref> tensors, void* d_workspace, cudaStream_t stream) const {
    if (tensors.size() != fingerprint_.size()) {
      throw error("cuda::stats_plan::compute: the plan was built for " + std::to_string(fingerprint_.size()) +
                  " tensors and was given " + std::to_string(tensors.size()) +
                  "; build a plan per list (or rebind moved tensors)");
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& f = fingerprint_[i];
      if (tensors[i].data() != f.data || tensors[i].numel() != f.numel || tensors[i].dtype() != f.type) {
        mldiag::detail::fail("cuda::stats_plan::compute", tensors[i].name(),
                             "differs from tensor " + std::to_string(i) + " ('" + names_[i] +
                                 "') of the plan's list (pointer, size or dtype); build a plan "
                                 "for this list, or rebind() a tensor that moved");
      }
    }
    compute(d_workspace, stream);
  }

  void compute(std::initializer_list<tensor_ref> tensors, void* d_workspace, cudaStream_t stream) const {
    compute(std::span<const tensor_ref>(tensors.begin(), tensors.size()), d_workspace, stream);
  }

  /// Points tensor `i` at new device memory of the same size and dtype; call `upload` again.
  /// Waits for a previous `upload` from the staging buffer to finish (a host sync, here only).
  void rebind(std::size_t i, const void* d_data) {
    if (i >= fingerprint_.size()) {
      throw error("cuda::stats_plan::rebind: index " + std::to_string(i) + " but the plan has " +
                  std::to_string(fingerprint_.size()) + " tensors");
    }
    const tensor_ref moved(names_[i], d_data, static_cast<std::int64_t>(fingerprint_[i].numel),
                           fingerprint_[i].type, mldiag::device::cuda(device_));
    require_device_memory(moved, device_, "cuda::stats_plan::rebind");
    check(cudaDeviceSynchronize(), "cuda::stats_plan::rebind: waiting for the last upload");
    fingerprint_[i].data = d_data;
    fill_staging();
  }

  /// Device pointers into a workspace: one tensor_stats per tensor, then the total.
  [[nodiscard]] const tensor_stats* d_results(const void* d_workspace) const noexcept {
    return reinterpret_cast<const tensor_stats*>(static_cast<const unsigned char*>(d_workspace) + results_at_);
  }
  /// Device pointer to an int that is 1 when any tensor has a NaN or Inf after `compute`.
  [[nodiscard]] const int* d_any_non_finite(const void* d_workspace) const noexcept {
    return reinterpret_cast<const int*>(static_cast<const unsigned char*>(d_workspace) + flag_at_);
  }
  /// Byte offset of the results (and the flag right after) in the workspace.
  [[nodiscard]] std::size_t results_offset() const noexcept { return results_at_; }
  [[nodiscard]] std::size_t results_bytes() const noexcept { return flag_at_ + sizeof(int) - results_at_; }

 private:
  struct entry {
    const void* data;
    std::uint64_t numel;
    dtype type;
  };
  static constexpr std::uint64_t max_blocks = 65535u * 16u;

  template <class F>
  static void launch(unsigned blocks, cudaStream_t stream, const detail::device_tensor* tensors,
                     const mldiag::detail::chunk* chunks, std::uint64_t first, std::uint64_t count,
                     tensor_stats* partials) {
    detail::chunk_stats_kernel<F><<<blocks, detail::block_threads, 0, stream>>>(tensors, chunks, first, count, partials);
  }

  static std::size_t aligned(std::size_t bytes) noexcept { return (bytes + 255) / 256 * 256; }

  // Merge groups of tensor i: one for a tensor of at most merge_group chunks (an empty one
  // too: its result is written), else one per merge_group chunks.
  [[nodiscard]] std::uint64_t groups_of(std::size_t i) const noexcept {
    const std::uint64_t c = table_.count[i];
    return c <= detail::merge_group ? 1 : (c + detail::merge_group - 1) / detail::merge_group;
  }

  void layout_workspace() {
    const std::size_t n = names_.size(), m = table_.chunks.size();
    group_count_ = 0;
    for (std::size_t i = 0; i < n; ++i) group_count_ += groups_of(i);
    const std::size_t g = group_count_;
    tensors_at_ = 0;
    chunks_at_ = aligned(tensors_at_ + n * sizeof(detail::device_tensor));
    first_at_ = aligned(chunks_at_ + m * sizeof(mldiag::detail::chunk));
    count_at_ = aligned(first_at_ + n * sizeof(std::uint64_t));
    group_tensor_at_ = aligned(count_at_ + n * sizeof(std::uint64_t));
    group_first_at_ = aligned(group_tensor_at_ + g * sizeof(std::uint64_t));
    done_at_ = aligned(group_first_at_ + n * sizeof(std::uint64_t));
    tables_bytes_ = aligned(done_at_ + n * sizeof(unsigned int));  // the counters upload as zeros
    partials_at_ = tables_bytes_;
    group_results_at_ = aligned(partials_at_ + m * sizeof(tensor_stats));
    results_at_ = aligned(group_results_at_ + g * sizeof(tensor_stats));
    flag_at_ = results_at_ + (n + 1) * sizeof(tensor_stats);
    workspace_bytes_ = aligned(flag_at_ + sizeof(int));
  }

  void fill_staging() {
    auto* base = static_cast<unsigned char*>(staging_);
    std::memset(base, 0, tables_bytes_);  // the merge counters start at 0
    std::uint64_t g = 0;
    for (std::size_t i = 0; i < fingerprint_.size(); ++i) {
      const detail::device_tensor t{fingerprint_[i].data, fingerprint_[i].numel};
      std::memcpy(base + tensors_at_ + i * sizeof t, &t, sizeof t);
      const std::uint64_t first = table_.first[i], count = table_.count[i], tensor = i;
      std::memcpy(base + first_at_ + i * sizeof first, &first, sizeof first);
      std::memcpy(base + count_at_ + i * sizeof count, &count, sizeof count);
      std::memcpy(base + group_first_at_ + i * sizeof g, &g, sizeof g);
      for (std::uint64_t k = groups_of(i); k > 0; --k, ++g) std::memcpy(base + group_tensor_at_ + g * sizeof g, &tensor, sizeof tensor);
    }
    if (!table_.chunks.empty()) {
      std::memcpy(base + chunks_at_, table_.chunks.data(), table_.chunks.size() * sizeof(mldiag::detail::chunk));
    }
  }

  void require_workspace(const void* d_workspace) const {
    if (d_workspace == nullptr) {
      throw error("cuda::stats_plan: null workspace; allocate workspace_bytes() (" +
                  std::to_string(workspace_bytes_) + ") of device memory and pass it");
    }
  }

  int device_ = 0;
  std::vector<std::string> names_;
  std::vector<entry> fingerprint_;
  mldiag::detail::chunk_table table_;
  std::size_t tensors_at_ = 0, chunks_at_ = 0, first_at_ = 0, count_at_ = 0, tables_bytes_ = 0;
  std::size_t group_tensor_at_ = 0, group_first_at_ = 0, done_at_ = 0, group_results_at_ = 0;
  std::size_t partials_at_ = 0, results_at_ = 0, flag_at_ = 0, workspace_bytes_ = 0;
  std::uint64_t group_count_ = 0;
  void* staging_ = nullptr;
};

/// One copy of a plan's results that `stats_readback::next()` hands over: the step it was
/// enqueued with, the tensors' statistics (`stats[i]` for tensor i, `stats[tensors]` the
/// total) and the "any non-finite" flag. Empty (`!r`) when no copy is ready.
struct readback_result {
  const tensor_stats* stats = nullptr;
  std::int64_t step = -1;
  int any_non_finite = 0;
  explicit operator bool() const noexcept { return stats != nullptr; }
};

/// Copies a plan's results to pinned host memory after each `compute`, to be read a step or
/// more later without stalling: a ring of slots (4 by default), each with an event.
///
/// - `enqueue(plan, ws, stream, step)` copies the results of the last `compute` into the next
///   slot, tagged with your step. Nothing blocks.
/// - `next()` hands over the oldest copy not yet handed over whose copy has finished, in the
///   order they were enqueued, each exactly once; empty when the oldest is still on its way.
///   Feed a monitor from it with `begin_step(r.step)`: the evidence carries the step it was
///   taken at, not the step the host has reached.
/// - A host that runs a whole ring ahead of the GPU would overwrite copies nobody has read:
///   `enqueue` then drops the oldest and counts it (`dropped()`). To lose nothing, bound the
///   run-ahead: `if (readback.pending() == readback.slots()) readback.wait_oldest();` after
///   `enqueue` (a host wait only when the host is that far ahead; a training loop that reads
///   its loss every step never is).
/// - `latest()` is the newest finished copy, handed over or not: for a dashboard, not for a
///   monitor (it returns the same copy until a newer one finishes).
///
/// A pointer from `next()` or `latest()` is valid until the next `enqueue`.
///
/// Why more than two slots and `next()`: with two slots and only `latest()`, a host loop that
/// runs ahead of the GPU (the example's, on an H200, reached step 80 with the GPU at 40) hands
/// the monitor the same stale copy under new step numbers, and a planted NaN goes unseen
/// (docs/cuda.md).
class stats_readback {
 public:
  explicit stats_readback(const stats_plan& plan, int slots = 4) : bytes_(plan.results_bytes()), tensors_(plan.size()) {
    if (slots < 2) throw error("cuda::stats_readback: " + std::to_string(slots) + " slots; give at least 2");
    slots_.resize(static_cast<std::size_t>(slots));
    for (auto& slot : slots_) {
      check(cudaMallocHost(&slot.host, bytes_), "cuda::stats_readback: pinned buffer");
      check(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming), "cuda::stats_readback: event");
    }
  }
  stats_readback(const stats_readback&) = delete;
  stats_readback& operator=(const stats_readback&) = delete;
  ~stats_readback() {
    for (auto& slot : slots_) {
      if (slot.done != nullptr) (void)cudaEventDestroy(slot.done);
      if (slot.host != nullptr) (void)cudaFreeHost(slot.host);
    }
  }

  /// Enqueues the copy of the results of the last `compute` on `stream`, tagged with `step`
  /// (default: the number of earlier enqueues). With every slot holding a copy not yet handed
  /// over, the oldest is dropped (`dropped()` counts them).
  void enqueue(const stats_plan& plan, const void* d_workspace, cudaStream_t stream, std::int64_t step = -1) {
    if (plan.results_bytes() != bytes_) {
      throw error("cuda::stats_readback::enqueue: the plan's results are " + std::to_string(plan.results_bytes()) +
                  " bytes and this readback was made for " + std::to_string(bytes_) +
                  "; make one readback per plan");
    }
    if (pending_ == slots_.size()) {
      head_ = (head_ + 1) % slots_.size();
      --pending_;
      ++dropped_;
    }
    slot& s = slots_[(head_ + pending_) % slots_.size()];
    check(cudaMemcpyAsync(s.host, static_cast<const unsigned char*>(d_workspace) + plan.results_offset(),
                          bytes_, cudaMemcpyDeviceToHost, stream),
          "cuda::stats_readback::enqueue");
    check(cudaEventRecord(s.done, stream), "cuda::stats_readback::enqueue: event");
    s.sequence = ++sequence_;
    s.step = step >= 0 ? step : static_cast<std::int64_t>(sequence_ - 1);
    ++pending_;
  }

  /// The oldest copy not yet handed over, if its copy has finished; each copy once, in order.
  [[nodiscard]] readback_result next() {
    if (pending_ == 0) return {};
    const slot& s = slots_[head_];
    const cudaError_t q = cudaEventQuery(s.done);
    if (q == cudaErrorNotReady) return {};
    check(q, "cuda::stats_readback::next");
    head_ = (head_ + 1) % slots_.size();
    --pending_;
    return result_of(s);
  }

  /// The newest finished copy (handed over or not): `tensors()` tensor_stats then the total,
  /// or nullptr.
  [[nodiscard]] const tensor_stats* latest() const {
    const slot* best = nullptr;
    for (const auto& s : slots_) {
      if (s.sequence == 0) continue;
      const cudaError_t q = cudaEventQuery(s.done);
      if (q == cudaErrorNotReady) continue;
      check(q, "cuda::stats_readback::latest");
      if (best == nullptr || s.sequence > best->sequence) best = &s;
    }
    return best == nullptr ? nullptr : static_cast<const tensor_stats*>(best->host);
  }
  /// The "any non-finite" flag of the newest finished copy (-1 when none is ready).
  [[nodiscard]] int latest_any_non_finite() const {
    const tensor_stats* r = latest();
    return r == nullptr ? -1 : flag_of(r);
  }

  /// Blocks until the oldest copy not yet handed over has finished (a host wait you asked for).
  void wait_oldest() const {
    if (pending_ > 0) check(cudaEventSynchronize(slots_[head_].done), "cuda::stats_readback::wait_oldest");
  }
  /// Blocks until every enqueued copy is done (a host wait you asked for).
  void wait() const {
    for (const auto& s : slots_)
      if (s.sequence != 0) check(cudaEventSynchronize(s.done), "cuda::stats_readback::wait");
  }

  [[nodiscard]] std::size_t tensors() const noexcept { return tensors_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_.size(); }
  /// Copies enqueued and not yet handed over by `next()`.
  [[nodiscard]] std::size_t pending() const noexcept { return pending_; }
  /// Copies dropped unread because the ring was full.
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  struct slot {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
    std::uint64_t sequence = 0;
    std::int64_t step = -1;
  };
  int flag_of(const tensor_stats* r) const {
    int flag = 0;
    std::memcpy(&flag, reinterpret_cast<const unsigned char*>(r) + (tensors_ + 1) * sizeof(tensor_stats), sizeof flag);
    return flag;
  }
  readback_result result_of(const slot& s) const {
    const auto* r = static_cast<const tensor_stats*>(s.host);
    return {r, s.step, flag_of(r)};
  }

  std::size_t bytes_, tensors_;
  std::vector<slot> slots_;
  std::size_t head_ = 0, pending_ = 0;
  std::uint64_t sequence_ = 0, dropped_ = 0;
};

}  // namespace mldiag::cuda
