// SPDX-License-Identifier: Apache-2.0
// A real (small) training run for the protocol and monitor tests: softmax regression on three
// overlapping Gaussian classes, hand-written gradients, SGD with momentum. `on_step` receives
// each step's loss and gradients; the caller records them however it likes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

namespace mldiag_test {

struct trainer_config {
  double lr = 0.1;
  double init_scale = 0.01;
  double batch = 256;
  double momentum = 0.0;
  int steps = 400;
};

using step_callback = std::function<void(int step, double loss, const std::vector<float>& grad_w,
                                         const std::vector<float>& grad_b)>;

inline void train_softmax(const trainer_config& c, const step_callback& on_step) {
  constexpr int classes = 3, features = 8;
  std::mt19937_64 rng(123);
  std::normal_distribution<double> n01;
  std::vector<std::vector<double>> means(classes, std::vector<double>(features));
  for (auto& m : means)
    for (auto& v : m) v = 0.6 * n01(rng);  // overlapping classes: the loss stays well above 0
  std::vector<double> w(classes * features), b(classes), vw(w.size(), 0.0), vb(b.size(), 0.0);
  for (auto& v : w) v = c.init_scale * n01(rng);
  const int batch = static_cast<int>(c.batch);
  std::vector<double> x(features);
  for (int step = 0; step < c.steps; ++step) {
    std::vector<float> gw(w.size(), 0.0f), gb(b.size(), 0.0f);
    double loss = 0.0;
    for (int k = 0; k < batch; ++k) {
      const auto y = static_cast<std::size_t>(rng() % classes);
      for (std::size_t f = 0; f < x.size(); ++f) x[f] = means[y][f] + n01(rng);
      double z[classes], m = -1e300;
      for (std::size_t j = 0; j < classes; ++j) {
        z[j] = b[j];
        for (std::size_t f = 0; f < x.size(); ++f) z[j] += w[j * features + f] * x[f];
        m = std::max(m, z[j]);
      }
      double s = 0.0;
      for (double v : z) s += std::exp(v - m);
      for (std::size_t j = 0; j < classes; ++j) {
        const double d = (std::exp(z[j] - m) / s - (j == y ? 1.0 : 0.0)) / batch;
        gb[j] += static_cast<float>(d);
        for (std::size_t f = 0; f < x.size(); ++f) gw[j * features + f] += static_cast<float>(d * x[f]);
      }
      loss += (std::log(s) + m - z[y]) / batch;
    }
    on_step(step, loss, gw, gb);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= c.lr * (vw[i] = c.momentum * vw[i] + gw[i]);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] -= c.lr * (vb[i] = c.momentum * vb[i] + gb[i]);
  }
}

}  // namespace mldiag_test
