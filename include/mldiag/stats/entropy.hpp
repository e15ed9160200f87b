// SPDX-License-Identifier: Apache-2.0
/// Row entropy of probabilities or logits (attention, router, output distributions).
#pragma once

#include "mldiag/core/concepts.hpp"
#include "mldiag/core/config.hpp"
#include "mldiag/core/error.hpp"
#include "mldiag/core/tensor_ref.hpp"
#include "mldiag/stats/block_stats.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/guided_units.hpp"
#include "mldiag/stats/host_isa.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <limits>
#include <new>  // placement new, std::launder
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>  // std::index_sequence

// The pieces, after everything they include, so that a translation unit defines everything in
// the order of the single header this was (as in block_stats.hpp): entropy_stats (the summary
// and the sampling policy), entropy_rows (the exact row kernel), logit_rows_float and
// logit_rows_columns (the float-lane kernels for logits). This file adds their dispatch on
// ISA, the cut into chunks, and the public entry points.
#include "mldiag/stats/entropy_rows.hpp"
#include "mldiag/stats/entropy_stats.hpp"
#include "mldiag/stats/logit_rows_columns.hpp"
#include "mldiag/stats/logit_rows_float.hpp"

namespace mldiag::inline MLDIAG_ABI {

class host_engine;  // stats/host_engine.hpp: included by whoever has one

namespace detail {

#ifdef MLDIAG_HOST_VECTORS
// Short rows in columns where the compiler has the shuffles, the rest row by row.
template <class F, std::size_t L>
[[gnu::always_inline]] inline void logit_rows_any(const typename F::element* x, std::uint64_t rows,
                                                  std::uint64_t row_len, std::uint64_t pitch,
                                                  entropy_stats& out) noexcept {
#ifdef MLDIAG_COLUMN_ENTROPY
  // Not for 4 lanes (SSE2): 82 against 73 ns a 32-logit row there, where AVX2 went from 48
  // to 42 and AVX-512 from 64 to 24 (one thread of a Xeon, in L1; docs/benchmarks.md).
  if (L >= 8 && row_len <= column_kernel_max_len) {
    logit_rows_columns<F, L>(x, rows, row_len, pitch, out);
    return;
  }
#endif
  logit_rows_float<F, L>(x, rows, row_len, pitch, out);
}

template <class F>
void logit_rows_portable(const typename F::element* x, std::uint64_t rows, std::uint64_t row_len,
                         std::uint64_t pitch, entropy_stats& out) noexcept {
  logit_rows_any<F, lanes>(x, rows, row_len, pitch, out);
}
#ifdef MLDIAG_HOST_DISPATCH
template <class F>
__attribute__((target("avx2,fma"))) void logit_rows_avx2(const typename F::element* x, std::uint64_t rows,
                                                         std::uint64_t row_len, std::uint64_t pitch,
                                                         entropy_stats& out) noexcept {
  logit_rows_any<F, 8>(x, rows, row_len, pitch, out);
}
template <class F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void logit_rows_avx512(
    const typename F::element* x, std::uint64_t rows, std::uint64_t row_len, std::uint64_t pitch,
    entropy_stats& out) noexcept {
  logit_rows_any<F, 16>(x, rows, row_len, pitch, out);
}
#endif

// The float-lane path where it applies (contiguous fp32, bf16 or fp16 logits); false elsewhere.
template <class F>
bool logit_rows_fast(const typename F::element* x, std::uint64_t rows, std::uint64_t row_len, std::uint64_t pitch,
                     entropy_stats& out) noexcept {
  if constexpr (std::is_same_v<F, fmt_f32> || std::is_same_v<F, fmt_bf16> || std::is_same_v<F, fmt_f16>) {
#ifdef MLDIAG_HOST_DISPATCH
    switch (active_host_isa()) {
      case host_isa::avx512_bf16:  // the logits have no dot-product kernel of their own
      case host_isa::avx512: logit_rows_avx512<F>(x, rows, row_len, pitch, out); return true;
      case host_isa::avx2: logit_rows_avx2<F>(x, rows, row_len, pitch, out); return true;
      case host_isa::portable: break;
    }
#endif
    logit_rows_portable<F>(x, rows, row_len, pitch, out);
    return true;
  } else {
    (void)x, (void)rows, (void)row_len, (void)pitch, (void)out;
    return false;
  }
}
#endif  // MLDIAG_HOST_VECTORS

// The selected rows (first_row, first_row + row_stride, ...) are cut into at most
// `entropy_chunks` chunks by their count alone; each chunk's rows are summed in order and the
// chunks merged in order, so the result is the same on the calling thread and on any number
// of an engine's threads (the partials live on the stack: 256 x 64 bytes, no allocation).
// A chunk holds at least `entropy_chunk_rows` rows and starts at a multiple of 16, so that
// the column kernel takes whole groups of rows (chunks of 4 rows, as 1024 rows once made,
// left it nothing).
inline constexpr std::uint64_t entropy_chunks = 256;
inline constexpr std::uint64_t entropy_chunk_rows = 64;

// The first selected row of chunk k of `chunks` over `selected` rows.
inline std::uint64_t entropy_chunk_begin(std::uint64_t selected, std::uint64_t chunks, std::uint64_t k) noexcept {
  if (k >= chunks) return selected;
  return (selected / chunks * k + selected % chunks * k / chunks) / 16 * 16;  // selected * k / chunks, no overflow
}

// The entropy of the selected rows [j0, j1) of a tensor of format F.
template <class F>
void entropy_chunk(const tensor_ref& t, entropy_input kind, std::uint64_t row_len, std::uint64_t first_row,
                   std::uint64_t row_stride, std::uint64_t j0, std::uint64_t j1, entropy_stats& out) noexcept {
  using element = typename F::element;
  const auto* base = static_cast<const element*>(t.data());
#ifdef MLDIAG_HOST_VECTORS
  // Contiguous logits: every selected row in one call, the sampled ones `row_stride` rows
  // apart (one call per sampled row cost a dispatch and a log(row_len) each, so sampling
  // every 4th row of 32 logits saved no time, issue 18).
  if (kind == entropy_input::logits && t.is_contiguous() &&
      logit_rows_fast<F>(base + (first_row + j0 * row_stride) * row_len, j1 - j0, row_len,
                         row_stride * row_len, out)) {
    return;
  }
#endif
  // Consecutive rows in one call when every row is read, one call per sampled row otherwise.
  const std::uint64_t per_call = row_stride == 1 ? j1 - j0 : 1;
  for (std::uint64_t j = j0; j < j1; j += per_call) {
    const std::uint64_t r = first_row + j * row_stride;
    if (t.is_contiguous()) {
      const element* row = base + r * row_len;
      std::uint64_t i = 0;
      entropy_rows_typed<F>(kind, per_call, row_len, [&] { return row[i++]; }, out);
    } else {
      strided_cursor cursor(t.layout(), r * row_len);
      entropy_rows_typed<F>(kind, per_call, row_len, [&] {
        const element e = base[cursor.offset()];
        cursor.next();
        return e;
      }, out);
    }
  }
}

// `run(job)` runs job(worker) on every worker of an engine (host_engine::run), or on the
// calling thread alone; `threads` says how many that is.
template <class F, class Runner>
entropy_stats entropy_typed(const tensor_ref& t, entropy_input kind, std::uint64_t row_len, std::uint64_t first_row,
                            std::uint64_t row_stride, Runner&& run, unsigned threads) {
  const std::uint64_t rows = t.numel() / row_len;
  const std::uint64_t selected = first_row < rows ? (rows - first_row + row_stride - 1) / row_stride : 0;
  const std::uint64_t chunks = std::clamp<std::uint64_t>(selected / entropy_chunk_rows, selected == 0 ? 0 : 1, entropy_chunks);
  // Storage for the partials, not initialized: a call with 4 chunks should not construct 256
  // of them (16 KiB of stores); each chunk's job constructs its own.
  struct slot {
    alignas(entropy_stats) unsigned char bytes[sizeof(entropy_stats)];
  };
  static_assert(std::is_trivially_destructible_v<entropy_stats>);
  std::array<slot, entropy_chunks> parts;
  guided_units units(static_cast<std::size_t>(chunks), threads);
  auto job = [&](unsigned) {
    std::size_t begin = 0, end = 0;
    while (units.take(begin, end)) {
      for (std::uint64_t k = begin; k < end; ++k) {
        auto* part = ::new (static_cast<void*>(parts[k].bytes)) entropy_stats{};
        entropy_chunk<F>(t, kind, row_len, first_row, row_stride, entropy_chunk_begin(selected, chunks, k),
                         entropy_chunk_begin(selected, chunks, k + 1), *part);
      }
    }
  };
  run(job);
  entropy_stats out;
  for (std::uint64_t k = 0; k < chunks; ++k) out.merge(*std::launder(reinterpret_cast<entropy_stats*>(parts[k].bytes)));
  return out;
}

template <class Runner>
entropy_stats entropy_dispatch(const tensor_ref& t, std::int64_t row_len, entropy_input kind, std::string_view who,
                               const entropy_sampling& sampling, std::int64_t step, Runner&& run,
                               unsigned threads) {
  require_host(t, who);
  if (sampling.row_stride == 0 || sampling.every == 0) {
    fail(who, t.name(), "entropy_sampling with row_stride " + std::to_string(sampling.row_stride) +
                            " and every " + std::to_string(sampling.every) +
                            ": both must be at least 1 (1 and 1 read every row on every step)");
  }
  if (row_len <= 0) {
    fail(who, t.name(), "row length " + std::to_string(row_len) + " is not positive");
  }
  const auto len = static_cast<std::uint64_t>(row_len);
  if (t.numel() % len != 0) {
    fail(who, t.name(), std::to_string(t.numel()) + " elements do not divide into rows of " +
                            std::to_string(row_len) + "; pass the length of the last dimension");
  }
  return with_format(t.dtype(), [&](auto tag) {
    return entropy_typed<typename decltype(tag)::type>(t, kind, len, sampling.first_row(step),
                                                       sampling.row_stride, run, threads);
  });
}

// On the calling thread.
inline entropy_stats entropy_dispatch(const tensor_ref& t, std::int64_t row_len, entropy_input kind,
                                      std::string_view who, const entropy_sampling& sampling = {},
                                      std::int64_t step = 0) {
  return entropy_dispatch(t, row_len, kind, who, sampling, step, [](auto& job) { job(0u); }, 1u);
}

}  // namespace detail

/// Entropy of each row of probabilities (rows of `row_len` consecutive logical elements):
/// -sum p log p of the row normalized to sum 1, with 0 log 0 = 0.
///
/// **Example**
/// ```cpp
/// std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f, 1.0f, 0.0f, 0.0f, 0.0f};
/// auto e = mldiag::entropy_from_probs(p, 4);  // rows 2: log 4 and 0; normalized 1 and 0
/// ```
[[nodiscard]] inline entropy_stats entropy_from_probs(const tensor_ref& t, std::int64_t row_len) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::probabilities,
                                  "entropy_from_probs");
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_probs(const V& x, std::int64_t row_len) {
  return entropy_from_probs(as_tensor_ref({}, x), row_len);
}

