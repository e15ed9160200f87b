#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the reports of an mldiag_torch_fashion run: every JSON Lines line parses with
json.loads, strictly (no NaN/Infinity tokens) where it can, and the HTML page exists and is
the self-contained report. Prints one line per file; exits 1 on a line that is not JSON, on
NaN/Infinity tokens with --strict, or on a missing or foreign HTML file."""
import json
import sys


def refuse(token):
    raise ValueError(f"non-strict token {token}")


def check_jsonl(path, strict):
    lines = loose = 0
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        lines += 1
        try:
            json.loads(line, parse_constant=refuse)
        except ValueError:
            try:
                json.loads(line)  # Python's own reading accepts NaN, Infinity, -Infinity
            except ValueError as e:
                print(f"{path}:{number}: not JSON: {e}")
                return False
            loose += 1
            if loose <= 3:
                print(f"{path}:{number}: NaN/Infinity token: {line[:160].rstrip()}")
    print(f"{path}: {lines} lines, all JSON; {lines - loose} strict, {loose} with NaN/Infinity tokens")
    return lines > 1 and (loose == 0 or not strict)


def check_html(path):
    try:
        page = open(path, encoding="utf-8").read()
    except OSError as e:
        print(f"{path}: {e}")
        return False
    ok = page.startswith("<!DOCTYPE html>") and "<svg" in page and page.rstrip().endswith("</html>")
    print(f"{path}: {len(page)} bytes, {'the HTML report' if ok else 'NOT the HTML report'}")
    return ok


def main(argv):
    strict = "--strict" in argv
    files = [a for a in argv if a != "--strict"]
    ok = True
    for f in files:
        ok = (check_html(f) if f.endswith(".html") else check_jsonl(f, strict)) and ok
    print("reports: ok" if ok and files else "reports: FAILED")
    return 0 if ok and files else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
