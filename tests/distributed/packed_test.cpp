// SPDX-License-Identifier: Apache-2.0
// The packed merge across ranks (the NCCL merge's algebra), simulated on the host: P ranks
// each compute their shard's statistics, the test does the elementwise MIN and SUM across
// ranks itself, and the result must equal the statistics of the concatenated data (counts
// and extrema exactly, moments to 1e-12) and a left fold of tensor_stats::merge.
#include <doctest/doctest.h>

#include "mldiag/distributed/packed.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/entropy.hpp"

#include "../support/merged_stats_check.hpp"
#include "../support/reference.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace md = mldiag::distributed;

namespace {

using shard_list = std::vector<std::vector<double>>;  // [rank][element]

// The all-reduce, as NCCL does it: every rank ends with the elementwise op over all ranks.
// `order` says in which order the ranks' buffers are combined (NCCL does not promise one).
void all_reduce(std::vector<std::vector<double>>& per_rank,
                const std::function<double(double, double)>& op,
                const std::vector<std::size_t>& order) {
  std::vector<double> total = per_rank[order[0]];
  for (std::size_t k = 1; k < order.size(); ++k)
    for (std::size_t i = 0; i < total.size(); ++i)
      total[i] = op(total[i], per_rank[order[k]][i]);
  for (auto& r : per_rank)
    r = total;
}

double min_op(double a, double b) {
  return b < a ? b : a;
}
double sum_op(double a, double b) {
  return a + b;
}

// Runs the three rounds over `P` ranks' lists and returns the global lists rank 0 ends with
// (checking that every rank ends with the same ones).
struct merged {
  std::vector<mldiag::tensor_stats> stats;
  std::vector<mldiag::entropy_stats> entropy;
};

merged packed_merge(const std::vector<std::vector<mldiag::tensor_stats>>& stats,
                    const std::vector<std::vector<mldiag::entropy_stats>>& entropy,
                    const std::vector<std::size_t>& order) {
  const std::size_t P = stats.size();
  const md::packed_layout L{stats[0].size(), entropy[0].size()};
  std::vector<std::vector<double>> a(P, std::vector<double>(L.a_size()));
  std::vector<std::vector<double>> b(P, std::vector<double>(L.b_size()));
  std::vector<std::vector<double>> c(P, std::vector<double>(L.c_size()));
  for (std::size_t r = 0; r < P; ++r)
    md::pack_round_a(stats[r], entropy[r], a[r]);
  all_reduce(a, min_op, order);
  for (std::size_t r = 0; r < P; ++r)
    md::pack_round_b(stats[r], entropy[r], a[r], b[r]);
  all_reduce(b, sum_op, order);
  for (std::size_t r = 0; r < P; ++r)
    md::pack_round_c(stats[r], a[r], b[r], c[r]);
  all_reduce(c, sum_op, order);
  std::vector<merged> out(P);
  for (std::size_t r = 0; r < P; ++r) {
    out[r].stats = stats[r];
    out[r].entropy = entropy[r];
    md::finish_rounds(a[r], b[r], c[r], out[r].stats, out[r].entropy);
  }
  for (std::size_t r = 1; r < P; ++r) {
    CHECK(out[r].stats == out[0].stats);
    CHECK(out[r].entropy == out[0].entropy);
  }
  return out[0];
}

// A shard's values for test tensor `kind`, `n` of them.
std::vector<double> shard_values(int kind, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.5, 2.0);
  std::vector<double> x(n);
  for (auto& v : x) {
    switch (kind) {
      case 0:
        v = normal(rng);
        break;  // specials planted below
      case 1:
        v = 1e4 + normal(rng);
        break;  // |mean| >> std: 1e4 vs 2 (see below)
      case 2:
        v = rng() % 2 ? 1e30 * normal(rng) : 1e-30 * normal(rng);
        break;
      case 3:
        v = 1e-30 * normal(rng);
        break;  // negative scale exponent
      case 4:
        v = 1e305 * normal(rng);
        break;  // exponent clamped at 1000; sum x^2 overflows
      default:
        v = -3.0 - 1e-3 * normal(rng);
        break;  // all negative: max is negative
    }
  }
  if (kind == 0 && n > 0) {
    for (int k = 0; k < 8; ++k) {
      double& v = x[rng() % n];
      switch (k % 4) {
        case 0:
          v = std::numeric_limits<double>::quiet_NaN();
          break;
        case 1:
          v = k < 4 ? INFINITY : -INFINITY;
          break;
        case 2:
          v = k < 4 ? 0.0 : -0.0;
          break;
        default:
          v = std::numeric_limits<double>::denorm_min() * static_cast<double>(k);
          break;
      }
    }
  }
  return x;
}

