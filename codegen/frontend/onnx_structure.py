"""ONNX frontend, import rules of the data-movement ops on run-time values: Slice, Split, Gather, Squeeze,
Unsqueeze. Each has a check (a reason when kiln cannot lower the node), a normaliser (every index constant,
non-negative and clamped per the ONNX spec, as attributes) and a shape rule. With constant data the same ops
still fold at build time (onnx_ops evaluators); these rules serve the rest."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from .onnx_base import Unsupported, as_ints, const_input, has_input, shape_of


def _axis(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise Unsupported(f"axis {axis} is out of range for rank {rank}")
    return a


def _constant_inputs(node: Node, g: Graph, names: dict[int, str]) -> str | None:
    """A reason when one of the named index inputs is computed at run time."""
    for i, what in names.items():
        if has_input(node, i) and const_input(g, node, i) is None:
            return f"{what} (input {i}) is computed at run time; kiln needs it constant"
    return None


# Slice (opset 10+: starts, ends, axes, steps as inputs)

def check_slice(node: Node, g: Graph) -> str | None:
    reason = _constant_inputs(node, g, {1: "starts", 2: "ends", 3: "axes", 4: "steps"})
    if reason:
        return reason
    steps = const_input(g, node, 4)
    if steps is not None and any(s != 1 for s in as_ints(steps)):
        return f"steps {list(as_ints(steps))}: only step 1 is supported"
    return None


def _clamp(index: int, dim: int) -> int:
    """ONNX Slice with step 1: a negative index counts from the end, then clamps to [0, dim]."""
    return min(max(index + dim if index < 0 else index, 0), dim)


def normalise_slice(node: Node, g: Graph) -> dict[str, Any]:
    shape = shape_of(g, node.inputs[0])
    starts, ends = as_ints(const_input(g, node, 1)), as_ints(const_input(g, node, 2))
    axes_in = const_input(g, node, 3)
    axes = as_ints(axes_in) if axes_in is not None else tuple(range(len(starts)))
    if not len(starts) == len(ends) == len(axes):
        raise Unsupported(f"starts {list(starts)}, ends {list(ends)} and axes {list(axes)} differ in length")
    begin, end = [0] * len(shape), list(shape)
    seen: set[int] = set()
    for s, e, a in zip(starts, ends, axes):
        axis = _axis(a, len(shape))
        if axis in seen:
            raise Unsupported(f"axis {a} is sliced twice")
        seen.add(axis)
        begin[axis], end[axis] = _clamp(s, shape[axis]), _clamp(e, shape[axis])
        if end[axis] <= begin[axis]:
            raise Unsupported(f"the slice [{s}:{e}] of axis {a} (size {shape[axis]}) is empty")
    return {"begin": tuple(begin), "end": tuple(end)}


def infer_slice(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [tuple(e - b for b, e in zip(attrs["begin"], attrs["end"]))]


# Split (opset 13: split as an input; opset 18: num_outputs)

def check_split(node: Node, g: Graph) -> str | None:
    return _constant_inputs(node, g, {1: "split"})


def normalise_split(node: Node, g: Graph) -> dict[str, Any]:
    shape = shape_of(g, node.inputs[0])
    axis = _axis(int(node.attrs.get("axis", 0)), len(shape))
    outputs, dim = len(node.outputs), shape[axis]
    split = const_input(g, node, 1)
    if split is not None:
        sizes = as_ints(split)
        if len(sizes) != outputs or sum(sizes) != dim or min(sizes) < 1:
            raise Unsupported(f"split {list(sizes)} does not divide axis {axis} (size {dim}) into {outputs} "
                              f"non-empty parts")
    else:  # equal parts; opset 18 lets the last one be smaller (ceil(dim / outputs) each)
        part = -(-dim // outputs)
        sizes = tuple(min(part, dim - i * part) for i in range(outputs))
        if min(sizes) < 1:
            raise Unsupported(f"axis {axis} (size {dim}) cannot be split into {outputs} non-empty parts")
    return {"axis": axis, "sizes": tuple(sizes)}


def infer_split(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shape, axis = shape_of(g, node.inputs[0]), attrs["axis"]
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in attrs["sizes"]]


# Gather: a constant scalar index on run-time data is a view; other indices (run-time: a graph input; constant:
# any shape) drive the gather_mte kernel

def check_gather(node: Node, g: Graph) -> str | None:
    index = const_input(g, node, 1)
    if index is None and node.inputs[1] not in {v.name for v in g.inputs}:
        return ("indices (input 1) are computed in the model; kiln takes run-time indices from a graph input "
                "(int64/int32) or a constant")
    return None


def normalise_gather(node: Node, g: Graph) -> dict[str, Any]:
    shape = shape_of(g, node.inputs[0])
    axis = _axis(int(node.attrs.get("axis", 0)), len(shape))
    index = const_input(g, node, 1)
    if index is not None:
        values = np.asarray(index).reshape(-1)
        bad = values[(values < -shape[axis]) | (values >= shape[axis])]
        if bad.size:
            raise Unsupported(f"index {int(bad[0])} is out of range for axis {axis} (size {shape[axis]})")
        if index.ndim == 0:
            return {"axis": axis, "index": int(values[0]) % shape[axis]}
        return {"axis": axis, "indices": tuple(int(v) for v in values), "indices_shape": tuple(index.shape)}
    return {"axis": axis}


def infer_gather(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shape, axis = shape_of(g, node.inputs[0]), attrs["axis"]
    indices = () if "index" in attrs else attrs.get("indices_shape") or tuple(shape_of(g, node.inputs[1]))
    return [shape[:axis] + tuple(indices) + shape[axis + 1:]]


# Squeeze, Unsqueeze (opset 13: axes as an input)

def check_axes_input(node: Node, g: Graph) -> str | None:
    return _constant_inputs(node, g, {1: "axes"})


def _axes(node: Node, g: Graph) -> tuple[int, ...] | None:
    if has_input(node, 1):
        return as_ints(const_input(g, node, 1))
    return as_ints(node.attrs["axes"]) if "axes" in node.attrs else None


def normalise_squeeze(node: Node, g: Graph) -> dict[str, Any]:
    shape = shape_of(g, node.inputs[0])
    axes = _axes(node, g)
    if axes is None:
        return {"axes": tuple(i for i, d in enumerate(shape) if d == 1)}
    picked = tuple(sorted({_axis(a, len(shape)) for a in axes}))
    wide = [a for a in picked if shape[a] != 1]
    if wide:
        raise Unsupported(f"axes {wide} of {list(shape)} are not of size 1")
    return {"axes": picked}


def infer_squeeze(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [tuple(d for i, d in enumerate(shape_of(g, node.inputs[0])) if i not in attrs["axes"])]


def normalise_unsqueeze(node: Node, g: Graph) -> dict[str, Any]:
    rank = len(shape_of(g, node.inputs[0]))
    axes = _axes(node, g)
    if not axes:
        raise Unsupported("Unsqueeze needs axes")
    picked = sorted({_axis(a, rank + len(axes)) for a in axes})
    if len(picked) != len(axes):
        raise Unsupported(f"axes {list(axes)} repeat an axis")
    return {"axes": tuple(picked)}


def infer_unsqueeze(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    dims = list(shape_of(g, node.inputs[0]))
    for a in attrs["axes"]:
        dims.insert(a, 1)
    return [tuple(dims)]


# Expand and Tile: a broadcast of size-1 axes, run by the elementwise program (the operand forms of Add)

def check_expand(node: Node, g: Graph) -> str | None:
    return _constant_inputs(node, g, {1: "shape"})


def normalise_expand(node: Node, g: Graph) -> dict[str, Any]:
    shape, target = shape_of(g, node.inputs[0]), as_ints(const_input(g, node, 1))
    try:
        return {"shape": tuple(int(d) for d in np.broadcast_shapes(shape, target))}
    except ValueError:
        raise Unsupported(f"{list(shape)} does not broadcast to {list(target)}") from None


def check_tile(node: Node, g: Graph) -> str | None:
    reason = _constant_inputs(node, g, {1: "repeats"})
    if reason:
        return reason
    shape, repeats = shape_of(g, node.inputs[0]), as_ints(const_input(g, node, 1))
    if len(repeats) != len(shape):
        return f"repeats {list(repeats)} do not match the input's rank {len(shape)}"
    wide = [i for i, (d, r) in enumerate(zip(shape, repeats)) if r != 1 and d != 1]
    if wide:
        return (f"axes {wide} of {list(shape)} are repeated but not of size 1: only a Tile that is a broadcast "
                f"(repeated axes of size 1) runs on run-time data")
    return None


def normalise_tile(node: Node, g: Graph) -> dict[str, Any]:
    shape, repeats = shape_of(g, node.inputs[0]), as_ints(const_input(g, node, 1))
    return {"shape": tuple(d * r for d, r in zip(shape, repeats))}


def infer_broadcast(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [attrs["shape"]]


ACCEPTED_STRUCTURE: dict[str, str] = {
    "Expand": "shape: constant; the input in one of the operand forms of Add over the result (the same shape, per "
              "channel, a row, a scalar)",
    "Tile": "repeats: constant; on run-time data only repeated axes of size 1 (a broadcast, as Expand)",
    "Slice": "starts, ends, axes: constant (negative counts from the end, clamped to the dim); steps: 1; "
             "non-empty result",
    "Split": "axis: any; split: constant sizes (input), or equal parts (num_outputs, last part may be smaller)",
    "Gather": "axis: any (negative counts from the end); indices: any shape, negative counting from the end of the "
              "axis, a graph input (int64/int32, run-time values below 2**24) or a constant; a constant scalar "
              "index is a view, others one gather_mte kernel; with constant data and indices it folds",
    "Squeeze": "axes: constant (input or attribute), size-1 axes; omitted = every size-1 axis",
    "Unsqueeze": "axes: constant (input or attribute), distinct",
}
