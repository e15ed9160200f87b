// SPDX-License-Identifier: Apache-2.0
// A small C interface to the CUDA statistics, so bench.py can drive mldiag and PyTorch in one
// process on the same device buffers (ctypes; LibTorch headers do not compile in C++20 .cu).
// Every function returns 0 on success; mldiag_last_error() says what failed otherwise.
// bench/gpu/mldiag_bench_capi.h declares them for C++ programs (bench/gpu_train_bench.cpp).
// Built with -DMLDIAG_BENCH_CUPTI=1 and linked with CUPTI, it also counts the process's host
// synchronizations (mldiag_sync_counter_*); without, those functions say so.
#include "mldiag_bench_capi.h"

#include "mldiag/cuda/device_entropy.cuh"
#include "mldiag/cuda/device_stats.cuh"
#include "mldiag/cuda/event_timer.cuh"

#if MLDIAG_BENCH_CUPTI
#include <cupti.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {
std::string last_error;
// Calls of this library that can block the host (mldiag_blocking_calls).
std::atomic<std::uint64_t> blocking_calls{0};

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}
}  // namespace

extern "C" {

const char* mldiag_last_error() { return last_error.c_str(); }

// A plan over n device tensors; writes the workspace size.
void* mldiag_plan_create(const void* const* ptrs, const std::int64_t* counts, const int* dtypes, int n,
                         int device, std::size_t* workspace_bytes) {
  mldiag::cuda::stats_plan* plan = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {  // snprintf: GCC 12 -O3 warns falsely on "t" + to_string
    char name[32];
    std::snprintf(name, sizeof name, "t%d", i);
    names.emplace_back(name);
  }
  const int rc = guarded([&] {
    std::vector<mldiag::tensor_ref> refs;
    for (int i = 0; i < n; ++i) {
      refs.emplace_back(names[static_cast<std::size_t>(i)], ptrs[i], counts[i], static_cast<mldiag::dtype>(dtypes[i]),
                        mldiag::device::cuda(device));
    }
    plan = new mldiag::cuda::stats_plan(refs);
    *workspace_bytes = plan->workspace_bytes();
  });
  return rc == 0 ? plan : nullptr;
}

void mldiag_plan_destroy(void* plan) { delete static_cast<mldiag::cuda::stats_plan*>(plan); }

int mldiag_plan_launches(void* plan) { return static_cast<mldiag::cuda::stats_plan*>(plan)->launches(); }

int mldiag_plan_upload(void* plan, void* d_ws, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::stats_plan*>(plan)->upload(d_ws, static_cast<cudaStream_t>(stream)); });
}

int mldiag_plan_compute(void* plan, void* d_ws, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::stats_plan*>(plan)->compute(d_ws, static_cast<cudaStream_t>(stream)); });
}

// Copies (n + 1) results to `out` as doubles per tensor: count, nan, pos_inf, neg_inf, zeros,
// min, max, max_abs, mean, variance, l2_norm (11 values each); then the flag. Synchronous.
int mldiag_plan_results(void* plan, void* d_ws, double* out, int* any_non_finite) {
  ++blocking_calls;
  return guarded([&] {
    auto* p = static_cast<mldiag::cuda::stats_plan*>(plan);
    std::vector<mldiag::tensor_stats> r(p->size() + 1);
    mldiag::cuda::check(cudaMemcpy(r.data(), p->d_results(d_ws), r.size() * sizeof(mldiag::tensor_stats), cudaMemcpyDeviceToHost),
                        "results");
    mldiag::cuda::check(cudaMemcpy(any_non_finite, p->d_any_non_finite(d_ws), sizeof(int), cudaMemcpyDeviceToHost), "flag");
    for (std::size_t i = 0; i < r.size(); ++i) {
      const auto& s = r[i];
      const double v[11] = {double(s.count), double(s.nan), double(s.pos_inf), double(s.neg_inf), double(s.zeros),
                            s.min, s.max, s.max_abs, s.mean(), s.variance(), s.l2_norm()};
      for (int k = 0; k < 11; ++k) out[i * 11 + static_cast<std::size_t>(k)] = v[k];
    }
  });
}

