// SPDX-License-Identifier: Apache-2.0
// inference::monitor and its parts: the storage formats' limits (hand-derived), one pass of
// range statistics (against a long double loop), and each check with a twin that stays quiet.
#include <doctest/doctest.h>

#include "mldiag/inference/monitor.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace inf = mldiag::inference;
using inf::number_format;
using mldiag::severity;

namespace {
std::vector<mldiag::finding> named(const std::vector<mldiag::finding>& all, mldiag::symptom s) {
  std::vector<mldiag::finding> out;
  for (const auto& f : all)
    if (f.symptom == s) out.push_back(f);
  return out;
}
double evidence(const mldiag::finding& f, const std::string& key) {
  for (const auto& [k, v] : f.evidence)
    if (k == key) return v;
  FAIL("no evidence " << key);
  return 0.0;
}
}  // namespace

// The checks below read the full statistics on every step (the default samples 1 step in 8).
const inf::monitor_config every_step{.sample_every = 1};

TEST_CASE("storage formats: limits from the formats' bit layouts") {
  // (2 - 2^-m) * 2^emax for m mantissa bits; E4M3 (OCP) gives up its top mantissa code to NaN: 1.75 * 2^8.
  CHECK(inf::storage_format{number_format::fp16}.max_finite() == (2.0 - std::ldexp(1.0, -10)) * std::ldexp(1.0, 15));
  CHECK(inf::storage_format{number_format::bf16}.max_finite() ==
        static_cast<double>(std::numeric_limits<float>::max()) * (2.0 - std::ldexp(1.0, -7)) / (2.0 - std::ldexp(1.0, -23)));
  CHECK(inf::storage_format{number_format::fp8_e4m3}.max_finite() == 1.75 * 256.0);
  CHECK(inf::storage_format{number_format::fp8_e5m2}.max_finite() == 1.75 * std::ldexp(1.0, 15));
  CHECK(inf::storage_format{number_format::fp32}.max_finite() == static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(inf::storage_format{number_format::fp32}.min_nonzero() == static_cast<double>(std::numeric_limits<float>::denorm_min()));
  CHECK(inf::storage_format{number_format::fp16}.min_nonzero() == std::ldexp(1.0, -14 - 10));
  CHECK(inf::storage_format{number_format::int8, 0.02}.max_finite() == doctest::Approx(2.54));
  CHECK(inf::storage_format{number_format::int8, 0.02}.min_nonzero() == 0.02);
  CHECK(inf::storage_format{number_format::fp16}.overflows_to_inf());
  CHECK(!inf::storage_format{number_format::fp8_e4m3}.overflows_to_inf());
  CHECK_THROWS_WITH_AS((void)inf::measure({}, {number_format::int8, 0.0}), doctest::Contains("mldiag: storage_format scale"),
                       mldiag::error);
}

TEST_CASE("range_stats: one pass against a long double loop") {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> z(0.0f, 3000.0f);
  std::vector<float> v(10007);
  for (auto& x : v) x = z(rng);
  v[5] = NAN, v[77] = INFINITY, v[78] = -INFINITY, v[100] = 70000.0f, v[101] = -90000.0f, v[200] = 1e-8f, v[201] = 0.0f;
  const inf::storage_format fp16{number_format::fp16};
  const auto r = inf::measure(v, fp16);
  long double sum = 0, sq = 0, amax = 0;
  std::uint64_t nan = 0, infs = 0, clipped = 0, flushed = 0, nonzero = 0;
  for (float x : v) {
    if (std::isnan(x)) ++nan;
    else if (std::isinf(x)) ++infs;
    else {
      sum += x, sq += static_cast<long double>(x) * x, amax = std::max(amax, std::fabs(static_cast<long double>(x)));
      if (x != 0.0f) ++nonzero;
      if (std::fabs(x) > 65504.0f) ++clipped;
      else if (x != 0.0f && std::fabs(x) < 0.5 * std::ldexp(1.0, -24)) ++flushed;
    }
  }
  CHECK(r.count == v.size());
  CHECK(r.nan == nan);
  CHECK(r.inf == infs);
  CHECK(r.clipped == clipped);
  CHECK(r.clipped == 2);
  CHECK(r.flushed == flushed);
  CHECK(r.flushed == 1);
  CHECK(r.nonzero == nonzero);
  CHECK(r.amax == static_cast<double>(amax));
  CHECK(r.sum == doctest::Approx(static_cast<double>(sum)).epsilon(1e-12));
  CHECK(r.l2() == doctest::Approx(std::sqrt(static_cast<double>(sq))).epsilon(1e-12));
  CHECK(r.headroom_bits() == doctest::Approx(std::log2(65504.0 / 90000.0)));
}

TEST_CASE("range_stats: a block's shared scale flushes what is 2^10 below its largest (E4M3, blocks of 32)") {
  // Block amax 2^10 = 1024: frexp gives 0.5 * 2^11, the block scale is 2^(11 - 1 - 8) = 4, E4M3's
  // smallest non-zero 2^-9 at that scale is 2^-7, and half of it, 2^-8, is the line.
  std::vector<float> v(64, 1.0f);
  v[0] = 1024.0f;
  v[1] = std::ldexp(1.0f, -7);   // above the line: kept
  v[2] = std::ldexp(1.0f, -9);   // below: flushed
  v[3] = std::ldexp(1.0f, -12);  // below: flushed
  v[40] = std::ldexp(1.0f, -9);  // the second block's amax is 1: its scale 2^-8, nothing flushed
  const auto r = inf::measure(v, {number_format::fp8_e4m3, 1.0, 32});
  CHECK(r.blocks == 2);
  CHECK(r.block_flushed == 2);
  CHECK(r.clipped == 0);  // 1024 > 448 is no clip where the block carries the scale
  CHECK(r.flushed_fraction() == doctest::Approx(2.0 / 64.0));
}

TEST_CASE("first non-finite: layer, position, phase, request and rank — a clean pass says nothing") {
  inf::monitor mon(every_step);
  std::vector<float> h(8 * 16, 0.5f);
  for (int step = 0; step < 3; ++step) {
    mon.begin_step(step);
    mon.observe({.name = "blocks.0.attn", .phase = inf::phase::prefill, .position = 0, .rows = 8, .cols = 16, .values = h});
    mon.observe({.name = "blocks.1.mlp.fc1", .phase = inf::phase::prefill, .position = 0, .rows = 8, .cols = 16, .values = h});
  }
  CHECK(mon.take_findings().empty());
  CHECK(!mon.first_non_finite());
  auto bad = h;
  bad[5 * 16 + 3] = INFINITY;  // row 5: position 40 + 5
  auto worse = h;
  worse[0] = NAN;
  mon.begin_step(3);
  mon.observe({.name = "blocks.0.attn", .phase = inf::phase::decode, .position = 40, .rows = 8, .cols = 16, .values = h, .request = 2, .rank = 1});
  mon.observe({.name = "blocks.1.mlp.fc1", .phase = inf::phase::decode, .position = 40, .rows = 8, .cols = 16, .values = bad,
               .format = {number_format::fp16}, .request = 2, .rank = 1});
  mon.observe({.name = "blocks.1.mlp.fc2", .phase = inf::phase::decode, .position = 40, .rows = 8, .cols = 16, .values = worse, .request = 2, .rank = 1});
  const auto f = named(mon.take_findings(), inf::symptoms::first_non_finite);
  REQUIRE(f.size() == 1);  // the first, not every tap downstream of it
  CHECK(f[0].severity == severity::critical);
  CHECK(f[0].where.front().first == "blocks.1.mlp.fc1");
  CHECK(evidence(f[0], "position") == 45);
  CHECK(evidence(f[0], "phase_decode") == 1);
  CHECK(evidence(f[0], "request") == 2);
  CHECK(evidence(f[0], "rank") == 1);
  CHECK(evidence(f[0], "tap_order") == 1);
  REQUIRE(mon.first_non_finite());
  CHECK(mon.first_non_finite()->name == "blocks.1.mlp.fc1");
  CHECK(mon.first_non_finite()->step == 3);
}

TEST_CASE("the sentinel runs on steps the full statistics skip") {
  inf::monitor mon({.sample_every = 4});
  std::vector<float> h(16, 1.0f), bad(16, 1.0f);
  bad[9] = NAN;
  for (int step = 0; step < 7; ++step) {
    mon.begin_step(step);
    mon.observe({.name = "x", .cols = 16, .values = step == 6 ? bad : h});
  }
  CHECK(mon.sampled_taps() == 2);  // steps 0 and 4
  const auto f = named(mon.take_findings(), inf::symptoms::first_non_finite);
  REQUIRE(f.size() == 1);
  CHECK(f[0].first_step == 6);
}

TEST_CASE("the default monitor samples: full statistics on 1 step in 8, the sentinel and the logits check on every step") {
  inf::monitor mon;  // the serving default
  CHECK(mon.config().sample_every == 8);
  std::vector<float> h(16, 1.0f), bad(16, 1.0f), row(10, 0.0f), bad_row(10, 0.0f);
  bad[2] = INFINITY;
  bad_row[4] = NAN;
  for (int step = 0; step < 19; ++step) {
    mon.begin_step(step);
    mon.observe({.name = "x", .cols = 16, .values = step == 13 ? bad : h});
    CHECK(mon.observe_logits(0, step == 15 ? bad_row : row) == (step != 15));
  }
  CHECK(mon.sampled_taps() == 3);  // steps 0, 8 and 16
  const auto all = mon.take_findings();
  const auto f = named(all, inf::symptoms::first_non_finite);
  REQUIRE(f.size() == 1);
  CHECK(f[0].first_step == 13);  // an unsampled step
  CHECK(named(all, inf::symptoms::logits_row_non_finite).size() == 1);
}

TEST_CASE("a logits row with a NaN cannot be sampled: critical with the request, and the engine is told") {
  inf::monitor mon(every_step);
  std::vector<float> row(100, 0.0f);
  row[3] = 9.0f;
  mon.begin_step(0);
  CHECK(mon.observe_logits(7, row));
  CHECK(mon.take_findings().empty());
  std::vector<float> nan_row(100, NAN);
  CHECK(!mon.observe_logits(7, nan_row));
  const auto f = named(mon.take_findings(), inf::symptoms::logits_row_non_finite);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == severity::critical);
  CHECK(evidence(f[0], "request") == 7);
  CHECK(evidence(f[0], "non_finite") == 100);
}

