"""channel_gather_mte: output channel j of an NC1HWC0 tensor copied from channel c_j of input t_j (a table of
sources), as strided MTE bursts through UB (templates/channel_gather_mte.cpp.j2). Covers Concat of channel
counts that are not multiples of C0, the channel shuffle and unaligned channel slices: pure data movement."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import C0, ChannelGatherSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, register, splits

MAX_TILE_PIXELS = 2040  # one vdup of the zero tile: 255 repeats of 128 lanes = 2040 pixels of C0 lanes


def tile_pixels(spec: ChannelGatherSpec, profile: Profile) -> int:
    """Pixels per UB tile: the whole plane when it fits three tiles (ping, pong, zeros), in multiples of 8 (whole
    Vector repeats for the zero tile)."""
    fit = profile.capacity["UB"] // (3 * C0 * 2) // 8 * 8
    return min(ceil(spec.h * spec.w / 8) * 8, fit, MAX_TILE_PIXELS)


def units(spec: ChannelGatherSpec) -> int:
    return spec.n * c1(spec.out_channels)


def gather_rule(spec: ChannelGatherSpec, profile: Profile, log: OptLog) -> Variant:
    tile = tile_pixels(spec, profile)
    if tile < 8:
        raise KilnError("tiling", spec.name, "UB cannot hold three 8-pixel tiles")
    upb = max(1, ceil(units(spec) / profile.cores_for("vector")))
    return Variant("channel_gather_mte", {"planes_per_block": upb, "chunk_pixels": tile}, ceil(units(spec) / upb),
                   {"UB": 3 * tile * C0 * 2})


def gather_mte2(spec: ChannelGatherSpec, v: Variant) -> int:
    return spec.n * spec.h * spec.w * spec.out_channels * 2


def runs_by_block(spec: ChannelGatherSpec) -> list[list[tuple[int, int, int, int]]]:
    """The runs (spec.runs) of each output C0 block."""
    blocks: list[list[tuple[int, int, int, int]]] = [[] for _ in range(c1(spec.out_channels))]
    for r in spec.runs():
        blocks[r[2] // C0].append(r)
    return blocks


def replay_gather(spec, params: dict, profile: Profile) -> Prediction:
    upb, tile, pix = params["planes_per_block"], params["chunk_pixels"], spec.h * spec.w
    blocks, c1_out = runs_by_block(spec), c1(spec.out_channels)
    pad = c1_out * C0 - spec.out_channels

    def block(core: SimCore, b: int) -> None:
        if pad:
            core.vec("Dup", False, tile * C0 // 128)
            core.set_flag("V", "MTE3", 0)
            core.wait_flag("V", "MTE3", 0)
        q, it = PingPongSim(core, "MTE2", "MTE3", 0), 0
        for u in range(b * upb, min(units(spec), (b + 1) * upb)):
            o = u % c1_out
            for p0 in range(0, pix, tile):
                np_ = min(tile, pix - p0)
                for t, _c, _j, count in blocks[o]:
                    s = q.slot(it)
                    it += 1
                    q.acquire_for_write(s)
                    core.copy_gm(np_, count, 2, "UB", src=t)
                    q.written(s)
                    q.acquire_for_read(s)
                    core.copy_ub_to_gm(np_, count, 2)
                    q.released(s)
                if pad and o == c1_out - 1:
                    core.copy_ub_to_gm(np_, pad, 2)
        q.drain()

    return launch(profile, "vector", ceil(units(spec) / upb), block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"planes_per_block": u, "chunk_pixels": params["chunk_pixels"]} for u in splits(units(spec))]


def template_runs(spec: ChannelGatherSpec) -> dict:
    """The run table the template bakes: runs ordered by output block, and each block's first run."""
    blocks = runs_by_block(spec)
    first = [sum(len(b) for b in blocks[:i]) for i in range(len(blocks) + 1)]
    return {"runs": [r for b in blocks for r in b], "first": first}


FAMILY = register(Family("channel_gather_mte", "channel_gather", "vector", gather_rule, gather_mte2, replay_gather,
                         space=space, template_globals={"gather_runs": template_runs}))
