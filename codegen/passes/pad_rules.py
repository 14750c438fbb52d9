"""The lowering of a Pad the fusion pass did not fold into a Conv (codegen/passes/pad_fold.py), a function of the
lowerer (codegen/passes/lowering.py is at its size limit). Mode constant, any value, pads >= 0 on any axes: one
copy_mte kernel whose moves tile the output, the input moved into the interior and the frame as up to two
constant blocks per padded axis (fill-value rows from the weights blob; the block before and after the input on
axis a spans the input's extent on the axes before a and the whole output on those after). Reflect, edge and
negative pads (crops) on run-time data are refused naming the node."""
from __future__ import annotations

from math import prod

import numpy as np

from ..ir.copy_spec import CopySpec, format_moves, row_major_strides
from ..ir.graph import Node
from .copy_rules import copy_step
from .lowered import LowererState, Storage
from .pad_fold import why_not_folded


def frame_moves(shape: tuple[int, ...], pads: tuple[int, ...]) -> tuple[tuple[int, ...], list]:
    """(output shape, [(dims, output strides, base)] of the input's move first, then the frame blocks)."""
    rank = len(shape)
    begin, end = pads[:rank], pads[rank:]
    out = tuple(d + b + e for d, b, e in zip(shape, begin, end))
    strides = row_major_strides(out)
    moves = [(tuple(shape), strides, sum(b * s for b, s in zip(begin, strides)))]
    for a in range(rank):
        inner = sum(begin[i] * strides[i] for i in range(a))  # the input's corner on the axes before a
        for width, at in ((begin[a], 0), (end[a], begin[a] + shape[a])):
            if width:
                moves.append((tuple(shape[:a]) + (width,) + out[a + 1:], strides, inner + at * strides[a]))
    return out, moves


def pad(lw: LowererState, node: Node) -> None:
    a, x = node.attrs, node.inputs[0]
    pads = tuple(a["pads"])
    if a["mode"] != "constant" or min(pads) < 0:
        readers = [n for n in lw.g.nodes if node.outputs[0] in n.inputs]
        why = why_not_folded(lw.g, node, readers, {v.name for v in lw.g.outputs}) or "fusion did not run"
        raise lw.fail(node, f"on run-time data Pad runs in mode constant with pads >= 0 (a copy_mte kernel), or "
                            f"folded into the Conv reading it; here mode {a['mode']}, pads {list(pads)} ({why})")
    shape = lw.shape(x)
    out, moves = frame_moves(shape, pads)
    fill = np.float16(a["value"])
    ins = [lw.act(node, x, "ND")] + [lw.weight(f"{node.name}.frame{i}", np.full(prod(d), fill, np.float16))
                                     for i, (d, _, _) in enumerate(moves[1:])]
    y = node.outputs[0]
    lw.device[y] = lw.new_value(y, Storage("ND", out))
    copy_step(lw, node, CopySpec(prod(out), format_moves(moves)), ins, y)
    lw.decisions.append(f"{node.name}: Pad constant {a['value']:g}, pads {list(pads)} of {list(shape)}: one copy_mte "
                        f"kernel, the input into the interior and {len(moves) - 1} constant frame block(s)")