TEST_CASE("headroom: near the limit is a warning before anything overflows — past it, critical for a float format") {
  const auto run = [](float amax, inf::storage_format fmt) {
    inf::monitor mon(every_step);
    std::vector<float> v(64, 1.0f);
    v[10] = amax;
    mon.begin_step(0);
    mon.observe({.name = "blocks.2.residual", .cols = 64, .values = v, .format = fmt});
    return mon.take_findings();
  };
  const inf::storage_format fp16{number_format::fp16};
  CHECK(run(20000.0f, fp16).empty());  // log2(65504 / 20000) = 1.71 bits
  const auto near = run(40000.0f, fp16);  // 0.71 bits
  REQUIRE(named(near, inf::symptoms::headroom_low).size() == 1);
  CHECK(named(near, inf::symptoms::headroom_low)[0].severity == severity::warning);
  CHECK(evidence(named(near, inf::symptoms::headroom_low)[0], "headroom_bits") == doctest::Approx(std::log2(65504.0 / 40000.0)));
  const auto past = named(run(70000.0f, fp16), inf::symptoms::values_overflowed);
  REQUIRE(past.size() == 1);
  CHECK(past[0].severity == severity::critical);
  // int8 clamps: past its range is a warning (the value is wrong, not NaN).
  const auto clamp = named(run(3.0f, {number_format::int8, 0.02}), inf::symptoms::values_overflowed);
  REQUIRE(clamp.size() == 1);
  CHECK(clamp[0].severity == severity::warning);
  CHECK(evidence(clamp[0], "clipped") == 1);
}

