// SPDX-License-Identifier: Apache-2.0
// Fuzzes the mldiag JSON Lines reader (report/jsonl.hpp), which `mldiag report` runs on
// user files: any bytes either read or throw mldiag::error.
#include "mldiag/report/jsonl.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)mldiag::report::parse_jsonl(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jsonl");
  } catch (const mldiag::error&) {
  }
  return 0;
}
