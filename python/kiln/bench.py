"""`kiln bench MODEL`: kiln and the installed peer engines on the same ONNX file, side by side.

Every engine runs in its own child process (`python -m kiln.bench --child ...`), so its peak RSS
is its own and one engine's thread pool or allocator cannot slow another. Each child loads the
model, does the warm-up runs, then the timed runs on the same seeded input, with the same thread
count. The children run one after another in rounds, the engine order rotating each round, and
the rounds' timings are merged: drift of the machine over the run then lands on every engine.

GFLOP/s use one FLOP count for every engine (the ONNX graph's, as `kiln analyze` counts it) and
are also given as a % of this machine's fp32 GEMM peak, measured once per run at the same thread
count (the better of NumPy's BLAS and ONNX Runtime's MLAS on a 2048^3 product). kiln's latency is
the wall time of the emulation (real fp16 results plus the simulated pipes); the simulated Ascend
latency of the same run is reported beside it, labelled.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a peer's child process must not load kiln
    from .codegen.ir.manifest import ModelRecord

# Peer engine -> the module it needs. Tests remap an entry to simulate a peer that is not installed.
PEER_MODULES = {"ort": "onnxruntime", "openvino": "openvino", "torch": "torch"}
DEFAULT_PEERS = ("ort", "openvino")
PEAK_N = 2048  # the peak GEMM is PEAK_N^3, fp32
SEED = 0


class BenchError(Exception):
    """A request `kiln bench` cannot run (bad model, batch, peer); the message says why."""


def parse_peers(text: str | None) -> list[str]:
    if text is None:
        return list(DEFAULT_PEERS)
    peers = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in peers if p not in PEER_MODULES]
    if bad:
        raise BenchError(f"unknown peer {bad[0]!r}; accepted: {', '.join(PEER_MODULES)}")
    return list(dict.fromkeys(peers))


def resolve_model(name: str, batch: int | None) -> ModelRecord:
    """The manifest record of the baked model `name` (or of a `kiln compile` directory), at `batch` if given
    (`<name>_b<batch>`)."""
    import kiln

    from .compiled import is_compiled_dir
    if is_compiled_dir(name):
        rec = kiln.model_record(name)
        if batch is not None and batch != rec.inputs[0].shape[0]:
            raise BenchError(f"{name} holds {rec.name} compiled at batch {rec.inputs[0].shape[0]}, not {batch}; "
                             f"compile it at that batch with kiln compile MODEL@{batch}")
        return rec
    records = {r.name: r for r in kiln.manifest_record().models}
    by_onnx = {r.onnx: r for r in records.values()}
    rec = records.get(name) or by_onnx.get(name)
    if rec is None:
        raise BenchError(f"no baked model {name!r}; this build has: {', '.join(records) or 'none'} "
                         f"(bake more with -Ccmake.define.KILN_MODELS=...)")
    baked = rec.inputs[0].shape[0]
    if batch is None or batch == baked:
        return rec
    base = rec.name.rsplit("_b", 1)[0] if rec.name.rsplit("_b", 1)[-1].isdigit() else rec.name
    other = base if batch == 1 else f"{base}_b{batch}"
    if other in records:
        return records[other]
    # a model is baked at one batch: its kernels, tiling and arena are for that shape only
    raise BenchError(f"model {rec.name} is baked at batch {baked}, not {batch}, and this build has no "
                     f"{other}; bake it with -Ccmake.define.KILN_MODELS=\"...;{base}@{batch}\"")


def model_flops(rec: ModelRecord, onnx_path: Path, kernels: list) -> tuple[int, str]:
    """The model's FLOPs at its baked batch: the ONNX graph's count, else the sum over kiln's kernel launches."""
    batch = rec.inputs[0].shape[0]
    try:
        from .codegen.analyze import analyze
        return int(analyze(str(onnx_path), batch=batch)["flops"]), "onnx_graph"
    except Exception:
        flops = {k.name: k.features["flops"] for k in kernels}
        return sum(flops[s.kernel] for s in rec.kernel_steps), "kiln_kernels"


def _child_env(threads: int) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "KILN_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    # the child must import the same kiln as this process (e.g. a build tree put on sys.path)
    import site

    import kiln
    pkg_parent = str(Path(kiln.__file__).resolve().parent.parent)
    if pkg_parent not in {str(Path(p).resolve()) for p in site.getsitepackages()}:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_parent, env.get("PYTHONPATH")]))
    return env


def _spawn(args: list[str], threads: int) -> dict:
    """Runs a child (`python -m kiln.bench --child ...`); its last stdout line is its JSON result."""
    r = subprocess.run([sys.executable, "-m", "kiln.bench", *args], capture_output=True, text=True,
                       env=_child_env(threads))
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"child exited with {r.returncode}: {tail}"}
    return json.loads(lines[-1])