TEST_CASE("headroom shrinking: warned while values still fit, from the trend — a steady level is not a trend") {
  // amax grows 10% a step from 1000: log2(65504 / amax) falls 0.1375 bits a step and crosses 1
  // bit at 1000 * 1.1^s = 32752, s = 36.6; fp16 overflows from s = 43.9.
  inf::monitor mon(every_step);
  std::vector<float> v(32, 1.0f);
  std::int64_t warned = -1;
  for (int s = 0; s < 60 && warned < 0; ++s) {
    v[0] = static_cast<float>(1000.0 * std::pow(1.1, s));
    mon.begin_step(s);
    mon.observe({.name = "blocks.5.residual", .cols = 32, .values = v, .format = {number_format::fp16}});
    if (!named(mon.take_findings(), inf::symptoms::headroom_shrinking).empty()) warned = s;
  }
  CHECK(warned >= 15);  // trend_points 16
  CHECK(warned < 37);   // before the 1-bit line, long before the overflow
  inf::monitor steady;
  for (int s = 0; s < 200; ++s) {
    v[0] = 30000.0f + static_cast<float>(s % 7) * 100.0f;
    steady.begin_step(s);
    steady.observe({.name = "blocks.5.residual", .cols = 32, .values = v, .format = {number_format::fp16}});
  }
  CHECK(steady.take_findings().empty());
}

