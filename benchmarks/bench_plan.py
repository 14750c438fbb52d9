"""Codegen planning time (`codegen.pipeline.plan`: frontend, fusion, the tiling search and every prediction), per
KILN_MODELS setting, for one or more source trees in one run, plus a hash of every file the default build renders.

Each (tree, models) pair is planned in a fresh interpreter (`python -c ...` with the tree first on sys.path), without
the search cache, so the times compare the codegen itself; `--jobs` is the search's worker count (the build's
KILN_CODEGEN_JOBS). `--hash` also plans the default build (kernel list and zoo, `KILN_ISA_RESOLVED=portable`),
renders it and prints the sha256 of every file, so two trees' outputs can be compared file by file.

    python benchmarks/bench_plan.py [--tree DIR ...] [--models "resnet50@32" --models ""] [--jobs 2]
        [--target ascend910b] [--hash] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Run in the child: plan (and optionally render and hash) with the tree given on the command line.
CHILD = r"""
import hashlib, json, sys, tempfile, time
from pathlib import Path
tree, models, jobs, target, do_hash = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
sys.path.insert(0, tree)
from codegen.options import parse_options
from codegen.pipeline import plan
raw = {"KILN_ISA_RESOLVED": "portable", "KILN_TARGET": target}
if models != "<default>":
    raw["KILN_MODELS"] = models
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as work:
    pl = plan(parse_options(raw), Path(tree), Path(work), jobs=jobs)
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "kernels": len(pl.kernels)}
    if do_hash:
        from codegen.emit.render import render
        files = render(pl)
        out["sha256"] = {name: hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()
                         for name, text in sorted(files.items())}
print(json.dumps(out))
"""


def run_one(tree: Path, models: str, jobs: int, target: str, do_hash: bool) -> dict:
    env = dict(os.environ, KILN_CODEGEN_JOBS=str(jobs))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, str(tree), models, str(jobs), target, "1" if do_hash else "0"],
                       capture_output=True, text=True, env=env, cwd=tree)
    if p.returncode:
        sys.exit(f"planning {models!r} with {tree} failed:\n{p.stderr[-4000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", type=Path, help="source tree(s) to time (default: this checkout)")
    ap.add_argument("--models", action="append", help="KILN_MODELS values (default: the default zoo and "
                    "resnet50@32); '<default>' is the option's default")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--target", default="ascend910b")
    ap.add_argument("--hash", action="store_true", help="also render the default build and hash every file")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    trees = args.tree or [REPO]
    models = args.models or ["<default>", "resnet50@32"]
    results = []
    for tree in trees:
        for m in models:
            r = run_one(tree.resolve(), m, args.jobs, args.target, False)
            print(f"{tree}  models={m!r}  target={args.target}  jobs={args.jobs}: plan {r['seconds']:.1f} s, "
                  f"{r['kernels']} kernels", flush=True)
            results.append({"tree": str(tree), "models": m, "target": args.target, "jobs": args.jobs, **r})
        if args.hash:
            r = run_one(tree.resolve(), "<default>", args.jobs, args.target, True)
            print(f"{tree}  default build rendered: {len(r['sha256'])} files", flush=True)
            results.append({"tree": str(tree), "models": "<default>", "hash": r["sha256"]})
    if args.hash and len(trees) > 1:
        hashes = [r["hash"] for r in results if "hash" in r]
        differ = sorted(n for n in set(hashes[0]) | set(hashes[1]) if hashes[0].get(n) != hashes[1].get(n))
        print(f"rendered files differing between the first two trees: {len(differ)} {differ[:20]}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
