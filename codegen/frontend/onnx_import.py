"""ONNX frontend: an .onnx file -> kiln IR (see ir.py).

load_onnx() runs these steps in order:

    read        parse the file; anything unreadable is a KilnError naming the file
    opset       the default-domain opset must be 13..21
    bind        a symbolic batch dimension (dim 0) becomes `batch`; any other dynamic dim is an error
    infer       onnx shape inference on the bound model
    to IR       nodes, values (shapes possibly still partial), initializers as NumPy arrays
    passes      fold_constants, remove_identities, remove_dropout, fold_batchnorm (PASSES)
    normalise   per-op check and explicit attributes, driven by the OPS table
    finish      drop unused initializers, float weights to float32, every shape static

Op support is one table, OPS: op type -> OpEntry (check, normalise, shape rule,
build-time evaluator). Adding an op is one entry there (and a test).

Problems with the model (unsupported ops or attribute values, dynamic shapes)
are collected, not raised one at a time: load_onnx() raises one KilnError
listing all of them, check_onnx() returns them, analyze.py counts them.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import KilnError
from ..ir.graph import Graph, Node, Value

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # only reading ONNX files needs it; the kernel-list build does not
    onnx = None

ACCEPTED_OPSETS = range(13, 22)
_DEFAULT_DOMAINS = ("", "ai.onnx")


# ---------------------------------------------------------------- problems

@dataclass
class Problem:
    """Something kiln cannot compile. kind: "model" (the file as a whole), "op"
    (an unsupported op or attribute value) or "shape" (a shape that is not static)."""
    node: str
    op_type: str
    reason: str
    kind: str

    def as_dict(self) -> dict[str, str]:
        return {"node": self.node, "op_type": self.op_type, "reason": self.reason}


class _ShapeUnknown(Exception):
    """A shape rule or normaliser needed a value whose shape is not static."""

    def __init__(self, value: str):
        super().__init__(value)
        self.value = value


class _Unsupported(Exception):
    """A normaliser or shape rule found attribute/shape values kiln cannot lower."""


# ---------------------------------------------------------------- small helpers

def is_static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


def _shape(g: Graph, name: str) -> tuple[int, ...]:
    v = g.values.get(name)
    if v is None or not is_static(v.shape):
        raise _ShapeUnknown(name)
    return v.shape


def _has_input(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] != ""


def _const(g: Graph, node: Node, index: int) -> np.ndarray | None:
    """The constant at input `index`; None when the input is omitted or computed at run time."""
    return g.initializers.get(node.inputs[index]) if _has_input(node, index) else None


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


def _axis(axis: int, rank: int, allow_end: bool = False) -> int:
    """Axis made non-negative; allow_end admits axis == rank (Flatten)."""
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank + (1 if allow_end else 0):
        raise _Unsupported(f"axis {axis} is out of range for rank {rank}")
    return a


def _output_used(g: Graph, node: Node, index: int) -> bool:
    if index >= len(node.outputs) or not node.outputs[index]:
        return False
    name = node.outputs[index]
    return any(name in n.inputs for n in g.nodes) or any(v.name == name for v in g.outputs)


def _copy(graph: Graph) -> Graph:
    """A graph passes can edit freely: new node objects and dicts; arrays are shared, never edited."""
    nodes = [replace(n, inputs=list(n.inputs), outputs=list(n.outputs), attrs=dict(n.attrs), source=list(n.source))
             for n in graph.nodes]
    return replace(graph, nodes=nodes, values=dict(graph.values), initializers=dict(graph.initializers),
                   inputs=list(graph.inputs), outputs=list(graph.outputs))


def _fresh_name(g: Graph, base: str) -> str:
    name, k = base, 1
    while name in g.values or name in g.initializers:
        name, k = f"{base}_{k}", k + 1
    return name


# ---------------------------------------------------------------- per-op rules

def _copy_attrs(node: Node, g: Graph) -> dict[str, Any]:
    return dict(node.attrs)


def _no_check(node: Node, g: Graph) -> str | None:
    return None


def _same_shape(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [_shape(g, node.inputs[0])]


def _broadcast_shape(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shapes = [_shape(g, i) for i in node.inputs if i]
    try:
        return [tuple(int(d) for d in np.broadcast_shapes(*shapes))]
    except ValueError:
        raise _Unsupported(f"input shapes {shapes} do not broadcast") from None


# 2-D windows (Conv, MaxPool, AveragePool)

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _check_window(node: Node) -> str | None:
    a = node.attrs
    if a.get("auto_pad", "NOTSET") not in _AUTO_PADS:
        return f"auto_pad={a['auto_pad']!r} is not one of {_AUTO_PADS}"
    for key, length in (("strides", 2), ("dilations", 2), ("pads", 4)):
        if key in a and len(a[key]) != length:
            return f"{key}={list(a[key])}: only 2-D windows are supported ({length} entries)"
    if any(s < 1 for s in a.get("strides", ())) or any(d < 1 for d in a.get("dilations", ())):
        return "strides and dilations must be >= 1"
    if any(p < 0 for p in a.get("pads", ())):
        return f"negative pads {list(a['pads'])} are not supported"
    return None


def _window_attrs(node: Node, g: Graph, kernel: tuple[int, int]) -> dict[str, tuple[int, ...]]:
    """Explicit strides, pads (top, left, bottom, right) and dilations, auto_pad resolved."""
    strides = _ints(node.attrs.get("strides", (1, 1)))
    dilations = _ints(node.attrs.get("dilations", (1, 1)))
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        # ONNX orders 2-D pads [x1_begin, x2_begin, x1_end, x2_end]: already top, left, bottom, right
        pads = _ints(node.attrs.get("pads", (0, 0, 0, 0)))
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    else:  # SAME_*: output = ceil(input / stride); the odd pixel of padding goes at the end (UPPER) or begin (LOWER)
        begin, end = [], []
        for size, k, s, d in zip(_shape(g, node.inputs[0])[2:], kernel, strides, dilations):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        pads = (begin[0], begin[1], end[0], end[1])
    return {"strides": strides, "pads": pads, "dilations": dilations}


def _window_output(in_shape: tuple[int, ...], kernel, attrs: dict) -> tuple[int, int]:
    if len(in_shape) != 4:
        raise _Unsupported(f"input has shape {in_shape}; only 4-D NCHW input is supported")
    pt, pl, pb, pr = attrs["pads"]
    out = []
    for size, p, k, s, d in zip(in_shape[2:], (pt + pb, pl + pr), kernel, attrs["strides"], attrs["dilations"]):
        o = (size + p - (k - 1) * d - 1) // s + 1
        if o < 1:
            raise _Unsupported(f"window {tuple(kernel)} is larger than the padded input {in_shape[2:]}")
        out.append(o)
    return out[0], out[1]


# Conv

def _check_conv(node: Node, g: Graph) -> str | None:
    w = _const(g, node, 1)
    if w is None:
        return "the weight (input 1) is computed at run time; kiln bakes weights and needs it constant"
    if w.ndim != 4:
        return f"only 2-D convolution is supported (weight has rank {w.ndim})"
    if _has_input(node, 2) and _const(g, node, 2) is None:
        return "the bias (input 2) is computed at run time; kiln needs it constant"
    group = node.attrs.get("group", 1)
    if group != 1 and not (w.shape[1] == 1 and group == w.shape[0]):
        return (f"group={group} with {group * w.shape[1]} input and {w.shape[0]} output channels: only group=1 "
                f"or depthwise (group = input channels = output channels) is supported")
    if "kernel_shape" in node.attrs and _ints(node.attrs["kernel_shape"]) != w.shape[2:]:
        return f"kernel_shape {list(node.attrs['kernel_shape'])} does not match the weight {list(w.shape)}"
    return _check_window(node)


def _normalise_conv(node: Node, g: Graph) -> dict[str, Any]:
    kernel = tuple(int(k) for k in g.initializers[node.inputs[1]].shape[2:])
    return {"kernel_shape": kernel, **_window_attrs(node, g, kernel), "group": int(node.attrs.get("group", 1))}


def _infer_conv(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = _shape(g, node.inputs[0])
    w = g.initializers[node.inputs[1]].shape
    if x[1] != w[1] * attrs["group"]:
        raise _Unsupported(f"input has {x[1]} channels, weight {list(w)} with group {attrs['group']} expects "
                           f"{w[1] * attrs['group']}")
    return [(x[0], int(w[0]), *_window_output(x, attrs["kernel_shape"], attrs))]


# MaxPool, AveragePool, GlobalAveragePool

def _check_pool(node: Node, g: Graph) -> str | None:
    a = node.attrs
    if len(a.get("kernel_shape", ())) != 2:
        return f"kernel_shape={list(a.get('kernel_shape', ()))}: only 2-D pooling is supported"
    if a.get("ceil_mode", 0):
        return "ceil_mode=1 is not supported (output size rounds down only)"
    if any(d != 1 for d in a.get("dilations", ())):
        return f"dilations={list(a['dilations'])} are not supported (only 1)"
    if node.op_type == "MaxPool" and _output_used(g, node, 1):
        return "the Indices output (output 1) is not supported"
    return _check_window(node)


def _normalise_pool(node: Node, g: Graph) -> dict[str, Any]:
    kernel = _ints(node.attrs["kernel_shape"])
    attrs = {"kernel_shape": kernel, **_window_attrs(node, g, kernel), "ceil_mode": 0}
    if node.op_type == "AveragePool":
        attrs["count_include_pad"] = int(node.attrs.get("count_include_pad", 0))
    return attrs


def _infer_pool(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = _shape(g, node.inputs[0])
    return [(x[0], x[1], *_window_output(x, attrs["kernel_shape"], attrs))]


def _infer_global_pool(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = _shape(g, node.inputs[0])
    return [(x[0], x[1]) + (1,) * (len(x) - 2)]


# BatchNormalization (when it does not follow a Conv; see fold_batchnorm)

def _check_batchnorm(node: Node, g: Graph) -> str | None:
    if node.attrs.get("training_mode", 0):
        return "training_mode=1 is not supported (inference only)"
    if _output_used(g, node, 1) or _output_used(g, node, 2):
        return "the running mean/var outputs (training mode) are not supported"
    if any(_const(g, node, i) is None for i in range(1, 5)):
        return "scale, bias, mean and var (inputs 1-4) must be constants"
    return None


def _normalise_batchnorm(node: Node, g: Graph) -> dict[str, Any]:
    return {"epsilon": float(node.attrs.get("epsilon", 1e-5))}


# Clip

def _check_clip(node: Node, g: Graph) -> str | None:
    for i, what in ((1, "min"), (2, "max")):
        if _has_input(node, i):
            c = _const(g, node, i)
            if c is None:
                return f"{what} (input {i}) is computed at run time; kiln needs it constant"
            if c.size != 1:
                return f"{what} (input {i}) must be a scalar, got shape {list(c.shape)}"
    return None


def _normalise_clip(node: Node, g: Graph) -> dict[str, Any]:
    lo, hi = _const(g, node, 1), _const(g, node, 2)
    return {"min": float(lo.reshape(-1)[0]) if lo is not None else -math.inf,
            "max": float(hi.reshape(-1)[0]) if hi is not None else math.inf}


# Gemm, MatMul

def _check_gemm(node: Node, g: Graph) -> str | None:
    if node.attrs.get("transA", 0):
        return "transA=1 is not supported (A must be [M, K])"
    return None


def _normalise_gemm(node: Node, g: Graph) -> dict[str, Any]:
    a = node.attrs
    return {"alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 1.0)),
            "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))}


def _infer_gemm(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    a, b = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    if len(a) != 2 or len(b) != 2:
        raise _Unsupported(f"Gemm needs 2-D operands, got {a} and {b}")
    k_b, n = (b[1], b[0]) if attrs["transB"] else b
    if a[1] != k_b:
        raise _Unsupported(f"inner dimensions differ: A {a}, B {b} (transB={attrs['transB']})")
    return [(a[0], n)]


def _infer_matmul(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    a, b = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    if len(a) < 2 or len(b) < 2:
        raise _Unsupported(f"1-D MatMul operands are not supported (shapes {a}, {b})")
    if a[-1] != b[-2]:
        raise _Unsupported(f"inner dimensions differ: {a} x {b}")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        raise _Unsupported(f"batch dimensions of {a} and {b} do not broadcast") from None
    return [batch + (a[-2], b[-1])]


# Softmax, LayerNormalization, ReduceMean, Gelu

def _normalise_softmax(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs.get("axis", -1), len(_shape(g, node.inputs[0])))}


def _check_layernorm(node: Node, g: Graph) -> str | None:
    if _output_used(g, node, 1) or _output_used(g, node, 2):
        return "the Mean/InvStdDev outputs are not supported"
    return None


def _normalise_layernorm(node: Node, g: Graph) -> dict[str, Any]:
    a = node.attrs
    return {"axis": _axis(a.get("axis", -1), len(_shape(g, node.inputs[0]))),
            "epsilon": float(a.get("epsilon", 1e-5)), "stash_type": int(a.get("stash_type", 1))}


def _check_reducemean(node: Node, g: Graph) -> str | None:
    if _has_input(node, 1) and _const(g, node, 1) is None:
        return "axes (input 1) are computed at run time; kiln needs them constant"
    has_axes = _has_input(node, 1) or len(node.attrs.get("axes", ())) > 0
    if node.attrs.get("noop_with_empty_axes", 0) and not has_axes:
        return "noop_with_empty_axes=1 without axes (a no-op reduction) is not supported"
    return None


def _normalise_reducemean(node: Node, g: Graph) -> dict[str, Any]:
    rank = len(_shape(g, node.inputs[0]))
    # opset 18 moved axes from an attribute to an optional input
    axes = _const(g, node, 1) if _has_input(node, 1) else node.attrs.get("axes", ())
    axes = _ints(axes)
    axes = tuple(sorted({_axis(a, rank) for a in axes})) if axes else tuple(range(rank))
    return {"axes": axes, "keepdims": int(node.attrs.get("keepdims", 1))}


def _infer_reducemean(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = _shape(g, node.inputs[0])
    if attrs["keepdims"]:
        return [tuple(1 if i in attrs["axes"] else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in attrs["axes"])]


def _check_gelu(node: Node, g: Graph) -> str | None:
    approx = node.attrs.get("approximate", "none")
    return None if approx in ("none", "tanh") else f"approximate={approx!r} is not 'none' or 'tanh'"


def _normalise_gelu(node: Node, g: Graph) -> dict[str, Any]:
    return {"approximate": node.attrs.get("approximate", "none")}


# Reshape, Flatten, Transpose, Concat

def _reshape_target(in_shape: tuple[int, ...], spec, allowzero: int) -> tuple[int, ...]:
    """ONNX Reshape's shape input resolved: 0 copies the input dim (unless allowzero), -1 is inferred."""
    dims = [int(d) for d in np.asarray(spec).reshape(-1)]
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise _Unsupported(f"shape {dims} copies dim {i} (0) of a rank-{len(in_shape)} input")
                dims[i] = in_shape[i]
    total = math.prod(in_shape)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise _Unsupported(f"shape {dims} is not a valid Reshape target")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or total % known:
            raise _Unsupported(f"cannot reshape {in_shape} ({total} elements) to {dims}")
        dims[dims.index(-1)] = total // known
    if math.prod(dims) != total:
        raise _Unsupported(f"cannot reshape {in_shape} ({total} elements) to {dims}")
    return tuple(dims)


