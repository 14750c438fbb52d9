"""col2im_vector: the scatter-add half of a ConvTranspose built as a GEMM + col2im (codegen/passes/conv_transpose.py;
templates/col2im_vector.cpp.j2), on the Vector unit, a band of output rows of one (image, channel block) per block.

Each output pixel of a channel block is one 32-byte C0 block of fp16, so an input row of one tap's columns adds
into an output row as one strided Add: the destination steps s_w blocks per pixel (block stride s_w, repeat stride
8 s_w), the columns one. Per output row the tap rows that reach it (at most ceil(kh / s_h) for dilation 1) come
GM -> UB as one copy each (kw bursts, one per tap column, a channel-block plane apart), ping-pong against the
Vector work; the row starts as the bias (a block-stride-0 copy of its 16 values) or zeros, takes one Add per
(tap row, tap column), then the fused ReLU / Clip, and goes UB -> GM through a ping-pong output row. The sums are
in fp16 (at most ceil(kh/s_h) ceil(kw/s_w) column values and the bias per pixel: docs/numerics.md)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.col2im_spec import Col2imSpec
from ..ir.opspec import c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, r32, register, row_band_variant, splits


def in_slot_elems(spec: Col2imSpec) -> int:
    """fp16 elements of one input slot: the tap rows of the output row that reads the most, kw column rows each."""
    return max(1, spec.max_row_taps) * spec.kw * spec.w * 16


def col2im_buffers(spec: Col2imSpec, rows_per_block: int) -> dict[str, int]:
    return {"UB": 2 * r32(in_slot_elems(spec) * 2) + 2 * r32(spec.wo * 32) + (64 + 32 if spec.bias else 0)}


def col2im_rule(spec: Col2imSpec, profile: Profile, log: OptLog) -> Variant:
    if fits(profile, col2im_buffers(spec, 1)):
        raise KilnError("tiling", spec.name, f"the column rows of one output row ({in_slot_elems(spec) * 2} bytes, "
                        f"twice) do not fit UB of {profile.name}: input width {spec.w} too large for col2im")
    return row_band_variant("col2im_vector", spec, profile, col2im_buffers)


def col2im_mte2(spec: Col2imSpec, v: Variant) -> int:
    """Every column row that lands in the output, once, and the bias per block."""
    rows = sum(len(spec.row_taps(oh)) for oh in range(spec.ho))
    blocks = spec.n * c1(spec.c) * ceil(spec.ho / v.params["rows_per_block"])
    return spec.n * c1(spec.c) * rows * spec.kw * spec.w * 32 + (blocks * 64 if spec.bias else 0)


def activate(core: SimCore, spec: Col2imSpec, row: int) -> None:
    if spec.activation == "Relu":
        core.vec_flat(row, 128, [("Relu", False)])
    elif spec.activation == "Clip":
        core.vec_flat(row, 128, [("Maxs", False), ("Mins", False)])


def replay_col2im(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, row, runs = ceil(spec.ho / rpb), spec.wo * 16, spec.col_runs()

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        if spec.bias:
            core.copy_gm(1, 16, 4, "UB", src=1)
            core.set_flag("MTE2", "V", 2)
            core.wait_flag("MTE2", "V", 2)
            core.vec("Cast", True, 1)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for ro in range(min(rpb, spec.ho - r0)):
            taps = spec.row_taps(r0 + ro)
            s, q = inq.slot(ro), outq.slot(ro)
            inq.acquire_for_write(s)
            for _ in taps:
                core.copy_gm(spec.kw, spec.w * 16, 2, "UB", src=0)
            inq.written(s)
            outq.acquire_for_write(q)
            inq.acquire_for_read(s)
            core.vec_flat(row, 128, [("Copy" if spec.bias else "Dup", False)])
            for _ in taps:
                for _, count, _ in runs:
                    core.vec_flat(count * 16, 128, [("Add", False)])
            activate(core, spec, row)
            inq.released(s)
            outq.written(q)
            outq.acquire_for_read(q)
            core.copy_ub_to_gm(1, row, 2)
            outq.released(q)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", spec.n * c1(spec.c) * bands, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return [{"rows_per_block": r} for r in splits(spec.ho) if not fits(profile, col2im_buffers(spec, r))]


FAMILY = register(Family("col2im_vector", "col2im", "vector", col2im_rule, col2im_mte2, replay_col2im, space=space))