TEST_CASE("values flushed: an int8 scale far too large for the values — a fitting scale is quiet") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> v(4096);
  for (auto& x : v) x = z(rng);
  const auto flushed = [&](double scale) {
    inf::monitor mon(every_step);
    mon.begin_step(0);
    mon.observe({.name = "blocks.0.mlp.fc2", .rows = 64, .cols = 64, .values = v, .format = {number_format::int8, scale}});
    return named(mon.take_findings(), inf::symptoms::values_flushed);
  };
  CHECK(flushed(4.5 / 127.0).empty());  // the scale that fits: a step of 0.035, |x| < 0.018 is 1.4% of N(0,1)
  const auto f = flushed(1.0);  // a step of 1: |x| < 0.5 is 38% of N(0,1)
  REQUIRE(f.size() == 1);
  CHECK(evidence(f[0], "flushed_fraction") == doctest::Approx(0.383).epsilon(0.05));
}

TEST_CASE("outlier channels are named, as info — channels within a few x of each other are not") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(16 * 128);
  for (auto& x : v) x = u(rng);
  inf::monitor quiet;
  quiet.begin_step(0);
  quiet.observe({.name = "blocks.3.residual", .kind = inf::tap_kind::residual, .rows = 16, .cols = 128, .values = v});
  CHECK(quiet.take_findings().empty());
  v[4 * 128 + 17] = 900.0f, v[9 * 128 + 101] = -300.0f;
  inf::monitor mon(every_step);
  mon.begin_step(0);
  mon.observe({.name = "blocks.3.residual", .kind = inf::tap_kind::residual, .rows = 16, .cols = 128, .values = v});
  const auto f = named(mon.take_findings(), inf::symptoms::outlier_channels);
  REQUIRE(f.size() == 1);
  CHECK(f[0].severity == severity::info);
  REQUIRE(f[0].where.size() == 2);
  CHECK(f[0].where[0].first == "blocks.3.residual[17]");
  CHECK(f[0].where[1].first == "blocks.3.residual[101]");
}

TEST_CASE("KV-cache padding slots holding NaN are a warning — written slots with NaN are the first non-finite") {
  std::vector<float> kv(10 * 8, 0.25f);
  for (std::size_t i = 6 * 8; i < kv.size(); ++i) kv[i] = NAN;  // slots 6..9 never written
  inf::monitor mon(every_step);
  mon.begin_step(0);
  mon.observe({.name = "blocks.0.k_cache", .kind = inf::tap_kind::kv_cache, .rows = 10, .cols = 8, .values = kv, .valid_rows = 6});
  auto f = mon.take_findings();
  REQUIRE(named(f, inf::symptoms::kv_padding_non_finite).size() == 1);
  CHECK(named(f, inf::symptoms::first_non_finite).empty());
  inf::monitor all_valid;
  all_valid.begin_step(0);
  all_valid.observe({.name = "blocks.0.k_cache", .kind = inf::tap_kind::kv_cache, .rows = 10, .cols = 8, .values = kv});
  f = all_valid.take_findings();
  CHECK(named(f, inf::symptoms::kv_padding_non_finite).empty());
  REQUIRE(named(f, inf::symptoms::first_non_finite).size() == 1);
  CHECK(evidence(named(f, inf::symptoms::first_non_finite)[0], "position") == 6);
}

TEST_CASE("output health: uniform garbage and a collapsed repetition — a peaked, varied output is neither") {
  constexpr std::size_t V = 50;
  const auto peaked = [](std::size_t token, float margin) {
    std::vector<float> row(V, 0.0f);
    row[token] = margin;
    return row;
  };
  inf::monitor mon(every_step);
  for (int s = 0; s < 40; ++s) {  // a trained model: a clear favourite, changing every step
    mon.begin_step(s);
    CHECK(mon.observe_logits(0, peaked(static_cast<std::size_t>(s) % V, 6.0f)));
  }
  CHECK(mon.take_findings().empty());
  std::vector<float> flat(V, 0.1f);
  for (int s = 0; s < 6; ++s) {
    mon.begin_step(40 + s);
    mon.observe_logits(1, flat);
  }
  auto f = named(mon.take_findings(), inf::symptoms::output_near_uniform);
  REQUIRE(f.size() == 1);
  CHECK(evidence(f[0], "normalized_entropy") == doctest::Approx(1.0));
  CHECK(f[0].first_step == 40);
  // One token repeated with entropy near 0: 30 logits of margin put H / ln V near 1e-11.
  for (int s = 0; s < 20; ++s) {
    mon.begin_step(50 + s);
    mon.observe_logits(2, peaked(11, 30.0f));
  }
  f = named(mon.take_findings(), inf::symptoms::output_collapsed);
  REQUIRE(f.size() == 1);
  CHECK(evidence(f[0], "token") == 11);
  CHECK(f[0].first_step == 50);
  // The entropy checked against a direct computation: logits (0 x 49, 6), H in nats.
  const double e6 = std::exp(6.0), Z = 49.0 + e6;
  const double H = -(49.0 * (1.0 / Z) * std::log(1.0 / Z) + (e6 / Z) * std::log(e6 / Z));
  CHECK(H / std::log(50.0) < 0.95);
}

