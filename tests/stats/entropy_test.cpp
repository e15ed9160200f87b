// SPDX-License-Identifier: Apache-2.0
// Row entropy against hand-derived values and a long double softmax.
#include <doctest/doctest.h>

#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/host_engine.hpp"

#include "wide_reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

// Entropy of softmax(z) in long double, the plain two-pass way.
long double softmax_entropy(const std::vector<double>& z) {
  long double m = -INFINITY;
  for (double v : z)
    if (!std::isinf(v)) m = std::max(m, static_cast<long double>(v));
  long double s = 0;
  for (double v : z)
    if (!std::isinf(v)) s += std::exp(static_cast<long double>(v) - m);
  long double h = 0;
  for (double v : z) {
    if (std::isinf(v)) continue;
    const long double p = std::exp(static_cast<long double>(v) - m) / s;
    if (p > 0) h -= p * std::log(p);  // 0 log 0 = 0 (p underflows for logits 2e308 apart)
  }
  return h;
}

constexpr double inf = std::numeric_limits<double>::infinity();

// The contract for logits of 32 bits or fewer (docs/stats.md): the host computes them in
// float lanes (issue 18), each row's entropy within 2e-6 (1 + log n) nats of the exact one,
// n its support. float64 logits keep the double path (1e-12 and tighter above).
double float_entropy_tol(double n) { return 2e-6 * (1.0 + std::log(n)); }

// Entropy of a probability row normalized to sum 1: the sum in the wide type (no overflow
// at 1e308, no lost digits of denormals), each p / S then in long double.
long double normalized_entropy(const std::vector<double>& p) {
  mldiag_test::wide s = 0;
  for (double v : p) s += static_cast<mldiag_test::wide>(v);
  long double h = 0;
  for (double v : p) {
    if (v <= 0) continue;
    const auto q = static_cast<long double>(static_cast<mldiag_test::wide>(v) / s);
    h -= q * std::log(q);
  }
  return h;
}

}  // namespace

TEST_CASE("entropy of softmax of -1 0 1 is 0.832396 nats") {
  const std::vector<double> z = {-1, 0, 1};
  const auto e = mldiag::entropy_from_logits(z, 3);
  CHECK(e.rows == 1);
  CHECK(e.mean() == doctest::Approx(0.832396).epsilon(1e-6));
  CHECK(e.normalized_mean() == doctest::Approx(0.832396 / std::log(3.0)).epsilon(1e-6));
  // The same distribution given as probabilities.
  const double s = std::exp(-1.0) + 1.0 + std::exp(1.0);
  const std::vector<double> p = {std::exp(-1.0) / s, 1.0 / s, std::exp(1.0) / s};
  CHECK(mldiag::entropy_from_probs(p, 3).mean() == doctest::Approx(0.832396).epsilon(1e-6));
}

TEST_CASE("uniform rows have entropy log n and one-hot rows have entropy 0") {
  std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f, 1.0f, 0.0f, 0.0f, 0.0f};
  const auto e = mldiag::entropy_from_probs(p, 4);
  CHECK(e.rows == 2);
  CHECK(e.max == doctest::Approx(std::log(4.0)).epsilon(1e-15));
  CHECK(e.min == 0.0);
  CHECK(e.normalized_max == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(e.normalized_min == 0.0);
  std::vector<double> z(1000, 7.5);
  CHECK(mldiag::entropy_from_logits(z, 1000).mean() == doctest::Approx(std::log(1000.0)).epsilon(1e-13));
}

TEST_CASE("huge logits 10000..10003 give the entropy of 0..3 and stay finite") {
  const std::vector<double> big = {10000, 10001, 10002, 10003}, small = {0, 1, 2, 3};
  const auto a = mldiag::entropy_from_logits(big, 4), b = mldiag::entropy_from_logits(small, 4);
  CHECK(std::isfinite(a.mean()));
  CHECK(a.mean() == doctest::Approx(b.mean()).epsilon(1e-14));
  CHECK(a.mean() == doctest::Approx(static_cast<double>(softmax_entropy(small))).epsilon(1e-14));
  // Descending order exercises the rescaling branch of the online update the other way.
  const std::vector<float> down = {10003, 10002, 10001, 10000};
  CHECK(std::fabs(mldiag::entropy_from_logits(down, 4).mean() - b.mean()) <= float_entropy_tol(4));
}

