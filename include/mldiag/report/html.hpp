// SPDX-License-Identifier: Apache-2.0
/// The self-contained HTML report of a run: loss curve, per-layer gradient heatmap, findings
/// and the diagnosis log in one file (inline SVG and CSS, no script) that opens from disk.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"
#include "mldiag/report/detail/html_page.hpp"
#include "mldiag/report/html_options.hpp"
#include "mldiag/report/run_log.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>  // std::strerror
#include <filesystem>
#include <fstream>
#include <string>

namespace mldiag::inline MLDIAG_ABI::report {

/// The run as one self-contained HTML page: header with counts, the loss curve with finding
/// markers, the per-tensor gradient-norm heatmap, the findings grouped by question and the
/// diagnosis log by phase. Throws mldiag::error on options it cannot lay out.
///
/// **Example**
/// ```cpp
/// mldiag::report::run_log run;
/// run.add_step(0);
/// run.set("loss", 2.3);
/// const std::string page = mldiag::report::render_html(run);
/// ```
[[nodiscard]] inline std::string render_html(const run_log& run, const html_options& options = {}) {
  return detail::html::page(run, options).render();
}

/// Writes `render_html(run, options)` to `file`; throws mldiag::error naming the file when it
/// cannot be written.
///
/// **Example**
/// ```cpp
/// mldiag::report::write_html(run, "report.html");
/// ```
inline void write_html(const run_log& run, const std::filesystem::path& file,
                       const html_options& options = {}) {
  const std::string page = render_html(run, options);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out)
    throw error(fmt::format("html report: cannot open '{}' for writing: {}", file.string(),
                            std::strerror(errno)));
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
  out.close();
  if (!out)
    throw error(fmt::format("html report: writing '{}' failed (disk full?)", file.string()));
}

}  // namespace mldiag::report
