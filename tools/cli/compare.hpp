// SPDX-License-Identifier: Apache-2.0
/// `mldiag compare REFERENCE TEST`: the first divergent layer of an engine against a reference,
/// from two fingerprint files (`inference::fingerprint_recorder::write_jsonl`) or two activation
/// dumps (.safetensors, .npy, .npz: one tensor per tap, rows = token positions).
#pragma once

#include "checkpoint.hpp"
#include "tensor_source.hpp"

#include "mldiag/core/error.hpp"
#include "mldiag/inference/fingerprint.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mldiag::cli {

namespace detail {
[[nodiscard]] inline inference::number_format format_named(const std::string& s, const std::string& where) {
  using inference::number_format;
  for (const auto f : {number_format::fp32, number_format::bf16, number_format::fp16, number_format::fp8_e4m3,
                       number_format::fp8_e5m2, number_format::int8})
    if (s == inference::name(f)) return f;
  throw error("" + where + ": format '" + s + "' is not one of fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8");
}
}  // namespace detail

namespace detail {
// A whole number of type T from `j[key]`: nlohmann converts a float to an integer type with a
// plain cast, undefined out of range (fuzz_fingerprints found 2.2e66 read as an int), so the
// kind and the range are checked first.
template <class T>
[[nodiscard]] T whole_number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = j.at(key);
  const auto refuse = [&] {
    return error(where + ": '" + key + "' must be a whole number from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max()));
  };
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw refuse();
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) throw refuse();
      if (static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw refuse();
    } else {
      if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) || i > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
        throw refuse();
    }
    return static_cast<T>(i);
  }
  throw refuse();
}
}  // namespace detail

/// Whether a file's first non-blank byte is '{' (a JSON Lines fingerprint file) rather than a checkpoint.
[[nodiscard]] inline bool looks_like_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("" + path + ": cannot be opened for reading; check the path and its permissions");
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  return false;
}

/// The fingerprints in `text`, the contents of a file `fingerprint_recorder::write_jsonl` wrote
/// (`name` stands for the file in messages). Bad lines are refused with the file and line named;
/// nothing else is thrown (fuzz/fuzz_fingerprints.cpp).
[[nodiscard]] inline std::vector<inference::fingerprint> parse_fingerprints(std::string_view text, const std::string& name) {
  std::vector<inference::fingerprint> out;
  std::size_t n = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = name + ":" + std::to_string(n);
    try {
      const auto j = nlohmann::json::parse(line);
      inference::fingerprint f;
      f.name = j.at("name").get<std::string>();
      f.request = detail::whole_number<std::int32_t>(j, "request", where);
      f.position = detail::whole_number<std::int64_t>(j, "position", where);
      const auto ph = j.at("phase").get<std::string>();
      if (ph != "prefill" && ph != "decode") throw error(where + ": phase '" + ph + "' is not prefill or decode");
      f.phase = ph == "prefill" ? inference::phase::prefill : inference::phase::decode;
      f.order = detail::whole_number<std::uint32_t>(j, "order", where);
      f.format.format = detail::format_named(j.at("format").get<std::string>(), where);
      f.format.scale = j.contains("scale") && !j.at("scale").is_null() ? j.at("scale").get<double>() : 1.0;
      f.format.block = j.contains("block") ? detail::whole_number<std::uint32_t>(j, "block", where) : 0u;
      f.count = detail::whole_number<std::uint64_t>(j, "count", where);
      f.nan = detail::whole_number<std::uint64_t>(j, "nan", where);
      f.inf = detail::whole_number<std::uint64_t>(j, "inf", where);
      if (f.nan > f.count || f.inf > f.count - f.nan) throw error(where + ": more NaN and Inf than values ('count')");
      const auto number = [&](const char* k) {
        if (j.at(k).is_null()) return 0.0;
        const double v = j.at(k).get<double>();
        if (!std::isfinite(v)) throw error(where + ": '" + k + "' is not a finite number");
        return v;
      };
      f.amax = number("amax");
      f.mean = number("mean");
      f.l2 = number("l2");
      if (f.amax < 0.0 || f.l2 < 0.0) throw error(where + ": 'amax' and 'l2' are magnitudes; a negative one is not a fingerprint");
      const auto& s = j.at("sketch");
      if (!s.is_array() || s.size() != inference::sketch_buckets) {
        throw error(where + ": 'sketch' must be an array of " + std::to_string(inference::sketch_buckets) +
                    " numbers; was the file written by another mldiag version?");
      }
      for (std::size_t b = 0; b < s.size(); ++b) {
        // Read as double and range-checked: a float conversion out of range is undefined.
        const double v = s[b].is_null() ? 0.0 : s[b].get<double>();
        if (!(std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max())))
          throw error(where + ": sketch value " + std::to_string(b) + " is not a finite float");
        f.sketch[b] = static_cast<float>(v);
      }
      f.format.validate();
      out.push_back(std::move(f));
    } catch (const mldiag::error&) {
      throw;
    } catch (const std::exception& e) {
      throw error(where + ": not a fingerprint line (" + e.what() + "); write it with fingerprint_recorder::write_jsonl");
    }
  }
  if (out.empty()) throw error(name + ": no fingerprint in it; write it with fingerprint_recorder::write_jsonl");
  return out;
}