TEST_CASE("random logit rows in every dtype match the long double softmax") {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal(0.0, 3.0);
  const std::int64_t rows = 37, len = 1031;
  std::vector<double> z(static_cast<std::size_t>(rows * len));
  for (auto& v : z) v = normal(rng);
  std::vector<mldiag::bfloat16> zb;
  for (double v : z) zb.emplace_back(v);
  long double sum = 0, sum_b = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(z.begin() + r * len, z.begin() + (r + 1) * len), row_b;
    for (std::int64_t i = 0; i < len; ++i) row_b.push_back(static_cast<double>(zb[static_cast<std::size_t>(r * len + i)]));
    sum += softmax_entropy(row);
    sum_b += softmax_entropy(row_b);
  }
  CHECK(mldiag::entropy_from_logits(z, len).mean() == doctest::Approx(static_cast<double>(sum / rows)).epsilon(1e-12));
  CHECK(std::fabs(mldiag::entropy_from_logits(zb, len).mean() - static_cast<double>(sum_b / rows)) <=
        float_entropy_tol(static_cast<double>(len)));
}

TEST_CASE("masked -inf logits are left out and invalid rows are counted") {
  // Row 0: causal mask; row 1: NaN; row 2: all masked; row 3: +inf.
  const std::vector<double> z = {0, 1, -inf, -inf, 0, std::nan(""), 1, 2,
                                 -inf, -inf, -inf, -inf, 0, inf, 1, 2};
  const auto e = mldiag::entropy_from_logits(z, 4);
  CHECK(e.rows == 1);
  CHECK(e.invalid_rows == 3);
  CHECK(e.mean() == doctest::Approx(static_cast<double>(softmax_entropy({0, 1}))).epsilon(1e-14));
  CHECK(e.normalized_mean() == doctest::Approx(e.mean() / std::log(2.0)).epsilon(1e-14));
  // Probabilities: negative, NaN and all-zero rows are invalid.
  const std::vector<float> p = {0.5f, 0.5f, -0.1f, 1.1f, 0.0f, 0.0f, NAN, 1.0f};
  const auto q = mldiag::entropy_from_probs(p, 2);
  CHECK(q.rows == 1);
  CHECK(q.invalid_rows == 3);
}

TEST_CASE("entropy results merge and online states of row parts merge exactly") {
  const std::vector<double> a = {0, 1, 2, 3}, b = {5, 5, -3, 0, 1, 1, 1, 1};
  std::vector<double> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  const auto m = mldiag::merge(mldiag::entropy_from_logits(a, 4), mldiag::entropy_from_logits(b, 4));
  const auto d = mldiag::entropy_from_logits(ab, 4);
  CHECK(m.rows == d.rows);
  CHECK(m.mean() == doctest::Approx(d.mean()).epsilon(1e-15));
  CHECK(m.min == d.min);
  CHECK(m.max == d.max);
  // One row of 1000 logits split in two parts with states merged.
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(0.0, 5.0);
  std::vector<double> row(1000);
  for (auto& v : row) v = normal(rng);
  mldiag::logit_row_state left, right, whole;
  for (std::size_t i = 0; i < row.size(); ++i) (i < 377 ? left : right).add(row[i]), whole.add(row[i]);
  left.merge(right);
  CHECK(left.entropy() == doctest::Approx(whole.entropy()).epsilon(1e-13));
  CHECK(left.support == 1000);
}

