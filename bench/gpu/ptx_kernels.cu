// SPDX-License-Identifier: Apache-2.0
// The statistics kernels for bf16 and fp32, instantiated so that bench/gpu/ptx_budget.py can
// count the PTX instructions per element of their main loop (no GPU needed).
#include "mldiag/cuda/block_stats.cuh"

namespace k = mldiag::cuda::detail;
template __global__ void k::chunk_stats_kernel<mldiag::detail::fmt_bf16>(const k::device_tensor*, const mldiag::detail::chunk*,
                                                                         std::uint64_t, std::uint64_t, mldiag::tensor_stats*);
template __global__ void k::chunk_stats_kernel<mldiag::detail::fmt_f32>(const k::device_tensor*, const mldiag::detail::chunk*,
                                                                        std::uint64_t, std::uint64_t, mldiag::tensor_stats*);
