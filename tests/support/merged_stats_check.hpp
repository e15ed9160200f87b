// SPDX-License-Identifier: Apache-2.0
// The merge-across-ranks contract (issue 10), checked one way by every test of it (MPI, the
// NCCL algebra on the host, the NCCL kernels): counts and extrema bitwise, moments to the
// statistics' contract (1e-6, docs/stats.md): a rank's part is cut into other blocks than the
// whole, and formats of 32 bits or fewer are summed in float lanes (issue 18), so the merged
// moments agree with the whole's to the contract, no longer to 1e-12 (measured up to 7e-10).
// Extrema compare with ==, which for doubles is bitwise except that +0 == -0: which zero a
// min of {+0, -0} keeps depends on the order, in compute_stats as in any merge.
#pragma once

#include "mldiag/stats/entropy.hpp"
#include "mldiag/stats/tensor_stats.hpp"

#include <doctest/doctest.h>

#include <cmath>

namespace mldiag_test {

inline void check_merged(const mldiag::tensor_stats& got, const mldiag::tensor_stats& want, double tol = 1e-6) {
  CHECK(got.count == want.count);
  CHECK(got.nan == want.nan);
  CHECK(got.pos_inf == want.pos_inf);
  CHECK(got.neg_inf == want.neg_inf);
  CHECK(got.zeros == want.zeros);
  CHECK(got.min == want.min);
  CHECK(got.max == want.max);
  CHECK(got.max_abs == want.max_abs);
  CHECK(got.scale_exp == want.scale_exp);
  if (want.finite() == 0) {
    CHECK(got.mean_scaled == 0.0);
    CHECK(got.m2_scaled == 0.0);
    return;
  }
  // The mean relative to the spread too: a mean near 0 has no relative digits to keep.
  const double scale = std::fmax(std::fabs(want.mean()), want.stddev());
  CHECK_MESSAGE(std::fabs(got.mean() - want.mean()) <= tol * scale, got.mean() << " vs " << want.mean());
  CHECK_MESSAGE(std::fabs(got.stddev() - want.stddev()) <= tol * want.stddev(), got.stddev() << " vs " << want.stddev());
  CHECK_MESSAGE(std::fabs(got.l2_norm() - want.l2_norm()) <= tol * want.l2_norm(), got.l2_norm() << " vs " << want.l2_norm());
}

inline void check_merged(const mldiag::entropy_stats& got, const mldiag::entropy_stats& want) {
  CHECK(got.rows == want.rows);
  CHECK(got.invalid_rows == want.invalid_rows);
  // A row's entropy is computed alike on every rank and in the whole: extrema are exact.
  CHECK(got.min == want.min);
  CHECK(got.max == want.max);
  CHECK(got.normalized_min == want.normalized_min);
  CHECK(got.normalized_max == want.normalized_max);
  CHECK(std::fabs(got.sum - want.sum) <= 1e-12 * std::fabs(want.sum));
  CHECK(std::fabs(got.normalized_sum - want.normalized_sum) <= 1e-12 * std::fabs(want.normalized_sum));
}

}  // namespace mldiag_test
