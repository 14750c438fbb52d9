"""Benchmark every baked kernel on this CPU, side by side with NumPy.

For each kernel: median wall time of the emulated kernel (computing the real
result and simulating the pipes), its GFLOP/s on this CPU, and the simulated
Ascend figures (cycles, time at the profile's clock, Cube/Vector utilisation).
For GEMMs the same product in NumPy fp32 (BLAS), for Resize the same gather /
interpolation in NumPy fp32 (fancy indexing), runs in the same process as a
reference point for the host's speed. Medians of --repeat runs after a warm-up.

    python benchmarks/bench_kernels.py [--repeat 7] [--filter gemm] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import kiln
from kiln.runtime import as_packed


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def numpy_resize_ms(s: dict, rng, repeat: int) -> float:
    """The Resize in NumPy fp32: rows then columns by index arrays, weighted when bilinear."""
    from kiln.codegen.ir.resize_spec import ResizeSpec
    spec = ResizeSpec(**s)
    (r0, r1, u0, u1), (c0, c1, v0, v1) = (np.array(spec.taps(axis)).T for axis in (0, 1))
    r0, r1, c0, c1 = (a.astype(np.int64) for a in (r0, r1, c0, c1))
    x = rng.standard_normal((spec.n, spec.c, spec.h, spec.w)).astype(np.float32)
    u0, u1, v0, v1 = (a.astype(np.float32) for a in (u0, u1, v0, v1))
    if spec.mode == "nearest":
        return median_time(lambda: x[:, :, r0][:, :, :, c0], repeat) * 1e3

    def bilinear():
        h = x[:, :, :, c0] * v0 + x[:, :, :, c1] * v1
        return h[:, :, r0] * u0[:, None] + h[:, :, r1] * u1[:, None]
    return median_time(bilinear, repeat) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--filter", default="", help="only kernels whose name contains this")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    info = kiln.build_info()
    print(f"kiln {info['profile']} kernels, host ISA {info['isa']}, {info['threads']} threads; "
          f"simulated figures are for {info['profile']}, not measured hardware")
    rows = []
    hdr = (f"{'kernel':<58} {'ms':>8} {'GFLOP/s':>8} {'numpy ms':>9} {'sim cyc':>9} {'sim us':>8} "
           f"{'Cube%':>6} {'Vec%':>6}")
    print(hdr)
    rng = np.random.default_rng(0)
    for k in kiln.kernels():
        if args.filter not in k.name:
            continue
        ins = [as_packed(rng.standard_normal(t["shape"]), t["dtype"])
               for t in k.record["inputs"]]
        out = k.empty_output()
        sec = median_time(lambda k=k, ins=ins, out=out: k.run_packed(*ins, out=out), args.repeat)
        st = k.last_stats
        flops = k.record["features"]["flops"]
        np_ms = None
        if k.record["features"]["kind"] == "gemm":
            s = k.spec
            a = rng.standard_normal((s["m"], s["k"])).astype(np.float32)
            b = rng.standard_normal((s["k"], s["n"])).astype(np.float32)
            np_ms = median_time(lambda a=a, b=b: a @ b, args.repeat) * 1e3
        elif k.record["features"]["kind"] == "resize":
            np_ms = numpy_resize_ms(k.spec, rng, args.repeat)
        row = {"kernel": k.name, "variant": k.variant, "ms": sec * 1e3, "gflops": flops / sec / 1e9,
               "numpy_fp32_ms": np_ms, "sim_cycles": st["cycles"], "sim_us": st["simulated_us"],
               "cube_util": st["pipes"]["M"]["utilisation"], "vector_util": st["pipes"]["V"]["utilisation"]}
        rows.append(row)
        print(f"{k.name[:58]:<58} {row['ms']:8.2f} {row['gflops']:8.1f} "
              f"{(f'{np_ms:9.2f}' if np_ms else '        -')} {st['cycles']:9.0f} {st['simulated_us']:8.2f} "
              f"{100 * row['cube_util']:6.1f} {100 * row['vector_util']:6.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"build": info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