std::vector<double> all_non_finite(std::size_t n) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] =
        i % 3 == 0 ? std::numeric_limits<double>::quiet_NaN() : (i % 3 == 1 ? INFINITY : -INFINITY);
  }
  return x;
}

constexpr int tensor_kinds = 6;

// One rank's entropy input: `rows` rows of `len` logits (row 0 of rank 1 invalid: a NaN).
std::vector<float> shard_logits(std::size_t rows, std::size_t len, std::mt19937_64& rng,
                                bool plant_nan) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> z(rows * len);
  for (auto& v : z)
    v = normal(rng);
  if (plant_nan && !z.empty()) z[0] = NAN;
  if (z.size() > 5) z[5] = -INFINITY;  // masked
  return z;
}

template <class T>
std::vector<T> concat(const std::vector<std::vector<T>>& parts) {
  std::vector<T> all;
  for (const auto& p : parts)
    all.insert(all.end(), p.begin(), p.end());
  return all;
}



void run_ranks(std::size_t P, std::uint64_t seed) {
  CAPTURE(P);
  std::mt19937_64 rng(seed);
  // Rank 1 holds nothing (P >= 3); one rank holds only NaN and +-Inf (P >= 2).
  const std::size_t empty_rank = P >= 3 ? 1 : P;
  const std::size_t non_finite_rank = P >= 2 ? (P >= 4 ? 2 : P - 1) : P;

  // [tensor][rank] shards; tensor tensor_kinds is empty on every rank, tensor_kinds + 1 is
  // non-finite on every rank.
  const std::size_t N = tensor_kinds + 2;
  std::vector<shard_list> shards(N, shard_list(P));
  for (std::size_t t = 0; t < N; ++t) {
    for (std::size_t r = 0; r < P; ++r) {
      const std::size_t n = rng() % 3000;
      if (t == tensor_kinds || r == empty_rank) continue;
      if (t == tensor_kinds + 1 || r == non_finite_rank)
        shards[t][r] = all_non_finite(n + 1);
      else
        shards[t][r] = shard_values(static_cast<int>(t), n, rng);
    }
  }
  // Entropies: logits of rows of 37, and probabilities (normalized |logits|) of rows of 10.
  const std::size_t M = 2;
  std::vector<std::vector<std::vector<float>>> rows(M, std::vector<std::vector<float>>(P));
  for (std::size_t r = 0; r < P; ++r) {
    const std::size_t n_rows = r == empty_rank ? 0 : rng() % 40;
    rows[0][r] = shard_logits(n_rows, 37, rng, r == 1);
    rows[1][r] = shard_logits(n_rows, 10, rng, r == 1);
    for (auto& p : rows[1][r])
      p = std::isfinite(p) ? std::fabs(p) : p;
  }
  auto entropy_of = [](std::size_t j, const std::vector<float>& z) {
    return j == 0 ? mldiag::entropy_from_logits(z, 37) : mldiag::entropy_from_probs(z, 10);
  };

  std::vector<std::vector<mldiag::tensor_stats>> local(P, std::vector<mldiag::tensor_stats>(N));
  std::vector<std::vector<mldiag::entropy_stats>> local_entropy(
      P, std::vector<mldiag::entropy_stats>(M));
  for (std::size_t r = 0; r < P; ++r) {
    for (std::size_t t = 0; t < N; ++t)
      local[r][t] = mldiag::compute_stats(shards[t][r]);
    for (std::size_t j = 0; j < M; ++j)
      local_entropy[r][j] = entropy_of(j, rows[j][r]);
  }

  std::vector<std::size_t> order(P), reversed(P);
  for (std::size_t r = 0; r < P; ++r)
    order[r] = r, reversed[r] = P - 1 - r;
  const merged got = packed_merge(local, local_entropy, order);
  const merged got_reversed = packed_merge(local, local_entropy, reversed);

  for (std::size_t t = 0; t < N; ++t) {
    CAPTURE(t);
    const std::vector<double> whole = concat(shards[t]);
    const mldiag::tensor_stats single = mldiag::compute_stats(whole);
    mldiag::tensor_stats fold;
    for (std::size_t r = 0; r < P; ++r)
      fold.merge(local[r][t]);
    mldiag_test::check_merged(got.stats[t], single);
    mldiag_test::check_merged(got.stats[t], fold);
    mldiag_test::check_against(got.stats[t],
                               mldiag_test::reference_of(std::span<const double>(whole)));
    // Another order of the ranks: counts and extrema identical, moments within rounding.
    mldiag_test::check_merged(got_reversed.stats[t], got.stats[t]);
  }
  for (std::size_t j = 0; j < M; ++j) {
    CAPTURE(j);
    const mldiag::entropy_stats single = entropy_of(j, concat(rows[j]));
    mldiag::entropy_stats fold;
    for (std::size_t r = 0; r < P; ++r)
      fold.merge(local_entropy[r][j]);
    mldiag_test::check_merged(got.entropy[j], single);
    mldiag_test::check_merged(got.entropy[j], fold);
    mldiag_test::check_merged(got_reversed.entropy[j], single);
  }
}

}  // namespace

