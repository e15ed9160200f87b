// SPDX-License-Identifier: Apache-2.0
// The other side: reads the values maker.cpp built (odr/check.cmake).
#include "mldiag/stats/tensor_stats.hpp"
#include "mldiag/vocab/finding.hpp"

double read_elsewhere(const mldiag::tensor_stats& s, const mldiag::finding& f) {
  return static_cast<double>(s.count) + static_cast<double>(f.last_step);
}
