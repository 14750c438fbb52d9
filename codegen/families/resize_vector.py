"""resize_vector: ONNX Resize / Upsample (nearest, bilinear) over H and W of NC1HWC0 on the Vector unit, a band of
output rows per block (templates/resize_vector.cpp.j2).

Every index and weight is a build-time constant (ResizeSpec.taps). The input rows a band reads come GM->UB (runs of
consecutive rows, one burst each). A column gather is a set of strided Vector copies of whole C0 pixels: the output
columns are covered by arithmetic progressions (output column d0 + j*P reads input column s0 + j*Q), each one
vcopy with a destination block stride of P and a source block stride of Q (a scale of 2 is two progressions per
row, 1.5 three). Nearest: a row is gathered once per run of output rows reading the same input row and stored
once per output row. Bilinear: each input row the band reads is interpolated along W first (two gathers, times the
per-column weight rows, which vdup builds once per block from progressions of equal weights, and a sum), then each
output row is the weighted sum of its two interpolated rows (scalar weights). A program epilogue
(codegen/passes/program_epilogue.py) runs on each computed output row before its store: cast to fp32, the
program's Vector instructions, cast back (nearest: once per run of output rows reading one input row)."""
from __future__ import annotations

from math import ceil

from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.eltwise_program import epilogue_steps, scratch_names, vector_ops
from ..ir.opspec import c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.resize_spec import ResizeSpec
from .base import Family, Variant, fits, r32, register, row_band_variant, splits

MAX_RUN = 255 * 8  # pixels one strided vcopy covers: 255 repeats of 8 C0 blocks
MAX_PERIOD = 16    # destination strides tried when covering a row with progressions
Run = tuple[int, int, int, int, int]  # (first output column, its step, first source, its step, count)


def _split(seq: list, start: int, step: int, same_step: bool) -> list[Run]:
    """The positions start, start + step, ... of seq as maximal runs whose values advance by one constant step
    (0..255 blocks; same_step=False: the values must be equal, a constant over the run)."""
    idx = list(range(start, len(seq), step))
    runs: list[Run] = []
    i = 0
    while i < len(idx):
        j, q = i + 1, 0
        if j < len(idx):
            q = seq[idx[j]] - seq[idx[i]] if same_step else 0
            if same_step and not 0 <= q <= 255:
                q = 0
        while j < len(idx) and j - i < MAX_RUN and seq[idx[j]] == seq[idx[j - 1]] + (q if same_step else 0):
            j += 1
        runs.append((idx[i], step, seq[idx[i]], q, j - i))
        i = j
    return runs


def instructions(runs: list[Run]) -> int:
    """Vector instructions a list of runs issues: full repeats of 8 pixels, then a masked tail."""
    return sum((cnt >= 8) + (cnt % 8 > 0) for *_, cnt in runs)


def progressions(seq: list, same_step: bool = True) -> list[Run]:
    """Output positions 0..len(seq)-1 covered by runs (cheapest destination period first): same_step, a gather
    (value = the source column); otherwise runs of equal values (a weight, written by vdup)."""
    best: list[Run] | None = None
    for period in range(1, min(MAX_PERIOD, len(seq)) + 1):
        runs = [r for k in range(period) for r in _split(seq, k, period, same_step)]
        if best is None or instructions(runs) < instructions(best):
            best = runs
    assert best is not None
    return best


def row_groups(spec: ResizeSpec, r0: int, rows: int) -> list[tuple[int, int, int]]:
    """Nearest: (input row, first output row, count) of each run of output rows of the band reading one row."""
    out: list[tuple[int, int, int]] = []
    for ro, (i, *_) in enumerate(spec.taps(0)[r0:r0 + rows], start=r0):
        if out and out[-1][0] == i:
            out[-1] = (i, out[-1][1], out[-1][2] + 1)
        else:
            out.append((i, ro, 1))
    return out


def band_rows(spec: ResizeSpec, r0: int, rows: int) -> list[int]:
    """The input rows a band of output rows reads, ascending."""
    taps = spec.taps(0)[r0:r0 + rows]
    return sorted({t[0] for t in taps} | {t[1] for t in taps if t[3] != 0.0})


def row_runs(rows: list[int]) -> list[tuple[int, int]]:
    """(first row, count) of each run of consecutive rows (one GM->UB burst each)."""
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][0] + out[-1][1] == r:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((r, 1))
    return out


def slab_rows(spec: ResizeSpec, rows_per_block: int) -> int:
    """The most input rows (first to last read) any band spans: the UB slab's height."""
    spans = [band_rows(spec, r0, min(rows_per_block, spec.ho - r0)) for r0 in range(0, spec.ho, rows_per_block)]
    return max(s[-1] - s[0] + 1 for s in spans)


