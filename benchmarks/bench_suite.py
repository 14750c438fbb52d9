"""The suite behind the performance table in benchmarks/RESULTS.md: `kiln bench` over the zoo, and
the largest GEMM and convolution kernels alone against the machine's measured peak.

- ResNet-50 and MobileNetV2 at batch 1 and 32 (batch 32 only where `<model>_b32` is baked),
  bert_layer at batch 1; each at 1 and 2 threads; kiln vs ONNX Runtime and OpenVINO, each engine
  in its own process, rounds alternating the engines (see kiln/bench.py).
- The baked gemm_cube and conv2d_cube_img2col kernels with the most FLOPs, timed alone
  (run_packed, median), as GFLOP/s and % of the fp32 GEMM peak at the same thread count.

On a shared machine a case that ran beside other work (other processes used >= 0.1 cores, see
`other_load_cores`) is run again, up to --retries times, keeping the run with the least other load.

Writes a JSON and a markdown table stamped with the date, machine, kiln ISA and git commit
(run it from the repository so the commit is known). Not part of the test run.

    python benchmarks/bench_suite.py [--json perf.json] [--markdown perf.md] [--repeat 10] [--rounds 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time

import numpy as np

import kiln
from kiln import bench
from kiln.runtime import as_packed

MODELS = (("resnet50", 1), ("resnet50", 32), ("mobilenet_v2", 1), ("mobilenet_v2", 32), ("bert_layer", 1))
PEERS = ("ort", "openvino", "torch")
PEER_TITLES = {"ort": "ORT", "openvino": "OpenVINO", "torch": "PyTorch"}
KERNEL_FAMILIES = ("gemm_cube", "conv2d_cube_img2col")
QUIET_LOAD = 0.1  # cores of other work below which a case counts as measured on a quiet machine


def baked_name(model: str, batch: int) -> str:
    return model if batch == 1 else f"{model}_b{batch}"


def time_kernel(k: kiln.Kernel, threads: int, repeat: int) -> dict:
    """Median wall time of one kernel on random packed inputs (the emulator computes the real result)."""
    kiln._core.set_num_threads(threads)
    rng = np.random.default_rng(bench.SEED)
    ins = [as_packed(rng.standard_normal(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    out = k.empty_output()
    k.run_packed(*ins, out=out)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        k.run_packed(*ins, out=out)
        times.append(time.perf_counter() - t0)
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
            "simulated_cycles": k.last_stats["cycles"]}


def largest_kernels() -> list[kiln.Kernel]:
    """Per family, the baked kernel with the most FLOPs."""
    out = []
    for family in KERNEL_FAMILIES:
        ks = [k for k in kiln.kernels() if k.family == family]
        if ks:
            out.append(max(ks, key=lambda k: k.record["features"]["flops"]))
    return out


def least_loaded(what: str, fn, retries: int) -> dict:
    """fn()'s result, measured again (up to `retries` times) while other processes kept >= QUIET_LOAD cores
    busy; the run with the least other load is kept."""
    best = None
    for attempt in range(retries + 1):
        again = f" (again: other processes used {best['other_load_cores']:.2f} cores)" if best else ""
        print(what + again, file=sys.stderr)
        load = bench.OtherLoad()
        r = fn()
        r["other_load_cores"], r["attempts"] = load.cores(), attempt + 1
        if best is None or (r["other_load_cores"] or 0) < (best["other_load_cores"] or 0):
            best = r
        if (best["other_load_cores"] or 0) < QUIET_LOAD:
            break
    return best


def run_suite(threads_list, repeat: int, warmup: int, rounds: int, kernel_repeat: int, retries: int) -> dict:
    t_start = time.monotonic()
    info = kiln.build_info()
    peaks = {t: least_loaded(f"peak fp32 GEMM at {t} thread(s)", lambda t=t: bench.measure_peak(t), retries)
             for t in threads_list}
    rows, not_baked, unavailable = [], [], {}
    for model, batch in MODELS:
        name = baked_name(model, batch)
        if name not in kiln.models():
            not_baked.append({"model": model, "batch": batch,
                              "reason": f"not baked: build with KILN_MODELS=\"...;{model}@{batch}\""})
            continue
        for t in threads_list:
            r = least_loaded(f"bench {name} at {t} thread(s)",
                             lambda name=name, t=t: bench.run(name, threads=t, peers=PEERS, peak=peaks[t],
                                                              timing=bench.Timing(repeat, warmup, rounds)), retries)
            unavailable.update({u["name"]: u["reason"] for u in r["unavailable"]})
            rows.append({**r, "model": model, "baked_name": name})
    kernels = []
    for k in largest_kernels():
        flops = k.record["features"]["flops"]
        for t in threads_list:
            m = least_loaded(f"kernel {k.name} at {t} thread(s)", lambda k=k, t=t: time_kernel(k, t, kernel_repeat),
                             retries)
            gflops = flops / m["median_ms"] / 1e6
            kernels.append({"kernel": k.name, "family": k.family, "flops": flops, "threads": t, **m,
                            "gflops": gflops, "pct_of_peak": 100 * gflops / peaks[t]["gflops"]})
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": bench.machine(), "isa": info["isa"], "dtype": info.get("dtype", "fp16"),
            "profile": info["profile"], "commit": bench.git_commit(),
            "threads": list(threads_list), "repeat": repeat, "warmup": warmup, "rounds": rounds,
            "peaks": {str(t): p for t, p in peaks.items()}, "models": rows, "not_baked": not_baked,
            "unavailable": unavailable, "kernels": kernels, "seconds": round(time.monotonic() - t_start, 1)}


def _engine(row: dict, name: str) -> dict | None:
    return next((e for e in row["engines"] if e["name"] == name), None)


def markdown(s: dict) -> str:
    m = s["machine"]
    peers = [p for p in PEERS if any(_engine(r, p) for r in s["models"])]
    peak_text = ", ".join(f"{t} thread{'s' if t != '1' else ''} {p['gflops']:.0f} GFLOP/s ({p['library']})"
                          for t, p in s["peaks"].items())
    lines = [f"Measured {s['date']} on {m['cpu']} ({m['cores']} cores), kiln ISA {s['isa']} "
             f"(simulated profile {s['profile']}), commit {s['commit'] or 'unknown'}; "
             f"`python benchmarks/bench_suite.py`, {s['seconds']:.0f} s.",
             "",
             f"Latency: median of {s['rounds']} rounds x {s['repeat']} runs after {s['warmup']} warm-up, "
             f"each engine in its own process, same ONNX file and input; "
             f"kiln {s.get('dtype', 'fp16')} (fp32 accumulate), peers fp32. "
             f"GFLOP/s from the ONNX graph's FLOPs; % of the measured peak (best fp32 GEMM 2048^3: {peak_text}). "
             f"kiln's simulated latency is the {s['profile']} figure of the same run, not a measurement.",
             ""]
    head = ["model", "batch", "threads", "kiln ms"] + [f"{PEER_TITLES[p]} ms" for p in peers] + \
           [f"kiln/{PEER_TITLES[p]}" for p in peers] + \
           [f"GFLOP/s (% peak) {PEER_TITLES.get(e, e)}" for e in ["kiln", *peers]] + \
           ["peak RSS MB " + " / ".join(["kiln", *(PEER_TITLES[p] for p in peers)]), "kiln simulated ms",
            "other load (cores)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in s["models"]:
        es = [_engine(r, e) for e in ["kiln", *peers]]
        cells = [r["model"], str(r["batch"]), str(r["threads"])]
        cells += [f"{e['median_ms']:.1f} ({e['min_ms']:.1f}-{e['max_ms']:.1f})" if e else "n/a" for e in es]
        cells += [f"{r['ratios'][p]:.2f}x" if p in r["ratios"] else "n/a" for p in peers]
        cells += [f"{e['gflops']:.1f} ({e['pct_of_peak']:.0f}%)" if e else "n/a" for e in es]
        cells.append(" / ".join(f"{e['peak_rss_mb']:.0f}" if e else "n/a" for e in es))
        cells.append(f"{es[0]['simulated_ms']:.3f}")
        load = r.get("other_load_cores")
        cells.append("unknown" if load is None else f"{load:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    for nb in s["not_baked"]:
        lines.append(f"| {nb['model']} | {nb['batch']} | {', '.join(map(str, s['threads']))} | {nb['reason']} |"
                     + " |" * (len(head) - 4))
    lines += ["", "Largest kernels alone (random packed inputs, median wall time of the emulation):", "",
              "| kernel | family | GFLOP | threads | median ms | GFLOP/s | % of peak | simulated cycles "
              "| other load (cores) |", "|---|---|---|---|---|---|---|---|---|"]
    for k in s["kernels"]:
        load = "unknown" if k["other_load_cores"] is None else f"{k['other_load_cores']:.2f}"
        lines.append(f"| {k['kernel']} | {k['family']} | {k['flops'] / 1e9:.3f} | {k['threads']} | "
                     f"{k['median_ms']:.2f} | {k['gflops']:.1f} | {k['pct_of_peak']:.0f}% | "
                     f"{k['simulated_cycles']:.0f} | {load} |")
    if s["unavailable"]:
        lines.append("")
        lines += [f"- {PEER_TITLES.get(p, p)}: unavailable: {why}" for p, why in s["unavailable"].items()]
    if any((r.get("other_load_cores") or 0) >= QUIET_LOAD for r in s["models"] + s["kernels"]):
        lines += ["", f"Rows with an other load of {QUIET_LOAD} cores or more ran beside other processes on this "
                      "machine (after the retries); their timings are not those of a quiet machine."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--markdown", help="write the markdown table here (default: print it)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per engine per round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel-repeat", type=int, default=15, help="timed runs per kernel")
    ap.add_argument("--retries", type=int, default=2, help="re-runs of a case that ran beside other work")
    args = ap.parse_args()
    if not kiln.models():
        print("bench_suite: this build has no models baked (KILN_MODELS)", file=sys.stderr)
        return 2
    threads = [int(t) for t in args.threads.split(",")]
    try:
        s = run_suite(threads, args.repeat, args.warmup, args.rounds, args.kernel_repeat, args.retries)
    except bench.BenchError as e:
        print(f"bench_suite: {e}", file=sys.stderr)
        return 2
    md = markdown(s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
