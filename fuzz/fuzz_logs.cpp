// SPDX-License-Identifier: Apache-2.0
// Fuzzes the training-log readers (tools/cli/logs.hpp): any bytes, read with the format
// detected (under a few names) and with each format forced, either parse or throw
// mldiag::error; nothing else may happen (a crash, a sanitizer report, another exception).
// A read that succeeds must keep run_log's shape: one value per step in every column, steps
// strictly increasing.
#include "cli/logs.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void check(const std::vector<mldiag::report::run_log>& runs) {
  for (const auto& r : runs) {
    for (std::size_t i = 1; i < r.steps.size(); ++i)
      if (r.steps[i] <= r.steps[i - 1]) std::abort();
    if (r.metric_values.size() != r.metric_names.size()) std::abort();
    for (const auto& column : r.metric_values)
      if (column.size() != r.steps.size()) std::abort();
  }
}

void run(std::string_view bytes, std::string_view name, const mldiag::cli::log_options& options) {
  try {
    check(mldiag::cli::parse_log(bytes, name, options));
  } catch (const mldiag::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mldiag::cli::log_options options;
  for (const char* name : {"run.log", "run.csv", "run.jsonl", "trainer_state.json", "events.out.tfevents.1"}) run(bytes, name, options);
  for (const char* format : {"csv", "jsonl", "hf", "megatron", "tensorboard"}) {
    options.format = format;
    run(bytes, "fuzz", options);
  }
  // Grouping and overrides take other paths through the CSV and JSON readers.
  options = {};
  options.group_by = "section";
  options.columns = {{"loss", "l"}};
  run(bytes, "fuzz.csv", options);
  options.format = "jsonl";
  run(bytes, "fuzz", options);
  return 0;
}