/// The fingerprints of the file at `path` (parse_fingerprints).
[[nodiscard]] inline std::vector<inference::fingerprint> read_fingerprints(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot be opened for reading; check the path and its permissions");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_fingerprints(text, path);
}

/// The fingerprints of an activation dump: each floating tensor is one tap (in file order), its
/// first dimension the token positions (a 1-d tensor is one row), stored in its own dtype.
/// Integer tensors are skipped (token ids, masks) and listed in `skipped`.
[[nodiscard]] inline std::vector<inference::fingerprint> dump_fingerprints(const std::string& path, std::vector<std::string>& skipped) {
  const auto ckpt = checkpoint::open(path);
  std::vector<inference::fingerprint> out;
  std::uint32_t order = 0;
  detail::unit_scratch scratch;
  for (const auto& t : ckpt.tensors()) {
    inference::storage_format fmt;
    switch (t.type) {
      case value_type::f64:
      case value_type::f32: fmt.format = inference::number_format::fp32; break;
      case value_type::f16: fmt.format = inference::number_format::fp16; break;
      case value_type::bf16: fmt.format = inference::number_format::bf16; break;
      case value_type::f8_e4m3: fmt.format = inference::number_format::fp8_e4m3; break;
      case value_type::f8_e5m2: fmt.format = inference::number_format::fp8_e5m2; break;
      default: skipped.push_back(t.name); continue;
    }
    std::vector<float> values;
    values.reserve(static_cast<std::size_t>(t.numel));
    detail::tensor_source src(ckpt, t, default_window_bytes);
    const std::size_t size = size_of(t.type);
    // Unit by unit, in native order and aligned (native_unit), as doubles (to_double): the
    // checkpoint readers' own conversion.
    for (auto w = src.next(); !w.empty(); w = src.next()) {
      const std::size_t elems = w.size() / size;
      for (std::size_t begin = 0; begin < elems; begin += mldiag::stats_unit_elements) {
        const std::size_t n = std::min(mldiag::stats_unit_elements, elems - begin);
        detail::to_double(t.type, detail::native_unit(t, w.data() + begin * size, n, scratch), n, scratch.values.data());
        for (std::size_t i = 0; i < n; ++i) values.push_back(static_cast<float>(scratch.values[i]));
      }
    }
    const std::size_t rows = t.shape.size() >= 2 ? static_cast<std::size_t>(t.shape[0]) : 1;
    const std::size_t cols = rows ? values.size() / rows : 0;
    if (rows == 0 || cols == 0) {
      skipped.push_back(t.name);
      continue;
    }
    const inference::tap tp{.name = t.name, .phase = inference::phase::prefill, .position = 0, .rows = rows, .cols = cols,
                            .values = values, .format = fmt};
    for (std::size_t r = 0; r < rows; ++r) out.push_back(inference::make_fingerprint(tp, r, order));
    ++order;
  }
  if (out.empty()) throw error("" + path + ": no floating-point tensor to compare");
  return out;
}

}  // namespace mldiag::cli
