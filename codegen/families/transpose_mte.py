"""transpose_mte: a 4-D transpose (0,2,1,3) as strided MTE copies through UB, planes per block
(templates/transpose_mte.cpp.j2)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import TransposeSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, r32, register, splits


def transpose_rule(spec: TransposeSpec, profile: Profile, log: OptLog) -> Variant:
    plane = spec.d2 * spec.d3 * 2
    if 2 * plane > profile.capacity["UB"]:
        raise KilnError("tiling", spec.name, f"one {spec.d2}x{spec.d3} plane does not fit UB twice")
    cores = profile.cores_for("vector")
    planes = spec.d0 * spec.d1
    ppb = max(1, ceil(planes / cores))
    return Variant("transpose_mte", {"planes_per_block": ppb}, ceil(planes / ppb), {"UB": 2 * r32(plane)})


def transpose_mte2(spec: TransposeSpec, v: Variant) -> int:
    return spec.d0 * spec.d1 * spec.d2 * spec.d3 * 2


def replay_transpose(spec, params: dict, profile: Profile) -> Prediction:
    ppb, planes, plane = params["planes_per_block"], spec.d0 * spec.d1, spec.d2 * spec.d3

    def block(core: SimCore, b: int) -> None:
        q = PingPongSim(core, "MTE2", "MTE3", 0)
        p0 = b * ppb
        for p in range(p0, min(planes, p0 + ppb)):
            s = q.slot(p - p0)
            q.acquire_for_write(s)
            core.copy_gm(1, plane, 2, "UB", src=0)
            q.written(s)
            q.acquire_for_read(s)
            core.copy_ub_to_gm(spec.d2, spec.d3, 2)
            q.released(s)
        q.drain()

    return launch(profile, "vector", ceil(planes / ppb), block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"planes_per_block": p} for p in splits(spec.d0 * spec.d1)]


FAMILY = register(Family("transpose_mte", "transpose", "vector", transpose_rule, transpose_mte2, replay_transpose,
                         space=space))
