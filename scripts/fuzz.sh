#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds every fuzz/fuzz_*.cpp with clang's libFuzzer (+ ASan, UBSan) and runs each for a
# bounded time on its seed corpus (fuzz/corpus/<name>/, copied: the seeds stay as committed).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 30 s, every target)
#
# Needs clang and libclang-rt-14-dev (Debian). A crash, leak or sanitizer report fails the
# script and leaves the reproducer in build-fuzz/<name>/crash-*.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-30}"
shift || true
out="$root/build-fuzz"
mkdir -p "$out"
cxx="${MLDIAG_FUZZ_CXX:-clang++}"
if ! command -v "$cxx" > /dev/null; then
  echo "mldiag: fuzzing needs clang++ (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
# Built one after another (each is a single clang call), then run two at a time: the runs are
# time-bounded and single-threaded, so two cores halve CI's wall time on them.
for name in "${targets[@]}"; do
  src="$root/fuzz/fuzz_$name.cpp"
  bin="$out/fuzz_$name"
  echo "== fuzz_$name: building"
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/include" -I"$root/tools" "$src" -o "$bin" $(pkg-config --libs zlib 2>/dev/null || echo -lz) \
    -DMLDIAG_CLI_HAS_ZLIB=1 -DFMT_HEADER_ONLY=1
done
run_one() {
  local name="$1" bin="$out/fuzz_$1" work="$out/$1"
  rm -rf "$work" && mkdir -p "$work/corpus"
  if [ -d "$root/fuzz/corpus/$name" ]; then cp -r "$root/fuzz/corpus/$name/." "$work/corpus/"; fi
  (cd "$work" && "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 corpus \
     > "$work/log.txt" 2>&1) || { tail -40 "$work/log.txt"; echo "mldiag: fuzz_$name failed; reproducer in $work"; return 1; }
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)" "$work/log.txt" | sed "s/^/   fuzz_$name /" || true
  echo "== fuzz_$name: ok (${seconds} s)"
}
failed=0
i=0
while [ $i -lt ${#targets[@]} ]; do
  pids=()
  for name in "${targets[@]:$i:2}"; do run_one "$name" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  i=$((i + 2))
done
exit $failed
