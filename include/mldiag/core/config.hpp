// SPDX-License-Identifier: Apache-2.0
/// Configuration macros shared by host and CUDA code.
#pragma once

// Functions that the CUDA kernels call on the device as well (tensor_stats, its merge).
// Plain host compilers see nothing; nvcc compiles them for both sides.
#if defined(__CUDACC__)
#define MLDIAG_HOST_DEVICE __host__ __device__
#else
#define MLDIAG_HOST_DEVICE
#endif
