// SPDX-License-Identifier: Apache-2.0
// Self-describing detectors: each one's description (name, question, symptoms, parameters) is
// the single source that the catalogue, the default set and the pattern tables are checked
// against, and the findings a detector raises are among the symptoms it declares.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/detectors/configuration.hpp"
#include "mldiag/detectors/symptoms.hpp"
#include "mldiag/protocol/pattern_tables.hpp"

#include "../support/softmax_trainer.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace det = mldiag::detectors;

namespace {

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
          const double v = std::visit([&](auto member) { return static_cast<double>(defaults.*member); }, f.at);
          CHECK_NOTHROW((void)det::make_detector(D::about.name, {{std::string(f.name), v}}));
        }
        std::string list;
        for (const auto& f : fields) list += (list.empty() ? "" : ", ") + std::string(f.name);
        const std::string expected = "its parameters are: " + (list.empty() ? std::string("none") : list);
        CHECK_THROWS_WITH_AS((void)det::make_detector(D::about.name, {{"no_such_parameter", 1.0}}),
                             doctest::Contains(expected.c_str()), mldiag::error);
        // A count refuses a fraction: the field's kind is the config member's.
        for (const auto& f : fields)
          if (std::holds_alternative<std::size_t D::config::*>(f.at))
            CHECK_THROWS_AS((void)det::make_detector(D::about.name, {{std::string(f.name), 0.5}}), mldiag::error);
        // The description's name is the detector's.
        CHECK(D(typename D::config{}).name() == D::about.name);
        CHECK(det::make_detector(D::about.name).name() == D::about.name);
        CHECK(D::about.symptoms[0].text.size() > 0);  // it declares what it raises
      }(),
      ...);
}

}  // namespace

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
  const mldiag::finding f = det::make_finding(mldiag::question::early_anomaly, mldiag::symptoms::loss_spike,
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
    rec.record_loss(step == 350 ? NAN : loss);
    rec.record_lr(step < 5 ? 0.0 : 10.0);
    rec.record(mldiag::role::gradient, "classifier.weight", gw);
    rec.record(mldiag::role::gradient, "classifier.bias", gb);
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
