"""Row kernels on the Vector unit (softmax, log-softmax, layernorm over the last axis): what the families share, a
tile of rows per block (templates/softmax_vector.cpp.j2, which logsoftmax_vector includes, and
templates/layernorm_vector.cpp.j2)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.blocks import row_reduce
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import RowSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.reduce_spec import ROW_MAX_LENGTH
from .base import Variant, fits, r32, splits


def row_buffers(spec: RowSpec, rows_per_tile: int) -> dict[str, int]:
    L = spec.length
    partials = r32(4 * ceil(L / 64))
    padded = ceil(L / 64) * 64
    # in and out ping-pong (fp16), fp32 row (+ squares for layernorm), partials
    ub = 2 * r32(rows_per_tile * L * 2) * 2 + r32(padded * 4) + max(32, partials)
    if spec.op == "layernorm":
        ub += r32(padded * 4) + 2 * r32(L * 4)  # squares, gamma, beta
    if spec.op == "logsoftmax":
        ub += r32(padded * 4)  # exp(x - max), beside x - max
    return {"UB": ub}


def row_rule(spec: RowSpec, profile: Profile, log: OptLog) -> Variant:
    if spec.length > ROW_MAX_LENGTH:
        raise KilnError("tiling", spec.name, f"rows of {spec.length} > {ROW_MAX_LENGTH} values are not supported yet")
    cores = profile.cores_for("vector")
    # rows start 32-byte aligned in UB only when a row is a multiple of 16 fp16 values
    rpt = max(1, ceil(spec.rows / cores)) if spec.length % 16 == 0 else 1
    while rpt > 1 and fits(profile, row_buffers(spec, rpt)):
        rpt = ceil(rpt / 2)
    if fits(profile, row_buffers(spec, rpt)):
        raise KilnError("tiling", spec.name, f"one row of {spec.length} does not fit UB of {profile.name}")
    return Variant(f"{spec.op}_vector", {"rows_per_tile": rpt}, row_blocks(spec, rpt, profile), row_buffers(spec, rpt))


def row_blocks(spec: RowSpec, rows_per_tile: int, profile: Profile) -> int:
    """Vector blocks of a row kernel: one per tile of rows, at most one per Vector core."""
    return min(profile.cores_for("vector"), ceil(spec.rows / rows_per_tile))


def row_mte2(spec: RowSpec, v: Variant) -> int:
    blocks = v.blocks
    tiles = ceil(spec.rows / v.params["rows_per_tile"])
    extra = 8 * spec.length * blocks if spec.op == "layernorm" else 0  # gamma and beta per block
    return spec.rows * spec.length * 2 + (extra if tiles else 0)


def replay_rows(spec, params: dict, profile: Profile) -> Prediction:
    rpt, L = params["rows_per_tile"], spec.length
    tiles = ceil(spec.rows / rpt)
    blocks = row_blocks(spec, rpt, profile)

    def block(core: SimCore, b: int) -> None:
        t0, t1 = tiles * b // blocks, tiles * (b + 1) // blocks
        if spec.op == "layernorm":
            layernorm_prologue(core, L, t0 < t1)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            nrows = min(rpt, spec.rows - t * rpt)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            core.copy_gm(1, nrows * L, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            for _ in range(nrows):
                core.vec_flat(L, 64, [("Cast", True)])
                if spec.op in ("softmax", "logsoftmax"):  # log: x - max - ln(sum), Adds where softmax Muls
                    row_reduce(core, "ReduceMax", L, True)
                    core.vec_flat(L, 64, [("Adds", True), ("Exp", True)])
                    row_reduce(core, "ReduceSum", L, True)
                    core.vec_flat(L, 64, [("Muls" if spec.op == "softmax" else "Adds", True), ("Cast", True)])
                else:
                    layernorm_row(core, L)
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(1, nrows * L, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


def layernorm_prologue(core: SimCore, length: int, busy: bool) -> None:
    """The layernorm templates' block prologue: the padding lanes of the fp32 row and of its squares zeroed (rows
    not whole 64-lane repeats), gamma and beta loaded when the block has tiles."""
    if length % 64:
        core.vec("Dup", True, 1)
        core.vec("Dup", True, 1)
    if busy:
        core.copy_gm(1, length, 4, "UB", src=1)  # gamma
        core.copy_gm(1, length, 4, "UB", src=2)  # beta


def layernorm_row(core: SimCore, length: int) -> None:
    """One fp32 row of `length` in UB normalised (the layernorm templates' per-row sequence after the cast in):
    the mean, the centred squares, their mean, then scale, gamma, beta and the cast out."""
    row_reduce(core, "ReduceSum", length, False)
    core.vec_flat(length, 64, [("Adds", True), ("Mul", True)])
    row_reduce(core, "ReduceSum", length, False)
    core.vec_flat(length, 64, [("Muls", True), ("Mul", True), ("Add", True), ("Cast", True)])


def row_space(spec, params: dict, profile: Profile) -> list[dict]:
    rows = [1] if spec.length % 16 else splits(spec.rows)
    return [{"rows_per_tile": r} for r in rows if not fits(profile, row_buffers(spec, r))]
