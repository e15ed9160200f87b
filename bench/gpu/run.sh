#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU checks in one command (on the GPU machine: nvcc 13, Python with PyTorch, no Debian
# packages, no network). Builds with -arch=sm_90, runs the CUDA tests (and under
# compute-sanitizer memcheck and racecheck where it works), then the benchmark against
# PyTorch and the copy ceiling. Prints a table and one JSON line; writes logs to $OUT (or
# build-gpu/). doctest travels with the working tree: third_party/doctest/doctest.h
# (git-ignored; `scripts/vendor-doctest.sh` copies Debian's there).
# --modes N replaces the benchmark and the sanitizers with bench/gpu/modes.py in N processes
# and two of them under ncu (the 7B-shaped list's two speeds).
#   bench/gpu/run.sh [--quick | --modes N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
quick="" modes=0
[ "${1:-}" = "--quick" ] && quick="--quick"
[ "${1:-}" = "--modes" ] && modes=${2:?"mldiag: --modes needs a process count"}
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

# NCCL for the NCCL merge test: next to the CUDA toolkit, else PyTorch's pip package
# nvidia-nccl (include/ and lib/libnccl.so.2, no libnccl.so). Without it the CUDA tests are
# built without that test, and the log says so.
nccl_inc="" nccl_lib=""
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
for lib in "$cuda_home/lib64" "$cuda_home/lib"; do
  if [ -f "$cuda_home/include/nccl.h" ] && ls "$lib"/libnccl.so* > /dev/null 2>&1; then
    nccl_inc=$cuda_home/include nccl_lib=$lib
    break
  fi
done
if [ -z "$nccl_lib" ]; then
  # nvidia.nccl is a namespace package (no __init__.py, so no __file__): take its __path__.
  py_nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2> /dev/null || true)
  if [ -n "$py_nccl" ] && [ -f "$py_nccl/include/nccl.h" ] && ls "$py_nccl"/lib/libnccl.so* > /dev/null 2>&1; then
    nccl_inc=$py_nccl/include nccl_lib=$py_nccl/lib
  fi
fi
nccl_sources=() nccl_link=()
if [ -n "$nccl_lib" ]; then
  nccl_so=$nccl_lib/libnccl.so
  [ -e "$nccl_so" ] || nccl_so=$(ls "$nccl_lib"/libnccl.so.* | head -1)
  nccl_sources=(-I"$nccl_inc" tests/cuda/nccl_merge_test.cu)
  # -l:<file>: nvcc refuses a .so.2 path on its command line, and the wheel has no libnccl.so.
  nccl_link=(-L"$nccl_lib" -l:"$(basename "$nccl_so")" -Xlinker -rpath="$nccl_lib")
  nccl_note="mldiag: NCCL from $nccl_so"
else
  nccl_note="mldiag: NCCL not found (neither next to nvcc nor python3 -m nvidia.nccl): NCCL merge test skipped"
fi

flags=(-std=c++20 -O3 -arch="$arch" -Iinclude -Ikernels -I"$doctest_dir" -Xcompiler=-Wall,-Wextra --Werror all-warnings)
echo "=== build (nvcc $(nvcc --version | grep -o 'release [0-9.]*'), $arch) ==="
echo "$nccl_note"
# The three builds side by side (device time is what the GPU machine is short of).
nvcc "${flags[@]}" tests/cuda/main.cpp tests/cuda/device_test.cu tests/cuda/device_stats_test.cu \
    "${nccl_sources[@]}" "${nccl_link[@]}" -o build-gpu/mldiag_test_cuda &
tests_pid=$!
nvcc "${flags[@]}" -Xcompiler=-fPIC -shared bench/gpu/mldiag_bench_capi.cu -o build-gpu/libmldiag_bench.so &
lib_pid=$!
nvcc "${flags[@]}" examples/cuda_raw/main.cu -o build-gpu/mldiag_cuda_raw &
raw_pid=$!
wait "$tests_pid" && wait "$lib_pid" && wait "$raw_pid" || { echo "mldiag: a GPU build failed (above)" >&2; exit 1; }

echo "=== CUDA tests ==="
status=0
echo "$nccl_note" | tee "$out/tests.txt"
build-gpu/mldiag_test_cuda 2>&1 | tee -a "$out/tests.txt" || status=1
echo "=== examples/cuda_raw ==="
build-gpu/mldiag_cuda_raw 2>&1 | tee "$out/cuda_raw.txt" || status=1
if [ "$modes" -gt 0 ]; then
  echo "=== bench/gpu/modes.py, $modes processes ==="
  for _ in $(seq "$modes"); do
    python3 bench/gpu/modes.py --lib build-gpu/libmldiag_bench.so 2>&1 | tee -a "$out/modes.jsonl" || status=1
  done
  for i in 1 2; do
    echo "=== ncu, process $i (kernels: separate, carved, flat, separate2) ==="
    timeout 150 ncu --clock-control none -k regex:chunk_stats -c 4 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy \
        python3 bench/gpu/modes.py --lib build-gpu/libmldiag_bench.so --ncu > "$out/ncu-$i.txt" 2>&1 || status=1
    grep -E "chunk_stats|Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Mem Busy|Max Bandwidth" "$out/ncu-$i.txt" | head -60
  done
  exit $status
fi
echo "=== benchmark ==="
python3 bench/gpu/bench.py --lib build-gpu/libmldiag_bench.so $quick 2>&1 | tee "$out/bench.txt" || status=1
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer --tool $tool ==="
    timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/mldiag_test_cuda \
        --test-case="*chunk boundaries*,*clear errors*,*readback*,*merge in groups*,*entropy of logits*" 2>&1 | tail -5 | tee "$out/sanitizer-$tool.txt" || status=1
  done
else
  echo "mldiag: compute-sanitizer not found: skipped" | tee "$out/sanitizer.txt"
fi

exit $status