/// Entropy of softmax of each row of logits, in one pass with an online log-sum-exp (no
/// probabilities are formed; stable for logits like 10000..10003). -inf entries are masked.
///
/// **Example**
/// ```cpp
/// std::vector<double> z = {-1, 0, 1};
/// auto e = mldiag::entropy_from_logits(z, 3);  // e.mean() == 0.832396 nats
/// ```
[[nodiscard]] inline entropy_stats entropy_from_logits(const tensor_ref& t, std::int64_t row_len) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::logits,
                                  "entropy_from_logits");
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_logits(const V& x, std::int64_t row_len) {
  return entropy_from_logits(as_tensor_ref({}, x), row_len);
}

/// The same over the rows that `sampling` selects at step `step` (every `row_stride`-th row,
/// rotating with the step). It does not look at `sampling.every`: ask `sampling.due(step)`
/// before calling, and record nothing on the steps in between (`monitor::observe_logits`
/// does both). Throws `mldiag::error` for a stride or period of 0.
[[nodiscard]] inline entropy_stats entropy_from_logits(const tensor_ref& t, std::int64_t row_len,
                                                       const entropy_sampling& sampling, std::int64_t step) {
  return detail::entropy_dispatch(t, row_len, detail::entropy_input::logits, "entropy_from_logits",
                                  sampling, step);
}
template <tensor V>
[[nodiscard]] entropy_stats entropy_from_logits(const V& x, std::int64_t row_len, const entropy_sampling& sampling,
                                                std::int64_t step) {
  return entropy_from_logits(as_tensor_ref({}, x), row_len, sampling, step);
}