def measure_peak(threads: int) -> dict:
    """fp32 GEMM GFLOP/s at this thread count (median of 5), in a child so the thread pools are sized."""
    out = _spawn(["--peak", "--threads", str(threads)], threads)
    if "error" in out:
        raise BenchError(f"measuring the NumPy GEMM peak failed: {out['error']}")
    return out


def _peer_unavailable(peer: str) -> str | None:
    module = PEER_MODULES[peer]
    installed = importlib.util.find_spec(module) is not None
    if peer == "torch":  # the comparison is on one ONNX file, and PyTorch has no ONNX importer of its own
        return (f"PyTorch cannot run an ONNX file (no ONNX importer; onnx2torch is not available)"
                f"{'' if installed else f'; also not installed (No module named {module!r})'}")
    if not installed:
        return f"not installed (No module named {module!r}; pip install kiln[bench])"
    return None


class OtherLoad:
    """CPU time the rest of the machine used while we ran, in cores on average: the whole machine's busy time
    (/proc/stat) minus this process's and its children's. Timings taken beside another job are not worth much."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        import resource
        try:
            ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        except (OSError, ValueError):
            return None
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        own = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                  for f in ("ru_utime", "ru_stime"))
        return time.monotonic(), busy, own

    def cores(self) -> float | None:
        end = self._sample()
        if self.start is None or end is None or end[0] <= self.start[0]:
            return None
        wall, busy, own = (b - a for a, b in zip(self.start, end))
        return round(max(0.0, (busy - own) / wall), 2)


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "os": platform.platform()}


def git_commit(cwd: str | None = None) -> str | None:
    """`git describe --always --dirty` of the working directory's repo, if it is one."""
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                           text=True, cwd=cwd, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return r.stdout.strip() or None


@dataclass(frozen=True)
class Timing:
    """How each engine is timed: `repeat` timed runs after `warmup` untimed ones, per round; the engines take
    turns over `rounds` rounds (starting one later each round) and their timings are merged."""
    repeat: int = 10
    warmup: int = 2
    rounds: int = 3