TEST_CASE("row lengths that do not divide the tensor are refused") {
  const std::vector<float> z(10, 1.0f);
  CHECK_THROWS_WITH_AS((void)mldiag::entropy_from_logits(z, 3),
                       doctest::Contains("mldiag: entropy_from_logits: 10 elements do not divide into rows of 3"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS((void)mldiag::entropy_from_probs(z, 0), doctest::Contains("row length 0 is not positive"),
                       mldiag::error);
}

TEST_CASE("strided rows give the entropy of the gathered rows") {
  // [4 rows, 5 cols] stored column-major: rows are strided by 1, columns by 4.
  std::vector<double> colmajor(20);
  for (std::size_t i = 0; i < 20; ++i) colmajor[i] = std::sin(static_cast<double>(i));
  const mldiag::strided_view<double> rows(colmajor.data(), {4, 5}, {1, 4}, 20);
  std::vector<double> gathered;
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c) gathered.push_back(colmajor[r + 4 * c]);
  CHECK(mldiag::entropy_from_logits(rows, 5) == mldiag::entropy_from_logits(gathered, 5));
}

TEST_CASE("float64 logits at the range edge have their entropy, not a clamped NaN") {
  // x - m overflowed to -inf when the row spans 2e308, and e^-inf * -inf was NaN, clamped to
  // a valid 0 (issue 16). The reference is the two-pass long double softmax.
  constexpr double big = std::numeric_limits<double>::max();
  const std::vector<std::vector<double>> rows = {
      {-1e308, 1e308, 1e308}, {1e308, -1e308, 1e308}, {1e308, -1e308},
      {-big, big, -big, big}, {big, -big, big - 1e292, 3.0}, {-1e308, -1e308, 1e308, 1e308 - 1e292}};
  for (const auto& row : rows) {
    const auto e = mldiag::entropy_from_logits(row, static_cast<std::int64_t>(row.size()));
    CAPTURE(row[0]);
    CAPTURE(row.size());
    CHECK(e.rows == 1);
    CHECK(e.invalid_rows == 0);
    CHECK(e.mean() == doctest::Approx(static_cast<double>(softmax_entropy(row))).epsilon(1e-14));
  }
  CHECK(mldiag::entropy_from_logits(rows[0], 3).mean() == doctest::Approx(std::log(2.0)).epsilon(1e-15));
  // Parts of one row at opposite ends of the range merge the same way, in both orders.
  mldiag::logit_row_state lo, hi, lo2, hi2;
  lo.add(-1e308);
  hi.add(1e308);
  hi.add(1e308);
  lo2 = lo;
  hi2 = hi;
  lo.merge(hi);
  hi2.merge(lo2);
  CHECK(lo.entropy() == doctest::Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(hi2.entropy() == doctest::Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(lo.support == 3);
  // A state that is not a number stays one: the host then counts its row invalid.
  mldiag::logit_row_state bad;
  bad.add(0.0);
  bad.u = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(bad.entropy()));
}

TEST_CASE("float64 probability rows at the range edges are normalized without overflow") {
  constexpr double big = std::numeric_limits<double>::max();
  constexpr double tiny = std::numeric_limits<double>::denorm_min();
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> random_big(1000), random_tiny(1000), rising(600);
  for (auto& v : random_big) v = 1e305 * u(rng);
  for (auto& v : random_tiny) v = 1e-310 * u(rng);
  for (std::size_t i = 0; i < rising.size(); ++i) rising[i] = std::ldexp(1.0 + u(rng), static_cast<int>(3 * i) - 1074);
  const std::vector<std::vector<double>> rows = {
      {1e308, 1e308}, {big, big, big}, {big, 1e-300, tiny, 0.0, 1.0}, {tiny, tiny, tiny, tiny},
      {tiny, 2 * tiny, 3 * tiny}, random_big, random_tiny, rising};
  for (const auto& row : rows) {
    const auto e = mldiag::entropy_from_probs(row, static_cast<std::int64_t>(row.size()));
    CAPTURE(row[0]);
    CAPTURE(row.size());
    CHECK(e.rows == 1);
    CHECK(e.invalid_rows == 0);
    CHECK(e.mean() == doctest::Approx(static_cast<double>(normalized_entropy(row))).epsilon(1e-13));
  }
  CHECK(mldiag::entropy_from_probs(rows[0], 2).mean() == doctest::Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(mldiag::entropy_from_probs(rows[1], 3).mean() == doctest::Approx(std::log(3.0)).epsilon(1e-15));
  // Denormals scale up by 2^1021 at most (2^-1022 is the smallest power whose inverse is a
  // double), so H = log S - T/S is a difference of two numbers near -35: a few ulps of 35.
  CHECK(mldiag::entropy_from_probs(rows[3], 4).mean() == doctest::Approx(std::log(4.0)).epsilon(1e-14));
  // float32 rows agree with their float64 copies (the scaling is exact).
  std::vector<float> f = {3e38f, 3e38f, 1e-45f, 0.0f};
  std::vector<double> fd(f.begin(), f.end());
  CHECK(mldiag::entropy_from_probs(f, 4).mean() == doctest::Approx(static_cast<double>(normalized_entropy(fd))).epsilon(1e-14));
}

namespace {
template <class T>
T make_logit(double v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else return T(v);
}
}  // namespace

TEST_CASE_TEMPLATE("float-lane row entropy is within its bound of the long double softmax on every ISA", T,
                   float, mldiag::bfloat16, mldiag::half) {
  // Row by row (one row per call, so each entropy is seen alone): lengths around the vector
  // widths and a run, logits from flat to nearly one-hot, causal masks, a row whose every
  // entry but one is masked, and logits far below the maximum (e^-100 underflows in float).
  std::mt19937_64 rng(21);
  const auto before = mldiag::active_host_isa();
  double worst = 0;  // the largest error / (1 + log n) seen
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    for (std::size_t len : {1, 2, 15, 16, 17, 31, 32, 33, 64, 100, 129, 1031, 4096}) {
      for (double sd : {0.0, 0.3, 3.0, 30.0}) {
        for (int masked : {0, 1, 2}) {
          std::normal_distribution<double> normal(std::is_same_v<T, mldiag::half> ? 1.0 : 5.0, sd);
          std::vector<T> row(len);
          std::vector<double> ref(len);
          for (std::size_t i = 0; i < len; ++i) {
            row[i] = make_logit<T>(normal(rng));
            if (masked == 1 && i > len / 2) row[i] = make_logit<T>(-inf);      // causal
            if (masked == 2 && i % 3 == 1) row[i] = make_logit<T>(-120.0);  // far below
            ref[i] = static_cast<double>(row[i]);
          }
          const auto e = mldiag::entropy_from_logits(row, static_cast<std::int64_t>(len));
          CAPTURE(len);
          CAPTURE(sd);
          CAPTURE(masked);
          REQUIRE(e.rows == 1);
          const double h = static_cast<double>(softmax_entropy(ref));
          std::size_t support = 0;
          for (double v : ref) support += std::isinf(v) ? 0 : 1;
          CHECK(std::fabs(e.mean() - h) <= float_entropy_tol(static_cast<double>(support)));
          CHECK(e.max == e.mean());
          worst = std::max(worst, std::fabs(e.mean() - h) / (1.0 + std::log(static_cast<double>(support))));
        }
      }
    }
  }
  mldiag::select_host_isa(before);
  MESSAGE("largest |H - H_ref| / (1 + log n): " << worst);
}

TEST_CASE_TEMPLATE("many rows in one call: each row within its bound, invalid rows in every lane", T, float,
                   mldiag::bfloat16, mldiag::half) {
  // Rows of up to 256 logits are read 16 (AVX-512) or 8 (AVX2, SSE2) at a time, one row a
  // lane: a tensor of rows of mixed scales, masks and invalid rows at varied positions,
  // checked against the long double softmax row by row through the sums, extrema and
  // counts. 15 and 135 rows: a last group padded with copies of its first row; 1100 rows:
  // several chunks. Lengths around the vector widths, the column kernel's limit (256) and
  // beyond it.
  std::mt19937_64 rng(33);
  const auto before = mldiag::active_host_isa();
  double worst = 0;
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    for (std::size_t len : {1, 2, 7, 16, 17, 32, 33, 64, 100, 256, 257}) {
      for (std::size_t rows : {15, 16, 135, 1100}) {
        CAPTURE(len);
        CAPTURE(rows);
        std::vector<T> z(rows * len);
        std::uint64_t valid = 0, invalid = 0;
        long double sum = 0, nsum = 0;
        double lo = inf, hi = -inf, nlo = inf, nhi = -inf, tol = 0;
        for (std::size_t r = 0; r < rows; ++r) {
          std::normal_distribution<double> normal(std::is_same_v<T, mldiag::half> ? 1.0 : 5.0,
                                                  std::array<double, 4>{0.0, 0.3, 3.0, 30.0}[r % 4]);
          std::vector<double> ref(len);
          for (std::size_t i = 0; i < len; ++i) {
            T v = make_logit<T>(normal(rng));
            if (r % 5 == 1 && i > r % len) v = make_logit<T>(-inf);  // causal, varied support
            if (r % 7 == 3 && i % 3 == 1) v = make_logit<T>(-120.0);
            z[r * len + i] = v;
            ref[i] = static_cast<double>(v);
          }
          // NaN, +Inf, an all-masked row, at positions that fall on every lane over the rows.
          const int kind = r % 23 == 4 ? 1 : r % 29 == 11 ? 2 : r % 31 == 17 ? 3 : 0;
          if (kind == 1) z[r * len + r % len] = make_logit<T>(std::nan(""));
          if (kind == 2) z[r * len + (r * 7) % len] = make_logit<T>(inf);
          if (kind == 3)
            for (std::size_t i = 0; i < len; ++i) z[r * len + i] = make_logit<T>(-inf);
          if (kind != 0) {
            ++invalid;
            continue;
          }
          ++valid;
          const double h = static_cast<double>(softmax_entropy(ref));
          std::size_t support = 0;
          for (double v : ref) support += std::isinf(v) ? 0 : 1;
          const double hn = support > 1 ? h / std::log(static_cast<double>(support)) : 0.0;
          sum += h;
          nsum += hn;
          lo = std::min(lo, h);
          hi = std::max(hi, h);
          nlo = std::min(nlo, hn);
          nhi = std::max(nhi, hn);
          tol = std::max(tol, float_entropy_tol(static_cast<double>(support)));
        }
        const auto e = mldiag::entropy_from_logits(z, static_cast<std::int64_t>(len));
        CHECK(e.rows == valid);
        CHECK(e.invalid_rows == invalid);
        CHECK(std::fabs(e.sum - static_cast<double>(sum)) <= tol * static_cast<double>(valid));
        CHECK(std::fabs(e.min - lo) <= tol);
        CHECK(std::fabs(e.max - hi) <= tol);
        // The normalized entropy h / log n: 1e-6 relative more for log n in float lanes.
        CHECK(std::fabs(e.normalized_sum - static_cast<double>(nsum)) <= (tol + 1e-6) * static_cast<double>(valid));
        CHECK(std::fabs(e.normalized_min - nlo) <= tol + 1e-6);
        CHECK(std::fabs(e.normalized_max - nhi) <= tol + 1e-6);
        worst = std::max(worst, std::fabs(e.sum - static_cast<double>(sum)) / static_cast<double>(valid));
      }
    }
  }
  mldiag::select_host_isa(before);
  MESSAGE("largest |mean H - mean H_ref|: " << worst);
}

TEST_CASE_TEMPLATE("causal attention rows: the trailing masked columns a group skips change nothing", T, float,
                   mldiag::bfloat16, mldiag::half) {
  // Every row masked as attention masks it: row r of a head sees keys 0..r (causal), or the
  // last r + 1 keys (masked at the front, where nothing can be skipped), or keys 0..r/2 with a
  // -inf in the middle. Under a causal mask a group of rows ends before the last column (the
  // rows 0-15 of 32 keys end at column 16) and the column kernel stops there; a column dropped
  // too early changes a row's entropy by far more than the bound. Checked against the long
  // double softmax through the sum, extrema and counts.
  std::mt19937_64 rng(57);
  const auto before = mldiag::active_host_isa();
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    for (std::size_t len : {8, 16, 17, 32, 33, 64, 100, 256}) {
      for (int pattern : {0, 1, 2}) {
        CAPTURE(len);
        CAPTURE(pattern);
        const std::size_t heads = 3, rows = heads * len;
        std::normal_distribution<double> normal(std::is_same_v<T, mldiag::half> ? 1.0 : 2.0, 2.0);
        std::vector<T> z(rows * len);
        long double sum = 0;
        double lo = inf, hi = -inf, tol = 0;
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t q = r % len;  // the query's position in its head
          std::vector<double> ref(len);
          for (std::size_t i = 0; i < len; ++i) {
            bool masked = pattern == 0 ? i > q : pattern == 1 ? i < len - 1 - q : (i > q / 2 || (i == q / 4 && q >= 8));
            T v = masked ? make_logit<T>(-inf) : make_logit<T>(normal(rng));
            z[r * len + i] = v;
            ref[i] = static_cast<double>(v);
          }
          const double h = static_cast<double>(softmax_entropy(ref));
          std::size_t support = 0;
          for (double v : ref) support += std::isinf(v) ? 0 : 1;
          sum += h;
          lo = std::min(lo, h);
          hi = std::max(hi, h);
          tol = std::max(tol, float_entropy_tol(static_cast<double>(support)));
        }
        const auto e = mldiag::entropy_from_logits(z, static_cast<std::int64_t>(len));
        REQUIRE(e.rows == rows);
        CHECK(e.invalid_rows == 0);
        CHECK(std::fabs(e.sum - static_cast<double>(sum)) <= tol * static_cast<double>(rows));
        CHECK(std::fabs(e.min - lo) <= tol);
        CHECK(std::fabs(e.max - hi) <= tol);
      }
    }
  }
  mldiag::select_host_isa(before);
}

