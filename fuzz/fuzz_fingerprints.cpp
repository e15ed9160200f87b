// SPDX-License-Identifier: Apache-2.0
// Fuzzes the fingerprint reader `mldiag compare` runs on user files (tools/cli/compare.hpp):
// any bytes either parse or throw mldiag::error, and what parses goes through compare (against
// itself) the same way: a result or mldiag::error, nothing else.
#include "cli/compare.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>  // std::abort
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto rows = mldiag::cli::parse_fingerprints(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jsonl");
    const auto d = mldiag::inference::compare(rows, rows);
    if (d.matched + d.unmatched < rows.size()) std::abort();  // every row is matched or counted as not
  } catch (const mldiag::error&) {
  }
  return 0;
}
