// SPDX-License-Identifier: Apache-2.0
// Fingerprints and compare: the sketch's estimates against exact long double distances, and the
// first divergent layer with its cause on a synthetic engine (each cause with a healthy twin).
#include <doctest/doctest.h>

#include "mldiag/core/element_types.hpp"
#include "mldiag/inference/fingerprint.hpp"

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace inf = mldiag::inference;
using inf::number_format;

namespace {
std::vector<float> gaussian(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = z(rng);
  return v;
}

// A toy engine: 4 layers of 2 taps each ("blocks.L.attn", "blocks.L.residual"), a prefill of 6
// positions and 4 decode positions, d = 96. Its values are a fixed function of (layer, position)
// so two runs can be compared; `edit(name, position, row)` plants a fault in the test's copy,
// `fmt` is the format the test stores (values rounded to it).
std::vector<inf::fingerprint> run(inf::number_format fmt,
                                  const std::function<void(const std::string&, std::int64_t, std::vector<float>&)>& edit = {}) {
  constexpr std::size_t d = 96;
  inf::fingerprint_recorder rec;
  const auto round = [&](std::vector<float>& v) {
    for (auto& x : v) {
      if (fmt == number_format::bf16) x = static_cast<float>(mldiag::bfloat16(x));
      if (fmt == number_format::fp16) x = static_cast<float>(mldiag::half(x));
    }
  };
  const auto step = [&](inf::phase ph, std::int64_t first, std::size_t rows) {
    rec.begin_step();
    for (int layer = 0; layer < 4; ++layer) {
      for (const char* what : {"attn", "residual"}) {
        const std::string name = "blocks." + std::to_string(layer) + "." + what;
        std::vector<float> v;
        for (std::size_t r = 0; r < rows; ++r) {
          std::mt19937_64 rng(1000 * static_cast<std::uint64_t>(layer) + 10 * static_cast<std::uint64_t>(first + static_cast<std::int64_t>(r)) +
                              (what[0] == 'a' ? 1 : 2));
          auto row = gaussian(rng, d);
          for (auto& x : row) x *= static_cast<float>(1 + layer);
          if (edit) edit(name, first + static_cast<std::int64_t>(r), row);
          v.insert(v.end(), row.begin(), row.end());
        }
        round(v);
        rec.observe({.name = name, .phase = ph, .position = first, .rows = rows, .cols = d, .values = v, .format = {fmt}});
      }
    }
  };
  step(inf::phase::prefill, 0, 6);
  for (std::int64_t p = 6; p < 10; ++p) step(inf::phase::decode, p, 1);
  return rec.rows();
}
}  // namespace

