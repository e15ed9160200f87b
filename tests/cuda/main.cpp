// SPDX-License-Identifier: Apache-2.0
// Runs the CUDA tests when a device is present; otherwise says why and exits 77 (CTest: Skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include "../support/doctest_run.hpp"

#include "mldiag/cuda/device.cuh"  // plain runtime API: compiles with the host compiler too

#include <cstdio>

int main(int argc, char** argv) {
  const auto devices = mldiag::cuda::query_devices();
  if (devices.count == 0) {
    std::printf("mldiag: CUDA tests skipped: %s\n", devices.describe().c_str());
    return 77;
  }
  std::printf("mldiag: CUDA tests on %s\n", devices.describe().c_str());
  return mldiag_test::run(argc, argv);
}
