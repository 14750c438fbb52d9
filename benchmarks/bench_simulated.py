"""Whole models on the simulated chip (issue 22 point 5's report), from the build's plan alone (no compile, no
emulator run: the cost model equals the emulator for every baked kernel, tests/codegen/cost).

Per model and profile: kernel launches, predicted latency (sum of each launch's predicted cycles, launch overhead
included), mean Cube utilisation (the MACs the Cube kernels ask for, an mmad's m x n x k with padded channels, over
the chip's Cube peak for that time; and the model's own MACs, each Cube kernel's spec without padding, over the
same: comparable across algorithms and layouts), the roofline floor (the asked MACs at the Cube peak, or its
compulsory bytes: weights, inputs and outputs once, at the chip's HBM read rate, whichever is longer) and how many
kernels each unit bounds (a pipe, L2 or HBM).

Per kernel (--kernels): its family and tiling, predicted cycles, the unit that bounds it, its Cube utilisation,
its own roofline floor (its MACs at the Cube peak, or its inputs and output moved once at the HBM read rate) and
its Cube ceiling: the utilisation a launch of it would reach with the Cube busy throughout, its MACs at the peak
plus the profile's launch overhead (a launch costs at least that, so no tiling takes a kernel beyond it; the
memory floor is not a bound where a step's inputs come from L2).

    python benchmarks/bench_simulated.py [--models "resnet50;mobilenet_v2;bert_layer"] [--target ascend910b]
        [--tree OLD_CHECKOUT] [--markdown] [--kernels] [--json out.json]

Planning runs the tiling search (no search cache): about a minute for the zoo at batch 1, much longer at batch
32 (issue 22 point 6).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The source tree whose codegen plans (--tree, default this checkout): read before the imports below.
TREE = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve() if "--tree" in sys.argv[:-1] else REPO
sys.path.insert(0, str(TREE))

from codegen.ir.profiles import Profile, get_profile  # noqa: E402
from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan  # noqa: E402
from codegen.select.plan import ModelPlan  # noqa: E402

CUBE_MACS_PER_CYCLE = 16 * 16 * 16  # one fp16 fractal per cycle per AI core (docs/ascend-model.md section 0)


def compulsory_bytes(m: ModelPlan) -> int:
    """Weights, graph inputs and graph outputs, each moved once."""
    low = m.lowered
    weights = sum(a.nbytes for a in low.weights.values())
    io = sum(low.storage[v].nbytes for v, _ in low.graph_inputs + low.graph_outputs if v in low.storage)
    return weights + io


@dataclass(frozen=True)
class Launch:
    predicted_cycles: float
    useful_macs: int
    bound: str


def predicted_launches(m: ModelPlan, profile: Profile) -> list[Launch | None]:
    """Each kernel step's launch as the build records it (its L2 plan included). A tree from before the memory
    system records none: there each kernel's prediction is its family's replay alone (--tree, for a before/after
    comparison in one run)."""
    if getattr(m, "launches", None):  # absent on a tree from before the memory system
        return [None if r is None else Launch(r.predicted_cycles, r.useful_macs, r.bound)
                for r in m.launches.values()]
    from codegen.families.base import predict
    out: list[Launch | None] = []
    for k in m.step_kernels.values():
        p = predict(k.spec, k.variant.family, k.variant.params, profile)
        out.append(None if p is None else Launch(p.cycles, p.useful_macs, p.bound_unit()))
    return out


def step_bytes(m: ModelPlan, i: int) -> int:
    """Step i's inputs (weights included) and output, each moved once."""
    low = m.lowered
    s = low.steps[i]
    sizes = [low.weights[v].nbytes if v in low.weights else low.storage[v].nbytes
             for v in [*s.inputs, s.output] if v in low.weights or v in low.storage]
    return sum(sizes)


def kernel_rows(m: ModelPlan, profile: Profile) -> list[dict]:
    """One row per kernel launch with a replay: what bounds it and how far it is from its own roofline."""
    peak = profile.cube_cores * CUBE_MACS_PER_CYCLE
    hbm_bpc = getattr(profile, "hbm_read_gbps", 0.0) / profile.clock_ghz
    launch = getattr(profile, "launch_cycles", 0.0)  # 0 on a tree from before launch overheads
    rows = []
    for i, k in m.step_kernels.items():
        r = m.launches.get(i) if getattr(m, "launches", None) else None
        if r is None:
            continue
        compute, memory = r.useful_macs / peak, step_bytes(m, i) / hbm_bpc if hbm_bpc else 0.0
        rows.append({"model": m.name, "step": i, "kernel": k.symbol, "tiling": k.variant.tag,
                     "cycles": round(r.predicted_cycles), "bound": r.bound,
                     "cube_utilization": round(r.useful_macs / (r.predicted_cycles * peak), 4),
                     "cube_utilization_model": round(model_macs(k) / (r.predicted_cycles * peak), 4),
                     "floor_cycles": round(max(compute, memory)),
                     "floor_bound": "compute" if compute >= memory else "memory",
                     "cube_ceiling": round(compute / (compute + launch), 4) if compute else 0.0,
                     "l2_hit_bytes": r.l2_hit_bytes, "hbm_bytes": r.hbm_bytes})
    return rows


