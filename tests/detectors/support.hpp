// SPDX-License-Identifier: Apache-2.0
/// What the detector tests share: a synthetic run with a planted fault, a run that fills each
/// step from a seeded generator, a monitor run that keeps what it delivers, a (loss, gradient
/// norm) series replayed through detectors, and the series recorded under tests/detectors/data.
#pragma once

#include "mldiag/detectors/detector.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/vocab/finding.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>  // std::type_identity_t
#include <utility>
#include <vector>

namespace mldiag_test {

inline constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

/// `n` elements equal to `v`.
inline std::vector<float> filled(std::size_t n, float v) { return std::vector<float>(n, v); }

/// The value of the evidence named `key` in `f`; fails the test where there is none.
inline double evidence(const mldiag::finding& f, std::string_view key) {
  for (const auto& [k, v] : f.evidence)
    if (k == key) return v;
  FAIL("no evidence named " << std::string(key));
  return 0.0;
}

/// What a planted fault may change at a step: the recorder (before the loss and the gradient
/// are recorded), the loss and the gradient's scale.
using fault_fn = std::function<void(int, mldiag::recorder&, double&, double&)>;

/// A healthy synthetic run: the loss decaying with noise, a gradient ("layers.0.w") whose norm
/// is about 1 with noise, an fp16 loss scale steady at 65536 unless the fault records one.
/// `fault(step, rec, loss, grad_scale)` may change the step's evidence. Returns what `d` found.
template <class Detector>
std::vector<mldiag::finding> run(Detector& d, int steps, const fault_fn& fault) {
  mldiag::recorder rec(64);
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<float> grad(64);
  std::vector<mldiag::finding> out;
  for (int step = 0; step < steps; ++step) {
    rec.begin_step(step);
    double loss = 2.0 + 3.0 * std::exp(-step / 200.0) + 0.05 * noise(rng);
    double grad_scale = 1.0 + 0.1 * noise(rng);
    fault(step, rec, loss, grad_scale);
    rec.observe(mldiag::scalar::loss, loss);
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(grad_scale * 0.125 * ((i % 2) ? 1 : -1));
    rec.observe(mldiag::role::gradient, "layers.0.w", grad);
    if (!rec.current().loss_scale) rec.observe(mldiag::scalar::loss_scale, 65536.0);
    const auto& now = rec.end_step();
    d.observe({now, rec.past(), rec.names()}, out);
  }
  return out;
}

/// The synthetic run without a fault.
inline const fault_fn healthy = [](int, mldiag::recorder&, double&, double&) {};

/// Fills a step's evidence from a generator seeded once per run.
using fill_fn = std::function<void(int, mldiag::recorder&, std::mt19937_64&)>;

/// A run whose every step `fill` records (nothing else): returns what `d` found.
template <class Detector>
std::vector<mldiag::finding> run_filled(Detector& d, int steps, const fill_fn& fill) {
  mldiag::recorder rec(16);
  std::mt19937_64 rng(11);
  std::vector<mldiag::finding> out;
  for (int step = 0; step < steps; ++step) {
    rec.begin_step(step);
    fill(step, rec, rng);
    d.observe({rec.end_step(), rec.past(), rec.names()}, out);
  }
  return out;
}

/// `mean` with a relative normal spread of `relative_sd`.
inline double gauss(std::mt19937_64& rng, double mean, double relative_sd) {
  return mean * (1.0 + relative_sd * std::normal_distribution<double>(0.0, 1.0)(rng));
}

/// A caching allocator's evidence, in bytes; an absent value was not measured.
inline mldiag::memory_evidence memory(std::optional<double> allocated, std::optional<double> reserved,
                                      std::optional<double> capacity) {
  mldiag::memory_evidence m;
  m.allocated = allocated;
  m.reserved = reserved;
  m.capacity = capacity;
  return m;
}

/// Every finding a monitor delivers (sinks see all severities).
struct delivered {
  std::vector<mldiag::finding> all;
  [[nodiscard]] std::vector<mldiag::finding> at_least(mldiag::severity s) const {
    std::vector<mldiag::finding> out;
    for (const auto& f : all)
      if (f.severity >= s) out.push_back(f);
    return out;
  }
  [[nodiscard]] std::vector<mldiag::finding> named(std::string_view symptom) const {
    std::vector<mldiag::finding> out;
    for (const auto& f : all)
      if (f.symptom == symptom) out.push_back(f);
    return out;
  }
};

/// A monitor run: `step(i, mon)` observes step i; returns every finding delivered to a sink
/// attached now (the task's L0 findings included, at the first end_step). A template so that
/// the tests that do not run a monitor do not include it.
template <class Monitor>
delivered run_monitor(Monitor& mon, int steps, const std::type_identity_t<std::function<void(int, Monitor&)>>& step) {
  auto out = std::make_shared<delivered>();
  mon.attach([out](const mldiag::finding& f) { out->all.push_back(f); });
  for (int i = 0; i < steps; ++i) {
    mon.begin_step(i);
    step(i, mon);
    (void)mon.end_step();
  }
  return *out;
}

/// The findings of detectors `d...` over a (loss, gradient norm) series, one step each.
template <class... D>
std::vector<mldiag::finding> replay_series(const std::vector<std::pair<double, double>>& series, D... d) {
  mldiag::recorder rec(4);
  std::vector<mldiag::finding> out;
  for (std::size_t i = 0; i < series.size(); ++i) {
    rec.begin_step(static_cast<std::int64_t>(i));
    rec.observe(mldiag::scalar::loss, series[i].first);
    rec.observe(mldiag::scalar::grad_norm, series[i].second);
    const mldiag::observation o{rec.end_step(), rec.past(), rec.names()};
    (d.observe(o, out), ...);
  }
  return out;
}

/// A (loss, gradient norm) series recorded from a zoo run, from tests/detectors/data/`file`:
/// lines `step,loss,norm`; `#` starts a comment.
inline std::vector<std::pair<double, double>> recorded_series(std::string_view file) {
  std::vector<std::pair<double, double>> series;
  std::ifstream in(std::string(MLDIAG_DETECTOR_DATA) + "/" + std::string(file));
  REQUIRE_MESSAGE(in.good(), "cannot open " << std::string(file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    double step = 0, loss = 0, norm = 0;
    char comma = 0;
    row >> step >> comma >> loss >> comma >> norm;
    REQUIRE(row);
    series.emplace_back(loss, norm);
  }
  return series;
}

}  // namespace mldiag_test
