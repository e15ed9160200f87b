// SPDX-License-Identifier: Apache-2.0
/// Device memory from the CUDA runtime: `cudaMemGetInfo` -> capacity and used.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
// A .cuh beside the other CUDA code, although it has no device code: it needs only
// <cuda_runtime_api.h> and CUDA::cudart, so a host .cpp linking mldiag::cuda can include it too,
// and it is where a user looks for what needs the CUDA Toolkit (include/ must build without it).
#include "mldiag/core/error.hpp"
#include "mldiag/evidence/snapshot.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// The memory of CUDA device `device` as the driver sees it: `capacity` (total) and `used`
/// (total - free: every process on the device and the CUDA context included, not only this
/// process's tensors). `allocated` and `reserved` stay absent: only the allocator knows them (see
/// adapters/torch_cuda_memory.hpp, or a `memory_callback`). Selects `device` for the call and
/// restores the current device. `cudaMemGetInfo` does not wait for the device's work, but it
/// is a driver call of some microseconds: sample every few steps if the step is short.
///
/// **Example**
/// ```cpp
/// mon.observe(mldiag::cuda::device_memory(0));  // with memory_pressure: fill = used /
/// capacity
/// ```
[[nodiscard]] inline memory_evidence device_memory(int device) {
  auto fail = [&](const char* what, cudaError_t status) {
    throw error(std::string("cuda::device_memory(") + std::to_string(device) + "): " + what + ": " +
                cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  };
  int current = 0;
  if (const auto s = cudaGetDevice(&current); s != cudaSuccess) fail("cudaGetDevice", s);
  if (current != device) {
    if (const auto s = cudaSetDevice(device); s != cudaSuccess)
      fail("cudaSetDevice (is the index valid?)", s);
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  const auto status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (current != device) (void)cudaSetDevice(current);  // restore before reporting an error
  if (status != cudaSuccess) fail("cudaMemGetInfo", status);
  memory_evidence m;
  m.capacity = static_cast<double>(total_bytes);
  m.used = static_cast<double>(total_bytes - free_bytes);
  return m;
}

}  // namespace mldiag::cuda
