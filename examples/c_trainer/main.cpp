// SPDX-License-Identifier: Apache-2.0
// A trainer written the C way, as llm.c is: every parameter in one float buffer, every
// gradient in another, tensors as offsets into them, forward and backward as plain loops. A
// two-layer MLP on the UCI digits (scripts/fetch-digits.sh). The monitor reads the buffers in
// place through mldiag::tensor_ref, no copy; the [c_trainer] block is what docs/integrations.md
// shows. `--fault lr_x100` multiplies the learning rate by 100 at step 300; `--fault
// no_zero_grad` skips the memset that clears the gradients (they accumulate).
#include <mldiag/monitor.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int in_dim = 64, hidden = 32, classes = 10;

// The model, C style: one buffer per kind, tensors at offsets.
enum tensor_index { w1, b1, w2, b2, n_tensors };
const char* const tensor_names[n_tensors] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
const std::size_t tensor_sizes[n_tensors] = {in_dim * hidden, hidden, hidden * classes, classes};

struct model {
  std::size_t offset[n_tensors];
  std::vector<float> params, grads, m;  // m: momentum
  std::vector<float> h, logits;         // activations of one example
};

void model_init(model* md, unsigned seed) {
  std::size_t total = 0;
  for (int i = 0; i < n_tensors; ++i) md->offset[i] = total, total += tensor_sizes[i];
  md->params.assign(total, 0.0f);
  md->grads.assign(total, 0.0f);
  md->m.assign(total, 0.0f);
  md->h.assign(hidden, 0.0f);
  md->logits.assign(classes, 0.0f);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n1(0.0f, std::sqrt(2.0f / in_dim)), n2(0.0f, std::sqrt(1.0f / hidden));
  for (std::size_t i = 0; i < tensor_sizes[w1]; ++i) md->params[md->offset[w1] + i] = n1(gen);
  for (std::size_t i = 0; i < tensor_sizes[w2]; ++i) md->params[md->offset[w2] + i] = n2(gen);
}

// Forward and backward of one example; adds its gradient (scaled by `scale`) and returns its loss.
float model_example(model* md, const float* x, int label, float scale) {
  const float* W1 = md->params.data() + md->offset[w1];
  const float* B1 = md->params.data() + md->offset[b1];
  const float* W2 = md->params.data() + md->offset[w2];
  const float* B2 = md->params.data() + md->offset[b2];
  for (int j = 0; j < hidden; ++j) {
    float a = B1[j];
    for (int i = 0; i < in_dim; ++i) a += W1[j * in_dim + i] * x[i];
    md->h[static_cast<std::size_t>(j)] = a > 0.0f ? a : 0.0f;
  }
  float top = -INFINITY;
  for (int k = 0; k < classes; ++k) {
    float a = B2[k];
    for (int j = 0; j < hidden; ++j) a += W2[k * hidden + j] * md->h[static_cast<std::size_t>(j)];
    md->logits[static_cast<std::size_t>(k)] = a;
    top = std::fmax(top, a);
  }
  float sum = 0.0f;
  for (auto& l : md->logits) sum += (l = std::exp(l - top));
  float* gW1 = md->grads.data() + md->offset[w1];
  float* gB1 = md->grads.data() + md->offset[b1];
  float* gW2 = md->grads.data() + md->offset[w2];
  float* gB2 = md->grads.data() + md->offset[b2];
  float dh[hidden] = {};
  for (int k = 0; k < classes; ++k) {
    const float p = md->logits[static_cast<std::size_t>(k)] / sum;
    const float d = (p - (k == label ? 1.0f : 0.0f)) * scale;
    gB2[k] += d;
    for (int j = 0; j < hidden; ++j) {
      gW2[k * hidden + j] += d * md->h[static_cast<std::size_t>(j)];
      dh[j] += d * W2[k * hidden + j];
    }
  }
  for (int j = 0; j < hidden; ++j) {
    if (md->h[static_cast<std::size_t>(j)] <= 0.0f) continue;
    gB1[j] += dh[j];
    for (int i = 0; i < in_dim; ++i) gW1[j * in_dim + i] += dh[j] * x[i];
  }
  return -std::log(md->logits[static_cast<std::size_t>(label)] / sum);
}

void model_update(model* md, float lr) {
  for (std::size_t i = 0; i < md->params.size(); ++i) {
    md->m[i] = 0.9f * md->m[i] + md->grads[i];
    md->params[i] -= lr * md->m[i];
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string fault = "none";
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fault") == 0) fault = argv[i + 1];
    else if (std::strcmp(argv[i], "--seed") == 0) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  std::ifstream in(MLDIAG_DIGITS_CSV);
  if (!in) {
    std::fprintf(stderr, "mldiag: c_trainer: cannot read %s; run scripts/fetch-digits.sh first\n", MLDIAG_DIGITS_CSV);
    return 2;
  }
  std::vector<float> xs;
  std::vector<int> ys;
  for (std::string line; std::getline(in, line);) {
    std::stringstream row(line);
    std::string cell;
    for (int i = 0; i < in_dim && std::getline(row, cell, ','); ++i) xs.push_back(std::stof(cell) / 16.0f);
    if (std::getline(row, cell, ',')) ys.push_back(std::stoi(cell));
  }
  const int n = static_cast<int>(ys.size()), batch = 32, steps = 600;
  model md;
  model_init(&md, seed);
  std::mt19937 gen(seed + 1000);
  std::uniform_int_distribution<int> pick(0, n - 1);
  float lr = 0.01f;
  int warned = 0;

  // [c_trainer]
  mldiag::monitor mon({.task = {.classes = 10}});
  for (int step = 0; step < steps; ++step) {
    if (fault != "no_zero_grad" || step == 0) std::memset(md.grads.data(), 0, md.grads.size() * sizeof(float));
    if (fault == "lr_x100" && step == 300) lr *= 100.0f;
    float loss = 0.0f;
    for (int b = 0; b < batch; ++b) {
      const int e = pick(gen);
      loss += model_example(&md, &xs[static_cast<std::size_t>(e) * in_dim], ys[static_cast<std::size_t>(e)], 1.0f / batch) / batch;
    }
    model_update(&md, lr);
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, lr);
    for (int t = 0; t < n_tensors; ++t) {  // the buffers in place: a tensor is an offset and a size
      mon.observe(mldiag::role::gradient, tensor_names[t],
                  mldiag::tensor_ref(tensor_names[t], md.grads.data() + md.offset[t], static_cast<std::int64_t>(tensor_sizes[t]), mldiag::dtype::f32));
      mon.observe(mldiag::role::parameter, tensor_names[t],
                  mldiag::tensor_ref(tensor_names[t], md.params.data() + md.offset[t], static_cast<std::int64_t>(tensor_sizes[t]), mldiag::dtype::f32));
    }
    for (const mldiag::finding& f : mon.end_step())
      if (f.severity >= mldiag::severity::warning)
        std::printf("step %d: %s (%s) at %s\n", step, f.symptom.c_str(), std::string(mldiag::name(f.question)).c_str(),
                    f.where.empty() ? "-" : f.where.front().first.c_str()), ++warned;
  }
  // [c_trainer]

  std::printf("c_trainer (%s, seed %u): %d step(s), final loss %.4f, %d finding(s) at warning or above\n", fault.c_str(), seed,
              steps, mon.evidence().past().back().loss.value_or(std::nan("")), warned);
  return 0;
}
