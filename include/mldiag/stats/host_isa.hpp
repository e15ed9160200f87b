// SPDX-License-Identifier: Apache-2.0
/// Which vector unit the host statistics use: chosen once at run time from the CPU (issue 18).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_HOST_DISPATCH

#include <atomic>
#include <cstdlib>  // std::getenv
#include <string_view>

// MLDIAG_HOST_DISPATCH (core/config.hpp) says whether the kernels are chosen at run time.

namespace mldiag::inline MLDIAG_ABI {

/// The vector units the host statistics kernel is built for, narrowest first. `portable` is
/// the compiler's default target (SSE2 on x86-64, NEON on arm64): the only one where there is
/// no dispatch. `avx512_bf16` is `avx512` on a CPU with the BF16 dot product (Zen 4 and later,
/// Cooper Lake, Sapphire Rapids and later); the statistics run the `avx512` kernels there (a
/// dot-product kernel for bf16 was slower than the one without it on an Emerald Rapids Xeon,
/// docs/stats.md), and the value stays so that `MLDIAG_HOST_ISA` and the benchmarks keep
/// naming what the CPU has.
enum class host_isa : int { portable = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };

/// Every ISA, narrowest first (for tests and benchmarks that try each one the CPU can run).
inline constexpr host_isa host_isas[] = {host_isa::portable, host_isa::avx2, host_isa::avx512,
                                         host_isa::avx512_bf16};

/// The name of an ISA as the benchmarks print it: "portable", "avx2", "avx512", "avx512_bf16".
[[nodiscard]] constexpr std::string_view host_isa_name(host_isa isa) noexcept {
  switch (isa) {
    case host_isa::avx2: return "avx2";
    case host_isa::avx512: return "avx512";
    case host_isa::avx512_bf16: return "avx512_bf16";
    case host_isa::portable: break;
  }
  return "portable";
}

namespace detail {

// The widest ISA this CPU (and its operating system, which must save the wide registers)
// supports among those the kernel is built for.
inline host_isa detect_host_isa() noexcept {
#ifdef MLDIAG_HOST_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return __builtin_cpu_supports("avx512bf16") ? host_isa::avx512_bf16 : host_isa::avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return host_isa::avx2;
#endif
  return host_isa::portable;
}

// The ISA in use: the CPU's best, or a narrower one named by the environment variable
// MLDIAG_HOST_ISA (portable, avx2, avx512, avx512_bf16; a name the CPU cannot run is
// ignored). Read once.
inline std::atomic<int>& host_isa_slot() noexcept {
  static std::atomic<int> slot{[] {
    const host_isa best = detect_host_isa();
    host_isa chosen = best;
    if (const char* env = std::getenv("MLDIAG_HOST_ISA")) {
      for (host_isa isa : host_isas) {
        if (host_isa_name(isa) == env && static_cast<int>(isa) <= static_cast<int>(best)) chosen = isa;
      }
    }
    return static_cast<int>(chosen);
  }()};
  return slot;
}

}  // namespace detail

/// The ISA the host statistics run on in this process: the widest one the CPU supports, unless
/// the environment variable `MLDIAG_HOST_ISA` names a narrower one. Results are bit-identical
/// run to run and across thread counts for one ISA; two ISAs may differ in the last bits
/// (within the accuracy contract of docs/stats.md).
[[nodiscard]] inline host_isa active_host_isa() noexcept {
  return static_cast<host_isa>(detail::host_isa_slot().load(std::memory_order_relaxed));
}

/// Selects the ISA for this process (tests, benchmarks). Returns false, and changes nothing,
/// when the CPU cannot run it. Not meant to be called while statistics are being computed.
inline bool select_host_isa(host_isa isa) noexcept {
  if (static_cast<int>(isa) > static_cast<int>(detail::detect_host_isa())) return false;
  detail::host_isa_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

}  // namespace mldiag
