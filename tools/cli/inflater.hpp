// SPDX-License-Identifier: Apache-2.0
/// Raw deflate (zlib) from mapped bytes into caller buffers, with the CRC-32 of what came out.
#pragma once

#include "cli/file_bytes.hpp"

#if MLDIAG_CLI_HAS_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace mldiag::cli {

namespace detail {

#if MLDIAG_CLI_HAS_ZLIB
// Raw deflate from a span in the map into caller buffers, in bounded pieces.
class inflater {
 public:
  inflater(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {
    if (inflateInit2(&z_, -MAX_WBITS) != Z_OK) fail_file(what_, "zlib could not start (out of memory?)");
  }
  inflater(const inflater&) = delete;
  inflater& operator=(const inflater&) = delete;
  ~inflater() { inflateEnd(&z_); }

  // Fills out[0, n) unless the stream ends first; returns the bytes written.
  std::size_t read(std::byte* out, std::size_t n) {
    std::size_t done = 0;
    while (done < n && !ended_) {
      if (z_.avail_in == 0 && used_ < in_.size()) {
        const std::size_t piece = std::min<std::size_t>(in_.size() - used_, 1u << 24);
        // zlib's next_in is not const-qualified (unless ZLIB_CONST); it never writes through it.
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in_.data() + used_));
        z_.avail_in = static_cast<uInt>(piece);
        used_ += piece;
      }
      const std::size_t want = std::min<std::size_t>(n - done, 1u << 30);
      z_.next_out = reinterpret_cast<Bytef*>(out + done);
      z_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      const std::size_t got = want - z_.avail_out;
      crc_ = static_cast<std::uint32_t>(::crc32(crc_, reinterpret_cast<const Bytef*>(out + done), static_cast<uInt>(got)));
      done += got;
      if (rc == Z_STREAM_END) { ended_ = true; break; }
      if (rc == Z_BUF_ERROR && z_.avail_in == 0 && used_ >= in_.size()) {
        fail_file(what_, "compressed data ends early (truncated archive); copy or save it again");
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail_file(what_, std::string("corrupt compressed data (zlib: ") + (z_.msg ? z_.msg : "error") + "); the archive is damaged");
      }
    }
    return done;
  }
  [[nodiscard]] bool ended() const noexcept { return ended_; }
  [[nodiscard]] std::uint32_t crc() const noexcept { return crc_; }
  // Compressed bytes handed to zlib so far (pages before them may be released).
  [[nodiscard]] std::size_t consumed() const noexcept { return used_ - z_.avail_in; }

 private:
  std::span<const std::byte> in_;
  std::string what_;
  z_stream z_{};
  std::size_t used_ = 0;
  bool ended_ = false;
  std::uint32_t crc_ = 0;
};
#endif

}  // namespace detail

}  // namespace mldiag::cli
