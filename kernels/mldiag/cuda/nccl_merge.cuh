// SPDX-License-Identifier: Apache-2.0
/// `mldiag::cuda::nccl_merge`: tensor_stats and entropy_stats of every rank merged into the
/// global ones with three NCCL all-reduces, on the caller's stream, with no host sync.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/distributed/packed.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>  // std::move

namespace mldiag::inline MLDIAG_ABI::cuda {

/// The outcome of `nccl_merge`: ok, or what failed (a CUDA launch, an NCCL call or an
/// argument) with a message starting with `mldiag:`. An error leaves the stream with
/// whatever was enqueued before it; the output lists are then not valid.
struct nccl_merge_status {
  cudaError_t cuda = cudaSuccess;
  ncclResult_t nccl = ncclSuccess;
  std::string message;  ///< empty when ok

  [[nodiscard]] bool ok() const noexcept {
    return cuda == cudaSuccess && nccl == ncclSuccess && message.empty();
  }
  explicit operator bool() const noexcept { return ok(); }
};

/// The device lists one merge reads and writes. Every rank passes the same `tensors` and
/// `entropies`, in the same order: element k of every rank's list describes the same tensor.
/// The outputs may be the inputs (in place); they are written by the last kernel only.
struct nccl_merge_lists {
  const tensor_stats* d_stats = nullptr;  ///< [tensors] this rank's statistics
  std::size_t tensors = 0;
  tensor_stats* d_stats_out = nullptr;       ///< [tensors] the global statistics
  const entropy_stats* d_entropy = nullptr;  ///< [entropies] this rank's entropies
  std::size_t entropies = 0;
  entropy_stats* d_entropy_out = nullptr;  ///< [entropies] the global entropies
};

namespace detail {

// One thread per list element; 256 as the other small kernels here (merge_tensors_kernel).
// The four kernels touch 10N + 8M doubles: microseconds next to the collectives.
inline constexpr unsigned nccl_merge_threads = 256;
inline constexpr std::size_t nccl_merge_max_blocks = 65535;  // grid-stride beyond

inline std::size_t nccl_merge_aligned(std::size_t bytes) noexcept {
  return (bytes + 255) / 256 * 256;
}

// [tensors][3] then [entropies][4] -> round A
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link.
template <class Unused = void>
__global__ void __launch_bounds__(nccl_merge_threads)
    nccl_pack_a_kernel(const tensor_stats* d_stats, const entropy_stats* d_entropy,
                       distributed::packed_layout layout, double* d_a) {
  const std::size_t total = layout.tensors + layout.entropies;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    if (i < layout.tensors) {
      distributed::pack_a(d_stats[i], d_a + layout.a_per_tensor * i);
    } else {
      const std::size_t j = i - layout.tensors;
      distributed::pack_a(d_entropy[j], d_a + layout.a_entropy_offset() + layout.a_per_entropy * j);
    }
  }
}

// reduced A + local -> round B
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link.
template <class Unused = void>
__global__ void __launch_bounds__(nccl_merge_threads)
    nccl_pack_b_kernel(const tensor_stats* d_stats, const entropy_stats* d_entropy,
                       distributed::packed_layout layout, const double* d_a, double* d_b) {
  const std::size_t total = layout.tensors + layout.entropies;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    if (i < layout.tensors) {
      distributed::pack_b(d_stats[i], d_a + layout.a_per_tensor * i, d_b + layout.b_per_tensor * i);
    } else {
      const std::size_t j = i - layout.tensors;
      distributed::pack_b(d_entropy[j], d_b + layout.b_entropy_offset() + layout.b_per_entropy * j);
    }
  }
}

// reduced A, B + local -> round C (tensors only)
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link.
template <class Unused = void>
__global__ void __launch_bounds__(nccl_merge_threads)
    nccl_pack_c_kernel(const tensor_stats* d_stats, distributed::packed_layout layout,
                       const double* d_a, const double* d_b, double* d_c) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < layout.tensors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    distributed::pack_c(d_stats[i], d_a + layout.a_per_tensor * i, d_b + layout.b_per_tensor * i,
                        d_c + layout.c_per_tensor * i);
  }
}

// reduced A, B, C -> the global lists (reads only the workspace, so in place is safe)
// A template (never instantiated with anything else): a kernel in a header must not be one
// external symbol per including .cu, or two .cu files of one program would not link.
template <class Unused = void>
__global__ void __launch_bounds__(nccl_merge_threads)
    nccl_finish_kernel(distributed::packed_layout layout, const double* d_a, const double* d_b,
                       const double* d_c, tensor_stats* d_stats_out, entropy_stats* d_entropy_out) {
  const std::size_t total = layout.tensors + layout.entropies;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    if (i < layout.tensors) {
      d_stats_out[i] =
          distributed::finish(d_a + layout.a_per_tensor * i, d_b + layout.b_per_tensor * i,
                              d_c + layout.c_per_tensor * i);
    } else {
      const std::size_t j = i - layout.tensors;
      d_entropy_out[j] =
          distributed::finish(d_a + layout.a_entropy_offset() + layout.a_per_entropy * j,
                              d_b + layout.b_entropy_offset() + layout.b_per_entropy * j);
    }
  }
}

