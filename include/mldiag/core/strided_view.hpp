// SPDX-License-Identifier: Apache-2.0
/// `strided_view<T>`: a checked, non-owning view of a strided tensor on the host.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/element.hpp"
#include "mldiag/core/layout.hpp"

#include <cstdint>
#include <initializer_list>
#include <span>

namespace mldiag::inline MLDIAG_ABI {

/// A non-owning view of `T` elements laid out with extents and strides (in elements).
/// Construction checks the layout: negative extents or strides, offsets that overflow, a
/// null pointer with elements, and — when the buffer's size is given — strides that reach
/// past its end are rejected with an `mldiag:` error.
///
/// **Example**
/// ```cpp
/// std::vector<float> buf(4 * 10);                      // [4, 10] row-major
/// mldiag::strided_view<float> col3(buf.data() + 3, {4}, {10}, buf.size() - 3);
/// auto s = mldiag::compute_stats(col3);                  // column 3 only
/// ```
template <element T>
class strided_view {
 public:
  using element_type = T;

  /// A view of `data` with the given extents and strides; `buffer_elems` is how many
  /// elements are readable from `data` (negative: unknown, then only overflow is checked).
  strided_view(const T* data, std::span<const std::int64_t> extents,
               std::span<const std::int64_t> strides, std::int64_t buffer_elems = -1)
      : data_(data), layout_(detail::make_layout("strided_view", {}, extents, strides)) {
    numel_ = detail::check_strided("strided_view", {}, data, layout_, sizeof(T), buffer_elems);
  }
  strided_view(const T* data, std::initializer_list<std::int64_t> extents,
               std::initializer_list<std::int64_t> strides, std::int64_t buffer_elems = -1)
      : strided_view(data, std::span<const std::int64_t>(extents.begin(), extents.size()),
                     std::span<const std::int64_t>(strides.begin(), strides.size()),
                     buffer_elems) {}

  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] const mldiag::layout& layout() const noexcept { return layout_; }
  [[nodiscard]] int rank() const noexcept { return layout_.rank; }
  /// Number of logical elements (the product of the extents).
  [[nodiscard]] std::uint64_t numel() const noexcept { return numel_; }

 private:
  const T* data_;
  mldiag::layout layout_;
  std::uint64_t numel_ = 0;
};

}  // namespace mldiag
