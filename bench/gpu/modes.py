# SPDX-License-Identifier: Apache-2.0
"""Why the 7B-shaped list reads at two speeds (bench/gpu/bench.py, "7B-shaped gradients").

The first GPU run (docs/benchmarks.md, 2026-12-04) saw the list at 0.91-0.94 of the copy
ceiling in some processes and 0.84-0.85 in others, nothing between. This script times the
statistics over the same 291 tensors laid out four ways in one process, so that the layout
and the process can be told apart:

  separate   291 torch.randn tensors, as bench.py allocates them
  carved     the same shapes as views of one allocation, packed in order (512-byte aligned)
  flat       that allocation as one tensor: the same bytes without the tensor boundaries
  separate2  291 tensors allocated anew after the others are freed

It prints one JSON line per process with the best and median of `reps` calls, the ratio to
the copy ceiling, and what the separate list's addresses look like (gaps, 2 MiB alignment,
order), so that fast and slow processes can be compared afterwards.

    python3 bench/gpu/modes.py --lib build-gpu/libmldiag_bench.so [--reps 10] [--ncu]

With --ncu each layout is computed once, untimed, for `ncu -k regex:chunk_stats` to profile.
--prefix first repeats what bench.py does before the list (and --prefix-steps capture,double
its graph capture and float64 reference norm); --rounds N times only the separate list,
allocated anew N times.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Plan, llama7b_shapes, load_lib, times, torch_check  # noqa: E402


def layout_facts(tensors):
    """Addresses of a list: how many start on 2 MiB, how many follow their predecessor within
    4 KiB (packed), how many lie below their predecessor (descending), the span in GiB."""
    ptrs = [t.data_ptr() for t in tensors]
    ends = [p + t.numel() * t.element_size() for p, t in zip(ptrs, tensors)]
    packed = sum(1 for i in range(1, len(ptrs)) if 0 <= ptrs[i] - ends[i - 1] < 4096)
    return {"aligned_2mib": sum(1 for p in ptrs if p % (2 << 20) == 0),
            "packed_after_previous": packed,
            "below_previous": sum(1 for i in range(1, len(ptrs)) if ptrs[i] < ptrs[i - 1]),
            "span_gib": (max(ends) - min(ptrs)) / (1 << 30),
            "first_ptr_mod_2mib": ptrs[0] % (2 << 20)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--ncu", action="store_true", help="one untimed compute per layout")
    parser.add_argument("--prefix", action="store_true",
                        help="first do what bench.py does before the list: a 4 GiB bf16 tensor, ours and PyTorch's check")
    parser.add_argument("--prefix-steps", default="",
                        help="with --prefix, also bench.py's other steps on that tensor: any of capture,double")
    parser.add_argument("--rounds", type=int, default=0,
                        help="only the separate list, allocated anew this many times (no carved/flat)")
    args = parser.parse_args()
    lib = load_lib(args.lib)
    torch.manual_seed(0)
    gib = 1 << 30

    src = torch.empty(4 * gib, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() / min(times(lambda: dst.copy_(src), 10)) / 1e9
    del src, dst
    torch.cuda.empty_cache()

    shapes = llama7b_shapes()
    report = {"bench": "gpu_7b_modes", "pid": os.getpid(), "copy_gbs": copy_gbs}

    def run(name, tensors):
        plan = Plan(lib, tensors)
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        if args.ncu:
            plan.compute()
            torch.cuda.synchronize()
            report[name] = {"profiled": True}
        else:
            ts = times(plan.compute, args.reps)
            best, med = min(ts), statistics.median(ts)
            report[name] = {"best_ms": best * 1e3, "median_ms": med * 1e3,
                            "ceiling_best": nbytes / best / (copy_gbs * 1e9),
                            "ceiling_median": nbytes / med / (copy_gbs * 1e9)}
        lib.mldiag_plan_destroy(ctypes.c_void_p(plan.handle))

    if args.prefix:
        big = torch.randn(2 * gib, dtype=torch.bfloat16, device="cuda")
        run("prefix_big", [big])
        times(lambda: torch_check([big]), 10)
        steps = args.prefix_steps.split(",")
        if "capture" in steps:
            plan = Plan(lib, [big])
            report["prefix_capture_nodes"] = plan.capture_check()
            lib.mldiag_plan_destroy(ctypes.c_void_p(plan.handle))
        if "double" in steps:
            report["prefix_double_norm"] = big.double().norm().item()
        del big
        torch.cuda.empty_cache()
    if args.rounds:
        for r in range(args.rounds):
            separate = [torch.randn(s, dtype=torch.bfloat16, device="cuda") * 0.02 for s in shapes]
            run(f"round{r}", separate)
            del separate
            torch.cuda.empty_cache()
        print(json.dumps(report), flush=True)
        return

    separate = [torch.randn(s, dtype=torch.bfloat16, device="cuda") * 0.02 for s in shapes]
    report["separate_layout"] = layout_facts(separate)
    run("separate", separate)
    del separate
    torch.cuda.empty_cache()

    align = 256  # elements: 512 bytes, the caching allocator's rounding
    offsets, total = [], 0
    for s in shapes:
        offsets.append(total)
        total += (math.prod(s) + align - 1) // align * align
    flat = torch.empty(total, dtype=torch.bfloat16, device="cuda")
    carved = [flat[o:o + math.prod(s)].view(s) for o, s in zip(offsets, shapes)]
    for t in carved:
        t.normal_(0.0, 0.02)
    run("carved", carved)
    run("flat", [flat])
    del carved, flat
    torch.cuda.empty_cache()

    separate = [torch.randn(s, dtype=torch.bfloat16, device="cuda") * 0.02 for s in shapes]
    report["separate2_layout"] = layout_facts(separate)
    run("separate2", separate)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