/// The same on `engine`'s threads (`<mldiag/stats/host_engine.hpp>`): rows are cut into at
/// most 256 chunks by their count alone and merged in order, so the result is bit-identical
/// to the calling thread's and for any number of threads. No allocation.
///
/// **Example**: `auto e = mldiag::entropy_from_logits(engine, scores, context);`
template <class Engine, tensor V>
  requires std::same_as<Engine, host_engine>
[[nodiscard]] entropy_stats entropy_from_logits(Engine& engine, const V& x, std::int64_t row_len,
                                                const entropy_sampling& sampling = {}, std::int64_t step = 0) {
  return detail::entropy_dispatch(as_tensor_ref({}, x), row_len, detail::entropy_input::logits,
                                  "entropy_from_logits", sampling, step, [&](auto& job) { engine.run(job); },
                                  engine.threads());
}
/// Entropy of probability rows on `engine`'s threads, as `entropy_from_logits(engine, ...)`.
template <class Engine, tensor V>
  requires std::same_as<Engine, host_engine>
[[nodiscard]] entropy_stats entropy_from_probs(Engine& engine, const V& x, std::int64_t row_len) {
  return detail::entropy_dispatch(as_tensor_ref({}, x), row_len, detail::entropy_input::probabilities,
                                  "entropy_from_probs", {}, 0, [&](auto& job) { engine.run(job); },
                                  engine.threads());
}

}  // namespace mldiag
