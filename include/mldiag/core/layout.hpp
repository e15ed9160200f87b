// SPDX-License-Identifier: Apache-2.0
/// Tensor layouts (extents and strides in elements) and the checks that reject bad ones.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace mldiag::inline MLDIAG_ABI {

/// Highest rank a strided layout may have.
inline constexpr int max_rank = 6;

/// Extents and strides (in elements) of a strided tensor; logical order is row-major (the
/// last dimension varies fastest). Strides are non-negative; 0 broadcasts a dimension.
struct layout {
  int rank = 0;
  std::array<std::int64_t, max_rank> extents{};
  std::array<std::int64_t, max_rank> strides{};

  friend constexpr bool operator==(const layout&, const layout&) = default;
};

namespace detail {

inline constexpr std::uint64_t max_bytes =
    static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max());

[[noreturn]] inline void fail(std::string_view who, std::string_view name, std::string_view what) {
  std::string message(who);
  if (!name.empty()) {
    message += " '";
    message += name;
    message += "'";
  }
  message += ": ";
  message += what;
  throw error(message);
}

// a * b, or false when it does not fit in uint64.
inline bool mul_fits(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
  out = a * b;
  return true;
}

// The bytes [data, data + bytes) must fit in the address space without wrapping.
inline void check_span(std::string_view who, std::string_view name, const void* data,
                       std::uint64_t elements, std::size_t elem_size) {
  std::uint64_t bytes = 0;
  if (!mul_fits(elements, elem_size, bytes) || bytes > max_bytes) {
    fail(who, name,
         "size of " + std::to_string(elements) +
             " elements overflows the address space; pass the element count, not bytes, "
             "and check it is not a negative value cast to unsigned");
  }
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (bytes > 0 && address > std::numeric_limits<std::uintptr_t>::max() - (bytes - 1)) {
    fail(who, name, "pointer plus size wraps around the address space; check the pointer");
  }
}

// Validates a contiguous tensor of `count` elements; returns the count.
inline std::uint64_t check_contiguous(std::string_view who, std::string_view name,
                                      const void* data, std::int64_t count,
                                      std::size_t elem_size) {
  if (count < 0) {
    fail(who, name, "negative element count " + std::to_string(count));
  }
  if (count > 0 && data == nullptr) {
    fail(who, name,
         "null pointer with " + std::to_string(count) +
             " elements; pass a valid pointer or a count of 0");
  }
  check_span(who, name, data, static_cast<std::uint64_t>(count), elem_size);
  return static_cast<std::uint64_t>(count);
}

// Validates a strided layout over a buffer of `buffer_elems` elements (negative: unknown);
// returns the number of logical elements.
inline std::uint64_t check_strided(std::string_view who, std::string_view name,
                                   const void* data, const layout& l, std::size_t elem_size,
                                   std::int64_t buffer_elems) {
  if (l.rank < 0 || l.rank > max_rank) {
    fail(who, name, "rank " + std::to_string(l.rank) + " is outside 0.." +
                        std::to_string(max_rank));
  }
  std::uint64_t numel = 1;
  for (int d = 0; d < l.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (l.extents[i] < 0) {
      fail(who, name, "extent " + std::to_string(l.extents[i]) + " of dimension " +
                          std::to_string(d) + " is negative");
    }
    if (l.strides[i] < 0) {
      fail(who, name, "stride " + std::to_string(l.strides[i]) + " of dimension " +
                          std::to_string(d) +
                          " is negative; pass a view of the reversed dimension instead");
    }
    if (!mul_fits(numel, static_cast<std::uint64_t>(l.extents[i]), numel) ||
        numel > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(who, name, "the number of elements overflows 64 bits");
    }
  }
  if (numel == 0) return 0;
  if (data == nullptr) {
    fail(who, name, "null pointer with " + std::to_string(numel) + " elements");
  }
  // The farthest element: sum of (extent - 1) * stride.
  std::uint64_t last = 0;
  for (int d = 0; d < l.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    std::uint64_t reach = 0;
    if (!mul_fits(static_cast<std::uint64_t>(l.extents[i] - 1),
                  static_cast<std::uint64_t>(l.strides[i]), reach) ||
        last > std::numeric_limits<std::uint64_t>::max() - reach) {
      fail(who, name, "strides overflow 64-bit offsets");
    }
    last += reach;
  }
  if (buffer_elems >= 0 && last >= static_cast<std::uint64_t>(buffer_elems)) {
    fail(who, name,
         "strides overrun the buffer: the view reaches element " + std::to_string(last) +
             " but the buffer holds " + std::to_string(buffer_elems) +
             "; check the extents and strides (in elements, not bytes)");
  }
  check_span(who, name, data, last + 1, elem_size);
  return numel;
}

// Memory offset (in elements) of the logical element `index` (row-major order).
inline std::uint64_t offset_of(const layout& l, std::uint64_t index) noexcept {
  std::uint64_t offset = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    const auto extent = static_cast<std::uint64_t>(l.extents[i]);
    offset += (index % extent) * static_cast<std::uint64_t>(l.strides[i]);
    index /= extent;
  }
  return offset;
}

// True when the layout is the plain row-major layout of its extents (a contiguous tensor).
inline bool is_row_major(const layout& l) noexcept {
  std::int64_t expected = 1;
  for (int d = l.rank - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    if (l.extents[i] != 1 && l.strides[i] != expected) return false;
    expected *= l.extents[i];
  }
  return true;
}

// Builds a layout from spans, checking that they match.
inline layout make_layout(std::string_view who, std::string_view name,
                          std::span<const std::int64_t> extents,
                          std::span<const std::int64_t> strides) {
  if (extents.size() != strides.size()) {
    fail(who, name, std::to_string(extents.size()) + " extents but " +
                        std::to_string(strides.size()) + " strides; give one stride per extent");
  }
  if (extents.size() > static_cast<std::size_t>(max_rank)) {
    fail(who, name, "rank " + std::to_string(extents.size()) + " is above the maximum " +
                        std::to_string(max_rank) + "; merge contiguous dimensions first");
  }
  layout l;
  l.rank = static_cast<int>(extents.size());
  for (std::size_t i = 0; i < extents.size(); ++i) {
    l.extents[i] = extents[i];
    l.strides[i] = strides[i];
  }
  return l;
}

}  // namespace detail
}  // namespace mldiag
