"""Bottleneck types and cost-model suggestions for `kiln visualize`.

A kernel's type comes from its predicted pipes (the cost model's replay, equal to the emulator's counters):
the pipe with the most busy cycles is the limit (M: Cube-bound, V: Vector-bound, MTE1/MTE2/MTE3/FIX:
MTE-bound), unless even that pipe is idle most of the time on the cores that run it: then the kernel waits on
flags, instruction heads and unevenly filled cores (latency-bound).

Suggestions are replays, not guesses: every tiling candidate of the kernel's family that fits the profile's
buffers (the search.py-style enumeration, wider than the build's search, which replays only its best six
exactly) is ranked by the quick two-core replay and the best are replayed exactly; for a strided convolution
whose channels fill little of C0, the space-to-depth relayout of its input is replayed as the equivalent
stride-1 convolution. When nothing is predicted faster, the suggestion names the limiting pipe and what would
have to change, with the floor the profile allows.
"""
from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .codegen.ir.manifest import KernelRecord

PIPE_TYPE = {"M": "Cube-bound", "V": "Vector-bound", "MTE1": "MTE-bound", "MTE2": "MTE-bound",
             "MTE3": "MTE-bound", "FIX": "MTE-bound", "S": "latency-bound"}
LATENCY_UTIL = 0.5      # below this busy share of its own cores, the limiting pipe is not what sets the time
EXACT = 16              # candidates replayed exactly after the quick ranking
QUICK_ALL = 48          # up to this many candidates, all are replayed exactly


def classify(record: KernelRecord, summary: dict) -> dict:
    """Type of a kernel from its predicted pipes; `summary` is trace.pipe_summary (busy share per pipe of the
    cores that ran it)."""
    pipes = record.predicted_pipes or {}
    if not pipes:
        return {"type": "unknown", "pipe": None, "utilisation": None}
    bound = record.bound_unit or max(pipes, key=lambda p: pipes[p].busy)
    util = summary.get(bound, {}).get("active_utilisation")
    kind = PIPE_TYPE.get(bound, "MTE-bound")
    if util is not None and util < LATENCY_UTIL:
        kind = "latency-bound"
    return {"type": kind, "pipe": bound, "utilisation": util}


# ---------------------------------------------------------------- tiling candidates

def candidates(family: str, spec, params: dict, profile) -> list[dict]:
    """Tilings of `family` for `spec` that fit the profile's buffers (current one excluded): the family's own
    tuning space (codegen/families/<family>.py `space`)."""
    from .codegen.families.registry import FAMILIES
    f = FAMILIES[family]
    if getattr(spec, "mid", 0) or f.space is None:  # a chained conv's tiling space is the build search's own
        return []
    cur = dict(params)
    return [dict(cur, **c) for c in f.space(spec, params, profile) if dict(cur, **c) != cur]


def wide_candidates(family: str, spec, params: dict, profile) -> list[dict]:
    """Cube tilings with base_m/base_n any multiple of 16 (the family's `wide_space`; a chained conv's is the build's
    L2 re-ranking's alone)."""
    from .codegen.families.registry import FAMILIES
    f = FAMILIES[family]
    if getattr(spec, "mid", 0) or f.wide_space is None:
        return []
    return f.wide_space(spec, params, profile)


def best_tiling(family: str, spec, params: dict, profile) -> tuple[float, dict, int] | None:
    """(cycles, params, candidates considered) of the fastest candidate by exact replay, or None: the
    search.py-style grid plus the wider Cube tilings, ranked by the quick replay, the best replayed exactly."""
    from .codegen.families.registry import predict
    cands, seen = [], set()
    for p in candidates(family, spec, params, profile) + wide_candidates(family, spec, params, profile):
        key = tuple(sorted(p.items()))
        if key not in seen:
            seen.add(key)
            cands.append(p)
    if not cands:
        return None
    considered = len(cands)
    if len(cands) > QUICK_ALL:
        cands = sorted(cands, key=lambda p: (predict(spec, family, p, profile, sample=True).cycles,
                                             sorted(p.items())))[:EXACT]
    exact = [(predict(spec, family, p, profile).cycles, i, p) for i, p in enumerate(cands)]
    cyc, _, p = min(exact, key=lambda e: (e[0], e[1]))
    return cyc, p, considered


def _blocks(family: str, spec, params: dict, profile) -> int:
    from .codegen.families.registry import record
    _, launches = record(spec, family, params, profile)
    return max((len(cores) for _, _, cores in launches), default=0)


