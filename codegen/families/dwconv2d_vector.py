"""dwconv2d_vector: depthwise convolution on the Vector unit, a band of output rows per block
(templates/dwconv2d_vector.cpp.j2). Its epilogue (fp32, per output row, before the cast): bias, ReLU or
Clip(0, hi), then an elementwise program (codegen/passes/program_epilogue.py) in one Vector pass."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.blocks import activate_and_store, window_block_prologue
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.eltwise_program import epilogue_steps, scratch_names, vector_ops
from ..ir.opspec import DwConv2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, GenericForm, Variant, fits, r32, register, splits


def dw_slab_rows(spec: DwConv2dSpec, rows_out: int) -> int:
    return (rows_out - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1


def dw_buffers(spec: DwConv2dSpec, rows_per_block: int) -> dict[str, int]:
    wp = spec.w + spec.pl + spec.pr
    taps = spec.kh * spec.kw
    steps = epilogue_steps(spec.program)
    program_rows = len(steps) + len(scratch_names(steps))  # fp32 rows of a program epilogue
    ub = (r32(dw_slab_rows(spec, rows_per_block) * wp * 32) + r32(taps * 32) + r32(taps * 64) + taps * 256
          + (64 + 256 if spec.bias else 0) + (2 + program_rows) * r32(spec.wo * 64) + 2 * r32(spec.wo * 32))
    return {"UB": ub}


def dw_rule(spec: DwConv2dSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.c)
    rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
    while rpb > 1 and fits(profile, dw_buffers(spec, rpb)):
        rpb = ceil(rpb / 2)
    limit = fits(profile, dw_buffers(spec, rpb))
    if limit:
        raise KilnError("tiling", spec.name, f"one output row does not fit {limit} of {profile.name} "
                        f"(input width {spec.w} too large for the Vector kernel)")
    blocks = planes * ceil(spec.ho / rpb)
    return Variant("dwconv2d_vector", {"rows_per_block": rpb}, blocks, dw_buffers(spec, rpb))


def dw_mte2(spec: DwConv2dSpec, v: Variant) -> int:
    rpb = v.params["rows_per_block"]
    total = 0
    for r0 in range(0, spec.ho, rpb):
        rows_out = min(rpb, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + dw_slab_rows(spec, rows_out)  # exclusive
        valid = max(0, min(hi, spec.h) - max(lo, 0))
        total += valid * spec.w * 32 + spec.kh * spec.kw * 32 + (64 if spec.bias else 0)
    return total * spec.n * c1(spec.c)


def replay_dwconv(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, c1s, taps, row = ceil(spec.ho / rpb), c1(spec.c), spec.kh * spec.kw, spec.wo * 16
    program = vector_ops(epilogue_steps(spec.program))

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        window_block_prologue(core, spec, rows_out, r0, spec.dh)
        core.copy_gm(1, taps * 16, 2, "UB", src=1)
        if spec.bias:
            core.copy_gm(1, 16, 4, "UB", src=2)
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        core.vec_flat(taps * 16, 64, [("Cast", True)])
        for _ in range(taps + (1 if spec.bias else 0)):
            core.vec("Copy", True, 4)
        outq = PingPongSim(core, "V", "MTE3", 2)
        for ro in range(rows_out):
            core.vec_flat(row, 64, [("Copy" if spec.bias else "Dup", True)])
            for _ in range(taps):
                core.vec_flat(row, 64, [("Cast", True)])
                core.vec_flat(row, 64, [("MulAddDst", True)])
            activate_and_store(core, spec, outq, ro, row, program=program)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * c1s * bands, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"rows_per_block": r} for r in splits(spec.ho) if not fits(profile, dw_buffers(spec, r))]


FAMILY = register(Family("dwconv2d_vector", "dwconv2d", "vector", dw_rule, dw_mte2, replay_dwconv, space=space,
                generic=GenericForm(("h", "w"), ("h", "w", "ho", "wo"), ("rows_per_block",)),
                template_globals={"epilogue_steps": epilogue_steps}))
