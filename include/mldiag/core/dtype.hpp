// SPDX-License-Identifier: Apache-2.0
/// Run-time tags: the element type (`dtype`) and the device (`device`) of a tensor.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include <cstddef>  // std::size_t
#include <cstdint>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// The element types mldiag reads. The numbering is stable (it appears in reports).
enum class dtype : std::uint8_t {
  f64 = 0,      ///< IEEE binary64
  f32 = 1,      ///< IEEE binary32
  f16 = 2,      ///< IEEE binary16 (`mldiag::half`)
  bf16 = 3,     ///< bfloat16 (`mldiag::bfloat16`)
  f8_e4m3 = 4,  ///< OCP FP8 E4M3, no infinities (`mldiag::float8_e4m3`)
  f8_e5m2 = 5,  ///< OCP FP8 E5M2 (`mldiag::float8_e5m2`)
};

/// Number of `dtype` values; `static_cast<int>(t) < dtype_count` for every valid `t`.
inline constexpr int dtype_count = 6;

/// Bytes per element.
[[nodiscard]] constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::f64: return 8;
    case dtype::f32: return 4;
    case dtype::f16:
    case dtype::bf16: return 2;
    case dtype::f8_e4m3:
    case dtype::f8_e5m2: return 1;
  }
  return 0;  // not a dtype: callers validate with is_valid()
}

/// True for the enumerators above (a `dtype` read from a file or a cast may be anything).
[[nodiscard]] constexpr bool is_valid(dtype t) noexcept {
  return static_cast<unsigned>(t) < static_cast<unsigned>(dtype_count);
}

/// The name people use for it in logs: "f64", "f32", "f16", "bf16", "f8_e4m3", "f8_e5m2".
[[nodiscard]] constexpr std::string_view name(dtype t) noexcept {
  switch (t) {
    case dtype::f64: return "f64";
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::f8_e4m3: return "f8_e4m3";
    case dtype::f8_e5m2: return "f8_e5m2";
  }
  return "invalid";
}

/// Where a tensor's memory lives.
enum class device_kind : std::uint8_t { host = 0, cuda = 1 };

/// A device: host memory, or the memory of CUDA device `index`.
struct device {
  device_kind kind = device_kind::host;
  int index = 0;

  [[nodiscard]] static constexpr device host() noexcept { return {}; }
  [[nodiscard]] static constexpr device cuda(int index) noexcept {
    return {device_kind::cuda, index};
  }
  [[nodiscard]] constexpr bool is_host() const noexcept { return kind == device_kind::host; }
  friend constexpr bool operator==(device, device) = default;
};

}  // namespace mldiag
