"""ONNX frontend, ArgMax and ArgMin: a check, the spec's NumPy evaluator (constant data folds at build time) and the
graph pass that rewrites each one on run-time data into ops kiln has kernels for (issue 19), exactly:

    rows    x with `axis` moved last (a Transpose, unless it is last already), viewed as [R, L]
    m       ReduceMax (ArgMax) / ReduceMin (ArgMin) over the row, keepdims: [R, 1] (reduce_vector)
    mx      MatMul(m, ones [1, L]): m repeated along the row (a K = 1 Cube GEMM: m * 1 accumulated in fp32, exact)
    e       Equal(rows, mx): where the row holds its extremum (the same fp16 values: exact)
    w       Where(e, iota [1, L], fill): the position, else `fill`
    index   ReduceMin(w) (select_last_index 0: the first position; fill 65504) or ReduceMax(w) (1: the last; fill -1)
    y       index viewed in the output shape (keepdims 1: the axis kept as 1; 0: dropped)

The positions are exact in fp16 up to 2048, so rows of at most 2048 values are taken. The result is int64 as the
spec says: it must be a graph output (the runtime returns it as int64; kiln computes with float values inside);
an index read by another node is refused naming it. Ties in fp16 that are not ties in fp32 (two inputs within
fp16's rounding of each other) give the first (last) of them, where ONNX Runtime on fp32 may pick the other."""
from __future__ import annotations

from math import prod

import numpy as np

from ..ir.graph import Graph, Node, Value
from .onnx_base import rewrite_nodes, shape_of

OPS_HERE = ("ArgMax", "ArgMin")
MAX_POSITIONS = 2048  # the largest row whose positions fp16 holds exactly
FIRST_FILL = 65504.0  # fp16's largest finite value: above any position


def _axis(node: Node, rank: int) -> int:
    a = int(node.attrs.get("axis", 0))
    return a + rank if a < 0 else a


def check_arg(node: Node, g: Graph) -> str | None:
    """What the rewrite takes (None) or why not."""
    shape = shape_of(g, node.inputs[0])
    axis = int(node.attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return f"axis={axis} is outside the {len(shape)}-D input"
    length = shape[_axis(node, len(shape))]
    if length > MAX_POSITIONS:
        return (f"the axis has {length} values; at most {MAX_POSITIONS} are supported (positions are exact in fp16 "
                f"up to {MAX_POSITIONS})")
    y = node.outputs[0]
    readers = [n.name for n in g.nodes if y in n.inputs]
    if readers or y not in {v.name for v in g.outputs}:
        return (f"its int64 result is read by node(s) {readers}: kiln returns an {node.op_type} result only as a "
                f"graph output")
    return None


def infer_arg(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    shape = shape_of(g, node.inputs[0])
    return [_out_shape(node, shape)]


def _out_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    axis = _axis(node, len(shape))
    if int(node.attrs.get("keepdims", 1)):
        return tuple(1 if i == axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i != axis)


def fold_arg(node: Node, args: list) -> list[np.ndarray]:
    x = np.asarray(args[0])
    axis = _axis(node, x.ndim)
    last = int(node.attrs.get("select_last_index", 0))
    pick = np.argmax if node.op_type == "ArgMax" else np.argmin
    if last:
        idx = x.shape[axis] - 1 - pick(np.flip(x, axis=axis), axis=axis)
    else:
        idx = pick(x, axis=axis)
    return [np.asarray(idx, np.int64).reshape(_out_shape(node, x.shape))]


def _rewrite(g: Graph, node: Node) -> list[Node]:
    x, y = node.inputs[0], node.outputs[0]
    shape = shape_of(g, x)
    axis, dtype = _axis(node, len(shape)), g.values[x].dtype
    length = shape[axis]
    rows = (prod(shape) // length, length)
    last = bool(int(node.attrs.get("select_last_index", 0)))
    nodes: list[Node] = []

    def value(key: str, shp: tuple[int, ...], dt: str = dtype) -> str:
        name = f"{node.name}/{key}"
        g.values[name] = Value(name, shp, dt)
        return name

    def const(key: str, arr: np.ndarray) -> str:
        name = value(key, tuple(arr.shape), "int64" if arr.dtype == np.int64 else "float32")
        g.initializers[name] = arr
        return name

    def add(op: str, key: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(Node(node.name if out == y else f"{node.name}/{key}", op, ins, [out], attrs, [node.name]))
        return out

    v = x
    if axis != len(shape) - 1:
        perm = [i for i in range(len(shape)) if i != axis] + [axis]
        v = add("Transpose", "moved", [v], value("moved", tuple(shape[p] for p in perm)), perm=perm)
    v = add("Reshape", "rows", [v, const("rows_shape", np.array(rows, np.int64))], value("rows", rows))
    m = add("ReduceMax" if node.op_type == "ArgMax" else "ReduceMin", "extremum", [v], value("extremum", (rows[0], 1)),
            axes=[1], keepdims=1)
    mx = add("MatMul", "repeated", [m, const("ones", np.ones((1, length), np.float32))], value("repeated", rows))
    e = add("Equal", "at", [v, mx], value("at", rows, "bool"))
    w = add("Where", "positions", [e, const("iota", np.arange(length, dtype=np.float32).reshape(1, length)),
                                   const("fill", np.array(-1.0 if last else FIRST_FILL, np.float32))],
            value("positions", rows))
    r = add("ReduceMax" if last else "ReduceMin", "index", [w], value("index", (rows[0], 1)), axes=[1], keepdims=1)
    out = _out_shape(node, shape)
    add("Reshape", "out", [r, const("out_shape", np.array(out, np.int64))], y)
    return nodes


def _what(g: Graph, node: Node) -> str:
    axis, last = _axis(node, len(shape_of(g, node.inputs[0]))), int(node.attrs.get("select_last_index", 0))
    return (f"{'ReduceMax' if node.op_type == 'ArgMax' else 'ReduceMin'} over axis {axis}, repeated by a K=1 MatMul, "
            f"Equal, the positions by Where, their {'max (last)' if last else 'min (first)'}")


def expand_args(graph: Graph, log: list[str]) -> Graph:
    """Each ArgMax / ArgMin the check takes, on a run-time value, as the ops of the module docstring."""
    return rewrite_nodes(graph, OPS_HERE, check_arg, lambda g, n: (_rewrite(g, n), _what(g, n)), log, "expand_args")


ACCEPTED_ARGS = dict.fromkeys(OPS_HERE, f"axis: any (negative too); keepdims: 0, 1; select_last_index: 0, 1; at "
                                        f"most {MAX_POSITIONS} values along the axis; the int64 result a graph output")
