// SPDX-License-Identifier: Apache-2.0
/// CUDA error checks that become `mldiag::error` exceptions with a message saying what failed.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::cuda {

/// Throws `mldiag::error` ("mldiag: <what>: cudaErrorX: text") unless `status` is success.
/// Used at every CUDA call of the plans; a kernel launch is checked with
/// `check(cudaGetLastError(), ...)`, which does not synchronize.
inline void check(cudaError_t status, std::string_view what) {
  if (status == cudaSuccess) return;
  throw error(std::string(what) + ": " + cudaGetErrorName(status) + ": " +
              cudaGetErrorString(status));
}

/// Checks that `t` lives in memory of CUDA device `device` (device or managed memory), so that
/// a host pointer handed over as a device pointer, or a tensor of another GPU, is an error
/// before any kernel reads it.
inline void require_device_memory(const tensor_ref& t, int device, std::string_view who) {
  if (t.numel() == 0) return;
  if (t.device().kind != device_kind::cuda) {
    mldiag::detail::fail(who, t.name(),
                 "the tensor_ref says host memory; build it with mldiag::device::cuda(index) "
                 "for device memory, or use the host engine (mldiag::stats_plan)");
  }
  if (t.device().index != device) {
    mldiag::detail::fail(who, t.name(),
                 "the tensor is on CUDA device " + std::to_string(t.device().index) +
                     " but the plan is for device " + std::to_string(device) +
                     "; build one plan per device");
  }
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, t.data());
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error state
    mldiag::detail::fail(who, t.name(), std::string("cannot query the pointer: ") +
                                    cudaGetErrorName(status));
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    mldiag::detail::fail(who, t.name(),
                 "the pointer is host memory, not device memory; pass the tensor's device "
                 "pointer (e.g. torch::Tensor::data_ptr() of a CUDA tensor)");
  }
  if (attributes.device != device) {
    mldiag::detail::fail(who, t.name(),
                 "the pointer belongs to CUDA device " + std::to_string(attributes.device) +
                     " but the tensor_ref says device " + std::to_string(device));
  }
}

}  // namespace mldiag::cuda
