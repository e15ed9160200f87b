#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`mldiag stats --json` against numpy: runs the tool on .npy/.npz files written by numpy and
compares every tensor's numbers with numpy's own, computed in float64 (population std, over
the finite elements; counts over all). Exits 77 when numpy is absent.

usage: check_stats.py MLDIAG FILE...
"""
import json
import math
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is absent (apt-get install python3-numpy)")
    sys.exit(77)


def arrays(path):
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    return {None: np.load(path)}


def close(a, b, scale, rel, of_scale):
    """Equal within `rel` relative, or `of_scale` of the data's largest |x|: a mean or std of
    values that cancel (+-3e38 in one tensor) is ill-conditioned, and its rounding error is a
    fraction of max|x|, not of the result. float64: 1e-9 and 1e-12; the narrower formats (summed
    in float lanes since issue 18): the 1e-6 contract of docs/stats.md for both. None is the
    --json form of a non-finite result."""
    if a is None or b is None or math.isinf(b):
        return (a is None and b is None) or (a is None and math.isinf(b))
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b)) + of_scale * scale


def main():
    tool, files = sys.argv[1], sys.argv[2:]
    doc = json.loads(subprocess.run([tool, "stats", "--json", *files], capture_output=True, text=True, check=False).stdout)
    failures, checked = [], 0
    for entry, path in zip(doc["files"], files):
        expected = arrays(path)
        by_name = {t["name"]: t for t in entry["tensors"]}
        for key, a in expected.items():
            name = key if key is not None else next(iter(by_name))
            t = by_name[name]
            x = a.astype(np.float64).ravel()
            finite = x[np.isfinite(x)]
            want = {"count": x.size, "nan": int(np.isnan(x).sum()), "pos_inf": int(np.isposinf(x).sum()),
                    "neg_inf": int(np.isneginf(x).sum()), "zeros": int((x == 0).sum())}
            for k, v in want.items():
                if t[k] != v:
                    failures.append(f"{path}:{name}: {k} {t[k]} != numpy {v}")
            if finite.size:
                exact = {"min": finite.min(), "max": finite.max(), "max_abs": np.abs(finite).max()}
                for k, v in exact.items():
                    if t[k] != float(v):
                        failures.append(f"{path}:{name}: {k} {t[k]} != numpy {v}")
                m = float(np.abs(finite).max())
                # The L2 norm scaled by max|x|, so that neither denormals nor values near the
                # double limit under- or overflow in the reference (numpy's own sum of squares does).
                with np.errstate(over="ignore"):
                    l2 = m * math.sqrt(float(np.sum((finite / m) ** 2))) if m > 0 else 0.0
                std = m * float((finite / m).std()) if m > 0 else 0.0  # numpy's own overflows near 1e308
                moments = {"mean": finite.mean(), "std": std, "l2": l2}
                for k, v in moments.items():
                    wide = a.dtype == np.float64
                    if not close(t[k], float(v), m, 1e-9 if wide else 1e-6, 1e-12 if wide else 1e-6):
                        failures.append(f"{path}:{name}: {k} {t[k]} != numpy {v}")
            checked += 1
    for f in failures:
        print("FAIL:", f)
    print(f"check_stats: {checked} tensors compared with numpy, {len(failures)} mismatches")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
