"""The public corpus (issue 17): every real export in shared/models baked in one build, then per model the ONNX
node count, ONNX Runtime's node count after its own optimisation (ORT_ENABLE_ALL, Constant nodes excluded),
kiln's launches, validation against ONNX Runtime (cosine, max relative error, top-1 over 3 seeds), the worst
isolated per-kernel error as a share of its bound (docs/numerics.md), simulated cycles (the build's profile) and
CPU ms of kiln's emulation against ONNX Runtime fp32 at batch 1 (same process, alternating runs, medians).

    python benchmarks/bench_corpus.py [--models DIR] [--build-dir DIR] [--runs 10] [--threads 2] [--markdown]

Builds into --build-dir (default build/corpus; reused and rebuilt incrementally), then re-runs itself against that
build (one process imports one kiln build)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = ["squeezenet1_1", "shufflenet_v2_x1_0", "efficientnet_b0", "mobilenet_v3_small", "mobilenet_v2",
          "bert_layer_torch"]


def build(models_dir: Path, build_dir: Path, names: list[str]) -> Path:
    """Configures and builds the corpus models with a one-kernel kernel list; returns the package directory."""
    build_dir.mkdir(parents=True, exist_ok=True)
    kl = build_dir / "one.toml"
    kl.write_text('[[op]]\nlabel = "k"\ntype = "Relu"\nshape = [16]\n')
    files = ";".join(str(models_dir / f"{n}.onnx") for n in names)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(build_dir / "cmake"), *gen,
                    f"-DPython_EXECUTABLE={sys.executable}", f"-DKILN_MODELS={files}", f"-DKILN_KERNEL_LIST={kl}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build_dir / "cmake"), "-j", "2"], check=True, stdout=subprocess.DEVNULL)
    pkg = build_dir / "pkg" / "kiln"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(REPO / "python" / "kiln", pkg)
    shutil.copytree(REPO / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("models", "opspecs"):
        shutil.copytree(build_dir / "cmake" / "generated" / sub, pkg / sub)
    for so in (build_dir / "cmake").glob("_core*"):
        shutil.copy(so, pkg)
    return pkg.parent


def ort_nodes_after_optimisation(path: Path) -> int:
    import onnx
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(Path(d) / "opt.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return sum(1 for n in onnx.load(so.optimized_model_filepath).graph.node if n.op_type != "Constant")


def measure(name: str, path: Path, runs: int, threads: int) -> dict:
    import numpy as np
    import onnx

    import kiln
    from kiln.validate import ort_session, per_kernel, validate
    m = kiln.load(name)
    report = validate(m, seeds=(0, 1, 2))
    rows = per_kernel(m)
    gated = [r for r in rows if r.get("checked")]
    sess = ort_session(path, threads=threads)
    x = np.random.default_rng(0).standard_normal(m.inputs[0][1]).astype(np.float32)
    feed = {sess.get_inputs()[0].name: x}
    m.run(x)
    sess.run(None, feed)
    t_kiln, t_ort = [], []
    for _ in range(runs):  # alternating, so both see the same machine state
        t0 = time.perf_counter()
        m.run(x)
        t_kiln.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        sess.run(None, feed)
        t_ort.append((time.perf_counter() - t0) * 1e3)
    return {
        "model": name, "onnx_nodes": len(onnx.load(str(path), load_external_data=False).graph.node),
        "ort_nodes": ort_nodes_after_optimisation(path), "launches": m.kernel_launches,
        "cosine": min(o["cosine"] for o in report["outputs"]),
        "max_rel_err": max(o["max_rel_err"] for o in report["outputs"]),
        "top1": report.get("top1_agreement"), "passed": report["passed"],
        "isolated_worst": max((r["error_ratio"] for r in gated), default=None),
        "isolated_failed": sum(1 for r in gated if not r["passed"]), "kernels_checked": len(gated),
        "simulated_cycles": m.simulated_cycles, "profile": kiln.build_info()["profile"],
        "kiln_ms": statistics.median(t_kiln), "ort_ms": statistics.median(t_ort),
    }


def markdown(rows: list[dict], threads: int, runs: int) -> str:
    head = ("| model | ONNX nodes | ORT nodes (optimised) | kiln launches | cosine | max rel err | top-1 | isolated "
            "worst error / bound (kernels) | simulated cycles | kiln ms | ORT ms | kiln/ORT |\n"
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | not baked: {r['error']} |")
            continue
        top1 = "n/a" if r["top1"] is None else f"{r['top1']:.0%}"
        lines.append(f"| {r['model']} | {r['onnx_nodes']} | {r['ort_nodes']} | {r['launches']} | {r['cosine']:.6f} | "
                     f"{r['max_rel_err']:.4f} | {top1} | {r['isolated_worst']:.2f} ({r['kernels_checked']}, "
                     f"{r['isolated_failed']} failed) | {r['simulated_cycles']:,.0f} | {r['kiln_ms']:.1f} | "
                     f"{r['ort_ms']:.1f} | {r['kiln_ms'] / r['ort_ms']:.2f}x |")
    return "\n".join(lines) + f"\n\nBatch 1, {threads} threads, median of {runs} alternating runs after a warm-up; " \
        f"simulated cycles for profile {rows[0].get('profile', '?')}.\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=Path, default=REPO.parent / "shared" / "models")
    ap.add_argument("--build-dir", type=Path, default=REPO / "build" / "corpus")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=CORPUS, help="model names (file stems) to bake and measure")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--_measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._measure:
        import kiln
        kiln._core.set_num_threads(args.threads)
        rows = []
        for name in args.only:
            try:
                rows.append(measure(name, args.models / f"{name}.onnx", args.runs, args.threads))
            except Exception as e:  # a model the build did not bake: say so in its row
                rows.append({"model": name, "error": f"{type(e).__name__}: {e}"[:200]})
        print(json.dumps(rows))
        return 0
    missing = [n for n in args.only if not (args.models / f"{n}.onnx").is_file()]
    if missing:
        print(f"bench_corpus: missing {', '.join(missing)} in {args.models}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    pkg = build(args.models, args.build_dir, args.only)
    built = time.perf_counter() - t0
    r = subprocess.run([sys.executable, __file__, "--_measure", "--models", str(args.models), "--runs", str(args.runs),
                        "--threads", str(args.threads), "--only", *args.only], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(pkg)))
    if r.returncode:
        print(r.stdout[-2000:] + r.stderr[-4000:], file=sys.stderr)
        return 1
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    print(markdown(rows, args.threads, args.runs) if args.markdown else json.dumps(rows, indent=1))
    print(f"(build {built:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