def resize_buffers(spec: ResizeSpec, rows_per_block: int) -> dict[str, int]:
    slab, row_out = slab_rows(spec, rows_per_block), r32(spec.wo * 32)
    linear = slab * row_out + 4 * row_out if spec.mode == "linear" else 0  # interpolated rows, gathers, weights
    steps = epilogue_steps(spec.program)
    program = (1 + len(steps) + len(scratch_names(steps))) * r32(spec.wo * 64) if steps else 0  # fp32 rows
    return {"UB": r32(slab * spec.w * 32) + linear + 2 * row_out + program}


def resize_rule(spec: ResizeSpec, profile: Profile, log: OptLog) -> Variant:
    return row_band_variant("resize_vector", spec, profile, resize_buffers)


def resize_mte2(spec: ResizeSpec, v: Variant) -> int:
    rpb = v.params["rows_per_block"]
    rows = sum(len(band_rows(spec, r0, min(rpb, spec.ho - r0))) for r0 in range(0, spec.ho, rpb))
    return rows * spec.w * 32 * spec.n * c1(spec.c)


def column_tables(spec: ResizeSpec) -> dict:
    """What the template bakes for the columns: the gather runs of each tap and (bilinear) the weight runs."""
    taps = spec.taps(1)
    out: dict = {"gather0": progressions([t[0] for t in taps])}
    if spec.mode == "linear":
        out["gather1"] = progressions([t[1] for t in taps])
        out["weight0"] = progressions([t[2] for t in taps], same_step=False)
        out["weight1"] = progressions([t[3] for t in taps], same_step=False)
    return out


def _gather(core: SimCore, runs: list[Run], op: str = "Copy") -> None:
    for *_, cnt in runs:
        if cnt >= 8:
            core.vec(op, False, cnt // 8)
        if cnt % 8:
            core.vec(op, False, 1)


def _epilogue(core: SimCore, spec: ResizeSpec) -> None:
    """A program epilogue on one output row: cast to fp32, the program's VecOps (one pass), cast back."""
    program = vector_ops(epilogue_steps(spec.program))
    if program:
        row = spec.wo * 16
        core.vec_flat(row, 64, [("Cast", True)])
        core.vec_flat(row, 64, [(op, True) for op in program])
        core.vec_flat(row, 64, [("Cast", True)])


def _linear_rows(core: SimCore, spec: ResizeSpec, cols: dict, outq: PingPongSim, rows: list[int], r0: int,
                 rows_out: int) -> None:
    """Bilinear: each read input row interpolated along W, then each output row from its two."""
    row = spec.wo * 16
    for _ in rows:
        _gather(core, cols["gather0"])
        _gather(core, cols["gather1"])
        core.vec_flat(row, 128, [("Mul", False), ("Mul", False), ("Add", False)])
    for ro, (_, _, _, w1) in enumerate(spec.taps(0)[r0:r0 + rows_out]):
        q = outq.slot(ro)
        outq.acquire_for_write(q)
        core.vec_flat(row, 128, [("Muls", False), ("Muls", False), ("Add", False)] if w1 else [("Copy", False)])
        _epilogue(core, spec)
        outq.written(q)
        outq.acquire_for_read(q)
        core.copy_ub_to_gm(1, row, 2)
        outq.released(q)


def _nearest_rows(core: SimCore, spec: ResizeSpec, cols: dict, outq: PingPongSim, r0: int, rows_out: int) -> None:
    """Nearest: each run of output rows reading one input row gathered once, stored once per row."""
    for it, (_, _, count) in enumerate(row_groups(spec, r0, rows_out)):
        q = outq.slot(it)
        outq.acquire_for_write(q)
        _gather(core, cols["gather0"])
        _epilogue(core, spec)
        outq.written(q)
        outq.acquire_for_read(q)
        for _ in range(count):
            core.copy_ub_to_gm(1, spec.wo * 16, 2)
        outq.released(q)


def replay_resize(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, cols = ceil(spec.ho / rpb), column_tables(spec)

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        rows = band_rows(spec, r0, rows_out)
        if core.blocks > 0:
            core.wait_flag("V", "MTE2", 1)
        for _, count in row_runs(rows):
            core.copy_gm(1, count * spec.w * 16, 2, "UB", src=0)
        if spec.mode == "linear":
            _gather(core, cols["weight0"], "Dup")
            _gather(core, cols["weight1"], "Dup")
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        outq = PingPongSim(core, "V", "MTE3", 2)
        if spec.mode == "linear":
            _linear_rows(core, spec, cols, outq, rows, r0, rows_out)
        else:
            _nearest_rows(core, spec, cols, outq, r0, rows_out)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * c1(spec.c) * bands, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"rows_per_block": r} for r in splits(spec.ho) if not fits(profile, resize_buffers(spec, r))]


def template_tables(spec: ResizeSpec, rows_per_block: int) -> dict:
    """Everything the template bakes: the column tables, the per-row taps and the slab's height."""
    return {**column_tables(spec), "rows": spec.taps(0), "slab_rows": slab_rows(spec, rows_per_block)}


FAMILY = register(Family("resize_vector", "resize", "vector", resize_rule, resize_mte2, replay_resize, space=space,
                         template_globals={"resize_tables": template_tables, "epilogue_steps": epilogue_steps}))