// Byte offsets of the three buffers in the workspace, each 256-byte aligned.
struct nccl_merge_offsets {
  std::size_t a = 0, b = 0, c = 0, total = 0;
  explicit nccl_merge_offsets(const distributed::packed_layout& l) noexcept
      : b(nccl_merge_aligned(sizeof(double) * l.a_size())),
        c(b + nccl_merge_aligned(sizeof(double) * l.b_size())),
        total(c + nccl_merge_aligned(sizeof(double) * l.c_size())) {}
};

inline nccl_merge_status nccl_merge_error(std::string what) {
  return {cudaSuccess, ncclSuccess, "mldiag: cuda::nccl_merge: " + std::move(what)};
}
inline nccl_merge_status nccl_merge_cuda_error(cudaError_t e, const char* step) {
  return {e, ncclSuccess,
          std::string("mldiag: cuda::nccl_merge: ") + step + ": " + cudaGetErrorName(e) + ": " +
              cudaGetErrorString(e)};
}
inline nccl_merge_status nccl_merge_nccl_error(ncclResult_t r, ncclComm_t comm, const char* step) {
  std::string text =
      std::string("mldiag: cuda::nccl_merge: ") + step + ": " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    text += std::string(" (") + last + ")";
  return {cudaSuccess, r, std::move(text)};
}

}  // namespace detail

/// Bytes of device workspace `nccl_merge` needs for `tensors` tensor_stats and `entropies`
/// entropy_stats: the three packed buffers, each rounded up to 256 bytes.
[[nodiscard]] inline std::size_t nccl_merge_workspace_bytes(std::size_t tensors,
                                                            std::size_t entropies) noexcept {
  return detail::nccl_merge_offsets(distributed::packed_layout{tensors, entropies}).total;
}

