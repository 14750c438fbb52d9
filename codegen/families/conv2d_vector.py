"""conv2d_vector: a dense convolution on the Vector unit (multiply-adds per tap and input channel), a band of
output rows of one output channel block per block (templates/conv2d_vector.cpp.j2). The seeds' rule "small maps
on the Vector unit", weighed by the cost model against the Cube's algorithms (conv2d_algorithm.py)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.blocks import activate_and_store, vec_flat_cycles
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.opspec import Conv2dSpec, c1
from ..ir.profiles import Profile
from .base import Family, Variant, fits, r16, r32, register


def vector_conv_legal(spec: Conv2dSpec) -> str | None:
    """Why conv2d_vector cannot implement the conv (None: it can)."""
    if spec.c04:
        return "its input is a small-channel image in NC1HWC0_C04, which only the Cube's Load3D reads"
    if spec.cin2:
        return "a second source accumulates in the Cube's L0C"
    if spec.mid:
        return "a chain keeps its intermediate in the Cube's L1"
    if spec.program:
        return "an elementwise program epilogue runs in the Cube kernel's Vector pass"
    if spec.dtype != "fp16":
        return f"the build's Cube weights are packed as {spec.dtype}; the Vector kernel reads fp16"
    return None


def vector_conv_geometry(spec: Conv2dSpec, rows_per_block: int) -> tuple[int, int]:
    """(band rows of a block, band row width padded to 16-pixel groups) of conv2d_vector."""
    wpp = r16(spec.w + spec.pl + spec.pr)
    return (rows_per_block - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1, wpp


def vector_conv_buffers(spec: Conv2dSpec, rows_per_block: int) -> dict[str, int]:
    """UB of conv2d_vector (templates/conv2d_vector.cpp.j2, in its allocation order)."""
    slab_rows, wpp = vector_conv_geometry(spec, rows_per_block)
    plane, fractals, row = slab_rows * wpp, c1(spec.cin) * spec.kh * spec.kw, spec.wo * 16
    ub = (2 * r32(c1(spec.cin) * plane * 32) + r32(plane * 32) + fractals * 512 + fractals * 1024
          + spec.kh * spec.kw * 256 + r32(rows_per_block * row * 4) + r32(row * 4) + 2 * r32(row * 2)
          + (64 + 256 if spec.bias else 0) + (r32(rows_per_block * row * 2) if spec.residual else 0))
    return {"UB": ub}


def vector_conv_rule(spec: Conv2dSpec, profile: Profile) -> Variant | None:
    """Bands of output rows small enough to spread the blocks over the Vector cores; None if one row of
    every input channel does not fit UB."""
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.cout)
    rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
    while rpb > 1 and fits(profile, vector_conv_buffers(spec, rpb)):
        rpb = ceil(rpb / 2)
    if fits(profile, vector_conv_buffers(spec, rpb)):
        return None
    return Variant("conv2d_vector", {"rows_per_block": rpb}, planes * ceil(spec.ho / rpb),
                   vector_conv_buffers(spec, rpb))


def vector_conv_mte2(spec: Conv2dSpec, v: Variant) -> int:
    rpb = v.params["rows_per_block"]
    fractals = c1(spec.cin) * spec.kh * spec.kw
    total = 0
    for r0 in range(0, spec.ho, rpb):
        rows_out = min(rpb, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + vector_conv_geometry(spec, rows_out)[0]
        valid = max(0, min(hi, spec.h) - max(lo, 0))
        total += (c1(spec.cin) * valid * spec.w * 32 + fractals * 512 + (64 if spec.bias else 0)
                  + (rows_out * spec.wo * 32 if spec.residual else 0))
    return total * spec.n * c1(spec.cout)


def vector_conv_lower_bound(spec, params: dict, profile: Profile) -> float:
    """Cycles conv2d_vector cannot beat: its per-channel cast and multiply-add work alone, spread evenly over
    the Vector cores. Lets the algorithm choice skip the exact replay of a conv the Vector unit clearly loses."""
    per_row = (vec_flat_cycles(profile, spec.wo * 16, 64, "Cast", True)
               + vec_flat_cycles(profile, spec.wo * 16, 64, "MulAddDst", True))
    work = spec.n * c1(spec.cout) * spec.ho * spec.cin * spec.kh * spec.kw * per_row
    return work / profile.cores_for("vector")


def replay_vector_conv(spec, params: dict, profile: Profile) -> Prediction:
    """templates/conv2d_vector.cpp.j2, instruction for instruction."""
    rpb = params["rows_per_block"]
    bands, co1s, c1s, taps = ceil(spec.ho / rpb), c1(spec.cout), c1(spec.cin), spec.kh * spec.kw
    band_rows, wpp = vector_conv_geometry(spec, rpb)
    row, plane = spec.wo * 16, band_rows * wpp

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        slab_rows = vector_conv_geometry(spec, rows_out)[0]
        img_row0 = r0 * spec.sh - spec.pt
        lo, hi = max(0, img_row0), min(spec.h, img_row0 + slab_rows)
        if core.blocks > 0:
            core.wait_flag("V", "MTE2", 1)
        if spec.pl or spec.pr or lo != img_row0 or hi != img_row0 + slab_rows:
            core.vec_flat(c1s * plane * 16, 128, [("Dup", False)])
            core.set_flag("V", "MTE2", 0)
            core.wait_flag("V", "MTE2", 0)
        if hi > lo:
            for _ in range(c1s):
                core.copy_gm(hi - lo, spec.w * 16, 2, "UB", src=0)
        core.copy_gm(c1s * taps, 256, 2, "UB", src=1)
        if spec.bias:
            core.copy_gm(1, 16, 4, "UB", src=2)
        if spec.residual:
            core.copy_gm(1, rows_out * row, 2, "UB", src=3 if spec.bias else 2)
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        for _ in range(c1s * slab_rows):
            core.vec("Transpose", False, 2 * (wpp // 16))
        for done in range(0, c1s * taps, 255):
            core.vec("Transpose", False, 2 * min(255, c1s * taps - done))
        core.vec_flat(c1s * taps * 256, 64, [("Cast", True)])
        if spec.bias:
            core.vec("Copy", True, 4)
        core.vec_flat(rows_out * row, 64, [("Copy" if spec.bias else "Dup", True)])
        brcb_repeats = slab_rows * wpp // 8
        for _ in range(spec.cin):
            for done in range(0, brcb_repeats, 254):
                core.vec("Brcb", False, min(254, brcb_repeats - done))
            for _ in range(taps):
                core.vec("Copy", True, 4)
            for _ in range(rows_out * taps):
                core.vec_flat(row, 64, [("Cast", True)])
                core.vec_flat(row, 64, [("MulAddDst", True)])
        outq = PingPongSim(core, "V", "MTE3", 2)
        for ro in range(rows_out):
            activate_and_store(core, spec, outq, ro, row, spec.residual)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * co1s * bands, block)


def from_params(spec: Conv2dSpec, profile: Profile, params: dict, source: str) -> tuple[dict, dict, int]:
    """A pinned or recorded tiling, checked, with its buffers and blocks."""
    if vector_conv_legal(spec):
        raise KilnError("tiling", spec.name, f"{source}: conv2d_vector cannot implement this conv: "
                        f"{vector_conv_legal(spec)}")
    p = dict(params)
    p["rows_per_block"] = min(p["rows_per_block"], spec.ho)
    bufs = vector_conv_buffers(spec, p["rows_per_block"])
    return p, bufs, spec.n * c1(spec.cout) * ceil(spec.ho / p["rows_per_block"])


FAMILY = register(Family("conv2d_vector", "conv2d", "vector", None, vector_conv_mte2, replay_vector_conv,
                algorithm=lambda v: "vector_direct", tunable=("rows_per_block",), from_params=from_params))
