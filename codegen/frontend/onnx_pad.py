"""ONNX frontend, import rules of Pad (opset 11+: pads, constant_value and, from 18, axes as inputs; Pad-2's
attributes arrive as inputs through onnx's version converter). The normaliser makes every pad explicit: `pads`
as begins then ends over all axes, `mode`, and `value` (constant mode's fill). With constant data the op folds
at build time (np.pad); on run-time data the fusion pass folds a zero constant pad of H and W into the Conv
reading it (codegen/passes/fusion.py), another constant pad is a copy_mte kernel, reflect and edge gather_mte
kernels (codegen/passes/pad_rules.py), and the lowering refuses crops naming the node."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from .onnx_base import Unsupported, as_ints, const_input, has_input, shape_of

MODES = ("constant", "reflect", "edge")


def check_pad(node: Node, g: Graph) -> str | None:
    for i, what in ((1, "pads"), (2, "constant_value"), (3, "axes")):
        if has_input(node, i) and const_input(g, node, i) is None:
            return f"{what} (input {i}) is computed at run time; kiln needs it constant"
    mode = _mode(node)
    if mode not in MODES:
        return f"mode={mode!r} is not supported (accepted: {', '.join(MODES)})"
    if not has_input(node, 1):
        return "pads (input 1) is missing"
    return None


def _explicit(rank: int, pads: tuple[int, ...], axes_in) -> tuple[int, ...]:
    """Begins then ends over all `rank` axes, from ONNX's pads over `axes_in` (None: every axis)."""
    axes = [a + rank if a < 0 else a for a in as_ints(axes_in)] if axes_in is not None else list(range(rank))
    if len(pads) != 2 * len(axes) or any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise Unsupported(f"pads {list(pads)} do not match axes {axes} of a rank-{rank} input")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a], full[rank + a] = pads[k], pads[len(axes) + k]
    return tuple(full)


def _mode(node: Node) -> str:
    mode = node.attrs.get("mode", "constant")
    return mode.decode() if isinstance(mode, bytes) else mode


def normalise_pad(node: Node, g: Graph) -> dict[str, Any]:
    value = const_input(g, node, 2)
    return {"mode": _mode(node),
            "pads": _explicit(len(shape_of(g, node.inputs[0])), as_ints(const_input(g, node, 1)),
                              const_input(g, node, 3)),
            "value": float(np.asarray(value).reshape(-1)[0]) if value is not None and value.size else 0.0}


def infer_pad(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shape = shape_of(g, node.inputs[0])
    pads = attrs["pads"]
    out = tuple(d + pads[i] + pads[len(shape) + i] for i, d in enumerate(shape))
    if any(d <= 0 for d in out):
        raise Unsupported(f"pads {list(pads)} leave an empty result {list(out)}")
    return [out]


def fold_pad(node: Node, args: list) -> list[np.ndarray]:
    """np.pad of the constant data (a negative pad crops)."""
    data = args[0]
    rank = data.ndim
    pads = _explicit(rank, as_ints(args[1]), args[3] if len(args) > 3 else None)
    crop = tuple(slice(max(-pads[i], 0), data.shape[i] - max(-pads[rank + i], 0)) for i in range(rank))
    widths = [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]
    value = args[2] if len(args) > 2 and args[2] is not None and np.size(args[2]) else 0
    if _mode(node) == "constant":
        return [np.pad(data[crop], widths, constant_values=np.asarray(value).reshape(-1)[0]).astype(data.dtype)]
    return [np.pad(data[crop], widths, mode="reflect" if _mode(node) == "reflect" else "edge").astype(data.dtype)]


ACCEPTED_PAD = {
    "Pad": "mode: constant (any value), reflect, edge; pads >= 0 on any axes on run-time data (a zero pad of H and "
           "W of a 4-D input read only by a Conv folded into its pads; another constant pad one copy_mte kernel; "
           "reflect (at most size - 1 a side) and edge one gather_mte kernel per padded axis), any pads at build "
           "time (constant data); pads, constant_value, axes: constant (opset 11+ inputs, Pad-2 attributes "
           "converted, opset 18 axes, negative axes)",
}
