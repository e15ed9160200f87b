// SPDX-License-Identifier: Apache-2.0
// Fuzzes the checkpoint readers (tools/cli/checkpoint*.hpp): any bytes, named as each format
// and as an unknown one, are indexed and then read (statistics, and a diff with themselves);
// they either work or throw mldiag::error. Anything else (a crash, a sanitizer report, another
// exception, a hang) is a bug.
#include "cli/checkpoint.hpp"
#include "cli/checkpoint_diff.hpp"
#include "cli/checkpoint_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  for (const char* name : {"fuzz.safetensors", "fuzz.npy", "fuzz.npz", "fuzz.bin"}) {
    try {
      const auto c = mldiag::cli::checkpoint::from_memory(bytes, name);
      // A small window: several windows per tensor even for small inputs.
      (void)mldiag::cli::checkpoint_stats(c, 1, 4096);
      (void)mldiag::cli::diff_checkpoints(c, c, 2, 4096);
    } catch (const mldiag::error&) {
    }
  }
  return 0;
}
