// SPDX-License-Identifier: Apache-2.0
/// The HTML report's heatmap: gradient norms per tensor and step bucket, their colours, and
/// which rows a finding's location names.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/report/detail/png.hpp"  // rgb
#include "mldiag/report/detail/step_buckets.hpp"
#include "mldiag/report/jsonl.hpp"
#include "mldiag/vocab/role.hpp"  // parse_location: the role prefixes of the monitor's names
#include "mldiag/report/run_log.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>
#include <utility>  // std::swap
#include <vector>

namespace mldiag::inline MLDIAG_ABI::report::detail::html {

// The tensor of a per-tensor gradient norm metric (`grad/<tensor>/norm`), or "".
[[nodiscard]] inline std::string_view grad_norm_tensor(std::string_view metric) noexcept {
  constexpr std::string_view prefix = "grad/", suffix = "/norm";
  if (metric.size() <= prefix.size() + suffix.size() || !metric.starts_with(prefix) ||
      !metric.ends_with(suffix))
    return {};
  const auto tensor = metric.substr(prefix.size(), metric.size() - prefix.size() - suffix.size());
  return tensor == "global" ? std::string_view{} : tensor;
}

// A finding's location names a heatmap row when the names are equal or one is a prefix of
// the other ending at a '.' or '/' boundary (`block2.attn` names `block2.attn.qkv.weight`).
[[nodiscard]] inline bool location_matches(std::string_view location,
                                           std::string_view tensor) noexcept {
  if (location.empty() || tensor.empty()) return false;
  auto shorter = location, longer = tensor;
  if (shorter.size() > longer.size()) std::swap(shorter, longer);
  if (!longer.starts_with(shorter)) return false;
  return longer.size() == shorter.size() || longer[shorter.size()] == '.' ||
         longer[shorter.size()] == '/';
}

// A location without the role prefix the monitor puts on it (`grad/fc1.weight`,
// `act/conv2.relu`: vocab/role.hpp), or the location itself when it has none. Heatmap rows are
// tensor names without one.
[[nodiscard]] inline std::string_view strip_role_prefix(std::string_view location) noexcept {
  const auto l = parse_location(location);
  return l ? l->tensor : location;
}

// Whether `name` is a list of numbered modules in `location` (`blocks` in `blocks.1.attn`):
// the component after it is a number. Going up to it would name every layer.
[[nodiscard]] inline bool is_layer_list(std::string_view location, std::size_t name_end) noexcept {
  return name_end + 1 < location.size() && location[name_end + 1] >= '0' &&
         location[name_end + 1] <= '9';
}

// The module a finding's location stands for on the heatmap: the location itself when it
// names a row, else its parent module (the name up to its last '.' or '/'), and so on, but
// never up to a list of numbered layers (`blocks` of `blocks.1`) nor to a parent that names
// every row (`model` of `model.final_act`), which would mark all of them. Detectors name what they
// observed (`blocks.1.attn`, an attention entropy; `act/conv2.relu`, an activation), which need not
// be a parameter: its module (`blocks.1`, `conv2`) is. The monitor's role prefix (`grad/`, `act/`,
// ...) is not part of a row's name: a location that matches nothing as written is tried without it.
// Empty when nothing matches.
[[nodiscard]] inline std::string_view heatmap_location(std::string_view location,
                                                       const std::vector<std::string_view>& rows) {
  const auto walk = [&rows](std::string_view at) -> std::string_view {
    for (bool parent = false;; parent = true) {
      std::size_t named = 0;
      for (const auto& row : rows)
        named += location_matches(at, row) ? 1 : 0;
      // A parent that names every row (`model` of `model.final_act`) says nothing.
      if (named > 0)
        return parent && named == rows.size() && rows.size() > 1 ? std::string_view{} : at;
      const auto cut = at.find_last_of("./");
      if (cut == std::string_view::npos || cut == 0 || is_layer_list(at, cut)) return {};
      at = at.substr(0, cut);
    }
  };
  if (const auto found = walk(location); !found.empty()) return found;
  const auto bare = strip_role_prefix(location);
  return bare.size() == location.size() ? std::string_view{} : walk(bare);
}

// 32 colour levels: enough to read an order-of-magnitude change at a glance over the usual
// 4-8 decades of per-layer gradient norms, few enough that equal cells stay equal.
inline constexpr int heatmap_levels = 32;
// Palette indices before the levels.
inline constexpr unsigned char cell_absent = 0, cell_nonfinite = 1, cell_nonpositive = 2,
                               cell_first_level = 3;

// Per-tensor gradient norms by bucket: each cell is the bucket's largest finite norm,
// +Inf when any value in the bucket was NaN or +/-Inf, run_log::absent() when none was
// logged. `lo`/`hi` are log10 of the smallest/largest positive finite cell.
struct heatmap_grid {
  std::vector<std::size_t> metric;       // [row] -> run_log column
  std::vector<std::string_view> tensor;  // [row]
  std::size_t columns = 0;
  std::vector<double> cell;  // [row][column], row-major
  double lo = 0.0, hi = 0.0;
  bool any_positive = false;

