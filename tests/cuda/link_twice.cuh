// SPDX-License-Identifier: Apache-2.0
/// Included by link_twice_a.cu and link_twice_b.cu: every .cuh header, used in each of the two.
#pragma once

// Every header of kernels/mldiag/cuda/, so that a kernel or function defined in one of them as
// one external symbol shows as "multiple definition" when the two translation units link.
#include "mldiag/cuda/block_stats.cuh"
#include "mldiag/cuda/check.cuh"
#include "mldiag/cuda/device.cuh"
#include "mldiag/cuda/device_entropy.cuh"
#include "mldiag/cuda/device_stats.cuh"
#include "mldiag/cuda/event_timer.cuh"
#include "mldiag/cuda/inference.cuh"
#include "mldiag/cuda/memory.cuh"
#if MLDIAG_LINK_TWICE_NCCL
#include "mldiag/cuda/nccl_merge.cuh"
#endif
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

/// What one translation unit computed over the same device data.
struct link_twice_result {
  mldiag::tensor_stats stats;
  mldiag::entropy_stats entropy;
  double memory_capacity = 0.0;
  std::size_t timed_layers = 0;
};

// Defined once in each translation unit, with the body below.
link_twice_result link_twice_run_a(const float* d_x, std::int64_t n, std::int64_t row_len);
link_twice_result link_twice_run_b(const float* d_x, std::int64_t n, std::int64_t row_len);

namespace {

// Takes the address of every inline function with kernels behind it, so that each
// translation unit instantiates (and emits) every kernel even where no device runs them.
[[maybe_unused]] void odr_use_everything() {
  [[maybe_unused]] auto* volatile entropy = &mldiag::cuda::entropy_rows;
  [[maybe_unused]] auto* volatile memory = &mldiag::cuda::device_memory;
  [[maybe_unused]] auto* volatile devices = &mldiag::cuda::query_devices;
  [[maybe_unused]] auto* volatile checks = &mldiag::cuda::require_device_memory;
  [[maybe_unused]] void (mldiag::cuda::stats_plan::*volatile compute)(void*, cudaStream_t) const =
      &mldiag::cuda::stats_plan::compute;
  [[maybe_unused]] void (mldiag::cuda::inference_buffers::*volatile sentinel_f)(const float*, std::int64_t, std::int64_t,
                                                                              std::int64_t, unsigned, cudaStream_t) =
      &mldiag::cuda::inference_buffers::sentinel<float>;
  [[maybe_unused]] void (mldiag::cuda::inference_buffers::*volatile fingerprint_f)(const float*, std::int64_t, std::int64_t,
                                                                                  std::size_t, cudaStream_t) =
      &mldiag::cuda::inference_buffers::fingerprint<float>;
#if MLDIAG_LINK_TWICE_NCCL
  [[maybe_unused]] auto* volatile merge = &mldiag::cuda::nccl_merge;
#endif
}

// Statistics, row entropy (logits, rows of `row_len`), device memory and an event-timed step
// over `n` floats at `d_x`, on a stream of its own; waits for the results.
link_twice_result run_everything(const float* d_x, std::int64_t n, std::int64_t row_len) {
  odr_use_everything();
  using mldiag::cuda::check;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "link_twice: stream");
  const mldiag::tensor_ref x("x", d_x, n, mldiag::dtype::f32, mldiag::device::cuda(0));
  mldiag::cuda::stats_plan plan{x};
  const std::size_t entropy_bytes =
      mldiag::cuda::entropy_workspace_bytes(static_cast<std::uint64_t>(n / row_len));
  void* d_ws = nullptr;
  void* d_entropy_ws = nullptr;
  mldiag::entropy_stats* d_entropy = nullptr;
  check(cudaMalloc(&d_ws, plan.workspace_bytes()), "link_twice: workspace");
  check(cudaMalloc(&d_entropy_ws, entropy_bytes), "link_twice: entropy workspace");
  check(cudaMalloc(reinterpret_cast<void**>(&d_entropy), sizeof(mldiag::entropy_stats)),
        "link_twice: entropy");

  mldiag::cuda::event_timer timer;
  timer.begin_step(stream);
  timer.mark(mldiag::efficiency::phase::forward, stream);
  timer.begin("stats", mldiag::efficiency::pass::forward, stream);
  plan.upload(d_ws, stream);
  plan.compute(d_ws, stream);
  timer.end(stream);
  mldiag::cuda::entropy_rows(x, row_len, true, d_entropy_ws, entropy_bytes, d_entropy, stream);
  timer.end_step(stream);
  timer.finish();

  link_twice_result r;
  check(cudaMemcpyAsync(&r.stats, plan.d_results(d_ws), sizeof r.stats, cudaMemcpyDeviceToHost,
                        stream),
        "link_twice: stats readback");
  check(cudaMemcpyAsync(&r.entropy, d_entropy, sizeof r.entropy, cudaMemcpyDeviceToHost, stream),
        "link_twice: entropy readback");
  check(cudaStreamSynchronize(stream), "link_twice: sync");
  // absent (no driver answer) reads as 0, which the caller reports as a failure
  r.memory_capacity = mldiag::cuda::device_memory(0).capacity.value_or(0.0);
  if (timer.try_readback() == mldiag::cuda::readback_status::ready)
    r.timed_layers = timer.layers().size();
  check(cudaFree(d_entropy), "link_twice: free");
  check(cudaFree(d_entropy_ws), "link_twice: free");
  check(cudaFree(d_ws), "link_twice: free");
  check(cudaStreamDestroy(stream), "link_twice: stream");
  return r;
}

}  // namespace
