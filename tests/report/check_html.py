#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks an mldiag HTML report, statically and in headless Chromium.

    check_html.py REPORT.html [--screenshot OUT.png] [--window-size 1400,2400]
                  [--expect-marker step=120,tensor=block2,symptom=exploding gradients] ...
                  [--expect-no-marker tensor=block1[,symptom=...]] ...
                  [--expect-nonfinite step=200,metric=loss]
                  [--jsonl RUN.jsonl [--gap 1000]] [--expect-legend] [--expect-open-diagnoses]
                  [--chromium PATH] [--timeout SECONDS]

Static checks (no browser): no <script>, no src= and no http(s) URL, every href a data: URI,
every embedded PNG well formed (chunk CRCs, zlib stream) -- read with Python's zlib, not with
the code that wrote it.

Chromium checks (`chromium --headless --dump-dom`, then `--screenshot`):
  * the page loads with no console message (the page has no script, so any message -- a CSP
    violation, a blocked load -- is a fault);
  * --expect-marker: a `.finding-marker` at that step (and symptom, when given) in the loaded
    DOM and, when tensor= is given, a `.heatmap-marker` at that step on a row whose tensor
    matches (equal, or one a prefix of the other at a '.' or '/' boundary);
  * --expect-no-marker tensor=T: no `.heatmap-marker` on a row matching T (of that symptom,
    when given);
  * --jsonl: the run's JSON Lines (what the page was made from). The episodes are computed
    here from its finding lines by the rule of docs/formats.md (same question, symptom and top
    location; a finding whose first_step is at most GAP steps after the episode's end joins
    it): the page must have exactly one `.finding-marker` per episode that has a step, at its
    start with its delivery count, and one `tr.finding` per episode; and, when every step has
    its own column, one `.val-point` per logged val_loss;
  * --expect-legend: the loss chart's legend names loss, critical, warning and info marks;
  * --expect-open-diagnoses: the page shows each open diagnosis ("open, phase 1: evidence")
    and does not say "No diagnosis was recorded";
  * --expect-nonfinite: a `.nonfinite-mark` at that step (and metric);
  * the screenshot is a PNG that shows the heatmap: at least 4 of the heatmap's level colours
    appear in it.

Exit codes: 0 passed, 1 failed, 2 bad usage, 77 skipped (no Chromium; CTest SKIP_RETURN_CODE).
Python 3 standard library only.
"""

import argparse
import base64
import html.parser
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import episodes_reference  # noqa: E402  (the rule, shared with tests/tools/check_episodes.py)

SKIP = 77


def location_matches(a, b):
    if not a or not b:
        return False
    short, long_ = sorted((a, b), key=len)
    if not long_.startswith(short):
        return False
    return len(long_) == len(short) or long_[len(short)] in "./"


def parse_spec(text):
    spec = {}
    for part in text.split(","):
        if "=" not in part:
            raise SystemExit(f"check_html: '{part}' in '{text}' is not key=value")
        key, value = part.split("=", 1)
        spec[key.strip()] = value.strip()
    return spec


class Elements(html.parser.HTMLParser):
    """Collects the attributes of every element, by class."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.by_class = {}
        self.tags = []
        self.chunks = []

    def handle_data(self, data):
        self.chunks.append(data)

    @property
    def text(self):
        return " ".join(" ".join(self.chunks).split())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        for cls in (attrs.get("class") or "").split():
            self.by_class.setdefault(cls, []).append(attrs)

    handle_startendtag = handle_starttag


def png_chunks(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    at, chunks = 8, []
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        chunks.append((kind, body))
        at += 12 + length
    if not chunks or chunks[-1][0] != b"IEND":
        raise ValueError("no IEND chunk")
    return chunks


def decode_png(data):
    """(width, height, rows of RGB tuples, palette) for 8-bit RGB(A)/indexed PNGs."""
    chunks = png_chunks(data)
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    palette = []
    for kind, body in chunks:
        if kind == b"PLTE":
            palette = [tuple(body[i:i + 3]) for i in range(0, len(body), 3)]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    if depth != 8 or colour not in (2, 3, 6):
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour})")
    bpp = {2: 3, 3: 1, 6: 4}[colour]
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for r in range(height):
        start = r * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        prev = line
        if colour == 3:
            rows.append([palette[v] for v in line])
        else:
            rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
    return width, height, rows, palette


