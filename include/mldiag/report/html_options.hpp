// SPDX-License-Identifier: Apache-2.0
/// `html_options`: how the HTML report (report/html.hpp) lays out its charts.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/report/episodes.hpp"  // default_episode_gap

#include <cstddef>  // std::size_t
#include <cstdint>

namespace mldiag::inline MLDIAG_ABI::report {

/// How the HTML report is laid out.
struct html_options {
  /// The x axis holds at most this many columns: steps are grouped into buckets of equal step
  /// width, and each bucket keeps its min/max envelope (a one-step spike survives).
  std::size_t max_columns = 800;
  /// The loss axis turns logarithmic when the finite loss spans more than this many decades
  /// (and is positive everywhere).
  double log_scale_decades = 2.0;
  /// Width of the charts in CSS pixels, and of the label column on their left (tensor names).
  int width = 1280;
  int label_width = 300;
  /// Heatmap rows get `max_heatmap_height / rows` pixels each, clamped to
  /// [min_row_height, 14]; with more rows than fit, the page grows instead.
  double max_heatmap_height = 1200.0;
  double min_row_height = 2.0;
  /// The episode rule's gap in steps (report/episodes.hpp): findings are drawn and listed one
  /// per episode.
  std::int64_t episode_gap = default_episode_gap;
};

}  // namespace mldiag::report
