// SPDX-License-Identifier: Apache-2.0
// What merging across ranks costs per step, under mpirun (mpirun -np N mldiag_bench_distributed):
//   - snapshot_merger::merge of a snapshot with T sharded gradient tensors (what attach() adds
//     to end_step), and mpi_context::allreduce of T tensor_stats (tree and sequential order);
//   - the peer: MPI_Allreduce with the built-in MPI_SUM over the same number of bytes as
//     doubles (what MPI does with a payload of that size when it may use its own fast op);
//   - the floors: MPI_Allreduce of one double (the latency of any collective here) and a
//     memcpy of the payload (the bandwidth ceiling of shared memory).
// Prints a table (rank 0) and one JSON line. --quick: fewer repetitions (the CTest smoke run).
#include "mldiag/distributed/mpi.hpp"
#include "mldiag/stats/compute.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace md = mldiag::distributed;

namespace {

// Median of `reps` timings of `f` in microseconds; every rank starts each repetition together.
template <class F>
double median_us(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  double med = t[t.size() / 2];
  // The slowest rank's median: a collective is as slow as its slowest rank.
  MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return med;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    const int reps = quick ? 5 : 200;
    md::mpi_context mpi;
    const int me = mpi.rank();
    if (me == 0) {
      std::printf("mldiag_bench_distributed: %d ranks, %d repetitions, median of the slowest rank\n", mpi.size(), reps);
      std::printf("%8s %12s %14s %14s %14s %14s %14s %12s\n", "tensors", "merge B/rank", "snapshot us", "stats tree us",
                  "stats seq us", "MPI_SUM us", "1 double us", "memcpy us");
    }
    std::string json = "{\"bench\":\"distributed\",\"ranks\":" + std::to_string(mpi.size()) + ",\"rows\":[";
    for (const std::size_t tensors : {std::size_t{16}, std::size_t{256}, std::size_t{4096}}) {
      // This rank's shard statistics of `tensors` gradients (values do not change the cost).
      std::vector<float> shard(64);
      for (std::size_t i = 0; i < shard.size(); ++i) shard[i] = static_cast<float>((i + 1) * static_cast<std::size_t>(me + 1));
      const mldiag::tensor_stats part = mldiag::compute_stats(std::span<const float>(shard));
      md::snapshot_merger merger(mpi, md::merge_options::fully_sharded());
      std::vector<std::string> names;
      for (std::size_t t = 0; t < tensors; ++t) names.push_back("layer" + std::to_string(t) + ".weight");
      // Time only the merge. Merging the merged snapshot again costs the same (same tensors,
      // same layout), so one snapshot serves every repetition: no copy inside the timing.
      mldiag::name_table table;
      mldiag::snapshot base;
      base.clear(0);
      base.loss = 1.0;
      base.timings.total = 0.1;
      for (const auto& n : names) base.gradients.push_back({table.intern(n), part});
      mldiag::snapshot s = base;
      merger.merge(s, table);  // the first step agrees on the layout (one more round)
      const double snapshot_us = median_us(reps, [&] { merger.merge(s, table); });
      std::vector<mldiag::tensor_stats> st(tensors, part);
      const double tree_us = median_us(reps, [&] {
        std::fill(st.begin(), st.end(), part);
        mpi.allreduce(std::span<mldiag::tensor_stats>(st));
      });
      const double seq_us = median_us(reps, [&] {
        std::fill(st.begin(), st.end(), part);
        mpi.allreduce(std::span<mldiag::tensor_stats>(st), md::merge_order::sequential);
      });
      const std::size_t bytes = merger.bytes_per_step();
      std::vector<double> d(bytes / sizeof(double), 1.0), d2(d.size());
      const double sum_us = median_us(reps, [&] {
        MPI_Allreduce(MPI_IN_PLACE, d.data(), static_cast<int>(d.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      });
      double one = 1.0;
      const double one_us = median_us(reps, [&] { MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); });
      volatile double sink = 0.0;  // reads the copy, so the compiler keeps it
      const double copy_us = median_us(reps, [&] {
        std::memcpy(d2.data(), d.data(), d.size() * sizeof(double));
        sink = sink + d2[d2.size() / 2];
      });
      if (me == 0)
        std::printf("%8zu %12zu %14.1f %14.1f %14.1f %14.1f %14.1f %12.2f\n", tensors, bytes, snapshot_us, tree_us, seq_us, sum_us,
                    one_us, copy_us);
      char row[320];
      std::snprintf(row, sizeof row,
                    "%s{\"tensors\":%zu,\"bytes_per_rank\":%zu,\"snapshot_merge_us\":%.2f,\"stats_tree_us\":%.2f,"
                    "\"stats_sequential_us\":%.2f,\"mpi_sum_same_bytes_us\":%.2f,\"mpi_one_double_us\":%.2f,\"memcpy_us\":%.3f}",
                    tensors == 16 ? "" : ",", tensors, bytes, snapshot_us, tree_us, seq_us, sum_us, one_us, copy_us);
      json += row;
    }
    if (me == 0) std::printf("%s]}\n", json.c_str());
  }
  MPI_Finalize();
  return 0;
}
