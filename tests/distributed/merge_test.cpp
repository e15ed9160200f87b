// SPDX-License-Identifier: Apache-2.0
// The snapshot merge's algebra without MPI: three simulated ranks pack their snapshots, the
// cells are folded in rank order (what MPI does with the non-commutative operation), and the
// unpacked snapshot is checked field by field against values derived by hand. Runs under
// ASan/UBSan with leak checking (the MPI tests cannot: Open MPI leaks at finalize).
#include "mldiag/distributed/merge.hpp"
#include "mldiag/stats/compute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace md = mldiag::distributed;
using mldiag::role;
using mldiag::snapshot;
using mldiag::tensor_stats;

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

tensor_stats stats_of(std::vector<double> v) { return mldiag::compute_stats(std::span<const double>(v)); }

// Packs every rank's snapshot against one layout (agreed first, as snapshot_merger does),
// folds the cells in rank order and unpacks into `out`.
void merge_ranks(std::vector<snapshot>& ranks, mldiag::name_table& names, const md::merge_options& o, snapshot& out,
                 md::merge_report& report) {
  md::snapshot_layout layout;
  for (const auto& s : ranks)
    for (const auto& k : md::missing_keys(s, names, layout)) layout.add(k, names, o);
  std::vector<md::cell> acc, next;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto unknown = md::pack(ranks[r], static_cast<int>(r), layout, r == 0 ? acc : next);
    CHECK(unknown == 0);
    if (r > 0) {
      md::combine(acc, next);  // acc = lower ranks, next = rank r: the result lands in next
      acc.swap(next);
    }
  }
  out = ranks[0];
  md::unpack(acc, layout, out, names, report);
}

}  // namespace

TEST_CASE("snapshot cells merge each field the documented way") {
  mldiag::name_table names;
  const auto w = names.intern("w"), h = names.intern("head"), r = names.intern("router"), l = names.intern("layer0");
  const std::vector<std::vector<double>> shard = {{1, 2, 3}, {4, 5}, {-6, 0, not_a_number}};
  std::vector<snapshot> ranks(3);
  for (std::size_t i = 0; i < 3; ++i) {
    auto& s = ranks[i];
    s.clear(7);
    s.loss = 1.0 + static_cast<double>(i);         // mean 2
    s.lr = 0.5;                                    // agreed
    s.gradients.push_back({w, stats_of(shard[i])});  // sharded below
    s.parameters.push_back({w, stats_of({1, 1})});   // a replica on every rank
    s.timings.total = 0.1 * static_cast<double>(i + 1);
    s.timings.communication = i == 1 ? std::optional<double>(0.05) : std::nullopt;
    s.memory.allocated = 10.0;
    s.memory.capacity = 100.0;
    s.memory.reserved = i == 1 ? 90.0 : 20.0;  // rank 1 is the fullest device
    s.efficiency.mfu = i == 2 ? 0.2 : 0.4;      // rank 2 is the least utilized
    s.drift.emplace_back(w, 0.01 * static_cast<double>(i));
    mldiag::entropy_stats e;
    e.add_row(1.0 + static_cast<double>(i), 8);
    s.attention.push_back({h, e});
    mldiag::router_evidence re;
    re.id = r;
    re.experts = 8;
    re.dead = static_cast<std::uint32_t>(i);
    re.normalized_entropy = 0.9 - 0.1 * static_cast<double>(i);
    re.max_over_mean = 1.0 + static_cast<double>(i);
    s.routers.push_back(re);
    s.layer_times.push_back({l, i == 0 ? 0.3 : 0.1});
  }
  ranks[1].loss.reset();  // rank 1 has no loss this step: the mean is over ranks 0 and 2
  md::merge_options o = md::merge_options::fully_sharded();
  o.per_tensor = [](role ro, std::string_view) -> std::optional<md::sharding> {
    if (ro == role::parameter) return md::sharding::replicated;
    return std::nullopt;
  };
  snapshot out;
  md::merge_report report;
  merge_ranks(ranks, names, o, out, report);

  CHECK(out.step == 7);
  REQUIRE(out.loss);
  CHECK(*out.loss == 2.0);  // (1 + 3) / 2
  CHECK(out.lr == 0.5);
  CHECK(report.scalar_mismatches.empty());
  REQUIRE(out.gradients.size() == 1);
  const tensor_stats whole = stats_of({1, 2, 3, 4, 5, -6, 0, not_a_number});
  CHECK(out.gradients[0].stats.count == 8);
  CHECK(out.gradients[0].stats.nan == 1);
  CHECK(out.gradients[0].stats.zeros == 1);
  CHECK(out.gradients[0].stats.min == -6.0);
  CHECK(out.gradients[0].stats.l2_norm() == doctest::Approx(whole.l2_norm()).epsilon(1e-15));
  CHECK(out.gradients[0].stats.l2_norm() == doctest::Approx(std::sqrt(91.0)).epsilon(1e-15));  // 1+4+9+16+25+36
  REQUIRE(out.parameters.size() == 1);
  CHECK(out.parameters[0].stats.count == 2);  // a replica, not 3 x 2 elements
  CHECK(report.replica_mismatches.empty());
  CHECK(out.timings.total == doctest::Approx(0.3));
  CHECK(out.timings.communication == 0.05);
  CHECK(out.memory.reserved == 90.0);
  CHECK(out.efficiency.mfu == 0.2);
  REQUIRE(out.drift.size() == 1);
  CHECK(out.drift[0].second == 0.02);
  REQUIRE(out.attention.size() == 1);
  CHECK(out.attention[0].stats.rows == 3);
  CHECK(out.attention[0].stats.mean() == doctest::Approx(2.0));
  REQUIRE(out.routers.size() == 1);
  CHECK(out.routers[0].dead == 2);
  CHECK(out.routers[0].normalized_entropy == doctest::Approx(0.7));
  CHECK(out.routers[0].max_over_mean == 3.0);
  REQUIRE(out.layer_times.size() == 1);
  CHECK(out.layer_times[0].seconds == 0.3);

  // The step time a rank contributes leaves its communication out.
  CHECK(md::own_step_time(ranks[1].timings) == doctest::Approx(0.15));
  CHECK(md::own_step_time(ranks[0].timings) == doctest::Approx(0.1));
}

