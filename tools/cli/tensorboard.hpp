// SPDX-License-Identifier: Apache-2.0
/// TensorBoard event files (`events.out.tfevents.*`): the TFRecord framing, checked, and the few
/// protobuf messages that carry scalars, decoded by hand with every length bounds-checked.
#pragma once

// Standard library only: fuzz/fuzz_logs.cpp builds this with plain clang.
#include "mldiag/core/error.hpp"

#include <array>
#include <bit>  // std::bit_cast
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mldiag::cli::tensorboard {

// One scalar summary value: the event's step, the value's tag as written, the value.
struct scalar {
  std::int64_t step = 0;
  std::string tag;
  double value = 0.0;
};

namespace detail {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord uses.
constexpr std::array<std::uint32_t, 256> make_crc32c_table() noexcept {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<std::uint32_t, 256> crc32c_table = make_crc32c_table();

[[nodiscard]] inline std::uint32_t crc32c(std::string_view bytes) noexcept {
  std::uint32_t c = 0xFFFFFFFFU;
  for (const char ch : bytes) c = crc32c_table[(c ^ static_cast<unsigned char>(ch)) & 0xFFU] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

// TFRecord stores CRCs "masked" (rotated and offset) so that a CRC of data holding CRCs
// does not degenerate.
[[nodiscard]] inline std::uint32_t masked_crc32c(std::string_view bytes) noexcept {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8U;
}

[[nodiscard]] inline std::uint64_t load_le(std::string_view bytes) noexcept {  // up to 8 bytes
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

// Where a decoding error is: the file and the byte offset of the record.
struct place {
  std::string_view file;
  std::uint64_t offset = 0;
  [[noreturn]] void fail(std::string_view what) const {
    throw error(std::string(file) + ": byte " + std::to_string(offset) + ": " + std::string(what) +
                "; the event file is damaged (re-copy it, or pass the files of a run that are whole)");
  }
};

// One protobuf field: its number, wire type, and either the varint / fixed value or the
// length-delimited bytes.
struct field {
  std::uint32_t number = 0;
  std::uint32_t wire = 0;
  std::uint64_t scalar = 0;  // wire types 0 (varint), 1 (fixed64), 5 (fixed32)
  std::string_view bytes;    // wire type 2
};

// Walks the fields of one protobuf message. Groups (wire types 3 and 4, long deprecated) and
// anything that runs past the message's end are errors.
class proto_reader {
 public:
  proto_reader(std::string_view message, const place& where) noexcept : s_(message), where_(where) {}

  bool next(field& f) {
    if (i_ >= s_.size()) return false;
    const std::uint64_t key = varint();
    f.number = static_cast<std::uint32_t>(key >> 3);
    f.wire = static_cast<std::uint32_t>(key & 7U);
    if ((key >> 3) == 0 || (key >> 3) > 0x1FFFFFFFU) where_.fail("malformed protobuf (bad field number)");
    f.bytes = {};
    switch (f.wire) {
      case 0: f.scalar = varint(); break;
      case 1: f.scalar = fixed(8); break;
      case 5: f.scalar = fixed(4); break;
      case 2: {
        const std::uint64_t n = varint();
        if (n > s_.size() - i_) where_.fail("malformed protobuf (a field runs past the end of its message)");
        f.bytes = s_.substr(i_, static_cast<std::size_t>(n));
        i_ += static_cast<std::size_t>(n);
        break;
      }
      default: where_.fail("malformed protobuf (unsupported wire type " + std::to_string(f.wire) + ")");
    }
    return true;
  }

 private:
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i_ >= s_.size()) where_.fail("malformed protobuf (a varint runs past the end of its message)");
      const auto b = static_cast<unsigned char>(s_[i_++]);
      v |= static_cast<std::uint64_t>(b & 0x7FU) << shift;
      if ((b & 0x80U) == 0) return v;
    }
    where_.fail("malformed protobuf (a varint longer than 10 bytes)");
  }
  std::uint64_t fixed(std::size_t n) {
    if (n > s_.size() - i_) where_.fail("malformed protobuf (a fixed-size field runs past the end of its message)");
    const std::uint64_t v = load_le(s_.substr(i_, n));
    i_ += n;
    return v;
  }

  std::string_view s_;
  place where_;
  std::size_t i_ = 0;
};

// tensorflow/core/framework/types.proto
inline constexpr std::uint64_t dt_float = 1;
inline constexpr std::uint64_t dt_double = 2;

// The value of a TensorProto that holds exactly one float or double (a TF2 scalar summary);
// false for anything else (histograms, strings, other types, more or fewer elements).
inline bool tensor_scalar(std::string_view tensor, const place& where, double& out) {
  std::uint64_t dtype = 0;
  std::uint64_t elements = 1;  // the shape's product; rank 0 is one element
  bool shape_known = true;
  std::size_t values = 0;
  double first = 0.0;
  auto take = [&](double v) {
    if (values++ == 0) first = v;
  };
  std::string_view content;
  proto_reader r(tensor, where);
  for (field f; r.next(f);) {
    if (f.number == 1 && f.wire == 0) dtype = f.scalar;
    else if (f.number == 2 && f.wire == 2) {  // TensorShapeProto
      proto_reader shape(f.bytes, where);
      for (field d; shape.next(d);) {
        if (d.number == 3 && d.wire == 0 && d.scalar != 0) shape_known = false;  // unknown_rank
        if (d.number != 2 || d.wire != 2) continue;                             // Dim
        proto_reader dim(d.bytes, where);
        std::uint64_t size = 0;
        for (field s; dim.next(s);)
          if (s.number == 1 && s.wire == 0) size = s.scalar;
        // A dimension of 0, of "-1" (unknown, a huge uint64 here) or over 2^32 is not a scalar.
        if (size == 0 || size > 0xFFFFFFFFU) shape_known = false;
        else if (elements <= 0xFFFFFFFFU) elements *= size;
      }
    } else if (f.number == 4 && f.wire == 2) content = f.bytes;
    else if (f.number == 5 && f.wire == 5) take(static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(f.scalar))));
    else if (f.number == 5 && f.wire == 2) {  // packed floats
      if (f.bytes.size() % 4 != 0) where.fail("malformed TensorProto (packed float_val not a multiple of 4 bytes)");
      for (std::size_t k = 0; k < f.bytes.size(); k += 4)
        take(static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(load_le(f.bytes.substr(k, 4))))));
    } else if (f.number == 6 && f.wire == 1) take(std::bit_cast<double>(f.scalar));
    else if (f.number == 6 && f.wire == 2) {  // packed doubles
      if (f.bytes.size() % 8 != 0) where.fail("malformed TensorProto (packed double_val not a multiple of 8 bytes)");
      for (std::size_t k = 0; k < f.bytes.size(); k += 8) take(std::bit_cast<double>(load_le(f.bytes.substr(k, 8))));
    }
  }
  if (!shape_known || elements != 1) return false;
  if (dtype == dt_float) {
    if (!content.empty()) {
      if (content.size() != 4) return false;
      out = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(load_le(content))));
      return true;
    }
  } else if (dtype == dt_double) {
    if (!content.empty()) {
      if (content.size() != 8) return false;
      out = std::bit_cast<double>(load_le(content));
      return true;
    }
  } else {
    return false;  // DT_HALF, DT_BFLOAT16, integers, strings: not read (docs/cli.md)
  }
  if (values != 1) return false;
  out = first;
  return true;
}