TEST_CASE("the inference symptoms are distinct — bad spans are refused with what to do") {
  std::set<std::string_view> texts;
  for (const auto s : inf::symptoms::all) CHECK(texts.insert(s.text).second);
  inf::monitor mon(every_step);
  std::vector<float> v(10);
  mon.begin_step(0);
  CHECK_THROWS_WITH_AS(mon.observe({.name = "x", .rows = 3, .cols = 4, .values = v}), doctest::Contains("mldiag: tap 'x' has 10 values"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(mon.observe_logits(0, {}), doctest::Contains("mldiag: observe_logits got an empty row"), mldiag::error);
  CHECK_THROWS_AS(inf::monitor({.sample_every = 0}), mldiag::error);
}

TEST_CASE("a clamping format: its amax at the limit is by design — many values there are clipping") {
  // int8 with a scale set from the calibration amax puts that amax at 127 x scale. One value of a
  // 64-wide decode row there (1.6%) is not clipping; 40 of 2304 (1.7%, a scale too small) are.
  const inf::storage_format int8{number_format::int8, 0.02};
  const auto findings = [&](std::size_t n, std::size_t at_limit) {
    std::vector<float> v(n, 0.5f);
    for (std::size_t i = 0; i < at_limit; ++i) v[i * (n / at_limit)] = static_cast<float>(127 * 0.02);
    inf::monitor mon(every_step);
    mon.begin_step(0);
    mon.observe({.name = "blocks.0.ln1", .cols = n, .values = v, .format = int8});
    return mon.take_findings();
  };
  CHECK(findings(64, 1).empty());
  const auto clipped = named(findings(2304, 40), inf::symptoms::values_overflowed);
  REQUIRE(clipped.size() == 1);
  CHECK(clipped[0].severity == severity::warning);
  CHECK(evidence(clipped[0], "at_limit_fraction") == doctest::Approx(40.0 / 2304.0));
  CHECK(findings(2304, 20).empty());  // 0.9%: under the line
}

TEST_CASE("seeds: two seeds giving the same tokens where the rows left choices is a warning — same seed, or no choices, is not") {
  constexpr std::size_t V = 50;
  std::vector<float> open(V, 0.0f), decided(V, 0.0f);
  open[3] = 1.0f;        // H / ln V near 0.97: many plausible tokens
  decided[3] = 30.0f;    // H / ln V near 0: one token
  const std::vector<int> tokens{3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
  const auto run = [&](const std::vector<float>& row, std::uint64_t seed_a, std::uint64_t seed_b) {
    inf::monitor mon(every_step);
    for (int r = 0; r < 2; ++r) {
      for (int s = 0; s < 10; ++s) {
        mon.begin_step(s);
        mon.observe_logits(r, row);
      }
      mon.end_request(r, {.prompt_key = 42, .seed = r == 0 ? seed_a : seed_b, .tokens = tokens});
    }
    return named(mon.take_findings(), inf::symptoms::seeds_ignored);
  };
  const auto f = run(open, 1, 2);
  REQUIRE(f.size() == 1);
  CHECK(evidence(f[0], "other_seed") == 1);
  CHECK(evidence(f[0], "mean_normalized_entropy") > 0.9);
  CHECK(run(open, 7, 7).empty());     // the same seed is meant to repeat
  CHECK(run(decided, 1, 2).empty());  // no choices: any seed gives these tokens
}

TEST_CASE("a request index reused after end_request reports its own first non-finite value") {
  inf::monitor mon(every_step);
  std::vector<float> bad(8, 1.0f);
  bad[2] = NAN;
  mon.begin_step(0);
  mon.observe({.name = "x", .cols = 8, .values = bad, .request = 5});
  mon.observe({.name = "x", .cols = 8, .values = bad, .request = 5});  // the same request: once
  CHECK(named(mon.take_findings(), inf::symptoms::first_non_finite).size() == 1);
  mon.end_request(5);
  mon.begin_step(1);
  mon.observe({.name = "x", .cols = 8, .values = bad, .request = 5});  // a new request in slot 5
  CHECK(named(mon.take_findings(), inf::symptoms::first_non_finite).size() == 1);
}
