#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's two commands.
#   scripts/quickstart.sh demo   install what is missing, build, run the flagship demo
#   scripts/quickstart.sh test   install what is missing, build and run every test:
#                                the plain build, then the ASan+UBSan build
# Works as root and as a user with sudo on Debian/Ubuntu. MLDIAG_NO_INSTALL=1 skips apt-get.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { echo "usage: scripts/quickstart.sh demo|test" >&2; exit 2; }
[ $# -eq 1 ] || usage
mode=$1
case "$mode" in demo|test) ;; *) usage ;; esac

# Debian/Ubuntu package names. The CUDA Toolkit is not installed here (docs/building.md).
# LibTorch (about 650 MB) for the flagship demo's transformer and the mldiag::torch tests, with
# OpenBLAS: Debian's LibTorch otherwise runs on the reference BLAS, 5x slower.
# zlib for compressed .npz members in the mldiag tool. dlib for the mldiag::dlib adapter and
# its example (dlib's dnn_trainer on Fashion-MNIST, examples/dlib_fashion).
packages=(cmake g++ ninja-build libfmt-dev doctest-dev libeigen3-dev libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libtorch-dev libopenblas0-pthread zlib1g-dev libdlib-dev)
# The tests also need: Chromium (the HTML report is checked in a real headless browser),
# Python 3 with numpy (an independent writer of .npy/.npz test files and reader of JSON Lines),
# clang with its libFuzzer runtime (the parsers are fuzzed for a bounded time), Fashion-MNIST
# (the zoo of healthy training programs, eval/zoo, and examples/dlib_fashion read it from
# /usr/share/datasets).
if [ "$mode" = test ]; then
  packages+=(chromium python3 python3-numpy clang libclang-rt-14-dev dataset-fashion-mnist)
fi

install_missing() {
  if [ "${MLDIAG_NO_INSTALL:-0}" = 1 ]; then
    echo "mldiag: MLDIAG_NO_INSTALL=1: not installing packages"
    return
  fi
  if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    echo "mldiag: no apt-get here; install by hand: a C++20 compiler, CMake >= 3.25, Ninja," \
         "{fmt}, doctest, Eigen 3.4, MPI (see docs/building.md)" >&2
    return
  fi
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "mldiag: prerequisites already installed"
    return
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      echo "mldiag: missing packages: ${missing[*]}; run this as root or install sudo" >&2
      exit 1
    fi
  fi
  echo "mldiag: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

jobs=$(nproc 2>/dev/null || echo 2)
install_missing
# The real UCI digits for the MLP example (a generated stand-in is used where this fails).
scripts/fetch-digits.sh

if [ "$mode" = demo ]; then
  cmake --preset release
  cmake --build --preset release --target mldiag_demo -j "$jobs"
  exec ./build/examples/flagship/mldiag_demo --out build/demo
fi

status=0
for preset in release asan; do
  echo "=== mldiag: $preset build ==="
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" || status=1
done
# The parsers of files users hand to the mldiag tool, fuzzed with libFuzzer (+ASan, UBSan) for
# a bounded time each (MLDIAG_FUZZ_SECONDS, default 30).
echo "=== mldiag: fuzzers ==="
scripts/fuzz.sh "${MLDIAG_FUZZ_SECONDS:-30}" || status=1
exit $status
