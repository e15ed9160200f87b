#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the checkpoints the checkpoint reader tests read, with a writer other than ours.

    make_checkpoints.py OUT_DIR

numpy writes the .npy and .npz files (np.save, np.savez, np.savez_compressed,
np.lib.format.write_array for versions 2.0 and 3.0); safetensors files are written by hand
here, from the format's description. Next to them: values/*.f64 (every tensor's values as
little-endian float64, in C order, computed here: numpy's astype for its dtypes, the bit
formulas below for BF16 and FP8) and manifest.json (file, tensor, dtype, shape, values).
Exits 77 (CTest: skipped) when numpy is absent.
"""
import json
import os
import struct
import sys

out = sys.argv[1]
# A manifest from an earlier run must not outlive a run that cannot write a new one.
if os.path.exists(os.path.join(out, "manifest.json")):
    os.remove(os.path.join(out, "manifest.json"))

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is absent (apt-get install python3-numpy); the checkpoint tests "
          "that read numpy-written files do not run")
    sys.exit(77)

os.makedirs(os.path.join(out, "values"), exist_ok=True)
rng = np.random.default_rng(20261201)
manifest = []


def record(file, name, dtype, values, shape=None):
    """Adds a tensor to the manifest; values: float64 array in C order."""
    values = np.asarray(values, dtype=np.float64)
    path = f"values/{file}__{name}.f64"
    values.reshape(-1).astype("<f8").tofile(os.path.join(out, path))
    manifest.append({"file": file, "tensor": name, "dtype": dtype,
                     "shape": list(values.shape if shape is None else shape), "values": path})


def awkward_floats(n, dt):
    """n values of float dtype dt: normal noise at several scales with NaN, +-Inf, +-0,
    the smallest denormal and +-max finite planted (where n allows)."""
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(dt)
    info = np.finfo(dt)
    planted = [np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal,
               info.max, -info.max, info.tiny]
    for k, v in enumerate(planted):
        if n > 3 * k + 7:
            x[3 * k + 5] = v
    if n > 66000:  # around the unit boundary (65536 elements)
        x[65535] = np.nan
        x[65536] = 0.0
    return x


def ints(n, dt):
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    if n > 10:
        x[1], x[2], x[3] = info.min, info.max, 0
    return x


NUMPY_NAMES = {"f2": "F16", "f4": "F32", "f8": "F64", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64",
               "u1": "U8", "u2": "U16", "u4": "U32", "u8": "U64", "b1": "BOOL"}


def numpy_array(code, n):
    dt = np.dtype(code)
    if dt.kind == "f":
        return awkward_floats(n, dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    return ints(n, dt)


# ---- .npy: every numpy dtype, little- and big-endian, Fortran order, versions 2 and 3 ----
for code, st in NUMPY_NAMES.items():
    n = 70001 if code in ("f4", "i1", "b1") else 5003
    a = numpy_array(code, n)
    np.save(os.path.join(out, f"le_{code}.npy"), a)
    record(f"le_{code}.npy", f"le_{code}", st, a)
    if a.dtype.itemsize > 1:
        b = a.astype(a.dtype.newbyteorder(">"))
        np.save(os.path.join(out, f"be_{code}.npy"), b)
        record(f"be_{code}.npy", f"be_{code}", st, a)

f = np.asfortranarray(awkward_floats(300 * 257, np.float32).reshape(300, 257))
np.save(os.path.join(out, "fortran.npy"), f)
record("fortran.npy", "fortran", "F32", f)
s = np.array(-2.5e-310)  # a 0-d denormal double
np.save(os.path.join(out, "scalar.npy"), s)
record("scalar.npy", "scalar", "F64", s)
e = np.zeros((0, 3), np.float32)
np.save(os.path.join(out, "empty.npy"), e)
record("empty.npy", "empty", "F32", e)
for version in ((2, 0), (3, 0)):
    v = awkward_floats(1000, np.float64).reshape(10, 100)
    name = f"version{version[0]}"
    with open(os.path.join(out, name + ".npy"), "wb") as fh:
        np.lib.format.write_array(fh, v, version=version)
    record(name + ".npy", name, "F64", v)

# ---- .npz: stored and compressed ----
members = {"weights": awkward_floats(100000, np.float32), "counts": ints(1000, np.int16),
           "scalar": np.array(7, np.int64), "empty": np.zeros((2, 0), np.float64),
           "mask": rng.integers(0, 2, 999).astype(bool),
           "big_endian": awkward_floats(3001, np.float64).astype(">f8")}
np.savez(os.path.join(out, "stored.npz"), **members)
big = {"large": awkward_floats(1_500_000, np.float32)}
np.savez_compressed(os.path.join(out, "compressed.npz"), **members, **big)
for file, ms in (("stored.npz", members), ("compressed.npz", {**members, **big})):
    for name, a in ms.items():
        record(file, name, NUMPY_NAMES[a.dtype.str[1:]], a)


# ---- safetensors, written by hand ----
def bf16_bits(x32):
    """Round float32 to bfloat16 bits (nearest even), NaN -> 0x7fc0."""
    u = x32.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x32), np.uint16(0x7FC0), r)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_value(b):
    sign = -1.0 if b & 0x80 else 1.0
    ex, man = (b >> 3) & 0xF, b & 7
    if ex == 0xF and man == 7:
        return float("nan")
    if ex == 0:
        return sign * man * 2.0 ** -9
    return sign * (1 + man / 8) * 2.0 ** (ex - 7)


def e5m2_value(b):
    sign = -1.0 if b & 0x80 else 1.0
    ex, man = (b >> 2) & 0x1F, b & 3
    if ex == 31:
        return sign * float("inf") if man == 0 else float("nan")
    if ex == 0:
        return sign * man * 2.0 ** -16
    return sign * (1 + man / 4) * 2.0 ** (ex - 15)


def write_safetensors(file, tensors):
    """tensors: list of (name, dtype, shape, raw bytes, float64 values)."""
    header, data = {"__metadata__": {"format": "pt", "writer": "make_checkpoints.py"}}, b""
    for name, dt, shape, raw, values in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
        record(file, name, dt, np.asarray(values, np.float64).reshape(shape), shape)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out, file), "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text + data)


st = []
for code, name in NUMPY_NAMES.items():
    n = 70001 if code in ("f4", "i1") else 2001  # odd sizes: later tensors start misaligned
    a = numpy_array(code, n)
    st.append((f"t_{name}", name, (n,), a.astype(a.dtype.newbyteorder("<")).tobytes(), a))
x = awkward_floats(70000, np.float32)
bits = bf16_bits(x)
st.append(("t_BF16", "BF16", (70000,), bits.astype("<u2").tobytes(), bf16_values(bits)))
for dt, fn in (("F8_E4M3", e4m3_value), ("F8_E5M2", e5m2_value)):
    b = rng.integers(0, 256, 66001).astype(np.uint8)
    b[:256] = np.arange(256)  # every bit pattern at least once
    st.append((f"t_{dt}", dt, (66001,), b.tobytes(), [fn(int(v)) for v in b]))
b = np.arange(256, dtype=np.uint8)
st.append(("t_F8_E4M3FN", "F8_E4M3FN", (16, 16), b.tobytes(), [e4m3_value(int(v)) for v in b]))
st.append(("empty", "F32", (0, 4), b"", []))
st.append(("scalar", "F64", (), struct.pack("<d", 3.25), [3.25]))
write_safetensors("all.safetensors", st)

# ---- a pair to diff: A (safetensors) and B (npz, other dtypes) ----
w1 = rng.standard_normal(100000).astype(np.float32)
w1b = (w1 + 1e-3 * rng.standard_normal(100000)).astype(np.float32)
w1b[[7, 70000]] = [np.nan, np.inf]
w1[12] = -np.inf
w2 = bf16_bits(rng.standard_normal(5000).astype(np.float32))
w2b = bf16_values(w2) * 1.5
write_safetensors("diff_a.safetensors", [
    ("w1", "F32", (100, 1000), w1.astype("<f4").tobytes(), w1),
    ("w2", "BF16", (5000,), w2.astype("<u2").tobytes(), bf16_values(w2)),
    ("zero", "F32", (3,), np.zeros(3, "<f4").tobytes(), np.zeros(3)),
    ("only_a", "F32", (10,), np.ones(10, "<f4").tobytes(), np.ones(10)),
    ("reshaped", "F32", (10,), np.ones(10, "<f4").tobytes(), np.ones(10)),
])
diff_b = {"w1": w1b.reshape(100, 1000), "w2": w2b, "zero": np.array([0.0, 1.0, 0.0], np.float16),
          "only_b": np.ones(4), "reshaped": np.ones((5, 2))}
np.savez(os.path.join(out, "diff_b.npz"), **diff_b)
for name, a in diff_b.items():
    record("diff_b.npz", name, NUMPY_NAMES[a.dtype.str[1:]], a)

# ---- activation dumps for `mldiag compare`: a reference in F32, the same taps stored in BF16
# (healthy: within bf16's rounding), and BF16 with layer 2's attention scaled by 1.25 from
# token position 3 on (a scale applied wrongly) ----
acts = []
for layer in range(4):
    for what in ("attn", "residual"):
        acts.append((f"blocks.{layer}.{what}", (1 + layer) * rng.standard_normal((10, 96)).astype(np.float32)))
write_safetensors("act_ref.safetensors", [(n, "F32", a.shape, a.astype("<f4").tobytes(), a) for n, a in acts])
for file, fault in (("act_bf16.safetensors", False), ("act_fault.safetensors", True)):
    tensors = []
    for n, a in acts:
        b = a.copy()
        if fault and n == "blocks.2.attn":
            b[3:] *= 1.25
        bits = bf16_bits(b)
        tensors.append((n, "BF16", a.shape, bits.astype("<u2").tobytes(), bf16_values(bits)))
    write_safetensors(file, tensors)

with open(os.path.join(out, "manifest.json"), "w") as fh:
    json.dump(manifest, fh, indent=1)
print(f"wrote {len(manifest)} tensors to {out}")