TEST_CASE("the float-lane path keeps the classes: NaN, +Inf, all-masked rows are invalid") {
  // Rows of 40 (two AVX-512 vectors and a tail): the special value in the vector part and
  // in the tail, fp16's infinity (which widens to a finite float by bits) included.
  const auto before = mldiag::active_host_isa();
  for (auto isa : mldiag::host_isas) {
    if (!mldiag::select_host_isa(isa)) continue;
    CAPTURE(std::string(mldiag::host_isa_name(isa)));
    for (std::size_t at : {3, 20, 37}) {
      for (double special : {std::nan(""), -std::nan(""), inf}) {
        std::vector<float> f(40 * 3, 0.5f);
        std::vector<mldiag::half> h(40 * 3, mldiag::half(0.5));
        f[40 + at] = static_cast<float>(special);
        h[40 + at] = mldiag::half(special);
        for (std::size_t i = 80; i < 120; ++i) {
          f[i] = -INFINITY;
          h[i] = mldiag::half(-inf);
        }
        for (const auto& e : {mldiag::entropy_from_logits(f, 40), mldiag::entropy_from_logits(h, 40)}) {
          CAPTURE(at);
          CHECK(e.rows == 1);
          CHECK(e.invalid_rows == 2);
          CHECK(e.mean() == doctest::Approx(std::log(40.0)).epsilon(1e-6));
        }
      }
    }
  }
  mldiag::select_host_isa(before);
}

