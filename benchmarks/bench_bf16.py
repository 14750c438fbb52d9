"""fp16 vs bf16 builds side by side: the emulator's wall time on this CPU for a large GEMM kernel and for
ResNet-50 end to end, at 1 and 2 threads (medians; each build in its own process, the processes alternating).

Builds two small packages from this checkout (ResNet-50 and the GEMM kernel only; the same options except
KILN_DTYPE, KILN_ISA=auto) unless --fp16-pkg / --bf16-pkg name existing ones (directories holding a `kiln`
package, e.g. from tests/conftest.build_package):

    python benchmarks/bench_bf16.py [--work DIR (default: kiln-bf16-bench in the system temp dir)] [--rounds 5]
        [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEMM = "gemm_cube_m128_k768_n3072_bias"  # bert_layer's FFN up-projection, the largest GEMM of the zoo
KERNEL_LIST = textwrap.dedent("""
    [[op]]
    label = "bench.ffn_up"
    type = "Gemm"
    a = [128, 768]
    b = [768, 3072]
    bias = true
""")

# One measurement process: the GEMM kernel on random packed inputs and ResNet-50 on a random image.
MEASURE = textwrap.dedent("""
    import json, statistics, sys, time
    import numpy as np
    import kiln
    from kiln.runtime import as_packed
    threads, repeat = int(sys.argv[1]), int(sys.argv[2])
    kiln.set_num_threads(threads)
    k = next(k for k in kiln.kernels() if k.name.startswith(sys.argv[3]))
    rng = np.random.default_rng(0)
    ins = [as_packed(rng.standard_normal(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    out = k.empty_output()
    m = kiln.load("resnet50")
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)

    def med(fn, n):
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(ts)

    gemm_ms = med(lambda: k.run_packed(*ins, out=out), 3 * repeat)
    print(json.dumps({"dtype": kiln.build_info()["dtype"], "isa": kiln.build_info()["isa"], "kernel": k.name,
                      "flops": 2 * k.spec["m"] * k.spec["k"] * k.spec["n"], "gemm_ms": gemm_ms,
                      "resnet50_ms": med(lambda: m.run(x), repeat)}))
""")


def build(root: Path, dtype: str) -> Path:
    """cmake configure + build of this checkout with ResNet-50 and the GEMM, laid out as an importable package."""
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    kl = root / "kernels.toml"
    root.mkdir(parents=True, exist_ok=True)
    kl.write_text(KERNEL_LIST)
    b = root / "build"
    for cmd in (["cmake", "-S", str(REPO), "-B", str(b), *gen, f"-DPython_EXECUTABLE={sys.executable}",
                 "-DKILN_MODELS=resnet50", f"-DKILN_KERNEL_LIST={kl}", f"-DKILN_DTYPE={dtype}", "-DKILN_ISA=auto",
                 "-DKILN_TUNING_RECORDS="],
                ["cmake", "--build", str(b), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{' '.join(cmd[:3])} failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    pkg = root / "pkg" / "kiln"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(REPO / "python" / "kiln", pkg)
    shutil.copytree(REPO / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    for so in b.glob("_core*"):
        shutil.copy(so, pkg)
    shutil.copytree(b / "generated" / "models", pkg / "models")
    return pkg.parent


def measure(pkg: Path, threads: int, repeat: int) -> dict:
    r = subprocess.run([sys.executable, "-c", MEASURE, str(threads), str(repeat), GEMM], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(pkg)))
    if r.returncode:
        sys.exit(r.stdout + r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "kiln-bf16-bench"),
                    help="where the two builds go")
    ap.add_argument("--fp16-pkg", help="an existing fp16 package directory (skips that build)")
    ap.add_argument("--bf16-pkg", help="an existing bf16 package directory (skips that build)")
    ap.add_argument("--rounds", type=int, default=5, help="processes per build and thread count (alternating)")
    ap.add_argument("--repeat", type=int, default=10, help="ResNet-50 runs per process (the GEMM: 3x)")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    work = Path(args.work)
    pkgs = {"fp16": Path(args.fp16_pkg) if args.fp16_pkg else build(work / "fp16", "fp16"),
            "bf16": Path(args.bf16_pkg) if args.bf16_pkg else build(work / "bf16", "bf16")}
    runs: dict[tuple[str, int], list[dict]] = {}
    for _ in range(args.rounds):
        for threads in (1, 2):
            for dtype, pkg in pkgs.items():
                runs.setdefault((dtype, threads), []).append(measure(pkg, threads, args.repeat))
    rows = []
    for (dtype, threads), rs in runs.items():
        gemm = statistics.median(r["gemm_ms"] for r in rs)
        rows.append({"dtype": dtype, "threads": threads, "isa": rs[0]["isa"], "kernel": rs[0]["kernel"],
                     "gemm_ms": round(gemm, 3), "gemm_gflops": round(rs[0]["flops"] / gemm / 1e6, 1),
                     "resnet50_ms": round(statistics.median(r["resnet50_ms"] for r in rs), 2)})
    print(f"{'dtype':<6}{'threads':>8}  {'isa':<12}{'GEMM ms':>9}{'GFLOP/s':>9}{'ResNet-50 ms':>14}")
    for r in sorted(rows, key=lambda r: (r["threads"], r["dtype"] != "fp16")):
        print(f"{r['dtype']:<6}{r['threads']:>8}  {r['isa']:<12}{r['gemm_ms']:>9.2f}{r['gemm_gflops']:>9.1f}"
              f"{r['resnet50_ms']:>14.2f}")
    by = {(r["dtype"], r["threads"]): r for r in rows}
    for t in (1, 2):
        print(f"bf16/fp16 at {t} thread(s): GEMM {by[('bf16', t)]['gemm_ms'] / by[('fp16', t)]['gemm_ms']:.2f}x, "
              f"ResNet-50 {by[('bf16', t)]['resnet50_ms'] / by[('fp16', t)]['resnet50_ms']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": args.rounds, "repeat": args.repeat, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
