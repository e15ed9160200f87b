// SPDX-License-Identifier: Apache-2.0
/// The `element` concept: the C++ types mldiag reads, and their run-time `dtype`.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/element_types.hpp"

#include <type_traits>

namespace mldiag::inline MLDIAG_ABI {

/// One of the element types mldiag reads: `double`, `float`, `mldiag::half`,
/// `mldiag::bfloat16`, `mldiag::float8_e4m3`, `mldiag::float8_e5m2`. Other 16- and 8-bit
/// types with the same bits (`__half`, `Eigen::half`, `c10::Half`, ...) are read through
/// these: adapters reinterpret their storage.
template <class T>
concept element = std::is_same_v<T, double> || std::is_same_v<T, float> ||
                  std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
                  std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;

namespace detail {
template <class T>
constexpr dtype dtype_of_impl() noexcept {
  if constexpr (std::is_same_v<T, double>) return dtype::f64;
  else if constexpr (std::is_same_v<T, float>) return dtype::f32;
  else if constexpr (std::is_same_v<T, half>) return dtype::f16;
  else if constexpr (std::is_same_v<T, bfloat16>) return dtype::bf16;
  else if constexpr (std::is_same_v<T, float8_e4m3>) return dtype::f8_e4m3;
  else return dtype::f8_e5m2;
}
}  // namespace detail

/// The run-time tag of an element type: `dtype_of<float> == dtype::f32`.
template <element T>
inline constexpr dtype dtype_of = detail::dtype_of_impl<T>();

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2 && sizeof(float8_e4m3) == 1 &&
              sizeof(float8_e5m2) == 1);

}  // namespace mldiag
