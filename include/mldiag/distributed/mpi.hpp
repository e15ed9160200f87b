// SPDX-License-Identifier: Apache-2.0
/// Statistics, snapshots and findings across the ranks of an MPI job (target mldiag::mpi).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/distributed/merge.hpp"
#include "mldiag/distributed/sharding.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/monitor.hpp"
#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::distributed {

/// How the partial results of the ranks are combined.
enum class merge_order : std::uint8_t {
  /// MPI_Allreduce with a non-commutative user operation: MPI keeps the ranks in ascending
  /// order but chooses the grouping, so moments may differ from a left fold in the last bits
  /// (1e-15 relative, far inside the 1e-12 contract). Every rank gets the same result.
  /// Bytes per rank: about 2 x the payload with Open MPI 4.1 (a reduce and a broadcast).
  tree,
  /// MPI_Allgather of every rank's partials, then a left fold in rank order on every rank:
  /// bitwise equal to merging the partials one after the other in one process, whatever the
  /// MPI implementation does. Bytes per rank: world size x the payload.
  sequential,
};

namespace detail {

inline void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(n)) +
              "; check that every rank makes the same mldiag calls in the same order on a valid communicator");
}

// MPI_User_function: inout[i] = in[i] op inout[i], `in` from the lower ranks (the order MPI
// keeps for non-commutative operations). memcpy: MPI's temporary buffers need not be aligned.
template <class T>
void merge_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* lo = static_cast<const unsigned char*>(in);
  auto* hi = static_cast<unsigned char*>(inout);
  for (int i = 0; i < *len; ++i) {
    T a, b;
    std::memcpy(&a, lo + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
    std::memcpy(&b, hi + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
    if constexpr (std::is_same_v<T, cell>) {
      combine(a, b);
    } else {
      a.merge(b);
      b = a;
    }
    std::memcpy(hi + static_cast<std::size_t>(i) * sizeof(T), &b, sizeof(T));
  }
}

struct mpi_type_op {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};

}  // namespace detail

/// The MPI side of mldiag: construct it after MPI_Init on every rank of `comm` and destroy it
/// before MPI_Finalize (it owns MPI datatypes and operations). Every member function that
/// says "collective" must be called by all ranks of the communicator, in the same order.
///
/// **Example**
/// ```cpp
/// MPI_Init(&argc, &argv);
/// {
///   mldiag::distributed::mpi_context mpi(MPI_COMM_WORLD);
///   mldiag::tensor_stats local = mldiag::compute_stats(my_shard);  // this rank's part
///   mldiag::tensor_stats global = mpi.allreduce(local);            // the whole tensor's
/// }
/// MPI_Finalize();
/// ```
class mpi_context {
 public:
  explicit mpi_context(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    int on = 0;
    MPI_Initialized(&on);
    if (on == 0) throw error("mpi_context: MPI is not initialized; call MPI_Init before constructing it");
    int done = 0;
    MPI_Finalized(&done);
    if (done != 0) throw error("mpi_context: MPI is already finalized; construct it between MPI_Init and MPI_Finalize");
    if (comm == MPI_COMM_NULL) throw error("mpi_context: the communicator is MPI_COMM_NULL; pass one this rank belongs to");
    detail::mpi_check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    make<tensor_stats>(stats_);
    make<entropy_stats>(entropy_);
    make<cell>(cells_);
  }
  mpi_context(const mpi_context&) = delete;
  mpi_context& operator=(const mpi_context&) = delete;
  ~mpi_context() {
    int done = 0;
    MPI_Finalized(&done);
    if (done != 0) return;  // too late to free: MPI_Finalize released them
    for (auto* p : {&stats_, &entropy_, &cells_}) {
      if (p->op != MPI_OP_NULL) MPI_Op_free(&p->op);
      if (p->type != MPI_DATATYPE_NULL) MPI_Type_free(&p->type);
    }
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }

  /// Collective: replaces each element of `inout` by the merge of that element over all
  /// ranks, in rank order; every rank gets the result. One MPI call for the whole span
  /// (all ranks must pass spans of the same length).
  void allreduce(std::span<tensor_stats> inout, merge_order order = merge_order::tree) { reduce_all(inout, stats_, order); }
  void allreduce(std::span<entropy_stats> inout, merge_order order = merge_order::tree) {
    reduce_all(inout, entropy_, order);
  }
  [[nodiscard]] tensor_stats allreduce(tensor_stats s, merge_order order = merge_order::tree) {
    allreduce(std::span<tensor_stats>(&s, 1), order);
    return s;
  }
  [[nodiscard]] entropy_stats allreduce(entropy_stats e, merge_order order = merge_order::tree) {
    allreduce(std::span<entropy_stats>(&e, 1), order);
    return e;
  }