TEST_CASE("snapshot cells flag replicas and scalars that differ and keep absent values absent") {
  mldiag::name_table names;
  const auto w = names.intern("w");
  std::vector<snapshot> ranks(2);
  for (std::size_t i = 0; i < 2; ++i) {
    ranks[i].clear(1);
    ranks[i].parameters.push_back({w, stats_of({1.0, i == 0 ? 2.0 : 2.0000000000000004})});
    ranks[i].loss_scale = i == 0 ? 1024.0 : 2048.0;
  }
  snapshot out;
  md::merge_report report;
  merge_ranks(ranks, names, md::merge_options::data_parallel(), out, report);
  REQUIRE(report.replica_mismatches.size() == 1);
  CHECK(report.replica_mismatches[0].first == role::parameter);
  CHECK(report.replica_mismatches[0].second == "w");
  REQUIRE(report.scalar_mismatches.size() == 1);
  CHECK(report.scalar_mismatches[0].find("loss scale differs across ranks (1024") != std::string::npos);
  CHECK(out.loss_scale == 1024.0);  // rank 0's
  CHECK(out.parameters[0].stats.max == 2.0);
  CHECK(!out.loss);
  CHECK(!out.timings.total);
  CHECK(!out.memory.allocated);
  CHECK(!out.grad_norm);
}

TEST_CASE("ranks at different steps cannot be merged") {
  mldiag::name_table names;
  std::vector<snapshot> ranks(2);
  ranks[0].clear(3);
  ranks[1].clear(4);
  snapshot out;
  md::merge_report report;
  CHECK_THROWS_WITH(merge_ranks(ranks, names, {}, out, report), doctest::Contains("ranks are at different steps (3 to 4)"));
}

TEST_CASE("a snapshot with names the layout lacks is counted and the layout grows in order") {
  mldiag::name_table names;
  snapshot s;
  s.clear(0);
  s.gradients.push_back({names.intern("b"), stats_of({1})});
  s.gradients.push_back({names.intern("a"), stats_of({2})});
  md::snapshot_layout layout;
  std::vector<md::cell> cells;
  CHECK(md::pack(s, 0, layout, cells) == 2);
  CHECK(cells[md::snapshot_layout::h_unknown].get<std::uint64_t>() == 2);
  const auto missing = md::missing_keys(s, names, layout);
  REQUIRE(missing.size() == 2);
  CHECK(missing[0].name == "b");  // snapshot order, not sorted
  for (const auto& k : missing) layout.add(k, names, {});
  CHECK(layout.size() == md::snapshot_layout::header_cells + 2);
  CHECK(md::pack(s, 0, layout, cells) == 0);
  CHECK(md::missing_keys(s, names, layout).empty());
}

TEST_CASE("findings with the same question, symptom, detector and places are one problem") {
  auto make = [](std::string symptom, std::string place, mldiag::severity sev, std::int64_t step, double score) {
    mldiag::finding f;
    f.symptom = std::move(symptom);
    f.detector = "d";
    f.severity = sev;
    f.first_step = f.last_step = step;
    f.where.emplace_back(std::move(place), score);
    f.evidence.emplace_back("score", score);
    return f;
  };
  using mldiag::severity;
  const std::vector<std::vector<mldiag::finding>> per_rank = {
      {make("vanishing gradients", "l0", severity::warning, 5, 1.0)},
      {make("vanishing gradients", "l0", severity::critical, 9, 3.0), make("vanishing gradients", "l1", severity::warning, 2, 2.0)},
      {},
      {make("vanishing gradients", "l0", severity::warning, 4, 2.0)},
  };
  const auto merged = md::deduplicate(per_rank);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].ranks == std::vector<int>{0, 1, 3});
  CHECK(merged[0].finding.first_step == 4);
  CHECK(merged[0].finding.last_step == 9);
  CHECK(merged[0].finding.severity == severity::critical);
  CHECK(merged[0].finding.evidence.at(0).second == 3.0);  // the critical rank's evidence
  CHECK(merged[0].finding.where.at(0).second == 3.0);
  CHECK(merged[1].ranks == std::vector<int>{1});
  CHECK(merged[1].finding.where.at(0).first == "l1");
}
