// SPDX-License-Identifier: Apache-2.0
// mldiag-bench-overhead: what the monitor costs per training step, as a fraction of the step,
// on the examples' transformer (LibTorch, CPU) with every tensor recorded every step:
// parameters, gradients, updates, activations, residual writes, attention logits (row
// entropy), router loads, the loss input, layer and phase timings. Three runs in one process:
//   none        the training step alone (the monitor sees only loss and learning rate)
//   mldiag      the monitor computing every statistic (compute_stats, entropy_from_logits)
//   torch peer  LibTorch's own ops computing the same statistics (isnan/isinf/== 0 sums,
//               amin/amax/abs().amax, mean, var, linalg_vector_norm; softmax entropy)
// and the ceiling: the bytes the statistics must read, at this machine's read bandwidth.
// Prints a table and one JSON line; docs/benchmarks.md records the results.
#include "../examples/torch_transformer/transformer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile double sink = 0.0;

// Read bandwidth of one thread over a buffer much larger than the caches (GB/s).
double read_bandwidth_gbs() {
  const std::size_t words = std::size_t{64} << 20;  // 512 MiB of 64-bit words
  std::vector<std::uint64_t> buf(words, 1);
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t acc[8] = {};
    for (std::size_t i = 0; i < words; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += buf[i + static_cast<std::size_t>(k)];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + static_cast<double>(acc[0] + acc[7]);
    best = std::max(best, static_cast<double>(words * 8) / s / 1e9);
  }
  return best;
}

// Bytes the statistics read per step: every parameter, gradient and update, plus what the
// forward pass hands over (activations, residual inputs and writes, attention logits, the
// loss input), measured from one step's taps.
double stats_bytes_per_step(const examples::lm::corpus& text, const examples::lm::shape& s) {
  torch::manual_seed(1);
  examples::lm::model net(s, text.vocab);
  examples::lm::taps tap;
  examples::lm::forward_faults ff;
  auto aux = torch::zeros({});
  auto x = text.tokens.slice(0, 0, s.batch * s.context).view({s.batch, s.context});
  auto logits = net->forward(x, ff, &tap, aux);
  double bytes = 0.0;
  for (const auto& p : net->parameters()) bytes += 3.0 * static_cast<double>(p.numel()) * 4.0;  // param, grad, update
  for (const auto& t : tap.tensors) bytes += static_cast<double>(t.t.numel()) * 4.0;
  for (const auto& [name, a] : tap.attention) bytes += static_cast<double>(a.numel()) * 4.0;
  bytes += static_cast<double>(logits.numel()) * 4.0;
  return bytes;
}

}  // namespace

int main(int argc, char** argv) try {
  bool quick = false;
  examples::lm::shape shape;  // the examples' transformer; --batch and --context change it
  // monitor_config::entropy.row_stride; 0 keeps the monitor's default (every 5th row).
  int entropy_stride = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) shape.batch = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--context") == 0 && i + 1 < argc) shape.context = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--entropy-stride") == 0 && i + 1 < argc) entropy_stride = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "mldiag: unknown flag %s\nusage: mldiag-bench-overhead [--quick] [--batch N] [--context N] [--entropy-stride N]\n", argv[i]);
      return 2;
    }
  }
  if (shape.batch < 1 || shape.context < 2 || entropy_stride < 0) {
    std::fprintf(stderr, "mldiag: --batch must be >= 1, --context >= 2 and --entropy-stride >= 1 (or 0: the default)\n");
    return 2;
  }
  torch::set_num_threads(1);
  const auto text = examples::lm::load_corpus(examples::lm::default_text);
  examples::run_options o;
  o.steps = quick ? 20 : 200;
  o.seed = 7;

  struct row {
    const char* name;
    examples::lm::stats_mode mode;
    double step_ms = 0, stats_ms = 0;
  };
  row rows[] = {{"none", examples::lm::stats_mode::none},
                {"mldiag", examples::lm::stats_mode::mldiag},
                {"torch peer", examples::lm::stats_mode::torch_peer}};
  // Two rounds, best of each: the first warms caches and the allocator.
  for (int round = 0; round < 2; ++round) {
    for (auto& r : rows) {
      auto settings = examples::lm::monitor_settings(text);
      if (entropy_stride > 0) settings.entropy.row_stride = static_cast<std::uint32_t>(entropy_stride);
      mldiag::monitor mon(settings);
      const auto res = examples::lm::train(o, mon, text, shape, r.mode);
      const double step_ms = 1e3 * res.seconds_per_step, stats_ms = 1e3 * res.monitor_seconds_per_step;
      if (round == 0 || step_ms + stats_ms < r.step_ms + r.stats_ms) {
        r.step_ms = step_ms;
        r.stats_ms = stats_ms;
      }
    }
  }
  if (entropy_stride == 0) entropy_stride = static_cast<int>(mldiag::monitor_config{}.entropy.row_stride);
  const double gbs = read_bandwidth_gbs();
  const double bytes = stats_bytes_per_step(text, shape);
  const double ceiling_ms = 1e3 * bytes / (gbs * 1e9);
  const double step_ms = rows[1].step_ms;  // the training step the monitor watched
  const double base_stats = rows[0].stats_ms;  // loss, lr and end_step alone
  const double mldiag_fraction = rows[1].stats_ms / step_ms, torch_fraction = rows[2].stats_ms / rows[2].step_ms;

  std::printf("mldiag-bench-overhead: %s, %lld blocks, d=%lld, batch %lld x %lld tokens, %lld steps, 1 thread, "
              "attention entropy of every %d-th row, host ISA %s\n",
              text.source.c_str(), static_cast<long long>(shape.blocks), static_cast<long long>(shape.d),
              static_cast<long long>(shape.batch), static_cast<long long>(shape.context), static_cast<long long>(o.steps),
              entropy_stride, std::string(mldiag::host_isa_name(mldiag::active_host_isa())).c_str());
  std::printf("%-12s %14s %16s %12s\n", "statistics", "step (ms)", "statistics (ms)", "fraction");
  for (const auto& r : rows)
    std::printf("%-12s %14.3f %16.3f %11.2f%%\n", r.name, r.step_ms, r.stats_ms, 100.0 * r.stats_ms / r.step_ms);
  std::printf("%-12s %14s %16.3f %11.2f%%   (%.2f MB per step at %.1f GB/s read bandwidth)\n", "ceiling", "-", ceiling_ms,
              100.0 * ceiling_ms / step_ms, bytes / 1e6, gbs);
  std::printf("{\"bench\":\"overhead\",\"quick\":%s,\"tokens_per_step\":%lld,\"steps\":%lld,\"step_ms\":%.4f,\"monitor_ms\":%.4f,"
              "\"monitor_base_ms\":%.4f,\"torch_peer_ms\":%.4f,\"ceiling_ms\":%.4f,\"bytes_per_step\":%.0f,"
              "\"read_gbs\":%.2f,\"monitor_overhead_fraction\":%.5f,\"torch_peer_overhead_fraction\":%.5f,"
              "\"entropy_row_stride\":%d,\"isa\":\"%s\"}\n",
              quick ? "true" : "false", static_cast<long long>(shape.batch * shape.context), static_cast<long long>(o.steps), step_ms, rows[1].stats_ms, base_stats,
              rows[2].stats_ms, ceiling_ms, bytes, gbs, mldiag_fraction, torch_fraction, entropy_stride,
              std::string(mldiag::host_isa_name(mldiag::active_host_isa())).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
