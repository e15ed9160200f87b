// SPDX-License-Identifier: Apache-2.0
// Raw CUDA buffers through mldiag's kernels: a linear model trained by hand-written CUDA
// kernels (no framework), its gradients and parameters watched by one cuda::stats_plan per
// step — one launch per dtype group, results read back a step later through pinned memory,
// no host sync in the step — and fed to a monitor. At --nan-step a NaN is planted in one
// layer's gradient; the monitor names the layer. Runs where a GPU exists; without one it
// says so and exits 77 (CTest: Skipped).
#include <mldiag/cuda/device.cuh>
#include <mldiag/cuda/device_stats.cuh>
#include <mldiag/monitor.hpp>
#include <mldiag/stats/compute.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

// y = x W^T for one layer, and the gradient of 0.5 ||y - target||^2 / batch: d_grad = (y - t)^T x.
// Each thread owns one weight element [out, in] and loops over the batch: tiny and clear.
__global__ void grad_kernel(const float* d_x, const float* d_w, const float* d_target, float* d_grad,
                            int batch, int in, int out) {
  const int o = blockIdx.x, i = threadIdx.x;
  if (o >= out || i >= in) return;
  float g = 0.0f;
  for (int b = 0; b < batch; ++b) {
    float y = 0.0f;
    for (int k = 0; k < in; ++k) y += d_x[b * in + k] * d_w[o * in + k];
    g += (y - d_target[b * out + o]) * d_x[b * in + i];
  }
  d_grad[o * in + i] = g / static_cast<float>(batch);
}

__global__ void sgd_kernel(float* d_w, const float* d_grad, float lr, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d_w[i] -= lr * d_grad[i];
}

