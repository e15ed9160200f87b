#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 40 in one command on a GPU machine (nvcc 13, Python with a CUDA PyTorch, no network):
# builds bench/gpu_train_bench.cpp against the device's own LibTorch (PyTorch's wheel ships its
# headers and libraries) with the CUDA path on, and bench/gpu/mldiag_bench_capi.cu for sm_90,
# then runs
#   1. the overhead benchmark at the gpu preset (the step without the monitor, with it, with
#      LibTorch's statistics, the statistics alone, the bytes-read ceiling, host syncs counted);
#   2. the Q3 planted faults at the gpu preset (healthy, input_starvation, slow_layer,
#      memory_growth);
#   3. the tiny preset on CUDA under compute-sanitizer memcheck, if time is left.
# Everything goes to $OUT (or build-gpu40/): env.txt, build.txt, timing.txt, q3.txt,
# sanitizer.txt, results.jsonl. The last lines printed are the tables' JSON lines.
# Budget: MLDIAG_BUDGET_S seconds in all (default 280), each stage cut to what is left.
#   bash bench/gpu/issue40.sh
#
# Why a compiler command line and not CMake's find_package(Torch): PyTorch's CMake config
# re-finds CUDA, cuDNN and NVTX and can fail to configure on a pip install; the compile line
# below needs only the wheel's include/ and lib/ (the CMake prefix is printed for reference).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
start=$SECONDS
budget=${MLDIAG_BUDGET_S:-280}
left() { echo $((budget - (SECONDS - start))); }
out=${OUT:-build-gpu40}
build="build-gpu40"
mkdir -p "$out" "$build"
arch=${MLDIAG_CUDA_ARCH:-sm_90}
status=0

# ---- The environment: PyTorch's LibTorch, its C++ ABI, the CUDA runtime it loaded ----------
torch_dir="" torch_version="" torch_cuda="" cxx11_abi="" cmake_prefix="" cudart=""
python3 - > "$build/torch.env" 2> "$out/env.txt" <<'EOF'
import os, shlex, torch
def put(k, v): print(k + "=" + shlex.quote(str(v)))
put("torch_dir", os.path.dirname(torch.__file__))
put("torch_version", torch.__version__)
put("torch_cuda", torch.version.cuda)
put("cxx11_abi", int(torch._C._GLIBCXX_USE_CXX11_ABI))
put("cmake_prefix", torch.utils.cmake_prefix_path)
cudart = ""
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")  # loads the CUDA runtime torch uses
    for line in open("/proc/self/maps"):
        if "libcudart.so" in line:
            cudart = line.split()[-1]
            break
put("cudart", cudart)
EOF
# shellcheck disable=SC1091
source "$build/torch.env" || { echo "mldiag: python3 could not import torch (see $out/env.txt)" >&2; exit 1; }
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
{
  echo "torch $torch_version (CUDA $torch_cuda, _GLIBCXX_USE_CXX11_ABI=$cxx11_abi) at $torch_dir"
  echo "torch CMake prefix (not used, see the script's header): $cmake_prefix"
  echo "CUDA runtime torch loaded: ${cudart:-none found}"
  echo "nvcc: $(nvcc --version | grep -o 'release [0-9.]*') at $cuda_home; host compiler: $(${CXX:-g++} --version | head -1)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2> /dev/null
} | tee -a "$out/env.txt"

# CUPTI for the sync count: next to nvcc (the toolkit's include/ and lib64/, or extras/CUPTI).
cupti_flags=() cupti_note="mldiag: CUPTI not found next to nvcc: host synchronizations are not counted (the probe still runs)"
for d in "$cuda_home" "$cuda_home/extras/CUPTI"; do
  if [ -f "$d/include/cupti.h" ] && ls "$d"/lib64/libcupti.so* > /dev/null 2>&1; then
    cupti_flags=(-DMLDIAG_BENCH_CUPTI=1 -I"$d/include" -L"$d/lib64" -lcupti -Xlinker -rpath="$d/lib64")
    cupti_note="mldiag: CUPTI from $d"
    break
  fi
done
echo "$cupti_note" | tee -a "$out/env.txt"

# The exact runtime torch uses: this program, the kernels' library and torch share one (the
# library is built with -cudart shared so that no second, static runtime is in the process).
# shellcheck disable=SC2054  # linker flags, not a list with commas
if [ -n "$cudart" ]; then
  cudart_link=("$cudart" -Wl,-rpath,"$(dirname "$cudart")")
