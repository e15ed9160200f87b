#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches the UCI handwritten digits (1797 8x8 images, 10 classes) that Debian ships inside
# python3-sklearn, without installing the package or needing Python:
#   apt-get download python3-sklearn && dpkg-deb -x ... && gunzip digits.csv.gz
# into third_party/data/digits.csv (git-ignored). The examples fall back to a generated data
# set when the file is absent, and say so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=third_party/data/digits.csv
if [ -s "$out" ]; then
  echo "mldiag: $out already there"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "mldiag: no apt-get/dpkg-deb here; the examples will use generated digits" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes to the current directory; as root it warns that _apt cannot read
# it (harmless), so the directory is made world-writable.
chmod 777 "$tmp"
if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
  echo "mldiag: apt-get download python3-sklearn failed (no network or no package list);" \
       "the examples will use generated digits" >&2
  exit 0
fi
dpkg-deb -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
csv=$(find "$tmp/x" -name digits.csv.gz | head -1)
if [ -z "$csv" ]; then
  echo "mldiag: python3-sklearn has no digits.csv.gz; the examples will use generated digits" >&2
  exit 0
fi
mkdir -p "$(dirname "$out")"
gzip -dc "$csv" > "$out.tmp"
mv "$out.tmp" "$out"
echo "mldiag: wrote $out ($(wc -l < "$out") images)"