// Appends the scalars of one serialized `Event`.
inline void decode_event(std::string_view event, const place& where, std::vector<scalar>& out) {
  std::int64_t step = 0;
  std::vector<std::string_view> summaries;
  proto_reader r(event, where);
  for (field f; r.next(f);) {
    if (f.number == 2) {
      if (f.wire != 0) where.fail("malformed Event (step is not a varint)");
      step = static_cast<std::int64_t>(f.scalar);
    } else if (f.number == 5) {
      if (f.wire != 2) where.fail("malformed Event (summary is not a message)");
      summaries.push_back(f.bytes);
    }
  }
  for (const auto summary : summaries) {
    proto_reader s(summary, where);
    for (field v; s.next(v);) {
      if (v.number != 1 || v.wire != 2) continue;  // Summary.value
      proto_reader value(v.bytes, where);
      std::string_view tag;
      bool has = false;
      double x = 0.0;
      for (field f; value.next(f);) {
        if (f.number == 1 && f.wire == 2) tag = f.bytes;
        else if (f.number == 2 && f.wire == 5) {
          x = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(f.scalar)));
          has = true;
        } else if (f.number == 8 && f.wire == 2) {
          double t = 0.0;
          if (tensor_scalar(f.bytes, where, t)) {
            x = t;
            has = true;
          } else {
            has = false;
          }
        }
      }
      if (has && !tag.empty()) out.push_back({step, std::string(tag), x});
    }
  }
}

}  // namespace detail