else
  cudart_link=(-L"$cuda_home/lib64" -lcudart -Wl,-rpath,"$cuda_home/lib64")
fi

# ---- Build: three compiles side by side, one link -------------------------------------------
echo "=== build ($arch; $(nproc) cores) ==="
torch_lib=$torch_dir/lib
cxx=${CXX:-g++}
cxxflags=(-std=c++20 -O2 -DNDEBUG -Wall -Wextra -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" -DMLDIAG_COMPILED=1 -Iinclude
          -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" -I"$cuda_home/include")
(
  t0=$SECONDS
  nvcc -std=c++20 -O3 -arch="$arch" -Iinclude -Ikernels -Xcompiler=-Wall,-Wextra,-fPIC -shared -cudart shared \
      "${cupti_flags[@]}" bench/gpu/mldiag_bench_capi.cu -o "$build/libmldiag_bench40.so" > "$build/capi.log" 2>&1 &
  p1=$!
  $cxx "${cxxflags[@]}" -c src/compiled.cpp -o "$build/compiled.o" > "$build/compiled.log" 2>&1 &
  p2=$!
  $cxx "${cxxflags[@]}" -DMLDIAG_BENCH_CUDA=1 -c bench/gpu_train_bench.cpp -o "$build/gpu_train_bench.o" > "$build/bench.log" 2>&1 &
  p3=$!
  ok=0
  wait $p1 || { echo "mldiag: nvcc failed on bench/gpu/mldiag_bench_capi.cu"; ok=1; }
  wait $p2 || { echo "mldiag: src/compiled.cpp failed to compile"; ok=1; }
  wait $p3 || { echo "mldiag: bench/gpu_train_bench.cpp failed to compile"; ok=1; }
  cat "$build/capi.log" "$build/compiled.log" "$build/bench.log"
  if [ $ok = 0 ]; then
    $cxx "$build/gpu_train_bench.o" "$build/compiled.o" -o "$build/mldiag-bench-gpu-train" \
        "$build/libmldiag_bench40.so" -Wl,-rpath,"$PWD/$build" \
        -L"$torch_lib" -Wl,-rpath,"$torch_lib" -Wl,--no-as-needed -ltorch_cuda -ltorch -Wl,--as-needed \
        -ltorch_cpu -lc10_cuda -lc10 "${cudart_link[@]}" -lpthread || { echo "mldiag: link failed"; ok=1; }
  fi
  echo "build: $((SECONDS - t0)) s"
  exit $ok
) 2>&1 | tee "$out/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "mldiag: the build failed (above, and $out/build.txt)" >&2; exit 1; }
ldd "$build/mldiag-bench-gpu-train" | grep -E "cudart|cupti|torch_cuda|c10_cuda" | tee -a "$out/build.txt"
bin=$build/mldiag-bench-gpu-train

run() {  # run <seconds wanted> <file> <args...>
  local want=$1 file=$2
  shift 2
  local t=$(($(left) < want ? $(left) : want))
  if [ "$t" -lt 20 ]; then
    echo "mldiag: skipped ($(left) s of the budget left): $*" | tee "$out/$file"
    return 0
  fi
  timeout "$t" "$@" 2>&1 | tee "$out/$file"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "mldiag: stopped after $t s (the budget): $*" | tee -a "$out/$file"
  [ "$rc" = 0 ] || status=1
}

echo "=== 1. the monitor's share of a training step (gpu preset) ==="
run 110 timing.txt "$bin" --preset gpu --device cuda --fault-steps 0
echo "=== 2. Q3 planted faults (gpu preset) ==="
run 150 q3.txt "$bin" --preset gpu --device cuda --no-timing --fault all
echo "=== 3. compute-sanitizer memcheck, tiny preset on CUDA ==="
if command -v compute-sanitizer > /dev/null; then
  run 90 sanitizer.txt compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$bin" --preset cpu-check --device cuda --no-timing --fault-steps 30 --fault none
else
  echo "mldiag: compute-sanitizer not found: skipped" | tee "$out/sanitizer.txt"
fi

grep -h '^{"bench":"gpu_train"' "$out/timing.txt" "$out/q3.txt" "$out/sanitizer.txt" 2> /dev/null > "$out/results.jsonl"
echo "=== JSON lines ($((SECONDS - start)) s in all) ==="
cat "$out/results.jsonl"
exit $status