/// Enqueues on `stream` the merge of every rank's lists into the global statistics, as if
/// one process had computed them over the concatenated data: counts and extrema exactly,
/// moments within the accuracy contract (docs/stats.md: 1e-6 relative; see
/// `distributed::packed_layout` for the algebra and its limits).
///
/// Four small kernels and three all-reduces over `comm`, all on `stream`: nothing allocates,
/// nothing waits for the GPU, so the call fits a training step (and a CUDA graph capture).
/// Collective: every rank of `comm` must call it with the same list sizes. The workspace
/// (`nccl_merge_workspace_bytes(tensors, entropies)` bytes of device memory) is the caller's
/// and must not be reused until the merge is done on `stream`.
///
/// Bytes each rank hands to each all-reduce, per call: 8 * (3N + 4M) (MIN), 8 * (6N + 4M)
/// (SUM), 8 * N (SUM); 8 * (10N + 8M) in all (N tensors, M entropies): 40000 for 500 tensors.
/// A ring all-reduce sends about 2 (P - 1) / P times that over each rank's link.
///
/// A failed status on one rank only (an argument error found there) leaves the other ranks
/// waiting inside the collective: call ncclCommAbort on every rank's communicator then.
///
/// **Example** (tests/cuda/nccl_merge_test.cu; `device_buffer` owns a cudaMalloc)
/// ```cpp
/// const std::size_t bytes = mldiag::cuda::nccl_merge_workspace_bytes(n, m);
/// device_buffer d_ws(bytes);
/// const auto status = mldiag::cuda::nccl_merge(
///     {.d_stats = static_cast<const mldiag::tensor_stats*>(d_stats.ptr),
///      .tensors = n,
///      .d_stats_out = static_cast<mldiag::tensor_stats*>(d_out.ptr),
///      .d_entropy = static_cast<const mldiag::entropy_stats*>(d_entropy.ptr),
///      .entropies = m,
///      .d_entropy_out = static_cast<mldiag::entropy_stats*>(d_entropy_out.ptr)},
///     d_ws.ptr, bytes, comm.comm, stream.s);
/// if (!status.ok()) throw std::runtime_error(status.message);
/// ```
//
// Why three collectives and not fewer: NCCL reduces elementwise with one op per call, and
// Chan's merge is not such an op. Maxima ride in the MIN (as -x), and counts and entropy sums
// could ride in any SUM; but round B's first moments must be scaled to the global exponent,
// which needs round A's max_abs, and round C's spread around the global mean needs round B
// (packed.hpp says why the two-round sum x^2 form is not good enough). Grouping the calls
// (ncclGroupStart/End) would not help: each collective depends on a kernel that depends on
// the previous collective.
[[nodiscard]] inline nccl_merge_status nccl_merge(const nccl_merge_lists& lists, void* d_workspace,
                                                  std::size_t workspace_bytes, ncclComm_t comm,
                                                  cudaStream_t stream) {
  const distributed::packed_layout layout{lists.tensors, lists.entropies};
  const std::size_t total = layout.tensors + layout.entropies;
  if (total == 0) return {};
  if (layout.tensors > 0 && (lists.d_stats == nullptr || lists.d_stats_out == nullptr)) {
    return detail::nccl_merge_error(
        "tensors is " + std::to_string(layout.tensors) +
        " but d_stats or d_stats_out is null; pass device arrays of that many tensor_stats");
  }
  if (layout.entropies > 0 && (lists.d_entropy == nullptr || lists.d_entropy_out == nullptr)) {
    return detail::nccl_merge_error(
        "entropies is " + std::to_string(layout.entropies) +
        " but d_entropy or d_entropy_out is null; pass device arrays of that many entropy_stats");
  }
  const detail::nccl_merge_offsets at(layout);
  if (d_workspace == nullptr || workspace_bytes < at.total) {
    return detail::nccl_merge_error(
        "the workspace has " + std::to_string(d_workspace == nullptr ? 0 : workspace_bytes) +
        " bytes and needs " + std::to_string(at.total) +
        "; allocate nccl_merge_workspace_bytes(tensors, entropies) of device memory");
  }
  if (reinterpret_cast<std::uintptr_t>(d_workspace) % alignof(double) != 0) {
    return detail::nccl_merge_error(
        "the workspace is not 8-byte aligned; pass memory from cudaMalloc");
  }
  if (comm == nullptr)
    return detail::nccl_merge_error("null communicator; create one with ncclCommInitRank");

  auto* base = static_cast<unsigned char*>(d_workspace);
  auto* d_a = reinterpret_cast<double*>(base + at.a);
  auto* d_b = reinterpret_cast<double*>(base + at.b);
  auto* d_c = reinterpret_cast<double*>(base + at.c);
  const auto blocks_for = [](std::size_t n) {
    const std::size_t b = (n + detail::nccl_merge_threads - 1) / detail::nccl_merge_threads;
    return static_cast<unsigned>(
        b < 1 ? 1 : (b < detail::nccl_merge_max_blocks ? b : detail::nccl_merge_max_blocks));
  };
  const unsigned blocks = blocks_for(total);

  detail::nccl_pack_a_kernel<void><<<blocks, detail::nccl_merge_threads, 0, stream>>>(
      lists.d_stats, lists.d_entropy, layout, d_a);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return detail::nccl_merge_cuda_error(e, "round A pack kernel launch");
  if (const ncclResult_t r =
          ncclAllReduce(d_a, d_a, layout.a_size(), ncclFloat64, ncclMin, comm, stream);
      r != ncclSuccess) {
    return detail::nccl_merge_nccl_error(r, comm, "round A ncclAllReduce (MIN)");
  }
  detail::nccl_pack_b_kernel<void><<<blocks, detail::nccl_merge_threads, 0, stream>>>(
      lists.d_stats, lists.d_entropy, layout, d_a, d_b);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return detail::nccl_merge_cuda_error(e, "round B pack kernel launch");
  if (const ncclResult_t r =
          ncclAllReduce(d_b, d_b, layout.b_size(), ncclFloat64, ncclSum, comm, stream);
      r != ncclSuccess) {
    return detail::nccl_merge_nccl_error(r, comm, "round B ncclAllReduce (SUM)");
  }
  // Every rank skips round C alike when there are no tensors (the sizes are the same on all).
  if (layout.tensors > 0) {
    detail::
        nccl_pack_c_kernel<void><<<blocks_for(layout.tensors), detail::nccl_merge_threads, 0, stream>>>(
            lists.d_stats, layout, d_a, d_b, d_c);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return detail::nccl_merge_cuda_error(e, "round C pack kernel launch");
    if (const ncclResult_t r =
            ncclAllReduce(d_c, d_c, layout.c_size(), ncclFloat64, ncclSum, comm, stream);
        r != ncclSuccess) {
      return detail::nccl_merge_nccl_error(r, comm, "round C ncclAllReduce (SUM)");
    }
  }
  detail::nccl_finish_kernel<void><<<blocks, detail::nccl_merge_threads, 0, stream>>>(
      layout, d_a, d_b, d_c, lists.d_stats_out, lists.d_entropy_out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return detail::nccl_merge_cuda_error(e, "finish kernel launch");
  return {};
}

}  // namespace mldiag::cuda