// True when `bytes` starts with a TFRecord whose length CRC checks: how the log reader tells
// an event file from text, whatever its name.
[[nodiscard]] inline bool looks_like_event_file(std::string_view bytes) noexcept {
  return bytes.size() >= 12 && detail::load_le(bytes.substr(8, 4)) == detail::masked_crc32c(bytes.substr(0, 8));
}

// What one event file holds: its scalar summaries in file order, how many complete records
// it has, and the bytes of an incomplete record at its end.
struct event_file {
  std::vector<scalar> scalars;
  std::size_t records = 0;
  // Bytes after the last complete record that do not make a whole record yet (0: none). A
  // writer appends a record in pieces, so a run that is still logging (or a copy taken while
  // it was) ends in one; TensorBoard reads up to it and waits for the rest.
  std::size_t partial_tail = 0;
};

// Reads an event file: every complete record, both CRCs checked. A bad CRC on a complete
// record (or on the length of a record whose header is whole), or a malformed protobuf,
// throws mldiag::error naming `file` and the record's byte offset; an incomplete last record
// is not an error but is counted in `partial_tail` (the caller tells the user). Values that
// are not scalars (histograms, images, text, non-scalar tensors) are skipped.
//
// **Example**
// ```cpp
// const auto events = mldiag::cli::tensorboard::read_event_file(bytes, "events.out.tfevents.1");
// for (const auto& s : events.scalars)
//   std::printf("%lld %s %g\n", static_cast<long long>(s.step), s.tag.c_str(), s.value);
// if (events.partial_tail > 0) std::printf("%zu bytes of a record still being written\n",
// events.partial_tail);
// ```
[[nodiscard]] inline event_file read_event_file(std::string_view bytes, std::string_view file) {
  event_file out;
  std::size_t off = 0;
  while (off < bytes.size()) {
    const detail::place where{file, off};
    const std::size_t left = bytes.size() - off;
    // TFRecord framing: length (8), masked CRC of the length (4), data, masked CRC of the data
    // (4). What TensorBoard's reader does at the end of a file: a header cut short, or a whole
    // header whose data or data CRC is not all there yet, is the record being written.
    if (left < 12) {
      out.partial_tail = left;
      break;
    }
    const std::uint64_t length = detail::load_le(bytes.substr(off, 8));
    if (detail::load_le(bytes.substr(off + 8, 4)) != detail::masked_crc32c(bytes.substr(off, 8)))
      where.fail("bad CRC of the record length");
    if (left < 16 || length > left - 16) {
      out.partial_tail = left;
      break;
    }
    const auto n = static_cast<std::size_t>(length);
    const std::string_view data = bytes.substr(off + 12, n);
    if (detail::load_le(bytes.substr(off + 12 + n, 4)) != detail::masked_crc32c(data)) where.fail("bad CRC of the record data");
    detail::decode_event(data, where, out.scalars);
    ++out.records;
    off += 16 + n;
  }
  return out;
}

// The note for an event file that ends in an incomplete record ("" when it does not).
[[nodiscard]] inline std::string partial_tail_note(const event_file& events,
                                                   std::string_view file) {
  if (events.partial_tail == 0) return {};
  return std::string(file) + ": the last " + std::to_string(events.partial_tail) +
         " bytes are an incomplete record (the run is still writing it, or the copy was cut), "
         "ignored; read the " +
         std::to_string(events.records) + " complete record(s) before them";
}

}  // namespace mldiag::cli::tensorboard
