"""avgpool2d_vector: AveragePool with a window smaller than the map, on the Vector unit, a band of output rows per
block (templates/avgpool2d_vector.cpp.j2; with several planes a core, maxpool2d_vector's slab queue). The window
sum is maxpool2d_vector's loop with Add for Max over a zero-padded slab; the mean then scales each output row by
the reciprocal of its divisor: a per-row scalar times, where the column divisors differ (count_include_pad=0 at the
edges, ceil_mode's extra columns), a per-column factor built once per block."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.blocks import store_row, window_block_done, window_block_prologue, window_rows_ready, window_slabs
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import AvgPool2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, r32, register, row_band_mte2, row_band_space, row_band_variant


def column_runs(spec: AvgPool2dSpec) -> list[tuple[int, int, float]]:
    """(first output column, count, 1 / divisor) of each run of equal column divisors ([] when all are equal:
    the row scalar then carries the column divisor too)."""
    div = spec.divisors(1)
    if len(set(div)) == 1:
        return []
    runs: list[tuple[int, int, float]] = []
    for i, d in enumerate(div):
        if runs and div[runs[-1][0]] == d:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2])
        else:
            runs.append((i, 1, 1.0 / d))
    return runs


def row_scales(spec: AvgPool2dSpec) -> list[float]:
    """Per output row, the scalar its window sums are multiplied by."""
    cols = spec.divisors(1)
    uniform = cols[0] if len(set(cols)) == 1 else 1
    return [1.0 / (d * uniform) for d in spec.divisors(0)]


def avgpool_buffers(spec: AvgPool2dSpec, rows_per_block: int, slabs: int = 1) -> dict[str, int]:
    wp = spec.w + spec.pl + spec.pr
    slab = ((rows_per_block - 1) * spec.sh + spec.kh) * wp * 32
    cols = r32(spec.wo * 32) if column_runs(spec) else 0
    return {"UB": slabs * r32(slab) + 2 * r32(spec.wo * 32) + cols}


def avgpool_rule(spec: AvgPool2dSpec, profile: Profile, log: OptLog) -> Variant:
    if min(spec.divisors(0) + spec.divisors(1)) < 1:
        raise KilnError("tiling", spec.name, "a window covers no counted pixel (pads as large as the window)")
    return row_band_variant("avgpool2d_vector", spec, profile, avgpool_buffers, carry=True)


def avgpool_mte2(spec: AvgPool2dSpec, v: Variant) -> int:
    return row_band_mte2(spec, v.params["rows_per_block"])


def replay_avgpool(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, row, runs = ceil(spec.ho / rpb), spec.wo * 16, column_runs(spec)
    blocks = spec.n * c1(spec.c) * bands

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        slabs = window_slabs(core, params, b, blocks)
        window_block_prologue(core, spec, rows_out, r0, 1, slabs)
        for _, count, _ in runs:  # the per-column factors
            core.vec_flat(count * 16, 128, [("Dup", False)])
        window_rows_ready(core, slabs)
        outq = PingPongSim(core, "V", "MTE3", 2)

        def fill() -> None:  # the first tap copied, an add per further tap, then the divisors
            for t in range(spec.kh * spec.kw):
                core.vec_flat(row, 128, [("Copy" if t == 0 else "Add", False)])
            if runs:
                core.vec_flat(row, 128, [("Mul", False)])
            core.vec_flat(row, 128, [("Muls", False)])
        for ro in range(rows_out):
            store_row(core, outq, ro, fill, row)
        outq.drain()
        window_block_done(core, slabs)

    return launch(profile, "vector", blocks, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return row_band_space(spec, params, profile, avgpool_buffers)


FAMILY = register(Family("avgpool2d_vector", "avgpool2d", "vector", avgpool_rule, avgpool_mte2, replay_avgpool,
                         space=space, template_globals={"avgpool_column_runs": column_runs,
                                                        "avgpool_row_scales": row_scales}))
