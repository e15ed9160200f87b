// SPDX-License-Identifier: Apache-2.0
// Fuzzes mldiag's JSON reader (report/json.hpp): any bytes either parse or throw
// mldiag::error; nothing else may happen (a crash, a sanitizer report, another exception).
#include "mldiag/report/json.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)mldiag::report::json::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const mldiag::error&) {
  }
  return 0;
}
