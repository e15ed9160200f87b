// SPDX-License-Identifier: Apache-2.0
/// A checkpoint file (.safetensors, .npy, .npz), mapped and indexed by content.
#pragma once

// Standard library, POSIX, mldiag and (behind MLDIAG_CLI_HAS_ZLIB) zlib only: the fuzzer
// (fuzz/fuzz_checkpoint.cpp) builds the checkpoint readers with plain clang, without {fmt}.

#include "cli/file_bytes.hpp"
#include "cli/mapped_file.hpp"
#include "cli/npy.hpp"
#include "cli/npz.hpp"
#include "cli/safetensors.hpp"
#include "cli/tensor_entry.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mldiag::cli {

// A checkpoint file, mapped and indexed: its tensors with dtype, shape and where their bytes
// are. Opening reads only the headers (and, for compressed .npz members, the first bytes of
// each); `checkpoint_stats` and `diff_checkpoints` read the data.
//
// The format is recognised by content, not by name; a file named `.safetensors`, `.npy` or
// `.npz` whose content is something else is refused with a message saying what it looks
// like. Every size, offset and shape is validated against the file before anything is read:
// bad input throws `mldiag::error` naming the file and the problem.
//
// **Example**
// ```cpp
// auto ckpt = mldiag::cli::checkpoint::open("model.safetensors");
// for (const auto& t : ckpt.tensors()) std::printf("%s %s\n", t.name.c_str(), t.dtype().data());
// ```
class checkpoint {
 public:
  // Maps and indexes the file at `path`.
  [[nodiscard]] static checkpoint open(const std::string& path) {
    checkpoint c;
    c.map_ = std::make_unique<mapped_file>(path);
    c.map_->advise_sequential();
    c.path_ = path;
    c.bytes_ = c.map_->bytes();
    c.index();
    return c;
  }
  // Indexes bytes already in memory (they must outlive the checkpoint); `name` stands for the
  // file name in messages and its extension is checked like a file's (the fuzzer's entry).
  [[nodiscard]] static checkpoint from_memory(std::span<const std::byte> bytes, std::string name) {
    checkpoint c;
    c.path_ = std::move(name);
    c.bytes_ = bytes;
    c.index();
    return c;
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] checkpoint_format format() const noexcept { return format_; }
  // Tensors in file order (safetensors: by data offset; npz: archive order).
  [[nodiscard]] std::span<const tensor_entry> tensors() const noexcept { return tensors_; }
  // The tensor with this name, or nullptr.
  [[nodiscard]] const tensor_entry* find(const std::string& name) const noexcept {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
  }
  // .npz members that are not .npy arrays (listed, not read).
  [[nodiscard]] const std::vector<std::string>& skipped_members() const noexcept { return skipped_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  // Lets the pages of [offset, offset + length) go (mapped files only; a hint).
  void release(std::uint64_t offset, std::uint64_t length) const noexcept {
    if (map_) map_->release(offset, length);
  }
  // Asks for the pages of [offset, offset + length) to be read ahead (mapped files only; a hint).
  void prefetch(std::uint64_t offset, std::uint64_t length, bool now = false) const noexcept {
    if (map_) map_->will_need(offset, length, now);
  }

 private:
  checkpoint() = default;

  void index() {
    const std::string_view looks = detail::describe_content(bytes_);
    const bool is_npy = looks == std::string_view("a .npy array");
    const bool is_zip = looks.substr(0, 13) == std::string_view("a zip archive");
    const bool is_st = looks == std::string_view("a safetensors file");
    auto refuse = [&](std::string_view expected, std::string_view advice) {
      detail::fail_file(path_, "expected " + std::string(expected) + " but the content looks like " + std::string(looks) +
                                   "; " + std::string(advice));
    };
    if (bytes_.empty()) {
      detail::fail_file(path_, "the file is empty (0 bytes); a checkpoint that was not written to the end? save it again");
    }
    if (path_.ends_with(".safetensors") && bytes_.size() < 9) {
      detail::fail_file(path_, "truncated: " + std::to_string(bytes_.size()) +
                                   " bytes, shorter than a safetensors header length and header");
    }
    if (path_.ends_with(".safetensors") && !is_st) {
      refuse("a safetensors file (8-byte header length, then a JSON header)", "check the file, or rename it after its content");
    }
    if (path_.ends_with(".npy") && !is_npy) refuse("a .npy array (written by numpy.save)", "check the file, or rename it after its content");
    if (path_.ends_with(".npz") && !is_zip) refuse("a .npz zip archive (written by numpy.savez)", "check the file, or rename it after its content");
    detail::checkpoint_index found;
    if (is_npy) found = detail::index_npy(bytes_, path_);
    else if (is_zip) found = detail::index_npz(bytes_, path_);
    else if (is_st) found = detail::index_safetensors(bytes_, path_);
    else {
      detail::fail_file(path_, "not a checkpoint mldiag reads: the content looks like " + std::string(looks) +
                                   "; mldiag reads .safetensors, .npy and .npz files");
    }
    format_ = found.format;
    tensors_ = std::move(found.tensors);
    skipped_ = std::move(found.skipped);
    for (std::size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
  }

  std::unique_ptr<mapped_file> map_;  // null for from_memory
  std::string path_;
  std::span<const std::byte> bytes_;
  checkpoint_format format_ = checkpoint_format::safetensors;
  std::vector<tensor_entry> tensors_;
  std::vector<std::string> skipped_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

}  // namespace mldiag::cli
