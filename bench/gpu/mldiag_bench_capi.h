// SPDX-License-Identifier: Apache-2.0
// The C interface of bench/gpu/mldiag_bench_capi.cu for a C++ program that includes LibTorch
// (bench/gpu_train_bench.cpp): LibTorch's headers do not compile as C++20 CUDA, so the kernels
// stay in that one .cu and a LibTorch program reaches them through these functions. Python
// (bench.py) loads the same library with ctypes. Every int-returning function returns 0 on
// success; mldiag_last_error() says what failed otherwise. Streams are cudaStream_t as void*.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

const char* mldiag_last_error();

// Statistics plan over n device tensors (mldiag::cuda::stats_plan); dtypes are mldiag::dtype.
void* mldiag_plan_create(const void* const* ptrs, const std::int64_t* counts, const int* dtypes, int n, int device,
                         std::size_t* workspace_bytes);
void mldiag_plan_destroy(void* plan);
int mldiag_plan_launches(void* plan);
int mldiag_plan_upload(void* plan, void* d_ws, void* stream);
int mldiag_plan_compute(void* plan, void* d_ws, void* stream);

// Row entropy of logits into d_out (an entropy_stats in device memory); out_host non-null makes
// it synchronous (counted in mldiag_blocking_calls).
std::size_t mldiag_entropy_workspace_bytes(std::uint64_t rows);
int mldiag_entropy_logits(const void* d_x, std::int64_t count, std::int64_t row_len, int dtype, void* d_ws,
                          std::size_t ws_bytes, void* d_out, void* stream, double* out_host);
std::size_t mldiag_entropy_stats_bytes();

// The readback ring of a plan (mldiag::cuda::stats_readback): enqueue after each compute,
// next() hands over the oldest finished copy (a pointer to plan-size + 1 mldiag::tensor_stats,
// valid until the next enqueue) or null when none is ready. Never blocks.
void* mldiag_readback_create(void* plan, int slots);
void mldiag_readback_destroy(void* readback);
int mldiag_readback_enqueue(void* readback, void* plan, const void* d_ws, void* stream, std::int64_t step);
const void* mldiag_readback_next(void* readback, std::int64_t* step, int* any_non_finite);
// Waits for every enqueued copy (a host wait: for the end of a run only; counted).
int mldiag_readback_wait(void* readback);
std::uint64_t mldiag_readback_dropped(void* readback);

// The same ring for any small device buffer (the loss and the entropy results of a step):
// pinned slots with an event each, the same order and hand-over rules.
void* mldiag_bytes_ring_create(std::size_t bytes, int slots);
void mldiag_bytes_ring_destroy(void* ring);
int mldiag_bytes_ring_enqueue(void* ring, const void* d_src, void* stream, std::int64_t step);
const void* mldiag_bytes_ring_next(void* ring, std::int64_t* step);
int mldiag_bytes_ring_wait(void* ring);
std::uint64_t mldiag_bytes_ring_dropped(void* ring);

// Layer and phase times on the GPU (mldiag::cuda::event_timer). phase: mldiag::efficiency::phase.
void* mldiag_timer_create(int steps_in_flight);
void mldiag_timer_destroy(void* timer);
std::int32_t mldiag_timer_intern(void* timer, const char* name);
int mldiag_timer_begin_step(void* timer, void* stream);
int mldiag_timer_mark(void* timer, int phase, void* stream);
int mldiag_timer_begin(void* timer, std::int32_t id, void* stream);
int mldiag_timer_end(void* timer, void* stream);
int mldiag_timer_end_step(void* timer, void* stream);
// 1: a step's times are ready (*phases: an mldiag::efficiency::phase_times, *layers: layer_count
// mldiag::efficiency::layer_result, valid until the next call); 0: not ready or none pending;
// -1: an error.
int mldiag_timer_try_readback(void* timer, std::int64_t* step, const void** phases, const void** layers,
                              std::size_t* layer_count);
std::uint64_t mldiag_timer_dropped(void* timer);

// A kernel that spins for `microseconds` on `stream`, and whether `stream` still has work
// (cudaStreamQuery, which never waits): the probe that shows a stretch of host code did not
// wait for the stream (the spinning kernel would have finished if it had).
int mldiag_spin(void* stream, std::uint32_t microseconds);
int mldiag_stream_busy(void* stream);
int mldiag_device_synchronize();

// Calls of this library that can block the host (a synchronous copy, a wait): counted so a
// program can check none happened inside a step.
std::uint64_t mldiag_blocking_calls();

// Host synchronizations of the whole process counted with CUPTI's driver-API callbacks
// (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, cuStreamWaitEvent excluded, and
// the synchronous copies and memsets). 0 when subscribed; otherwise an error says why (no
// CUPTI in this build, or another subscriber). Counts go to the region set last (0-7).
int mldiag_sync_counter_start();
void mldiag_sync_counter_region(int region);
// counts[8]: synchronizing calls per region since start; names of the last one seen per region
// go to last_name (may be null).
void mldiag_sync_counter_read(std::uint64_t* counts, const char** last_name);
void mldiag_sync_counter_stop();

}  // extern "C"