// Captures one compute() into a CUDA graph in global capture mode: any host synchronization
// or allocation inside it would make the capture fail. Writes the number of kernel nodes.
int mldiag_plan_capture_check(void* plan, void* d_ws, void* stream_in, int* kernel_nodes) {
  return guarded([&] {
    auto stream = static_cast<cudaStream_t>(stream_in);
    mldiag::cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    static_cast<mldiag::cuda::stats_plan*>(plan)->compute(d_ws, stream);
    cudaGraph_t graph = nullptr;
    mldiag::cuda::check(cudaStreamEndCapture(stream, &graph), "end capture (a sync or allocation inside?)");
    std::size_t count = 0;
    mldiag::cuda::check(cudaGraphGetNodes(graph, nullptr, &count), "graph nodes");
    std::vector<cudaGraphNode_t> nodes(count);
    mldiag::cuda::check(cudaGraphGetNodes(graph, nodes.data(), &count), "graph nodes");
    int kernels = 0;
    for (auto node : nodes) {
      cudaGraphNodeType type;
      mldiag::cuda::check(cudaGraphNodeGetType(node, &type), "node type");
      kernels += type == cudaGraphNodeTypeKernel;
    }
    *kernel_nodes = kernels;
    cudaGraphDestroy(graph);
  });
}

std::size_t mldiag_entropy_workspace_bytes(std::uint64_t rows) { return mldiag::cuda::entropy_workspace_bytes(rows); }

// Row entropy of logits into d_out (an entropy_stats in device memory); out_host gets rows,
// invalid rows, mean, min, max when non-null (synchronous then).
int mldiag_entropy_logits(const void* d_x, std::int64_t count, std::int64_t row_len, int dtype, void* d_ws,
                          std::size_t ws_bytes, void* d_out, void* stream, double* out_host) {
  return guarded([&] {
    const mldiag::tensor_ref t("logits", d_x, count, static_cast<mldiag::dtype>(dtype), mldiag::device::cuda(0));
    mldiag::cuda::entropy_rows(t, row_len, true, d_ws, ws_bytes, static_cast<mldiag::entropy_stats*>(d_out),
                               static_cast<cudaStream_t>(stream));
    if (out_host != nullptr) {
      ++blocking_calls;
      mldiag::entropy_stats e;
      mldiag::cuda::check(cudaMemcpy(&e, d_out, sizeof e, cudaMemcpyDeviceToHost), "entropy result");
      out_host[0] = double(e.rows);
      out_host[1] = double(e.invalid_rows);
      out_host[2] = e.mean();
      out_host[3] = e.min;
      out_host[4] = e.max;
    }
  });
}

std::size_t mldiag_entropy_stats_bytes() { return sizeof(mldiag::entropy_stats); }

}  // extern "C"

// Below, outside the block so that helper types and kernels can sit beside the functions: the
// declarations in mldiag_bench_capi.h give these functions C linkage.

// ---- The readback ring of a plan ----------------------------------------------------------

void* mldiag_readback_create(void* plan, int slots) {
  mldiag::cuda::stats_readback* r = nullptr;
  const int rc = guarded([&] { r = new mldiag::cuda::stats_readback(*static_cast<mldiag::cuda::stats_plan*>(plan), slots); });
  return rc == 0 ? r : nullptr;
}

void mldiag_readback_destroy(void* readback) { delete static_cast<mldiag::cuda::stats_readback*>(readback); }

int mldiag_readback_enqueue(void* readback, void* plan, const void* d_ws, void* stream, std::int64_t step) {
  return guarded([&] {
    static_cast<mldiag::cuda::stats_readback*>(readback)->enqueue(*static_cast<mldiag::cuda::stats_plan*>(plan), d_ws,
                                                                  static_cast<cudaStream_t>(stream), step);
  });
}

const void* mldiag_readback_next(void* readback, std::int64_t* step, int* any_non_finite) {
  mldiag::cuda::readback_result r;
  if (guarded([&] { r = static_cast<mldiag::cuda::stats_readback*>(readback)->next(); }) != 0 || !r) return nullptr;
  *step = r.step;
  *any_non_finite = r.any_non_finite;
  return r.stats;
}

int mldiag_readback_wait(void* readback) {
  ++blocking_calls;
  return guarded([&] { static_cast<mldiag::cuda::stats_readback*>(readback)->wait(); });
}

std::uint64_t mldiag_readback_dropped(void* readback) { return static_cast<mldiag::cuda::stats_readback*>(readback)->dropped(); }

// ---- A ring for small device buffers (the step's loss and entropy results) --------------
// The same contract as stats_readback (which copies a plan's results only): pinned slots, an
// event each, handed over once each in order; a full ring drops its oldest copy.
namespace {
struct bytes_ring {
  struct slot {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
    std::int64_t step = -1;
  };
  std::size_t bytes = 0;
  std::vector<slot> slots;
  std::size_t head = 0, pending = 0;
  std::uint64_t dropped = 0;
};
}  // namespace

