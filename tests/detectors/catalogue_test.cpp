// SPDX-License-Identifier: Apache-2.0
// The catalogue: every detector by name with typed parameters, the default set generated from
// the one list (quiet and allocation-free on a healthy step), and the self-description each
// detector gives (name, question, symptoms, parameters) checked against the symptoms, the
// pattern tables and the findings of a faulty run.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/detectors/configuration.hpp"
#include "mldiag/detectors/convergence/tensor_norm_jump.hpp"  // a tensor detector, not in the catalogue
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/protocol/pattern_tables.hpp"
#include "mldiag/vocab/symptom.hpp"

#include "../support/count_allocations.hpp"
#include "../support/softmax_trainer.hpp"
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace det = mldiag::detectors;

namespace {

using mldiag_test::evidence;
using mldiag_test::gauss;
using mldiag_test::memory;
using mldiag_test::run;
using mldiag_test::run_filled;

// Raised outside the detectors of the catalogue: by the data-parallel check of the MPI merge
// (distributed/mpi.hpp), which lives above this layer.
constexpr mldiag::symptom raised_by_distributed[] = {mldiag::symptoms::replicas_out_of_sync, mldiag::symptoms::ranks_disagree};

constexpr bool raised_anywhere(mldiag::symptom s) {
  for (const auto& info : det::detector_infos)
    if (info.raises(s)) return true;
  if (det::configuration_checks.raises(s)) return true;
  if (det::tensor_norm_jump::about.raises(s)) return true;  // a tensor detector, for per_tensor
  for (const auto x : raised_by_distributed)
    if (x == s) return true;
  return false;
}

// Every symptom a pattern row names is raised by something: a row nothing can match is a typo
// or dead data. Checked at compile time.
constexpr bool every_row_symptom_raised() {
  for (const auto& row : mldiag::protocol::pattern_tables)
    for (const auto s : row.signature)
      if (!s.empty() && !raised_anywhere(s)) return false;
  return true;
}
static_assert(every_row_symptom_raised(), "a pattern row names a symptom that no detector declares");

template <class... Ds>
void check_fields(det::detector_list<Ds...>) {
  (
      [] {
        using D = Ds;
        CAPTURE(D::about.name);
        constexpr auto fields = D::config::fields();
        std::set<std::string_view> names;
        for (const auto& f : fields) CHECK(names.insert(f.name).second);  // each parameter once
        // Every declared parameter is accepted (at its default, which the detector's own checks
        // accept), and an unknown one is refused with the list.
        static const typename D::config defaults{};
        for (const auto& f : fields) {
          const auto v = std::visit([&](auto member) { return det::parameter_value(defaults.*member); }, f.at);
          CHECK_NOTHROW((void)det::make_detector(D::about.name, {{std::string(f.name), v}}));
        }
        std::string list;
        for (const auto& f : fields) list += (list.empty() ? "" : ", ") + std::string(f.name);
        const std::string expected = "its parameters are: " + (list.empty() ? std::string("none") : list);
        CHECK_THROWS_WITH_AS((void)det::make_detector(D::about.name, {{"no_such_parameter", 1.0}}),
                             doctest::Contains(expected.c_str()), mldiag::error);
        // A count refuses a fraction and a flag refuses a number: the field's kind is the config
        // member's, and the message names it.
        for (const auto& f : fields) {
          if (std::holds_alternative<std::size_t D::config::*>(f.at))
            CHECK_THROWS_WITH_AS((void)det::make_detector(D::about.name, {{std::string(f.name), 0.5}}),
                                 doctest::Contains("is a count"), mldiag::error);
          if (std::holds_alternative<bool D::config::*>(f.at))
            CHECK_THROWS_WITH_AS((void)det::make_detector(D::about.name, {{std::string(f.name), 1.0}}),
                                 doctest::Contains("is a flag"), mldiag::error);
        }
        // The description's name is the detector's.
        CHECK(D(typename D::config{}).name() == D::about.name);
        CHECK(det::make_detector(D::about.name).name() == D::about.name);
        CHECK(D::about.symptoms[0].text.size() > 0);  // it declares what it raises
      }(),
      ...);
}

}  // namespace