TEST_CASE("the sketch estimates |a - b|^2 without bias and the cosine of close rows, against long double") {
  std::mt19937_64 rng(11);
  double ratio_sum = 0.0;
  constexpr int pairs = 400;
  for (int k = 0; k < pairs; ++k) {
    auto a = gaussian(rng, 512);
    auto b = a;
    const auto noise = gaussian(rng, 512);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] += 0.01f * noise[i];
    const auto fa = inf::make_fingerprint({.name = "x", .rows = 1, .cols = 512, .values = a}, 0, 0);
    const auto fb = inf::make_fingerprint({.name = "x", .rows = 1, .cols = 512, .values = b}, 0, 0);
    long double exact = 0, na = 0;
    for (std::size_t i = 0; i < a.size(); ++i) exact += (static_cast<long double>(b[i]) - a[i]) * (static_cast<long double>(b[i]) - a[i]), na += static_cast<long double>(a[i]) * a[i];
    CHECK(fa.l2 == doctest::Approx(std::sqrt(static_cast<double>(na))).epsilon(1e-12));
    const auto d = inf::detail::difference(fa, fb, {});
    const double est2 = d.relative_error * d.relative_error * static_cast<double>(na);
    ratio_sum += est2 / static_cast<double>(exact);
    CHECK(d.cosine > 0.99);
  }
  // E[est^2 / exact^2] = 1; the spread of one is about sqrt(2 / 64) = 0.18, of a mean of 400, 0.009.
  CHECK(ratio_sum / pairs == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("compare: a bf16 path within its format's tolerance has no divergent layer") {
  const auto ref = run(number_format::fp32);
  const auto d = inf::compare(ref, run(number_format::bf16));
  CHECK(d.matched == ref.size());
  CHECK(d.unmatched == 0);
  CHECK(!d.first);
  CHECK(d.diverged_rows == 0);
  REQUIRE(d.per_layer.size() == 8);
  for (const auto& l : d.per_layer) {
    CAPTURE(l.test.name);
    CHECK(l.relative_error < l.tolerance);
    CHECK(l.relative_error > 0.0);  // rounding to bf16 moved every row
  }
}

TEST_CASE("compare: the first divergent layer and its cause, one fault at a time") {
  const auto ref = run(number_format::fp32);
  SUBCASE("a scale applied wrongly in layer 2's attention from position 3") {
    const auto d = inf::compare(ref, run(number_format::bf16, [](const std::string& n, std::int64_t p, std::vector<float>& row) {
      if (n == "blocks.2.attn" && p >= 3)
        for (auto& x : row) x *= 1.25f;
    }));
    REQUIRE(d.first);
    CHECK(d.first->test.name == "blocks.2.attn");
    CHECK(d.first->test.position == 3);
    CHECK(d.cause == inf::divergence_cause::scale_mismatch);
    CHECK(d.first->norm_ratio == doctest::Approx(1.25).epsilon(0.01));
  }
  SUBCASE("an overflow in fp16: layer 1's residual past 65504 at position 8") {
    const auto d = inf::compare(ref, run(number_format::fp16, [](const std::string& n, std::int64_t p, std::vector<float>& row) {
      if (n == "blocks.1.residual" && p == 8) row[7] = 1e6f;  // rounds to +inf in fp16
    }));
    REQUIRE(d.first);
    CAPTURE(d.explanation);
    CAPTURE(d.first->test.position);
    CHECK(d.first->test.name == "blocks.1.residual");
    CHECK(d.first->test.position == 8);
    CHECK(d.cause == inf::divergence_cause::overflow);
  }
  SUBCASE("a NaN read in with values in range") {
    const auto d = inf::compare(ref, run(number_format::bf16, [](const std::string& n, std::int64_t p, std::vector<float>& row) {
      if (n == "blocks.3.attn" && p == 2) row[0] = NAN;
    }));
    REQUIRE(d.first);
    CHECK(d.first->test.name == "blocks.3.attn");
    CHECK(d.cause == inf::divergence_cause::nan_origin);
  }
  SUBCASE("prefill agrees, the first decode position does not (a position offset)") {
    const auto d = inf::compare(ref, run(number_format::bf16, [](const std::string&, std::int64_t p, std::vector<float>& row) {
      if (p >= 6) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(p) * 31);
        row = gaussian(rng, row.size());
      }
    }));
    REQUIRE(d.first);
    CHECK(d.first->test.position == 6);
    CHECK(d.first->test.name == "blocks.0.attn");
    CHECK(d.cause == inf::divergence_cause::position_or_kv);
  }
  SUBCASE("a tensor captured at another point: the test's layer-1 attention row is the reference's layer-0 residual") {
    const auto d = inf::compare(ref, run(number_format::fp32, [](const std::string& n, std::int64_t p, std::vector<float>& row) {
      if (n == "blocks.1.attn") {  // the reference's blocks.0.residual for this position
        std::mt19937_64 rng(10 * static_cast<std::uint64_t>(p) + 2);
        row = gaussian(rng, row.size());
      }
    }));
    REQUIRE(d.first);
    CHECK(d.first->test.name == "blocks.1.attn");
    CHECK(d.first->test.position == 0);
    CHECK(d.cause == inf::divergence_cause::capture_point);
  }
  SUBCASE("other weights in one layer: computation") {
    const auto d = inf::compare(ref, run(number_format::bf16, [](const std::string& n, std::int64_t p, std::vector<float>& row) {
      if (n == "blocks.2.residual") {
        std::mt19937_64 rng(777 + static_cast<std::uint64_t>(p));
        row = gaussian(rng, row.size());
      }
    }));
    REQUIRE(d.first);
    CAPTURE(d.explanation);
    CAPTURE(d.first->test.position);
    CHECK(d.first->test.name == "blocks.2.residual");
    CHECK(d.cause == inf::divergence_cause::computation);
  }
}

TEST_CASE("fingerprints write one JSON object per line — compare refuses runs that share nothing") {
  inf::fingerprint_recorder rec;
  std::vector<float> v{1.0f, -2.0f, NAN, 4.0f};
  rec.begin_step();
  rec.observe({.name = "blocks.0.\"q\"", .phase = inf::phase::prefill, .position = 3, .rows = 2, .cols = 2, .values = v});
  std::ostringstream out;
  rec.write_jsonl(out);
  const auto text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK(text.find("\"name\":\"blocks.0.\\\"q\\\"\",\"request\":0,\"position\":3,\"phase\":\"prefill\"") == 1);
  CHECK(text.find("\"position\":4") != std::string::npos);
  CHECK(text.find("\"nan\":1,\"inf\":0,\"amax\":4,\"mean\":4,\"l2\":4") != std::string::npos);
  std::vector<inf::fingerprint> other = rec.rows();
  for (auto& f : other) f.name = "elsewhere";
  CHECK_THROWS_WITH_AS((void)inf::compare(rec.rows(), other), doctest::Contains("mldiag: compare: no row of the test matches"),
                       mldiag::error);
  CHECK_THROWS_AS((void)inf::make_fingerprint({.name = "x", .rows = 2, .cols = 2, .values = v}, 2, 0), mldiag::error);
}
