// SPDX-License-Identifier: Apache-2.0
// L0: a task checked before the first step. Each field that is set is checked; the findings
// have step -1, name the "configuration" checks and their declared symptoms; the monitor runs
// them at construction and delivers them to its sinks once, at the first end_step.
#include <doctest/doctest.h>

#include "mldiag/detectors/configuration.hpp"
#include "mldiag/detectors/task.hpp"
#include "mldiag/monitor.hpp"

#include "support.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace {

using mldiag::severity;
using mldiag::detectors::check_configuration;
using mldiag_test::evidence;

}  // namespace

TEST_CASE("L0: a sane task gives nothing and each wrong field one finding of its own, at step -1") {
  CHECK(check_configuration({}).empty());
  CHECK(check_configuration({.classes = 10, .learning_rate = 3e-4, .label_min = 0, .label_max = 9}).empty());
  // Labels outside [0, classes): critical.
  const auto labels = check_configuration({.classes = 10, .learning_rate = 3e-4, .label_min = 0, .label_max = 10});
  REQUIRE(labels.size() == 1);
  CHECK(labels[0].symptom == mldiag::symptoms::labels_out_of_range);
  CHECK(labels[0].severity == severity::critical);
  CHECK(labels[0].question == mldiag::question::convergence);
  CHECK(labels[0].first_step == -1);
  CHECK(labels[0].last_step == -1);
  CHECK(labels[0].detector == "configuration");
  CHECK(evidence(labels[0], "label_max") == 10.0);
  CHECK(evidence(labels[0], "classes") == 10.0);
  REQUIRE(check_configuration({.classes = 10, .label_min = -1, .label_max = 9}).size() == 1);
  // Without the number of classes the labels cannot be judged.
  CHECK(check_configuration({.label_min = 0, .label_max = 1000}).empty());
  // A learning rate that is not a positive number: critical; one above lr_sanity's line: info,
  // which lr_sanity makes a warning when the run's progress worsens (issue 38).
  for (const double lr : {std::numeric_limits<double>::quiet_NaN(), -1e-3, 0.0, std::numeric_limits<double>::infinity()}) {
    CAPTURE(lr);
    const auto f = check_configuration({.learning_rate = lr});
    REQUIRE(f.size() == 1);
    CHECK(f[0].symptom == mldiag::symptoms::lr_not_finite_or_negative);
    CHECK(f[0].severity == severity::critical);
  }
  const auto large = check_configuration({.learning_rate = 8.0});
  REQUIRE(large.size() == 1);
  CHECK(large[0].symptom == mldiag::symptoms::lr_absurdly_large);
  CHECK(large[0].severity == severity::info);
  CHECK(evidence(large[0], "max_lr") == mldiag::thresholds::max_learning_rate);
  CHECK(check_configuration({.learning_rate = mldiag::thresholds::max_learning_rate}).empty());  // the line itself is sane
  // fp16 without loss scaling: a warning; with it, nothing.
  const auto fp16 = check_configuration({.fp16 = true, .loss_scaling = false});
  REQUIRE(fp16.size() == 1);
  CHECK(fp16[0].symptom == mldiag::symptoms::fp16_without_loss_scaling);
  CHECK(fp16[0].severity == severity::warning);
  CHECK(check_configuration({.fp16 = true}).empty());
  // No data-loader workers: the step waits for its data (Q3), info.
  const auto workers = check_configuration({.data_loader_workers = 0});
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].symptom == mldiag::symptoms::input_starvation);
  CHECK(workers[0].question == mldiag::question::efficiency);
  CHECK(workers[0].severity == severity::info);
  CHECK(check_configuration({.data_loader_workers = 4}).empty());
  // Several wrong fields: one finding each; every one among the symptoms the checks declare.
  const auto all = check_configuration({.classes = 2, .learning_rate = 50.0, .label_min = 0, .label_max = 2, .fp16 = true,
                                        .loss_scaling = false, .data_loader_workers = 0});
  CHECK(all.size() == 4);
  for (const auto& f : all) {
    CAPTURE(f.symptom);
    CHECK(mldiag::detectors::configuration_checks.raises(mldiag::symptoms::find(f.symptom)));
    CHECK(f.first_step == -1);
  }
}