# ---------------------------------------------------------------- relayouts

def space_to_depth(spec):
    """The stride-1 convolution equal to `spec` after a space-to-depth relayout of its (padded) input by its
    stride, when that packs more channels into C0=16; None if it does not apply."""
    from .codegen.ir.opspec import Conv2dSpec
    if spec.kind != "conv2d" or (spec.sh, spec.sw) == (1, 1) or (spec.dh, spec.dw) != (1, 1) or spec.cin2:
        return None
    cin = spec.cin * spec.sh * spec.sw
    if spec.cin >= 16 or cin > 16:
        return None
    s2 = Conv2dSpec(n=spec.n, cin=cin, h=ceil((spec.h + spec.pt + spec.pb) / spec.sh),
                    w=ceil((spec.w + spec.pl + spec.pr) / spec.sw), cout=spec.cout, kh=ceil(spec.kh / spec.sh),
                    kw=ceil(spec.kw / spec.sw), sh=1, sw=1, pt=0, pl=0, pb=0, pr=0, dh=1, dw=1, bias=spec.bias,
                    relu=spec.relu, residual=spec.residual, clip_hi=spec.clip_hi)
    if (s2.ho, s2.wo) != (spec.ho, spec.wo):
        return None
    return s2


# ---------------------------------------------------------------- the suggestion of one kernel

def _fmt_params(new: dict, old: dict) -> str:
    changed = [k for k in new if new[k] != old.get(k)]
    return ", ".join(f"{k}={new[k]} (was {old.get(k)})" for k in changed)


def suggest(record: KernelRecord, spec, profile, summary: dict, kind: dict) -> dict:
    """{"text", "predicted_cycles", "gain", "source", "alternatives": [...], "diagnosis"} for one kernel."""
    from .codegen.families.registry import family_for, predict, tunable
    from .codegen.ir.optlog import OptLog
    family, params = record.family, record.tiling
    base = record.predicted_cycles
    if base is None:
        pred = predict(spec, family, params, profile)
        base = pred.cycles if pred else None
    found: list[dict] = []
    if base:
        bt = best_tiling(family, spec, params, profile)
        if bt and bt[0] < base * 0.995:
            cyc, p, n = bt
            blocks_new = _blocks(family, spec, p, profile)
            pin = tunable().get(family)
            how = (" -- pin it with `tiling = { " + ", ".join(f"{k} = {p[k]}" for k in pin) + " }` in a kernel "
                   "list entry, or as a tuning record (KILN_TUNING_RECORDS)") if pin else \
                " -- no kernel-list pin for this family: a change of its rule in codegen/families/"
            found.append({"source": "tiling replay", "predicted_cycles": cyc, "gain": 1 - cyc / base,
                          "text": f"try tiling {_fmt_params(p, params)}: predicted {cyc:,.0f} cycles "
                                  f"({-100 * (1 - cyc / base):+.1f}%), {record.blocks} -> {blocks_new} blocks "
                                  f"(best of {n} fitting candidates, exact replay){how}",
                          "params": p})
        elif bt:
            found.append({"source": "tiling replay", "predicted_cycles": None, "gain": 0.0, "params": None,
                          "text": f"the current tiling is the fastest of {bt[2]} fitting candidates "
                                  f"(best other: {bt[0]:,.0f} cycles)"})
        for alg, cyc in (record.compared_cycles or {}).items():
            if alg != record.algorithm and cyc < base * 0.995:
                found.append({"source": "algorithm replay", "predicted_cycles": cyc, "gain": 1 - cyc / base,
                              "params": None,
                              "text": f"pin algorithm = \"{alg}\" in the kernel list: predicted {cyc:,.0f} cycles "
                                      f"({-100 * (1 - cyc / base):+.1f}%)"})
        s2 = space_to_depth(spec) if spec.kind == "conv2d" else None
        if s2 is not None:
            v = family_for(s2).choose(s2, profile, OptLog(), True)
            cyc = predict(s2, v.family, v.params, profile).cycles
            if cyc < base * 0.995:
                found.append({"source": "relayout replay", "predicted_cycles": cyc, "gain": 1 - cyc / base,
                              "params": v.params,
                              "text": f"relayout this convolution's input: a {spec.sh}x{spec.sw} space-to-depth of "
                                      f"the padded input (cin {spec.cin} -> {s2.cin} of C0=16 lanes) makes it "
                                      f"{s2.kh}x{s2.kw} stride 1 ({s2.name}): predicted {cyc:,.0f} cycles "
                                      f"({-100 * (1 - cyc / base):+.1f}%) with its searched tiling, plus the "
                                      f"relayout (free if folded into the host's input conversion)"})
    diagnosis = diagnose(record, spec, profile, summary, kind)
    useful = sorted((f for f in found if f["predicted_cycles"] is not None), key=lambda f: f["predicted_cycles"])
    if useful:
        top = useful[0]
        return {**top, "alternatives": [f for f in found if f is not top], "diagnosis": diagnosis}
    return {"source": "diagnosis", "predicted_cycles": None, "gain": 0.0, "params": None, "text": diagnosis,
            "alternatives": found, "diagnosis": diagnosis}


