// SPDX-License-Identifier: Apache-2.0
/// A hand-written MLP in Eigen (forward and backward by hand) trained on the UCI handwritten
/// digits under an mldiag monitor, with one fault planted on request. Used by the example's
/// main, the fault suite and the flagship demo.
#pragma once

#include "../common/faults.hpp"

#include <mldiag/adapters/eigen.hpp>
#include <mldiag/monitor.hpp>

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef MLDIAG_DIGITS_CSV
#define MLDIAG_DIGITS_CSV "third_party/data/digits.csv"
#endif

namespace examples::mlp {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;  // [rows, cols]
using vector = Eigen::VectorXf;

/// Images [n, 64] scaled to [0, 1] and their labels 0..9.
struct dataset {
  matrix x;
  std::vector<int> y;
  std::string source;
};

/// The 1797 UCI digits from `path` (sklearn's digits.csv: 64 pixel values 0..16, then the
/// label), or, when the file is absent, a generated stand-in of the same shape: ten random
/// 8x8 prototypes with noise. Anything else wrong with the file is an error.
inline dataset load_digits(const std::string& path) {
  dataset d;
  std::ifstream in(path);
  if (!in) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::normal_distribution<float> noise(0.0f, 0.15f);
    matrix proto(10, 64);
    for (Eigen::Index i = 0; i < proto.size(); ++i) proto.data()[i] = u(rng) < 0.35f ? 1.0f : 0.0f;
    const int n = 1797;
    d.x.resize(n, 64);
    d.y.resize(n);
    for (int i = 0; i < n; ++i) {
      d.y[static_cast<std::size_t>(i)] = i % 10;
      for (int j = 0; j < 64; ++j) d.x(i, j) = std::clamp(proto(i % 10, j) + noise(rng), 0.0f, 1.0f);
    }
    d.source = "generated digits (" + path + " not found: run scripts/fetch-digits.sh for the real ones)";
    return d;
  }
  std::vector<float> values;
  std::string line;
  std::size_t rows = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream cells(line);
    std::string cell;
    int col = 0;
    while (std::getline(cells, cell, ',')) {
      char* end = nullptr;
      const float v = std::strtof(cell.c_str(), &end);
      if (end == cell.c_str() || !std::isfinite(v)) {
        throw std::runtime_error("mldiag: " + path + " line " + std::to_string(rows + 1) + ": '" + cell +
                                 "' is not a number; delete the file and run scripts/fetch-digits.sh again");
      }
      if (col < 64) values.push_back(v / 16.0f);
      else d.y.push_back(static_cast<int>(v));
      ++col;
    }
    if (col != 65 || d.y.back() < 0 || d.y.back() > 9) {
      throw std::runtime_error("mldiag: " + path + " line " + std::to_string(rows + 1) +
                               ": expected 64 pixels and a label 0..9; delete the file and run scripts/fetch-digits.sh again");
    }
    ++rows;
  }
  d.x = Eigen::Map<const matrix>(values.data(), static_cast<Eigen::Index>(rows), 64);
  d.source = path + " (" + std::to_string(rows) + " UCI digits)";
  return d;
}

/// The network: 64 -> 64 -> 64 -> 64 -> 10, ReLU, softmax cross-entropy, SGD with momentum.
inline constexpr int layers = 4;
inline constexpr std::array<int, layers + 1> widths = {64, 64, 64, 64, 10};
inline constexpr std::array<const char*, layers> names = {"fc1", "fc2", "fc3", "fc4"};

struct layer {
  matrix w, dw, vw, w_before;  // [out, in]
  vector b, db, vb, b_before;  // [out]
  matrix z, h;                 // [batch, out]: pre-activation, activation
};

/// Which layer a run's layer fault goes into: varies with the seed, so localization is
/// checked on every layer it can be in.
inline int planted_layer(const run_options& o) {
  switch (o.planted) {
    case fault::dead_relu: return static_cast<int>(o.seed % (layers - 1));  // a ReLU layer
    case fault::nan_grad:
    case fault::frozen_layer:
    case fault::slow_layer: return static_cast<int>(o.seed % layers);
    default: return -1;
  }
}

