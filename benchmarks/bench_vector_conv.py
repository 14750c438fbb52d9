"""conv2d_vector (the dense conv on the Vector unit alone) against the Cube kernel of the same spec, side by
side in one process: wall time of the emulated kernel on this CPU (median of --repeat runs after a warm-up),
simulated cycles on the build's profile, and what the cost model predicted for each. The default build bakes
`vector.rgb_stem_small` both ways (kernels/default.toml); any build that bakes a spec both ways is compared.

    python benchmarks/bench_vector_conv.py [--repeat 9] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import kiln


def run(k: kiln.Kernel, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t["shape"]).astype(np.float16 if t["dtype"] == "fp16" else np.float32)
           for t in k.record["inputs"]]
    k.run_packed(*ins)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        k.run_packed(*ins)
        times.append(time.perf_counter() - t0)
    st = k.last_stats
    return {"kernel": k.name, "algorithm": k.record["algorithm"], "median_ms": statistics.median(times) * 1e3,
            "simulated_cycles": st["cycles"], "predicted_cycles": k.record.get("predicted_cycles"),
            "cube_macs": st["cube_macs"], "vector_repeats": st["vector_repeats"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--json")
    args = ap.parse_args()
    by_spec: dict[str, list[kiln.Kernel]] = {}
    for k in kiln.kernels():
        if k.record["features"]["kind"] == "conv2d":
            by_spec.setdefault(k.record["opspec"], []).append(k)  # the spec's hash: same conv, any algorithm
    pairs = [ks for ks in by_spec.values() if {k.record["algorithm"] for k in ks} >= {"vector_direct"} and len(ks) > 1]
    if not pairs:
        print("no spec is baked both on the Vector unit and on the Cube in this build", file=sys.stderr)
        return 1
    rows = []
    print(f"{'kernel':58} {'algorithm':15} {'wall ms':>8} {'sim cycles':>10} {'predicted':>10}")
    for ks in pairs:
        for k in sorted(ks, key=lambda k: k.record["algorithm"]):
            r = run(k, args.repeat)
            rows.append(r)
            print(f"{r['kernel'][:58]:58} {r['algorithm']:15} {r['median_ms']:8.3f} {r['simulated_cycles']:10.0f} "
                  f"{r['predicted_cycles'] or 0:10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"profile": kiln.build_info()["profile"], "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
