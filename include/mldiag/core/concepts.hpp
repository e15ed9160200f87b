// SPDX-License-Identifier: Apache-2.0
/// The tensor concepts: what a type must provide for mldiag to read it, and how to adapt one.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/element.hpp"
#include "mldiag/core/strided_view.hpp"
#include "mldiag/core/tensor_ref.hpp"

#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>

namespace mldiag::inline MLDIAG_ABI {

/// Customization point: specialize `view_traits<V>` with
/// `static strided_view<T> view(const V&)` (or `static std::span<const T> view(const V&)`)
/// to make a type of yours readable by every mldiag entry point, without a copy. A type whose
/// element type is known only at run time returns an `mldiag::tensor_ref` instead (dtype,
/// extents and strides as values). `<mldiag/adapters/eigen.hpp>` does this for Eigen's dense
/// types, `<mldiag/adapters/torch.hpp>` for `torch::Tensor`, `<mldiag/adapters/dlib.hpp>` for
/// `dlib::tensor`.
///
/// **Example**
/// ```cpp
/// template <> struct mldiag::view_traits<my::tensor> {
///   static mldiag::strided_view<float> view(const my::tensor& t) {
///     return {t.ptr(), {t.rows(), t.cols()}, {t.ld(), 1}};
///   }
/// };
/// ```
template <class V>
struct view_traits;  // primary template: deliberately undefined

template <element T>
struct view_traits<strided_view<T>> {
  static const strided_view<T>& view(const strided_view<T>& v) noexcept { return v; }
};

template <>
struct view_traits<tensor_ref> {
  static const tensor_ref& view(const tensor_ref& t) noexcept { return t; }
};

namespace detail {
template <class V>
struct is_strided_view : std::false_type {};
template <class T>
struct is_strided_view<strided_view<T>> : std::true_type {};
template <class T>
struct is_span_of_element : std::false_type {};
template <element T>
struct is_span_of_element<std::span<const T>> : std::true_type {};
}  // namespace detail

/// A contiguous host tensor: a contiguous, sized range (`data()` and `size()`, e.g.
/// `std::vector`, `std::span`, `std::array`) whose value type is an `element`.
template <class V>
concept contiguous_tensor =
    std::ranges::contiguous_range<const V&> && std::ranges::sized_range<const V&> &&
    element<std::remove_cv_t<std::ranges::range_value_t<const V&>>>;

/// A type with a `view_traits` specialization returning a `strided_view`, a span, or (element
/// type known at run time) a `tensor_ref`.
template <class V>
concept adapted_tensor = requires(const V& v) {
  view_traits<std::remove_cvref_t<V>>::view(v);
  requires detail::is_strided_view<
               std::remove_cvref_t<decltype(view_traits<std::remove_cvref_t<V>>::view(v))>>::value ||
               detail::is_span_of_element<std::remove_cvref_t<
                   decltype(view_traits<std::remove_cvref_t<V>>::view(v))>>::value ||
               std::is_same_v<std::remove_cvref_t<decltype(view_traits<std::remove_cvref_t<V>>::view(v))>, tensor_ref>;
};

/// Anything mldiag can read on the host: a contiguous tensor, a `strided_view`, or an
/// adapted type.
template <class V>
concept tensor = contiguous_tensor<V> || adapted_tensor<V>;

/// A type-erased reference to any `tensor`, named `name` (no copy of the data).
template <tensor V>
[[nodiscard]] tensor_ref as_tensor_ref(std::string_view name, const V& x) {
  if constexpr (contiguous_tensor<V>) {
    using T = std::remove_cv_t<std::ranges::range_value_t<const V&>>;
    return tensor_ref(name, std::span<const T>(std::ranges::data(x), std::ranges::size(x)));
  } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(view_traits<std::remove_cvref_t<V>>::view(x))>, tensor_ref>) {
    return view_traits<std::remove_cvref_t<V>>::view(x).renamed(name);
  } else {
    return tensor_ref(name, view_traits<std::remove_cvref_t<V>>::view(x));
  }
}

namespace detail {
template <class>
inline constexpr bool always_false = false;

// Says, at compile time, why V is not a tensor. Called from the unconstrained overloads
// of the entry points so the error names the requirement instead of listing overloads.
template <class V>
constexpr void explain_not_a_tensor() {
  if constexpr (std::ranges::range<const V&> && !std::ranges::contiguous_range<const V&>) {
    static_assert(always_false<V>,
                  "mldiag: this range is not contiguous; wrap its memory in "
                  "mldiag::strided_view<T> or copy it into a std::vector");
  } else if constexpr (std::ranges::contiguous_range<const V&>) {
    static_assert(always_false<V>,
                  "mldiag: unsupported element type; mldiag reads double, float, mldiag::half, "
                  "mldiag::bfloat16, mldiag::float8_e4m3 and mldiag::float8_e5m2");
  } else {
    static_assert(always_false<V>,
                  "mldiag: not a tensor; pass a contiguous range (data() and size()) of a "
                  "supported element type, an mldiag::strided_view, an mldiag::tensor_ref, or a "
                  "type with a mldiag::view_traits specialization (Eigen: include "
                  "<mldiag/adapters/eigen.hpp>; LibTorch: <mldiag/adapters/torch.hpp>; dlib: "
                  "<mldiag/adapters/dlib.hpp>)");
  }
}
}  // namespace detail

}  // namespace mldiag
