// SPDX-License-Identifier: Apache-2.0
/// Memory evidence from LibTorch's CUDA caching allocator (`getDeviceStats`), where LibTorch
/// was built with CUDA.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/snapshot.hpp"

// A CUDA build of LibTorch installs the generated c10/cuda/impl/cuda_cmake_macros.h; a
// CPU-only one (Debian's libtorch-dev) ships the c10/cuda headers without it and without
// libc10_cuda, so the allocator's functions could not link. The header's presence is the test.
#if __has_include( \
    <c10/cuda/impl/cuda_cmake_macros.h>) && __has_include(<c10/cuda/CUDACachingAllocator.h>)
#define MLDIAG_TORCH_CUDA_MEMORY 1
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#else
#define MLDIAG_TORCH_CUDA_MEMORY 0
#endif

#include <cstddef>
#include <string>

namespace mldiag::inline MLDIAG_ABI::torch_cuda {

/// Whether this build can read LibTorch's CUDA caching allocator.
inline constexpr bool available = MLDIAG_TORCH_CUDA_MEMORY == 1;

/// The caching allocator's view of device `device`: `allocated` (bytes of live tensors),
/// `reserved` (the allocator's pool: allocated plus cached free blocks), `peak` (peak
/// allocated since the last `resetPeakStats`), and from `cudaMemGetInfo` `capacity` and
/// `used`. The largest free block is not read: LibTorch's call for it changed between
/// versions (`cacheInfo`), and `snapshot()` walks every block; a `memory_callback` can add it.
/// Without a CUDA build of LibTorch this throws an `mldiag::error` saying so.
///
/// **Example**
/// ```cpp
/// if constexpr (mldiag::torch_cuda::available) mon.observe(mldiag::torch_cuda::memory(0));
/// ```
[[nodiscard]] inline memory_evidence memory(int device) {
#if MLDIAG_TORCH_CUDA_MEMORY
  namespace alloc = c10::cuda::CUDACachingAllocator;
  // DeviceStats moved namespaces across LibTorch versions; auto and the aggregate index work in
  // all.
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  constexpr auto all = static_cast<std::size_t>(alloc::StatType::AGGREGATE);
  memory_evidence m;
  m.allocated = static_cast<double>(stats.allocated_bytes[all].current);
  m.reserved = static_cast<double>(stats.reserved_bytes[all].current);
  m.peak = static_cast<double>(stats.allocated_bytes[all].peak);
  int current = 0;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      m.capacity = static_cast<double>(total_bytes);
      m.used = static_cast<double>(total_bytes - free_bytes);
    }
    (void)cudaSetDevice(current);
  }
  return m;
#else
  throw error(
      "torch_cuda::memory(" + std::to_string(device) +
      "): this LibTorch has no CUDA (c10/cuda/impl/cuda_cmake_macros.h is missing: a CPU-only "
      "build); "
      "use a CUDA build of LibTorch, or kernels/mldiag/cuda/memory.cuh for capacity and used");
#endif
}

}  // namespace mldiag::torch_cuda
