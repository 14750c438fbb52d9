"""maxpool2d_vector: MaxPool on the Vector unit, a band of output rows per block (templates/maxpool2d_vector.cpp.j2);
with several planes a core (a batch), two slabs whose queue runs on across the core's blocks (prefetch)."""
from __future__ import annotations

from math import ceil

from ..cost.blocks import store_row, window_block_done, window_block_prologue, window_rows_ready, window_slabs
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import Pool2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, GenericForm, Variant, r32, register, row_band_mte2, row_band_space, row_band_variant

# ---------------------------------------------------------------- pooling (Vector)

def maxpool_buffers(spec: Pool2dSpec, rows_per_block: int, slabs: int = 1) -> dict[str, int]:
    wp = spec.w + spec.pl + spec.pr
    slab = ((rows_per_block - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1) * wp * 32
    return {"UB": slabs * r32(slab) + 2 * r32(spec.wo * 32)}


def maxpool_rule(spec: Pool2dSpec, profile: Profile, log: OptLog) -> Variant:
    return row_band_variant("maxpool2d_vector", spec, profile, maxpool_buffers, carry=True)


def maxpool_mte2(spec: Pool2dSpec, v: Variant) -> int:
    return row_band_mte2(spec, v.params["rows_per_block"])


def replay_maxpool(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, c1s, row = ceil(spec.ho / rpb), c1(spec.c), spec.wo * 16
    blocks = spec.n * c1s * bands

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        slabs = window_slabs(core, params, b, blocks)
        window_block_prologue(core, spec, rows_out, r0, spec.dh, slabs)
        window_rows_ready(core, slabs)
        outq = PingPongSim(core, "V", "MTE3", 2)

        def fill() -> None:  # the window's first tap copied, then a max with each further tap
            for t in range(spec.kh * spec.kw):
                core.vec_flat(row, 128, [("Copy" if t == 0 else "Max", False)])
        for ro in range(rows_out):
            store_row(core, outq, ro, fill, row)
        outq.drain()
        window_block_done(core, slabs)

    return launch(profile, "vector", blocks, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return row_band_space(spec, params, profile, maxpool_buffers)


FAMILY = register(Family("maxpool2d_vector", "pool2d", "vector", maxpool_rule, maxpool_mte2, replay_maxpool,
                matches=lambda spec: spec.op == "max", space=space,
                generic=GenericForm(("h", "w"), ("h", "w", "ho", "wo"), ("rows_per_block", "prefetch"))))
