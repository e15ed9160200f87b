// SPDX-License-Identifier: Apache-2.0
// Data-parallel training under MPI with an mldiag monitor on every rank, merged across ranks
// each step. The model is softmax regression (W [classes, features], b [classes]) on Gaussian
// clusters; each rank trains on its slice of every global batch and the gradients are averaged
// with MPI_Allreduce, as in DistributedDataParallel. Faults to plant:
//   --straggler R   rank R does its work six times over (a slow GPU, a throttled node)
//   --desync R      from step 20, rank R skips the gradient all-reduce (a real DP bug: its
//                   replica of the weights drifts away from the others')
// Run: mpirun -np 2 mldiag_distributed_dp [--steps N] [--straggler R] [--desync R]
#include <mldiag/distributed/mpi.hpp>
#include <mldiag/monitor.hpp>
#include <mldiag/stats/compute.hpp>

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace md = mldiag::distributed;

namespace {

constexpr int classes = 8, features = 128, global_batch = 2048;

struct options {
  int steps = 60, straggler = -1, desync = -1;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--steps") o.steps = v;
    else if (a == "--straggler") o.straggler = v;
    else if (a == "--desync") o.desync = v;
    else {
      std::fprintf(stderr, "mldiag: unknown option %s; use --steps N, --straggler RANK, --desync RANK\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    const options opt = parse(argc, argv);
    md::mpi_context mpi(MPI_COMM_WORLD);
    const int me = mpi.rank(), world = mpi.size();

    // The same initial weights and cluster centres on every rank (same seed); data differs.
    std::mt19937 init(7);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> centres(classes * features), w(classes * features), b(classes, 0.0f);
    for (auto& c : centres) c = 2.0f * n01(init);
    for (auto& x : w) x = 0.01f * n01(init);
    std::mt19937 data_rng(1000u + static_cast<unsigned>(me));

    mldiag::monitor mon(mldiag::monitor_config{.history = 128, .task = {.classes = classes}, .detectors = {}});
    md::snapshot_merger merge(mpi, md::merge_options::data_parallel());
    merge.attach(mon);  // every end_step() merges across ranks before the detectors run
    std::vector<mldiag::finding> found;
    mon.attach([&](const mldiag::finding& f) { found.push_back(f); });
    std::vector<std::string> mismatches;

    const md::index_range mine = md::even_split(global_batch, me, world);
    const int local = static_cast<int>(mine.size());
    std::vector<float> x(static_cast<std::size_t>(local * features)), logits(static_cast<std::size_t>(local * classes));
    std::vector<int> y(static_cast<std::size_t>(local));
    std::vector<float> gw(w.size()), gb(b.size());
    const float lr = 0.1f;
    for (int step = 0; step < opt.steps; ++step) {
      mon.begin_step(step);
      const auto t0 = std::chrono::steady_clock::now();
      const int repeats = me == opt.straggler ? 6 : 1;
      double loss = 0.0;
      for (int rep = 0; rep < repeats; ++rep) {  // the straggler does its work six times
        for (int i = 0; i < local; ++i) {        // this rank's slice of the global batch
          const int c = static_cast<int>(data_rng() % classes);
          y[static_cast<std::size_t>(i)] = c;
          for (int j = 0; j < features; ++j)
            x[static_cast<std::size_t>(i * features + j)] = centres[static_cast<std::size_t>(c * features + j)] + n01(data_rng);
        }
        std::fill(gw.begin(), gw.end(), 0.0f);
        std::fill(gb.begin(), gb.end(), 0.0f);
        loss = 0.0;
        for (int i = 0; i < local; ++i) {
          float* z = &logits[static_cast<std::size_t>(i * classes)];
          float top = -1e30f;
          for (int k = 0; k < classes; ++k) {
            float s = b[static_cast<std::size_t>(k)];
            for (int j = 0; j < features; ++j)
              s += w[static_cast<std::size_t>(k * features + j)] * x[static_cast<std::size_t>(i * features + j)];
            z[k] = s;
            top = std::max(top, s);
          }
          float sum = 0.0f;
          for (int k = 0; k < classes; ++k) sum += std::exp(z[k] - top);
          loss += static_cast<double>(std::log(sum) + top - z[y[static_cast<std::size_t>(i)]]);
          for (int k = 0; k < classes; ++k) {
            // d loss / d z_k = softmax_k - [k == y], averaged over the global batch
            const float d = (std::exp(z[k] - top) / sum - (k == y[static_cast<std::size_t>(i)] ? 1.0f : 0.0f)) / global_batch;
            gb[static_cast<std::size_t>(k)] += d;
            for (int j = 0; j < features; ++j) gw[static_cast<std::size_t>(k * features + j)] += d * x[static_cast<std::size_t>(i * features + j)];
          }
        }
      }
      const auto t1 = std::chrono::steady_clock::now();
      // The gradient all-reduce (sum of the slices' contributions); the desync bug skips it.
      if (!(me == opt.desync && step >= 20)) {
        MPI_Allreduce(MPI_IN_PLACE, gw.data(), static_cast<int>(gw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, gb.data(), static_cast<int>(gb.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else {
        MPI_Allreduce(MPI_IN_PLACE, std::vector<float>(gw.size()).data(), static_cast<int>(gw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, std::vector<float>(gb.size()).data(), static_cast<int>(gb.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      const auto t2 = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * gw[i];
      for (std::size_t k = 0; k < b.size(); ++k) b[k] -= lr * gb[k];

      // Evidence: this rank's loss (the merge averages it), the replicated weights and
      // gradients (the merge checks that the ranks agree), this rank's logits (the merge
      // combines the slices into the global batch's), and its timings (the merge gathers the
      // work time of every rank for the straggler detector).
      mon.observe(mldiag::scalar::loss, loss / local);
      mon.observe(mldiag::scalar::learning_rate, lr);
      mon.observe(mldiag::role::parameter, "w", std::span<const float>(w));
      mon.observe(mldiag::role::gradient, "w", std::span<const float>(gw));
      mon.observe(mldiag::role::activation, "logits", std::span<const float>(logits));
      mldiag::step_timings t;
      t.forward = std::chrono::duration<double>(t1 - t0).count();
      t.communication = std::chrono::duration<double>(t2 - t1).count();
      t.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      mon.observe(t);
      (void)mon.end_step();  // collective: the merge runs here
      for (const auto& [role, name] : merge.last_report().replica_mismatches)
        if (mismatches.empty()) mismatches.push_back("step " + std::to_string(step) + ": the ranks' replicas of " +
                                                     std::string(role == mldiag::role::parameter ? "parameter " : "gradient ") + name +
                                                     " differ");
    }
    // Collective: every rank's findings on rank 0, one entry per problem with its ranks. (Here
    // every rank saw the same merged evidence, so each problem comes from all ranks.)
    const auto gathered = mpi.gather_findings(found, 0);
    if (me == 0) {
      const auto& s = mon.evidence().current();
      std::printf("ranks %d, steps %d, global loss %.4f, merge %zu bytes per rank per step\n", world, opt.steps, s.loss.value_or(std::nan("")),
                  merge.bytes_per_step());
      std::printf("findings (every rank sees the same merged evidence): %zu\n", found.size());
      for (const auto& f : found) {
        std::printf("  %s %s at step %lld", std::string(mldiag::name(f.severity)).c_str(), f.symptom.c_str(),
                    static_cast<long long>(f.first_step));
        for (const auto& [where, score] : f.where) std::printf(" [%s %.3g]", where.c_str(), score);
        std::printf("\n");
      }
      for (const auto& m : gathered)
        std::printf("%s on %zu of %d ranks\n", m.finding.symptom.c_str(), m.ranks.size(), world);
      std::printf("replica mismatches: %zu\n", mismatches.size());
      for (const auto& m : mismatches) std::printf("  %s\n", m.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
