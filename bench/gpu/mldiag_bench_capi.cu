// SPDX-License-Identifier: Apache-2.0
// A small C interface to the CUDA statistics, so bench.py can drive mldiag and PyTorch in one
// process on the same device buffers (ctypes; LibTorch headers do not compile in C++20 .cu).
// Every function returns 0 on success; mldiag_last_error() says what failed otherwise.
#include "mldiag/cuda/device_entropy.cuh"
#include "mldiag/cuda/device_stats.cuh"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {
std::string last_error;

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}
}  // namespace

extern "C" {

const char* mldiag_last_error() { return last_error.c_str(); }

// A plan over n device tensors; writes the workspace size.
void* mldiag_plan_create(const void* const* ptrs, const std::int64_t* counts, const int* dtypes, int n,
                         int device, std::size_t* workspace_bytes) {
  mldiag::cuda::stats_plan* plan = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {  // snprintf: GCC 12 -O3 warns falsely on "t" + to_string
    char name[32];
    std::snprintf(name, sizeof name, "t%d", i);
    names.emplace_back(name);
  }
  const int rc = guarded([&] {
    std::vector<mldiag::tensor_ref> refs;
    for (int i = 0; i < n; ++i) {
      refs.emplace_back(names[static_cast<std::size_t>(i)], ptrs[i], counts[i], static_cast<mldiag::dtype>(dtypes[i]),
                        mldiag::device::cuda(device));
    }
    plan = new mldiag::cuda::stats_plan(refs);
    *workspace_bytes = plan->workspace_bytes();
  });
  return rc == 0 ? plan : nullptr;
}

void mldiag_plan_destroy(void* plan) { delete static_cast<mldiag::cuda::stats_plan*>(plan); }

int mldiag_plan_launches(void* plan) { return static_cast<mldiag::cuda::stats_plan*>(plan)->launches(); }

int mldiag_plan_upload(void* plan, void* d_ws, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::stats_plan*>(plan)->upload(d_ws, static_cast<cudaStream_t>(stream)); });
}

int mldiag_plan_compute(void* plan, void* d_ws, void* stream) {
  return guarded([&] { static_cast<mldiag::cuda::stats_plan*>(plan)->compute(d_ws, static_cast<cudaStream_t>(stream)); });
}

// Copies (n + 1) results to `out` as doubles per tensor: count, nan, pos_inf, neg_inf, zeros,
// min, max, max_abs, mean, variance, l2_norm (11 values each); then the flag. Synchronous.
int mldiag_plan_results(void* plan, void* d_ws, double* out, int* any_non_finite) {
  return guarded([&] {
    auto* p = static_cast<mldiag::cuda::stats_plan*>(plan);
    std::vector<mldiag::tensor_stats> r(p->size() + 1);
    mldiag::cuda::check(cudaMemcpy(r.data(), p->d_results(d_ws), r.size() * sizeof(mldiag::tensor_stats), cudaMemcpyDeviceToHost),
                        "results");
    mldiag::cuda::check(cudaMemcpy(any_non_finite, p->d_any_non_finite(d_ws), sizeof(int), cudaMemcpyDeviceToHost), "flag");
    for (std::size_t i = 0; i < r.size(); ++i) {
      const auto& s = r[i];
      const double v[11] = {double(s.count), double(s.nan), double(s.pos_inf), double(s.neg_inf), double(s.zeros),
                            s.min, s.max, s.max_abs, s.mean(), s.variance(), s.l2_norm()};
      for (int k = 0; k < 11; ++k) out[i * 11 + static_cast<std::size_t>(k)] = v[k];
    }
  });
}

// Captures one compute() into a CUDA graph in global capture mode: any host synchronization
// or allocation inside it would make the capture fail. Writes the number of kernel nodes.
int mldiag_plan_capture_check(void* plan, void* d_ws, void* stream_in, int* kernel_nodes) {
  return guarded([&] {
    auto stream = static_cast<cudaStream_t>(stream_in);
    mldiag::cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    static_cast<mldiag::cuda::stats_plan*>(plan)->compute(d_ws, stream);
    cudaGraph_t graph = nullptr;
    mldiag::cuda::check(cudaStreamEndCapture(stream, &graph), "end capture (a sync or allocation inside?)");
    std::size_t count = 0;
    mldiag::cuda::check(cudaGraphGetNodes(graph, nullptr, &count), "graph nodes");
    std::vector<cudaGraphNode_t> nodes(count);
    mldiag::cuda::check(cudaGraphGetNodes(graph, nodes.data(), &count), "graph nodes");
    int kernels = 0;
    for (auto node : nodes) {
      cudaGraphNodeType type;
      mldiag::cuda::check(cudaGraphNodeGetType(node, &type), "node type");
      kernels += type == cudaGraphNodeTypeKernel;
    }
    *kernel_nodes = kernels;
    cudaGraphDestroy(graph);
  });
}

std::size_t mldiag_entropy_workspace_bytes(std::uint64_t rows) { return mldiag::cuda::entropy_workspace_bytes(rows); }

// Row entropy of logits into d_out (an entropy_stats in device memory); out_host gets rows,
// invalid rows, mean, min, max when non-null (synchronous then).
int mldiag_entropy_logits(const void* d_x, std::int64_t count, std::int64_t row_len, int dtype, void* d_ws,
                          std::size_t ws_bytes, void* d_out, void* stream, double* out_host) {
  return guarded([&] {
    const mldiag::tensor_ref t("logits", d_x, count, static_cast<mldiag::dtype>(dtype), mldiag::device::cuda(0));
    mldiag::cuda::entropy_rows(t, row_len, true, d_ws, ws_bytes, static_cast<mldiag::entropy_stats*>(d_out),
                               static_cast<cudaStream_t>(stream));
    if (out_host != nullptr) {
      mldiag::entropy_stats e;
      mldiag::cuda::check(cudaMemcpy(&e, d_out, sizeof e, cudaMemcpyDeviceToHost), "entropy result");
      out_host[0] = double(e.rows);
      out_host[1] = double(e.invalid_rows);
      out_host[2] = e.mean();
      out_host[3] = e.min;
      out_host[4] = e.max;
    }
  });
}

std::size_t mldiag_entropy_stats_bytes() { return sizeof(mldiag::entropy_stats); }

}  // extern "C"
