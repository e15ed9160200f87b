// SPDX-License-Identifier: Apache-2.0
// The CUDA build path works end to end: a kernel of ours runs and its result comes back; and
// the event timer never makes the host wait for the GPU in the step path.
#include <doctest/doctest.h>

#include "mldiag/cuda/device.cuh"
#include "mldiag/cuda/event_timer.cuh"
// A second .cu of this program that includes the NCCL merge (nccl_merge_test.cu is the
// first): its kernels must not become duplicate symbols at link time.
#if __has_include(<nccl.h>)
#include "mldiag/cuda/nccl_merge.cuh"
#endif

#include <chrono>
#include <cmath>
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

// ---- cuda::event_timer: GPU phase and layer times, read back a step later, never waiting ----
// The claim under test: no call of the step path (begin_step, mark, begin, end, end_step,
// try_readback) waits for the GPU. A kernel that spins for half a second is queued between the
// marks; if any call waited for it, the stream would be idle by the time the calls return.
// `cudaStreamQuery(stream) == cudaErrorNotReady` after the calls proves they did not.

namespace {

using mldiag::cuda::event_timer;
using mldiag::cuda::readback_status;
using mldiag::efficiency::pass;
using mldiag::efficiency::phase;

// One thread spins on the GPU's global nanosecond timer for `ns`.
__global__ void spin_for_ns(unsigned long long ns) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

void spin(cudaStream_t s, double seconds) {
  spin_for_ns<<<1, 1, 0, s>>>(static_cast<unsigned long long>(seconds * 1e9));
  REQUIRE(cudaGetLastError() == cudaSuccess);
}

struct test_stream {
  cudaStream_t s = nullptr;
  test_stream() {
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    spin(s, 0.0);  // the first launch loads the module: keep that out of the timed calls
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);  // test set-up, not the step path
  }
  ~test_stream() { cudaStreamDestroy(s); }
  test_stream(const test_stream&) = delete;
  test_stream& operator=(const test_stream&) = delete;
};

