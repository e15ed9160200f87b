#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches the UCI handwritten digits (1797 8x8 images, 10 classes) that Debian ships inside
# python3-sklearn, without installing the package or needing Python:
#   apt-get download python3-sklearn && dpkg-deb -x ... && gunzip digits.csv.gz
# into third_party/data/digits.csv (git-ignored). The examples fall back to a generated data
# set when the file is absent, and say so.
# From the same package it also copies three UCI tables for the zoo's `tabular` family into
# third_party/data/: breast_cancer.csv (569 x 30, 2 classes), wine_data.csv (178 x 13, 3
# classes) and iris.csv (150 x 4, 3 classes), sklearn's format (a first line "n_samples,
# n_features,class names...", then the features and the class per row). Without them the
# zoo skips those runs and says so.
# And for the zoo's round-4 `regression` family the UCI diabetes table, gunzipped:
# diabetes_data.csv (442 rows of 10 whitespace-separated raw features: sklearn's
# diabetes_data_raw.csv.gz) and diabetes_target.csv (442 targets: diabetes_target.csv.gz).
# And for the zoo's round-13 `forecaster` family three real series that Debian ships inside
# python3-statsmodels (its datasets, in the public domain), copied as they are:
# sunspots.csv (the yearly sunspot number, 1700-2008), elnino.csv (the monthly sea surface
# temperature of the Nino 1+2 region, 1950-2010, a year a row) and co2.csv (Mauna Loa's weekly
# CO2, 1958-2001, some weeks without a value).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=third_party/data
out=$dir/digits.csv
tables=(breast_cancer.csv wine_data.csv iris.csv diabetes_data.csv diabetes_target.csv)
series=(sunspots.csv elnino.csv co2.csv)
# The file each table is copied from, where its name in the package differs (only the raw
# features: older packages' diabetes_data.csv.gz held sklearn's pre-scaled ones).
source_of() {
  case "$1" in
    diabetes_data.csv) echo diabetes_data_raw.csv ;;
    *) echo "$1" ;;
  esac
}
need_digits=1
if [ -s "$out" ]; then
  echo "mldiag: $out already there"
  need_digits=0
fi
need_tables=()
for t in "${tables[@]}"; do
  if [ -s "$dir/$t" ]; then echo "mldiag: $dir/$t already there"; else need_tables+=("$t"); fi
done
need_series=()
for t in "${series[@]}"; do
  if [ -s "$dir/$t" ]; then echo "mldiag: $dir/$t already there"; else need_series+=("$t"); fi
done
if [ "$need_digits" = 0 ] && [ "${#need_tables[@]}" = 0 ] && [ "${#need_series[@]}" = 0 ]; then
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
mkdir -p "$dir"
# The series first: the sklearn part below exits early when its package cannot be had.
if [ "${#need_series[@]}" != 0 ]; then
  if (cd "$tmp" && apt-get download python3-statsmodels >/dev/null 2>&1); then
    dpkg-deb -x "$tmp"/python3-statsmodels_*.deb "$tmp/s"
    for t in "${need_series[@]}"; do
      src=$(find "$tmp/s" -path "*/statsmodels/datasets/*/$t" | head -1)
      if [ -z "$src" ]; then
        echo "mldiag: python3-statsmodels has no $t; the zoo's runs on it will be skipped" >&2
        continue
      fi
      cp "$src" "$dir/$t.tmp"
      mv "$dir/$t.tmp" "$dir/$t"
      echo "mldiag: wrote $dir/$t ($(($(wc -l < "$dir/$t") - 1)) rows)"
    done
  else
    echo "mldiag: apt-get download python3-statsmodels failed (no network or no package list);" \
         "the zoo's forecaster runs will be skipped" >&2
  fi
fi
if [ "$need_digits" = 0 ] && [ "${#need_tables[@]}" = 0 ]; then
  exit 0
fi
if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
  echo "mldiag: apt-get download python3-sklearn failed (no network or no package list);" \
       "the examples will use generated digits" >&2
  exit 0
fi
dpkg-deb -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
if [ "$need_digits" = 1 ]; then
  csv=$(find "$tmp/x" -name digits.csv.gz | head -1)
  if [ -z "$csv" ]; then
    echo "mldiag: python3-sklearn has no digits.csv.gz; the examples will use generated digits" >&2
  else
    gzip -dc "$csv" > "$out.tmp"
    mv "$out.tmp" "$out"
    echo "mldiag: wrote $out ($(wc -l < "$out") images)"
  fi
fi
for t in "${need_tables[@]}"; do
  # Plain .csv in the versions seen (1.2.1; the diabetes files .csv.gz); either is taken.
  name=$(source_of "$t")
  src=$(find "$tmp/x" -path '*/sklearn/datasets/data/*' \( -name "$name" -o -name "$name.gz" \) | head -1)
  if [ -z "$src" ]; then
    echo "mldiag: python3-sklearn has no $name; the zoo's runs on it will be skipped" >&2
    continue
  fi
  case "$src" in
    *.gz) gzip -dc "$src" > "$dir/$t.tmp" ;;
    *) cp "$src" "$dir/$t.tmp" ;;
  esac
  mv "$dir/$t.tmp" "$dir/$t"
  case "$t" in
    diabetes_*) echo "mldiag: wrote $dir/$t ($(wc -l < "$dir/$t") rows)" ;;
    *) echo "mldiag: wrote $dir/$t ($(head -1 "$dir/$t" | cut -d, -f1) rows)" ;;
  esac
done
