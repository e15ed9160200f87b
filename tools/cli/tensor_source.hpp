// SPDX-License-Identifier: Apache-2.0
/// A tensor's bytes in bounded windows, and its elements in native order or as doubles.
#pragma once

#include "cli/checkpoint.hpp"
#include "cli/inflater.hpp"
#include "cli/tensor_entry.hpp"
#include "cli/value_type.hpp"
#include "mldiag/core/element_types.hpp"
#include "mldiag/stats/block_stats.hpp"  // stats_unit_elements: the units stats_plan uses

#include <algorithm>
#include <bit>  // std::endian
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mldiag::cli {

// Bytes of a tensor read per step (per tensor in a diff): bounds the memory a reader holds
// (the mapped pages of one window, or one inflated window) whatever the file size.
// 64 MiB: 256 units of 65536 fp32 per step keep 16 threads busy; the RSS test of a 13 GiB
// file stays under 1 GB with it (tests/tools/checkpoint_test.cpp, "big").
inline constexpr std::size_t default_window_bytes = std::size_t{64} << 20;

namespace detail {

// Successive windows of one tensor's data bytes, each a whole number of elements.
class tensor_source {
 public:
  tensor_source(const checkpoint& c, const tensor_entry& t, std::size_t window_bytes)
      : c_(c), t_(t), window_(window_bytes) {
#if MLDIAG_CLI_HAS_ZLIB
    if (t.where == tensor_entry::storage::deflated) {
      z_ = std::make_unique<inflater>(c.bytes().subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.compressed_size)),
                                      c.path() + ": member '" + t.name + ".npy'");
      buffer_.resize(std::min<std::uint64_t>(window_, t.nbytes));
      std::vector<std::byte> head(static_cast<std::size_t>(t.header_bytes));
      if (z_->read(head.data(), head.size()) != head.size()) truncated();
    }
#endif
  }

  // The next window (at most window_bytes); empty at the end.
  std::span<const std::byte> next() {
    const std::uint64_t left = t_.nbytes - done_;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, window_));
    if (t_.where == tensor_entry::storage::in_place) {
      if (done_ > 0) c_.release(t_.offset + done_ - last_, last_);  // the window just processed
      const auto w = c_.bytes().subspan(static_cast<std::size_t>(t_.offset + done_), n);
      c_.prefetch(t_.offset + done_, n, true);               // this window: map it now
      c_.prefetch(t_.offset + done_ + n, std::min<std::uint64_t>(left - n, window_));  // the next: read ahead
      done_ += n;
      last_ = n;
      if (n == 0 && t_.nbytes > 0) c_.release(t_.offset, t_.nbytes);
      return w;
    }
#if MLDIAG_CLI_HAS_ZLIB
    const std::size_t got = z_->read(buffer_.data(), n);
    if (got != n) truncated();
    done_ += n;
    c_.release(t_.offset, z_->consumed());
    if (done_ == t_.nbytes) finish();
    return {buffer_.data(), n};
#else
    return {};
#endif
  }

 private:
#if MLDIAG_CLI_HAS_ZLIB
  [[noreturn]] void truncated() const {
    fail_file(c_.path(), "member '" + t_.name + ".npy': the compressed data ends before the array does; the archive is damaged");
  }
  void finish() {
    std::byte extra{};
    if (z_->read(&extra, 1) != 0 || !z_->ended()) {
      fail_file(c_.path(), "member '" + t_.name + ".npy': more data than its header's shape says; the archive is damaged");
    }
    if (z_->crc() != t_.crc32) fail_file(c_.path(), "member '" + t_.name + ".npy': CRC-32 mismatch; the archive is damaged");
  }
  std::unique_ptr<inflater> z_;
#endif
  const checkpoint& c_;
  const tensor_entry& t_;
  std::uint64_t window_;
  std::uint64_t done_ = 0;
  std::uint64_t last_ = 0;
  std::vector<std::byte> buffer_;
};

// A window of `unit_elems` elements times a whole number, about `window_bytes` long.
inline std::size_t window_for(std::size_t item_size, std::size_t window_bytes) noexcept {
  const std::size_t unit_bytes = mldiag::stats_unit_elements * item_size;
  return std::max<std::size_t>(1, window_bytes / unit_bytes) * unit_bytes;
}

inline bool needs_swap(const tensor_entry& t) noexcept {
  return size_of(t.type) > 1 && (t.little_endian != (std::endian::native == std::endian::little));
}

inline void swap_bytes(std::byte* p, std::size_t n, std::size_t size) noexcept {
  for (std::size_t i = 0; i < n; ++i) std::reverse(p + i * size, p + (i + 1) * size);
}

// Per-worker buffers for one unit (8-byte aligned: std::vector<double>).
struct unit_scratch {
  std::vector<double> raw = std::vector<double>(mldiag::stats_unit_elements);
  std::vector<double> values = std::vector<double>(mldiag::stats_unit_elements);
};

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The values of n elements at p (already in native order) as doubles.
inline void to_double(value_type t, const std::byte* p, std::size_t n, double* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* e = p + i * size_of(t);
    switch (t) {
      case value_type::f64: out[i] = load<double>(e); break;
      case value_type::f32: out[i] = static_cast<double>(load<float>(e)); break;
      case value_type::f16: out[i] = static_cast<double>(mldiag::half::from_bits(load<std::uint16_t>(e))); break;
      case value_type::bf16: out[i] = static_cast<double>(mldiag::bfloat16::from_bits(load<std::uint16_t>(e))); break;
      case value_type::f8_e4m3: out[i] = static_cast<double>(mldiag::float8_e4m3::from_bits(load<std::uint8_t>(e))); break;
      case value_type::f8_e5m2: out[i] = static_cast<double>(mldiag::float8_e5m2::from_bits(load<std::uint8_t>(e))); break;
      case value_type::i8: out[i] = load<std::int8_t>(e); break;
      case value_type::i16: out[i] = load<std::int16_t>(e); break;
      case value_type::i32: out[i] = load<std::int32_t>(e); break;
      // 64-bit integers above 2^53 round to the nearest double.
      case value_type::i64: out[i] = static_cast<double>(load<std::int64_t>(e)); break;
      case value_type::u8: out[i] = load<std::uint8_t>(e); break;
      case value_type::u16: out[i] = load<std::uint16_t>(e); break;
      case value_type::u32: out[i] = load<std::uint32_t>(e); break;
      case value_type::u64: out[i] = static_cast<double>(load<std::uint64_t>(e)); break;
      case value_type::boolean: out[i] = load<std::uint8_t>(e) != 0 ? 1.0 : 0.0; break;
    }
  }
}

// n elements at p in native order, in aligned memory: p itself, or a copy in s.raw.
inline const std::byte* native_unit(const tensor_entry& t, const std::byte* p, std::size_t n, unit_scratch& s) noexcept {
  const std::size_t size = size_of(t.type);
  const bool swap = needs_swap(t);
  if (!swap && reinterpret_cast<std::uintptr_t>(p) % size == 0) return p;
  auto* raw = reinterpret_cast<std::byte*>(s.raw.data());
  std::memcpy(raw, p, n * size);
  if (swap) swap_bytes(raw, n, size);
  return raw;
}

}  // namespace detail

}  // namespace mldiag::cli
