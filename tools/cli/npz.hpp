// SPDX-License-Identifier: Apache-2.0
/// The .npz format: a zip archive (Zip64 too) of .npy members, stored or deflated.
#pragma once

#include "cli/file_bytes.hpp"
#include "cli/inflater.hpp"
#include "cli/npy.hpp"
#include "cli/tensor_entry.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace mldiag::cli {

namespace detail {

// The .npy members of an .npz archive, in archive order; other members are listed as skipped.
inline checkpoint_index index_npz(std::span<const std::byte> bytes, const std::string& path) {
  checkpoint_index out{checkpoint_format::npz, {}, {}};
  std::unordered_set<std::string> seen;
  const std::uint64_t size = bytes.size();
  auto need = [&](std::uint64_t at, std::uint64_t len, std::string_view what) {
    if (at > size || len > size - at) {
      fail_file(path, "corrupt zip: " + std::string(what) + " lies beyond the end of the file (truncated archive?)");
    }
  };
  auto u16 = [&](std::uint64_t at) { return load_le(bytes, at, 2); };
  auto u32 = [&](std::uint64_t at) { return load_le(bytes, at, 4); };
  auto u64 = [&](std::uint64_t at) { return load_le(bytes, at, 8); };
  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes.
  std::optional<std::uint64_t> eocd;
  if (size >= 22) {
    const std::uint64_t lowest = size - 22 > 65535 ? size - 22 - 65535 : 0;
    for (std::uint64_t p = size - 22 + 1; p-- > lowest;) {
      if (u32(p) == 0x06054b50u) { eocd = p; break; }
    }
  }
  if (!eocd) {
    fail_file(path, "corrupt zip: no end-of-central-directory record (the archive is truncated); copy or save it again");
  }
  std::uint64_t entries = u16(*eocd + 10);
  std::uint64_t cd_size = u32(*eocd + 12);
  std::uint64_t cd_offset = u32(*eocd + 16);
  std::uint64_t cd_limit = *eocd;
  if (u16(*eocd + 4) != 0 || u16(*eocd + 6) != 0) {
    fail_file(path, "a multi-disk (split) zip archive is not supported; join the parts into one file");
  }
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // Zip64: a locator just before the EOCD points at the 64-bit record.
    if (*eocd < 20 || u32(*eocd - 20) != 0x07064b50u) {
      fail_file(path, "corrupt zip: Zip64 markers without a Zip64 locator");
    }
    const std::uint64_t rec = u64(*eocd - 20 + 8);
    need(rec, 56, "the Zip64 end-of-central-directory record");
    if (u32(rec) != 0x06064b50u || rec > *eocd - 20) fail_file(path, "corrupt zip: bad Zip64 end-of-central-directory record");
    entries = u64(rec + 32);
    cd_size = u64(rec + 40);
    cd_offset = u64(rec + 48);
    cd_limit = rec;
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
    fail_file(path, "corrupt zip: the central directory (offset " + std::to_string(cd_offset) + ", " +
                        std::to_string(cd_size) + " bytes) lies outside the archive");
  }
  if (entries > cd_size / 46) fail_file(path, "corrupt zip: " + std::to_string(entries) + " entries cannot fit the central directory");
  std::uint64_t p = cd_offset;
  const std::uint64_t cd_end = cd_offset + cd_size;
  for (std::uint64_t k = 0; k < entries; ++k) {
    if (p + 46 > cd_end || u32(p) != 0x02014b50u) {
      fail_file(path, "corrupt zip: central directory entry " + std::to_string(k) + " is damaged");
    }
    const auto flags = u16(p + 8);
    const auto method = u16(p + 10);
    const auto crc = static_cast<std::uint32_t>(u32(p + 16));
    std::uint64_t csize = u32(p + 20);
    std::uint64_t usize = u32(p + 24);
    const auto name_len = u16(p + 28);
    const auto extra_len = u16(p + 30);
    const auto comment_len = u16(p + 32);
    std::uint64_t local = u32(p + 42);
    if (p + 46 + name_len + extra_len + comment_len > cd_end) {
      fail_file(path, "corrupt zip: central directory entry " + std::to_string(k) + " runs past the directory");
    }
    const std::string name(reinterpret_cast<const char*>(bytes.data()) + p + 46, static_cast<std::size_t>(name_len));
    // Zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in this order.
    for (std::uint64_t e = p + 46 + name_len, e_end = e + extra_len; e + 4 <= e_end;) {
      const auto id = u16(e);
      const auto len = u16(e + 2);
      if (e + 4 + len > e_end) break;
      if (id == 1) {
        std::uint64_t q = e + 4;
        auto take = [&](std::uint64_t& field) {
          if (field != 0xFFFFFFFF) return;
          if (q + 8 > e + 4 + len) fail_file(path, "corrupt zip: member '" + name + "' has a short Zip64 field");
          field = u64(q);
          q += 8;
        };
        take(usize);
        take(csize);
        take(local);
      }
      e += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (name.ends_with("/")) continue;  // a directory
    if (!name.ends_with(".npy")) {
      out.skipped.push_back(name);
      continue;
    }
    const std::string who = "member '" + name + "'";
    if (flags & 1u) fail_file(path, who + " is encrypted; decrypt the archive first");
    if (method != 0 && method != 8) {
      fail_file(path, who + " uses zip compression method " + std::to_string(method) +
                          "; mldiag reads stored (numpy.savez) and deflated (numpy.savez_compressed) members");
    }
    need(local, 30, who + "'s local header");
    if (u32(local) != 0x04034b50u) fail_file(path, "corrupt zip: " + who + " has no local header where the directory says");
    const std::uint64_t data = local + 30 + u16(local + 26) + u16(local + 28);
    if (data > cd_offset || csize > cd_offset - data) {
      fail_file(path, "corrupt zip: " + who + "'s data (" + std::to_string(csize) + " bytes) runs into the central directory or past the file");
    }
    const std::string_view local_name(reinterpret_cast<const char*>(bytes.data()) + local + 30,
                                      static_cast<std::size_t>(std::min<std::uint64_t>(u16(local + 26), size - local - 30)));
    if (local_name != name) fail_file(path, "corrupt zip: " + who + "'s local header names '" + std::string(local_name) + "'");
    const std::string what = path + ": " + who;
    tensor_entry t;
    if (method == 0) {
      if (csize != usize) fail_file(path, "corrupt zip: stored " + who + " has different compressed and plain sizes");
      const auto h = parse_npy_header(bytes.subspan(static_cast<std::size_t>(data), static_cast<std::size_t>(usize)), what);
      t = entry_from_header(h);
      if (usize - h.data_offset != h.nbytes) {
        fail_file(what, "size mismatch: " + std::string(dtype_name(h.type)) + " " + shape_text(h.shape) + " needs " +
                            std::to_string(h.nbytes) + " data bytes but the member has " + std::to_string(usize - h.data_offset));
      }
      t.offset = data + h.data_offset;
    } else {
#if MLDIAG_CLI_HAS_ZLIB
      inflater z(bytes.subspan(static_cast<std::size_t>(data), static_cast<std::size_t>(csize)), what);
      std::vector<std::byte> head(12);
      head.resize(z.read(head.data(), head.size()));
      const std::uint64_t hs = npy_header_size(head, what);
      if (hs > head.size()) {
        const std::size_t have = head.size();
        head.resize(static_cast<std::size_t>(hs));
        head.resize(have + z.read(head.data() + have, static_cast<std::size_t>(hs) - have));
      }
      const auto h = parse_npy_header(head, what);
      t = entry_from_header(h);
      if (usize < h.data_offset || usize - h.data_offset != h.nbytes) {
        fail_file(what, "size mismatch: " + std::string(dtype_name(h.type)) + " " + shape_text(h.shape) + " needs " +
                            std::to_string(h.nbytes) + " data bytes but the member has " +
                            std::to_string(usize < h.data_offset ? 0 : usize - h.data_offset));
      }
      t.where = tensor_entry::storage::deflated;
      t.offset = data;
      t.compressed_size = csize;
      t.header_bytes = h.data_offset;
      t.crc32 = crc;
#else
      (void)crc;
      fail_file(what, "is compressed (numpy.savez_compressed) and this mldiag was built without zlib; "
                      "rebuild with zlib (apt-get install zlib1g-dev) or re-save with numpy.savez");
#endif
    }
    t.name = name.substr(0, name.size() - 4);
    add_name(seen, t.name, path, "archive");
    out.tensors.push_back(std::move(t));
  }
  if (out.tensors.empty() && !out.skipped.empty()) {
    fail_file(path, "a zip archive without .npy members (it holds '" + out.skipped.front() +
                        "'; a PyTorch checkpoint?); convert it to safetensors first");
  }
  // Members sorted by position must not share bytes (a crafted archive could alias them).
  std::vector<tensor_entry> by_offset = out.tensors;
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const tensor_entry& a, const tensor_entry& b) { return a.offset < b.offset; });
  check_no_overlap(by_offset, path);
  return out;
}

}  // namespace detail

}  // namespace mldiag::cli
