// SPDX-License-Identifier: Apache-2.0
// The translation unit of bench/compile_time/run.sh: a LibTorch training loop as a user
// writes it (MLDIAG_BENCH_TORCH), or a loop over plain vectors; with MLDIAG_BENCH_MONITOR,
// the same loop with the monitor embedded the way the README shows. The difference in compile
// time between the two is what including the monitor costs.
#if MLDIAG_BENCH_MONITOR
#include <mldiag/monitor.hpp>
#if MLDIAG_BENCH_TORCH
#include <mldiag/adapters/torch.hpp>
#endif
#endif

#if MLDIAG_BENCH_TORCH
#include <torch/torch.h>
#endif

#include <cstdio>
#include <vector>

#if MLDIAG_BENCH_TORCH
struct net : torch::nn::Module {
  net() : fc1(register_module("fc1", torch::nn::Linear(784, 64))), fc2(register_module("fc2", torch::nn::Linear(64, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::log_softmax(fc2->forward(torch::relu(fc1->forward(x))), 1); }
  torch::nn::Linear fc1, fc2;
};

int main() {
  auto model = std::make_shared<net>();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
#if MLDIAG_BENCH_MONITOR
  mldiag::monitor mon({.task = {.classes = 10}});
  mldiag::module_observer watch(*model);
#endif
  for (int step = 0; step < 10; ++step) {
    const torch::Tensor x = torch::randn({64, 784}), y = torch::randint(0, 10, {64});
    opt.zero_grad();
    const torch::Tensor loss = torch::nll_loss(model->forward(x), y);
    loss.backward();
    opt.step();
#if MLDIAG_BENCH_MONITOR
    mon.observe(mldiag::scalar::loss, loss.item<double>());
    watch.observe(mon);
    for (const auto& f : mon.end_step()) std::printf("%s\n", f.symptom.c_str());
#endif
  }
  return 0;
}
#else
int main() {
  std::vector<float> g(1000, 0.01f);
#if MLDIAG_BENCH_MONITOR
  mldiag::monitor mon({.task = {.classes = 10}});
#endif
  for (int step = 0; step < 10; ++step) {
    for (auto& v : g) v *= 0.99f;
#if MLDIAG_BENCH_MONITOR
    mon.observe(mldiag::scalar::loss, 2.3 - 0.1 * step);
    mon.observe(mldiag::role::gradient, "w", g);
    for (const auto& f : mon.end_step()) std::printf("%s\n", f.symptom.c_str());
#endif
  }
  return static_cast<int>(g[0]);
}
#endif
