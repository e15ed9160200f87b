// SPDX-License-Identifier: Apache-2.0
// The CUDA build path works end to end: a kernel of ours runs and its result comes back.
#include <doctest/doctest.h>

#include "mldiag/cuda/device.cuh"

#include <vector>

namespace {

// out[i] = i * i for i < n; 64-bit indices, grid-stride loop.
__global__ void squares(long long* d_out, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    d_out[i] = i * i;
  }
}

}  // namespace

TEST_CASE("query_devices reports the device the tests run on") {
  const auto q = mldiag::cuda::query_devices();
  CHECK(q.status == cudaSuccess);
  CHECK(q.count >= 1);
}

TEST_CASE("a kernel runs and its result matches the host") {
  constexpr long long n = 100003;  // not a multiple of the block size
  long long* d_out = nullptr;
  REQUIRE(cudaMalloc(&d_out, n * sizeof(long long)) == cudaSuccess);
  squares<<<64, 256>>>(d_out, n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<long long> out(n);
  REQUIRE(cudaMemcpy(out.data(), d_out, n * sizeof(long long), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  cudaFree(d_out);
  long long mismatches = 0;
  for (long long i = 0; i < n; ++i)
    mismatches += (out[static_cast<std::size_t>(i)] != i * i);
  CHECK(mismatches == 0);
}
