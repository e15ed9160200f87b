// SPDX-License-Identifier: Apache-2.0
/// `mapped_file`: a read-only memory map of a whole file (POSIX mmap), for the checkpoint readers.
#pragma once

// Standard library and POSIX only: the fuzzers build this header with plain clang.
#include "mldiag/core/error.hpp"

#include <fcntl.h>     // open
#include <sys/mman.h>  // mmap, madvise
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close, sysconf

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::strerror
#include <span>
#include <string>
#include <utility>

namespace mldiag::cli {

// A read-only map of a file: `bytes()` is its content, valid while the object lives (moving
// it keeps the mapping where it is). An empty file maps nothing and has empty `bytes()`.
// Errors throw `mldiag::error` naming the file and what to do.
//
// The map is private and read-only, so `release()` may drop pages that were read (their
// memory goes back to the system; touching them again reads them from the file again): this
// is how a reader keeps its resident memory bounded on a file larger than memory. For a file
// larger than a quarter of physical memory it drops them from the page cache as well, so that
// streaming it does not evict everything else: on the 13 GiB test file that took the read
// from 50 s to 14 s (2 cores, 24 GB, tests/tools/checkpoint_test.cpp "big", 2026-12-01);
// `will_need(..., true)` (MADV_POPULATE_READ) then took it to 8 s, and a cached 1 GiB file
// from 0.7 to 3.8 GB/s (page faults were the cost).
// Smaller files stay cached (a `diff` after a `stats` reads them from memory). The file
// stays open while mapped.
//
// If another process truncates the file while it is mapped, reading the lost pages raises
// SIGBUS: do not rewrite a checkpoint while it is being read.
//
// **Example**
// ```cpp
// mldiag::cli::mapped_file f("model.safetensors");
// f.advise_sequential();
// std::span<const std::byte> all = f.bytes();
// ```
class mapped_file {
 public:
  explicit mapped_file(std::string path) : path_(std::move(path)) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      throw error(path_ + ": cannot open (" + std::strerror(e) + "); check the path and that the file is readable");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      throw error(path_ + ": cannot stat (" + std::strerror(e) + ")");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw error(path_ + ": not a regular file (a directory or a device?); pass a checkpoint file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw error(path_ + ": cannot map " + std::to_string(size_) + " bytes (" + std::strerror(e) +
                    "); check the address-space limit (ulimit -v)");
      }
      data_ = static_cast<const std::byte*>(p);
    }
    fd_ = fd;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t memory = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
    drop_cache_ = memory > 0 && size_ > memory / 4;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& o) noexcept
      : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        fd_(std::exchange(o.fd_, -1)), drop_cache_(o.drop_cache_) {}
  mapped_file& operator=(mapped_file&& o) noexcept {
    if (this != &o) {
      unmap();
      path_ = std::move(o.path_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      fd_ = std::exchange(o.fd_, -1);
      drop_cache_ = o.drop_cache_;
    }
    return *this;
  }
  ~mapped_file() { unmap(); }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

  // Tells the kernel the file will be read front to back (more read-ahead, earlier reuse).
  void advise_sequential() const noexcept {
    if (size_ > 0) (void)::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
  }

  // Asks the kernel to start reading [offset, offset + length) now (a hint): one large read
  // instead of a page fault per 4 KiB when the range is first touched.
  void will_need(std::uint64_t offset, std::uint64_t length, bool now = false) const noexcept {
    if (size_ == 0 || offset >= size_) return;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t first = offset / page * page;
    const std::uint64_t end = length > size_ - offset ? size_ : offset + length;
    auto* p = const_cast<std::byte*>(data_ + first);
    const auto n = static_cast<std::size_t>(end - first);
#ifdef MADV_POPULATE_READ
    // Linux 5.14+: map the whole range in one call instead of one page fault per 64 KiB.
    if (now && ::madvise(p, n, MADV_POPULATE_READ) == 0) return;
#endif
    (void)now;
    (void)::madvise(p, n, MADV_WILLNEED);
  }

  // Drops the resident pages that lie entirely inside [offset, offset + length): a hint
  // (failures are ignored), never a change of content.
  void release(std::uint64_t offset, std::uint64_t length) const noexcept {
    if (size_ == 0 || offset >= size_) return;
    const std::uint64_t end = length > size_ - offset ? size_ : offset + length;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t first = (offset + page - 1) / page * page;
    const std::uint64_t last = end == size_ ? end : end / page * page;
    if (last <= first) return;
    // const_cast: madvise takes a non-const pointer; DONTNEED on a private read-only file map
    // discards nothing that cannot be read back from the file.
    (void)::madvise(const_cast<std::byte*>(data_ + first), static_cast<std::size_t>(last - first), MADV_DONTNEED);
    // Not just a courtesy: without it the kernel spent 3/4 of the time reclaiming cache.
    if (drop_cache_) (void)::posix_fadvise(fd_, static_cast<off_t>(first), static_cast<off_t>(last - first), POSIX_FADV_DONTNEED);
  }

 private:
  void unmap() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
  bool drop_cache_ = false;  // larger than physical memory / 4
};

}  // namespace mldiag::cli
