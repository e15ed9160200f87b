// SPDX-License-Identifier: Apache-2.0
/// The hashes of the sketches of drift_tracker (a CountSketch: a hashed bucket and sign per
/// element) and gradient_persistence (consecutive buckets, a hashed sign): linear maps of a
/// tensor onto k buckets, so inner products and norms of sketches estimate those of tensors.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/stats/host_isa.hpp"

#include <bit>  // std::bit_cast
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

namespace mldiag::inline MLDIAG_ABI::detail {

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

// murmur3's 32-bit finalizer: a bijection whose top bit is a well-mixed sign for
// gradient_persistence's sketch. 32-bit lanes, so it vectorizes.
[[nodiscard]] constexpr std::uint32_t sign_hash(std::uint32_t h) noexcept {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

// out[j] += +-(w x[j]) for j < n, the sign the top bit of sign_hash(sign_key + j0 + j) (set:
// +), non-finite products left out and counted (the return value): gradient_persistence's
// sketch over one run of consecutive buckets.
template <class T>
[[gnu::always_inline]] inline std::uint64_t signed_run_scalar(double* out, const T* x, std::size_t n, double w,
                                                              std::uint32_t sign_key, std::uint32_t j0) noexcept {
  std::uint64_t bad = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double v = w * static_cast<double>(x[j]);
    const bool ok = std::fabs(v) <= std::numeric_limits<double>::max();  // not NaN, not Inf
    bad += ok ? 0u : 1u;
    const std::uint32_t h = sign_hash(sign_key + j0 + static_cast<std::uint32_t>(j));
    const std::uint64_t flip = static_cast<std::uint64_t>((h >> 31) ^ 1u) << 63;
    out[j] += ok ? std::bit_cast<double>(std::bit_cast<std::uint64_t>(v) ^ flip) : 0.0;
  }
  return bad;
}
#ifdef MLDIAG_HOST_DISPATCH
// signed_run_lanes' vectors (a class's typedefs: GCC 12 does not subscript a vector typedef'd
// in a function template).
template <std::size_t L>
struct sign_vectors {
  typedef double dv __attribute__((vector_size(L * 8)));
  typedef std::int64_t mv __attribute__((vector_size(L * 8)));
  typedef std::uint64_t qv __attribute__((vector_size(L * 8)));
  typedef std::uint32_t uv __attribute__((vector_size(L * 4)));
  typedef float fv __attribute__((vector_size(L * 4)));
};
// signed_run_scalar, `L` lanes at a time: every lane does the scalar loop's operations, so
// every width gives the same bits.
template <std::size_t L, class T>
[[gnu::always_inline]] inline std::uint64_t signed_run_lanes(double* out, const T* x, std::size_t n, double w,
                                                             std::uint32_t sign_key, std::uint32_t j0) noexcept {
  using dv = typename sign_vectors<L>::dv;
  using mv = typename sign_vectors<L>::mv;
  using qv = typename sign_vectors<L>::qv;
  using uv = typename sign_vectors<L>::uv;
  using fv = typename sign_vectors<L>::fv;
  uv lane;
  for (std::size_t i = 0; i < L; ++i) lane[i] = static_cast<std::uint32_t>(i);
  mv bad_lanes = {};
  std::size_t j = 0;
  for (; j + L <= n; j += L) {
    dv v;
    if constexpr (std::is_same_v<T, float>) {
      fv f;
      std::memcpy(&f, x + j, sizeof f);
      v = __builtin_convertvector(f, dv);
    } else {
      for (std::size_t i = 0; i < L; ++i) v[i] = static_cast<double>(x[j + i]);
    }
    v *= w;
    const qv bits = reinterpret_cast<qv>(v);
    const mv ok = reinterpret_cast<dv>(bits & 0x7fffffffffffffffull) <= std::numeric_limits<double>::max();  // -1: finite
    bad_lanes += ok + 1;  // +1 where not finite
    uv h = (sign_key + j0 + static_cast<std::uint32_t>(j)) + lane;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    const qv flip = __builtin_convertvector((h >> 31) ^ 1u, qv) << 63;
    dv o;
    std::memcpy(&o, out + j, sizeof o);
    o += reinterpret_cast<dv>((bits ^ flip) & reinterpret_cast<qv>(ok));
    std::memcpy(out + j, &o, sizeof o);
  }
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < L; ++i) bad += static_cast<std::uint64_t>(bad_lanes[i]);
  return bad + signed_run_scalar(out + j, x + j, n - j, w, sign_key, j0 + static_cast<std::uint32_t>(j));
}
template <class T>
[[gnu::target("avx2,fma")]] inline std::uint64_t signed_run_avx2(double* out, const T* x, std::size_t n, double w,
                                                                 std::uint32_t sign_key, std::uint32_t j0) noexcept {
  return signed_run_lanes<4>(out, x, n, w, sign_key, j0);
}
template <class T>
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] inline std::uint64_t signed_run_avx512(
    double* out, const T* x, std::size_t n, double w, std::uint32_t sign_key, std::uint32_t j0) noexcept {
  return signed_run_lanes<8>(out, x, n, w, sign_key, j0);
}
#endif

// signed_run in the widest vectors the CPU has (stats/host_isa.hpp), one element at a
// time elsewhere: with AVX-512 0.6 ns a sample read in place and 0.9-1.1 gathered on a
// stride, where the CountSketch's hashed bucket per element (a scattered add) took 1.6-2.8
// in the same loop and 2-7 in monitored training runs (issue 18, docs/benchmarks.md).
template <class T>
std::uint64_t signed_run(double* out, const T* x, std::size_t n, double w, std::uint32_t sign_key,
                         std::uint32_t j0) noexcept {
#ifdef MLDIAG_HOST_DISPATCH
  switch (active_host_isa()) {
    case host_isa::avx512_bf16:
    case host_isa::avx512: return signed_run_avx512(out, x, n, w, sign_key, j0);
    case host_isa::avx2: return signed_run_avx2(out, x, n, w, sign_key, j0);
    case host_isa::portable: break;
  }
#endif
  return signed_run_scalar(out, x, n, w, sign_key, j0);
}

// Adds +-v to the bucket of element `index` under `key`: one bucket and one sign from a hash
// of both, so <S(a), S(b)> is an unbiased estimate of <a, b>.
// A power-of-two count of buckets (the default: 4096) takes the low bits: the same bucket as
// h % k without a 64-bit division per element (no measurable change in gradient_cosines_of's
// time, which was the scattered add's, before it left this sketch; issue 18).
inline void sketch_add(std::span<double> buckets, std::uint64_t key, std::uint64_t index, double v) noexcept {
  const std::uint64_t h = splitmix64(key ^ index);
  const std::size_t k = buckets.size();
  const std::size_t b = (k & (k - 1)) == 0 ? static_cast<std::size_t>(h & (k - 1)) : static_cast<std::size_t>(h % k);
  buckets[b] += (h >> 63) ? v : -v;
}

}  // namespace mldiag::detail
