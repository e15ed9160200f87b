// SPDX-License-Identifier: Apache-2.0
/// Findings across ranks: as bytes (write_findings, read_findings) and deduplicate.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/vocab/finding.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mldiag::inline MLDIAG_ABI::distributed {

// ---------------------------------------------------------------------------------------------
// Findings across ranks.

/// A finding and the ranks that reported it (ascending).
struct ranked_finding {
  mldiag::finding finding;
  std::vector<int> ranks;
};

namespace detail {

inline void put_bytes(std::vector<char>& out, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  out.insert(out.end(), c, c + n);
}
template <class T>
void put(std::vector<char>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
inline void put_string(std::vector<char>& out, std::string_view s) {
  put<std::uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

class byte_reader {
 public:
  explicit byte_reader(std::span<const char> b) : b_(b) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    need(n);
    std::string s(b_.data() + at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return s;
  }
  [[nodiscard]] bool done() const noexcept { return at_ == b_.size(); }

 private:
  void need(std::uint64_t n) const {
    if (n > b_.size() - at_)
      throw error("read_findings: the buffer ends early (byte " + std::to_string(at_) + " of " + std::to_string(b_.size()) +
                  "); pass the bytes write_findings produced");
  }
  std::span<const char> b_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// Findings as bytes (to move them between ranks) and back.
inline void write_findings(std::span<const finding> findings, std::vector<char>& out) {
  detail::put<std::uint64_t>(out, findings.size());
  for (const auto& f : findings) {
    detail::put<std::uint8_t>(out, static_cast<std::uint8_t>(f.question));
    detail::put<std::uint8_t>(out, static_cast<std::uint8_t>(f.severity));
    detail::put<std::int64_t>(out, f.first_step);
    detail::put<std::int64_t>(out, f.last_step);
    detail::put_string(out, f.symptom);
    detail::put_string(out, f.detector);
    for (const auto* list : {&f.where, &f.evidence}) {
      detail::put<std::uint64_t>(out, list->size());
      for (const auto& [name, v] : *list) {
        detail::put_string(out, name);
        detail::put<double>(out, v);
      }
    }
  }
}
[[nodiscard]] inline std::vector<finding> read_findings(std::span<const char> bytes) {
  detail::byte_reader in(bytes);
  const auto n = in.get<std::uint64_t>();
  std::vector<finding> out;
  for (std::uint64_t i = 0; i < n; ++i) {
    finding f;
    const auto q = in.get<std::uint8_t>();
    const auto sev = in.get<std::uint8_t>();
    if (q < 1 || q > 3 || sev > 2)
      throw error("read_findings: finding " + std::to_string(i) +
                  " has an unknown question or severity; pass exactly what write_findings produced");
    f.question = static_cast<question>(q);
    f.severity = static_cast<severity>(sev);
    f.first_step = in.get<std::int64_t>();
    f.last_step = in.get<std::int64_t>();
    f.symptom = in.get_string();
    f.detector = in.get_string();
    for (auto* list : {&f.where, &f.evidence}) {
      const auto m = in.get<std::uint64_t>();
      for (std::uint64_t j = 0; j < m; ++j) {
        std::string name = in.get_string();
        list->emplace_back(std::move(name), in.get<double>());
      }
    }
    out.push_back(std::move(f));
  }
  if (!in.done()) throw error("read_findings: bytes left after the last finding; pass exactly what write_findings produced");
  return out;
}

/// One entry per problem: findings of different ranks with the same question, symptom,
/// detector and set of locations are one problem. The merged entry spans the earliest first
/// step to the latest last step, has the highest severity, the locations each with its largest
/// score (highest first) and the evidence of the lowest rank with that severity. Entries
/// come in the order their problem first appears (rank 0's findings first).
///
/// **Example**
/// ```cpp
/// // per_rank[r] = the findings rank r produced
/// auto merged = mldiag::distributed::deduplicate(per_rank);
/// for (const auto& m : merged) fmt::print("{} on ranks {}\n", m.finding.symptom, fmt::join(m.ranks, ","));
/// ```
[[nodiscard]] inline std::vector<ranked_finding> deduplicate(std::span<const std::vector<finding>> per_rank) {
  std::vector<ranked_finding> out;
  std::vector<std::string> keys;
  std::vector<std::string> places;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    for (const auto& f : per_rank[r]) {
      places.clear();
      for (const auto& w : f.where) places.push_back(w.first);
      std::sort(places.begin(), places.end());
      places.erase(std::unique(places.begin(), places.end()), places.end());
      std::string key;
      key.push_back(static_cast<char>(f.question));
      for (const std::string_view part : {std::string_view(f.symptom), std::string_view(f.detector)}) {
        key += std::to_string(part.size());
        key.push_back(':');
        key += part;
      }
      for (const auto& p : places) {
        key += std::to_string(p.size());
        key.push_back(':');
        key += p;
      }
      const auto it = std::find(keys.begin(), keys.end(), key);
      const int rank = static_cast<int>(r);
      if (it == keys.end()) {
        keys.push_back(std::move(key));
        out.push_back({f, {rank}});
        continue;
      }
      auto& m = out[static_cast<std::size_t>(it - keys.begin())];
      if (m.ranks.back() != rank) m.ranks.push_back(rank);
      m.finding.first_step = std::min(m.finding.first_step, f.first_step);
      m.finding.last_step = std::max(m.finding.last_step, f.last_step);
      if (f.severity > m.finding.severity) {
        m.finding.severity = f.severity;
        m.finding.evidence = f.evidence;
      }
      for (const auto& [place, score] : f.where) {  // the same places, by the key
        auto w = std::find_if(m.finding.where.begin(), m.finding.where.end(), [&](const auto& x) { return x.first == place; });
        if (w == m.finding.where.end()) m.finding.where.emplace_back(place, score);
        else w->second = std::max(w->second, score);
      }
      std::stable_sort(m.finding.where.begin(), m.finding.where.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });  // highest score first
    }
  }
  return out;
}

}  // namespace mldiag::distributed
