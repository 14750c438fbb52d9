"""reduce_vector: ReduceMax / ReduceMin / ReduceL2 over the last axis of fp16 rows, in fp32 on the Vector unit
(templates/reduce_vector.cpp.j2). A block takes a contiguous range of tiles of rows (ping-pong); per tile: the
rows land in UB on 32-byte boundaries (one strided copy), each is widened to fp32 into a row slot padded to whole
repeats (min: negated, l2: squared, on the way), the padding holds the reduction's neutral value, then two
WholeReduce levels (one partial per repeat, then per row over its partials) give one value per row; min negates
it back, l2 takes its square root; narrowed to fp16 and written out as one burst."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.copy_spec import pitch
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.reduce_spec import ReduceSpec
from .base import Family, Variant, fits, r32, register, splits

CHUNK = 248  # repeats per WholeReduce instruction (<= 255, a multiple of 8: each one's results start on a block)


def reduce_buffers(spec: ReduceSpec, rows_per_tile: int) -> dict[str, int]:
    """UB bytes: fp16 input and output ping-pong, the fp32 row slots, the first-level partials, the results."""
    rows, slot = rows_per_tile, spec.stride * 64
    ub = 2 * r32(rows * pitch(spec.length) * 2) + 2 * r32(rows * 2) + rows * slot * 4 + r32(rows * spec.stride * 4)
    if spec.stride > 1:
        ub += r32(rows * 4)
    return {"UB": ub}


def reduce_rule(spec: ReduceSpec, profile: Profile, log: OptLog) -> Variant:
    """Rows per tile: enough tiles for every Vector core to take one, halved while the tile overflows UB."""
    rpt = max(1, ceil(spec.rows / profile.cores_for("vector")))
    while rpt > 1 and fits(profile, reduce_buffers(spec, rpt)):
        rpt = ceil(rpt / 2)
    if fits(profile, reduce_buffers(spec, rpt)):
        raise KilnError("tiling", spec.name, f"one row of {spec.length} does not fit UB of {profile.name}")
    return reduce_variant(spec, rpt, profile)


def reduce_variant(spec: ReduceSpec, rows_per_tile: int, profile: Profile) -> Variant:
    return Variant("reduce_vector", {"rows_per_tile": rows_per_tile}, reduce_blocks(spec, rows_per_tile, profile),
                   reduce_buffers(spec, rows_per_tile))


def reduce_blocks(spec: ReduceSpec, rows_per_tile: int, profile: Profile) -> int:
    return min(profile.cores_for("vector"), ceil(spec.rows / rows_per_tile))


def reduce_mte2(spec: ReduceSpec, v: Variant) -> int:
    return spec.rows * spec.length * 2


def _tile(core: SimCore, spec: ReduceSpec, nrows: int) -> None:
    """The Vector work of one tile of `nrows` rows (the template's compute(), instruction for instruction)."""
    slot, neutral = spec.stride * 64, spec.stride * 64 != spec.length
    if neutral:
        core.vec_flat(nrows * slot, 64, [("Dup", True)])
    widen = [("Cast", True)] + {"max": [], "min": [("Muls", True)], "l2": [("Mul", True)]}[spec.op]
    for _ in range(nrows):
        core.vec_flat(spec.length, 64, widen)
    first = "ReduceSum" if spec.op == "l2" else "ReduceMax"
    total = nrows * spec.stride
    for done in range(0, total, CHUNK):
        core.vec(first, True, min(CHUNK, total - done))
    if spec.stride > 1:
        for done in range(0, nrows, CHUNK):
            core.vec(first, True, min(CHUNK, nrows - done))
    if spec.op != "max":
        core.vec_flat(nrows, 64, [("Muls" if spec.op == "min" else "Sqrt", True)])
    core.vec_flat(nrows, 64, [("Cast", True)])


def replay_reduce(spec: ReduceSpec, params: dict, profile: Profile) -> Prediction:
    rpt = params["rows_per_tile"]
    tiles = ceil(spec.rows / rpt)
    blocks = reduce_blocks(spec, rpt, profile)

    def block(core: SimCore, b: int) -> None:
        t0, t1 = tiles * b // blocks, tiles * (b + 1) // blocks
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            nrows = min(rpt, spec.rows - t * rpt)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            core.copy_gm(nrows, spec.length, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            _tile(core, spec, nrows)
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(1, nrows, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


def reduce_space(spec: ReduceSpec, params: dict, profile: Profile) -> list[dict]:
    return [{"rows_per_tile": r} for r in splits(spec.rows) if not fits(profile, reduce_buffers(spec, r))]


FAMILY = register(Family("reduce_vector", "reduce", "vector", reduce_rule, reduce_mte2, replay_reduce,
                         space=reduce_space))
