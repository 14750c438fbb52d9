"""Build speed: a clean `pip install .` of the default zoo, an unchanged rebuild, and a rebuild after one option change.

Each round is a `pip install -v` of this checkout into a fresh scratch target directory with its own
scikit-build-core build directory (the persistent `build-dir` cache, as in development): first clean, then
again unchanged, then with one option changed. Every step is timed end to end; from the build directory's
.ninja_log it also reports the ninja part (everything after configure), the objects compiled and the slowest
build edges (per-TU compile times), and from the codegen's progress lines the time of its tiling search at
configure and at build time. `other_load_cores` is the CPU the rest of the machine used during the step (from
/proc/stat, minus this benchmark's own children): timings are only comparable when it is near 0.

Build requirements must already be installed (`pip install scikit-build-core pybind11 jinja2 numpy onnx cmake
ninja`), because the steps use --no-build-isolation so the build directory is reused as it is during
development; --isolated makes the clean step an isolated `pip install -v .` as CI runs it.

    python benchmarks/bench_build.py [--work DIR (default: kiln-bench-build in the system temp dir)]
        [--option MAX_FUSION_DEPTH=4] [--rounds 1]
                                     [--isolated] [--top 8] [--json out.json] [--markdown out.md]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (all cores), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ninja_edges(log: Path, before: set[str]) -> list[tuple[float, float, str]]:
    """(start s, end s, output) of the build edges ninja ran since the log held the lines `before` (compared as
    sets: ninja may recompact the log); a command with several outputs, such as the codegen, is listed once."""
    if not log.is_file():
        return []
    seen, edges = set(), []
    for line in log.read_text().splitlines():
        if line.startswith("#") or line in before:
            continue
        start, end, _mtime, path, cmdhash = line.split("\t")
        if cmdhash in seen:
            continue
        seen.add(cmdhash)
        edges.append((int(start) / 1000, int(end) / 1000, path))
    return edges


def log_lines(log: Path) -> set[str]:
    return set(log.read_text().splitlines()) if log.is_file() else set()


def edge_name(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-2] if name.endswith(".o") else name


# Where a step's phases start in pip -v's output (scikit-build-core's *** lines, kiln's codegen progress).
PHASES = [("configure", r"\*\*\* Configuring CMake"), ("codegen_outputs", r"\[kiln codegen .*model "),
          ("build", r"\*\*\* Building project"), ("install", r"\*\*\* Installing project"),
          ("wheel", r"\*\*\* Making wheel"), ("pip_install", r"Processing .*\.whl|Successfully built")]


def pip_install(work: Path, defines: list[str], isolated: bool = False) -> dict:
    build = work / "build"
    cmd = [sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--target", str(work / "site"), "--upgrade",
           f"-Cbuild-dir={build}", *[f"-Ccmake.define.{d}" for d in defines], str(REPO)]
    if not isolated:
        cmd.insert(4, "--no-build-isolation")
    ninja_log = build / ".ninja_log"
    before = log_lines(ninja_log)
    busy0, own0, load0 = cpu_busy_seconds(), children_cpu_seconds(), os.getloadavg()[0]
    t0 = time.perf_counter()
    # Output read line by line as it comes, each line stamped with its time: the phases of the step
    # (configure, codegen, compile, wheel, install) are then in the log.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    stamped = [f"{time.perf_counter() - t0:7.2f} {line}" for line in p.stdout]
    rc = p.wait()
    dt = time.perf_counter() - t0
    busy1, own1 = cpu_busy_seconds(), children_cpu_seconds()
    log = "".join(stamped)
    (work / "logs").mkdir(exist_ok=True)
    (work / "logs" / f"step{len(list((work / 'logs').glob('*.log')))}.log").write_text(log)
    if rc:
        sys.exit(f"pip install failed:\n{log[-6000:]}")
    phases = {}
    for name, pattern in PHASES:
        m = re.search(r"^ *([\d.]+) .*(?:" + pattern + ")", log, re.M)
        if m:
            phases[name] = float(m.group(1))
    edges = ninja_edges(ninja_log, before)
    compiles = [e for e in edges if e[2].endswith(".o") or e[2].endswith(".gch")]
    searches = [float(x) for x in re.findall(r"search: done in ([\d.]+) s", log)]
    return {
        "seconds": round(dt, 1),
        "ninja_seconds": round(max((e[1] for e in edges), default=0.0), 1),
        "objects_compiled": sum(1 for e in edges if e[2].endswith(".o")),
        "compile_cpu_seconds": round(sum(e[1] - e[0] for e in compiles), 1),
        # the configure-time run (`codegen outputs`) prints first, the build-time run (`generate`) second
        "search_seconds": searches,
        "slowest": [(edge_name(p), round(e - s, 2)) for s, e, p in sorted(edges, key=lambda e: e[0] - e[1])],
        "phase_start_seconds": phases,
        "loadavg_before": round(load0, 2),
        "other_load_cores": round(max(0.0, (busy1 - busy0) - (own1 - own0)) / dt, 2),
    }


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"


def commit() -> str:
    r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (r.stdout.strip() or "unknown") + ("+dirty" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "kiln-bench-build"))
    ap.add_argument("--option", default="MAX_FUSION_DEPTH=4", help="the option changed for the third build")
    ap.add_argument("--rounds", type=int, default=1, help="clean/unchanged/changed rounds; the summary is the median")
    ap.add_argument("--isolated", action="store_true", help="clean step as an isolated `pip install -v .` (CI)")
    ap.add_argument("--top", type=int, default=8, help="slowest build edges listed per step")
    ap.add_argument("--json")
    ap.add_argument("--markdown",
                    help="write the summary table (benchmarks/RESULTS.md's build-speed section) to this file")
    args = ap.parse_args()
    work = Path(args.work)
    steps = (("clean build", []), ("unchanged rebuild", []), (f"rebuild after {args.option}", [args.option]))
    rounds = []
    for n in range(args.rounds):
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        rows = []
        for i, (label, defines) in enumerate(steps):
            row = {"step": label, **pip_install(work, defines, isolated=args.isolated and i == 0)}
            rows.append(row)
            slow = ", ".join(f"{p} {s:.1f}" for p, s in row["slowest"][:args.top])
            print(f"[round {n + 1}] {label:<34} {row['seconds']:6.1f} s (ninja {row['ninja_seconds']:5.1f} s)  "
                  f"objects: {row['objects_compiled']:3d}  compile CPU: {row['compile_cpu_seconds']:6.1f} s  "
                  f"search: {row['search_seconds']}  other load: {row['other_load_cores']} cores\n"
                  f"          phases start at (s): {row['phase_start_seconds']}\n"
                  f"          slowest: {slow}", flush=True)
        rounds.append(rows)
    summary = [{"step": label, "median_seconds": round(statistics.median(r[i]["seconds"] for r in rounds), 1),
                "seconds": [r[i]["seconds"] for r in rounds],
                "objects_compiled": rounds[-1][i]["objects_compiled"],
                "max_other_load_cores": max(r[i]["other_load_cores"] for r in rounds)}
               for i, (label, _) in enumerate(steps)]
    info = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "commit": commit(),
            "isolated_clean": args.isolated, "rounds": rounds, "summary": summary}
    print("\nmedian over", args.rounds, "round(s):")
    for s in summary:
        print(f"  {s['step']:<34} {s['median_seconds']:6.1f} s  (runs {s['seconds']}, other load <= "
              f"{s['max_other_load_cores']} cores)")
    if args.json:
        Path(args.json).write_text(json.dumps(info, indent=1))
    if args.markdown:
        md = [f"Measured {info['date']} on {info['machine']}, commit {info['commit']}; "
              f"`python benchmarks/bench_build.py --rounds {args.rounds}`"
              + (" --isolated" if args.isolated else "") + ".", "",
              "| step | median s | runs s | objects compiled | other load (cores) |", "|---|---|---|---|---|"]
        md += [f"| {s['step']} | {s['median_seconds']} | {', '.join(map(str, s['seconds']))} | "
               f"{s['objects_compiled']} | {s['max_other_load_cores']} |" for s in summary]
        Path(args.markdown).write_text("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
