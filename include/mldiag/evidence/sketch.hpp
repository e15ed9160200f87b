// SPDX-License-Identifier: Apache-2.0
/// The CountSketch that drift_tracker and gradient_persistence share: a linear map of a
/// tensor onto k buckets, so inner products and norms of sketches estimate those of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace mldiag::detail {

// splitmix64's finalizer: a well-mixed 64-bit hash (bucket and sign from one value).
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a over a name: stable across runs and platforms (std::hash need not be), so a
// tensor's buckets do not move between steps or processes.
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Adds +-v to the bucket of element `index` under `key`: one bucket and one sign from a hash
// of both, so <S(a), S(b)> is an unbiased estimate of <a, b>.
inline void sketch_add(std::span<double> buckets, std::uint64_t key, std::uint64_t index, double v) noexcept {
  const std::uint64_t h = splitmix64(key ^ index);
  buckets[static_cast<std::size_t>(h % buckets.size())] += (h >> 63) ? v : -v;
}

}  // namespace mldiag::detail
