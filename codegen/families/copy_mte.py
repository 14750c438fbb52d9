"""copy_mte: every input moved to its place in the output by strided MTE copies through UB
(templates/copy_mte.cpp.j2): a Transpose of any permutation, a Concat that needs a copy (any axis, NC1HWC0 rows
or row-major), their blocked forms. Each item (a chunk of input rows) comes GM->UB as one burst per row (rows at
a 32-byte pitch in UB) and goes back UB->GM as one strided burst per row, or one burst per element where the
input's last axis scatters in the output; ping-pong over items. Pure data movement."""
from __future__ import annotations

from math import ceil, prod

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.copy_spec import CopySpec, Move, pitch
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, register, splits


def capacity(spec: CopySpec, profile: Profile) -> int:
    """fp16 elements of one of the two UB buffers (ping, pong), a whole number of 32-byte blocks: what UB holds,
    or less, so that every Vector core gets about one buffer's worth of the output."""
    share = ceil(spec.out_numel / profile.cores_for("vector") / 16) * 16
    return min(profile.capacity["UB"] // 2 // 32 * 16, share)


def item_table(spec: CopySpec, cap: int) -> list[dict]:
    """Per move, what the template bakes and the replay walks, for buffers of `cap` elements: its layout
    (copy_spec.Move.layout), outer axes and first global item."""
    first, table = 0, []
    for t, m in enumerate(spec.parsed):
        chunk_rows, piece, chunks, pieces = m.layout(cap)
        table.append({"input": t, "move": m, "chunk_rows": chunk_rows, "piece": piece, "chunks": chunks,
                      "pieces": pieces, "first": first, "outer": list(zip(m.dims[:-2], m.strides[:-2]))})
        first += m.items(cap)
    return table


def buffer_elems(spec: CopySpec, cap: int) -> int:
    """Elements of each of the two UB buffers: the largest item, in whole 32-byte blocks."""
    return max(e["chunk_rows"] * pitch(e["piece"]) for e in item_table(spec, cap))


def total_items(spec: CopySpec, cap: int) -> int:
    return sum(m.items(cap) for m in spec.parsed)


def copy_rule(spec: CopySpec, profile: Profile, log: OptLog) -> Variant:
    cap = capacity(spec, profile)
    if cap < 16:
        raise KilnError("tiling", spec.name, "UB cannot hold two 32-byte buffers")
    items = total_items(spec, cap)
    ipb = max(1, ceil(items / profile.cores_for("vector")))
    return Variant("copy_mte", {"items_per_block": ipb, "tile_elems": cap}, ceil(items / ipb),
                   {"UB": 2 * buffer_elems(spec, cap) * 2})


def copy_mte2(spec: CopySpec, v: Variant) -> int:
    return spec.out_numel * 2


def item_walk(entry: dict, local: int) -> tuple[int, int, int, int]:
    """(input offset, output offset, rows, row length) of item `local` of a move (the template's arithmetic)."""
    m: Move = entry["move"]
    piece, local = local % entry["pieces"], local // entry["pieces"]
    chunk, unit = local % entry["chunks"], local // entry["chunks"]
    rows, length = m.dims[-2], m.dims[-1]
    out = m.base + chunk * entry["chunk_rows"] * m.strides[-2] + piece * entry["piece"] * m.strides[-1]
    for d, s in reversed(entry["outer"]):
        out += (unit % d) * s
        unit //= d
    unit_index = local // entry["chunks"]
    at = unit_index * rows * length + chunk * entry["chunk_rows"] * length + piece * entry["piece"]
    return at, out, min(entry["chunk_rows"], rows - chunk * entry["chunk_rows"]), \
        min(entry["piece"], length - piece * entry["piece"])


def replay_copy(spec, params: dict, profile: Profile) -> Prediction:
    ipb, table = params["items_per_block"], item_table(spec, params["tile_elems"])
    items = total_items(spec, params["tile_elems"])

    def block(core: SimCore, b: int) -> None:
        q = PingPongSim(core, "MTE2", "MTE3", 0)
        for i in range(b * ipb, min(items, (b + 1) * ipb)):
            entry = next(e for e in reversed(table) if e["first"] <= i)
            _, _, rows, length = item_walk(entry, i - entry["first"])
            s = q.slot(i - b * ipb)
            q.acquire_for_write(s)
            core.copy_gm(rows, length, 2, "UB", src=entry["input"])
            q.written(s)
            q.acquire_for_read(s)
            if entry["move"].strides[-1] == 1:
                core.copy_ub_to_gm(rows, length, 2)
            else:
                for _ in range(rows):
                    core.copy_ub_to_gm(length, 1, 2)
            q.released(s)
        q.drain()

    return launch(profile, "vector", ceil(items / ipb), block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    cap = params["tile_elems"]
    return [{"items_per_block": p, "tile_elems": cap} for p in splits(total_items(spec, cap))]


def template_moves(spec: CopySpec, cap: int) -> list[dict]:
    """The move table the template bakes: outer axes padded to four (extent 1, stride 0)."""
    out = []
    for e in item_table(spec, cap):
        m: Move = e["move"]
        outer = [(1, 0)] * (4 - len(e["outer"])) + e["outer"]
        if len(outer) > 4:
            raise KilnError("tiling", spec.name, f"a move of {len(m.dims)} axes (at most 6 after merging)")
        out.append({**e, "outer": outer, "rows": m.dims[-2], "length": m.dims[-1], "row_stride": m.strides[-2],
                    "elem_stride": m.strides[-1], "base": m.base, "units": prod(m.dims[:-2]),
                    "pitch": pitch(e["piece"])})
    return out


FAMILY = register(Family("copy_mte", "copy", "vector", copy_rule, copy_mte2, replay_copy, space=space,
                         template_globals={"copy_moves": template_moves, "copy_buffer": buffer_elems}))
