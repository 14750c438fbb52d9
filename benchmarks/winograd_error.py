"""Error of Winograd F(2x2,3x3) and F(4x4,3x3) against direct convolution, fp16 in / fp32 accumulate.

For each case the inputs and weights are rounded to fp16 once; the reference is the float64
convolution of those rounded values, so the figures are the algorithms' own error:

    direct  fp16 products (exact in fp32), one fp32 GEMM of length Cin*9, output rounded to fp16
    F(2,3)  codegen.ir.winograd.conv2d_winograd_emulated(m=2, round_output=True): the kernel's numerics
    F(4,3)  the same with m=4

Errors are in units of u = 2**-11 (fp16 unit roundoff):
    max/max   max|y - ref| / max|ref|              (winograd.error_bound's metric)
    rms       ||y - ref||_2 / ||ref||_2
    max/s     max_i |y_i - ref_i| / s_i, s_i = sqrt(sum_k (x_k w_k)^2) over output i's
              Cin*9 terms: the spread of a sum of those terms with random signs, so the
              measure does not depend on Cin, on the data scale, or on output magnitude
    z         (Winograd only, before the fp16 output rounding; plain number, not in u)
              max_i |y_i - ref_i| / sigma_i, sigma_i = winograd.error_sigma(): the error's
              standard deviation predicted by the rounding model for this very data and
              tile position. Scale-free like max/s, but it also accounts for the whole
              input patch and the tile position, which max/s cannot see (Winograd error
              at output i comes from the patch of its tile, not from its 3x3 window).
The pre-rounding (fp32 output) figures go to --json as well. A second table gives the RMS
error by position in the output tile against the rounding model's prediction.

Tail: max/max is a ratio of two maxima and is noisy on small outputs. For small shapes,
--tail-seeds runs per shape give the factor the scalar winograd.error_bound must allow,
(max/max / u - 1) / noise_gain(m) (its SAFETY constant), and the largest
|err| / winograd.elementwise_bound (the per-element tolerance; must stay below 1).

Data (fixed seed): x ~ N(0,1) ("normal"), x ~ U[0,1) ("uniform", post-ReLU-like) and
"smooth" (ReLU of 3x3-box-blurred noise: neighbouring pixels correlated like feature maps);
weights He-normal, std sqrt(2 / (Cin*9)); no bias. Batch 1, stride 1.

    python benchmarks/winograd_error.py [--seeds 1] [--tail-seeds 1000] [--seed 0] [--json out.json]

About 30 s on one core with the defaults (numpy only; nothing is built).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the source tree's codegen
from codegen.ir import winograd as wg

U = 2.0 ** -11

# (name, Cin, Cout, H, W, pads (top, left, bottom, right))
CASES = [
    ("resnet50 conv2_x", 64, 64, 56, 56, (1, 1, 1, 1)),
    ("resnet50 conv3_x", 128, 128, 28, 28, (1, 1, 1, 1)),
    ("resnet50 conv4_x", 256, 256, 14, 14, (1, 1, 1, 1)),
    ("resnet50 conv5_x", 512, 512, 7, 7, (1, 1, 1, 1)),
    ("19x19", 256, 256, 19, 19, (1, 1, 1, 1)),
    ("odd 7x9", 3, 5, 7, 9, (1, 1, 1, 1)),
    ("odd 11x13 pad0", 20, 24, 11, 13, (0, 0, 0, 0)),
    ("odd 13x10 asym", 16, 20, 13, 10, (0, 1, 1, 0)),
]
# small shapes for the tail of max/max (the sizes unit tests use; 9 and 16 outputs are extremes)
TAIL_CASES = [
    ("3->1 5x5 pad0", 3, 1, 5, 5, (0, 0, 0, 0)),
    ("1->1 6x6 pad0", 1, 1, 6, 6, (0, 0, 0, 0)),
    ("8->4 6x6", 8, 4, 6, 6, (1, 1, 1, 1)),
    ("3->5 7x9", 3, 5, 7, 9, (1, 1, 1, 1)),
    ("20->24 11x13 pad0", 20, 24, 11, 13, (0, 0, 0, 0)),
    ("32->32 16x16", 32, 32, 16, 16, (1, 1, 1, 1)),
]
DATA = ("normal", "uniform", "smooth")
METHODS = ("direct", "F(2,3)", "F(4,3)")
TILE = {"F(2,3)": 2, "F(4,3)": 4}


def make_data(kind: str, cin: int, cout: int, h: int, w: int, rng) -> tuple[np.ndarray, np.ndarray]:
    if kind == "normal":
        x = rng.standard_normal((1, cin, h, w))
    elif kind == "uniform":
        x = rng.random((1, cin, h, w))
    else:  # ReLU of a 3x3 box blur of noise, scaled back to unit variance before the ReLU
        z = rng.standard_normal((1, cin, h + 2, w + 2))
        x = np.maximum(sum(z[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)) / 3.0, 0)
    wt = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
    return x.astype(np.float16), wt.astype(np.float16)


def metrics(y: np.ndarray, ref: np.ndarray, s: np.ndarray, sigma: np.ndarray | None) -> dict[str, float]:
    err = np.abs(np.asarray(y, np.float64) - ref)
    out = {"max_rel": float(err.max() / np.abs(ref).max()),
           "rms_rel": float(np.sqrt((err ** 2).sum() / (ref ** 2).sum())),
           "max_norm": float((err / s).max())}
    if sigma is not None:
        out["z"] = float((err / sigma).max())
    return out


def run_case(case, kind: str, seed: int, methods=METHODS) -> dict:
    name, cin, cout, h, w, pads = case
    rng = np.random.default_rng([seed, cin, cout, h, w, *pads, DATA.index(kind)])
    x16, w16 = make_data(kind, cin, cout, h, w, rng)
    x64, w64 = x16.astype(np.float64), w16.astype(np.float64)
    ref = wg.conv2d_direct(x64, w64, None, pads)
    s = np.maximum(np.sqrt(wg.conv2d_direct(x64 ** 2, w64 ** 2, None, pads)), 2.0 ** -24)
    out = {}
    for meth in methods:
        if meth == "direct":
            y32 = wg.conv2d_direct(x16.astype(np.float32), w16.astype(np.float32), None, pads, np.float32)
            sigma = None
        else:
            y32 = wg.conv2d_winograd_emulated(x16, w16, None, TILE[meth], pads)
            sigma = wg.error_sigma(x16, w16, TILE[meth], pads)
        out[meth] = {"fp16": metrics(y32.astype(np.float16), ref, s, None), "fp32": metrics(y32, ref, s, sigma)}
        if sigma is not None:  # the recommended per-element test: must stay below 1
            bound = wg.elementwise_bound(x16, w16, TILE[meth], pads, ref)
            out[meth]["fp16"]["eb"] = float((np.abs(y32.astype(np.float16) - ref) / bound).max())
    return {"case": name, "cin": cin, "cout": cout, "h": h, "w": w, "pads": list(pads), "k_len": cin * 9,
            "data": kind, "seed": seed, "methods": out}


def worst(rows: list[dict]) -> list[dict]:
    """Max of every figure over seeds, per (case, data)."""
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = (r["case"], r["data"])
        if key not in merged:
            merged[key] = json.loads(json.dumps(r))
            continue
        for meth, outs in r["methods"].items():
            for out, ms in outs.items():
                tgt = merged[key]["methods"][meth][out]
                for k, v in ms.items():
                    tgt[k] = max(tgt[k], v)
    return list(merged.values())


def table(rows: list[dict]) -> str:
    head = ["case", "Cin", "HxW", "pads", "data"]
    for metric in ("max/max", "rms", "max/s"):
        head += [f"{metric} {m}" for m in METHODS]
    head += [f"z {m}" for m in TILE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 5 + "--:|" * 11]
    for r in rows:
        ms = r["methods"]
        cells = [r["case"], str(r["cin"]), f"{r['h']}x{r['w']}", ",".join(map(str, r["pads"])), r["data"]]
        for key in ("max_rel", "rms_rel", "max_norm"):
            cells += [f"{ms[m]['fp16'][key] / U:.2f}" for m in METHODS]
        cells += [f"{ms[m]['fp32']['z']:.2f}" for m in TILE]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Worst over all rows, fp16 output (fp32 output, before the final rounding), in u:")
    for m in METHODS:
        f = [f"{k} {max(r['methods'][m]['fp16'][key] for r in rows) / U:.2f} "
             f"({max(r['methods'][m]['fp32'][key] for r in rows) / U:.2f})"
             for k, key in (("max/max", "max_rel"), ("rms", "rms_rel"), ("max/s", "max_norm"))]
        lines.append(f"- {m}: " + ", ".join(f))
    lines.append("- max |err| / elementwise_bound (fp16 output): "
                 + ", ".join(f"{m} {max(r['methods'][m]['fp16']['eb'] for r in rows):.2f}" for m in TILE))
    lines.append("- noise_gain (model, worst tile position, pre-rounding): "
                 + ", ".join(f"{m} {wg.noise_gain(t):.2f}" for m, t in TILE.items()))
    return "\n".join(lines)


def tail_table(rows: list[dict]) -> str:
    lines = ["| shape (Cin->Cout HxW) | outputs | runs | " + " | ".join(
        f"{m} max/max median | {m} max/max p99.9 | {m} max/max max | {m} safety needed | {m} elementwise"
        for m in TILE) + " |", "|---|--:|--:|" + "--:|" * 5 * len(TILE)]
    for case in TAIL_CASES:
        _, _, cout, h, w, (pt, pl, pb, pr) = case
        rs = [r for r in rows if r["case"] == case[0]]
        cells = [case[0], str(cout * (h + pt + pb - 2) * (w + pl + pr - 2)), str(len(rs))]
        for m, t in TILE.items():
            mm = np.array([r["methods"][m]["fp16"]["max_rel"] / U for r in rs])
            cells += [f"{np.median(mm):.2f}", f"{np.percentile(mm, 99.9):.2f}", f"{mm.max():.2f}",
                      f"{(mm.max() - 1) / wg.noise_gain(t):.2f}",
                      f"{max(r['methods'][m]['fp16']['eb'] for r in rs):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def position_table(seed: int) -> str:
    """RMS error (before the output rounding) by position in the output tile, relative to the
    output's RMS, in u: measured on ResNet-50 conv2_x with normal data, and the rounding
    model's prediction for i.i.d. zero-mean data (noise_gain is its largest entry)."""
    case = CASES[0]
    _, cin, cout, h, w, pads = case
    x16, w16 = make_data("normal", cin, cout, h, w, np.random.default_rng([seed, 99]))
    ref = wg.conv2d_direct(x16.astype(np.float64), w16.astype(np.float64), None, pads)
    lines = []
    for meth, m in TILE.items():
        err = wg.conv2d_winograd_emulated(x16, w16, None, m, pads) - ref
        t = wg.tile(m)
        f = (t.AT ** 2) @ ((t.BT ** 2).sum(1) * (t.G ** 2).sum(1))
        model = np.sqrt(2 * wg.KAPPA / 9 * np.outer(f, f))
        lines += [f"{meth}, row i of the tile: measured (model) for columns j = 0..{m - 1}", ""]
        lines += ["| i | " + " | ".join(f"j={j}" for j in range(m)) + " |", "|---|" + "--:|" * m]
        for i in range(m):
            meas = [np.sqrt((err[..., i::m, j::m] ** 2).mean() / (ref ** 2).mean()) / U for j in range(m)]
            lines.append(f"| {i} | " + " | ".join(f"{a:.2f} ({b:.2f})" for a, b in zip(meas, model[i])) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1,
                    help="repeat every main case with this many seeds, report the max (0: skip)")
    ap.add_argument("--tail-seeds", type=int, default=1000, help="runs per small shape for the tail table (0: skip)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--json", help="write every run (fp16 and fp32 outputs) here")
    args = ap.parse_args()

    t0 = time.perf_counter()
    rows = [run_case(c, d, args.seed + i) for i in range(args.seeds) for c in CASES for d in DATA]
    if rows:
        print(f"Error vs the float64 reference of the same fp16 inputs, fp16 output, in u = 2^-11 "
              f"(z: plain number); max over {args.seeds} seed(s) from {args.seed}; all output channels.\n")
        print(table(worst(rows)))
    if rows:
        print(f"\nRMS error by output-tile position, {CASES[0][0]}, normal data, fp32 output, in u:\n")
        print(position_table(args.seed))
    # normal inputs only: their tail is the heavier one (uniform inputs add a mean to every output)
    tail = [run_case(c, "normal", args.seed + i, TILE) for c in TAIL_CASES for i in range(args.tail_seeds)]
    if tail:
        print(f"\nTail of max/max on small outputs ({args.tail_seeds} runs per shape, normal inputs, fp16 output, "
              f"in u; safety needed = (max/max - 1) / noise_gain; elementwise = max |err| / "
              f"winograd.elementwise_bound, must be < 1):\n")
        print(tail_table(tail))
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"unit": U, "rows": rows, "tail": tail}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
