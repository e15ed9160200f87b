// SPDX-License-Identifier: Apache-2.0
/// The element types of checkpoint tensors: safetensors' names, numpy's codes, sizes.
#pragma once

#include "mldiag/core/dtype.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mldiag::cli {

// The element types the readers accept. Names follow safetensors (`dtype_name`); numpy's
// `descr` maps onto them: `f8`->F64, `f4`->F32, `f2`->F16, `i1`..`i8`->I8..I64,
// `u1`..`u8`->U8..U64, `b1`->BOOL. BF16 and the FP8 formats exist in safetensors only.
enum class value_type : std::uint8_t { f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

namespace detail {
struct value_type_info {
  value_type type;
  std::string_view name;
  std::size_t size;
};
inline constexpr std::array<value_type_info, 15> value_types = {{
    {value_type::f64, "F64", 8},     {value_type::f32, "F32", 4},         {value_type::f16, "F16", 2},
    {value_type::bf16, "BF16", 2},   {value_type::f8_e4m3, "F8_E4M3", 1}, {value_type::f8_e5m2, "F8_E5M2", 1},
    {value_type::i8, "I8", 1},       {value_type::i16, "I16", 2},         {value_type::i32, "I32", 4},
    {value_type::i64, "I64", 8},     {value_type::u8, "U8", 1},           {value_type::u16, "U16", 2},
    {value_type::u32, "U32", 4},     {value_type::u64, "U64", 8},         {value_type::boolean, "BOOL", 1},
}};
inline constexpr std::string_view supported_dtypes =
    "F64, F32, F16, BF16, F8_E4M3 (alias F8_E4M3FN), F8_E5M2, I8, I16, I32, I64, U8, U16, U32, U64, BOOL";
}  // namespace detail

// The safetensors spelling of a value type: "F32", "BF16", "F8_E4M3", "BOOL", ...
[[nodiscard]] constexpr std::string_view dtype_name(value_type t) noexcept {
  return detail::value_types[static_cast<std::size_t>(t)].name;
}
// Bytes per element.
[[nodiscard]] constexpr std::size_t size_of(value_type t) noexcept {
  return detail::value_types[static_cast<std::size_t>(t)].size;
}
// The mldiag dtype of a floating-point value type (the statistics kernels read these in
// place); nullopt for integers and BOOL, which are converted to double first.
[[nodiscard]] constexpr std::optional<mldiag::dtype> float_dtype(value_type t) noexcept {
  switch (t) {
    case value_type::f64: return mldiag::dtype::f64;
    case value_type::f32: return mldiag::dtype::f32;
    case value_type::f16: return mldiag::dtype::f16;
    case value_type::bf16: return mldiag::dtype::bf16;
    case value_type::f8_e4m3: return mldiag::dtype::f8_e4m3;
    case value_type::f8_e5m2: return mldiag::dtype::f8_e5m2;
    default: return std::nullopt;
  }
}
// The value type a safetensors dtype string names, or nullopt.
[[nodiscard]] constexpr std::optional<value_type> parse_dtype_name(std::string_view s) noexcept {
  if (s == "F8_E4M3FN") return value_type::f8_e4m3;  // PyTorch's name for the same format
  for (const auto& i : detail::value_types)
    if (i.name == s) return i.type;
  return std::nullopt;
}

}  // namespace mldiag::cli
