// SPDX-License-Identifier: Apache-2.0
/// The diagnosis log: one `{phase, text}` record per step of the method, and the phase labels.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <cstdint>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI::protocol {

/// The method's four phases, numbered as the method numbers them (0: not known, for a log
/// read back from a file that did not say).
enum class phase_id : std::uint8_t { unknown = 0, evidence = 1, pattern = 2, hypothesis = 3, fix = 4 };

/// "evidence", "pattern", "hypothesis", "fix and verify": the phase's name.
[[nodiscard]] constexpr std::string_view title(phase_id p) noexcept {
  switch (p) {
    case phase_id::evidence: return "evidence";
    case phase_id::pattern: return "pattern";
    case phase_id::hypothesis: return "hypothesis";
    case phase_id::fix: return "fix and verify";
    case phase_id::unknown: break;
  }
  return "phase unknown";
}

/// "phase 1 (evidence)" ... "phase 4 (fix and verify)": how every report labels a phase.
[[nodiscard]] constexpr std::string_view label(phase_id p) noexcept {
  switch (p) {
    case phase_id::evidence: return "phase 1 (evidence)";
    case phase_id::pattern: return "phase 2 (pattern)";
    case phase_id::hypothesis: return "phase 3 (hypothesis)";
    case phase_id::fix: return "phase 4 (fix and verify)";
    case phase_id::unknown: break;
  }
  return "phase unknown";
}

/// The phase with number `n` (1-4), or `unknown`.
[[nodiscard]] constexpr phase_id phase_from_number(long long n) noexcept {
  return n >= 1 && n <= 4 ? static_cast<phase_id>(n) : phase_id::unknown;
}

/// One record of a diagnosis log: the phase it was written in and what happened, without a
/// phase prefix (reports add `label(phase)` themselves).
///
/// **Example**: `{phase_id::hypothesis, "'learning rate too high' rejected (...)"}`.
struct log_entry {
  phase_id phase = phase_id::unknown;
  std::string text;
  [[nodiscard]] int number() const noexcept { return static_cast<int>(phase); }
};

}  // namespace mldiag::protocol
