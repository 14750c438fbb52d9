"""Direct (img2col Cube) vs Winograd F(2x2,3x3) vs F(4x4,3x3), side by side, for ResNet-50's stride-1 3x3
convolutions and a 19x19 map (the seeds' case where Winograd lost).

Builds one small kernel set in which every case is baked three times, each with its algorithm pinned by the
kernel list (`algorithm = "..."`), then runs all of them in one process, alternating the variants round by
round: simulated cycles on the profile (deterministic), the cost model's prediction, and the median CPU wall
time of the emulation. The last column is what USE_WINOGRAD=AUTO picks for the case (fewest predicted cycles).

    python benchmarks/bench_winograd.py [--build-dir build/bench-winograd] [--rounds 9] [--target ascend910b]
                                        [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ALGORITHMS = ("direct_img2col", "winograd_f2", "winograd_f4")
# (label, channels, map size): ResNet-50's 3x3 stride-1 convs (one per stage) and the 19x19 case.
CASES = [("resnet50.layer1.conv2", 64, 56), ("resnet50.layer2.conv2", 128, 28), ("resnet50.layer3.conv2", 256, 14),
         ("resnet50.layer4.conv2", 512, 7), ("map19x19", 256, 19)]


def kernel_list() -> str:
    out = []
    for label, c, hw in CASES:
        for algo in ALGORITHMS:
            out.append(textwrap.dedent(f"""
                [[op]]
                label = "{label}.{algo}"
                type = "Conv"
                input = [1, {c}, {hw}, {hw}]
                weight = [{c}, {c}, 3, 3]
                pads = [1, 1, 1, 1]
                bias = true
                activation = "Relu"
                algorithm = "{algo}"
            """))
    return "".join(out)


RUN = textwrap.dedent("""
    import json, statistics, sys, time
    import numpy as np
    import kiln
    rounds = int(sys.argv[1])
    rng = np.random.default_rng(0)
    ks = kiln.kernels()
    ins = {k.name: [rng.standard_normal(t["shape"]).astype(np.float16 if t["dtype"] == "fp16" else np.float32)
                    for t in k.record["inputs"]] for k in ks}
    outs = {k.name: k.empty_output() for k in ks}
    times = {k.name: [] for k in ks}
    for k in ks:  # warm-up
        k.run_packed(*ins[k.name], out=outs[k.name])
    for _ in range(rounds):  # alternate the variants: drift on the machine hits all of them alike
        for k in ks:
            t0 = time.perf_counter()
            k.run_packed(*ins[k.name], out=outs[k.name])
            times[k.name].append(time.perf_counter() - t0)
    rows = []
    for k in ks:
        st = k.last_stats
        rows.append({"kernel": k.name, "algorithm": k.record["algorithm"], "instances": k.record["instances"],
                     "simulated_cycles": st["cycles"], "predicted_cycles": k.record["predicted_cycles"],
                     "simulated_us": st["simulated_us"], "cpu_ms": 1e3 * statistics.median(times[k.name]),
                     "flops": k.record["features"]["flops"]})
    print(json.dumps({"build": kiln.build_info(), "rows": rows}))
""")


def build(build_dir: Path, target: str) -> Path:
    build_dir.mkdir(parents=True, exist_ok=True)
    kl = build_dir / "winograd_cases.toml"
    kl.write_text(kernel_list())
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in (["cmake", "-S", str(REPO), "-B", str(build_dir / "cmake"), *gen,
                 f"-DPython_EXECUTABLE={sys.executable}", "-DKILN_MODELS=", f"-DKILN_KERNEL_LIST={kl}",
                 f"-DKILN_TARGET={target}"],
                ["cmake", "--build", str(build_dir / "cmake"), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{' '.join(cmd[:3])} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    pkg = build_dir / "pkg" / "kiln"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(REPO / "python" / "kiln", pkg)
    shutil.copytree(REPO / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    for so in (build_dir / "cmake").glob("_core*"):
        shutil.copy(so, pkg)
    return pkg.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(REPO / "build" / "bench-winograd"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--target", default="ascend910b")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    pkg_root = build(Path(args.build_dir), args.target)
    env = dict(os.environ, PYTHONPATH=str(pkg_root))
    r = subprocess.run([sys.executable, "-c", RUN, str(args.rounds)], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    result = json.loads(r.stdout)
    info = result["build"]
    by_case: dict[str, dict[str, dict]] = {}
    for row in result["rows"]:
        for inst in row["instances"]:
            case, _, algo = inst.rpartition(".")
            by_case.setdefault(case, {})[algo] = row
    print(f"Simulated on {info['profile']} (not measured hardware); CPU: host ISA {info['isa']}, "
          f"{info['threads']} threads, median of {args.rounds} alternating rounds.\n")
    print("| case | direct cycles | F(2,3) cycles | F(4,3) cycles | direct CPU ms | F(2,3) CPU ms | F(4,3) CPU ms "
          "| AUTO picks |")
    print("|---|--:|--:|--:|--:|--:|--:|---|")
    table = []
    for label, c, hw in CASES:
        rows = by_case[label]
        cyc = {a: rows[a]["simulated_cycles"] for a in ALGORITHMS}
        pred = {a: rows[a]["predicted_cycles"] for a in ALGORITHMS}
        auto = min(ALGORITHMS, key=lambda a: (pred[a], a))
        print(f"| {label} {c}ch {hw}x{hw} | " + " | ".join(f"{cyc[a]:,.0f}" for a in ALGORITHMS) + " | "
              + " | ".join(f"{rows[a]['cpu_ms']:.2f}" for a in ALGORITHMS) + f" | {auto} |")
        table.append({"case": label, "channels": c, "size": hw, "auto": auto,
                      **{a: {k: rows[a][k] for k in ("kernel", "simulated_cycles", "predicted_cycles", "cpu_ms")}
                         for a in ALGORITHMS}})
    if args.json:
        Path(args.json).write_text(json.dumps({"build": info, "cases": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