TEST_CASE("entropy sampling reads every row_stride-th row, rotating, on every k-th step") {
  constexpr mldiag::entropy_sampling s{.row_stride = 3, .every = 2};
  CHECK(s.due(0));
  CHECK_FALSE(s.due(1));
  CHECK(s.due(4));
  CHECK(s.first_row(0) == 0);
  CHECK(s.first_row(2) == 1);  // the next sampled step starts one row later
  CHECK(s.first_row(4) == 2);
  CHECK(s.first_row(6) == 0);
  CHECK(s.first_row(-2) == 2);  // negative steps rotate too
  // Three sampled steps cover each of 10 rows once: their merge has the full result's rows
  // and, row by row the same entropies, its sum to the last bits.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<float> z(10 * 48);
  for (auto& v : z) v = static_cast<float>(normal(rng));
  z[3 * 48 + 7] = NAN;  // row 3: invalid in whichever sample holds it
  const auto all = mldiag::entropy_from_logits(z, 48);
  mldiag::entropy_stats merged;
  for (std::int64_t step : {0, 2, 4}) merged.merge(mldiag::entropy_from_logits(z, 48, s, step));
  CHECK(merged.rows == all.rows);
  CHECK(merged.invalid_rows == 1);
  CHECK(merged.sum == doctest::Approx(all.sum).epsilon(1e-14));
  CHECK(merged.min == all.min);
  CHECK(merged.max == all.max);
  const auto first = mldiag::entropy_from_logits(z, 48, s, 0);  // rows 0, 3 (invalid), 6, 9
  CHECK(first.rows == 3);
  CHECK(first.invalid_rows == 1);
  // The sampled rows, copied out and read as a tensor of their own: the same result, bit for
  // bit (the kernel steps over the rows in between; it does not read them).
  std::vector<float> picked;
  for (std::size_t r : {0u, 3u, 6u, 9u}) picked.insert(picked.end(), z.begin() + r * 48, z.begin() + (r + 1) * 48);
  std::vector<float> holes = z;  // and NaN in the rows it must step over
  for (std::size_t r : {1u, 2u, 4u, 5u, 7u, 8u}) std::fill(holes.begin() + r * 48, holes.begin() + (r + 1) * 48, NAN);
  CHECK(mldiag::entropy_from_logits(holes, 48, s, 0) == mldiag::entropy_from_logits(picked, 48));
  // Strided tensors and float64 take the same rows.
  std::vector<double> zd(z.begin(), z.end());
  CHECK(mldiag::entropy_from_logits(zd, 48, s, 2).rows == 3);  // rows 1, 4, 7
  // A zero stride or period is refused with a message, not a division by zero.
  try {
    (void)mldiag::entropy_from_logits(z, 48, mldiag::entropy_sampling{.row_stride = 0}, 0);
    FAIL("no error for row_stride 0");
  } catch (const mldiag::error& e) {
    CHECK(std::string(e.what()).rfind("mldiag:", 0) == 0);
    CHECK(std::string(e.what()).find("row_stride 0") != std::string::npos);
  }
}

