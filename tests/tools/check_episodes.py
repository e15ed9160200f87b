#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that `mldiag scan --all` lists episodes, against episodes computed here.

usage: check_episodes.py MLDIAG LOG [--gap 1000] [--max-ratio R]

Runs `MLDIAG scan --all --json LOG` (its "findings" are the deliveries, with repeats at
consecutive logged steps already counted in "reported") and `MLDIAG scan --all LOG` (the text
report). The reference applies the episode rule of docs/formats.md itself: findings of the same
question, symptom and top location belong to one episode when a finding's first_step is at most
GAP steps after the episode's end (its largest last_step). The text report must list exactly
these episodes (symptom, span, deliveries), the JSON "episodes" too, and, with --max-ratio, the
episodes must be far fewer than the deliveries (at most R of them) -- the point of episodes on a
log whose detector flickers.

Precondition, checked: the log has every step from its first to its last, so a "reported N
times" group of the JSON (deliveries at consecutive logged steps) is N deliveries at consecutive
steps, which the rule puts in one episode for any GAP >= 1: grouping the groups is grouping the
deliveries. Python 3 standard library only.
"""
import argparse
import json
import re
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import episodes_reference  # noqa: E402  (the rule, shared with tests/report/check_html.py)


def reference_episodes(findings, gap):
    """Episodes of the findings (in the order of their first step), by the rule above."""
    return episodes_reference.group(sorted(findings, key=lambda f: f["first_step"]), gap,
                                    weight=lambda f: f["reported"])


def span(first, last):
    if last < 0:
        return "before training"
    return f"step {first}" if first == last else f"steps {first}-{last}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mldiag")
    p.add_argument("log")
    p.add_argument("--gap", type=int, default=1000)
    p.add_argument("--max-ratio", type=float)
    a = p.parse_args()

    doc = json.loads(subprocess.run([a.mldiag, "scan", "--all", "--json", a.log], capture_output=True,
                                    check=False).stdout)
    text = subprocess.run([a.mldiag, "scan", "--all", a.log], capture_output=True, check=False).stdout.decode()
    failures = []
    (run,) = doc["runs"]
    if run["steps"] != run["last_step"] - run["first_step"] + 1:
        print(f"check_episodes: {a.log} does not log every step; the reference needs one that does")
        return 2
    deliveries = sum(f["reported"] for f in run["findings"])
    expected = reference_episodes(run["findings"], a.gap)

    # The text report: one entry line per episode, "  <severity> <symptom> — <span>[, N deliveries, peak ...]".
    entry = re.compile(r"^  (info|warning|critical) +(.+?) — (before training|steps? [0-9-]+)(?:, (\d+) deliveries)?")
    listed = []
    for line in text.splitlines():
        m = entry.match(line)
        if m:
            listed.append((m.group(2), m.group(3), int(m.group(4) or 1)))
    want = sorted((e["symptom"], span(e["first_step"], e["last_step"]), e["deliveries"]) for e in expected)
    if sorted(listed) != want:
        failures.append(f"text report lists {sorted(listed)}, the reference {want}")
    if f"{len(expected)} episode(s) at info or above" not in text:
        failures.append(f"the text report's count line does not say {len(expected)} episode(s)")
    got = sorted((e["symptom"], e["place"], e["first_step"], e["last_step"], e["deliveries"]) for e in run["episodes"])
    ref = sorted((e["symptom"], e["place"], e["first_step"], e["last_step"], e["deliveries"]) for e in expected)
    if got != ref:
        failures.append(f"--json episodes {got}, the reference {ref}")
    if a.max_ratio is not None and len(expected) > a.max_ratio * deliveries:
        failures.append(f"{len(expected)} episodes from {deliveries} deliveries: not a summary")
    print(f"check_episodes: {a.log}: {deliveries} deliveries -> {len(expected)} episodes (gap {a.gap}); "
          f"text lists {len(listed)}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
