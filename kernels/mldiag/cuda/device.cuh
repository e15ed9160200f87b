// SPDX-License-Identifier: Apache-2.0
/// Which CUDA devices this process can use, as a value (no exception, no abort).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <cuda_runtime_api.h>

#include <string>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// What `query_devices()` found: the number of usable devices and, when there are none, why.
struct device_query {
  int count = 0;                     ///< usable CUDA devices (0 when there is no driver or GPU)
  cudaError_t status = cudaSuccess;  ///< the runtime's answer to cudaGetDeviceCount
  /// A sentence for a log: "2 CUDA devices" or why there are none.
  [[nodiscard]] std::string describe() const {
    if (count > 0) return std::to_string(count) + (count == 1 ? " CUDA device" : " CUDA devices");
    return std::string("no CUDA device (") + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status) + ")";
  }
};

/// Counts the CUDA devices. Without a driver the runtime answers cudaErrorInsufficientDriver
/// or cudaErrorNoDevice and leaves the count unwritten; this returns 0 with that status.
/// The sticky error state is cleared so later calls start clean.
///
/// **Example**
/// ```cpp
/// if (auto q = mldiag::cuda::query_devices(); q.count == 0) std::puts(q.describe().c_str());
/// ```
inline device_query query_devices() noexcept {
  device_query q;
  int count = 0;
  q.status = cudaGetDeviceCount(&count);
  if (q.status == cudaSuccess)
    q.count = count;
  else
    (void)cudaGetLastError();
  return q;
}

}  // namespace mldiag::cuda