def run(model: str, batch: int | None = None, threads: int | None = None, peers=DEFAULT_PEERS,
        timing: Timing = Timing(), peak: dict | None = None) -> dict:
    """The report behind `kiln bench` (docs/cli.md). `peak`: a measure_peak() result to reuse."""
    import kiln
    repeat, warmup, rounds = timing.repeat, timing.warmup, timing.rounds

    from .codegen.ir.profiles import PROFILES
    from .validate import onnx_path_of
    for what, v, low in (("--repeat", repeat, 1), ("--warmup", warmup, 0), ("--rounds", rounds, 1),
                         ("--batch", batch, 1)):
        if v is not None and v < low:
            raise BenchError(f"{what} must be >= {low}, got {v}")
    # every engine's pool gets this count (ONNX Runtime's intra-op threads, OpenMP's): the one bound of kiln's
    why = None if threads is None else kiln.thread_count_error(str(threads))
    if why:
        raise BenchError(f"--threads: {why}")
    rec = resolve_model(model, batch)
    from .compiled import is_compiled_dir
    target = model if is_compiled_dir(model) else rec.name  # what kiln.load takes, in this and the child process
    batch = rec.inputs[0].shape[0]
    threads = threads or machine()["cores"]
    try:
        onnx_path = onnx_path_of(rec)
    except FileNotFoundError as e:
        raise BenchError(str(e)) from None
    loaded = kiln.load(target) if target != rec.name else None  # a compiled directory's own build
    info = kiln.build_info(loaded)
    flops, flops_source = model_flops(rec, onnx_path, kiln.manifest_of(loaded).kernels)
    load = OtherLoad()
    peak = peak or measure_peak(threads)

    unavailable = {p: why for p in peers if (why := _peer_unavailable(p))}
    engines = ["kiln"] + [p for p in peers if p not in unavailable]
    results: dict[str, dict] = {e: {"times_ms": [], "peak_rss_mb": 0.0} for e in engines}
    common = ["--model", target, "--onnx", str(onnx_path), "--threads", str(threads),
              "--warmup", str(warmup), "--repeat", str(repeat)]
    for r in range(rounds):
        for engine in engines[r % len(engines):] + engines[:r % len(engines)]:
            if engine in unavailable:
                continue
            out = _spawn(["--child", engine, *common], threads)
            if "error" in out or "unavailable" in out:
                why = out.get("unavailable") or out["error"]
                if engine == "kiln":
                    raise BenchError(f"kiln on {rec['name']} failed: {why}")
                unavailable[engine] = why  # e.g. an import that fails only when loaded, or an op it rejects
                continue
            res = results[engine]
            res["times_ms"] += out["times_ms"]
            res["peak_rss_mb"] = max(res["peak_rss_mb"], out["peak_rss_mb"])
            res.update({k: v for k, v in out.items() if k not in ("times_ms", "peak_rss_mb")})

    rows = []
    for engine in engines:
        if engine in unavailable:
            continue
        res = results[engine]
        t = res.pop("times_ms")
        median = statistics.median(t)
        row = {"name": engine, "dtype": res.pop("dtype"), "median_ms": median, "min_ms": min(t), "max_ms": max(t),
               "throughput": batch * 1e3 / median, "gflops": flops / median / 1e6,
               "pct_of_peak": 100 * flops / median / 1e6 / peak["gflops"], "peak_rss_mb": res.pop("peak_rss_mb"),
               "runs": len(t), **res}
        if engine == "kiln":
            # the emulator also simulates the Ascend pipes: that run's latency on the profile, not a measurement
            clock_ghz = PROFILES[info["profile"]].clock_ghz
            row["simulated_profile"] = info["profile"]
            row["simulated_ms"] = row["simulated_cycles"] / (clock_ghz * 1e6)
        rows.append(row)
    kiln_ms = rows[0]["median_ms"]
    return {"model": rec.name, "load": target, "batch": batch, "threads": threads, "dtype": rows[0]["dtype"],
            "engines": rows, "ratios": {r["name"]: kiln_ms / r["median_ms"] for r in rows[1:]},
            "unavailable": [{"name": p, "reason": why} for p, why in unavailable.items()],
            "flops": flops, "flops_source": flops_source, "peak_gflops": peak["gflops"], "peak": peak,
            "isa": info["isa"], "profile": info["profile"], "onnx": str(onnx_path),
            "rounds": rounds, "repeat": repeat, "warmup": warmup,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": machine(), "commit": git_commit(), "other_load_cores": load.cores()}


def write_profile(model: str, path: str, threads: int | None = None, warmup: int = 2, repeat: int = 10) -> str:
    """Runs the baked model in this process and writes, per step, the median host wall time (the emulation's
    cost) and the simulated cycles: format kiln-profile/1, read by `kiln visualize --profile`."""
    import datetime
    import statistics

    import numpy as np

    import kiln
    m = kiln.load(model)  # a baked model's name or a `kiln compile` directory
    if threads:
        kiln.set_num_threads(threads)
        m.package.core.set_num_threads(threads)  # the same extension, unless m is a compiled directory's
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape).astype(np.float32) for _, shape in m.inputs]
    for _ in range(max(0, warmup)):
        m.run(*xs)
    per_step: list[list[float]] = []
    totals = []
    for _ in range(max(1, repeat)):
        m.run(*xs)
        secs = m.last_step_seconds
        per_step.append(secs)
        totals.append(sum(secs))
    steps, ks = [], iter(m.kernels)
    for i, st in enumerate(m.entry.steps):
        k = next(ks) if st.is_kernel else None
        steps.append({"index": i, "name": st.name, "kernel": st.kernel,
                      "cpu_ms": round(1e3 * statistics.median(run[i] for run in per_step), 6),
                      "simulated_cycles": k.simulated_cycles if k else None})
    info = kiln.build_info(m)
    out = {"format": "kiln-profile/1", "model": m.name, "profile": info["profile"], "isa": info["isa"],
           "threads": info["threads"], "repeat": max(1, repeat),
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "total_cpu_ms": round(1e3 * statistics.median(totals), 6), "simulated_cycles": m.simulated_cycles,
           "steps": steps}
    from .codegen.ir.files import write_atomic
    write_atomic(path, json.dumps(out, indent=1) + "\n")
    return str(path)


def format_text(r: dict) -> str:
    lines = [f"{r['model']} batch {r['batch']}, {r['threads']} threads, {r['flops'] / 1e9:.3f} GFLOP; "
             f"{r['rounds']} rounds x {r['repeat']} runs per engine after {r['warmup']} warm-up, "
             f"each engine in its own process; kiln ISA {r['isa']}",
             f"peak: fp32 GEMM {PEAK_N}^3 at {r['threads']} threads: {r['peak_gflops']:.1f} GFLOP/s "
             f"({r['peak'].get('library', 'given')}; "
             + ", ".join(f"{k} {v:.1f}" for k, v in r["peak"].get("sources", {}).items()) + ")",
             f"{'engine':<10}{'dtype':<7}{'median ms':>10}{'min ms':>9}{'max ms':>9}{'inf/s':>9}{'GFLOP/s':>9}"
             f"{'% peak':>8}{'RSS MB':>9}"]
    for e in r["engines"]:
        lines.append(f"{e['name']:<10}{e['dtype']:<7}{e['median_ms']:>10.2f}{e['min_ms']:>9.2f}{e['max_ms']:>9.2f}"
                     f"{e['throughput']:>9.1f}{e['gflops']:>9.1f}{e['pct_of_peak']:>7.1f}%{e['peak_rss_mb']:>9.1f}")
    for peer, ratio in r["ratios"].items():
        lines.append(f"kiln / {peer} latency: {ratio:.2f}x")
    k = r["engines"][0]
    lines.append(f"simulated {k['simulated_profile']} latency of kiln's run: {k['simulated_ms']:.3f} ms "
                 f"(simulated, not measured)")
    for u in r["unavailable"]:
        lines.append(f"{u['name']}: unavailable: {u['reason']}")
    if (r["other_load_cores"] or 0) >= 0.1:
        lines.append(f"warning: other processes kept {r['other_load_cores']:.2f} cores busy on average during the "
                     f"run; these timings are not those of a quiet machine")
    return "\n".join(lines)