  [[nodiscard]] double at(std::size_t row, std::size_t column) const noexcept {
    return cell[row * columns + column];
  }
  // The palette index of a cell (cell_absent, cell_nonfinite, cell_nonpositive, or a level).
  [[nodiscard]] unsigned char index(double v) const noexcept {
    if (run_log::is_absent(v)) return cell_absent;
    if (!std::isfinite(v)) return cell_nonfinite;
    if (v <= 0.0) return cell_nonpositive;
    const double t = hi > lo ? (std::log10(v) - lo) / (hi - lo) : 0.5;
    const int level = std::clamp(static_cast<int>(t * heatmap_levels), 0, heatmap_levels - 1);
    return static_cast<unsigned char>(cell_first_level + level);
  }
};

[[nodiscard]] inline heatmap_grid make_heatmap(const run_log& run, const step_buckets& buckets) {
  heatmap_grid g;
  g.columns = buckets.count;
  for (std::size_t m = 0; m < run.metric_names.size(); ++m)
    if (const auto t = grad_norm_tensor(run.metric_names[m]); !t.empty()) {
      g.metric.push_back(m);
      g.tensor.push_back(t);
    }
  g.cell.assign(g.metric.size() * g.columns, run_log::absent());
  std::vector<envelope_cell> env;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::size_t r = 0; r < g.metric.size(); ++r) {
    envelope(buckets, run.steps, run.metric_values[g.metric[r]], env);
    for (std::size_t c = 0; c < g.columns; ++c) {
      double& out = g.cell[r * g.columns + c];
      if (env[c].nonfinite())
        out = std::numeric_limits<double>::infinity();
      else if (env[c].finite)
        out = env[c].max;
      if (std::isfinite(out) && out > 0.0) {
        lo = std::min(lo, out);
        hi = std::max(hi, out);
      }
    }
  }
  g.any_positive = hi > 0.0;
  if (g.any_positive) {
    g.lo = std::log10(lo);
    g.hi = std::log10(hi);
  }
  return g;
}

// The palette: absent, non-finite, zero/negative, then the levels from low to high norm.
[[nodiscard]] inline std::vector<rgb> heatmap_palette() {
  std::vector<rgb> p{{240, 240, 240}, {255, 0, 255}, {0, 0, 0}};
  // Dark indigo through blue and teal to yellow: brightness rises with the norm, and none of
  // these is the non-finite magenta or the zero black.
  constexpr std::array<std::array<double, 4>, 5> anchors{{{0.00, 40, 20, 90},
                                                          {0.30, 55, 95, 170},
                                                          {0.55, 40, 165, 140},
                                                          {0.80, 190, 215, 70},
                                                          {1.00, 253, 231, 37}}};
  for (int i = 0; i < heatmap_levels; ++i) {
    const double t = (i + 0.5) / heatmap_levels;
    std::size_t k = 0;
    while (k + 2 < anchors.size() && t > anchors[k + 1][0])
      ++k;
    const double u = (t - anchors[k][0]) / (anchors[k + 1][0] - anchors[k][0]);
    rgb c{};
    for (std::size_t ch = 0; ch < 3; ++ch)
      c[ch] = static_cast<unsigned char>(
          std::lround(anchors[k][ch + 1] + u * (anchors[k + 1][ch + 1] - anchors[k][ch + 1])));
    p.push_back(c);
  }
  return p;
}

}  // namespace mldiag::report::detail::html
