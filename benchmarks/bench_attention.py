"""Flash attention vs the unfused chain, side by side, on the installed build's kernels.

bert_layer's attention (12 heads, seq 128, head dim 64, scale 1/8) runs as the one attention_flash kernel
USE_FLASH_ATTENTION=ON bakes, and as the four kernels it replaces (Q.K^T batched GEMM, the scale, softmax,
.V batched GEMM), all in the default kernel list. Per variant: median CPU wall time of the emulation
(rounds alternate the variants), simulated cycles on the build's profile, GM bytes (every byte MTE2 reads
from GM and MTE3/Fixpipe writes to it, workspace included), and the largest difference of the two outputs.

    python benchmarks/bench_attention.py [--rounds 15] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import kiln

B, H, SEQ, D, SCALE = 1, 12, 128, 64, 0.125
FUSED = f"attention_flash_b{B}_h{H}_q{SEQ}_kv{SEQ}_d{D}_scale0p125"
UNFUSED = [f"batched_gemm_cube_b{B * H}_m{SEQ}_k{D}_n{SEQ}_bt", f"eltwise_vector_muls_0p125_{B * H * SEQ * SEQ}",
           f"softmax_vector_{B * H * SEQ}x{SEQ}", f"batched_gemm_cube_b{B * H}_m{SEQ}_k{SEQ}_n{D}"]


def gm_bytes(st: dict) -> int:
    return sum(st["pipes"][p]["bytes"] for p in ("MTE2", "MTE3", "FIX"))


def run_fused(k, q, kk, v):
    y = k.run_packed(q, kk, v)
    return y, k.last_stats["cycles"], gm_bytes(k.last_stats)


def run_unfused(ks, q, kk, v):
    scores, scale, softmax, context = ks
    cycles = gm = 0
    s = scores.run_packed(q.reshape(B * H, SEQ, D), kk.reshape(B * H, SEQ, D))
    stats = [scores.last_stats]
    s = scale.run_packed(s.reshape(-1))
    stats.append(scale.last_stats)
    p = softmax.run_packed(s.reshape(B * H * SEQ, SEQ))
    stats.append(softmax.last_stats)
    y = context.run_packed(p.reshape(B * H, SEQ, SEQ), v.reshape(B * H, SEQ, D))
    stats.append(context.last_stats)
    for st in stats:
        cycles += st["cycles"]
        gm += gm_bytes(st)
    return y.reshape(B, H, SEQ, D), cycles, gm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    fused = kiln.kernel(FUSED)
    unfused = [kiln.kernel(n) for n in UNFUSED]
    rng = np.random.default_rng(0)
    q, kk, v = (rng.standard_normal((B, H, SEQ, D)).astype(np.float16) for _ in range(3))
    variants = {"fused (attention_flash)": lambda: run_fused(fused, q, kk, v),
                "unfused (bgemm, muls, softmax, bgemm)": lambda: run_unfused(unfused, q, kk, v)}
    times = {name: [] for name in variants}
    result = {}
    for name, fn in variants.items():  # warm-up, and the deterministic figures
        result[name] = fn()
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    ys = [r[0].astype(np.float64) for r in result.values()]
    rows = []
    profile = fused.last_stats["profile"]
    print(f"bert_layer attention b{B} h{H} seq {SEQ} d{D}, profile {profile} (simulated), {args.rounds} rounds")
    print(f"{'variant':40s} {'launches':>8s} {'wall ms (median)':>17s} {'sim cycles':>11s} {'GM bytes':>10s}")
    for name, (_, cycles, gm) in result.items():
        launches = 1 if name.startswith("fused") else len(UNFUSED)
        med = statistics.median(times[name])
        rows.append({"variant": name, "launches": launches, "median_ms": round(med, 3), "simulated_cycles": cycles,
                     "gm_bytes": gm})
        print(f"{name:40s} {launches:8d} {med:17.3f} {cycles:11.0f} {gm:10d}")
    diff = float(np.abs(ys[0] - ys[1]).max())
    print(f"max |fused - unfused| = {diff:.4g}; score matrix {B * H * SEQ * SEQ * 2} B (fp16) per copy")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"profile": profile, "rounds": args.rounds, "rows": rows, "max_abs_diff": diff}, f, indent=1)


if __name__ == "__main__":
    main()
