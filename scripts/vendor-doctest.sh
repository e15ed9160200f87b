#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies doctest's single header into third_party/doctest/ (git-ignored), so that machines
# without Debian's doctest-dev (the GPU machine) can build the CUDA tests: carry third_party.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=/usr/include/doctest/doctest.h
[ -f "$src" ] || { echo "mldiag: $src not found; apt-get install doctest-dev" >&2; exit 1; }
mkdir -p third_party/doctest
cp "$src" third_party/doctest/doctest.h
echo "third_party/doctest/doctest.h ready"
