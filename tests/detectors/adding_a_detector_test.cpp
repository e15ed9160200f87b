// SPDX-License-Identifier: Apache-2.0
// Adding a detector is its own file (example_detector.hpp) and one line in a catalogue: the
// catalogue built from the list names it, makes it by name with typed parameters, refuses what
// it does not take, puts it in the default set, and a run through that set finds what it finds.
#include <doctest/doctest.h>

#include "mldiag/detectors/catalogue.hpp"
#include "mldiag/detectors/describe.hpp"
#include "mldiag/monitor.hpp"
#include "mldiag/evidence/recorder.hpp"

#include "example_detector.hpp"
#include "support.hpp"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace det = mldiag::detectors;

// The one line: the library's catalogue and this project's detector.
using extended = det::all_detectors::with<example::loss_below_floor>;

namespace {

// The synthetic run (loss 5 -> 2) with the loss at 0.5 from step 100: below a floor of 1.
const mldiag_test::fault_fn leak = [](int step, mldiag::recorder&, double& loss, double&) {
  if (step >= 100) loss = 0.5;
};

std::vector<mldiag::finding> by(const std::vector<mldiag::finding>& all, std::string_view detector) {
  std::vector<mldiag::finding> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out), [&](const mldiag::finding& f) { return f.detector == detector; });
  return out;
}

}  // namespace

TEST_CASE("adding a detector: the catalogue built from the list names it and describes it") {
  constexpr auto names = det::detector_names_of(extended{});
  static_assert(names.size() == det::all_detectors::size + 1);
  static_assert(names.back() == "loss_below_floor");
  CHECK(std::equal(det::detector_names.begin(), det::detector_names.end(), names.begin()));  // the library's first, in order
  constexpr auto infos = det::detector_infos_of(extended{});
  static_assert(infos.back().raises(example::symptoms::loss_below_floor));
  static_assert(infos.back().question == mldiag::question::convergence);
  CHECK(infos.back().summary == "a loss below the floor its task allows");
  CHECK(det::has_parameter(extended{}, "loss_below_floor", "floor"));
  CHECK(det::has_parameter(extended{}, "loss_below_floor", "sustain"));
  CHECK_FALSE(det::has_parameter(extended{}, "loss_below_floor", "ceiling"));
  CHECK(det::has_parameter(extended{}, "loss_spike", "factor"));  // the library's detectors are in it too
  // The library's own catalogue is unchanged: it does not know the detector.
  CHECK(std::find(det::detector_names.begin(), det::detector_names.end(), "loss_below_floor") == det::detector_names.end());
  CHECK_THROWS_WITH_AS((void)det::make_detector("loss_below_floor"), doctest::Contains("no detector named 'loss_below_floor'"),
                       mldiag::error);
}

TEST_CASE("adding a detector: made by name with typed parameters and unknown names and parameters are refused") {
  auto d = det::make_detector(extended{}, "loss_below_floor", {{"floor", 1}, {"sustain", 2}});  // a whole number for a number
  CHECK(d.name() == "loss_below_floor");
  // Its parameters took effect: a sustain of 2 finds the leak at step 101, from step 100.
  const auto f = mldiag_test::run(d, 150, leak);
  REQUIRE(f.size() == 1);
  CHECK(f[0].first_step == 100);
  CHECK(f[0].last_step == 101);
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_floor", {{"ceiling", 1.0}}),
                       doctest::Contains("make_detector 'loss_below_floor': unknown parameter 'ceiling'; its parameters are: floor, sustain"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_floor", {{"sustain", 1.5}}),
                       doctest::Contains("'sustain' is a count"), mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_floor", {{"floor", true}}),
                       doctest::Contains("'floor' is a number"), mldiag::error);
  // The detector's own checks still run.
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_floor", {{"sustain", 0}}),
                       doctest::Contains("mldiag: loss_below_floor: need"), mldiag::error);
  // An unknown name lists the list's detectors, this one among them.
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_flor"), doctest::Contains("no detector named 'loss_below_flor'"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS((void)det::make_detector(extended{}, "loss_below_flor"), doctest::Contains("loss_below_floor"), mldiag::error);
  // The library's detectors are made through the extended list as through its own.
  CHECK(det::make_detector(extended{}, "loss_spike", {{"factor", 3}}).name() == "loss_spike");
}

TEST_CASE("adding a detector: the default set built from the list holds it, and a run through the set finds the leak") {
  auto set = det::default_set(extended{});
  REQUIRE(set.size() == det::all_detectors::size + 1);
  CHECK(set.contains("loss_below_floor"));
  CHECK(set[set.size() - 1].name() == "loss_below_floor");
  // With its defaults it is off (no floor known): silent on the leak.
  CHECK(by(mldiag_test::run(set, 150, leak), "loss_below_floor").empty());
  // Told the floor, in its place in the set: silent on a healthy run, the leak found at the
  // third observation below the floor, a warning with its reason.
  auto healthy = det::default_set(extended{});
  healthy.replace(det::make_detector(extended{}, "loss_below_floor", {{"floor", 1.0}}));
  CHECK(by(mldiag_test::run(healthy, 150, mldiag_test::healthy), "loss_below_floor").empty());
  auto told = det::default_set(extended{});
  told.replace(det::make_detector(extended{}, "loss_below_floor", {{"floor", 1.0}}));
  CHECK(told.size() == det::all_detectors::size + 1);
  CHECK(told[told.size() - 1].name() == "loss_below_floor");
  const auto found = by(mldiag_test::run(told, 150, leak), "loss_below_floor");
  REQUIRE(found.size() == 1);
  CHECK(found[0].symptom == example::symptoms::loss_below_floor);
  CHECK(found[0].question == mldiag::question::convergence);
  CHECK(found[0].first_step == 100);
  CHECK(found[0].last_step == 102);
  CHECK(found[0].severity == mldiag::severity::warning);
  CHECK(found[0].why == "held 3 of 3 observations; no loss of this task goes below its floor");
  CHECK(mldiag_test::evidence(found[0], "floor") == 1.0);
}

TEST_CASE("adding a detector: the lines docs/detectors.md shows compile and do what it says") {
  mldiag::monitor mon;
  // [own_detector_use]
  using my_detectors = mldiag::detectors::all_detectors::with<example::loss_below_floor>;

  auto d = mldiag::detectors::make_detector(my_detectors{}, "loss_below_floor", {{"floor", 1.0}});
  auto all = mldiag::detectors::default_set(my_detectors{});         // the library's and yours
  std::string table = mldiag::detectors::describe_markdown(my_detectors{});  // your catalogue table
  mon.add(example::loss_below_floor({.floor = 1.0}));                 // or straight into a monitor
  // [own_detector_use]
  CHECK(d.name() == "loss_below_floor");
  CHECK(all.size() == det::all_detectors::size + 1);
  CHECK(all.contains("loss_below_floor"));
  CHECK(mon.detector_set().contains("loss_below_floor"));
  // Its row, written out by hand: name, question, symptom, summary, what earns a warning (it
  // states none: a dash), the defaults of its fields.
  CHECK(table.find("| `loss_below_floor` | Q1 convergence | loss below its floor | a loss below the floor its task allows | — | "
                   "`floor` -inf, `sustain` 3 |\n") != std::string::npos);
  CHECK(table.find("| `loss_spike` |") != std::string::npos);
  CHECK(table.rfind("| `loss_below_floor`") > table.find("| `straggler`"));  // after the library's, in list order
}