def static_checks(text, failures):
    if re.search(r"<script", text, re.I):
        failures.append("the page has a <script> element")
    if re.search(r"\ssrc\s*=", text, re.I):
        failures.append("the page has a src= attribute")
    if re.search(r"https?:", text, re.I):
        failures.append("the page names an http(s) URL")
    palettes = []
    for m in re.finditer(r'href="([^"]*)"', text):
        url = m.group(1)
        if not url.startswith("data:"):
            failures.append(f"href is not a data: URI: {url[:60]}")
            continue
        if url.startswith("data:image/png;base64,"):
            try:
                width, height, _, palette = decode_png(base64.b64decode(url.split(",", 1)[1]))
                palettes.append(palette)
                print(f"check_html: embedded PNG {width}x{height}, {len(palette)} colours: ok")
            except (ValueError, zlib.error, struct.error) as e:
                failures.append(f"embedded PNG is broken: {e}")
    return palettes


def reference_episodes(jsonl, gap):
    """The episodes of a JSON Lines run, by the rule, from its finding lines in file order."""
    findings, val_points, steps = [], 0, set()
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)  # Python's json reads the bare NaN/Infinity tokens
            if "finding" in rec:
                findings.append(rec["finding"])
            elif "step" in rec:
                steps.add(rec["step"])
                if isinstance(rec.get("val_loss"), (int, float)) and math.isfinite(rec["val_loss"]):
                    val_points += 1
    episodes = [{"symptom": e["symptom"], "first": e["first_step"], "last": e["last_step"], "count": e["deliveries"]}
                for e in episodes_reference.group(findings, gap)]
    return episodes, val_points, len(steps)


def check_episodes(jsonl, gap, dom, failures):
    episodes, val_points, steps = reference_episodes(jsonl, gap)
    drawn = [e for e in episodes if e["last"] >= 0]
    markers = dom.by_class.get("finding-marker", [])
    rows = dom.by_class.get("finding", [])
    rows = [r for r in rows if r.get("data-count") is not None]  # the table's tr.finding
    print(f"check_html: {jsonl}: {sum(e['count'] for e in episodes)} deliveries -> {len(episodes)} episodes "
          f"(gap {gap}); page: {len(markers)} markers, {len(rows)} table rows")
    if len(markers) != len(drawn):
        failures.append(f"{len(markers)} finding markers, expected one per episode with a step: {len(drawn)}")
    if len(rows) != len(episodes):
        failures.append(f"{len(rows)} findings-table rows, expected one per episode: {len(episodes)}")
    # Episodes of one symptom at two places can start at the same step with the same count (a
    # router at blocks.1 and one at blocks.3): as many markers as such episodes, then.
    same = {}
    for e in drawn:
        key = (str(max(e["first"], 0)), e["symptom"], str(e["count"]))
        same[key] = same.get(key, 0) + 1
    for (start, symptom, count), n in same.items():
        hits = [m for m in markers if m.get("data-step") == start and m.get("data-symptom") == symptom
                and m.get("data-count") == count]
        if len(hits) != n:
            failures.append(f"episode {symptom} at {start} ({count} deliveries): {len(hits)} markers, expected {n}")
    columns = [int(m.get("data-columns", "0")) for m in dom.by_class.get("heatmap", [])]
    points = dom.by_class.get("val-point", [])
    if val_points and (not columns or columns[0] >= steps):
        if len(points) != val_points:
            failures.append(f"{len(points)} validation points drawn, {val_points} val_loss values logged")
        else:
            print(f"check_html: all {val_points} validation points drawn")


