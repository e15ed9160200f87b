// SPDX-License-Identifier: Apache-2.0
// The chunk table the CUDA plan uploads (host logic, tested without a GPU), and the merge
// orders: the host's sequential one and the device kernels' tree agree.
#include <doctest/doctest.h>

#include "mldiag/stats/chunk_table.hpp"
#include "mldiag/stats/stats_plan.hpp"

#include "../support/reference.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {
const auto* fake = reinterpret_cast<const void*>(std::uintptr_t{1} << 20);

// The order of mldiag::cuda::detail::block_merge: 256 "threads" each merge a contiguous run
// in order, then pairs halve (0 with 128, ... then 0 with 1).
mldiag::tensor_stats tree_merge(const std::vector<mldiag::tensor_stats>& in) {
  constexpr std::size_t threads = 256;
  const std::size_t per = (in.size() + threads - 1) / threads;
  std::vector<mldiag::tensor_stats> acc(threads);
  for (std::size_t t = 0; t < threads; ++t)
    for (std::size_t k = t * per; k < in.size() && k < (t + 1) * per; ++k) acc[t].merge(in[k]);
  for (std::size_t stride = threads / 2; stride > 0; stride /= 2)
    for (std::size_t t = 0; t < stride; ++t) acc[t].merge(acc[t + stride]);
  return acc[0];
}

// The order of mldiag::cuda::detail::merge_tensors_kernel: a tensor of more than 256 chunk
// partials is merged in groups of 256 consecutive ones (block_merge each), then the groups'
// results (block_merge again).
mldiag::tensor_stats device_merge(const std::vector<mldiag::tensor_stats>& in) {
  constexpr std::size_t group = 256;
  if (in.size() <= group) return tree_merge(in);
  std::vector<mldiag::tensor_stats> groups;
  for (std::size_t b = 0; b < in.size(); b += group)
    groups.push_back(tree_merge(std::vector<mldiag::tensor_stats>(in.begin() + static_cast<std::ptrdiff_t>(b),
                                                                  in.begin() + static_cast<std::ptrdiff_t>(std::min(b + group, in.size())))));
  return tree_merge(groups);
}
}  // namespace

TEST_CASE("chunks are grouped by dtype and each tensor's chunks are contiguous and ordered") {
  const std::int64_t c = 65536;
  std::vector<mldiag::tensor_ref> list = {
      {"a", fake, 3 * c + 1, mldiag::dtype::bf16}, {"b", fake, 0, mldiag::dtype::f32},
      {"c", fake, c, mldiag::dtype::f32},          {"d", fake, 1, mldiag::dtype::bf16},
      {"e", fake, c - 1, mldiag::dtype::f8_e4m3},  {"f", fake, 2 * c, mldiag::dtype::f64}};
  const auto t = mldiag::detail::make_chunk_table(list, static_cast<std::uint64_t>(c));
  CHECK(t.chunks.size() == 4 + 0 + 1 + 1 + 1 + 2);
  CHECK(t.group_size(mldiag::dtype::bf16) == 5);
  CHECK(t.group_size(mldiag::dtype::f32) == 1);
  CHECK(t.group_size(mldiag::dtype::f16) == 0);
  CHECK(t.group_size(mldiag::dtype::f64) == 2);
  CHECK(t.count[1] == 0);
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::uint64_t expected_begin = 0;
    for (std::size_t k = 0; k < t.count[i]; ++k) {
      const auto& ch = t.chunks[t.first[i] + k];
      CHECK(ch.tensor == i);
      CHECK(ch.begin == expected_begin);
      CHECK(ch.end - ch.begin <= static_cast<std::uint64_t>(c));
      expected_begin = ch.end;
    }
    CHECK(expected_begin == list[i].numel());
    if (t.count[i] > 0) {  // inside its dtype's group
      const auto g = static_cast<std::size_t>(list[i].dtype());
      CHECK(t.first[i] >= t.group_begin[g]);
      CHECK(t.first[i] + t.count[i] <= t.group_begin[g + 1]);
    }
  }
}

TEST_CASE("the device's tree merge agrees with the host's sequential merge") {
  // 3000 chunk partials of real data (12 merge groups, the last of 184): counts and extrema
  // identical, the two merge orders' moments within 1e-12 of each other, and within the
  // contract of the reference.
  std::mt19937_64 rng(8);
  std::normal_distribution<float> normal(1.0f, 0.01f);
  std::vector<float> x(3000 * 1000);
  for (auto& v : x) v = normal(rng);
  x[777] = std::numeric_limits<float>::quiet_NaN();
  std::vector<mldiag::tensor_stats> parts;
  for (std::size_t k = 0; k < 3000; ++k)
    parts.push_back(mldiag::compute_stats(std::span<const float>(x.data() + k * 1000, 1000)));
  mldiag::tensor_stats sequential;
  for (const auto& p : parts) sequential.merge(p);
  const auto tree = device_merge(parts);
  CHECK(tree.count == sequential.count);
  CHECK(tree.nan == sequential.nan);
  CHECK(tree.min == sequential.min);
  CHECK(tree.max == sequential.max);
  CHECK(mldiag_test::relative_error(tree.mean(), sequential.mean()) < 1e-12);
  CHECK(mldiag_test::relative_error(tree.variance(), sequential.variance()) < 1e-12);
  CHECK(mldiag_test::relative_error(tree.l2_norm(), sequential.l2_norm()) < 1e-12);
  const auto r = mldiag_test::reference_of(std::span<const float>(x));
  mldiag_test::check_against(tree, r, mldiag_test::contract_tol<float>);
}
