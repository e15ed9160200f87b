// SPDX-License-Identifier: Apache-2.0
// mldiag::cuda brings the .cuh headers' include directory (kernels/ in the source tree,
// include/ when installed) and CUDA::cudart. device.cuh needs only the runtime API, so a host
// .cpp can include it: no CUDA language needed in this project.
#include <mldiag/cuda/device.cuh>

#include <cstdio>

int main() {
  const auto devices = mldiag::cuda::query_devices();
  std::printf("consumer_cuda: mldiag::cuda headers found; %s\n", devices.describe().c_str());
  return 0;
}
