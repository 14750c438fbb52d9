"""Shape buckets against generic kernels, per model of a build made with KILN_SHAPE_BUCKETS: the first call at a
new size (planning included), then the median wall time and the simulated cycles at a bucket size on its
specialised kernels, at the same size on the generic kernels (force_generic), and at other sizes on the
generic kernels; each size also against ONNX Runtime (cosine, top-1).

kiln's times are the emulation's wall time on this CPU; cycles are the simulated profile's, not a measurement.

    pip install . -Ccmake.define.KILN_MODELS="resnet50;mobilenet_v2" -Ccmake.define.KILN_SHAPE_BUCKETS=224
    python benchmarks/bench_shape_buckets.py [resnet50 ...] [--bucket 224] [--sizes 240 256 197x251] [--runs 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import kiln
from kiln.validate import validate


def size_arg(text: str) -> tuple[int, int]:
    h, _, w = text.lower().partition("x")
    return int(h), int(w or h)


def timed(m, x, runs: int, **kw) -> dict:
    m.run(x, **kw)  # warm-up (and planning, already measured)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        m.run(x, **kw)
        times.append(time.perf_counter() - t0)
    d = m.last_dispatch
    return {"path": d["path"], "median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
            "simulated_cycles": m.simulated_cycles, "generic_kernels": d["generic_kernels"],
            "baked_kernels": d["baked_kernels"], "arena_bytes": d["arena_bytes"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--bucket", type=size_arg, default=(224, 224), help="a baked size (S or HxW)")
    ap.add_argument("--sizes", type=size_arg, nargs="*", default=[(240, 240), (256, 256), (197, 251)])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    bucketed = [r["name"] for r in kiln.manifest()["models"] if "shape_buckets" in r]
    names = args.models or bucketed
    if not names or any(n not in bucketed for n in names):
        print(f"needs models baked with KILN_SHAPE_BUCKETS; this build has: {', '.join(bucketed) or 'none'}",
              file=sys.stderr)
        return 2
    rows = []
    for name in names:
        m = kiln.load(name)
        n, c = m.inputs[0][1][:2]
        rng = np.random.default_rng(0)
        first = args.sizes[0]
        x = rng.standard_normal((n, c, *first)).astype(np.float32)
        t0 = time.perf_counter()
        m.run(x)
        row = {"model": name, "first_call": {"size": first, "ms": 1e3 * (time.perf_counter() - t0),
                                             "planning_ms": 1e3 * m.last_dispatch["plan_seconds"]}, "runs": []}
        xb = rng.standard_normal((n, c, *args.bucket)).astype(np.float32)
        row["runs"].append({"size": args.bucket, **timed(m, xb, args.runs)})
        row["runs"].append({"size": args.bucket, "forced": True, **timed(m, xb, args.runs, force_generic=True)})
        for size in args.sizes:
            xs = rng.standard_normal((n, c, *size)).astype(np.float32)
            r = {"size": size, **timed(m, xs, args.runs)}
            v = validate(m, seeds=(0,), input_size=size)
            r.update(cosine=v["outputs"][0]["cosine"], top1=v["top1_agreement"], passed=v["passed"])
            row["runs"].append(r)
        rows.append(row)
        f = row["first_call"]
        print(f"{name}: first call at {f['size'][0]}x{f['size'][1]} {f['ms']:.0f} ms "
              f"(planning {f['planning_ms']:.0f} ms)")
        for r in row["runs"]:
            label = f"{r['size'][0]}x{r['size'][1]} {r['path']}{' (forced)' if r.get('forced') else ''}"
            check = f", cosine {r['cosine']:.6f} top-1 {r['top1']}" if "cosine" in r else ""
            print(f"  {label:28s} median {r['median_ms']:6.1f} ms (min {r['min_ms']:.1f}), simulated "
                  f"{r['simulated_cycles']:,.0f} cycles, {r['generic_kernels']} generic + {r['baked_kernels']} baked "
                  f"launches{check}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
