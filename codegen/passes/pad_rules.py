"""The lowering of a Pad the fusion pass did not fold into a Conv (codegen/passes/pad_fold.py), a function of the
lowerer (codegen/passes/lowering.py is at its size limit). Mode constant, any value, pads >= 0 on any axes: one
copy_mte kernel whose moves tile the output, the input moved into the interior and the frame as up to two
constant blocks per padded axis (fill-value rows from the weights blob; the block before and after the input on
axis a spans the input's extent on the axes before a and the whole output on those after). Reflect and edge: per
padded axis one gather_mte kernel with constant indices (the source position of each output position). Negative
pads (crops) on run-time data are refused naming the node."""
from __future__ import annotations

from math import prod

import numpy as np

from ..ir.copy_spec import GATHER_MAX_INDICES, CopySpec, format_moves, row_major_strides
from ..ir.graph import Node, OpInstance
from .copy_rules import copy_step
from .lowered import LowererState, Step, Storage
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


def border_indices(mode: str, size: int, before: int, after: int) -> list[int] | None:
    """The source index of each output position of one axis padded in `mode` (edge: the end values repeated;
    reflect: mirrored about the end values, which ONNX allows up to size - 1 on each side), None when out of reach."""
    if mode == "reflect" and max(before, after) > size - 1:
        return None
    if mode == "edge":
        return [0] * before + list(range(size)) + [size - 1] * after
    return [before - i for i in range(before)] + list(range(size)) + [size - 2 - i for i in range(after)]


def border_pad(lw: LowererState, node: Node, src: str) -> None:
    """Reflect or edge: per padded axis one gather_mte kernel with constant indices (border_indices). The value
    between two is the output with the axes not yet padded cropped back (`<y>@crop_<begins>_<ends>`, isolate.py),
    which is what padding the first axes gives for these modes."""
    a, y = node.attrs, node.outputs[0]
    pads, shape = tuple(a["pads"]), list(lw.shape(node.inputs[0]))
    rank = len(shape)
    axes = [i for i in range(rank) if pads[i] or pads[rank + i]]
    for k, axis in enumerate(axes):
        idx = border_indices(a["mode"], shape[axis], pads[axis], pads[rank + axis])
        if idx is None or len(idx) > GATHER_MAX_INDICES:
            raise lw.fail(node, f"{a['mode']} pads {pads[axis]}, {pads[rank + axis]} of axis {axis} (size "
                                f"{shape[axis]}): reflect takes at most size - 1 a side, and at most "
                                f"{GATHER_MAX_INDICES} positions an axis")
        spec = (prod(shape[:axis]), shape[axis], len(idx), prod(shape[axis + 1:]))
        shape[axis] = len(idx)
        rest = axes[k + 1:]
        crop = [pads[i] if i in rest else 0 for i in range(rank)] + [pads[rank + i] if i in rest else 0
                                                                     for i in range(rank)]
        out = lw.new_value(f"{y}@crop_{'_'.join(map(str, crop))}" if rest else y, Storage("ND", tuple(shape)))
        lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type],
                             [src, lw.weight(f"{node.name}.indices{axis}", np.asarray(idx, np.float32))], out,
                             instance=OpInstance(node.name, "Gather", {"gather": spec, "activation": "",
                                                                       "bias": False})))
        src = out
    lw.device[y] = y
    lw.decisions.append(f"{node.name}: Pad {a['mode']}, pads {list(pads)}: {len(axes)} gather_mte kernel(s) with "
                        f"constant indices, one per padded axis {axes}")


def pad(lw: LowererState, node: Node) -> None:
    a, x = node.attrs, node.inputs[0]
    pads = tuple(a["pads"])
    if min(pads) < 0:
        readers = [n for n in lw.g.nodes if node.outputs[0] in n.inputs]
        why = why_not_folded(lw.g, node, readers, {v.name for v in lw.g.outputs}) or "fusion did not run"
        raise lw.fail(node, f"on run-time data Pad runs with pads >= 0 (constant: a copy_mte kernel; reflect, "
                            f"edge: gather_mte kernels), or folded into the Conv reading it; here pads {list(pads)} "
                            f"({why})")
    if a["mode"] != "constant":
        return border_pad(lw, node, lw.act(node, x, "ND"))
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
