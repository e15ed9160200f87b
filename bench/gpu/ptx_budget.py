# SPDX-License-Identifier: Apache-2.0
"""PTX instructions per element in the main (four 16-byte loads) loop of the statistics
kernel, for bf16 and fp32. Runs anywhere nvcc is; no GPU needed.

    python3 bench/gpu/ptx_budget.py [--arch sm_90]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("--arch", default="sm_90")
args = parser.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with tempfile.TemporaryDirectory() as tmp:
    ptx_path = os.path.join(tmp, "k.ptx")
    subprocess.run(["nvcc", "-std=c++20", "-O3", f"-arch={args.arch}", "-I", os.path.join(root, "include"),
                    "-I", os.path.join(root, "kernels"), "-ptx", os.path.join(root, "bench/gpu/ptx_kernels.cu"),
                    "-o", ptx_path], check=True)
    ptx = open(ptx_path).read()
result = {}
for entry in re.split(r"\n\.visible \.entry ", ptx)[1:]:
    fmt, elements_per_word = ("bf16", 8) if "fmt_bf16" in entry.split("(")[0] else ("f32", 4)
    blocks, label, body = [], None, []
    for line in entry.split("\n"):
        m = re.match(r"^(\$L__BB\d+_\d+):", line)
        if m:
            if label:
                blocks.append(body)
            label, body = m.group(1), []
        elif label and line.strip() and not line.strip().startswith("//"):
            body.append(line.strip())
    blocks.append(body)
    for body in blocks:
        if sum(1 for x in body if x.startswith("ld.global.nc.v4")) >= 4:
            result[fmt] = round(len(body) / (4 * elements_per_word), 2)
print(f"PTX instructions per element, main loop ({args.arch}): " + ", ".join(f"{k} {v}" for k, v in result.items()))
print(json.dumps({"bench": "ptx_budget", "arch": args.arch, "ptx_per_element": result}))
