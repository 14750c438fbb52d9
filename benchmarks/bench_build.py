"""Build speed: a clean build of the default zoo, an unchanged rebuild, and a rebuild after one option change.

Each step is a `pip install` of this checkout into a scratch target directory with its own scikit-build-core
build directory, timed end to end; the codegen's own progress lines give the time of its stages (the
tiling search prints its wall time). Build requirements must already be installed (`pip install
scikit-build-core pybind11 jinja2 numpy onnx cmake ninja`), because the steps use --no-build-isolation so the
build directory is reused as it is during development.

    python benchmarks/bench_build.py [--work /tmp/kiln-bench-build] [--option MAX_FUSION_DEPTH=4] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pip_install(work: Path, defines: list[str]) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps", "--target",
           str(work / "site"), "--upgrade", f"-Cbuild-dir={work / 'build'}",
           *[f"-Ccmake.define.{d}" for d in defines], str(REPO)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"pip install failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return dt, r.stdout + r.stderr


def summary(log: str) -> dict:
    compiled = len(re.findall(r"Building CXX object", log))
    search = re.search(r"search: done in ([\d.]+) s", log)
    return {"objects_compiled": compiled, "search_s": float(search.group(1)) if search else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/kiln-bench-build")
    ap.add_argument("--option", default="MAX_FUSION_DEPTH=4", help="the option changed for the third build")
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    rows = []
    for label, defines in (("clean build", []), ("unchanged rebuild", []), (f"rebuild after {args.option}", [args.option])):
        dt, log = pip_install(work, defines)
        rows.append({"step": label, "seconds": round(dt, 1), **summary(log)})
        print(f"{label:<36} {dt:7.1f} s  objects compiled: {rows[-1]['objects_compiled']:4d}  "
              f"search: {rows[-1]['search_s']} s", flush=True)
    info = {"cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