void* mldiag_bytes_ring_create(std::size_t bytes, int slots) {
  auto* r = new bytes_ring;
  const int rc = guarded([&] {
    if (slots < 2 || bytes == 0) throw mldiag::error("bytes_ring: give at least 2 slots of at least 1 byte");
    r->bytes = bytes;
    r->slots.resize(static_cast<std::size_t>(slots));
    for (auto& s : r->slots) {
      mldiag::cuda::check(cudaMallocHost(&s.host, bytes), "bytes_ring: pinned buffer");
      mldiag::cuda::check(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "bytes_ring: event");
    }
  });
  if (rc != 0) {
    mldiag_bytes_ring_destroy(r);
    return nullptr;
  }
  return r;
}

void mldiag_bytes_ring_destroy(void* ring) {
  auto* r = static_cast<bytes_ring*>(ring);
  if (r == nullptr) return;
  for (auto& s : r->slots) {
    if (s.done != nullptr) (void)cudaEventDestroy(s.done);
    if (s.host != nullptr) (void)cudaFreeHost(s.host);
  }
  delete r;
}

int mldiag_bytes_ring_enqueue(void* ring, const void* d_src, void* stream, std::int64_t step) {
  return guarded([&] {
    auto& r = *static_cast<bytes_ring*>(ring);
    if (r.pending == r.slots.size()) {
      r.head = (r.head + 1) % r.slots.size();
      --r.pending;
      ++r.dropped;
    }
    auto& s = r.slots[(r.head + r.pending) % r.slots.size()];
    mldiag::cuda::check(cudaMemcpyAsync(s.host, d_src, r.bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
                        "bytes_ring::enqueue");
    mldiag::cuda::check(cudaEventRecord(s.done, static_cast<cudaStream_t>(stream)), "bytes_ring::enqueue: event");
    s.step = step;
    ++r.pending;
  });
}

const void* mldiag_bytes_ring_next(void* ring, std::int64_t* step) {
  auto& r = *static_cast<bytes_ring*>(ring);
  if (r.pending == 0) return nullptr;
  const auto& s = r.slots[r.head];
  const cudaError_t q = cudaEventQuery(s.done);
  if (q == cudaErrorNotReady) return nullptr;
  if (guarded([&] { mldiag::cuda::check(q, "bytes_ring::next"); }) != 0) return nullptr;
  r.head = (r.head + 1) % r.slots.size();
  --r.pending;
  *step = s.step;
  return s.host;
}

int mldiag_bytes_ring_wait(void* ring) {
  ++blocking_calls;
  return guarded([&] {
    for (const auto& s : static_cast<bytes_ring*>(ring)->slots)
      if (s.step >= 0) mldiag::cuda::check(cudaEventSynchronize(s.done), "bytes_ring::wait");
  });
}

std::uint64_t mldiag_bytes_ring_dropped(void* ring) { return static_cast<bytes_ring*>(ring)->dropped; }

// ---- Layer and phase times on the GPU ------------------------------------------------------

void* mldiag_timer_create(int steps_in_flight) {
  mldiag::cuda::event_timer* t = nullptr;
  const int rc = guarded([&] {
    t = new mldiag::cuda::event_timer({.max_events_per_step = 1024, .steps_in_flight = static_cast<std::uint32_t>(steps_in_flight)});
  });
  return rc == 0 ? t : nullptr;
}

void mldiag_timer_destroy(void* timer) { delete static_cast<mldiag::cuda::event_timer*>(timer); }

std::int32_t mldiag_timer_intern(void* timer, const char* name) {
  std::int32_t id = -1;
  (void)guarded([&] { id = static_cast<std::int32_t>(static_cast<mldiag::cuda::event_timer*>(timer)->intern(name)); });
  return id;
}

int mldiag_timer_begin_step(void* timer, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::event_timer*>(timer)->begin_step(static_cast<cudaStream_t>(stream)); });
}

int mldiag_timer_mark(void* timer, int phase, void* stream) {
  return guarded([&] {
    static_cast<mldiag::cuda::event_timer*>(timer)->mark(static_cast<mldiag::efficiency::phase>(phase), static_cast<cudaStream_t>(stream));
  });
}

int mldiag_timer_begin(void* timer, std::int32_t id, void* stream) {
  return guarded([&] {
    static_cast<mldiag::cuda::event_timer*>(timer)->begin(static_cast<std::uint32_t>(id), mldiag::efficiency::pass::forward,
                                                         static_cast<cudaStream_t>(stream));
  });
}

int mldiag_timer_end(void* timer, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::event_timer*>(timer)->end(static_cast<cudaStream_t>(stream)); });
}

int mldiag_timer_end_step(void* timer, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::event_timer*>(timer)->end_step(static_cast<cudaStream_t>(stream)); });
}