  /// Collective: the merge over all ranks arrives on `root` only (MPI_Reduce; other ranks'
  /// `inout` are left as they were).
  void reduce(std::span<tensor_stats> inout, int root = 0) { reduce_root(inout, stats_, root); }
  void reduce(std::span<entropy_stats> inout, int root = 0) { reduce_root(inout, entropy_, root); }

  /// Collective: every rank's `seconds`, rank r at index r (MPI_Allgather of one double).
  [[nodiscard]] std::vector<double> gather_step_times(double seconds) {
    std::vector<double> all(static_cast<std::size_t>(size_));
    detail::mpi_check(MPI_Allgather(&seconds, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_), "MPI_Allgather (step times)");
    return all;
  }

  /// Collective: the findings of all ranks, one entry per problem with the ranks it affects
  /// (see `deduplicate`), on `root`; an empty vector elsewhere. Pass root = -1 to get them on
  /// every rank.
  [[nodiscard]] std::vector<ranked_finding> gather_findings(std::span<const finding> local, int root = 0) {
    if (root < -1 || root >= size_)
      throw error("gather_findings: root " + std::to_string(root) + " is not a rank of this communicator (0.." +
                  std::to_string(size_ - 1) + ", or -1 for all)");
    std::vector<char> bytes;
    write_findings(local, bytes);
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw error("gather_findings: " + std::to_string(bytes.size()) + " bytes of findings on one rank; deduplicate locally first");
    const int n = static_cast<int>(bytes.size());
    std::vector<int> counts(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    if (root == -1) detail::mpi_check(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather (finding sizes)");
    else detail::mpi_check(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_), "MPI_Gather (finding sizes)");
    const bool receives = root == -1 || root == rank_;
    long long total = 0;
    if (receives) {
      for (std::size_t r = 0; r < counts.size(); ++r) {
        offsets[r] = static_cast<int>(total);
        total += counts[r];
      }
      if (total > std::numeric_limits<int>::max())
        throw error("gather_findings: " + std::to_string(total) + " bytes of findings in all; gather fewer (e.g. warnings only)");
    }
    std::vector<char> all(static_cast<std::size_t>(total));
    if (root == -1)
      detail::mpi_check(MPI_Allgatherv(bytes.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, comm_),
                        "MPI_Allgatherv (findings)");
    else
      detail::mpi_check(MPI_Gatherv(bytes.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, root, comm_),
                        "MPI_Gatherv (findings)");
    if (!receives) return {};
    std::vector<std::vector<finding>> per_rank;
    for (std::size_t r = 0; r < counts.size(); ++r)
      per_rank.push_back(read_findings(std::span<const char>(all.data() + offsets[r], static_cast<std::size_t>(counts[r]))));
    return deduplicate(per_rank);
  }

  /// Collective, for the snapshot merge: cells merged over all ranks (MPI_Allreduce), or to
  /// `root` only (MPI_Reduce).
  void allreduce(std::span<cell> inout) { reduce_all(inout, cells_, merge_order::tree); }
  void reduce(std::span<cell> inout, int root) { reduce_root(inout, cells_, root); }

 private:
  template <class T>
  void make(detail::mpi_type_op& t) {
    detail::mpi_check(MPI_Type_contiguous(static_cast<int>(sizeof(T)), MPI_BYTE, &t.type), "MPI_Type_contiguous");
    detail::mpi_check(MPI_Type_commit(&t.type), "MPI_Type_commit");
    // commute = 0: MPI must keep the ranks in order, the guarantee a fixed merge order needs.
    detail::mpi_check(MPI_Op_create(&detail::merge_op<T>, 0, &t.op), "MPI_Op_create");
  }
  static int count_of(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw error("mpi_context: " + std::to_string(n) + " items in one call; MPI counts are int: split the call");
    return static_cast<int>(n);
  }
  template <class T>
  void reduce_all(std::span<T> inout, const detail::mpi_type_op& t, merge_order order) {
    const int n = count_of(inout.size());
    if (n == 0 && order == merge_order::tree) {
      // Still collective: a rank that returned early would leave the others waiting.
      detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, inout.data(), 0, t.type, t.op, comm_), "MPI_Allreduce");
      return;
    }
    if (order == merge_order::tree) {
      detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, inout.data(), n, t.type, t.op, comm_), "MPI_Allreduce");
      return;
    }
    gathered_.resize(inout.size() * static_cast<std::size_t>(size_) * sizeof(T));
    detail::mpi_check(MPI_Allgather(inout.data(), n, t.type, gathered_.data(), n, t.type, comm_), "MPI_Allgather");
    for (std::size_t i = 0; i < inout.size(); ++i) {
      T acc;
      std::memcpy(&acc, gathered_.data() + i * sizeof(T), sizeof(T));
      for (std::size_t r = 1; r < static_cast<std::size_t>(size_); ++r) {
        T next;
        std::memcpy(&next, gathered_.data() + (r * inout.size() + i) * sizeof(T), sizeof(T));
        if constexpr (std::is_same_v<T, cell>) {
          combine(acc, next);  // the result lands in `next`, the higher rank's side
          acc = next;
        } else {
          acc.merge(next);
        }
      }
      inout[i] = acc;
    }
  }
  template <class T>
  void reduce_root(std::span<T> inout, const detail::mpi_type_op& t, int root) {
    if (root < 0 || root >= size_)
      throw error("reduce: root " + std::to_string(root) + " is not a rank of this communicator (0.." + std::to_string(size_ - 1) + ")");
    const int n = count_of(inout.size());
    if (rank_ == root)
      detail::mpi_check(MPI_Reduce(MPI_IN_PLACE, inout.data(), n, t.type, t.op, root, comm_), "MPI_Reduce");
    else
      detail::mpi_check(MPI_Reduce(inout.data(), nullptr, n, t.type, t.op, root, comm_), "MPI_Reduce");
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  detail::mpi_type_op stats_, entropy_, cells_;
  std::vector<unsigned char> gathered_;
};

