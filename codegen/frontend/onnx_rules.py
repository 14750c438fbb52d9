"""ONNX frontend, per-op import rules: check (a reason when kiln cannot lower the node), normalise (every
attribute explicit) and infer (kiln's shape rule) for each op type. The op table (onnx_ops.OPS) names them."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from .onnx_argmax import ACCEPTED_ARGS
from .onnx_base import Unsupported, as_ints, const_input, has_input, output_used, shape_of
from .onnx_convtranspose import ACCEPTED_CONVTRANSPOSE
from .onnx_depth_space import ACCEPTED_DEPTH_SPACE
from .onnx_norm import ACCEPTED_NORMS
from .onnx_pad import ACCEPTED_PAD
from .onnx_resize import ACCEPTED_RESIZE
from .onnx_rnn import ACCEPTED_RNN
from .onnx_structure import ACCEPTED_STRUCTURE


def _axis(axis: int, rank: int, allow_end: bool = False) -> int:
    """Axis made non-negative; allow_end admits axis == rank (Flatten)."""
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank + (1 if allow_end else 0):
        raise Unsupported(f"axis {axis} is out of range for rank {rank}")
    return a


def copy_attrs(node: Node, g: Graph) -> dict[str, Any]:
    return dict(node.attrs)


def no_check(node: Node, g: Graph) -> str | None:
    return None


def same_shape(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [shape_of(g, node.inputs[0])]


def broadcast_shape(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shapes = [shape_of(g, i) for i in node.inputs if i]
    try:
        return [tuple(int(d) for d in np.broadcast_shapes(*shapes))]
    except ValueError:
        raise Unsupported(f"input shapes {shapes} do not broadcast") from None


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


def window_attrs(node: Node, g: Graph, kernel: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """Explicit strides, pads (top, left, bottom, right) and dilations, auto_pad resolved."""
    strides = as_ints(node.attrs.get("strides", (1, 1)))
    dilations = as_ints(node.attrs.get("dilations", (1, 1)))
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        # ONNX orders 2-D pads [x1_begin, x2_begin, x1_end, x2_end]: already top, left, bottom, right
        pads = as_ints(node.attrs.get("pads", (0, 0, 0, 0)))
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    else:  # SAME_*: output = ceil(input / stride); the odd pixel of padding goes at the end (UPPER) or begin (LOWER)
        begin, end = [], []
        for size, k, s, d in zip(shape_of(g, node.inputs[0])[2:], kernel, strides, dilations):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        pads = (begin[0], begin[1], end[0], end[1])
    return {"strides": strides, "pads": pads, "dilations": dilations}


def _window_output(in_shape: tuple[int, ...], kernel, attrs: dict) -> tuple[int, int]:
    if len(in_shape) != 4:
        raise Unsupported(f"input has shape {in_shape}; only 4-D NCHW input is supported")
    pt, pl, pb, pr = attrs["pads"]
    out = []
    for size, p, k, s, d in zip(in_shape[2:], (pt + pb, pl + pr), kernel, attrs["strides"], attrs["dilations"]):
        o = (size + p - (k - 1) * d - 1) // s + 1
        if o < 1:
            raise Unsupported(f"window {tuple(kernel)} is larger than the padded input {in_shape[2:]}")
        out.append(o)
    return out[0], out[1]


# Conv

def check_conv(node: Node, g: Graph) -> str | None:
    w = const_input(g, node, 1)
    if w is None:
        return "the weight (input 1) is computed at run time; kiln bakes weights and needs it constant"
    if w.ndim != 4:
        return f"only 2-D convolution is supported (weight has rank {w.ndim})"
    x = g.values[node.inputs[0]].shape if node.inputs[0] in g.values else None
    if x is not None and len(x) != 4:
        return f"the input '{node.inputs[0]}' has rank {len(x)}; a 2-D convolution reads an NCHW tensor (rank 4)"
    if has_input(node, 2) and const_input(g, node, 2) is None:
        return "the bias (input 2) is computed at run time; kiln needs it constant"
    group = node.attrs.get("group", 1)
    if not isinstance(group, int) or group < 1 or w.shape[0] % group:
        return (f"group={group} with {w.shape[0]} output channels: group must be a positive integer dividing the "
                f"output channels (the ONNX spec)")
    if "kernel_shape" in node.attrs and as_ints(node.attrs["kernel_shape"]) != w.shape[2:]:
        return f"kernel_shape {list(node.attrs['kernel_shape'])} does not match the weight {list(w.shape)}"
    return _check_window(node)


def normalise_conv(node: Node, g: Graph) -> dict[str, Any]:
    kernel = tuple(int(k) for k in g.initializers[node.inputs[1]].shape[2:])
    return {"kernel_shape": kernel, **window_attrs(node, g, kernel), "group": int(node.attrs.get("group", 1))}


def infer_conv(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    w = g.initializers[node.inputs[1]].shape
    if x[1] != w[1] * attrs["group"]:
        raise Unsupported(f"input has {x[1]} channels, weight {list(w)} with group {attrs['group']} expects "
                          f"{w[1] * attrs['group']}")
    return [(x[0], int(w[0]), *_window_output(x, attrs["kernel_shape"], attrs))]


# MaxPool, AveragePool, GlobalAveragePool

def check_pool(node: Node, g: Graph) -> str | None:
    a = node.attrs
    if len(a.get("kernel_shape", ())) != 2:
        return f"kernel_shape={list(a.get('kernel_shape', ()))}: only 2-D pooling is supported"
    if a.get("ceil_mode", 0) not in (0, 1):
        return f"ceil_mode={a['ceil_mode']} is not 0 or 1"
    if a.get("ceil_mode", 0) and a.get("auto_pad", "NOTSET") != "NOTSET":
        return f"ceil_mode=1 with auto_pad={a['auto_pad']!r} is not supported (ceil_mode=1 only with explicit pads)"
    if node.op_type != "MaxPool" and any(d != 1 for d in a.get("dilations", ())):
        return f"dilations={list(a['dilations'])} are not supported (only 1; MaxPool takes any)"
    if node.op_type == "MaxPool" and a.get("storage_order", 0):
        return "storage_order=1 is not supported (it orders only the Indices output, which is not supported)"
    if node.op_type == "MaxPool" and output_used(g, node, 1):
        return "the Indices output (output 1) is not supported"
    if node.op_type == "AveragePool" and a.get("count_include_pad", 0) not in (0, 1):
        return f"count_include_pad={a['count_include_pad']} is not 0 or 1"
    return _check_window(node)


def ceil_extra(size: int, pad_begin: int, pad_end: int, k: int, s: int) -> int:
    """ceil_mode=1: the rows (or columns) past the end padding the last window reaches. The output rounds up,
    except that a window starting in the end padding is dropped (ONNX and PyTorch agree on that rule)."""
    out = -(-(size + pad_begin + pad_end - k) // s) + 1
    if (out - 1) * s >= size + pad_begin:
        out -= 1
    return max(0, (out - 1) * s + k - (size + pad_begin + pad_end))


def normalise_pool(node: Node, g: Graph) -> dict[str, Any]:
    kernel = as_ints(node.attrs["kernel_shape"])
    window = window_attrs(node, g, kernel)
    ceil_mode = int(node.attrs.get("ceil_mode", 0))
    attrs: dict[str, Any] = {"kernel_shape": kernel, **window, "ceil_mode": ceil_mode}
    if ceil_mode:  # kept beside the ONNX pads: AveragePool never counts these taps, even with count_include_pad
        x = shape_of(g, node.inputs[0])
        pt, pl, pb, pr = window["pads"]
        span = [(k - 1) * d + 1 for k, d in zip(kernel, window["dilations"])]  # a dilated window's extent
        attrs["ceil_extra"] = (ceil_extra(x[2], pt, pb, span[0], window["strides"][0]),
                               ceil_extra(x[3], pl, pr, span[1], window["strides"][1])) if len(x) == 4 else (0, 0)
    if node.op_type == "AveragePool":
        attrs["count_include_pad"] = int(node.attrs.get("count_include_pad", 0))
    return attrs


def pool_pads(attrs: dict) -> tuple[int, int, int, int]:
    """The pads the pooling kernel reads: the ONNX pads, bottom and right grown by ceil_mode's extra rows."""
    pt, pl, pb, pr = attrs["pads"]
    eb, er = attrs.get("ceil_extra", (0, 0))
    return (pt, pl, pb + eb, pr + er)


