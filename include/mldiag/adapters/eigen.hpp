// SPDX-License-Identifier: Apache-2.0
/// Eigen adapter: any dense Eigen matrix, array, map, block or ref is a tensor, without a copy.
/// Target: mldiag::eigen.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/concepts.hpp"
#include "mldiag/core/element.hpp"
#include "mldiag/core/element_types.hpp"
#include "mldiag/core/strided_view.hpp"

#include <Eigen/Core>

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace mldiag::inline MLDIAG_ABI {
namespace detail {

// Eigen's scalar -> mldiag's element. Eigen::half and Eigen::bfloat16 hold the same 16 bits
// as mldiag::half and mldiag::bfloat16 (checked below), so their memory is read as ours.
template <class S>
struct eigen_element {
  using type = S;
};
template <>
struct eigen_element<Eigen::half> {
  using type = mldiag::half;
};
template <>
struct eigen_element<Eigen::bfloat16> {
  using type = mldiag::bfloat16;
};
static_assert(sizeof(Eigen::half) == sizeof(mldiag::half) &&
              sizeof(Eigen::bfloat16) == sizeof(mldiag::bfloat16));

template <class D>
concept eigen_dense = std::derived_from<D, Eigen::DenseBase<D>>;

template <class D>
concept eigen_direct =
    eigen_dense<D> && ((Eigen::internal::traits<D>::Flags & Eigen::DirectAccessBit) != 0) &&
    element<typename eigen_element<typename D::Scalar>::type>;

}  // namespace detail

/// A dense Eigen object with direct memory access (Matrix, Array, Map, Block, Ref, with any
/// inner and outer stride, row- or column-major) of double, float, Eigen::half or
/// Eigen::bfloat16 is viewed in place as [outer, inner] with Eigen's strides.
///
/// **Example**
/// ```cpp
/// Eigen::MatrixXf w(512, 512);
/// auto s = mldiag::compute_stats(w.block(0, 0, 64, 128));  // no copy, outer stride 512
/// ```
template <detail::eigen_direct D>
struct view_traits<D> {
  using element_type = typename detail::eigen_element<typename D::Scalar>::type;
  static strided_view<element_type> view(const D& x) {
    return strided_view<element_type>(reinterpret_cast<const element_type*>(x.data()),
                                      {static_cast<std::int64_t>(x.outerSize()),
                                       static_cast<std::int64_t>(x.innerSize())},
                                      {static_cast<std::int64_t>(x.outerStride()),
                                       static_cast<std::int64_t>(x.innerStride())});
  }
};

/// An Eigen expression without direct memory access (a + b, a product, a reverse): say so.
template <detail::eigen_dense D>
  requires(!detail::eigen_direct<D>)
struct view_traits<D> {
  static strided_view<float> view(const D&) {
    static_assert(detail::always_false<D>,
                  "mldiag: this Eigen expression has no direct memory access (a sum, product "
                  "or reverse) or an unsupported scalar; evaluate it into a Matrix or Array "
                  "first, e.g. compute_stats(Eigen::MatrixXf(expr))");
    return {nullptr, {0}, {1}};
  }
};

}  // namespace mldiag