def find_chromium(explicit):
    for candidate in [explicit, os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome", "google-chrome-stable"]:
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def run_chromium(chromium, args, timeout):
    # A fresh profile each run: no state from earlier runs, and no lock on a shared one.
    with tempfile.TemporaryDirectory(prefix="mldiag-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}"] + args
        start = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, timeout=timeout)
        return done, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--screenshot")
    ap.add_argument("--window-size", default="1400,2400")
    ap.add_argument("--expect-marker", action="append", default=[])
    ap.add_argument("--expect-no-marker", action="append", default=[])
    ap.add_argument("--expect-nonfinite", action="append", default=[])
    ap.add_argument("--jsonl")
    ap.add_argument("--gap", type=int, default=1000)
    ap.add_argument("--expect-legend", action="store_true")
    ap.add_argument("--expect-open-diagnoses", action="store_true")
    ap.add_argument("--chromium")
    ap.add_argument("--timeout", type=float, default=90)
    opts = ap.parse_args()

    path = os.path.abspath(opts.report)
    if not os.path.isfile(path):
        print(f"check_html: {path} does not exist; write the report first", file=sys.stderr)
        return 2
    with open(path, encoding="utf-8") as f:
        text = f.read()
    failures = []
    palettes = static_checks(text, failures)
    print(f"check_html: {path}: {len(text) / 1024:.0f} kB")

    chromium = find_chromium(opts.chromium)
    if chromium is None:
        print("check_html: SKIPPED: no Chromium (install chromium, or pass --chromium PATH / "
              "set CHROMIUM); only the static checks ran" +
              (": " + "; ".join(failures) if failures else " and passed"))
        return 1 if failures else SKIP

    url = "file://" + path
    done, seconds = run_chromium(chromium, ["--dump-dom", url], opts.timeout)
    print(f"check_html: chromium --dump-dom: {seconds:.2f} s (exit {done.returncode})")
    if done.returncode != 0:
        failures.append(f"chromium --dump-dom exited {done.returncode}: "
                        f"{done.stderr.decode(errors='replace')[-2000:]}")
    console = [line for line in done.stderr.decode(errors="replace").splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    for line in console:
        failures.append(f"console message: {line}")

    dom = Elements()
    dom.feed(done.stdout.decode(errors="replace"))
    findings = dom.by_class.get("finding-marker", [])
    cells = dom.by_class.get("heatmap-marker", [])
    marks = dom.by_class.get("nonfinite-mark", [])
    print(f"check_html: DOM has {len(findings)} finding markers, {len(cells)} heatmap markers, "
          f"{len(marks)} non-finite marks, {len(dom.by_class.get('heatmap-row', []))} heatmap rows")
    if not any(tag == "svg" for tag, _ in dom.tags):
        failures.append("no <svg> in the loaded DOM")

    for text_spec in opts.expect_marker:
        spec = parse_spec(text_spec)
        step = spec.get("step")
        hits = [m for m in findings if (step is None or m.get("data-step") == step) and
                ("symptom" not in spec or m.get("data-symptom") == spec["symptom"])]
        if not hits:
            failures.append(f"no finding-marker with {text_spec} on the loss curve")
        if "tensor" in spec:
            on_row = [m for m in cells if (step is None or m.get("data-step") == step) and
                      location_matches(spec["tensor"], m.get("data-tensor", "")) and
                      ("symptom" not in spec or m.get("data-symptom") == spec["symptom"])]
            if not on_row:
                failures.append(f"no heatmap-marker with {text_spec}")
    for text_spec in opts.expect_no_marker:
        spec = parse_spec(text_spec)
        bad = [m for m in cells if location_matches(spec.get("tensor", ""), m.get("data-tensor", ""))
               and ("step" not in spec or m.get("data-step") == spec["step"])
               and ("symptom" not in spec or m.get("data-symptom") == spec["symptom"])]
        if bad:
            failures.append(f"unexpected heatmap-marker on {bad[0].get('data-tensor')} ({text_spec})")
    for text_spec in opts.expect_nonfinite:
        spec = parse_spec(text_spec)
        if not [m for m in marks if m.get("data-step") == spec.get("step") and
                ("metric" not in spec or m.get("data-metric") == spec["metric"])]:
            failures.append(f"no nonfinite-mark with {text_spec}")

    if opts.jsonl:
        check_episodes(opts.jsonl, opts.gap, dom, failures)
    if opts.expect_legend:
        kinds = {m.get("data-kind") for m in dom.by_class.get("legend-item", [])}
        for kind in ("loss", "critical", "warning", "info"):
            if kind not in kinds:
                failures.append(f"the loss chart's legend has no '{kind}' item (it has {sorted(k for k in kinds if k)})")
    if opts.expect_open_diagnoses:
        shown = dom.by_class.get("open-diagnosis", [])
        if not shown:
            failures.append("no .open-diagnosis on the page")
        if "open, phase 1: evidence" not in dom.text:
            failures.append("the page does not say 'open, phase 1: evidence'")
        if "No diagnosis was recorded" in dom.text:
            failures.append("the page says 'No diagnosis was recorded' while diagnoses are open")
        print(f"check_html: {len(shown)} open diagnoses shown")

    if opts.screenshot:
        shot = os.path.abspath(opts.screenshot)
        os.makedirs(os.path.dirname(shot), exist_ok=True)
        if os.path.exists(shot):
            os.remove(shot)
        done, seconds = run_chromium(
            chromium, ["--hide-scrollbars", f"--window-size={opts.window_size}",
                       f"--screenshot={shot}", url], opts.timeout)
        print(f"check_html: chromium --screenshot: {seconds:.2f} s -> {shot}")
        if not os.path.isfile(shot):
            failures.append(f"chromium wrote no screenshot (exit {done.returncode})")
        else:
            with open(shot, "rb") as f:
                width, height, rows, _ = decode_png(f.read())
            seen = set()
            for row in rows[::2]:
                seen.update(row[::2])
            levels = set(palettes[0][3:]) if palettes else set()
            shown = len(levels & seen)
            print(f"check_html: screenshot {width}x{height}, {len(seen)} colours, "
                  f"{shown} of {len(levels)} heatmap level colours")
            if palettes and shown < 4:
                failures.append("the screenshot shows fewer than 4 heatmap colours: the heatmap "
                                "image did not render")

    for failure in failures:
        print(f"check_html: FAIL: {failure}", file=sys.stderr)
    print("check_html: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