/// Trains for `o.steps` steps with batch 64 under a monitor (every tensor, every step) and
/// returns what the monitor found. The monitor is the caller's, so the flagship demo can walk
/// its diagnoses afterwards.
inline run_result train(const run_options& o, mldiag::monitor& mon, const dataset& data) {
  using clock = std::chrono::steady_clock;
  run_result r;
  r.example = "eigen_mlp";
  r.options = o;
  const int planted = planted_layer(o);
  if (planted >= 0) r.planted_layer = names[static_cast<std::size_t>(planted)];

  std::mt19937_64 rng(o.seed);
  std::array<layer, layers> net;
  for (int l = 0; l < layers; ++l) {
    auto& L = net[static_cast<std::size_t>(l)];
    const int in = widths[static_cast<std::size_t>(l)], out = widths[static_cast<std::size_t>(l) + 1];
    // He initialization; the bad_init fault makes it 1000x too small.
    const float scale = std::sqrt(2.0f / static_cast<float>(in)) * (o.planted == fault::bad_init ? 1e-3f : 1.0f);
    std::normal_distribution<float> n(0.0f, scale);
    L.w.resize(out, in);
    for (Eigen::Index i = 0; i < L.w.size(); ++i) L.w.data()[i] = n(rng);
    L.b = vector::Zero(out);
    L.vw = matrix::Zero(out, in);
    L.vb = vector::Zero(out);
  }

  std::vector<int> labels = data.y;
  if (o.planted == fault::labels_shuffled) {
    std::mt19937_64 shuffle_rng(o.seed ^ 0xabcdef);
    std::uniform_int_distribution<int> any(0, 9);
    for (auto& y : labels) y = any(shuffle_rng);  // the pipeline reads the wrong label column
  }

  const int batch = 64;
  const float base_lr = 0.03f, momentum = 0.9f;
  std::uniform_int_distribution<Eigen::Index> pick(0, data.x.rows() - 1);
  matrix xb(batch, 64), logits(batch, 10), probs(batch, 10), loss_input(batch, 10), dlogits(batch, 10);
  std::vector<int> yb(batch);
  double monitor_seconds = 0.0;
  time_baseline before_onset;
  const auto run_start = clock::now();

  for (std::int64_t step = 0; step < o.steps; ++step) {
    const auto t0 = clock::now();
    mldiag::step_timings timing;
    std::array<double, layers> layer_seconds{};

    // Data: a random batch.
    if (o.active(fault::input_starvation, step) && !o.synthetic_time) starve_input(before_onset.step);
    for (int i = 0; i < batch; ++i) {
      const Eigen::Index k = pick(rng);
      xb.row(i) = data.x.row(k);
      yb[static_cast<std::size_t>(i)] = labels[static_cast<std::size_t>(k)];
    }
    timing.data_wait = since(t0);

    // Forward.
    const auto t1 = clock::now();
    if (o.active(fault::dead_relu, step) && step == o.onset_step()) net[static_cast<std::size_t>(planted)].b.array() -= static_cast<float>(o.magnitude(50.0));
    const matrix* input = &xb;
    for (int l = 0; l < layers; ++l) {
      const auto tl = clock::now();
      auto& L = net[static_cast<std::size_t>(l)];
      L.z = (*input * L.w.transpose()).rowwise() + L.b.transpose();
      L.h = l + 1 < layers ? matrix(L.z.cwiseMax(0.0f)) : L.z;
      const bool slow = o.active(fault::slow_layer, step) && l == planted;
      if (slow && !o.synthetic_time) slow_down_layer(before_onset.step);
      input = &L.h;
      layer_seconds[static_cast<std::size_t>(l)] = o.synthetic_time ? synthetic_clock::layer(layers, slow) : since(tl);
    }
    logits = net[layers - 1].h;
    // Softmax cross-entropy; the wrong_loss fault applies a softmax first, so probabilities
    // reach a loss that applies its own.
    auto softmax = [](const matrix& in, matrix& out) {
      out = (in.colwise() - in.rowwise().maxCoeff()).array().exp().matrix();
      out.array().colwise() /= out.rowwise().sum().array();
    };
    if (o.planted == fault::wrong_loss) softmax(logits, loss_input);
    else loss_input = logits;
    softmax(loss_input, probs);
    double loss = 0.0;
    for (int i = 0; i < batch; ++i) loss -= std::log(std::max(probs(i, yb[static_cast<std::size_t>(i)]), 1e-30f));
    loss /= batch;
    timing.forward = since(t1);

    // Backward by hand.
    const auto t2 = clock::now();
    dlogits = probs;
    for (int i = 0; i < batch; ++i) dlogits(i, yb[static_cast<std::size_t>(i)]) -= 1.0f;
    dlogits /= static_cast<float>(batch);
    if (o.planted == fault::wrong_loss) {
      // Through the first softmax p: dL/dz_i = p_i (g_i - sum_j p_j g_j).
      const Eigen::VectorXf dot = (loss_input.array() * dlogits.array()).rowwise().sum();
      dlogits = (loss_input.array() * (dlogits.colwise() - dot).array()).matrix();
    }
    matrix delta = dlogits;
    for (int l = layers - 1; l >= 0; --l) {
      auto& L = net[static_cast<std::size_t>(l)];
      const matrix& in = l == 0 ? xb : net[static_cast<std::size_t>(l) - 1].h;
      L.dw = delta.transpose() * in;
      L.db = delta.colwise().sum().transpose();
      if (l > 0) {
        delta = delta * L.w;
        delta = delta.cwiseProduct(matrix((net[static_cast<std::size_t>(l) - 1].z.array() > 0.0f).cast<float>()));
      }
    }
    if (o.active(fault::nan_grad, step) && step == o.onset_step()) {
      net[static_cast<std::size_t>(planted)].dw(0, 0) = std::numeric_limits<float>::quiet_NaN();
    }
    timing.backward = since(t2);

    // SGD with momentum; the faults that touch the optimizer.
    const auto t3 = clock::now();
    float lr = base_lr * static_cast<float>(o.lr_scale);
    if (o.active(fault::lr_100x, step)) lr *= 100.0f;
    if (o.active(fault::lr_zero, step)) lr = 0.0f;
    for (int l = 0; l < layers; ++l) {
      auto& L = net[static_cast<std::size_t>(l)];
      L.w_before = L.w;
      L.b_before = L.b;
      L.vw = momentum * L.vw + L.dw;
      L.vb = momentum * L.vb + L.db;
      if (o.active(fault::frozen_layer, step) && l == planted) continue;  // not in the optimizer
      L.w -= lr * L.vw;
      L.b -= lr * L.vb;
    }
    timing.optimizer = since(t3);
    timing.total = since(t0);
    if (o.synthetic_time)
      timing = synthetic_clock::timings(o.active(fault::input_starvation, step), o.active(fault::slow_layer, step));
    if (!o.active(step)) before_onset.add(*timing.total);

    // The monitor: every tensor, every step.
    const auto tm = clock::now();
    // [integration]
    mon.begin_step(step);
    mon.observe(mldiag::scalar::loss, loss);
    mon.observe(mldiag::scalar::learning_rate, lr);
    mon.observe(timing);
    for (int l = 0; l < layers; ++l) {
      auto& L = net[static_cast<std::size_t>(l)];
      const std::string n = names[static_cast<std::size_t>(l)];
      mon.observe(mldiag::role::gradient, n + ".weight", L.dw);
      mon.observe(mldiag::role::gradient, n + ".bias", L.db);
      mon.observe(mldiag::role::parameter, n + ".weight", L.w);
      mon.observe(mldiag::role::parameter, n + ".bias", L.b);
      L.w_before = L.w - L.w_before;  // the update, in place of the copy
      L.b_before = L.b - L.b_before;
      mon.observe(mldiag::role::update, n + ".weight", L.w_before);
      mon.observe(mldiag::role::update, n + ".bias", L.b_before);
      if (l + 1 < layers) mon.observe(mldiag::role::activation, n + ".relu", L.h);
      mon.observe(mldiag::layer_timing{n, layer_seconds[static_cast<std::size_t>(l)]});
    }
    mon.observe(mldiag::role::activation, "logits", loss_input);
    // [integration]
    close_step(r, o, mon, step, loss);
    monitor_seconds += since(tm);
  }
  finish(r, since(run_start), monitor_seconds);
  return r;
}

/// The monitor the examples use: the default detectors, told the task has 10 classes.
inline mldiag::monitor_config monitor_settings() { return {.task = {.classes = 10}}; }

}  // namespace examples::mlp
