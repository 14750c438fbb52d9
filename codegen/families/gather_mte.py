"""gather_mte: ONNX Gather with indices known only at run time (an embedding lookup, a class token picked by a
computed index) as MTE copies driven by the indices (templates/gather_mte.cpp.j2). Each block brings the index
vector GM->UB in one burst, the scalar unit reads the indices of its rows (GetValue, one S instruction each; a
negative index counts from the end of the axis, an out-of-range one raises), then ping-pong over items: a chunk of
consecutive output rows (or a piece of one row longer than a buffer) comes GM->UB as one burst per row from the
row its index names, and goes back UB->GM as one strided burst. Pure data movement; costs are the GM copy costs of
docs/ascend-model.md and the scalar read."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.copy_spec import GatherSpec, pitch
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, register, splits


def index_pitch(spec: GatherSpec) -> int:
    """fp32 elements the index vector takes in UB: whole 32-byte blocks."""
    return ceil(spec.count / 8) * 8


def capacity(spec: GatherSpec, profile: Profile) -> int:
    """fp16 elements of each of the two row buffers (a multiple of 16): what UB holds beside the index vector, or
    less, so that every Vector core gets about one buffer's worth of the output."""
    free = profile.capacity["UB"] - index_pitch(spec) * 4
    share = max(ceil(spec.rows * spec.inner / profile.cores_for("vector") / 16) * 16, pitch(spec.inner))
    return min(free // 2 // 32 * 16, share)


def layout(spec: GatherSpec, cap: int) -> tuple[int, int, int, int]:
    """(rows per chunk, piece length, row chunks, pieces per row) for buffers of `cap` elements."""
    piece = min(spec.inner, cap)
    chunk_rows = max(1, min(spec.rows, cap // pitch(piece))) if piece == spec.inner else 1
    return chunk_rows, piece, ceil(spec.rows / chunk_rows), ceil(spec.inner / piece)


def total_items(spec: GatherSpec, cap: int) -> int:
    _, _, chunks, pieces = layout(spec, cap)
    return chunks * pieces


def gather_rule(spec: GatherSpec, profile: Profile, log: OptLog) -> Variant:
    cap = capacity(spec, profile)
    if cap < 16:
        raise KilnError("tiling", spec.name, "UB cannot hold the indices and two 32-byte row buffers")
    items = total_items(spec, cap)
    ipb = max(1, ceil(items / profile.cores_for("vector")))
    rows, piece, _, _ = layout(spec, cap)
    return Variant("gather_mte", {"items_per_block": ipb, "tile_elems": cap}, ceil(items / ipb),
                   {"UB": index_pitch(spec) * 4 + 2 * rows * pitch(piece) * 2})


def block_rows(spec: GatherSpec, cap: int, ipb: int, b: int) -> tuple[int, int]:
    """The output rows [first, end) block b's items cover (the template's arithmetic)."""
    chunk_rows, _, _, pieces = layout(spec, cap)
    i0, i1 = b * ipb, min(total_items(spec, cap), (b + 1) * ipb)
    return (i0 // pieces) * chunk_rows, min(spec.rows, ((i1 - 1) // pieces + 1) * chunk_rows)


def gather_mte2(spec: GatherSpec, v: Variant) -> int:
    return spec.rows * spec.inner * 2 + v.blocks * spec.count * 4


def replay_gather(spec: GatherSpec, params: dict, profile: Profile) -> Prediction:
    ipb, cap = params["items_per_block"], params["tile_elems"]
    chunk_rows, piece, _, pieces = layout(spec, cap)
    items = total_items(spec, cap)

    def block(core: SimCore, b: int) -> None:
        core.copy_gm(1, spec.count, 4, "UB", src=1)
        core.set_flag("MTE2", "S", 0)
        core.wait_flag("MTE2", "S", 0)
        first, end = block_rows(spec, cap, ipb, b)
        for _ in range(min(end - first, spec.count)):
            core.scalar_read(4)
        core.set_flag("S", "MTE2", 0)
        core.wait_flag("S", "MTE2", 0)
        q = PingPongSim(core, "MTE2", "MTE3", 0)
        for i in range(b * ipb, min(items, (b + 1) * ipb)):
            chunk, part = divmod(i, pieces)
            rows = min(chunk_rows, spec.rows - chunk * chunk_rows)
            length = min(piece, spec.inner - part * piece)
            s = q.slot(i - b * ipb)
            q.acquire_for_write(s)
            for _ in range(rows):
                core.copy_gm(1, length, 2, "UB", src=0)
            q.written(s)
            q.acquire_for_read(s)
            core.copy_ub_to_gm(rows, length, 2)
            q.released(s)
        q.drain()

    return launch(profile, "vector", ceil(items / ipb), block)


def space(spec: GatherSpec, params: dict, profile: Profile) -> list[dict]:
    cap = params["tile_elems"]
    return [{"items_per_block": p, "tile_elems": cap} for p in splits(total_items(spec, cap))]


def template_layout(spec: GatherSpec, cap: int) -> dict:
    """What the template bakes for buffers of `cap` elements."""
    chunk_rows, piece, chunks, pieces = layout(spec, cap)
    return {"chunk_rows": chunk_rows, "piece": piece, "chunks": chunks, "pieces": pieces, "pitch": pitch(piece),
            "index_pitch": index_pitch(spec), "item_count": chunks * pieces}


FAMILY = register(Family("gather_mte", "gather", "vector", gather_rule, gather_mte2, replay_gather, space=space,
                         template_globals={"gather_layout": template_layout}))