TEST_CASE("row entropy on an engine's threads equals the calling thread's, bit for bit") {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal(0.0, 2.5);
  std::vector<float> z(1000 * 64);
  for (auto& v : z) v = static_cast<float>(normal(rng));
  z[77 * 64 + 3] = NAN;
  std::vector<double> p(300 * 10);
  for (auto& v : p) v = std::fabs(normal(rng));
  const mldiag::entropy_sampling s{.row_stride = 3};
  const auto alone = mldiag::entropy_from_logits(z, 64), alone_s = mldiag::entropy_from_logits(z, 64, s, 5);
  const auto probs = mldiag::entropy_from_probs(p, 10);
  for (unsigned threads : {1u, 2u, 8u}) {
    mldiag::host_engine engine(threads);
    CAPTURE(threads);
    CHECK(mldiag::entropy_from_logits(engine, z, 64) == alone);
    CHECK(mldiag::entropy_from_logits(engine, z, 64, s, 5) == alone_s);
    CHECK(mldiag::entropy_from_probs(engine, p, 10) == probs);
  }
  CHECK(alone.rows == 999);
  CHECK(alone.invalid_rows == 1);
  // Fewer rows than chunks, and none at all.
  mldiag::host_engine engine(2);
  const std::vector<float> two = {0, 1, 2, 3, 3, 2, 1, 0};
  CHECK(mldiag::entropy_from_logits(engine, two, 4) == mldiag::entropy_from_logits(two, 4));
  CHECK(mldiag::entropy_from_logits(engine, std::vector<float>{}, 4).rows == 0);
}
