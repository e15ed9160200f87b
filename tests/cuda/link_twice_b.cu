// SPDX-License-Identifier: Apache-2.0
// The second of two translation units that include every .cuh header (see link_twice_a.cu).
#include "link_twice.cuh"

link_twice_result link_twice_run_b(const float* d_x, std::int64_t n, std::int64_t row_len) {
  return run_everything(d_x, n, row_len);
}
