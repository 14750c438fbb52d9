"""Whole-model latency: kiln (emulated Ascend kernels on this CPU) against ONNX
Runtime fp32 on the same ONNX file, in one process, alternating runs after a
warm-up, medians and min/max, same thread count for both.

kiln's figure is the wall time of the emulation (which computes the real fp16
results and simulates the pipes); the simulated Ascend latency of the same run
is printed beside it and labelled as simulated.

    python benchmarks/bench_models.py [resnet50 mobilenet_v2] [--runs 20] [--threads 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import kiln
from kiln.validate import onnx_path_of, ort_session


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=None)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    kiln._core.set_num_threads(args.threads)
    info = kiln.build_info()
    print(f"kiln {info['profile']} (host ISA {info['isa']}), ONNX Runtime fp32, {args.threads} threads, "
          f"{args.runs} alternating runs after warm-up, cpu_count={os.cpu_count()}")
    rows = []
    for name in args.models or kiln.models():
        m = kiln.load(name)
        sess = ort_session(onnx_path_of(m.record), threads=args.threads)
        feeds_names = [i.name for i in sess.get_inputs()]
        x = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for _, s in m.inputs]
        feeds = dict(zip(feeds_names, x))
        for _ in range(2):
            m.run(*x)
            sess.run(None, feeds)
        tk, to = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            m.run(*x)
            tk.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            sess.run(None, feeds)
            to.append(time.perf_counter() - t0)
        sim_ms = m.simulated_cycles / (1e6 * {"ascend910b": 1.8, "ascend310p": 1.0}.get(info["profile"], 1.0))
        row = {"model": name, "kiln_median_ms": 1e3 * statistics.median(tk), "kiln_min_ms": 1e3 * min(tk),
               "kiln_max_ms": 1e3 * max(tk), "ort_median_ms": 1e3 * statistics.median(to),
               "ort_min_ms": 1e3 * min(to), "ort_max_ms": 1e3 * max(to),
               "kernel_launches": m.kernel_launches, "simulated_ms": sim_ms}
        row["ratio_kiln_over_ort"] = row["kiln_median_ms"] / row["ort_median_ms"]
        rows.append(row)
        print(f"{name:<14} kiln {row['kiln_median_ms']:8.1f} ms [{row['kiln_min_ms']:.1f}-{row['kiln_max_ms']:.1f}]  "
              f"ORT {row['ort_median_ms']:7.1f} ms [{row['ort_min_ms']:.1f}-{row['ort_max_ms']:.1f}]  "
              f"kiln/ORT {row['ratio_kiln_over_ort']:.1f}x   simulated {info['profile']}: {sim_ms:.3f} ms "
              f"over {m.kernel_launches} launches")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"build": info, "threads": args.threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