/// Merges each step's snapshot across ranks, so that every rank's detectors see the whole
/// model and the whole batch: statistics of sharded tensors merge, replicas are checked for
/// agreement, the loss is the mean over ranks, per-device evidence (timings, memory,
/// efficiency) is the worst rank's, and each rank's step time lands in `rank_step_times`.
///
/// One MPI_Allreduce of 104-byte cells per step (one cell per tensor and per header field)
/// and, with `gather_step_times`, one MPI_Allgather of a double. The first step, and any step
/// where a rank shows a name no rank showed before, costs one more round: the ranks all-gather
/// the new names and agree on a larger layout. Collective: call it on every rank each step.
///
/// **Example**
/// ```cpp
/// mldiag::distributed::mpi_context mpi;
/// mldiag::distributed::snapshot_merger merge(mpi, mldiag::distributed::merge_options::fully_sharded());
/// mldiag::monitor mon;
/// merge.attach(mon);   // every end_step() merges before the detectors run
/// ```
class snapshot_merger {
 public:
  explicit snapshot_merger(mpi_context& mpi, merge_options options = {}) : mpi_(&mpi), options_(std::move(options)) {}
  // attach() hands the monitor a hook that points here: a copy or a move would leave it dangling.
  snapshot_merger(const snapshot_merger&) = delete;
  snapshot_merger& operator=(const snapshot_merger&) = delete;