const mldiag::efficiency::layer_result* find_layer(const event_timer& t, std::string_view name) {
  for (const auto& l : t.layers())
    if (l.name == name) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("event_timer: marks and readback return while the GPU is still busy") {
  test_stream st;
  event_timer gpu;
  const auto host_start = std::chrono::steady_clock::now();
  gpu.begin_step(st.s);
  gpu.mark(phase::forward, st.s);
  gpu.begin("blocks.0", pass::forward, st.s);
  spin(st.s, 0.5);
  gpu.end(st.s);
  gpu.mark(phase::backward, st.s);
  spin(st.s, 0.05);
  gpu.end_step(st.s);
  CHECK(cudaStreamQuery(st.s) == cudaErrorNotReady);  // no call above waited for the kernel
  CHECK(gpu.try_readback() == readback_status::not_ready);
  CHECK(cudaStreamQuery(st.s) == cudaErrorNotReady);  // nor did the readback

  // The next step is recorded while the first is still running (the ring's second slot).
  gpu.begin_step(st.s);
  gpu.mark(phase::optimizer, st.s);
  spin(st.s, 0.01);
  gpu.end_step(st.s);
  CHECK(gpu.try_readback() == readback_status::not_ready);
  CHECK(cudaStreamQuery(st.s) == cudaErrorNotReady);
  const double host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  MESSAGE("host time of two steps of marks and readbacks: ", host_seconds * 1e6,
          " us (GPU work: 560 ms)");

  gpu.finish();  // the one waiting call, for the end of a run
  REQUIRE(gpu.try_readback() == readback_status::ready);
  CHECK(gpu.step() == 0);
  const auto& p = gpu.phases();
  CHECK(p[phase::forward] >= 0.5 * 0.99);  // event timing resolution ~0.5 us; 1% slack
  CHECK(p[phase::forward] < 5.0);
  CHECK(p[phase::backward] >= 0.05 * 0.99);
  CHECK_FALSE(p.to_step_timings().data_wait.has_value());
  CHECK(p.total ==
        doctest::Approx(p[phase::forward] + p[phase::backward] + p[phase::other]).epsilon(1e-4));
  const auto* b0 = find_layer(gpu, "blocks.0");
  REQUIRE(b0 != nullptr);
  CHECK(b0->self.forward >= 0.5 * 0.99);
  CHECK(b0->total.forward == b0->self.forward);

  REQUIRE(gpu.try_readback() == readback_status::ready);
  CHECK(gpu.step() == 1);
  CHECK(gpu.phases()[phase::optimizer] >= 0.01 * 0.99);
  CHECK(gpu.layers().empty());
  CHECK(gpu.try_readback() == readback_status::none_pending);
  CHECK(gpu.dropped_steps() == 0);
}

TEST_CASE("event_timer: nested layers give self and total time on the GPU") {
  test_stream st;
  event_timer gpu;
  gpu.begin_step(st.s);
  gpu.begin("blocks.0", pass::forward, st.s);
  spin(st.s, 0.02);
  gpu.begin("blocks.0.attn", pass::forward, st.s);
  spin(st.s, 0.03);
  gpu.end(st.s);
  gpu.end(st.s);
  gpu.begin("blocks.0.attn", pass::backward, st.s);
  spin(st.s, 0.01);
  gpu.end(st.s);
  gpu.end_step(st.s);
  gpu.finish();
  REQUIRE(gpu.try_readback() == readback_status::ready);
  const auto* block = find_layer(gpu, "blocks.0");
  const auto* attn = find_layer(gpu, "blocks.0.attn");
  REQUIRE(block != nullptr);
  REQUIRE(attn != nullptr);
  CHECK(block->total.forward >= 0.05 * 0.99);
  CHECK(block->self.forward >= 0.02 * 0.99);
  CHECK(block->self.forward < 0.03);
  CHECK(attn->self.forward >= 0.03 * 0.99);
  CHECK(attn->self.backward >= 0.01 * 0.99);
  CHECK(attn->calls == 2);
  CHECK(gpu.layers()[0].name == "blocks.0");  // order of first begin
  const auto s = mldiag::efficiency::rollup_by_substructure(gpu.layers());
  CHECK(s[mldiag::efficiency::substructure::attention].sum() == attn->self.sum());
  const auto d = mldiag::efficiency::dominant_layer(gpu.layers(), gpu.phases().total);
  REQUIRE(d.has_value());
  CHECK(d->name == "blocks.0.attn");
}

TEST_CASE("event_timer: an unread slot is dropped, never waited for, and misuse is an error") {
  test_stream st;
  event_timer gpu;  // two slots
  for (int i = 0; i < 3; ++i) {
    gpu.begin_step(st.s);
    spin(st.s, i == 0 ? 0.2 : 0.001);
    gpu.end_step(st.s);
  }
  CHECK(cudaStreamQuery(st.s) == cudaErrorNotReady);  // reusing step 0's slot did not wait for it
  CHECK(gpu.dropped_steps() == 1);
  gpu.finish();
  REQUIRE(gpu.try_readback() == readback_status::ready);
  CHECK(gpu.step() == 1);
  REQUIRE(gpu.try_readback() == readback_status::ready);
  CHECK(gpu.step() == 2);

  CHECK_THROWS_WITH_AS(gpu.mark(phase::forward, st.s), doctest::Contains("no step is open"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(event_timer({.max_events_per_step = 1}),
                       doctest::Contains("max_events_per_step must be >= 2"), mldiag::error);
  event_timer small({.max_events_per_step = 4});
  small.begin_step(st.s);
  small.mark(phase::forward, st.s);
  small.mark(phase::backward, st.s);
  CHECK_THROWS_WITH_AS(small.mark(phase::optimizer, st.s),
                       doctest::Contains("more than 4 events in one step"), mldiag::error);
  CHECK(!small.step_open());  // discarded: a new step starts clean
  small.begin_step(st.s);
  small.begin("x", pass::forward, st.s);
  CHECK_THROWS_WITH_AS(small.end_step(st.s),
                       doctest::Contains("1 layer(s) still open (innermost 'x')"), mldiag::error);
  small.end(st.s);
  small.end_step(st.s);
  small.finish();
  CHECK(small.try_readback() == readback_status::ready);
}

// ---- cuda::inference_buffers: the device sentinel and fingerprints (issue 39) ----
#include "mldiag/cuda/inference.cuh"
#include "mldiag/inference/fingerprint.hpp"

#include <cuda_bf16.h>

namespace {
std::optional<mldiag::cuda::inference_buffers::event> wait_for(mldiag::cuda::inference_buffers& b, cudaStream_t s) {
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);  // the test waits; the engine polls a step later
  return b.poll();
}
}  // namespace

TEST_CASE("device sentinel: the first non-finite (step, tap, row) by atomic minimum — a clean pass reports none") {
  cudaStream_t s{};
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  mldiag::cuda::inference_buffers buf(64);
  constexpr int rows = 40, cols = 100;
  std::vector<float> h(rows * cols, 0.5f);
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, h.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  buf.reset(s);
  buf.sentinel(d, rows * cols, cols, 3, 0, s);
  buf.readback(s);
  auto e = wait_for(buf, s);
  REQUIRE(e);
  CHECK(!e->any());
  h[17 * cols + 5] = NAN, h[30 * cols] = INFINITY, h[33 * cols + 1] = NAN;
  REQUIRE(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  buf.sentinel(d, rows * cols, cols, 3, 2, s);  // tap 2 of step 3
  buf.sentinel(d, rows * cols, cols, 4, 0, s);  // a later step: not first
  buf.readback(s);
  e = wait_for(buf, s);
  REQUIRE(e);
  CHECK(e->step == 3);
  CHECK(e->order == 2);
  CHECK(e->row == 17);
  CHECK(e->nan == 4);  // two NaN, seen in two taps
  CHECK(e->inf == 2);
  cudaFree(d);
  cudaStreamDestroy(s);
}

TEST_CASE("device sentinel inside a captured CUDA graph: reset, scan and readback replay with no host call between") {
  cudaStream_t s{};
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  mldiag::cuda::inference_buffers buf(1);
  constexpr int n = 4096;
  std::vector<__nv_bfloat16> h(n, __float2bfloat16(1.0f));
  h[2049] = __float2bfloat16(NAN);
  __nv_bfloat16* d = nullptr;
  REQUIRE(cudaMalloc(&d, n * sizeof(__nv_bfloat16)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, h.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice) == cudaSuccess);
  cudaGraph_t graph{};
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  buf.reset(s);
  buf.sentinel(d, n, 64, 9, 1, s);
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  cudaGraphExec_t exec{};
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  buf.readback(s);
  const auto e = wait_for(buf, s);
  REQUIRE(e);
  CHECK(e->step == 9);
  CHECK(e->order == 1);
  CHECK(e->row == 2049 / 64);
  CHECK(e->nan == 1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d);
  cudaStreamDestroy(s);
}

TEST_CASE("device fingerprints match the host's make_fingerprint") {
  constexpr int rows = 7, cols = 1000;
  std::vector<float> h(rows * cols);
  for (int i = 0; i < rows * cols; ++i) h[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 13));
  h[3 * cols + 10] = NAN;
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, h.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  mldiag::cuda::inference_buffers buf(16);
  buf.fingerprint(d, rows, cols, 5, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const mldiag::inference::tap t{.name = "blocks.0.mlp", .position = 100, .rows = rows, .cols = cols, .values = h};
  const auto dev = buf.fingerprints(t, 5, 0);
  REQUIRE(dev.size() == rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto host = mldiag::inference::make_fingerprint(t, r, 0);
    CAPTURE(r);
    CHECK(dev[r].position == host.position);
    CHECK(dev[r].nan == host.nan);
    CHECK(dev[r].amax == host.amax);
    CHECK(dev[r].l2 == doctest::Approx(host.l2).epsilon(1e-12));
    CHECK(dev[r].mean == doctest::Approx(host.mean).epsilon(1e-9));
    for (std::size_t b = 0; b < mldiag::inference::sketch_buckets; ++b) CHECK(dev[r].sketch[b] == doctest::Approx(host.sketch[b]).epsilon(1e-5));
  }
  CHECK_THROWS_AS(buf.fingerprint(d, rows, cols, 12, nullptr), mldiag::error);  // slots 12..19 of 16
  cudaFree(d);
}