int mldiag_timer_try_readback(void* timer, std::int64_t* step, const void** phases, const void** layers, std::size_t* layer_count) {
  int ready = 0;
  const int rc = guarded([&] {
    auto* t = static_cast<mldiag::cuda::event_timer*>(timer);
    if (t->try_readback() != mldiag::cuda::readback_status::ready) return;
    *step = t->step();
    *phases = &t->phases();
    *layers = t->layers().data();
    *layer_count = t->layers().size();
    ready = 1;
  });
  return rc != 0 ? -1 : ready;
}

std::uint64_t mldiag_timer_dropped(void* timer) { return static_cast<mldiag::cuda::event_timer*>(timer)->dropped_steps(); }

// ---- The busy-stream probe ---------------------------------------------------------------

namespace {
// Spins on the global timer (nanoseconds) until `ns` have passed. A template, as the header
// kernels are, so the symbol is not one external definition per program.
template <int = 0>
__global__ void spin_kernel(std::uint64_t ns) {
  std::uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
}  // namespace

int mldiag_spin(void* stream, std::uint32_t microseconds) {
  return guarded([&] {
    spin_kernel<><<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(std::uint64_t{microseconds} * 1000u);
    mldiag::cuda::check(cudaGetLastError(), "spin kernel launch");
  });
}

int mldiag_stream_busy(void* stream) { return cudaStreamQuery(static_cast<cudaStream_t>(stream)) == cudaErrorNotReady ? 1 : 0; }

int mldiag_device_synchronize() {
  ++blocking_calls;
  return guarded([&] { mldiag::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
}

std::uint64_t mldiag_blocking_calls() { return blocking_calls.load(); }

// ---- Host synchronizations of the process, counted by CUPTI ------------------------------
// Driver-API callbacks see every synchronizing call whichever runtime made it (LibTorch's
// libcudart, this library's, a direct driver call). Counted by name: cu*Synchronize, and the
// memcpy/memset/free calls without "Async" (synchronous with respect to the host, or, for
// cuMemFree, an implicit device synchronization). Over-counting is the safe direction for a
// claim of zero. cuStreamQuery/cuEventQuery never wait and are not counted.
namespace {
constexpr int sync_regions = 8;
std::atomic<int> sync_region{0};
std::atomic<std::uint64_t> sync_counts[sync_regions];
std::atomic<const char*> sync_last[sync_regions];
bool sync_subscribed = false;
#if MLDIAG_BENCH_CUPTI
CUpti_SubscriberHandle sync_subscriber = nullptr;

bool is_synchronizing(const char* name) {
  if (name == nullptr || std::strstr(name, "Async") != nullptr) return false;
  return std::strstr(name, "Synchronize") != nullptr || std::strncmp(name, "cuMemcpy", 8) == 0 ||
         std::strncmp(name, "cuMemset", 8) == 0 || std::strncmp(name, "cuMemFree", 9) == 0;
}

void CUPTIAPI on_driver_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER || !is_synchronizing(info->functionName)) return;
  const int region = sync_region.load(std::memory_order_relaxed);
  sync_counts[region].fetch_add(1, std::memory_order_relaxed);
  sync_last[region].store(info->functionName, std::memory_order_relaxed);
}
#endif
}  // namespace

int mldiag_sync_counter_start() {
  return guarded([&] {
#if MLDIAG_BENCH_CUPTI
    if (sync_subscribed) return;
    auto ok = [](CUptiResult r, const char* what) {
      if (r == CUPTI_SUCCESS) return;
      const char* text = nullptr;
      cuptiGetResultString(r, &text);
      throw mldiag::error(std::string("CUPTI ") + what + ": " + (text != nullptr ? text : "unknown error"));
    };
    ok(cuptiSubscribe(&sync_subscriber, reinterpret_cast<CUpti_CallbackFunc>(on_driver_call), nullptr), "cuptiSubscribe");
    ok(cuptiEnableDomain(1, sync_subscriber, CUPTI_CB_DOMAIN_DRIVER_API), "cuptiEnableDomain(driver API)");
    sync_subscribed = true;
#else
    throw mldiag::error("this build has no CUPTI (built without -DMLDIAG_BENCH_CUPTI=1 -lcupti): host synchronizations are not counted");
#endif
  });
}

void mldiag_sync_counter_region(int region) { sync_region.store(region >= 0 && region < sync_regions ? region : 0, std::memory_order_relaxed); }

void mldiag_sync_counter_read(std::uint64_t* counts, const char** last_name) {
  for (int i = 0; i < sync_regions; ++i) {
    counts[i] = sync_counts[i].load();
    if (last_name != nullptr) last_name[i] = sync_last[i].load();
  }
}

void mldiag_sync_counter_stop() {
#if MLDIAG_BENCH_CUPTI
  if (sync_subscribed) (void)cuptiUnsubscribe(sync_subscriber);
#endif
  sync_subscribed = false;
}