__global__ void plant_nan_kernel(float* d_grad) { d_grad[0] = NAN; }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mldiag: cuda_raw: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int nan_step = argc > 2 && std::string(argv[1]) == "--nan-step" ? std::atoi(argv[2]) : 40;
  const auto devices = mldiag::cuda::query_devices();
  if (devices.count == 0) {
    std::printf("mldiag: cuda_raw skipped: %s\n", devices.describe().c_str());
    return 77;
  }
  std::printf("device: %s\n", devices.describe().c_str());

  // Three independent linear layers (64 -> 64), each fitting its own random target map.
  constexpr int layers = 3, in = 64, out = 64, batch = 128, steps = 80;
  const float lr = 0.05f;
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(batch * in), t(batch * out), w(out * in);
  float *d_x, *d_t;
  check(cudaMalloc(&d_x, x.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&d_t, t.size() * sizeof(float)), "cudaMalloc");
  for (auto& v : x) v = n01(rng);
  for (auto& v : t) v = n01(rng);
  check(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "copy x");
  check(cudaMemcpy(d_t, t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice), "copy t");
  std::vector<float*> d_w(layers), d_g(layers);
  std::vector<mldiag::tensor_ref> watched;
  std::vector<std::string> names;
  for (int l = 0; l < layers; ++l) {
    for (auto& v : w) v = 0.1f * n01(rng);
    check(cudaMalloc(&d_w[l], w.size() * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_g[l], w.size() * sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(d_w[l], w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice), "copy w");
    names.push_back("layers." + std::to_string(l) + ".weight");
  }
  for (int l = 0; l < layers; ++l)
    watched.emplace_back(names[l], d_g[l], std::int64_t{out * in}, mldiag::dtype::f32, mldiag::device::cuda(0));
  for (int l = 0; l < layers; ++l)
    watched.emplace_back(names[l], d_w[l], std::int64_t{out * in}, mldiag::dtype::f32, mldiag::device::cuda(0));

  // [integration]
  // The plan: sized once, workspace owned here, tables uploaded once.
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  mldiag::cuda::stats_plan plan(watched);
  void* d_ws;
  check(cudaMalloc(&d_ws, plan.workspace_bytes()), "workspace");
  plan.upload(d_ws, stream);
  mldiag::cuda::stats_readback readback(plan);
  mldiag::monitor mon;

  int planted_seen_at = -1;
  // The evidence of one step, fed to the monitor under the step it was taken at.
  auto observe = [&](const mldiag::cuda::readback_result& r) {
    mon.begin_step(r.step);
    for (int l = 0; l < layers; ++l) mon.observe(mldiag::role::gradient, names[l], r.stats[l]);
    for (int l = 0; l < layers; ++l) mon.observe(mldiag::role::parameter, names[l], r.stats[layers + l]);
    for (const auto& f : mon.end_step()) {
      if (f.severity < mldiag::severity::warning) continue;
      std::printf("step %lld: %s %s at %s\n", static_cast<long long>(r.step), std::string(mldiag::name(f.question)).c_str(),
                  f.symptom.c_str(), f.where.empty() ? "-" : f.where.front().first.c_str());
      if (planted_seen_at < 0 && f.symptom.find("non-finite") != std::string::npos) planted_seen_at = static_cast<int>(r.step);
    }
  };
  for (int step = 0; step < steps; ++step) {
    for (int l = 0; l < layers; ++l) grad_kernel<<<out, in, 0, stream>>>(d_x, d_w[l], d_t, d_g[l], batch, in, out);
    if (step == nan_step) plant_nan_kernel<<<1, 1, 0, stream>>>(d_g[1]);
    plan.compute(d_ws, stream);       // asynchronous: one launch for the f32 group + merges
    readback.enqueue(plan, d_ws, stream, step);
    for (int l = 0; l < layers; ++l) sgd_kernel<<<(out * in + 255) / 256, 256, 0, stream>>>(d_w[l], d_g[l], lr, out * in);
    check(cudaGetLastError(), "launch");
    // Nothing here waits for the GPU, so the host may run ahead: at a ring's length ahead it
    // waits for the oldest copy, so that no step's evidence is dropped.
    if (readback.pending() == readback.slots()) readback.wait_oldest();
    // Every finished copy, in step order, each once: evidence without stalling the GPU.
    while (const auto r = readback.next()) observe(r);
  }
  readback.wait();  // the copies still on their way
  while (const auto r = readback.next()) observe(r);
  // [integration]

  // The device statistics against the host engine on the same bytes (the final weights).
  plan.compute(d_ws, stream);
  readback.enqueue(plan, d_ws, stream, steps);
  readback.wait();
  const auto last = readback.next();
  check(cudaMemcpy(w.data(), d_w[0], w.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy back");
  const auto host = mldiag::compute_stats(std::span<const float>(w));
  const double device_l2 = last.stats[layers].l2_norm(), host_l2 = host.l2_norm();
  std::printf("layers.0.weight l2: device %.9g host %.9g; nan: device %llu host %llu\n", device_l2, host_l2,
              static_cast<unsigned long long>(last.stats[layers].nan), static_cast<unsigned long long>(host.nan));
  std::printf("planted NaN at step %d in layers.1.weight; monitor reported it at step %d; readback dropped %llu copies\n",
              nan_step, planted_seen_at, static_cast<unsigned long long>(readback.dropped()));
  // The accuracy contract (docs/stats.md): the L2 norm within 1e-6 relative of a float64
  // reference, so device and host within twice that.
  const bool agree = std::fabs(device_l2 - host_l2) <= 2e-6 * host_l2 && last.stats[layers].nan == host.nan;
  for (auto* p : d_w) cudaFree(p);
  for (auto* p : d_g) cudaFree(p);
  cudaFree(d_x);
  cudaFree(d_t);
  cudaFree(d_ws);
  cudaStreamDestroy(stream);
  if (!agree) std::fprintf(stderr, "mldiag: cuda_raw: device and host statistics disagree beyond the contract\n");
  return planted_seen_at == nan_step && agree && readback.dropped() == 0 ? 0 : 1;
}
