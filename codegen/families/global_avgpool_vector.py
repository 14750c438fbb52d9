"""global_avgpool_vector: GlobalAveragePool (or AveragePool over the whole map) on the Vector unit, one channel
block per block, the map in chunks of pixels (templates/global_avgpool_vector.cpp.j2)."""
from __future__ import annotations

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import Pool2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, GenericForm, Variant, register, splits


def global_avgpool_rule(spec: Pool2dSpec, profile: Profile, log: OptLog) -> Variant:
    planes = spec.n * c1(spec.c)
    # in ping/pong (fp16) + the fp32 copy: 2*32 + 64 bytes per pixel, plus 96 bytes of sums.
    chunk = max(1, min(spec.h * spec.w, (profile.capacity["UB"] - 256) // 128))
    return Variant("global_avgpool_vector", {"chunk_pixels": chunk}, planes,
                   {"UB": 2 * chunk * 32 + chunk * 64 + 64 + 32})


def global_avgpool_mte2(spec: Pool2dSpec, v: Variant) -> int:
    return spec.n * c1(spec.c) * spec.h * spec.w * 32


def replay_global_avgpool(spec, params: dict, profile: Profile) -> Prediction:
    chunk, hw = params["chunk_pixels"], spec.h * spec.w

    def block(core: SimCore, b: int) -> None:
        if core.blocks > 0:
            core.wait_flag("MTE3", "V", 1)
        core.vec("Dup", True, 1)
        inq = PingPongSim(core, "MTE2", "V", 0)
        for ci, p0 in enumerate(range(0, hw, chunk)):
            px, s = min(chunk, hw - p0), inq.slot(ci)
            inq.acquire_for_write(s)
            core.copy_gm(1, px * 16, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            core.vec_flat(px * 16, 64, [("Cast", True)])
            inq.released(s)
            count = px
            while count > 1:  # pairwise halving
                half = count // 2
                core.vec_flat(half * 16, 64, [("Add", True)])
                count -= half
            core.vec("Add", True, 1)
        inq.drain()
        core.vec("Muls", True, 1)
        core.vec("Cast", True, 1)
        core.set_flag("V", "MTE3", 0)
        core.wait_flag("V", "MTE3", 0)
        core.copy_ub_to_gm(1, 16, 2)
        core.set_flag("MTE3", "V", 1)

    return launch(profile, "vector", spec.n * c1(spec.c), block)


def matches(spec: Pool2dSpec) -> bool:
    if spec.op == "max":
        return False
    if not spec.is_global:
        raise KilnError("tiling", spec.name, "AveragePool with a window smaller than the feature map has no "
                        "kernel yet; supported: MaxPool, GlobalAveragePool (or AveragePool over the whole map)")
    return True


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"chunk_pixels": p} for p in splits(spec.h * spec.w) if 2 * p * 32 + p * 64 + 96 <= profile.capacity["UB"]]


# global pooling's window is the whole map: kh, kw are the size too
FAMILY = register(Family("global_avgpool_vector", "pool2d", "vector", global_avgpool_rule, global_avgpool_mte2,
                replay_global_avgpool, matches=matches, space=space,
                generic=GenericForm(("h", "w", "kh", "kw"), ("h", "w"), ("chunk_pixels",),
                                    name=lambda s: f"pool2d_global{s.op}_{s.n}x{s.c}xHxW")))