TEST_CASE(
    "L0: tiny batch, fused attention off and fp32 where bf16 was meant are findings before the "
    "first step") {
  mldiag::monitor mon({.task = {.data_loader_workers = 4,
                                .tokens_per_step = 1024,
                                .fused_attention = false,
                                .compute_dtype = mldiag::dtype::f32,
                                .mixed_precision = true}});
  const auto f = mon.configuration_findings();
  REQUIRE(f.size() == 3);
  for (const auto& x : f) {
    CHECK(x.question == mldiag::question::efficiency);
    CHECK(x.symptom == "low MFU");
    CHECK(x.first_step == -1);
  }
  CHECK(f[0].where.front().first == "tokens_per_step");
  CHECK(evidence(f[0], "tokens_per_step") == 1024);
  CHECK(f[0].severity == mldiag::severity::info);
  CHECK(f[1].where.front().first == "fused_attention");
  CHECK(f[2].where.front().first == "compute_dtype");
  CHECK(f[2].severity == mldiag::severity::warning);
  CHECK(evidence(f[2], "compute_dtype_bytes") == 4);
  CHECK(mon.open_diagnoses() == 1);  // the warning opens one; info findings none
  CHECK(mldiag::monitor({.task = {.tokens_per_step = 8192,
                                  .fused_attention = true,
                                  .compute_dtype = mldiag::dtype::bf16,
                                  .mixed_precision = true}})
            .configuration_findings()
            .empty());
  CHECK(mldiag::monitor({.task = {.tokens_per_step = 1024, .min_tokens_per_step = 512}}).configuration_findings().empty());
}

TEST_CASE("L0 through the monitor: found at construction, delivered once at the first end_step, not returned by it") {
  mldiag::monitor mon({.task = {.fp16 = true, .loss_scaling = false}});
  REQUIRE(mon.configuration_findings().size() == 1);
  CHECK(mon.configuration_findings()[0].symptom == mldiag::symptoms::fp16_without_loss_scaling);
  CHECK(mon.configuration_findings()[0].first_step == -1);
  REQUIRE(mon.open_diagnoses() == 1);  // a warning opens a diagnosis before any step
  CHECK(mon.opened_by(0).symptom == mldiag::symptoms::fp16_without_loss_scaling);
  auto seen = std::make_shared<std::vector<mldiag::finding>>();
  mon.attach([seen](const mldiag::finding& f) { seen->push_back(f); });  // attached after construction
  CHECK(seen->empty());
  mon.begin_step(0);
  mon.observe(mldiag::scalar::loss, 2.0);
  CHECK(mon.end_step().empty());  // the step's own findings: none
  REQUIRE(seen->size() == 1);
  CHECK((*seen)[0].symptom == mldiag::symptoms::fp16_without_loss_scaling);
  CHECK((*seen)[0].first_step == -1);
  CHECK_FALSE((*seen)[0].is_consequence());
  // The next step's findings come after it, and the task's are not delivered again.
  mon.begin_step(1);
  mon.observe(mldiag::scalar::loss, std::nan(""));
  const auto own = mon.end_step();
  REQUIRE(own.size() == 1);
  CHECK(own[0].symptom == mldiag::symptoms::non_finite_loss);
  REQUIRE(seen->size() == 2);
  CHECK((*seen)[1].symptom == mldiag::symptoms::non_finite_loss);
  // A clipping bound that is no bound is refused when the monitor is built, with what to do.
  CHECK_THROWS_WITH_AS((void)mldiag::monitor({.task = {.max_grad_norm = 0.0}}),
                       doctest::Contains("mldiag: task::max_grad_norm is 0"), mldiag::error);
  CHECK_THROWS_AS((void)mldiag::monitor({.task = {.max_grad_norm = std::numeric_limits<double>::quiet_NaN()}}), mldiag::error);
}