TEST_CASE("detectors are configured by name and unknown names or parameters are refused") {
  using namespace mldiag::detectors;
  auto d = make_detector("loss_spike", {{"factor", 3.0}, {"sustain", 1.0}});
  CHECK(d.name() == "loss_spike");
  const auto f = run(d, 400, [](int step, mldiag::recorder&, double& loss, double&) { if (step == 350) loss *= 2.5; });
  CHECK(f.empty());  // 2.5x is below the configured factor 3
  CHECK_THROWS_WITH_AS(make_detector("loss_spikes"), doctest::Contains("mldiag: make_detector: no detector named 'loss_spikes'"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(make_detector("loss_spike", {{"threshold", 2.0}}),
                       doctest::Contains("unknown parameter 'threshold'; its parameters are: factor, sustain"), mldiag::error);
  CHECK(default_set().size() == std::size(detector_names));
  CHECK_THROWS_WITH_AS(make_detector("loss_spike", {{"sustain", -1.0}}), doctest::Contains("'sustain' is a count"), mldiag::error);
  CHECK_THROWS_WITH_AS(make_detector("non_finite", {{"x", 1.0}}), doctest::Contains("its parameters are: sustain"), mldiag::error);
}

TEST_CASE("parameter values are typed: a number, a whole number or a flag, each applied to a field of its kind") {
  using det::parameter_value;
  CHECK(parameter_value(3).what() == parameter_value::kind::whole);
  CHECK(parameter_value(std::size_t{3}).what() == parameter_value::kind::whole);
  CHECK(parameter_value(2.5).what() == parameter_value::kind::number);
  CHECK(parameter_value(true).what() == parameter_value::kind::flag);
  CHECK(parameter_value(3.0).whole() == 3);  // a number that is whole counts as one
  CHECK_FALSE(parameter_value(2.5).whole().has_value());
  CHECK(parameter_value(true).number() == 1.0);
  CHECK(parameter_value(4) == parameter_value(4));
  CHECK_FALSE(parameter_value(4) == parameter_value(4.0));  // the kind is part of the value

  // Refused, with the field's kind named: a fraction or a flag for a count, a flag for a
  // number, a number or a whole number other than 0 and 1 for a flag.
  CHECK_THROWS_WITH_AS((void)det::make_detector("loss_spike", {{"sustain", 2.5}}),
                       doctest::Contains("make_detector 'loss_spike': parameter 'sustain' is a count"), mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector("loss_spike", {{"sustain", true}}), doctest::Contains("'sustain' is a count"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector("loss_spike", {{"factor", true}}), doctest::Contains("'factor' is a number"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector("repeated_batch", {{"full_batch", 1.0}}),
                       doctest::Contains("parameter 'full_batch' is a flag; give true or false"), mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector("repeated_batch", {{"full_batch", 2}}), doctest::Contains("'full_batch' is a flag"),
                       mldiag::error);

  // Accepted, and in effect. A whole number for a number: factor 3 ignores a 2.5x loss that the
  // default factor (1.5) finds.
  const auto spike = [](int step, mldiag::recorder&, double& loss, double&) {
    if (step == 350) loss *= 2.5;
  };
  auto three = det::make_detector("loss_spike", {{"factor", 3}, {"sustain", 1}});
  CHECK(run(three, 400, spike).empty());
  auto default_factor = det::make_detector("loss_spike", {{"sustain", 1}});
  CHECK_FALSE(run(default_factor, 400, spike).empty());
  // A flag for a flag (and 1 or 0 as one): full_batch makes the same input batch every step info.
  const std::vector<float> batch = {0.5f, -1.0f, 2.0f, 0.25f};
  const auto repeated = [&](det::any_detector d) {
    const auto f = run(d, 20, [&](int, mldiag::recorder& r, double&, double&) { r.observe(mldiag::role::input, "x", batch); });
    REQUIRE(f.size() == 1);
    return f[0].severity;
  };
  CHECK(repeated(det::make_detector("repeated_batch", {{"sustain", 5}})) == mldiag::severity::warning);
  CHECK(repeated(det::make_detector("repeated_batch", {{"sustain", 5}, {"full_batch", true}})) == mldiag::severity::info);
  CHECK(repeated(det::make_detector("repeated_batch", {{"sustain", 5}, {"full_batch", 1}})) == mldiag::severity::info);
  CHECK(repeated(det::make_detector("repeated_batch", {{"sustain", 5}, {"full_batch", false}})) == mldiag::severity::warning);
  CHECK(det::has_parameter("repeated_batch", "full_batch"));
  CHECK_FALSE(det::has_parameter("repeated_batch", "fullbatch"));
  CHECK_FALSE(det::has_parameter("no_such_detector", "sustain"));
}

TEST_CASE("the default set allocates nothing on a step where nothing fires") {
  auto set = mldiag::detectors::default_set();
  mldiag::recorder rec(64);
  std::vector<float> grad(256, 0.01f);
  std::vector<mldiag::finding> out;
  out.reserve(16);
  auto step = [&](int i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, 1.0 + 3.0 * std::exp(-i / 300.0) + 0.01 * ((3 * i) % 7));
    rec.observe(mldiag::scalar::loss_scale, 65536.0);
    rec.observe(mldiag::role::gradient, "w", grad);
    set.observe({rec.end_step(), rec.past(), rec.names()}, out);
  };
  for (int i = 0; i < 200; ++i) step(i);
  REQUIRE(out.empty());
  const auto before = mldiag_test::allocations();
  for (int i = 200; i < 1200; ++i) step(i);
  CHECK(mldiag_test::allocations() == before);
  CHECK(out.empty());
}

TEST_CASE(
    "the default set stays quiet on a healthy run with all Q3 evidence and allocates nothing") {
  auto set = det::default_set();
  mldiag::recorder rec(64);
  std::mt19937_64 rng(5);
  std::vector<mldiag::finding> out;
  out.reserve(16);
  std::vector<double> ranks(8);
  auto step = [&](int i) {
    rec.begin_step(i);
    rec.observe(mldiag::scalar::loss, 1.0 + 3.0 * std::exp(-i / 300.0) + 0.01 * ((3 * i) % 7));
    mldiag::step_timings t;
    t.data_wait = gauss(rng, 0.002, 0.2);
    t.communication = gauss(rng, 0.006, 0.2);
    t.total = gauss(rng, 0.1, 0.03);
    rec.observe(t);
    rec.observe(mldiag::efficiency_evidence{.mfu = std::min(1.0, gauss(rng, 0.45, 0.03))});
    rec.observe(mldiag::efficiency_evidence{.throughput = gauss(rng, 1e5, 0.02), .throughput_target = 1e5});
    rec.observe(mldiag::efficiency_evidence{.communication_bytes = 1.2e9, .link_bandwidth = 4e11});
    rec.observe(memory(gauss(rng, 50e9, 0.01), 60e9, 80e9));
    for (auto& x : ranks)
      x = gauss(rng, 0.09, 0.02);
    rec.observe(mldiag::rank_step_times{ranks});
    set.observe({rec.end_step(), rec.past(), rec.names()}, out);
  };
  for (int i = 0; i < 300; ++i)
    step(i);
  REQUIRE(out.empty());
  const auto before = mldiag_test::allocations();
  for (int i = 300; i < 1300; ++i)
    step(i);
  CHECK(mldiag_test::allocations() == before);
  CHECK(out.empty());
}

TEST_CASE("each detector describes itself once and the catalogue is generated from the list") {
  CHECK(det::detector_names.size() == det::all_detectors::size);
  CHECK(det::default_set().size() == det::all_detectors::size);
  for (std::size_t i = 0; i < det::detector_names.size(); ++i) {
    CAPTURE(det::detector_names[i]);
    CHECK(det::default_set()[i].name() == det::detector_names[i]);
    CHECK(det::detector_infos[i].name == det::detector_names[i]);
  }
  check_fields(det::all_detectors{});
}

TEST_CASE("symptoms: unique texts, each raised by something, found by text") {
  std::set<std::string_view> texts;
  for (const auto s : mldiag::symptoms::all) {
    CAPTURE(s.text);
    CHECK(texts.insert(s.text).second);
    CHECK(raised_anywhere(s));
    CHECK(mldiag::symptoms::find(s.text) == s);
  }
  CHECK(mldiag::symptoms::find("loss spikes").empty());  // a typo finds nothing
  const mldiag::finding f = mldiag::make_finding(mldiag::question::early_anomaly, mldiag::symptoms::loss_spike,
                                                 mldiag::severity::warning, 3, "loss_spike");
  CHECK(f.symptom == "loss spike");
  CHECK(f.symptom == mldiag::symptoms::loss_spike);
}

TEST_CASE("the findings of a faulty run name symptoms their detector declares") {
  // Softmax regression with a learning rate far too high, and a NaN planted late: many
  // detectors fire.
  mldiag::recorder rec(256);
  auto set = det::default_set();
  std::vector<mldiag::finding> out;
  mldiag_test::train_softmax({.lr = 10.0}, [&](int step, double loss, const std::vector<float>& gw, const std::vector<float>& gb) {
    rec.begin_step(step);
    rec.observe(mldiag::scalar::loss, step == 350 ? NAN : loss);
    rec.observe(mldiag::scalar::learning_rate, step < 5 ? 0.0 : 10.0);
    rec.observe(mldiag::role::gradient, "classifier.weight", gw);
    rec.observe(mldiag::role::gradient, "classifier.bias", gb);
    set.observe({rec.end_step(), rec.past(), rec.names()}, out);
  });
  REQUIRE(out.size() >= 3);
  std::set<std::string> detectors;
  for (const auto& f : out) {
    CAPTURE(f.detector);
    CAPTURE(f.symptom);
    const auto it = std::find_if(det::detector_infos.begin(), det::detector_infos.end(),
                                 [&](const det::detector_info& i) { return i.name == f.detector; });
    REQUIRE(it != det::detector_infos.end());
    CHECK(it->raises(mldiag::symptoms::find(f.symptom)));
    CHECK(f.question == it->question);
    detectors.insert(f.detector);
  }
  CHECK(detectors.size() >= 2);
}

TEST_CASE("the Q3 detectors are in the catalogue with their parameters and have pattern rows") {
  for (std::string_view n :
       {"low_mfu", "throughput_below_target", "communication_overhead", "memory_pressure",
        "memory_fragmentation", "memory_growth", "step_time_outliers", "straggler"}) {
    CHECK(det::make_detector(n).name() == n);
    CHECK(std::find(std::begin(det::detector_names), std::end(det::detector_names), n) !=
          std::end(det::detector_names));
  }
  CHECK_THROWS_WITH_AS(det::make_detector("straggler", {{"ratio", 1.0}}),
                       doctest::Contains("its parameters are: min_ratio, sustain"), mldiag::error);
  auto d = det::make_detector("memory_pressure", {{"max_fill", 0.5}, {"sustain", 1.0}});
  CHECK(run_filled(d, 3, [](int, auto& r, auto&) { r.observe(memory(1e9, 5e9, 8e9)); }).size() == 1);
  for (std::string_view symptom :
       {"low MFU", "throughput below target", "communication overhead", "memory pressure",
        "memory fragmentation", "memory growth", "step-time outliers", "straggler",
        "input starvation", "one layer dominates step time"}) {
    CHECK_MESSAGE(std::any_of(mldiag::protocol::pattern_tables.begin(),
                              mldiag::protocol::pattern_tables.end(),
                              [&](const auto& row) {
                                return row.table == "efficiency" &&
                                       mldiag::protocol::matches(row, symptom);
                              }),
                  symptom);
  }
}