def infer_pool(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    return [(x[0], x[1], *_window_output(x, attrs["kernel_shape"], {**attrs, "pads": pool_pads(attrs)}))]


def check_global_maxpool(node: Node, g: Graph) -> str | None:
    rank = len(shape_of(g, node.inputs[0]))
    return None if rank == 4 else f"a rank-{rank} input is not supported (only 4-D NCHW)"


def infer_global_pool(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    return [(x[0], x[1]) + (1,) * (len(x) - 2)]


# BatchNormalization (when it does not follow a Conv; see fold_batchnorm)

def check_batchnorm(node: Node, g: Graph) -> str | None:
    if node.attrs.get("training_mode", 0):
        return "training_mode=1 is not supported (inference only)"
    if output_used(g, node, 1) or output_used(g, node, 2):
        return "the running mean/var outputs (training mode) are not supported"
    if any(const_input(g, node, i) is None for i in range(1, 5)):
        return "scale, bias, mean and var (inputs 1-4) must be constants"
    return None


def normalise_batchnorm(node: Node, g: Graph) -> dict[str, Any]:
    return {"epsilon": float(node.attrs.get("epsilon", 1e-5))}


# Clip

def check_clip(node: Node, g: Graph) -> str | None:
    """min and max: scalars, constant (they become attributes) or computed at run time (inputs of the
    elementwise program, broadcast from their one value)."""
    for i, what in ((1, "min"), (2, "max")):
        if has_input(node, i):
            c = const_input(g, node, i)
            shape = tuple(c.shape) if c is not None else tuple(shape_of(g, node.inputs[i]))
            if math.prod(shape) != 1:
                return f"{what} (input {i}) must be a scalar, got shape {list(shape)}"
    return None


def check_where(node: Node, g: Graph) -> str | None:
    """The condition: constant (a mask) or computed in the model (a comparison, Not); not a graph input. A
    constant scalar condition must pick a run-time operand."""
    c = const_input(g, node, 0)
    if c is not None and c.size == 1 and node.inputs[1 if c.reshape(-1)[0] else 2] in g.initializers:
        return "a constant scalar condition picking a constant operand: the result is a constant of another shape"
    return _condition_problem(node, g, 0)


def check_not(node: Node, g: Graph) -> str | None:
    return _condition_problem(node, g, 0)


def _condition_problem(node: Node, g: Graph, index: int) -> str | None:
    if node.inputs[index] in {v.name for v in g.inputs}:
        return (f"the condition (input {index}) is the graph input '{node.inputs[index]}'; kiln takes a condition "
                f"that is a constant or computed in the model (Equal, Less, Greater, LessOrEqual, GreaterOrEqual, "
                f"Not)")
    return None


def normalise_clip(node: Node, g: Graph) -> dict[str, Any]:
    lo, hi = const_input(g, node, 1), const_input(g, node, 2)
    return {"min": float(lo.reshape(-1)[0]) if lo is not None else -math.inf,
            "max": float(hi.reshape(-1)[0]) if hi is not None else math.inf}


# HardSigmoid (the ONNX defaults made explicit), Sum

def normalise_hardsigmoid(node: Node, g: Graph) -> dict[str, Any]:
    return {"alpha": float(node.attrs.get("alpha", 0.2)), "beta": float(node.attrs.get("beta", 0.5))}


def check_sum(node: Node, g: Graph) -> str | None:
    """Sum, Max, Min, Mean: variadic."""
    return None if [i for i in node.inputs if i] else f"{node.op_type} needs at least one input"


# Pow, LeakyRelu (issue 19's elementwise catalogue: lowered as elementwise-program steps)

POW_MAX_INTEGER = 16  # codegen/ir/eltwise_program.py POWI_MAX: integer exponents by multiplications


def check_pow(node: Node, g: Graph) -> str | None:
    """The exponent must be a constant scalar: 0.5, -0.5, a nonzero integer up to 16 in magnitude, or any other
    non-integer value (exp(p * ln x))."""
    e = const_input(g, node, 1)
    if e is None:
        return "the exponent (input 1) is computed at run time; kiln needs a constant scalar exponent"
    if e.size != 1:
        return f"the exponent (input 1) must be a scalar constant, got shape {list(e.shape)}"
    p = float(np.asarray(e, np.float64).reshape(-1)[0])
    if p == 0 or not math.isfinite(p):
        return f"exponent {p} is not supported (x ** 0 is the constant 1: fold it in the exporter)"
    if p == int(p) and abs(p) > POW_MAX_INTEGER:
        return f"integer exponent {p:g} is not supported: at most {POW_MAX_INTEGER} in magnitude"
    return None


def normalise_leakyrelu(node: Node, g: Graph) -> dict[str, Any]:
    return {"alpha": float(node.attrs.get("alpha", 0.01))}


# Gemm, MatMul

def normalise_gemm(node: Node, g: Graph) -> dict[str, Any]:
    a = node.attrs
    return {"alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 1.0)),
            "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))}


def infer_gemm(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    a, b = shape_of(g, node.inputs[0]), shape_of(g, node.inputs[1])
    if len(a) != 2 or len(b) != 2:
        raise Unsupported(f"Gemm needs 2-D operands, got {a} and {b}")
    k_b, n = (b[1], b[0]) if attrs["transB"] else b
    m, k_a = (a[1], a[0]) if attrs["transA"] else a
    if k_a != k_b:
        raise Unsupported(f"inner dimensions differ: A {a}, B {b} (transA={attrs['transA']}, "
                          f"transB={attrs['transB']})")
    return [(m, n)]


def infer_matmul(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    a, b = shape_of(g, node.inputs[0]), shape_of(g, node.inputs[1])
    if not a or not b:
        raise Unsupported(f"0-D MatMul operands are not valid (shapes {a}, {b})")
    if (len(a) == 1 and len(b) > 2) or (len(b) == 1 and const_input(g, node, 1) is None):
        raise Unsupported(f"a 1-D MatMul operand is supported as A against a 2-D B, or as a constant B (shapes {a}, "
                          f"{b})")
    a2, b2 = ((1,) + a if len(a) == 1 else a), (b + (1,) if len(b) == 1 else b)  # numpy's promotion
    if a2[-1] != b2[-2]:
        raise Unsupported(f"inner dimensions differ: {a} x {b}")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise Unsupported(f"batch dimensions of {a} and {b} do not broadcast") from None
    return [batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)]  # the promoted axes dropped again


# Softmax, LayerNormalization, ReduceMean, Gelu

def normalise_softmax(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs.get("axis", -1), len(shape_of(g, node.inputs[0])))}


def check_layernorm(node: Node, g: Graph) -> str | None:
    if output_used(g, node, 1) or output_used(g, node, 2):
        return "the Mean/InvStdDev outputs are not supported"
    return None


def normalise_layernorm(node: Node, g: Graph) -> dict[str, Any]:
    a = node.attrs
    return {"axis": _axis(a.get("axis", -1), len(shape_of(g, node.inputs[0]))),
            "epsilon": float(a.get("epsilon", 1e-5)), "stash_type": int(a.get("stash_type", 1))}


def check_reduce(node: Node, g: Graph) -> str | None:
    """ReduceMean/Sum/Max/Min/L2: the axes must be known at build time."""
    if has_input(node, 1) and const_input(g, node, 1) is None:
        return "axes (input 1) are computed at run time; kiln needs them constant"
    return None


def normalise_reduce(node: Node, g: Graph) -> dict[str, Any]:
    """axes sorted and non-negative (the attribute, or the input from opset 18, ReduceSum's from 13); none given:
    every axis, or none at all with noop_with_empty_axes=1 (the identity: axes ())."""
    rank = len(shape_of(g, node.inputs[0]))
    axes = const_input(g, node, 1) if has_input(node, 1) else node.attrs.get("axes", ())
    axes = as_ints(axes)
    noop = bool(node.attrs.get("noop_with_empty_axes", 0))
    axes = tuple(sorted({_axis(a, rank) for a in axes})) if axes else (() if noop else tuple(range(rank)))
    return {"axes": axes, "keepdims": int(node.attrs.get("keepdims", 1))}


def infer_reduce(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    if attrs["keepdims"]:
        return [tuple(1 if i in attrs["axes"] else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in attrs["axes"])]


def check_gelu(node: Node, g: Graph) -> str | None:
    approx = node.attrs.get("approximate", "none")
    return None if approx in ("none", "tanh") else f"approximate={approx!r} is not 'none' or 'tanh'"


def normalise_gelu(node: Node, g: Graph) -> dict[str, Any]:
    return {"approximate": node.attrs.get("approximate", "none")}


# Reshape, Flatten, Transpose, Concat

def _reshape_target(in_shape: tuple[int, ...], spec, allowzero: int) -> tuple[int, ...]:
    """ONNX Reshape's shape input resolved: 0 copies the input dim (unless allowzero), -1 is inferred."""
    dims = [int(d) for d in np.asarray(spec).reshape(-1)]
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise Unsupported(f"shape {dims} copies dim {i} (0) of a rank-{len(in_shape)} input")
                dims[i] = in_shape[i]
    total = math.prod(in_shape)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise Unsupported(f"shape {dims} is not a valid Reshape target")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or total % known:
            raise Unsupported(f"cannot reshape {in_shape} ({total} elements) to {dims}")
        dims[dims.index(-1)] = total // known
    if math.prod(dims) != total:
        raise Unsupported(f"cannot reshape {in_shape} ({total} elements) to {dims}")
    return tuple(dims)


def check_reshape(node: Node, g: Graph) -> str | None:
    if const_input(g, node, 1) is None:
        return "the target shape (input 1) is computed at run time and could not be folded to a constant"
    return None


def normalise_reshape(node: Node, g: Graph) -> dict[str, Any]:
    spec = const_input(g, node, 1)
    return {"shape": _reshape_target(shape_of(g, node.inputs[0]), spec, node.attrs.get("allowzero", 0))}


def infer_from_shape_attr(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [attrs["shape"]]


def normalise_flatten(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs.get("axis", 1), len(shape_of(g, node.inputs[0])), allow_end=True)}


def infer_flatten(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x, a = shape_of(g, node.inputs[0]), attrs["axis"]
    return [(math.prod(x[:a]), math.prod(x[a:]))]


def normalise_transpose(node: Node, g: Graph) -> dict[str, Any]:
    rank = len(shape_of(g, node.inputs[0]))
    perm = as_ints(node.attrs["perm"]) if "perm" in node.attrs else tuple(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise Unsupported(f"perm {list(perm)} is not a permutation of {rank} axes")
    return {"perm": perm}


def infer_transpose(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    return [tuple(x[p] for p in attrs["perm"])]


def normalise_concat(node: Node, g: Graph) -> dict[str, Any]:
    return {"axis": _axis(node.attrs["axis"], len(shape_of(g, node.inputs[0])))}


def infer_concat(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shapes = [shape_of(g, i) for i in node.inputs if i]
    axis = attrs["axis"]
    rest = {s[:axis] + s[axis + 1:] for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise Unsupported(f"input shapes {shapes} differ outside axis {axis}")
    first = shapes[0]
    return [first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]]


# What the checks above accept, per op and attribute, for the operator-support matrix (docs/operator-support.md,
# generated by codegen/emit/support_matrix.py). Stated beside the checks so a change to one shows in the other;
# an op not listed takes no attributes or accepts every value of those it has.
_WINDOW = (f"auto_pad: {', '.join(_AUTO_PADS)}; strides, dilations: 2 values >= 1; pads: 4 values >= 0 "
           f"(top, left, bottom, right)")
_OPERAND_FORMS = ("operands (either side): the same shape, a scalar constant, per channel ([N,C,1,1] or [1,C,1,1] of "
                  "a 4-D output), a row ([..,1,L] of a non-4-D output)")
_REDUCE_AXES = ("axes: constant (attribute, or input from opset 18; ReduceSum's from 13), any subset, empty = all; "
                "keepdims: 0, 1; noop_with_empty_axes: 0, 1 (with no axes: the identity)")
ACCEPTED_ATTRIBUTES: dict[str, str] = {
    "Conv": f"group: any count dividing the input and output channels (1: dense, = input channels = output "
            f"channels: depthwise, otherwise a grouped Cube convolution); weight and bias constant; {_WINDOW}; "
            f"a patch embedding (kernel = stride >= 8, no pads, dilation 1, group 1) as space-to-depth + a 1x1 Conv",
    "BatchNormalization": "training_mode: 0; scale, bias, mean, var constant; epsilon: any; input 4-D NCHW or "
                          "2-D (N, C) when no Conv absorbs it",
    "MaxPool": f"kernel_shape: 2-D; ceil_mode: 0, 1 (1 with explicit pads); dilations: any; storage_order: 0; "
               f"Indices output unused; {_WINDOW}",
    "AveragePool": f"kernel_shape: 2-D; ceil_mode: 0, 1 (1 with explicit pads); dilations: 1; "
                   f"count_include_pad: 0, 1; {_WINDOW}",
    "GlobalMaxPool": "input 4-D NCHW; a MaxPool window over the whole map (maps of at most 2048 pixels), larger "
                     "maps as ReduceMax over H, W (at most 4096 pixels)",
    "Gemm": "transA: 0, 1 (A moved to [M, K] by a copy first); transB: 0, 1; alpha, beta: any; A and B 2-D",
    "MatMul": "operands rank >= 2, batch dims broadcast; 1-D: A against a 2-D B, or a constant B (numpy's "
              "promotion)",
    "Clip": "min, max: scalars (input or attribute), constant or computed at run time, either may be omitted",
    "Where": "condition: a constant (mask) or computed in the model (a comparison, Not), not a graph input; x, y: "
             "each in one of the operand forms of Add (a scalar constant included)",
    "Not": "input: a condition computed in the model or a constant",
    **dict.fromkeys(("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"),
                    "run-time operands float, each in one of the operand forms of Add; the bool result (a 1 / 0 "
                    "condition) read by Where or Not, not a graph output; on constants (int64 shape values "
                    "included) evaluated at build time"),
    "Gelu": "approximate: none, tanh",
    "HardSigmoid": "alpha, beta: any (defaults 0.2, 0.5)",
    **dict.fromkeys(("Add", "Sub", "Mul", "Div"), _OPERAND_FORMS),
    "Sum": "1 or more inputs, each in one of the operand forms of Add",
    **dict.fromkeys(("Max", "Min", "Mean"), "1 or more inputs, each in one of the operand forms of Add"),
    "Pow": "exponent: a constant scalar; 0.5 (Sqrt), -0.5, nonzero integers up to 16 in magnitude (multiplications), "
           "any other non-integer (exp(p ln x), NaN for x < 0); base: a run-time tensor",
    "LeakyRelu": "alpha: any (default 0.01)",
    "PRelu": "slope: a scalar (as LeakyRelu), per channel ([C,1,1] or [1,C,1,1] of a 4-D input), a row, or the "
             "input's shape; constant or computed",
    **dict.fromkeys(("Softmax", "LogSoftmax"), "axis: any (negative counts from the end; another than the last "
                                               "moved last and back by copy_mte transposes), at most 4096 values; "
                                               "opsets < 13 coerce to 2-D as their spec says"),
    "LayerNormalization": ("axis: any; epsilon: any; stash_type: any; Mean/InvStdDev outputs unused; over the "
                           "channels after a Transpose(0,2,3,1) of NCHW (ConvNeXt) one kernel reading NC1HWC0 "
                           "(constant scale and bias, C <= 4096)"),
    "ReduceMean": f"{_REDUCE_AXES}; H, W of 4-D is a global average pool, the last axis a GEMM with a column of "
                  f"1/L, others move the reduced axes last (a copy) first; at most 16384 reduced values in fp16 builds",
    "ReduceSum": f"{_REDUCE_AXES}; the reduced axes moved last (a copy, or a view when they "
                 f"are), then a GEMM with a column of ones (fp32 accumulation, the sum rounded to fp16)",
    **dict.fromkeys(("ReduceMax", "ReduceMin", "ReduceL2"), f"{_REDUCE_AXES}; the reduced axes moved last (a copy, or "
                                                             f"a view when they are), then the reduce_vector kernel "
                                                             f"(fp32); at most 4096 reduced values"),
    "Reshape": "shape: constant after folding (0 copies a dim unless allowzero, one -1 inferred); allowzero: 0, 1",
    "Flatten": "axis: 0..rank (negative counts from the end)",
    "Transpose": "perm: any permutation (default: reversed axes), at most 6 axes once neighbours that stay "
                 "neighbours are merged",
    "Concat": "axis: any; inputs equal outside the axis; in place where the inputs can be views of the result "
              "(a Concat of Concats included), a copy otherwise; a constant input (ViT's class token) is copied "
              "in from the weights",
    "Mod": "fmod: 0 (integers, sign of the divisor), 1 (sign of the dividend)",
    "Shape": "start, end: any (opset 15)",
    "Cast": "to: any numeric type",
    "Range": "start, limit, delta: scalars, delta != 0",
    **ACCEPTED_STRUCTURE,
    **ACCEPTED_RESIZE,
    **ACCEPTED_RNN,
    **ACCEPTED_CONVTRANSPOSE,
    **ACCEPTED_PAD,
    **ACCEPTED_DEPTH_SPACE,
    **ACCEPTED_NORMS,
    **ACCEPTED_ARGS,
}