def model_macs(k) -> int:
    """A Cube kernel's own MACs (its spec's, without channel or fractal padding; a Winograd conv's direct ones);
    0 for a kernel on the Vector unit."""
    return k.spec.flops // 2 if k.variant.unit == "cube" else 0


def model_row(m: ModelPlan, profile: Profile) -> dict:
    launches = predicted_launches(m, profile)
    known = [r for r in launches if r is not None]
    cycles = sum(r.predicted_cycles for r in known)
    useful = sum(r.useful_macs for r in known)
    peak = profile.cube_cores * CUBE_MACS_PER_CYCLE
    compute_floor = useful / peak
    hbm = getattr(profile, "hbm_read_gbps", 0.0)  # 0 (no memory floor) on a tree from before the memory system
    memory_floor = compulsory_bytes(m) / (hbm / profile.clock_ghz) if hbm else 0.0
    floor = max(compute_floor, memory_floor)
    return {"model": m.name, "profile": profile.name, "launches": len(launches),
            "unreplayed": len(launches) - len(known),
            "cycles": round(cycles), "us": round(cycles / profile.clock_ghz / 1e3, 1),
            "cube_utilization": round(useful / (cycles * peak), 4) if cycles else 0.0,
            "cube_utilization_model": round(sum(model_macs(k) for k in m.step_kernels.values()) / (cycles * peak), 4)
            if cycles else 0.0,
            "floor_cycles": round(floor), "floor_bound": "compute" if compute_floor >= memory_floor else "memory",
            "floor_share": round(floor / cycles, 4) if cycles else 0.0,
            "bounds": dict(Counter(r.bound for r in known).most_common()),
            "kernels": kernel_rows(m, profile)}


def plan_models(models: str, target: str) -> list[dict]:
    opts = parse_options({"KILN_ISA_RESOLVED": "portable", "KILN_TARGET": target, "KILN_MODELS": models})
    with tempfile.TemporaryDirectory() as work:
        pl = plan(opts, TREE, Path(work))
    profile = get_profile(target)
    return [model_row(m, profile) for m in pl.models]


def markdown(rows: list[dict]) -> str:
    out = ["| model | profile | launches | simulated cycles | us | Cube utilisation (asked / model MACs) "
           "| roofline floor (cycles, bound) | floor / simulated | bound units (kernels) |",
           "|---|---|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        bounds = ", ".join(f"{u} {n}" for u, n in r["bounds"].items())
        out.append(f"| {r['model']} | {r['profile']} | {r['launches']} | {r['cycles']:,} | {r['us']:,} | "
                   f"{r['cube_utilization']:.1%} / {r['cube_utilization_model']:.1%} | "
                   f"{r['floor_cycles']:,} ({r['floor_bound']}) | "
                   f"{r['floor_share']:.1%} | {bounds} |")
    return "\n".join(out)


def kernels_markdown(rows: list[dict]) -> str:
    out = ["| model | profile | step | kernel | tiling | cycles | bound | Cube utilisation (asked / model MACs) "
           "| floor (cycles, bound) | floor / cycles | Cube ceiling (MACs at peak + launch) |",
           "|---|---|--:|---|---|--:|---|--:|--:|--:|--:|"]
    for r in rows:
        for k in r["kernels"]:
            out.append(f"| {r['model']} | {r['profile']} | {k['step']} | {k['kernel']} | {k['tiling']} | "
                       f"{k['cycles']:,} | {k['bound']} | {k['cube_utilization']:.1%} / "
                       f"{k['cube_utilization_model']:.1%} | "
                       f"{k['floor_cycles']:,} ({k['floor_bound']}) | {k['floor_cycles'] / k['cycles']:.1%} | "
                       f"{k['cube_ceiling']:.1%} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50;mobilenet_v2;bert_layer")
    ap.add_argument("--target", action="append", help="profile(s) (default: ascend910b and ascend310p)")
    ap.add_argument("--tree", type=Path, help="plan with this source tree's codegen (e.g. an older checkout)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--kernels", action="store_true", help="also a row per kernel launch (with --markdown)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for target in args.target or ["ascend910b", "ascend310p"]:
        t0 = time.perf_counter()
        rows += plan_models(args.models, target)
        print(f"planned {args.models!r} on {target} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.markdown:
        print(markdown(rows) + ("\n\n" + kernels_markdown(rows) if args.kernels else ""))
    else:
        print(json.dumps(rows if args.kernels else [{k: v for k, v in r.items() if k != "kernels"} for r in rows],
                         indent=1))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
