// SPDX-License-Identifier: Apache-2.0
// cuda::nccl_merge on a single-rank communicator (our GPU machine has one GPU, and NCCL ranks
// need distinct GPUs) against the host's packed merge and compute_stats: counts and extrema
// exactly, moments to 1e-12; errors come back as values; the call never waits for the GPU.
// The many-rank algebra is tested on the host (tests/distributed/packed_test.cpp). Built only
// where NCCL is found (CMake: the mldiag::nccl part; bench/gpu/run.sh: -lnccl).
#include <doctest/doctest.h>

#include "mldiag/cuda/nccl_merge.cuh"
#include "mldiag/distributed/packed.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/entropy.hpp"

#include "../support/merged_stats_check.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

struct device_buffer {
  void* ptr = nullptr;
  explicit device_buffer(std::size_t bytes) {
    REQUIRE(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) == cudaSuccess);
  }
  ~device_buffer() { cudaFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

// A communicator of one rank on device 0, destroyed with the test.
struct single_rank_comm {
  ncclComm_t comm = nullptr;
  single_rank_comm() {
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    ncclUniqueId id;
    const ncclResult_t got_id = ncclGetUniqueId(&id);
    INFO("ncclGetUniqueId: ", ncclGetErrorString(got_id));
    REQUIRE(got_id == ncclSuccess);
    const ncclResult_t init = ncclCommInitRank(&comm, 1, id, 0);
    INFO("ncclCommInitRank: ", ncclGetErrorString(init));
    REQUIRE(init == ncclSuccess);
  }
  ~single_rank_comm() {
    if (comm != nullptr) (void)ncclCommDestroy(comm);
  }
  single_rank_comm(const single_rank_comm&) = delete;
  single_rank_comm& operator=(const single_rank_comm&) = delete;
};

struct test_stream {
  cudaStream_t s = nullptr;
  test_stream() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
  ~test_stream() { cudaStreamDestroy(s); }
  test_stream(const test_stream&) = delete;
  test_stream& operator=(const test_stream&) = delete;
};

// The host's lists: tensors with the awkward cases (specials, |mean| >> std, 1e30 with 1e-30,
// 1e305, all non-finite, empty) and two entropies (logits, probabilities; one empty).
struct host_lists {
  std::vector<std::vector<double>> data;
  std::vector<mldiag::tensor_stats> stats;
  std::vector<mldiag::entropy_stats> entropy;
};

host_lists make_lists(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.5, 2.0);
  host_lists h;
  for (int kind = 0; kind < 7; ++kind) {
    std::vector<double> x(kind == 6 ? 0 : 1000 + rng() % 5000);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = normal(rng);
      switch (kind) {
        case 0:
          x[i] = v;
          break;
        case 1:
          x[i] = 1e4 + v;
          break;
        case 2:
          x[i] = i % 2 ? 1e30 * v : 1e-30 * v;
          break;
        case 3:
          x[i] = 1e305 * v;
          break;
        case 4:
          x[i] = -3.0 - 1e-3 * v;
          break;
        default:
          x[i] = i % 2 ? std::numeric_limits<double>::quiet_NaN() : -INFINITY;
          break;
      }
    }
    if (kind == 0) {
      x[1] = std::numeric_limits<double>::quiet_NaN();
      x[2] = INFINITY;
      x[3] = -INFINITY;
      x[4] = 0.0;
      x[5] = -0.0;
      x[6] = std::numeric_limits<double>::denorm_min();
    }
    h.stats.push_back(mldiag::compute_stats(x));
    h.data.push_back(std::move(x));
  }
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::vector<float> z(37 * 50);
  for (auto& v : z)
    v = logit(rng);
  z[0] = NAN;  // row 0 invalid
  h.entropy.push_back(mldiag::entropy_from_logits(z, 37));
  h.entropy.push_back(mldiag::entropy_from_probs(std::vector<float>{}, 10));
  return h;
}



