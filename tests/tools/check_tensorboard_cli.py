#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`mldiag scan` on TensorBoard event files this script writes itself, with its own TFRecord
framing and CRC-32C (independent of the C++ reader; the CRC is checked against RFC 3720's
check value first):

- tags the detectors do not know (cost/cross_entropy, accuracy): exit 2, one "mldiag:" line
  listing both tags and suggesting --column loss=cost/cross_entropy;
- the same with that --column: read, and "loss" holds the values written;
- the file cut inside its last record (a run still writing it): read up to it, a note with the
  number of bytes left out, in the text and in --json;
- a byte flipped in a complete record: exit 2, "bad CRC of the record data".

usage: check_tensorboard_cli.py MLDIAG WORK_DIR
Python 3 standard library only.
"""
import json
import os
import struct
import subprocess
import sys


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, wire, payload):
    key = varint((number << 3) | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def event(step, tag=None, value=None, version=None):
    """An Event: wall_time (1), step (2), file_version (3) or summary (5) with one simple_value."""
    e = field(1, 1, struct.pack("<d", 1.7e9 + step)) + field(2, 0, varint(step))
    if version is not None:
        e += field(3, 2, version.encode())
    else:
        v = field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", value))  # Summary.Value
        e += field(5, 2, field(1, 2, v))  # Summary { value }
    return e


def record(data):
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked(header)) + data + struct.pack("<I", masked(data))


def run(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    cli, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures = []

    def check(ok, what):
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    check(crc32c(b"123456789") == 0xE3069283, "CRC-32C check value (RFC 3720)")

    # 8 steps of a loss tagged cost/cross_entropy and an accuracy; values exact in float.
    losses = [2.5 - 0.125 * s for s in range(8)]
    records = [record(event(0, version="brain.Event:2"))]
    for s, x in enumerate(losses):
        records.append(record(event(s, "cost/cross_entropy", x)))
        records.append(record(event(s, "accuracy", 0.5 + s / 64)))
    whole = b"".join(records)
    path = os.path.join(work, "events.out.tfevents.1.unknown")
    with open(path, "wb") as f:
        f.write(whole)

    rc, out, err = run(cli, "scan", path)
    check(rc == 2, f"unknown tags: exit {rc}, expected 2")
    line = err.strip()
    check(line.startswith("mldiag: ") and "\n" not in line, f"unknown tags: one 'mldiag:' line ({line!r})")
    check("scalar tags: cost/cross_entropy, accuracy" in line, "unknown tags: both tags listed")
    check("--column loss=cost/cross_entropy" in line, "unknown tags: --column loss=cost/cross_entropy suggested")

    rc, out, err = run(cli, "scan", "--json", "--column", "loss=cost/cross_entropy", path)
    check(rc in (0, 1), f"--column loss=cost/cross_entropy: exit {rc} ({err.strip()})")
    doc = json.loads(out) if rc in (0, 1) else {"runs": [{}]}
    r = doc["runs"][0]
    check(r.get("steps") == 8 and "loss" in r.get("metrics", []), f"--column: 8 steps with a loss ({r.get('steps')}, {r.get('metrics')})")
    check(not any("nothing for the detectors" in n for n in r.get("notes", [])), "--column: the detectors read the loss")

    # Cut inside the last record, at several points: 16 complete scalar records remain before it
    # (the file_version and 15 scalars), i.e. step 7's accuracy is the one left out.
    last = len(whole) - len(records[-1])
    for cut in (last + 3, last + 12, last + len(records[-1]) - 1):
        cut_path = os.path.join(work, f"events.out.tfevents.2.cut{cut}")
        with open(cut_path, "wb") as f:
            f.write(whole[:cut])
        note = f"the last {cut - last} bytes are an incomplete record"
        rc, out, err = run(cli, "scan", "--column", "loss=cost/cross_entropy", cut_path)
        check(rc in (0, 1) and any(l.startswith("note: ") and note in l for l in out.splitlines()),
              f"cut at {cut}: exit {rc}, a 'note:' line saying '{note}'")
        rc, out, err = run(cli, "scan", "--json", "--column", "loss=cost/cross_entropy", cut_path)
        r = json.loads(out)["runs"][0] if rc in (0, 1) else {}
        check(r.get("steps") == 8 and any(note in n and "read the 16 complete record(s)" in n for n in r.get("notes", [])),
              f"cut at {cut}: --json has 8 steps and the note ({r.get('steps')}, {r.get('notes')})")

    # A flipped byte inside a complete record (the 3rd: 2 records before it) is damage, not a tail.
    damaged = bytearray(whole)
    offset = len(records[0]) + len(records[1])
    damaged[offset + 20] ^= 0x01
    bad_path = os.path.join(work, "events.out.tfevents.3.damaged")
    with open(bad_path, "wb") as f:
        f.write(bytes(damaged))
    rc, out, err = run(cli, "scan", "--column", "loss=cost/cross_entropy", bad_path)
    check(rc == 2 and f"byte {offset}: bad CRC of the record data" in err, f"damaged: exit {rc}: {err.strip()}")

    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
