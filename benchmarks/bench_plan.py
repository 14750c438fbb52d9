"""Codegen planning time (`codegen.pipeline.plan`: frontend, fusion, the tiling search, the L2 plan and every
launch's prediction) per KILN_MODELS setting, with identical blocks costed once (codegen/cost/steady.py) and, for
comparison, replayed block by block (KILN_COST_EVERY_BLOCK=1, the path before it), in one run; and whether the two
plans are equal: every kernel's chosen variant and prediction (cycles, core cycles, busy cycles, instructions and
bytes per pipe, MACs, L2/HBM bytes, limits) and every model step's launch record.

Each (path, models) pair is planned in a fresh interpreter without the search cache, so the times compare the
codegen itself; `--jobs` is the search's worker count (the build's KILN_CODEGEN_JOBS). Integers, strings and
variants must be equal; floats equal to rel 1e-9 (the tolerance the emulator is held to; the steady replay's
results differ from the block-by-block ones only by rounding).

    python benchmarks/bench_plan.py [--models resnet50 --models resnet50@32] [--jobs 2] [--target ascend910b]
        [--paths steady,every] [--json out.json] [--dump DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Run in the child: plan, then dump every kernel's variant and prediction and every step's launch record.
CHILD = r"""
import json, sys, tempfile, time
from dataclasses import asdict
from pathlib import Path
tree, models, jobs, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, tree)
from codegen.options import parse_options
from codegen.pipeline import plan
raw = {"KILN_ISA_RESOLVED": "portable", "KILN_TARGET": target, "KILN_MODELS": models}
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as work:
    pl = plan(parse_options(raw), Path(tree), Path(work), jobs=jobs, kernel_list=False)
seconds = time.perf_counter() - t0
kernels = {}
for k in pl.kernels:
    p = k.prediction
    kernels[k.symbol] = {"family": k.variant.family, "params": k.variant.params,
                         "prediction": None if p is None else asdict(p)}
launches = {m.name: {str(i): None if r is None else r.to_json() for i, r in sorted(m.launches.items())}
            for m in pl.models}
print(json.dumps({"seconds": seconds, "kernels": kernels, "launches": launches}))
"""


def run_one(models: str, jobs: int, target: str, every_block: bool) -> dict:
    env = dict(os.environ, KILN_CODEGEN_JOBS=str(jobs), KILN_COST_EVERY_BLOCK="1" if every_block else "0")
    p = subprocess.run([sys.executable, "-c", CHILD, str(REPO), models, str(jobs), target],
                       capture_output=True, text=True, env=env, cwd=REPO)
    if p.returncode:
        sys.exit(f"planning {models!r} (every_block={every_block}) failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def differences(a, b, where: str = "") -> list[str]:
    """Where two dumps differ: floats beyond rel 1e-9, anything else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))[:5]}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9,
                                                                                          abs_tol=1e-9)
        return [] if ok else [f"{where}: {a!r} != {b!r}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", action="append", help="KILN_MODELS values (default: resnet50 and resnet50@32)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", default="ascend910b")
    ap.add_argument("--paths", default="steady,every", help="steady (identical blocks once), every (block by "
                    "block), or both, comma-separated")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dump", type=Path, help="write each plan's dump to DIR/MODELS.PATH.json")
    args = ap.parse_args()
    paths = args.paths.split(",")
    results = []
    for m in args.models or ["resnet50", "resnet50@32"]:
        dumps = {}
        for path in paths:
            t0 = time.perf_counter()
            r = dumps[path] = run_one(m, args.jobs, args.target, path == "every")
            launches = sum(len(v) for v in r["launches"].values())
            print(f"{m:14s} {args.target} jobs={args.jobs} {path:6s}: plan {r['seconds']:7.1f} s "
                  f"(wall {time.perf_counter() - t0:.1f} s), {len(r['kernels'])} kernels, {launches} launches",
                  flush=True)
            results.append({"models": m, "path": path, "target": args.target, "jobs": args.jobs,
                            "seconds": r["seconds"]})
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{m}.{path}.json").write_text(json.dumps(r))
        if len(dumps) == 2:
            diff = differences(*({k: v for k, v in d.items() if k != "seconds"} for d in dumps.values()))
            print(f"{m:14s} steady vs every block: {'equal' if not diff else f'{len(diff)} DIFFERENCES'}"
                  + "".join(f"\n    {d}" for d in diff[:20]), flush=True)
            results.append({"models": m, "differences": diff})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
