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

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
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

/// Whether a file's first non-blank byte is '{' (a JSON Lines fingerprint file) rather than a checkpoint.
[[nodiscard]] inline bool looks_like_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("" + path + ": cannot be opened for reading; check the path and its permissions");
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  return false;
}

/// The fingerprints of a file `fingerprint_recorder::write_jsonl` wrote. Bad lines are refused
/// with the file and line named.
[[nodiscard]] inline std::vector<inference::fingerprint> read_fingerprints(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw error("" + path + ": cannot be opened for reading; check the path and its permissions");
  std::vector<inference::fingerprint> out;
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    try {
      const auto j = nlohmann::json::parse(line);
      inference::fingerprint f;
      f.name = j.at("name").get<std::string>();
      f.request = j.at("request").get<std::int32_t>();
      f.position = j.at("position").get<std::int64_t>();
      const auto ph = j.at("phase").get<std::string>();
      if (ph != "prefill" && ph != "decode") throw error("" + where + ": phase '" + ph + "' is not prefill or decode");
      f.phase = ph == "prefill" ? inference::phase::prefill : inference::phase::decode;
      f.order = j.at("order").get<std::uint32_t>();
      f.format.format = detail::format_named(j.at("format").get<std::string>(), where);
      f.format.scale = j.value("scale", 1.0);
      f.format.block = j.value("block", 0u);
      f.count = j.at("count").get<std::uint64_t>();
      f.nan = j.at("nan").get<std::uint64_t>();
      f.inf = j.at("inf").get<std::uint64_t>();
      const auto number = [&](const char* k) { return j.at(k).is_null() ? 0.0 : j.at(k).get<double>(); };
      f.amax = number("amax");
      f.mean = number("mean");
      f.l2 = number("l2");
      const auto& s = j.at("sketch");
      if (!s.is_array() || s.size() != inference::sketch_buckets) {
        throw error("" + where + ": 'sketch' must be an array of " + std::to_string(inference::sketch_buckets) +
                    " numbers; was the file written by another mldiag version?");
      }
      for (std::size_t b = 0; b < s.size(); ++b) f.sketch[b] = s[b].is_null() ? 0.0f : s[b].get<float>();
      f.format.validate();
      out.push_back(std::move(f));
    } catch (const mldiag::error&) {
      throw;
    } catch (const std::exception& e) {
      throw error("" + where + ": not a fingerprint line (" + e.what() + "); write it with fingerprint_recorder::write_jsonl");
    }
  }
  if (out.empty()) throw error("" + path + ": no fingerprint in it; write it with fingerprint_recorder::write_jsonl");
  return out;
}

/// The fingerprints of an activation dump: each floating tensor is one tap (in file order), its
/// first dimension the token positions (a 1-d tensor is one row), stored in its own dtype.
/// Integer tensors are skipped (token ids, masks) and listed in `skipped`.
[[nodiscard]] inline std::vector<inference::fingerprint> dump_fingerprints(const std::string& path, std::vector<std::string>& skipped) {
  const auto ckpt = checkpoint::open(path);
  std::vector<inference::fingerprint> out;
  std::uint32_t order = 0;
  std::vector<double> wide;
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
    for (auto w = src.next(); !w.empty(); w = src.next()) {
      const std::size_t n = w.size() / size;
      std::vector<std::byte> raw(w.begin(), w.end());
      if (detail::needs_swap(t)) detail::swap_bytes(raw.data(), n, size);
      wide.resize(n);
      detail::to_double(t.type, raw.data(), n, wide.data());
      for (const double x : wide) values.push_back(static_cast<float>(x));
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
