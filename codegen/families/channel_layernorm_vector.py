"""channel_layernorm_vector: LayerNormalization over the channels of an NC1HWC0 activation, written as the rows
[N*H*W, C] of the NHWC tensor (ConvNeXt's Transpose(0,2,3,1) -> LayerNormalization, fused by
codegen/passes/channel_norm.py; templates/channel_layernorm_vector.cpp.j2).

A block takes tiles of `rows_per_tile` pixels of one image. One strided MTE2 copy per tile brings the tile's C1
channel blocks (H*W*16 values apart in GM) into UB as [C1][pixels][16]; per pixel, one vcast with C1 repeats
(16 lanes each, source repeat stride one block row of the tile) gathers its channels into an fp32 row, the last
block masked to the C % 16 real lanes so padded lanes never enter the statistics. The row is then normalised
exactly as layernorm_vector does (codegen/families/rows.py: mean, centred squares, 1/sqrt(var + eps) on the
Scalar unit, gamma, beta) and cast into the tile's output rows, stored with one MTE3 copy."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.channel_norm_spec import ChannelNormSpec
from ..ir.copy_spec import CopySpec, format_moves, parse_moves
from ..ir.opspec import RowSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.reduce_spec import ROW_MAX_LENGTH
from ..ir.tensor import C0, c1
from ..passes.views import blocked_transpose
from .base import Family, Variant, fits, r32, register, splits
from .rows import layernorm_prologue, layernorm_row


def buffers(spec: ChannelNormSpec, rows_per_tile: int) -> dict[str, int]:
    """UB: input tile ping-pong [C1][pixels][16] fp16, output rows ping-pong (stride C1*16) fp16, the fp32 row and
    its squares (whole 64-lane repeats), the partial sums, gamma and beta."""
    cp, padded = c1(spec.c) * C0, ceil(spec.c / 64) * 64
    tile = r32(rows_per_tile * cp * 2)
    return {"UB": 4 * tile + 2 * r32(padded * 4) + max(32, r32(4 * ceil(spec.c / 64))) + 2 * r32(spec.c * 4)}


def tiles_of(spec: ChannelNormSpec, rows_per_tile: int) -> int:
    """Tiles never cross an image: ceil(H*W / rows_per_tile) per image."""
    return spec.n * ceil(spec.h * spec.w / rows_per_tile)


def blocks_of(spec: ChannelNormSpec, rows_per_tile: int, profile: Profile) -> int:
    return min(profile.cores_for("vector"), tiles_of(spec, rows_per_tile))


def rule(spec: ChannelNormSpec, profile: Profile, log: OptLog) -> Variant:
    """Enough pixels per tile to give every Vector core one tile, halved while the buffers overflow UB."""
    if spec.c > ROW_MAX_LENGTH:
        raise KilnError("tiling", spec.name, f"{spec.c} channels > {ROW_MAX_LENGTH} are not supported yet")
    hw = spec.h * spec.w
    rpt = ceil(hw / max(1, ceil(profile.cores_for("vector") / spec.n)))
    while rpt > 1 and fits(profile, buffers(spec, rpt)):
        rpt = ceil(rpt / 2)
    if fits(profile, buffers(spec, rpt)):
        raise KilnError("tiling", spec.name, f"one pixel of {spec.c} channels does not fit UB of {profile.name}")
    return Variant("channel_layernorm_vector", {"rows_per_tile": rpt}, blocks_of(spec, rpt, profile),
                   buffers(spec, rpt))


def space(spec: ChannelNormSpec, params: dict, profile: Profile) -> list[dict]:
    return [{"rows_per_tile": r} for r in splits(spec.h * spec.w) if not fits(profile, buffers(spec, r))]


def mte2(spec: ChannelNormSpec, v: Variant) -> int:
    """Every real pixel's C1 blocks once (16 lanes each), gamma and beta once per block."""
    return spec.n * c1(spec.c) * C0 * spec.h * spec.w * 2 + 8 * spec.c * v.blocks


def replay(spec: ChannelNormSpec, params: dict, profile: Profile) -> Prediction:
    rpt, c, hw = params["rows_per_tile"], spec.c, spec.h * spec.w
    per_image, blocks = ceil(hw / rpt), blocks_of(spec, rpt, profile)
    tiles = spec.n * per_image

    def block(core: SimCore, b: int) -> None:
        t0, t1 = tiles * b // blocks, tiles * (b + 1) // blocks
        layernorm_prologue(core, c, t0 < t1)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            pixels = min(rpt, hw - t % per_image * rpt)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            core.copy_gm(c1(c), pixels * C0, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            for _ in range(pixels):
                if c >= C0:
                    core.vec("Cast", True, c // C0)
                if c % C0:
                    core.vec("Cast", True, 1)
                layernorm_row(core, c)
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(pixels, c, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


def unfused_specs(spec: ChannelNormSpec) -> tuple[CopySpec, RowSpec]:
    """What the same work is without this family: the Transpose(0,2,3,1) as lowering's copy_mte move (from the
    NC1HWC0 bytes when the channels are whole C0 blocks, else from the rows a host relayout writes) and
    layernorm_vector over its rows."""
    xs = (spec.n, spec.c, spec.h, spec.w)
    dims, strides = blocked_transpose(xs, (0, 2, 3, 1), spec.c % C0 == 0, False)
    moves = format_moves([(dims, strides, 0)])
    return CopySpec(parse_moves(moves)[0].numel, moves), RowSpec("layernorm", spec.rows, spec.c, spec.eps)


FAMILY = register(Family("channel_layernorm_vector", "channel_layernorm", "vector", rule, mte2, replay, space=space))