TEST_CASE("the packed merge over 1 to 7 ranks equals the statistics of the concatenation") {
  for (std::size_t P : {1u, 2u, 3u, 4u, 7u})
    run_ranks(P, 100 + P);
}

// Tensor kind 1 has |mean| / std = 5000, where a merge through sum x^2 loses about
// 5000^2 * 1.1e-16 = 3e-9 of the variance. More is not a fair test of 1e-12: any merge of
// (n, mean, M2) summaries, tensor_stats::merge included, inherits the rounding of each
// shard's mean (1.1e-16 * |mean|) in the shard means' differences, a relative error of the
// variance of about 2.2e-16 * (|mean| / std) * sqrt(P / n_shard): 1e-10 at a ratio of 5e7
// with shards of 1500 (measured here: 8e-11 at P = 7).

TEST_CASE("the packed merge keeps the variance when the mean is 1e8 times the spread") {
  // Two ranks: 1e8 + {0, 1} and 1e8 + {2, 3}; variance 1.25.
  std::vector<std::vector<mldiag::tensor_stats>> local(2, std::vector<mldiag::tensor_stats>(1));
  std::vector<std::vector<mldiag::entropy_stats>> none(2);
  local[0][0] = mldiag::compute_stats(std::vector<double>{1e8, 1e8 + 1});
  local[1][0] = mldiag::compute_stats(std::vector<double>{1e8 + 2, 1e8 + 3});
  const merged got = packed_merge(local, none, {0, 1});
  CHECK(got.stats[0].mean() == 1e8 + 1.5);
  CHECK(got.stats[0].variance() == doctest::Approx(1.25).epsilon(1e-12));
  // The two-round merge through sum x^2 on the same summaries: 4e16 + 1.2e9 + 14 in float64
  // (spacing 8 there) minus n * mean^2 leaves nothing of the 5 that M2 is.
  double sum_sq = 0.0;
  for (const auto& r : local)
    sum_sq +=
        r[0].m2_scaled * std::ldexp(1.0, 2 * r[0].scale_exp) + 2.0 * r[0].mean() * r[0].mean();
  const double naive_m2 = sum_sq - 4.0 * got.stats[0].mean() * got.stats[0].mean();
  CHECK(std::fabs(naive_m2 - 5.0) > 0.5);
}

TEST_CASE("counts are exact below 2 to the 53 and the layout has the documented sizes") {
  const md::packed_layout L{500, 3};
  CHECK(L.a_size() == 3 * 500 + 4 * 3);
  CHECK(L.b_size() == 6 * 500 + 4 * 3);
  CHECK(L.c_size() == 500);
  CHECK(L.payload_bytes() == 8 * (10 * 500 + 8 * 3));
  CHECK(md::packed_layout{500, 0}.payload_bytes() == 40000);

  // Two ranks of 2^52 + 1 and 2^52 - 3 elements (all +Inf): 2^53 - 2 in all, exactly.
  mldiag::tensor_stats big;
  big.count = big.pos_inf = (std::uint64_t{1} << 52) + 1;
  mldiag::tensor_stats other;
  other.count = other.pos_inf = (std::uint64_t{1} << 52) - 3;
  std::vector<std::vector<mldiag::tensor_stats>> local{{big}, {other}};
  std::vector<std::vector<mldiag::entropy_stats>> none(2);
  const merged got = packed_merge(local, none, {0, 1});
  CHECK(got.stats[0].count == (std::uint64_t{1} << 53) - 2);
  CHECK(got.stats[0].pos_inf == (std::uint64_t{1} << 53) - 2);
  CHECK(got.stats[0].finite() == 0);
  CHECK(static_cast<double>((std::uint64_t{1} << 53) - 1) < md::exact_count_limit);
  // The limit is real: at 2^53 + 1 a double cannot hold the count.
  CHECK(static_cast<double>((std::uint64_t{1} << 53) + 1) == md::exact_count_limit);
}

TEST_CASE("empty lists on every rank merge to the defaults") {
  std::vector<std::vector<mldiag::tensor_stats>> local(3, std::vector<mldiag::tensor_stats>(2));
  std::vector<std::vector<mldiag::entropy_stats>> entropy(3, std::vector<mldiag::entropy_stats>(1));
  const merged got = packed_merge(local, entropy, {0, 1, 2});
  CHECK(got.stats[0] == mldiag::tensor_stats{});
  CHECK(got.stats[1] == mldiag::tensor_stats{});
  CHECK(got.entropy[0] == mldiag::entropy_stats{});
}