  /// Collective: merges `s` (names from `names`, which may gain the names of other ranks'
  /// tensors) in place. Throws mldiag::error when the ranks are at different steps.
  void merge(snapshot& s, name_table& names) {
    report_.clear();
    const int root = options_.root;
    if (root < -1 || root >= mpi_->size())
      throw error("snapshot_merger: merge_options::root " + std::to_string(root) + " is not a rank of this communicator (0.." +
                  std::to_string(mpi_->size() - 1) + ", or -1 for every rank)");
    const double mine = detail::to_wire(own_step_time(s.timings));  // NaN: no time on the wire
    const std::uint64_t unknown = pack(s, mpi_->rank(), layout_, cells_);
    if (root == -1) {
      // The h_unknown cell counts, over all ranks, the pieces the layout lacks: one all-reduce
      // both merges and tells every rank whether a new layout is needed (the common case: no).
      mpi_->allreduce(std::span<cell>(cells_));
      if (cells_[snapshot_layout::h_unknown].get<std::uint64_t>() != 0) {
        renegotiate(s, names);
        pack(s, mpi_->rank(), layout_, cells_);
        mpi_->allreduce(std::span<cell>(cells_));
        report_.renegotiated = true;
      }
    } else {
      // Only the root gets the cells, so every rank learns first, from one small all-reduce,
      // whether the steps agree and whether a new layout is needed: a decision all ranks must
      // take together (an error on the root alone would leave the others in the next collective).
      long long probe[3] = {static_cast<long long>(unknown), static_cast<long long>(s.step), -static_cast<long long>(s.step)};
      detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, probe, 3, MPI_LONG_LONG, MPI_MAX, mpi_->comm()), "MPI_Allreduce (merge probe)");
      if (probe[1] != -probe[2])
        throw error("distributed merge: ranks are at different steps (" + std::to_string(-probe[2]) + " to " +
                    std::to_string(probe[1]) + "); every rank must end the same step together (one merge per step, on all ranks)");
      if (probe[0] != 0) {
        renegotiate(s, names);
        pack(s, mpi_->rank(), layout_, cells_);
        report_.renegotiated = true;
      }
      mpi_->reduce(std::span<cell>(cells_), root);
    }
    const bool receives = root == -1 || root == mpi_->rank();
    if (options_.gather_step_times) {
      times_.resize(static_cast<std::size_t>(mpi_->size()));
      if (root == -1)
        detail::mpi_check(MPI_Allgather(&mine, 1, MPI_DOUBLE, times_.data(), 1, MPI_DOUBLE, mpi_->comm()), "MPI_Allgather (step times)");
      else
        detail::mpi_check(MPI_Gather(&mine, 1, MPI_DOUBLE, times_.data(), 1, MPI_DOUBLE, root, mpi_->comm()), "MPI_Gather (step times)");
    }
    if (!receives) return;
    unpack(cells_, layout_, s, names, report_);
    if (options_.gather_step_times) {
      s.rank_step_times.clear();
      bool all = true;
      for (double t : times_) all = all && std::isfinite(t);
      if (all) s.rank_step_times.assign(times_.begin(), times_.end());  // the snapshot's capacity: no allocation
    }
  }

  /// Makes `mon` merge every step before its detectors run (through monitor::set_step_hook).
  /// What the merge notices becomes findings of that step, on every rank: "replicas out of
  /// sync" (Q1, critical; where: `param/<name>`, `grad/<name>`, ...) when a replicated tensor
  /// differs across ranks, and "ranks disagree" (Q1, warning) for the learning rate, loss
  /// scale or gradient norm; each once when it starts, again only after the ranks agreed.
  /// The merger must outlive the monitor's steps.
  void attach(monitor& mon) {
    mon.set_step_hook([this, &mon](snapshot& s, name_table& names) {
      merge(s, names);
      report_findings(s.step, mon);
    });
  }

  /// What the last merge noticed (replicas that differ, scalars that should agree but do not).
  [[nodiscard]] const merge_report& last_report() const noexcept { return report_; }
  /// Bytes this rank sends into the merge each step, in steady state: the cells of the
  /// all-reduce plus the step-time double (MPI's algorithm moves each about twice).
  [[nodiscard]] std::size_t bytes_per_step() const noexcept {
    return layout_.size() * sizeof(cell) + (options_.gather_step_times ? sizeof(double) : 0);
  }
  [[nodiscard]] const snapshot_layout& layout() const noexcept { return layout_; }

 private:
  void renegotiate(const snapshot& s, name_table& names) {
    std::vector<char> mine;
    const auto missing = missing_keys(s, names, layout_);
    detail::put<std::uint64_t>(mine, missing.size());
    for (const auto& k : missing) {
      detail::put<std::uint8_t>(mine, k.slot);
      detail::put_string(mine, k.name);
    }
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(mpi_->size())), offsets(counts.size());
    detail::mpi_check(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, mpi_->comm()), "MPI_Allgather (layout sizes)");
    int total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      offsets[r] = total;
      total += counts[r];
    }
    std::vector<char> all(static_cast<std::size_t>(total));
    detail::mpi_check(MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, mpi_->comm()),
                      "MPI_Allgatherv (layout names)");
    // Every rank adds the same keys in the same order (rank 0's first), so layouts agree.
    for (std::size_t r = 0; r < counts.size(); ++r) {
      detail::byte_reader in(std::span<const char>(all.data() + offsets[r], static_cast<std::size_t>(counts[r])));
      const auto m = in.get<std::uint64_t>();
      for (std::uint64_t i = 0; i < m; ++i) {
        snapshot_layout::key k;
        k.slot = in.get<std::uint8_t>();
        k.name = in.get_string();
        layout_.add(k, names, options_);
      }
    }
  }

  void report_findings(std::int64_t step, monitor& mon) {
    now_.clear();
    for (const auto& [r, name] : report_.replica_mismatches) now_.push_back(location(r, name));
    for (const auto& text : report_.scalar_mismatches) now_.push_back(text.substr(0, text.find(" differs")));
    for (const auto& key : now_) {
      if (std::find(open_.begin(), open_.end(), key) != open_.end()) continue;  // reported at its onset
      const bool replica = key.find('/') != std::string::npos;
      finding f = make_finding(question::convergence, replica ? symptoms::replicas_out_of_sync : symptoms::ranks_disagree,
                                          replica ? severity::critical : severity::warning, step, "distributed_merge",
                                          {{"ranks", static_cast<double>(mpi_->size())}});
      f.where.emplace_back(key, 1.0);
      mon.add_finding(std::move(f));
    }
    open_.swap(now_);
  }

  mpi_context* mpi_;
  merge_options options_;
  std::vector<std::string> open_, now_;
  snapshot_layout layout_;
  std::vector<cell> cells_;
  std::vector<double> times_;
  merge_report report_;
};

}  // namespace mldiag::distributed