def diagnose(record: KernelRecord, spec, profile, summary: dict, kind: dict) -> str:
    """What limits the kernel and what would have to change, in the profile's terms."""
    pipe, util = kind.get("pipe"), kind.get("utilisation")
    f = record.features
    unit_cores = profile.cores_for("vector" if record.unit == "vector" else "cube")
    blocks = record.blocks
    parts = []
    if pipe == "MTE2":
        moved = record.predicted_pipes["MTE2"].bytes
        # what has to be read at least: inputs and weights (the opspec features), else all operand bytes
        ideal = max(1, (f.get("bytes_in", 0) + f.get("bytes_weights", 0)) or f["bytes"])
        rate = profile.gm_to_l1_bpc if record.unit == "cube" else profile.gm_to_ub_bpc
        floor = ideal / (rate * unit_cores)
        parts.append(f"MTE2-limited: GM reads {moved / 1e6:.2f} MB, {moved / ideal:.1f}x the "
                     f"{ideal / 1e6:.2f} MB of inputs and weights")
        if spec.kind in ("gemm", "bgemm"):
            parts.append("A is re-read once per N tile and B once per M tile: larger base_n/base_m cut the re-reads, "
                         "bounded by L0C and by keeping every core busy")
        elif spec.kind == "conv2d":
            parts.append("input rows are re-read once per N tile and weights once per M tile")
            if f.get("c0_padding_waste", 0) > 0.25:
                parts.append(f"{100 * f['c0_padding_waste']:.0f}% of the Cube's C0 lanes are channel padding "
                             f"(cin={spec.cin}): pack channels (space-to-depth, or merge with a neighbour)")
        parts.append(f"floor at {rate} B/cycle on {unit_cores} cores: {floor:,.0f} cycles")
    elif pipe in ("MTE1", "MTE3", "FIX"):
        parts.append(f"{pipe}-limited: {record.predicted_pipes[pipe].bytes / 1e6:.2f} MB through {pipe}; "
                     f"larger base_k1 (fewer, longer L1->L0 loads) amortises the per-instruction heads")
    elif pipe == "M":
        waste = f.get("c0_padding_waste", 0)
        parts.append(f"Cube-limited: mmad busy; {100 * waste:.0f}% of the fractal MACs are padding")
        if spec.kind == "conv2d" and (spec.kh, spec.kw, spec.sh, spec.sw) == (3, 3, 1, 1):
            parts.append("Winograd cuts the MACs (USE_WINOGRAD=ON or a pinned algorithm)")
    elif pipe == "V":
        mix = summary.get("V", {}).get("mix", [])
        tot = sum(m[2] for m in mix) or 1
        top = ", ".join(f"{m[0]} {100 * m[2] / tot:.0f}%" for m in mix[:3])
        parts.append(f"Vector-limited: {top} of the V cycles; fewer fp32 round trips (Cast) or fp16 arithmetic "
                     f"where accuracy allows")
    unit = record.unit
    if blocks < unit_cores:
        parts.append(f"{blocks} blocks leave {unit_cores - blocks} of {unit_cores} {unit} cores idle")
    elif blocks % unit_cores and blocks < 4 * unit_cores:
        rounds = ceil(blocks / unit_cores)
        parts.append(f"{blocks} blocks on {unit_cores} {unit} cores: {rounds} rounds, the last with "
                     f"{blocks - (rounds - 1) * unit_cores} block(s)")
    if kind.get("type") == "latency-bound":
        parts.append(f"the busiest pipe ({pipe}) is busy only {100 * (util or 0):.0f}% of the time on the cores that "
                     f"run it: the kernel waits on loads before the first compute, flags and uneven rounds; a block "
                     f"count that fills the cores evenly and smaller first tiles (earlier overlap) help")
    return "; ".join(parts) if parts else f"bound by {pipe}"