// One thread spins on the GPU's nanosecond timer: a stream that is busy for `ns`.
__global__ void spin_for_ns(unsigned long long ns) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

}  // namespace

TEST_CASE("nccl_merge on one rank equals the host merge and compute_stats") {
  const host_lists h = make_lists(11);
  const std::size_t n = h.stats.size(), m = h.entropy.size();
  single_rank_comm comm;
  test_stream stream;
  device_buffer d_stats(n * sizeof(mldiag::tensor_stats)),
      d_entropy(m * sizeof(mldiag::entropy_stats));
  device_buffer d_out(n * sizeof(mldiag::tensor_stats)),
      d_entropy_out(m * sizeof(mldiag::entropy_stats));
  REQUIRE(cudaMemcpy(d_stats.ptr, h.stats.data(), n * sizeof(mldiag::tensor_stats),
                     cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_entropy.ptr, h.entropy.data(), m * sizeof(mldiag::entropy_stats),
                     cudaMemcpyHostToDevice) == cudaSuccess);

  // The documentation's example.
  const std::size_t bytes = mldiag::cuda::nccl_merge_workspace_bytes(n, m);
  device_buffer d_ws(bytes);
  const auto status = mldiag::cuda::nccl_merge(
      {.d_stats = static_cast<const mldiag::tensor_stats*>(d_stats.ptr),
       .tensors = n,
       .d_stats_out = static_cast<mldiag::tensor_stats*>(d_out.ptr),
       .d_entropy = static_cast<const mldiag::entropy_stats*>(d_entropy.ptr),
       .entropies = m,
       .d_entropy_out = static_cast<mldiag::entropy_stats*>(d_entropy_out.ptr)},
      d_ws.ptr, bytes, comm.comm, stream.s);
  INFO(status.message);
  REQUIRE(status.ok());

  // In place too: the outputs may be the inputs.
  auto* d_in_place = static_cast<mldiag::tensor_stats*>(d_stats.ptr);
  auto* d_entropy_in_place = static_cast<mldiag::entropy_stats*>(d_entropy.ptr);
  REQUIRE(mldiag::cuda::nccl_merge({.d_stats = d_in_place,
                                    .tensors = n,
                                    .d_stats_out = d_in_place,
                                    .d_entropy = d_entropy_in_place,
                                    .entropies = m,
                                    .d_entropy_out = d_entropy_in_place},
                                   d_ws.ptr, bytes, comm.comm, stream.s)
              .ok());

  std::vector<mldiag::tensor_stats> got(n), got_in_place(n);
  std::vector<mldiag::entropy_stats> got_entropy(m), got_entropy_in_place(m);
  REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
  REQUIRE(cudaMemcpy(got.data(), d_out.ptr, n * sizeof(mldiag::tensor_stats),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(got_in_place.data(), d_stats.ptr, n * sizeof(mldiag::tensor_stats),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(got_entropy.data(), d_entropy_out.ptr, m * sizeof(mldiag::entropy_stats),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(got_entropy_in_place.data(), d_entropy.ptr, m * sizeof(mldiag::entropy_stats),
                     cudaMemcpyDeviceToHost) == cudaSuccess);

  // The host's packed merge of the same single rank (MIN and SUM over one rank: identity).
  namespace md = mldiag::distributed;
  const md::packed_layout layout{n, m};
  std::vector<double> a(layout.a_size()), b(layout.b_size()), c(layout.c_size());
  std::vector<mldiag::tensor_stats> host = h.stats;
  std::vector<mldiag::entropy_stats> host_entropy = h.entropy;
  md::pack_round_a(h.stats, h.entropy, a);
  md::pack_round_b(h.stats, h.entropy, a, b);
  md::pack_round_c(h.stats, a, b, c);
  md::finish_rounds(a, b, c, host, host_entropy);

  for (std::size_t i = 0; i < n; ++i) {
    CAPTURE(i);
    mldiag_test::check_merged(got[i], host[i]);
    mldiag_test::check_merged(got[i], h.stats[i]);  // compute_stats of the whole tensor
    mldiag_test::check_merged(got_in_place[i], h.stats[i]);
  }
  for (std::size_t j = 0; j < m; ++j) {
    CAPTURE(j);
    mldiag_test::check_merged(got_entropy[j], host_entropy[j]);
    mldiag_test::check_merged(got_entropy[j], h.entropy[j]);
    mldiag_test::check_merged(got_entropy_in_place[j], h.entropy[j]);
  }
}

TEST_CASE("nccl_merge never waits for the GPU") {
  const host_lists h = make_lists(12);
  const std::size_t n = h.stats.size();
  single_rank_comm comm;
  test_stream stream;
  device_buffer d_stats(n * sizeof(mldiag::tensor_stats));
  REQUIRE(cudaMemcpy(d_stats.ptr, h.stats.data(), n * sizeof(mldiag::tensor_stats),
                     cudaMemcpyHostToDevice) == cudaSuccess);
  const std::size_t bytes = mldiag::cuda::nccl_merge_workspace_bytes(n, 0);
  device_buffer d_ws(bytes);
  auto* d = static_cast<mldiag::tensor_stats*>(d_stats.ptr);
  const mldiag::cuda::nccl_merge_lists lists{.d_stats = d, .tensors = n, .d_stats_out = d};
  REQUIRE(mldiag::cuda::nccl_merge(lists, d_ws.ptr, bytes, comm.comm, stream.s).ok());  // warm-up
  REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
  // The stream is busy for half a second; if the merge waited for it, it would be idle after.
  spin_for_ns<<<1, 1, 0, stream.s>>>(500'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(mldiag::cuda::nccl_merge(lists, d_ws.ptr, bytes, comm.comm, stream.s).ok());
  CHECK(cudaStreamQuery(stream.s) == cudaErrorNotReady);
  REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
  std::vector<mldiag::tensor_stats> got(n);
  REQUIRE(cudaMemcpy(got.data(), d, n * sizeof(mldiag::tensor_stats), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  for (std::size_t i = 0; i < n; ++i)
    mldiag_test::check_merged(got[i], h.stats[i]);  // merged twice: still itself
}

TEST_CASE("nccl_merge reports bad arguments as values") {
  single_rank_comm comm;
  device_buffer d_stats(4 * sizeof(mldiag::tensor_stats));
  auto* d = static_cast<mldiag::tensor_stats*>(d_stats.ptr);
  const mldiag::cuda::nccl_merge_lists lists{.d_stats = d, .tensors = 4, .d_stats_out = d};
  const std::size_t bytes = mldiag::cuda::nccl_merge_workspace_bytes(4, 0);
  CHECK(bytes == 3 * 256);  // 12, 24 and 4 doubles, each rounded up to 256 bytes
  device_buffer d_ws(bytes);

  const auto small = mldiag::cuda::nccl_merge(lists, d_ws.ptr, bytes - 1, comm.comm, nullptr);
  CHECK_FALSE(small.ok());
  CHECK(small.message.rfind("mldiag: cuda::nccl_merge: the workspace has", 0) == 0);
  const auto no_comm = mldiag::cuda::nccl_merge(lists, d_ws.ptr, bytes, nullptr, nullptr);
  CHECK(no_comm.message.find("null communicator") != std::string::npos);
  const auto no_out =
      mldiag::cuda::nccl_merge({.d_stats = d, .tensors = 4}, d_ws.ptr, bytes, comm.comm, nullptr);
  CHECK(no_out.message.find("d_stats_out is null") != std::string::npos);
  // Nothing to merge: nothing enqueued, and no workspace needed.
  CHECK(mldiag::cuda::nccl_merge({}, nullptr, 0, comm.comm, nullptr).ok());
}
