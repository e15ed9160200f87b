// SPDX-License-Identifier: Apache-2.0
/// `tensor_ref`: a type-erased, named reference to a tensor, for lists of mixed dtypes.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/dtype.hpp"
#include "mldiag/core/element.hpp"
#include "mldiag/core/layout.hpp"
#include "mldiag/core/strided_view.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// A named tensor whose element type is known at run time: pointer, element count, dtype,
/// device, and a strided layout where the tensor is not contiguous. It does not own the
/// memory or the name: both must outlive every use (a `stats_plan` copies the names).
///
/// Every constructor validates: a null pointer with elements, a negative or overflowing
/// count, an invalid dtype and strides that overrun throw `mldiag::error`.
///
/// **Example**
/// ```cpp
/// std::vector<mldiag::tensor_ref> grads = {
///     {"layer0.w", std::span<const float>(w0)},
///     {"layer0.b", b0_ptr, b0_count, mldiag::dtype::bf16},
/// };
/// ```
class tensor_ref {
 public:
  /// A contiguous tensor of `count` elements of type `type` at `data`.
  tensor_ref(std::string_view name, const void* data, std::int64_t count, mldiag::dtype type,
             mldiag::device where = mldiag::device::host())
      : name_(name), data_(data), dtype_(type), device_(where) {
    check_dtype();
    numel_ = detail::check_contiguous("tensor_ref", name, data, count, size_of(type));
  }

  /// A strided tensor: extents and strides in elements; `buffer_elems` readable elements
  /// from `data` (negative: unknown).
  tensor_ref(std::string_view name, const void* data, mldiag::dtype type,
             std::span<const std::int64_t> extents, std::span<const std::int64_t> strides,
             std::int64_t buffer_elems = -1, mldiag::device where = mldiag::device::host())
      : name_(name), data_(data), dtype_(type), device_(where) {
    check_dtype();
    layout_ = detail::make_layout("tensor_ref", name, extents, strides);
    numel_ = detail::check_strided("tensor_ref", name, data, layout_, size_of(type), buffer_elems);
    if (detail::is_row_major(layout_)) layout_.rank = 0;  // contiguous after all
  }

  /// A contiguous host range of a typed element.
  template <element T>
  tensor_ref(std::string_view name, std::span<const T> x)
      : name_(name), data_(x.data()), dtype_(dtype_of<T>) {
    if (x.size() > static_cast<std::size_t>(INT64_MAX)) {
      detail::fail("tensor_ref", name, "size overflows 64-bit signed; pass the element count");
    }
    numel_ = detail::check_contiguous("tensor_ref", name, x.data(),
                                      static_cast<std::int64_t>(x.size()), sizeof(T));
  }

  /// A typed strided view on the host (already validated).
  template <element T>
  tensor_ref(std::string_view name, const strided_view<T>& v)
      : name_(name), data_(v.data()), dtype_(dtype_of<T>), numel_(v.numel()),
        layout_(v.layout()) {
    if (detail::is_row_major(layout_)) layout_.rank = 0;
  }

  [[nodiscard]] std::string_view name() const noexcept { return name_; }
  /// The same tensor under another name (the name is a view: `n` must outlive the copy).
  [[nodiscard]] tensor_ref renamed(std::string_view n) const noexcept {
    tensor_ref r = *this;
    r.name_ = n;
    return r;
  }
  [[nodiscard]] const void* data() const noexcept { return data_; }
  [[nodiscard]] mldiag::dtype dtype() const noexcept { return dtype_; }
  [[nodiscard]] mldiag::device device() const noexcept { return device_; }
  /// Number of logical elements.
  [[nodiscard]] std::uint64_t numel() const noexcept { return numel_; }
  /// True when the elements are contiguous in memory (in logical order).
  [[nodiscard]] bool is_contiguous() const noexcept { return layout_.rank == 0; }
  /// The strided layout; rank 0 when contiguous.
  [[nodiscard]] const mldiag::layout& layout() const noexcept { return layout_; }

 private:
  void check_dtype() const {
    if (!is_valid(dtype_)) {
      detail::fail("tensor_ref", name_,
                   "invalid dtype " + std::to_string(static_cast<int>(dtype_)) +
                       "; use one of mldiag::dtype's enumerators");
    }
  }

  std::string_view name_;
  const void* data_ = nullptr;
  mldiag::dtype dtype_ = mldiag::dtype::f32;
  mldiag::device device_ = mldiag::device::host();
  std::uint64_t numel_ = 0;
  mldiag::layout layout_{};
};

}  // namespace mldiag
