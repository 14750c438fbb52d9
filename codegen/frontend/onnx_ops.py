"""ONNX frontend, the op table: OPS maps an op type to its OpEntry (check, normalise, shape rule from
onnx_rules, and the NumPy evaluator used to fold it at build time). Adding an op is one entry here
(and a test)."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.graph import Graph, Node, Value
from . import onnx_argmax as argmax
from . import onnx_convtranspose as convtranspose
from . import onnx_depth_space as depth_space
from . import onnx_norm as norm
from . import onnx_pad as pad
from . import onnx_resize as resize
from . import onnx_rnn as rnn
from . import onnx_rules as rules
from . import onnx_structure as structure
from .onnx_base import as_ints

try:
    import onnx
except ImportError:  # only reading ONNX files needs it; the kernel-list build does not
    onnx = None  # type: ignore[assignment]  # optional: the module is None where onnx is not installed


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


def shape_slice(node: Node, in_shape: tuple[int, ...]) -> np.ndarray:
    start, end = node.attrs.get("start", 0), node.attrs.get("end", None)
    return np.array(in_shape[start:end], np.int64)


def _fold_unsqueeze(node: Node, args: list) -> list[np.ndarray]:
    axes = args[1] if len(args) > 1 and args[1] is not None else node.attrs["axes"]
    return [np.expand_dims(args[0], as_ints(axes))]


def _fold_squeeze(node: Node, args: list) -> list[np.ndarray]:
    axes = args[1] if len(args) > 1 and args[1] is not None else node.attrs.get("axes")
    return [np.squeeze(args[0], axis=None if axes is None else as_ints(axes))]


def _fold_slice(node: Node, args: list) -> list[np.ndarray]:
    data, starts, ends = args[0], as_ints(args[1]), as_ints(args[2])
    axes = as_ints(args[3]) if len(args) > 3 and args[3] is not None else tuple(range(len(starts)))
    steps = as_ints(args[4]) if len(args) > 4 and args[4] is not None else (1,) * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(s, e, step)  # Python slicing clamps out-of-range bounds the way ONNX does
    return [data[tuple(index)]]


def _fold_split(node: Node, args: list) -> list[np.ndarray]:
    axis = node.attrs.get("axis", 0)
    if len(args) > 1 and args[1] is not None:
        sizes = as_ints(args[1])
    else:
        part = -(-args[0].shape[axis] // len(node.outputs))
        sizes = tuple(min(part, args[0].shape[axis] - i * part) for i in range(len(node.outputs)))
    return list(np.split(args[0], np.cumsum(sizes)[:-1], axis=axis))


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
    return [np.full(as_ints(args[0]), value[0], value.dtype)]


def _fold_with_attrs(normalise: Callable, fn: Callable) -> Callable[[Node, list], list[np.ndarray]]:
    """Evaluator of a data-movement op from its normalised attributes (needs only the input shape)."""
    def fold(node: Node, args: list) -> list[np.ndarray]:
        g = Graph("fold", [], [], [], {n: Value(n, tuple(a.shape)) for n, a in zip(node.inputs, args) if a is not None},
                  {n: a for n, a in zip(node.inputs, args) if a is not None}, 0)
        return [fn(args, normalise(node, g))]
    return fold


def _fold_mod(node: Node, args: list) -> list[np.ndarray]:
    a, b = args
    # fmod=1: the remainder takes the dividend's sign (C fmod); fmod=0 (integers only): the divisor's (Python %)
    fn = np.fmod if node.attrs.get("fmod", 0) else np.mod
    return [fn(a, b).astype(a.dtype)]


def _fold_range(node: Node, args: list) -> list[np.ndarray]:
    start, limit, delta = (np.asarray(a).reshape(()) for a in args)
    if delta == 0:
        raise ValueError("Range with delta 0 never reaches its limit")
    count = max(int(np.ceil((limit - start) / delta)), 0)  # the ONNX spec's element count
    return [(start + np.arange(count) * delta).astype(start.dtype)]


_erf = np.vectorize(math.erf, otypes=[np.float64])


# ---------------------------------------------------------------- the op table

@dataclass(frozen=True)
class OpEntry:
    """What kiln knows about one ONNX op type.

    check(node, graph)            reason string when the attributes/operands are unsupported, else None
    normalise(node, graph)        the node's attributes with every default explicit (may raise Unsupported)
    infer(node, graph, attrs)     kiln's shape rule: output shapes from static input shapes
    fold(node, args)              NumPy evaluator used when every input is constant
    attr_inputs                   inputs normalise() turns into attributes; dropped from the node afterwards
    build_time_only               shape arithmetic: supported only when it folds away
    shape_inputs                  inputs whose values (not only their shapes) decide the output shape; with
                                  those constant, fold() on placeholders of the other inputs gives the shapes
    index_inputs                  inputs that may hold int64/bool (indices, shapes, conditions, axes); every
                                  other input of a run-time value must be float
    """
    summary: str
    check: Callable[[Node, Graph], str | None] = rules.no_check
    normalise: Callable[[Node, Graph], dict[str, Any]] = rules.copy_attrs
    infer: Callable[[Node, Graph, dict], list[tuple[int, ...]]] | None = None
    fold: Callable[[Node, list], list[np.ndarray]] | None = None
    attr_inputs: tuple[int, ...] = ()
    build_time_only: bool = False
    shape_inputs: tuple[int, ...] = ()
    index_inputs: tuple[int, ...] = ()


def _unary(summary: str, fn: Callable | None = None) -> OpEntry:
    return OpEntry(summary, infer=rules.same_shape, fold=_elementwise(fn) if fn else None)


def _binary(summary: str, fn: Callable) -> OpEntry:
    return OpEntry(summary, infer=rules.broadcast_shape, fold=_elementwise(fn))


def _reduce(summary: str, fn: Callable) -> OpEntry:
    """A Reduce* op: constant axes (attribute or input 1), folded with `fn(x, axis=, keepdims=)`."""
    return OpEntry(summary, rules.check_reduce, rules.normalise_reduce, rules.infer_reduce,
                   _fold_with_attrs(rules.normalise_reduce,
                                    lambda args, a: fn(args[0], axis=a["axes"], keepdims=bool(a["keepdims"]))),
                   attr_inputs=(1,), shape_inputs=(1,), index_inputs=(1,))


def _compare(summary: str, fn: Callable) -> OpEntry:
    return OpEntry(summary, infer=rules.broadcast_shape, fold=lambda node, args: [fn(args[0], args[1])])


def _build_time(summary: str, fold: Callable | None, shape_inputs: tuple[int, ...] = (),
                index_inputs: tuple[int, ...] = ()) -> OpEntry:
    return OpEntry(summary, fold=fold, build_time_only=True, shape_inputs=shape_inputs,
                   index_inputs=index_inputs or shape_inputs)


def _refused_rnn(node: Node, g: Graph) -> str:
    """An LSTM / GRU the expand_recurrent pass left in the graph: why (its check's reason)."""
    return rnn.check_recurrent(node, g) or "not unrolled (its outputs' shapes are unknown)"


OPS: dict[str, OpEntry] = {
    "Conv": OpEntry("2-D convolution, any group count (dense, grouped, depthwise); auto_pad resolved to pads [t,l,b,r]",
                    rules.check_conv, rules.normalise_conv, rules.infer_conv),
    "ConvTranspose": OpEntry("2-D transposed convolution on the Cube (stride-phase convolutions, a GEMM + "
                             "depth-to-space, or a GEMM + a Vector col2im scatter-add: the cheapest by the cost "
                             "model); pads and output size resolved from auto_pad, output_shape, output_padding",
                             convtranspose.check_convtranspose, convtranspose.normalise_convtranspose,
                             convtranspose.infer_convtranspose),
    "BatchNormalization": OpEntry("inference-mode batch norm (folded into a preceding Conv when possible)",
                                  rules.check_batchnorm, rules.normalise_batchnorm, rules.same_shape),
    "MaxPool": OpEntry("2-D max pooling, floor or ceil mode, any dilation",
                       rules.check_pool, rules.normalise_pool, rules.infer_pool),
    "AveragePool": OpEntry("2-D average pooling, floor or ceil mode, no dilation",
                           rules.check_pool, rules.normalise_pool, rules.infer_pool),
    "GlobalAveragePool": OpEntry("mean over the spatial dims", infer=rules.infer_global_pool),
    "GlobalMaxPool": OpEntry("maximum over the spatial dims", rules.check_global_maxpool,
                             infer=rules.infer_global_pool),
    "Gemm": OpEntry("alpha * A[M,K] * B (+ beta * C); transA, transB allowed",
                    normalise=rules.normalise_gemm, infer=rules.infer_gemm),
    "MatMul": OpEntry("batched matrix product, rank >= 2", infer=rules.infer_matmul, fold=_elementwise(np.matmul)),
    "Relu": _unary("max(x, 0)", lambda x: np.maximum(x, 0)),
    "Clip": OpEntry("clamp; constant min/max inputs become attributes, run-time ones stay inputs",
                    rules.check_clip, rules.normalise_clip, rules.same_shape, _fold_clip, attr_inputs=(1, 2)),
    "Sigmoid": _unary("1 / (1 + exp(-x))", lambda x: 1 / (1 + np.exp(-x))),
    "HardSigmoid": OpEntry("max(0, min(1, alpha x + beta))", normalise=rules.normalise_hardsigmoid,
                           infer=rules.same_shape, fold=lambda node, args: [np.clip(
                               node.attrs.get("alpha", 0.2) * args[0] + node.attrs.get("beta", 0.5), 0, 1)
                               .astype(args[0].dtype)]),
    "HardSwish": _unary("x * max(0, min(1, x/6 + 1/2))", lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "Sum": OpEntry("n-ary x1 + x2 + ..., broadcasting", rules.check_sum, infer=rules.broadcast_shape,
                   fold=lambda node, args: [np.asarray(sum(a for a in args if a is not None)).astype(args[0].dtype)]),
    "Sqrt": _unary("square root", np.sqrt),
    "Erf": _unary("error function", _erf),
    "Reciprocal": _unary("1 / x", np.reciprocal),
    "Exp": _unary("exp(x)", np.exp),
    "Log": _unary("natural logarithm", np.log),
    "Abs": _unary("|x|", np.abs),
    "Neg": _unary("-x", np.negative),
    "Tanh": _unary("hyperbolic tangent", np.tanh),
    "Softplus": _unary("ln(1 + exp(x))", lambda x: np.logaddexp(x, 0)),
    "LeakyRelu": OpEntry("x < 0 ? alpha x : x", normalise=rules.normalise_leakyrelu, infer=rules.same_shape,
                         fold=lambda node, args: [np.where(args[0] < 0, node.attrs.get("alpha", 0.01) * args[0],
                                                           args[0]).astype(args[0].dtype)]),
    "PRelu": OpEntry("x < 0 ? slope x : x, slope broadcast to x", infer=rules.same_shape,
                     fold=_elementwise(lambda x, s: np.where(x < 0, s * x, x))),
    "Max": OpEntry("n-ary max, broadcasting", rules.check_sum, infer=rules.broadcast_shape,
                   fold=_elementwise(lambda *a: functools.reduce(np.maximum, a))),
    "Min": OpEntry("n-ary min, broadcasting", rules.check_sum, infer=rules.broadcast_shape,
                   fold=_elementwise(lambda *a: functools.reduce(np.minimum, a))),
    "Mean": OpEntry("n-ary mean, broadcasting", rules.check_sum, infer=rules.broadcast_shape,
                    fold=_elementwise(lambda *a: sum(a) / len(a))),
    "Gelu": OpEntry("GELU, exact or tanh approximation (opset 20)",
                    rules.check_gelu, rules.normalise_gelu, rules.same_shape),
    "Identity": _unary("copy (removed by the identity pass where possible)", lambda x: x),
    "Add": _binary("x + y, broadcasting", np.add),
    "Sub": _binary("x - y, broadcasting", np.subtract),
    "Mul": _binary("x * y, broadcasting", np.multiply),
    "Div": OpEntry("x / y, broadcasting", infer=rules.broadcast_shape, fold=_fold_div),
    "Pow": OpEntry("x ** p, p a constant scalar", rules.check_pow, infer=rules.broadcast_shape,
                   fold=_elementwise(np.power)),
    # conditions (1 / 0 tiles in an elementwise program) and the select reading them
    "Where": OpEntry("elementwise select: x where the condition holds, else y, broadcasting", rules.check_where,
                     infer=rules.broadcast_shape, fold=lambda node, args: [np.where(args[0], args[1], args[2])],
                     index_inputs=(0,)),
    "Not": OpEntry("logical not of a condition", rules.check_not, infer=rules.same_shape,
                   fold=lambda node, args: [np.logical_not(args[0])], index_inputs=(0,)),
    "Equal": _compare("elementwise a == b (bool), broadcasting", np.equal),
    "Less": _compare("elementwise a < b (bool), broadcasting", np.less),
    "Greater": _compare("elementwise a > b (bool), broadcasting", np.greater),
    "LessOrEqual": _compare("elementwise a <= b (bool), broadcasting", np.less_equal),
    "GreaterOrEqual": _compare("elementwise a >= b (bool), broadcasting", np.greater_equal),
    "Softmax": OpEntry("softmax along one axis", normalise=rules.normalise_softmax, infer=rules.same_shape),
    "LogSoftmax": OpEntry("log of softmax along one axis", normalise=rules.normalise_softmax, infer=rules.same_shape),
    "LayerNormalization": OpEntry("layer norm over the trailing axes from `axis`", rules.check_layernorm,
                                  rules.normalise_layernorm, rules.same_shape),
    "ReduceMean": _reduce("mean over constant axes (attribute or opset-18 input)", np.mean),
    "ReduceSum": _reduce("sum over constant axes (attribute, or input from opset 13)", np.sum),
    "ReduceMax": _reduce("maximum over constant axes (attribute or opset-18 input)", np.max),
    "ReduceMin": _reduce("minimum over constant axes (attribute or opset-18 input)", np.min),
    "ReduceL2": _reduce("L2 norm over constant axes (attribute or opset-18 input)",
                        lambda x, axis, keepdims: np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))),
    "Reshape": OpEntry("reshape to a build-time shape (attribute 'shape')",
                       rules.check_reshape, rules.normalise_reshape, rules.infer_from_shape_attr,
                       _fold_with_attrs(rules.normalise_reshape, lambda args, a: args[0].reshape(a["shape"])),
                       attr_inputs=(1,), shape_inputs=(1,), index_inputs=(1,)),
    "Flatten": OpEntry("reshape to 2-D at `axis`", normalise=rules.normalise_flatten, infer=rules.infer_flatten,
                       fold=_fold_with_attrs(rules.normalise_flatten,
                                             lambda args, a: args[0].reshape(math.prod(args[0].shape[:a["axis"]]),
                                                                             math.prod(args[0].shape[a["axis"]:])))),
    "Transpose": OpEntry("axis permutation", normalise=rules.normalise_transpose, infer=rules.infer_transpose,
                         fold=_fold_with_attrs(rules.normalise_transpose,
                                               lambda args, a: np.transpose(args[0], a["perm"]))),
    "Concat": OpEntry("concatenation along one axis", normalise=rules.normalise_concat, infer=rules.infer_concat,
                      fold=lambda node, args: [np.concatenate([a for a in args if a is not None],
                                                              axis=node.attrs["axis"])]),
    "Resize": OpEntry("nearest or bilinear resize of H, W (constant scales or sizes); Upsample (opsets 7..9) and "
                      "Resize-10 arrive converted, with their own semantics kept", resize.check_resize,
                      resize.normalise_resize, resize.infer_resize, attr_inputs=(1, 2, 3), shape_inputs=(1, 2, 3),
                      index_inputs=(3,)),
    # unrolled by the expand_recurrent pass (onnx_passes) when accepted; a node left here is refused by its check
    "LSTM": OpEntry("LSTM: the input projection one Cube GEMM, the recurrence looped over time in one Cube + Vector "
                    "kernel (layout 0, no clip, peepholes or input_forget, hidden a multiple of 16 up to 192); "
                    "otherwise unrolled over the baked sequence length (per step a Cube GEMM and Vector gate "
                    "programs)", _refused_rnn,
                    infer=rnn.infer_recurrent, index_inputs=(4,)),
    "GRU": OpEntry("GRU: the input projection one Cube GEMM, the recurrence looped over time in one Cube + Vector "
                   "kernel (layout 0, no clip, hidden a multiple of 16 up to 192; linear_before_reset 0 and 1); "
                   "otherwise unrolled over the baked sequence length (per step Cube GEMMs and Vector gate "
                   "programs)", _refused_rnn,
                   infer=rnn.infer_recurrent, index_inputs=(4,)),
    "Pad": OpEntry("pad with a constant, the reflection or the edge value",
                   pad.check_pad, pad.normalise_pad, pad.infer_pad, pad.fold_pad,
                   attr_inputs=(1, 2, 3), shape_inputs=(1, 3), index_inputs=(1, 3)),
    **{op: OpEntry(f"blocks of {what}, as ONNX defines it: Reshape -> Transpose -> Reshape",
                   depth_space.check_depth_space, infer=depth_space.infer_depth_space,
                   fold=depth_space.fold_depth_space)
       for op, what in (("DepthToSpace", "channels moved to H and W"), ("SpaceToDepth", "H and W moved to channels"))},
    # rewritten by the expand_norms pass (onnx_norm) when accepted; a node left here is refused by its check
    **{op: OpEntry(what, norm.check_norm, infer=norm.infer_norm, fold=norm.fold_norm) for op, what in (
        ("InstanceNormalization", "per-(image, channel) normalisation: LayerNormalization over rows + per-channel "
                                  "affine"),
        ("GroupNormalization", "per-group normalisation: LayerNormalization over rows + per-channel affine"),
        ("LRN", "local response normalisation across channels: a banded 1x1 Conv over squares + Pow, Mul"))},
    # rewritten by the expand_args pass (onnx_argmax); int64 result, a graph output
    **{op: OpEntry(f"position of the {what} along one axis (int64): Reduce{what.capitalize()[:3]}, Equal, Where, "
                   f"ReduceMin/Max", argmax.check_arg, infer=argmax.infer_arg, fold=argmax.fold_arg)
       for op, what in (("ArgMax", "maximum"), ("ArgMin", "minimum"))},
    # data movement on run-time values (onnx_structure); with constant inputs they fold at build time
    "Slice": OpEntry("slice with step 1 (constant starts, ends, axes)", structure.check_slice,
                     structure.normalise_slice, structure.infer_slice, _fold_slice, attr_inputs=(1, 2, 3, 4),
                     shape_inputs=(1, 2, 3, 4), index_inputs=(1, 2, 3, 4)),
    "Split": OpEntry("split along one axis into constant sizes", structure.check_split, structure.normalise_split,
                     structure.infer_split, _fold_split, attr_inputs=(1,), shape_inputs=(1,), index_inputs=(1,)),
    "Gather": OpEntry("indexing along one axis by indices of any shape (run-time or constant)",
                      structure.check_gather, structure.normalise_gather, structure.infer_gather,
                      lambda node, args: [np.take(args[0], args[1], axis=node.attrs.get("axis", 0))],
                      attr_inputs=(1,), index_inputs=(1,)),
    "Expand": OpEntry("broadcast to a constant shape (an elementwise-program copy)", structure.check_expand,
                      structure.normalise_expand, structure.infer_broadcast, lambda node, args: [
                          np.broadcast_to(args[0], np.broadcast_shapes(args[0].shape, as_ints(args[1]))).copy()],
                      attr_inputs=(1,), shape_inputs=(1,), index_inputs=(1,)),
    "Tile": OpEntry("repeat along each axis; on run-time data a broadcast of size-1 axes (as Expand)",
                    structure.check_tile, structure.normalise_tile, structure.infer_broadcast,
                    lambda node, args: [np.tile(args[0], as_ints(args[1]))], attr_inputs=(1,), shape_inputs=(1,),
                    index_inputs=(1,)),
    "Unsqueeze": OpEntry("insert unit axes", structure.check_axes_input, structure.normalise_unsqueeze,
                         structure.infer_unsqueeze, _fold_unsqueeze, attr_inputs=(1,), shape_inputs=(1,),
                         index_inputs=(1,)),
    "Squeeze": OpEntry("remove unit axes", structure.check_axes_input, structure.normalise_squeeze,
                       structure.infer_squeeze, _fold_squeeze, attr_inputs=(1,), shape_inputs=(1,),
                       index_inputs=(1,)),
    # shape arithmetic: evaluated at build time, never lowered
    "Constant": _build_time("a constant tensor (becomes an initializer)", _fold_constant),
    "Shape": _build_time("static shape of a tensor", None),  # folded from the input's shape, see onnx_passes._try_fold
    "Cast": _build_time("type conversion", _fold_cast),
    "Mod": _build_time("remainder (fmod 0 or 1)", _fold_mod),
    "ConstantOfShape": _build_time("filled tensor of a constant shape", _fold_constant_of_shape, shape_inputs=(0,)),
    "Range": _build_time("arithmetic sequence start, start + delta, ... below limit", _fold_range,
                         shape_inputs=(0, 1, 2)),
}


def supported_ops_text() -> str:
    runtime = sorted(op for op, e in OPS.items() if not e.build_time_only)
    build_time = sorted(op for op, e in OPS.items() if e.build_time_only)
    return (f"Supported ops: {', '.join(runtime)}; evaluated at build time when their inputs are constants: "
            f"{', '.join(build_time)}")


def infer_shapes(node: Node, graph: Graph) -> list[tuple[int, ...]]:
    """kiln's shape rule for one node (its entry's normalised attributes, static input shapes)."""
    entry = OPS[node.op_type]
    assert entry.infer is not None, f"{node.op_type} has no shape rule (a build-time op folds away)"
    return entry.infer(node, graph, entry.normalise(node, graph))

