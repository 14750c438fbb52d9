"""Peak resident memory of one inference: kiln vs ONNX Runtime, each engine in its own
fresh process (so one engine's allocations do not hide the other's), same ONNX file,
same input. Reports the process peak RSS (ru_maxrss) after load + warm-up + 3 runs,
and the baseline of a process that only imported the engine.

    python benchmarks/bench_memory.py [resnet50 mobilenet_v2 bert_layer] [--threads 2] [--runs 4]
    python benchmarks/bench_memory.py resnet50_b32 --pkg /path/to/pkg   # a separate build (KILN_MODELS=resnet50@32)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import numpy as np
engine, name, threads, load, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
import kiln
from kiln.validate import onnx_path_of, ort_session
rec = next(r for r in kiln.manifest()["models"] if r["name"] == name)
path = str(onnx_path_of(rec))
shape = rec["inputs"][0]["shape"]
if engine == "kiln":
    kiln._core.set_num_threads(threads)
    if load:
        m = kiln.load(name)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        for _ in range(runs):
            m.run(x)
else:
    import onnxruntime
    if load:
        s = ort_session(path, threads=threads)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        for _ in range(runs):
            s.run(None, {s.get_inputs()[0].name: x})
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(engine: str, name: str, threads: int, load: bool, runs: int, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, engine, name, str(threads), "1" if load else "0", str(runs)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--pkg", help="directory holding the kiln package to measure (default: the installed one)")
    args = ap.parse_args()
    import os
    env = dict(os.environ)
    if args.pkg:
        env["PYTHONPATH"] = args.pkg
        sys.path.insert(0, args.pkg)
    import kiln
    print(f"peak RSS in MB, one process per engine, {args.threads} threads (baseline = imports only)")
    for name in args.models or kiln.models():
        rec = kiln.load(name).record
        row = {e: (measure(e, name, args.threads, False, args.runs, env),
                   measure(e, name, args.threads, True, args.runs, env))
               for e in ("kiln", "ort")}
        print(f"{name:<14} kiln {row['kiln'][1]:7.1f} (baseline {row['kiln'][0]:.1f}, "
              f"arena {rec['arena_bytes'] / 2**20:.2f}, weights {rec['weights_bytes'] / 2**20:.1f})   "
              f"ORT {row['ort'][1]:7.1f} (baseline {row['ort'][0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
