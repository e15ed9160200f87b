// SPDX-License-Identifier: Apache-2.0
// Layout checks, tensor_ref validation and the 64-bit index arithmetic.
#include <doctest/doctest.h>

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"

#include <array>
#include <cstdint>
#include <list>
#include <random>
#include <span>
#include <vector>

namespace {
const auto* fake = reinterpret_cast<const void*>(std::uintptr_t{1} << 20);
}

TEST_CASE("tensor_ref rejects bad input with an mldiag error that names the tensor") {
  using mldiag::dtype;
  using mldiag::tensor_ref;
  CHECK_THROWS_WITH_AS(tensor_ref("g", nullptr, 5, dtype::f32),
                       "mldiag: tensor_ref 'g': null pointer with 5 elements; pass a valid "
                       "pointer or a count of 0",
                       mldiag::error);
  CHECK_THROWS_WITH_AS(tensor_ref("g", fake, -1, dtype::f32), doctest::Contains("negative element count -1"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(tensor_ref("g", fake, std::int64_t{1} << 62, dtype::f64),
                       doctest::Contains("overflows the address space"), mldiag::error);
  CHECK_THROWS_WITH_AS(tensor_ref("g", reinterpret_cast<const void*>(UINTPTR_MAX - 15), 8, dtype::f32),
                       doctest::Contains("wraps around the address space"), mldiag::error);
  CHECK_THROWS_WITH_AS(tensor_ref("g", fake, 1, static_cast<dtype>(42)),
                       doctest::Contains("invalid dtype 42"), mldiag::error);
  // A size_t that was a negative int: caught as an overflow, not read.
  CHECK_THROWS_WITH_AS(tensor_ref("g", std::span<const float>(static_cast<const float*>(fake), static_cast<std::size_t>(-3))),
                       doctest::Contains("mldiag: tensor_ref 'g'"), mldiag::error);
  // Empty is fine, with or without a pointer.
  CHECK(tensor_ref("e", nullptr, 0, dtype::bf16).numel() == 0);
}

TEST_CASE("strided views reject strides that overrun negative strides and mismatched ranks") {
  std::vector<float> buf(40);
  // [4, 10] with a row stride of 11 reaches element 3 * 11 + 9 = 42 > 39.
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(buf.data(), {4, 10}, {11, 1}, 40),
                       doctest::Contains("strides overrun the buffer: the view reaches element 42 "
                                         "but the buffer holds 40"),
                       mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(buf.data(), {4, 10}, {-10, 1}, 40),
                       doctest::Contains("stride -10 of dimension 0 is negative"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(buf.data(), {4, 10}, {10}, 40),
                       doctest::Contains("2 extents but 1 strides"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(buf.data(), {1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}),
                       doctest::Contains("rank 7 is above the maximum 6"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(buf.data(), {-1, 10}, {10, 1}),
                       doctest::Contains("extent -1 of dimension 0 is negative"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::strided_view<float>(static_cast<const float*>(fake), {std::int64_t{1} << 40, std::int64_t{1} << 40}, {1, 1}),
                       doctest::Contains("overflows 64 bits"), mldiag::error);
  CHECK(mldiag::strided_view<float>(buf.data(), {4, 10}, {10, 1}, 40).numel() == 40);
  CHECK(mldiag::strided_view<float>(buf.data(), {4, 0}, {10, 1}, 0).numel() == 0);
}

TEST_CASE("the strided cursor walks logical order and agrees with offset_of above 2^32") {
  // [2^20, 2^13 + 1, 3] with padded strides: 2^33 + 3 * 2^20 logical elements, offsets near
  // 2^36; no memory is read.
  mldiag::layout l;
  l.rank = 3;
  l.extents = {std::int64_t{1} << 20, (std::int64_t{1} << 13) + 1, 3};
  l.strides = {(std::int64_t{1} << 16), 5, 1};
  const std::uint64_t numel = (std::uint64_t{1} << 20) * ((std::uint64_t{1} << 13) + 1) * 3;
  REQUIRE(numel > (std::uint64_t{1} << 32));
  // The last element: (2^20 - 1) * 2^16 + 2^13 * 5 + 2, by hand.
  CHECK(mldiag::detail::offset_of(l, numel - 1) ==
        ((std::uint64_t{1} << 20) - 1) * (std::uint64_t{1} << 16) + (std::uint64_t{1} << 13) * 5 + 2);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t start = std::uniform_int_distribution<std::uint64_t>(0, numel - 5000)(rng);
    mldiag::detail::strided_cursor c(l, start);
    for (std::uint64_t i = start; i < start + 5000; ++i, c.next()) {
      if (static_cast<std::uint64_t>(c.offset()) != mldiag::detail::offset_of(l, i)) {
        FAIL("cursor offset differs from offset_of at logical index " << i);
      }
    }
  }
  CHECK(mldiag::detail::check_strided("t", "", fake, l, 2, -1) == numel);
}

TEST_CASE("the tensor concepts accept what they should and nothing else") {
  static_assert(mldiag::tensor<std::vector<float>>);
  static_assert(mldiag::tensor<std::span<const double>>);
  static_assert(mldiag::tensor<std::array<mldiag::half, 4>>);
  static_assert(mldiag::tensor<std::vector<mldiag::float8_e5m2>>);
  static_assert(mldiag::tensor<mldiag::strided_view<mldiag::bfloat16>>);
  static_assert(!mldiag::tensor<std::vector<int>>);
  static_assert(!mldiag::tensor<std::list<float>>);
  static_assert(!mldiag::tensor<float>);
  static_assert(mldiag::dtype_of<mldiag::bfloat16> == mldiag::dtype::bf16);
  static_assert(mldiag::size_of(mldiag::dtype::f8_e4m3) == 1);
  CHECK(mldiag::name(mldiag::dtype::bf16) == "bf16");
  CHECK(!mldiag::is_valid(static_cast<mldiag::dtype>(6)));
  // A row-major strided tensor_ref is recognized as contiguous.
  std::vector<float> buf(12);
  const mldiag::tensor_ref t("t", mldiag::strided_view<float>(buf.data(), {3, 4}, {4, 1}, 12));
  CHECK(t.is_contiguous());
  const mldiag::tensor_ref u("u", mldiag::strided_view<float>(buf.data(), {4, 3}, {1, 4}, 12));
  CHECK(!u.is_contiguous());
}
