"""global_avgpool_vector: GlobalAveragePool (or AveragePool over the whole map) on the Vector unit, a run of
consecutive (image, channel block) planes per block, the map in chunks of pixels
(templates/global_avgpool_vector.cpp.j2)."""
from __future__ import annotations

from itertools import count
from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import Pool2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, GenericForm, Variant, register, splits

MAX_STRIDED_PIXELS = 127  # a chunk's fp32 plane, 2 x 32 B blocks a pixel, is a repeat stride of at most 255 blocks


def ub_bytes(planes: int, chunk: int) -> int:
    """UB of a block: the chunk in ping/pong (fp16) and widened (fp32), 2*32 + 64 bytes a pixel and plane, and
    each plane's fp32 sums and fp16 result."""
    return planes * (chunk * 128 + 64 + 32)


def global_avgpool_rule(spec: Pool2dSpec, profile: Profile, log: OptLog) -> Variant:
    """For maps of at most 127 pixels (a strided fold's repeat stride), blocks of consecutive planes, as many a
    block as spread the planes over the Vector cores in the fewest rounds that still leave each plane a chunk of
    at least min(H*W, 8) pixels in UB (many planes a block pay one copy and one instruction per fold column for all
    of them, where a plane a block paid them per plane), the chunk the largest even share of the map that fits.
    One plane a block otherwise (no more planes than cores, or a larger map), its map in chunks as large as UB
    allows."""
    planes, hw = spec.n * c1(spec.c), spec.h * spec.w
    cores, ub = profile.cores_for("vector"), profile.capacity["UB"] - 256
    per, chunk = 1, max(1, min(hw, ub // 128))
    for rounds in count(1):
        g = ceil(planes / (cores * rounds))
        if g == 1 or hw > MAX_STRIDED_PIXELS:  # (a larger map: chunks of 127 pixels would cost more folds)
            break
        share = max((p for p in splits(hw) if p <= MAX_STRIDED_PIXELS and ub_bytes(g, p) <= ub), default=0)
        if share >= min(hw, 8):
            per, chunk = g, share
            break
    return Variant("global_avgpool_vector", {"chunk_pixels": chunk, "planes_per_block": per}, ceil(planes / per),
                   {"UB": ub_bytes(per, chunk)})


def global_avgpool_mte2(spec: Pool2dSpec, v: Variant) -> int:
    return spec.n * c1(spec.c) * spec.h * spec.w * 32


def fold(core: SimCore, planes: int, half_elems: int) -> None:
    """One pairwise-halving step over `planes` planes (the template's fold): a strided instruction per 64-value
    column of the half, a repeat per plane, where there are no more columns than planes; else per plane, its
    half's repeats."""
    cols = ceil(half_elems / 64)
    if cols <= planes:
        for _ in range(cols):
            core.vec("Add", True, planes)
    else:
        for _ in range(planes):
            core.vec_flat(half_elems, 64, [("Add", True)])


def replay_global_avgpool(spec, params: dict, profile: Profile) -> Prediction:
    chunk, per, hw = params["chunk_pixels"], params.get("planes_per_block", 1), spec.h * spec.w
    planes = spec.n * c1(spec.c)

    def planes_of(b: int) -> int:  # block b's planes (the last block may hold fewer)
        return min(per, planes - b * per)

    def block(core: SimCore, b: int) -> None:
        g = planes_of(b)
        if core.blocks > 0:
            core.wait_flag("MTE3", "V", 1)
        core.vec_flat(g * 16, 64, [("Dup", True)])
        inq = PingPongSim(core, "MTE2", "V", 0)
        for ci, p0 in enumerate(range(0, hw, chunk)):
            px, s = min(chunk, hw - p0), inq.slot(ci)
            inq.acquire_for_write(s)
            core.copy_gm(g, px * 16, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            core.vec_flat(g * px * 16, 64, [("Cast", True)])
            inq.released(s)
            left = px
            while left > 1:  # pairwise halving
                half = left // 2
                fold(core, g, half * 16)
                left -= half
            core.vec("Add", True, g)
        inq.drain()
        core.vec_flat(g * 16, 64, [("Muls", True)])
        core.vec_flat(g * 16, 64, [("Cast", True)])
        core.set_flag("V", "MTE3", 0)
        core.wait_flag("V", "MTE3", 0)
        core.copy_ub_to_gm(1, g * 16, 2)
        core.set_flag("MTE3", "V", 1)

    return launch(profile, "vector", ceil(planes / per), block, planes_of)


def matches(spec: Pool2dSpec) -> bool:
    if spec.op == "max":
        return False
    if not spec.is_global:
        raise KilnError("tiling", spec.name, "AveragePool with a window smaller than the feature map has no "
                        "kernel yet; supported: MaxPool, GlobalAveragePool (or AveragePool over the whole map)")
    return True


def space(spec, params: dict, profile: Profile) -> list[dict]:
    hw, planes = spec.h * spec.w, spec.n * c1(spec.c)
    out = [{"chunk_pixels": p, "planes_per_block": 1} for p in splits(hw) if ub_bytes(1, p) <= profile.capacity["UB"]]
    if hw <= MAX_STRIDED_PIXELS:
        out += [{"chunk_pixels": p, "planes_per_block": g} for g in splits(planes) if g > 1 for p in splits(hw)
                if ub_bytes(g, p) <= profile.capacity["UB"]]
    return out


# global pooling's window is the whole map: kh, kw are the size too
FAMILY = register(Family("global_avgpool_vector", "pool2d", "vector", global_avgpool_rule, global_avgpool_mte2,
                replay_global_avgpool, matches=matches, space=space,
                generic=GenericForm(("h", "w", "kh", "kw"), ("h", "w"), ("chunk_pixels", "planes_per_block"),
                                    name=lambda s: f"pool2d_global{s.op}_{s.n}x{s.c}xHxW")))
