#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What including the monitor adds to a translation unit's compile time: the same training loop
# (loop.cpp) compiled without and with the monitor, header-only and with the registry compiled
# once (mldiag::compiled), in a LibTorch program and in a plain one. Each variant is compiled
# REPEAT times; the table shows the minimum CPU time (user + system: less sensitive to a loaded
# machine than wall time) and the minimum wall time, then one JSON line.
#   bench/compile_time/run.sh [REPEAT]     (CXX, CXXFLAGS from the environment; default g++ -O3)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repeat="${1:-3}"
cxx="${CXX:-g++}"
flags="${CXXFLAGS:--O3 -DNDEBUG} -std=c++20 -I$root/include"
torch_inc="/usr/include/torch/csrc/api/include"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# measure <name> <extra flags...>: prints "cpu wall" minima over $repeat compiles.
measure() {
  local src="$1"; shift
  local best_cpu="" best_wall=""
  for _ in $(seq "$repeat"); do
    local t
    t=$( { /usr/bin/time -f "%U %S %e" "$cxx" $flags "$@" -c "$src" -o "$out/o.o" 2>&1 >/dev/null; } | tail -1)
    local cpu wall
    cpu=$(awk '{printf "%.2f", $1 + $2}' <<<"$t")
    wall=$(awk '{printf "%.2f", $3}' <<<"$t")
    if [[ -z "$best_cpu" ]] || awk "BEGIN{exit !($cpu < $best_cpu)}"; then best_cpu=$cpu; fi
    if [[ -z "$best_wall" ]] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
  done
  echo "$best_cpu $best_wall"
}

declare -A cpu wall
run() {  # run <key> <src> <flags...>
  local key="$1"; shift
  read -r c w < <(measure "$@")
  cpu[$key]=$c; wall[$key]=$w
  printf "  %-34s cpu %6.2f s   wall %6.2f s\n" "$key" "$c" "$w" >&2
}

echo "mldiag compile-time benchmark: $cxx $flags, minimum of $repeat" >&2
run plain "$here/loop.cpp"
run plain+monitor "$here/loop.cpp" -DMLDIAG_BENCH_MONITOR=1
run plain+monitor_compiled "$here/loop.cpp" -DMLDIAG_BENCH_MONITOR=1 -DMLDIAG_COMPILED=1
run registry_once "$root/src/compiled.cpp" -DMLDIAG_COMPILED=1
has_torch=0
if [[ -f "$torch_inc/torch/torch.h" ]]; then
  has_torch=1
  tflags=(-isystem "$torch_inc" -DMLDIAG_BENCH_TORCH=1 -D_GLIBCXX_USE_CXX11_ABI=1)
  run torch "$here/loop.cpp" "${tflags[@]}"
  run torch+monitor "$here/loop.cpp" "${tflags[@]}" -DMLDIAG_BENCH_MONITOR=1
  run torch+monitor_compiled "$here/loop.cpp" "${tflags[@]}" -DMLDIAG_BENCH_MONITOR=1 -DMLDIAG_COMPILED=1
fi

add() { awk "BEGIN{printf \"%.2f\", ${cpu[$1]} - ${cpu[$2]}}"; }
echo >&2
echo "| translation unit | CPU s | wall s | added by the monitor (CPU s) |" >&2
echo "|---|---:|---:|---:|" >&2
for k in plain plain+monitor plain+monitor_compiled registry_once torch torch+monitor torch+monitor_compiled; do
  [[ -n "${cpu[$k]:-}" ]] || continue
  base=plain; [[ $k == torch* ]] && base=torch
  added="-"; [[ $k == *monitor* ]] && added=$(add "$k" "$base")
  echo "| $k | ${cpu[$k]} | ${wall[$k]} | $added |" >&2
done
json="{\"bench\":\"compile_time\",\"compiler\":\"$cxx\",\"flags\":\"${CXXFLAGS:--O3 -DNDEBUG}\",\"repeat\":$repeat"
json+=",\"plain_s\":${cpu[plain]},\"plain_monitor_added_s\":$(add plain+monitor plain),\"plain_monitor_compiled_added_s\":$(add plain+monitor_compiled plain),\"registry_once_s\":${cpu[registry_once]}"
if [[ $has_torch == 1 ]]; then
  json+=",\"torch_s\":${cpu[torch]},\"torch_monitor_added_s\":$(add torch+monitor torch),\"torch_monitor_compiled_added_s\":$(add torch+monitor_compiled torch)"
fi
echo "$json}"
