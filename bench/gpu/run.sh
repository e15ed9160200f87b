#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU checks in one command (on the GPU machine: nvcc 13, Python with PyTorch, no Debian
# packages, no network). Builds with -arch=sm_90, runs the CUDA tests (and under
# compute-sanitizer memcheck and racecheck where it works), then the benchmark against
# PyTorch and the copy ceiling. Prints a table and one JSON line; writes logs to $OUT (or
# build-gpu/). doctest travels with the working tree: third_party/doctest/doctest.h
# (git-ignored; `scripts/vendor-doctest.sh` copies Debian's there).
#   bench/gpu/run.sh [--quick]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
quick=""
[ "${1:-}" = "--quick" ] && quick="--quick"
out=${OUT:-build-gpu}
mkdir -p "$out" build-gpu
arch=${MLDIAG_CUDA_ARCH:-sm_90}

doctest_dir=""
for d in third_party /usr/include; do
  [ -f "$d/doctest/doctest.h" ] && doctest_dir=$d && break
done
if [ -z "$doctest_dir" ]; then
  echo "mldiag: doctest.h not found; run scripts/vendor-doctest.sh on a machine that has it and carry third_party/" >&2
  exit 1
fi

flags=(-std=c++20 -O3 -arch="$arch" -Iinclude -Ikernels -I"$doctest_dir" -Xcompiler=-Wall,-Wextra --Werror all-warnings)
echo "=== build (nvcc $(nvcc --version | grep -o 'release [0-9.]*'), $arch) ==="
nvcc "${flags[@]}" tests/cuda/main.cpp tests/cuda/device_test.cu tests/cuda/device_stats_test.cu -o build-gpu/mldiag_test_cuda
nvcc "${flags[@]}" -Xcompiler=-fPIC -shared bench/gpu/mldiag_bench_capi.cu -o build-gpu/libmldiag_bench.so
nvcc "${flags[@]}" examples/cuda_raw/main.cu -o build-gpu/mldiag_cuda_raw

echo "=== CUDA tests ==="
status=0
build-gpu/mldiag_test_cuda 2>&1 | tee "$out/tests.txt" || status=1
echo "=== examples/cuda_raw ==="
build-gpu/mldiag_cuda_raw 2>&1 | tee "$out/cuda_raw.txt" || status=1
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer --tool $tool ==="
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/mldiag_test_cuda \
        --test-case="*chunk boundaries*,*clear errors*,*readback*" 2>&1 | tail -5 | tee "$out/sanitizer-$tool.txt" || status=1
  done
else
  echo "mldiag: compute-sanitizer not found: skipped" | tee "$out/sanitizer.txt"
fi

echo "=== benchmark ==="
python3 bench/gpu/bench.py --lib build-gpu/libmldiag_bench.so $quick 2>&1 | tee "$out/bench.txt" || status=1
exit $status
