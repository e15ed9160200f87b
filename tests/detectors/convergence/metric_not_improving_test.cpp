// SPDX-License-Identifier: Apache-2.0
// metric_not_improving: a progress metric that does not improve, or loses what it gained, each
// with its twin that must stay silent; the evidence checked against values computed here.
#include "../support.hpp"
#include "mldiag/detectors/convergence/metric_not_improving.hpp"

#include <numeric>

namespace det = mldiag::detectors;
using mldiag_test::evidence;

namespace {

// A run that records metric `name` each step from `value(step, rng)`; its findings.
std::vector<mldiag::finding> metric_run(int steps, bool higher_is_better,
                                        const std::function<double(int, std::mt19937_64&)>& value,
                                        std::vector<double>* values = nullptr) {
  det::metric_not_improving d;
  return mldiag_test::run_filled(d, steps, [&](int step, mldiag::recorder& rec, std::mt19937_64& rng) {
    const double v = value(step, rng);
    if (values != nullptr) values->push_back(v);
    rec.observe(mldiag::progress_metric{"return", v, higher_is_better});
  });
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

}  // namespace

TEST_CASE("metric_not_improving: a return that stays where it started is reported once, at the warm-up's end") {
  std::vector<double> values;
  const auto out = metric_run(600, true, [](int, std::mt19937_64& rng) { return mldiag_test::gauss(rng, 20.0, 0.2); }, &values);
  REQUIRE(out.size() == 1);
  const auto& f = out[0];
  CHECK(f.symptom == mldiag::symptoms::progress_not_improving);
  CHECK(f.severity == mldiag::severity::warning);
  CHECK(f.first_step == 199);  // the 200th value: the warm-up
  REQUIRE(f.where.size() == 1);
  CHECK(f.where[0].first == "return");
  // The evidence is the mean of the first 10 and of the 50 up to the step, on the user's scale.
  CHECK(evidence(f, "start_mean") == doctest::Approx(mean_of(values, 0, 10)).epsilon(1e-12));
  CHECK(evidence(f, "recent_mean") == doctest::Approx(mean_of(values, 150, 200)).epsilon(1e-12));
  CHECK(f.why.find("consequence observed") != std::string::npos);
}

TEST_CASE("metric_not_improving: twin — a return that climbs, noisily, is never reported") {
  const auto out = metric_run(600, true, [](int step, std::mt19937_64& rng) {
    return -100.0 + 250.0 * (1.0 - std::exp(-step / 150.0)) + 15.0 * std::normal_distribution<double>(0.0, 1.0)(rng);
  });
  CHECK(out.empty());
}

TEST_CASE("metric_not_improving: a loss-like metric (lower is better) read the right way round") {
  // An error rate falling 0.9 -> 0.1: progress when lower is better, and no finding.
  const auto falling = [](int step, std::mt19937_64& rng) { return mldiag_test::gauss(rng, 0.1 + 0.8 * std::exp(-step / 80.0), 0.02); };
  CHECK(metric_run(500, false, falling).empty());
  // The same series declared higher-is-better is a measure that got worse: reported.
  const auto wrong_way = metric_run(500, true, falling);
  REQUIRE(!wrong_way.empty());
  CHECK(wrong_way[0].symptom == mldiag::symptoms::progress_not_improving);
}

TEST_CASE("metric_not_improving: an accuracy that climbs and then loses its gains") {
  // 0.1 -> 0.8 over 300 steps, then falls back to 0.3 from step 400 (a collapse).
  std::vector<double> values;
  const auto out = metric_run(700, true, [](int step, std::mt19937_64& rng) {
    const double level = step < 300 ? 0.1 + 0.7 * step / 300.0 : (step < 400 ? 0.8 : std::max(0.3, 0.8 - 0.005 * (step - 400)));
    return level + 0.02 * std::normal_distribution<double>(0.0, 1.0)(rng);
  }, &values);
  REQUIRE(out.size() == 1);
  const auto& f = out[0];
  CHECK(f.symptom == mldiag::symptoms::progress_worsening);
  CHECK(f.severity == mldiag::severity::warning);  // a fifth of the gain lost, not all of it yet
  CHECK(f.first_step > 400);
  CHECK(f.first_step < 460);
  CHECK(evidence(f, "best_mean") == doctest::Approx(0.8).epsilon(0.03));
  CHECK(evidence(f, "lost_fraction_of_gain") >= 0.2);
}

TEST_CASE("metric_not_improving: twin — a gain that holds, with its noise, is not a loss of it") {
  const auto out = metric_run(900, true, [](int step, std::mt19937_64& rng) {
    const double level = step < 300 ? 0.1 + 0.7 * step / 300.0 : 0.8;
    return level + 0.02 * std::normal_distribution<double>(0.0, 1.0)(rng);
  });
  CHECK(out.empty());
}

TEST_CASE("metric_not_improving: everything gained lost is critical — a non-finite value is skipped, not read") {
  const auto out = metric_run(800, true, [](int step, std::mt19937_64& rng) {
    if (step % 7 == 3) return std::numeric_limits<double>::quiet_NaN();
    const double level = step < 300 ? 0.1 + 0.7 * step / 300.0 : (step < 400 ? 0.8 : 0.05);
    return level + 0.02 * std::normal_distribution<double>(0.0, 1.0)(rng);
  });
  // Reported twice: when the loss of gains starts (warning), and once more when all is lost.
  REQUIRE(out.size() == 2);
  CHECK(out[0].symptom == mldiag::symptoms::progress_worsening);
  CHECK(out[0].severity == mldiag::severity::warning);
  CHECK(out[1].symptom == mldiag::symptoms::progress_worsening);
  CHECK(out[1].severity == mldiag::severity::critical);
  CHECK(evidence(out[1], "lost_fraction_of_gain") >= 1.0);
  CHECK(out[1].first_step > out[0].first_step);
}