# ---- child side: one engine, one process ------------------------------------------------------

def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM; ru_maxrss where /proc is absent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_runs(fn, warmup: int, repeat: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def _child(engine: str, model: str, onnx: str, threads: int, warmup: int, repeat: int) -> dict:
    import numpy as np

    import kiln
    rec = kiln.model_record(model)  # a baked model's name or a `kiln compile` directory; a peer loads no kiln model
    rng = np.random.default_rng(SEED)
    # kiln's record has the ONNX input names and the baked (concrete) shapes: one seeded input for every engine
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in rec.inputs}
    extra: dict = {}
    if engine == "kiln":
        m = kiln.load(model)
        m.package.core.set_num_threads(threads)
        xs = list(feeds.values())
        times = _time_runs(lambda: m.run(*xs), warmup, repeat)
        info = kiln.build_info(m)
        extra = {"dtype": info["dtype"],  # the build's KILN_DTYPE (Cube operands)
                 "threads_used": info["threads"], "simulated_cycles": m.simulated_cycles}
    elif engine == "ort":
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        sess = ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])
        times = _time_runs(lambda: sess.run(None, feeds), warmup, repeat)
        extra = {"dtype": "fp32", "version": ort.__version__}
    elif engine == "openvino":
        import openvino as ov
        # fp32 asked for explicitly: on CPUs with AMX/AVX512-BF16 OpenVINO would otherwise pick bf16
        compiled = ov.Core().compile_model(onnx, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                         "PERFORMANCE_HINT": "LATENCY",
                                                         "INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()
        times = _time_runs(lambda: req.infer(feeds), warmup, repeat)
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")
        name = precision.get_type_name() if hasattr(precision, "get_type_name") else str(precision)
        extra = {"dtype": {"f32": "fp32", "f16": "fp16"}.get(name, name), "version": ov.__version__}
    else:
        raise ValueError(f"engine {engine!r} has no runner")
    return {"times_ms": times, "peak_rss_mb": _peak_rss_mb(), **extra}


def _peak_child(threads: int) -> dict:
    """The best fp32 GEMM GFLOP/s of the libraries at hand: NumPy's BLAS, and ONNX Runtime's MLAS when it is
    installed (NumPy's OpenBLAS can miss a CPU's widest kernels and report half of what the machine does)."""
    import numpy as np
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((PEAK_N, PEAK_N), dtype=np.float32)
    b = rng.standard_normal((PEAK_N, PEAK_N), dtype=np.float32)

    def gflops(times: list[float]) -> float:
        return 2 * PEAK_N ** 3 / statistics.median(times) / 1e6

    blas = "blas"
    with contextlib.suppress(Exception):
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    sources = {f"numpy ({blas})": gflops(_time_runs(lambda: a @ b, 1, 5))}
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
        io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [PEAK_N, PEAK_N]) for n in "abc"]
        graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm", io[:2], io[2:])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
        sess = ort.InferenceSession(helper.make_model(graph).SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        sources["onnxruntime (MLAS)"] = gflops(_time_runs(lambda: sess.run(None, {"a": a, "b": b}), 1, 5))
    except Exception:
        pass
    best = max(sources, key=sources.get)
    return {"gflops": sources[best], "library": best, "sources": sources, "n": PEAK_N, "dtype": "fp32",
            "threads": threads, "method": f"fp32 GEMM {PEAK_N}^3, median of 5, best library"}


def _child_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kiln.bench", description="one engine of `kiln bench` (internal)")
    ap.add_argument("--child", help="engine to run")
    ap.add_argument("--peak", action="store_true", help="measure the NumPy fp32 GEMM peak")
    ap.add_argument("--model")
    ap.add_argument("--onnx")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    if args.peak:
        out = _peak_child(args.threads)
    else:
        try:
            out = _child(args.child, args.model, args.onnx, args.threads, args.warmup, args.repeat)
        except ImportError as e:  # a peer that is present but does not import
            out = {"unavailable": f"import failed: {e}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
