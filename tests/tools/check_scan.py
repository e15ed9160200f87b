#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the --json document of `mldiag scan` against expected findings.

usage: check_scan.py SCAN.json --expect 'RUN|SYMPTOM|FIRST_MIN|FIRST_MAX[|SEVERITY]' ...

RUN is a run's title, or the part after ": " (a group of --group-by); the run must have a finding with SYMPTOM at warning or
above whose first_step lies in [FIRST_MIN, FIRST_MAX] (and, when given, that severity).
Python 3 standard library only.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scan_json")
    p.add_argument("--expect", action="append", default=[])
    p.add_argument("--exit-code", type=int, help="the document's exit_code must be this")
    a = p.parse_args()
    with open(a.scan_json) as f:
        doc = json.load(f)  # strict: the --json document must be plain JSON
    failures = []
    if a.exit_code is not None and doc.get("exit_code") != a.exit_code:
        failures.append(f"exit_code {doc.get('exit_code')}, expected {a.exit_code}")
    for e in a.expect:
        parts = e.split("|")
        run, symptom, lo, hi = parts[0], parts[1], int(parts[2]), int(parts[3])
        severity = parts[4] if len(parts) > 4 else None
        runs = [r for r in doc["runs"] if r["title"] == run or r["title"].endswith(": " + run)]
        if len(runs) != 1:
            failures.append(f"{e}: {len(runs)} runs titled like '{run}' (titles: {[r['title'] for r in doc['runs']]})")
            continue
        found = [f for f in runs[0]["findings"] if f["symptom"] == symptom and f["severity"] in ("warning", "critical")]
        if not found:
            seen = [(f["symptom"], f["first_step"]) for f in runs[0]["findings"]]
            failures.append(f"{e}: no '{symptom}' finding; found {seen}")
            continue
        first = min(found, key=lambda f: f["first_step"])
        if not lo <= first["first_step"] <= hi:
            failures.append(f"{e}: '{symptom}' first at {first['first_step']}, expected {lo}-{hi}")
        elif severity and first["severity"] != severity:
            failures.append(f"{e}: '{symptom}' is {first['severity']}, expected {severity}")
        else:
            print(f"ok: {run}: {symptom} at step {first['first_step']} ({first['severity']})")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