def _check_reshape(node: Node, g: Graph) -> str | None:
    if _const(g, node, 1) is None:
        return "the target shape (input 1) is computed at run time and could not be folded to a constant"
    return None


def _normalise_reshape(node: Node, g: Graph) -> dict[str, Any]:
    spec = _const(g, node, 1)
    return {"shape": _reshape_target(_shape(g, node.inputs[0]), spec, node.attrs.get("allowzero", 0))}


def _infer_from_shape_attr(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [attrs["shape"]]


def _normalise_flatten(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs.get("axis", 1), len(_shape(g, node.inputs[0])), allow_end=True)}


def _infer_flatten(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x, a = _shape(g, node.inputs[0]), attrs["axis"]
    return [(math.prod(x[:a]), math.prod(x[a:]))]


def _normalise_transpose(node: Node, g: Graph) -> dict[str, Any]:
    rank = len(_shape(g, node.inputs[0]))
    perm = _ints(node.attrs["perm"]) if "perm" in node.attrs else tuple(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise _Unsupported(f"perm {list(perm)} is not a permutation of {rank} axes")
    return {"perm": perm}


def _infer_transpose(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = _shape(g, node.inputs[0])
    return [tuple(x[p] for p in attrs["perm"])]


def _normalise_concat(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs["axis"], len(_shape(g, node.inputs[0])))}


def _infer_concat(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shapes = [_shape(g, i) for i in node.inputs if i]
    axis = attrs["axis"]
    rest = {s[:axis] + s[axis + 1:] for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise _Unsupported(f"input shapes {shapes} differ outside axis {axis}")
    first = shapes[0]
    return [first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]]


# build-time evaluators (numpy); args[i] is None for an omitted optional input

def _fold_constant(node: Node, args: list) -> list[np.ndarray]:
    a = node.attrs
    if "value" in a:
        return [np.asarray(a["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return [np.asarray(a[key], dtype)]
    raise ValueError(f"a Constant with attribute(s) {sorted(a)} (sparse or string) has no numeric value")


def _shape_slice(node: Node, in_shape: tuple[int, ...]) -> np.ndarray:
    start, end = node.attrs.get("start", 0), node.attrs.get("end", None)
    return np.array(in_shape[start:end], np.int64)


def _fold_unsqueeze(node: Node, args: list) -> list[np.ndarray]:
    axes = args[1] if len(args) > 1 and args[1] is not None else node.attrs["axes"]
    return [np.expand_dims(args[0], _ints(axes))]


def _fold_squeeze(node: Node, args: list) -> list[np.ndarray]:
    axes = args[1] if len(args) > 1 and args[1] is not None else node.attrs.get("axes")
    return [np.squeeze(args[0], axis=None if axes is None else _ints(axes))]


def _fold_slice(node: Node, args: list) -> list[np.ndarray]:
    data, starts, ends = args[0], _ints(args[1]), _ints(args[2])
    axes = _ints(args[3]) if len(args) > 3 and args[3] is not None else tuple(range(len(starts)))
    steps = _ints(args[4]) if len(args) > 4 and args[4] is not None else (1,) * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(s, e, step)  # Python slicing clamps out-of-range bounds the way ONNX does
    return [data[tuple(index)]]


def _fold_cast(node: Node, args: list) -> list[np.ndarray]:
    return [args[0].astype(onnx.helper.tensor_dtype_to_np_dtype(node.attrs["to"]))]


def _fold_div(node: Node, args: list) -> list[np.ndarray]:
    a, b = args
    if np.issubdtype(a.dtype, np.integer):  # ONNX integer division truncates toward zero
        return [(np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)).astype(a.dtype)]
    return [(a / b).astype(a.dtype)]


def _elementwise(fn: Callable) -> Callable[[Node, list], list[np.ndarray]]:
    """Evaluator of an elementwise op; the result keeps the first input's dtype, as in ONNX."""
    return lambda node, args: [np.asarray(fn(*[a for a in args if a is not None])).astype(args[0].dtype)]


def _fold_clip(node: Node, args: list) -> list[np.ndarray]:
    lo = args[1] if len(args) > 1 and args[1] is not None else -np.inf
    hi = args[2] if len(args) > 2 and args[2] is not None else np.inf
    return [np.clip(args[0], lo, hi).astype(args[0].dtype)]


def _fold_constant_of_shape(node: Node, args: list) -> list[np.ndarray]:
    value = np.asarray(node.attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
    return [np.full(_ints(args[0]), value[0], value.dtype)]


def _fold_with_attrs(normalise: Callable, fn: Callable) -> Callable[[Node, list], list[np.ndarray]]:
    """Evaluator of a data-movement op from its normalised attributes (needs only the input shape)."""
    def fold(node: Node, args: list) -> list[np.ndarray]:
        g = Graph("fold", [], [], [], {n: Value(n, tuple(a.shape)) for n, a in zip(node.inputs, args) if a is not None},
                  {n: a for n, a in zip(node.inputs, args) if a is not None}, 0)
        return [fn(args, normalise(node, g))]
    return fold


_erf = np.vectorize(math.erf, otypes=[np.float64])


# ---------------------------------------------------------------- the op table

@dataclass(frozen=True)
class OpEntry:
    """What kiln knows about one ONNX op type.

    check(node, graph)            reason string when the attributes/operands are unsupported, else None
    normalise(node, graph)        the node's attributes with every default explicit (may raise _Unsupported)
    infer(node, graph, attrs)     kiln's shape rule: output shapes from static input shapes
    fold(node, args)              NumPy evaluator used when every input is constant
    attr_inputs                   inputs normalise() turns into attributes; dropped from the node afterwards
    build_time_only               shape arithmetic: supported only when it folds away
    """
    summary: str
    check: Callable[[Node, Graph], str | None] = _no_check
    normalise: Callable[[Node, Graph], dict[str, Any]] = _copy_attrs
    infer: Callable[[Node, Graph, dict], list[tuple[int, ...]]] | None = None
    fold: Callable[[Node, list], list[np.ndarray]] | None = None
    attr_inputs: tuple[int, ...] = ()
    build_time_only: bool = False


def _unary(summary: str, fn: Callable | None = None) -> OpEntry:
    return OpEntry(summary, infer=_same_shape, fold=_elementwise(fn) if fn else None)


def _binary(summary: str, fn: Callable) -> OpEntry:
    return OpEntry(summary, infer=_broadcast_shape, fold=_elementwise(fn))


def _build_time(summary: str, fold: Callable) -> OpEntry:
    return OpEntry(summary, fold=fold, build_time_only=True)


OPS: dict[str, OpEntry] = {
    "Conv": OpEntry("2-D convolution, group 1 or depthwise; auto_pad resolved to pads [t,l,b,r]",
                    _check_conv, _normalise_conv, _infer_conv),
    "BatchNormalization": OpEntry("inference-mode batch norm (folded into a preceding Conv when possible)",
                                  _check_batchnorm, _normalise_batchnorm, _same_shape),
    "MaxPool": OpEntry("2-D max pooling, floor mode, no dilation", _check_pool, _normalise_pool, _infer_pool),
    "AveragePool": OpEntry("2-D average pooling, floor mode, no dilation", _check_pool, _normalise_pool, _infer_pool),
    "GlobalAveragePool": OpEntry("mean over the spatial dims", infer=_infer_global_pool),
    "Gemm": OpEntry("alpha * A[M,K] * B (+ beta * C); transB allowed, transA not",
                    _check_gemm, _normalise_gemm, _infer_gemm),
    "MatMul": OpEntry("batched matrix product, rank >= 2", infer=_infer_matmul, fold=_elementwise(np.matmul)),
    "Relu": _unary("max(x, 0)", lambda x: np.maximum(x, 0)),
    "Clip": OpEntry("clamp; constant min/max inputs become attributes", _check_clip, _normalise_clip, _same_shape,
                    _fold_clip, attr_inputs=(1, 2)),
    "Sqrt": _unary("square root", np.sqrt),
    "Erf": _unary("error function", _erf),
    "Gelu": OpEntry("GELU, exact or tanh approximation (opset 20)", _check_gelu, _normalise_gelu, _same_shape),
    "Identity": _unary("copy (removed by the identity pass where possible)", lambda x: x),
    "Add": _binary("x + y, broadcasting", np.add),
    "Sub": _binary("x - y, broadcasting", np.subtract),
    "Mul": _binary("x * y, broadcasting", np.multiply),
    "Div": OpEntry("x / y, broadcasting", infer=_broadcast_shape, fold=_fold_div),
    "Pow": _binary("x ** y, broadcasting", np.power),
    "Softmax": OpEntry("softmax along one axis", normalise=_normalise_softmax, infer=_same_shape),
    "LayerNormalization": OpEntry("layer norm over the trailing axes from `axis`", _check_layernorm,
                                  _normalise_layernorm, _same_shape),
    "ReduceMean": OpEntry("mean over constant axes (attribute or opset-18 input)", _check_reducemean,
                          _normalise_reducemean, _infer_reducemean, attr_inputs=(1,)),
    "Reshape": OpEntry("reshape to a build-time shape (attribute 'shape')", _check_reshape, _normalise_reshape,
                       _infer_from_shape_attr,
                       _fold_with_attrs(_normalise_reshape, lambda args, a: args[0].reshape(a["shape"])),
                       attr_inputs=(1,)),
    "Flatten": OpEntry("reshape to 2-D at `axis`", normalise=_normalise_flatten, infer=_infer_flatten,
                       fold=_fold_with_attrs(_normalise_flatten,
                                             lambda args, a: args[0].reshape(math.prod(args[0].shape[:a["axis"]]),
                                                                             math.prod(args[0].shape[a["axis"]:])))),
    "Transpose": OpEntry("axis permutation", normalise=_normalise_transpose, infer=_infer_transpose,
                         fold=_fold_with_attrs(_normalise_transpose, lambda args, a: np.transpose(args[0], a["perm"]))),
    "Concat": OpEntry("concatenation along one axis", normalise=_normalise_concat, infer=_infer_concat,
                      fold=lambda node, args: [np.concatenate([a for a in args if a is not None],
                                                              axis=node.attrs["axis"])]),
    # shape arithmetic: evaluated at build time, never lowered
    "Constant": _build_time("a constant tensor (becomes an initializer)", _fold_constant),
    "Shape": _build_time("static shape of a tensor", None),  # folded from the input's shape, see _try_fold
    "Gather": _build_time("indexing of a constant",
                          lambda node, args: [np.take(args[0], args[1], axis=node.attrs.get("axis", 0))]),
    "Unsqueeze": _build_time("insert unit axes", _fold_unsqueeze),
    "Squeeze": _build_time("remove unit axes", _fold_squeeze),
    "Cast": _build_time("type conversion", _fold_cast),
    "Slice": _build_time("slicing of a constant", _fold_slice),
    "Neg": _build_time("negation", _elementwise(np.negative)),
    "Equal": _build_time("elementwise equality", lambda node, args: [np.equal(args[0], args[1])]),
    "Where": _build_time("elementwise select", lambda node, args: [np.where(args[0], args[1], args[2])]),
    "ConstantOfShape": _build_time("filled tensor of a constant shape", _fold_constant_of_shape),
    "Expand": _build_time("broadcast to a constant shape", lambda node, args: [
        np.broadcast_to(args[0], np.broadcast_shapes(args[0].shape, _ints(args[1]))).copy()]),
}


def supported_ops_text() -> str:
    runtime = sorted(op for op, e in OPS.items() if not e.build_time_only)
    build_time = sorted(op for op, e in OPS.items() if e.build_time_only)
    return (f"Supported ops: {', '.join(runtime)}; evaluated at build time when their inputs are constants: "
            f"{', '.join(build_time)}")


def infer_shapes(node: Node, graph: Graph) -> list[tuple[int, ...]]:
    """kiln's shape rule for one node (its entry's normalised attributes, static input shapes)."""
    entry = OPS[node.op_type]
    return entry.infer(node, graph, entry.normalise(node, graph))


# ---------------------------------------------------------------- reading and binding

def read_model(path: str | Path) -> onnx.ModelProto:
    """The parsed file; a KilnError naming the file for anything that is not a readable ONNX model."""
    subject = str(path)
    if onnx is None:
        raise KilnError("frontend", subject, "reading ONNX models needs the 'onnx' package (pip install onnx)")
    p = Path(path)
    if not p.exists():
        raise KilnError("frontend", subject, "no such file")
    if not p.is_file():
        raise KilnError("frontend", subject, "not a file")
    try:
        model = onnx.load(str(p))
    except OSError as e:
        raise KilnError("frontend", subject, f"cannot read the file or its external data: {e}") from None
    except Exception as e:  # protobuf DecodeError and friends: all mean the bytes are not an ONNX model
        raise KilnError("frontend", subject, f"not a readable ONNX model ({type(e).__name__}: {e})") from None
    # empty files and unrelated protobufs can parse as an empty ModelProto
    if not model.graph.node or not model.graph.output or not model.opset_import:
        raise KilnError("frontend", subject, "not a readable ONNX model (no graph nodes, outputs or opset imports)")
    return model


def default_opset(model) -> int | None:
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return None


def _opset_problem(opset: int | None) -> str | None:
    lo, hi = ACCEPTED_OPSETS[0], ACCEPTED_OPSETS[-1]
    if opset is None:
        return f"the model imports no default-domain (ai.onnx) opset; kiln accepts opsets {lo}..{hi}"
    if opset not in ACCEPTED_OPSETS:
        return f"opset {opset} is not supported: kiln accepts ONNX opsets {lo}..{hi} (re-export with one of those)"
    return None


def _bind_inputs(model, batch: int, problems: list[Problem], log: list[str]) -> None:
    """Give every graph input a static shape: dim 0 when symbolic/unknown is the batch; nothing else may be dynamic."""
    initializers = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in initializers:  # old exporters list weights as inputs too
            continue
        if not inp.type.HasField("tensor_type") or not inp.type.tensor_type.HasField("shape"):
            problems.append(Problem(inp.name, "", f"input '{inp.name}' has no tensor shape (rank unknown)", "model"))
            continue
        for i, dim in enumerate(inp.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                if i == 0 and dim.dim_value != batch:
                    log.append(f"bind: input '{inp.name}' has a fixed dim 0 of {dim.dim_value}; batch={batch} "
                               f"does not apply to it")
                continue
            label = dim.dim_param or "unknown"
            if i == 0:
                dim.Clear()
                dim.dim_value = batch
                log.append(f"bind: input '{inp.name}' dim 0 ({label!r}) bound to batch={batch}")
            else:
                problems.append(Problem(inp.name, "", f"input '{inp.name}' dim {i} ({label!r}) is dynamic; kiln "
                                        f"binds only the batch dimension (dim 0), every other dim must be static",
                                        "model"))


def _infer_onnx_shapes(model, log: list[str]):
    # symbolic dims left in value_info/outputs by the exporter would only be merged with the inferred ones
    for vi in [*model.graph.value_info, *model.graph.output]:
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.Clear()
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:  # kiln's own rules (fold_constants) fill in what is missing
        log.append(f"infer: onnx shape inference failed ({type(e).__name__}: {e}); using kiln's shape rules only")
        return model


def _dtype_name(elem_type: int) -> str:
    if not elem_type:
        return "undefined"
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _value_of(vi) -> Value:
    tt = vi.type.tensor_type
    shape = None
    if vi.type.HasField("tensor_type") and tt.HasField("shape"):
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim)
    return Value(vi.name, shape, _dtype_name(tt.elem_type))


def _attr_value(attr) -> Any:
    v = onnx.helper.get_attribute_value(attr)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return tuple(x.decode() if isinstance(x, bytes) else x for x in v)
    return v


def _sort_topologically(nodes: list[Node], ready: set[str]) -> list[Node]:
    """File order where it already is topological (the usual case); a KilnError for a dangling input or a cycle."""
    producers = {o for n in nodes for o in n.outputs if o}
    waiting: dict[int, set[str]] = {}
    users: dict[str, list[int]] = {}
    for idx, n in enumerate(nodes):
        missing = {i for i in n.inputs if i and i not in ready}
        for i in missing:
            if i not in producers:
                raise KilnError("frontend", f"node '{n.name}' ({n.op_type})",
                                f"input '{i}' is neither a graph input, an initializer nor any node's output")
            users.setdefault(i, []).append(idx)
        waiting[idx] = missing
    heap = [idx for idx, w in waiting.items() if not w]
    heapq.heapify(heap)
    order = []
    while heap:
        idx = heapq.heappop(heap)
        order.append(nodes[idx])
        for o in nodes[idx].outputs:
            for user in users.pop(o, []):
                waiting[user].discard(o)
                if not waiting[user]:
                    heapq.heappush(heap, user)
    if len(order) != len(nodes):
        stuck = next(n for i, n in enumerate(nodes) if waiting[i])
        raise KilnError("frontend", f"node '{stuck.name}' ({stuck.op_type})", "the graph has a cycle through this node")
    return order


def node_names(model) -> list[str]:
    """The kiln IR name of every node of the ONNX graph, in file order: its own, or one made from its op type
    and index when empty; ONNX does not require unique node names, kiln does."""
    names, taken = [], set()
    for i, n in enumerate(model.graph.node):
        name = n.name or f"{n.op_type}_{i}"
        while name in taken:
            name += "_"
        taken.add(name)
        names.append(name)
    return names


def _to_graph(model, path: str, opset: int) -> Graph:
    g = model.graph
    initializers = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    values: dict[str, Value] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        values[vi.name] = _value_of(vi)
    for name, arr in initializers.items():
        values[name] = Value(name, tuple(int(d) for d in arr.shape), arr.dtype.name)

    nodes = []
    for n, name in zip(g.node, node_names(model)):
        # ops from other domains keep their domain in the op type so they never match an OPS entry
        op_type = n.op_type if n.domain in _DEFAULT_DOMAINS else f"{n.domain}.{n.op_type}"
        nodes.append(Node(name, op_type, list(n.input), list(n.output), {a.name: _attr_value(a) for a in n.attribute}))
        for v in [*n.input, *n.output]:
            if v and v not in values:
                values[v] = Value(v, None, "undefined")

    inputs = [values[i.name] for i in g.input if i.name not in initializers]
    ready = {v.name for v in inputs} | set(initializers)
    return Graph(name=g.name or Path(path).stem, inputs=inputs, outputs=[values[o.name] for o in g.output],
                 nodes=_sort_topologically(nodes, ready), values=values, initializers=initializers,
                 opset=opset, source_path=str(path))


# ---------------------------------------------------------------- passes

def _try_fold(node: Node, g: Graph) -> list[np.ndarray] | None:
    """The node's outputs evaluated at build time, or None when it cannot be."""
    entry = OPS.get(node.op_type)
    if entry is None:
        return None
    if node.op_type == "Shape":  # needs only the input's shape, known for run-time values too
        v = g.values.get(node.inputs[0])
        return [_shape_slice(node, v.shape)] if v is not None and is_static(v.shape) else None
    if entry.fold is None or not all(i == "" or i in g.initializers for i in node.inputs):
        return None
    try:
        return [np.asarray(a) for a in entry.fold(node, [g.initializers[i] if i else None for i in node.inputs])]
    except Exception as e:  # every input is constant, so a failure means the model itself is inconsistent
        raise KilnError("frontend", f"node '{node.name}' ({node.op_type})",
                        f"cannot evaluate it at build time: {type(e).__name__}: {e}") from None


def _complete_shapes(node: Node, g: Graph) -> None:
    """Fill output shapes onnx shape inference left unknown, with kiln's rule for the op (if it is supported)."""
    outs = [o for o in node.outputs if o]
    if all(is_static(g.values[o].shape) for o in outs):
        return
    entry = OPS.get(node.op_type)
    if entry is None or entry.infer is None or entry.check(node, g):
        return
    try:
        shapes = entry.infer(node, g, entry.normalise(node, g))
    except (_ShapeUnknown, _Unsupported):  # reported later, by the check or the static-shape check
        return
    for name, shape in zip(node.outputs, shapes):
        if name:
            old = g.values[name]
            dtype = old.dtype if old.dtype != "undefined" else g.values[node.inputs[0]].dtype
            g.values[name] = Value(name, tuple(int(d) for d in shape), dtype)


def fold_constants(graph: Graph, log: list[str]) -> Graph:
    """Evaluate every node whose inputs are all constant (and Shape of any static value) into initializers.

    Walks the graph in order and completes missing shapes on the way, because a
    Shape node needs the static shape of its input, which may come from a Reshape
    whose target shape was folded just before.
    """
    g = _copy(graph)
    nodes, g.nodes = g.nodes, []
    graph_outputs = {v.name for v in graph.outputs}
    folded: Counter[str] = Counter()
    for node in nodes:
        arrays = None if graph_outputs & set(node.outputs) else _try_fold(node, g)
        if arrays is None:
            g.nodes.append(node)
            _complete_shapes(node, g)
            continue
        for name, arr in zip(node.outputs, arrays):
            if name:
                g.initializers[name] = arr
                g.values[name] = Value(name, tuple(int(d) for d in arr.shape), arr.dtype.name)
        folded[node.op_type] += 1
    if folded:
        detail = ", ".join(f"{op} x{k}" for op, k in folded.most_common())
        log.append(f"fold_constants: {sum(folded.values())} node(s) evaluated at build time into initializers "
                   f"({detail})")
    return g


def _bypass(g: Graph, node: Node) -> bool:
    """Remove a node that passes input 0 through unchanged. Consumers read the input instead; when
    the output is a graph output, the producer's output is renamed to it so output names survive."""
    src, dst = node.inputs[0], node.outputs[0]
    graph_outputs = {v.name for v in g.outputs}
    if dst not in graph_outputs:
        g.nodes.remove(node)
        for n in g.nodes:
            n.inputs = [src if i == dst else i for i in n.inputs]
        g.values.pop(dst, None)
        return True
    if g.producer(src) is None or src in graph_outputs:  # a graph input, initializer or another output: keep it
        return False
    g.nodes.remove(node)
    for n in g.nodes:
        n.inputs = [dst if i == src else i for i in n.inputs]
        n.outputs = [dst if o == src else o for o in n.outputs]
    v = g.values.pop(src)
    g.values[dst] = Value(dst, v.shape, v.dtype)
    return True


def remove_identities(graph: Graph, log: list[str]) -> Graph:
    g = _copy(graph)
    removed, kept = 0, []
    for node in [n for n in g.nodes if n.op_type == "Identity"]:
        if _bypass(g, node):
            removed += 1
        else:
            kept.append(node.name)
    if removed:
        log.append(f"remove_identities: removed {removed} Identity node(s)")
    for name in kept:
        log.append(f"remove_identities: kept '{name}': it copies a graph input or constant to a graph output")
    return g


def remove_dropout(graph: Graph, log: list[str]) -> Graph:
    """Dropout is the identity at inference, unless its mask is used or training_mode is set."""
    g = _copy(graph)
    for node in [n for n in g.nodes if n.op_type == "Dropout"]:
        training = _const(g, node, 2)
        if _output_used(g, node, 1):
            log.append(f"remove_dropout: kept '{node.name}': its mask output is used")
        elif _has_input(node, 2) and (training is None or bool(training.reshape(-1)[0])):
            log.append(f"remove_dropout: kept '{node.name}': training_mode is not constant false")
        elif _bypass(g, node):
            log.append(f"remove_dropout: removed '{node.name}'")
    return g


def _bn_fold_blocker(g: Graph, bn: Node, conv: Node | None) -> str | None:
    if conv is None or conv.op_type != "Conv":
        return "its input does not come from a Conv"
    if len(g.consumers(conv.outputs[0])) != 1 or any(v.name == conv.outputs[0] for v in g.outputs):
        return f"the output of '{conv.name}' is used elsewhere too"
    if _check_batchnorm(bn, g) or _const(g, conv, 1) is None or (_has_input(conv, 2) and _const(g, conv, 2) is None):
        return "its parameters or the Conv's weights are not constants"
    return None


def fold_batchnorm(graph: Graph, log: list[str]) -> Graph:
    """Fold an inference BatchNormalization into the Conv feeding only it:
    w' = w * s per output channel, b' = (b - mean) * s + beta, with s = gamma / sqrt(var + eps)."""
    g = _copy(graph)
    folded = 0
    for bn in [n for n in g.nodes if n.op_type == "BatchNormalization"]:
        conv = g.producer(bn.inputs[0])
        blocker = _bn_fold_blocker(g, bn, conv)
        if blocker:
            log.append(f"fold_batchnorm: kept '{bn.name}' as BatchNormalization: {blocker}")
            continue
        gamma, beta, mean, var = (g.initializers[bn.inputs[i]].astype(np.float64) for i in range(1, 5))
        scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        w = g.initializers[conv.inputs[1]].astype(np.float64)
        b = _const(g, conv, 2)
        b = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
        w_name = _fresh_name(g, f"{conv.inputs[1]}.bn_folded")
        g.initializers[w_name] = (w * scale.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32)
        g.values[w_name] = Value(w_name, tuple(w.shape), "float32")
        b_name = _fresh_name(g, f"{conv.name}.bias.bn_folded")
        g.initializers[b_name] = ((b - mean) * scale + beta).astype(np.float32)
        g.values[b_name] = Value(b_name, (int(w.shape[0]),), "float32")

        g.values.pop(conv.outputs[0], None)
        conv.inputs = [conv.inputs[0], w_name, b_name]
        conv.outputs = [bn.outputs[0]]
        conv.source = (conv.source or [conv.name]) + [bn.name]
        g.nodes.remove(bn)
        folded += 1
        log.append(f"fold_batchnorm: '{bn.name}' folded into '{conv.name}'")
    return g


PASSES: tuple[Callable[[Graph, list[str]], Graph], ...] = (
    fold_constants, remove_identities, remove_dropout, fold_batchnorm)


# ---------------------------------------------------------------- check, normalise, finish

def _unsupported_reason(node: Node, entry: OpEntry | None, g: Graph) -> str | None:
    if entry is None:
        if "." in node.op_type:
            return "ops from custom domains are not supported"
        return f"op type {node.op_type} is not supported"
    if entry.build_time_only:
        if node.op_type == "Shape":
            return f"the shape of '{node.inputs[0]}' is not static, so it cannot be evaluated at build time"
        runtime = [i for i in node.inputs if i and i not in g.initializers]
        return (f"{node.op_type} is supported only when it can be evaluated at build time, but "
                f"{', '.join(repr(i) for i in runtime)} {'is' if len(runtime) == 1 else 'are'} computed at run time")
    return entry.check(node, g)


def _check_and_normalise(graph: Graph, problems: list[Problem], log: list[str]) -> Graph:
    g = _copy(graph)
    moved: Counter[str] = Counter()
    for node in g.nodes:
        entry = OPS.get(node.op_type)
        reason = _unsupported_reason(node, entry, g)
        if reason:
            problems.append(Problem(node.name, node.op_type, reason, "op"))
            continue
        try:
            attrs = entry.normalise(node, g)
        except _Unsupported as e:
            problems.append(Problem(node.name, node.op_type, str(e), "op"))
            continue
        except _ShapeUnknown as e:
            problems.append(Problem(node.name, node.op_type, f"the shape of '{e.value}' is not static", "shape"))
            continue
        node.attrs = attrs
        if any(_has_input(node, i) for i in entry.attr_inputs):
            moved[node.op_type] += 1
        node.inputs = [x for i, x in enumerate(node.inputs) if i not in entry.attr_inputs]
    if moved:
        log.append("normalise: constant inputs moved to attributes on " +
                   ", ".join(f"{op} x{k}" for op, k in moved.most_common()))
    return g


def _as_float32(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        return arr.astype(np.float32, copy=False)
    return arr


def _finish(graph: Graph, problems: list[Problem]) -> Graph:
    """Drop what no node uses, make float weights float32, and report every value without a static shape."""
    g = _copy(graph)
    used = {i for n in g.nodes for i in n.inputs if i} | {v.name for v in g.outputs}
    g.initializers = {k: _as_float32(a) for k, a in g.initializers.items() if k in used}
    for k, a in g.initializers.items():
        g.values[k] = Value(k, tuple(int(d) for d in a.shape), a.dtype.name)
    keep = used | {o for n in g.nodes for o in n.outputs if o} | {v.name for v in g.inputs}
    g.values = {k: v for k, v in g.values.items() if k in keep}
    g.inputs = [g.values[v.name] for v in g.inputs]
    g.outputs = [g.values[v.name] for v in g.outputs]

    reported = set()
    for node in g.nodes:
        for name in [*node.inputs, *node.outputs]:
            if name and name not in reported and not is_static(g.values[name].shape):
                reported.add(name)
                problems.append(Problem(node.name, node.op_type, f"value '{name}' has no static shape "
                                        f"(got {g.values[name].shape})", "shape"))
    return g


# ---------------------------------------------------------------- entry points

def build_graph(model, path: str | Path, batch: int = 1, log: list[str] | None = None
                ) -> tuple[Graph, list[Problem]]:
    """Every frontend step on a parsed model, collecting problems instead of raising them.
    Binds the model's input shapes in place. Malformed graphs (dangling inputs, cycles,
    constants that cannot be evaluated) still raise KilnError."""
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise KilnError("frontend", "batch", f"must be a positive integer, got {batch!r}")
    log = [] if log is None else log
    problems: list[Problem] = []
    opset = default_opset(model)
    reason = _opset_problem(opset)
    if reason:
        problems.append(Problem("", "", reason, "model"))
    _bind_inputs(model, batch, problems, log)
    model = _infer_onnx_shapes(model, log)
    graph = _to_graph(model, str(path), opset or 0)
    for run_pass in PASSES:
        graph = run_pass(graph, log)
    graph = _check_and_normalise(graph, problems, log)
    graph = _finish(graph, problems)
    if any(p.kind == "op" for p in problems):
        # shapes downstream of an unsupported op are unknown as a consequence; the op is what to report
        problems = [p for p in problems if p.kind != "shape"]
    return graph, problems


def _raise_for(problems: list[Problem], path: str, opset: int) -> None:
    model_level = [p.reason for p in problems if p.kind == "model"]
    if model_level:
        raise KilnError("frontend", path, "; ".join(model_level))
    ops = [p for p in problems if p.kind == "op"]
    if ops:
        lines = "\n".join(f"  node '{p.node}' ({p.op_type}, opset {opset}): {p.reason}" for p in ops)
        raise KilnError("frontend", path, f"{len(ops)} node(s) kiln cannot compile:\n{lines}\n{supported_ops_text()}")
    shapes = [p for p in problems if p.kind == "shape"]
    if shapes:
        first = shapes[0]
        more = "".join(f"\n  node '{p.node}' ({p.op_type}): {p.reason}" for p in shapes[1:10])
        raise KilnError("frontend", f"node '{first.node}' ({first.op_type})",
                        f"{first.reason}; kiln needs every shape static{more}")


def load_onnx(path: str | Path, batch: int = 1, log: list[str] | None = None) -> Graph:
    """The ONNX file as a kiln Graph with static shapes, supported ops only and explicit attributes.
    Decisions taken on the way are appended to `log` when given."""
    model = read_model(path)
    reason = _opset_problem(default_opset(model))
    if reason:  # nothing after this is meaningful for an opset kiln does not know
        raise KilnError("frontend", str(path), reason)
    graph, problems = build_graph(model, path, batch, log)
    _raise_for(problems, str(path), graph.opset)
    return graph


def check_onnx(path: str | Path, batch: int = 1) -> list[dict[str, str]]:
    """Every problem load_onnx would report, as [{"node", "op_type", "reason"}]; empty when the
    model compiles. Raises only for a file that is not a readable ONNX model or a malformed graph."""
    _, problems = build_graph(read_model(path), path, batch)
    return [p.as_dict() for p in problems]
