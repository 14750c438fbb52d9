"""ONNX frontend, InstanceNormalization, GroupNormalization and LRN: a check, the spec's NumPy evaluator (constant
data folds at build time; the unit tests' reference) and the graph pass that rewrites each one on run-time data into
ops kiln has kernels for (issue 19), exactly as the spec defines them:

- InstanceNormalization / GroupNormalization: x [N, C, D...] is viewed as rows [N * G, C / G * prod(D)] (G = C for
  InstanceNormalization), normalised by LayerNormalization over the row (the layernorm_vector kernel, fp32 mean and
  variance: stash_type 1) with a unit scale and zero bias, viewed back as [N, C, prod(D), 1] (NCHW) and given the
  per-channel affine as a BatchNormalization with mean 0, variance 1, epsilon 0 (its lowering: a depthwise 1x1
  convolution with bias). GroupNormalization-18's scale and bias are per group (repeated over the group's
  channels), -21's per channel. The affine is left out when scale is all ones and bias all zeros.
- LRN: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta. The window sum is a 1x1 Cube
  convolution over (s * x)^2, s = sqrt(alpha / size) (so the fp16 squares neither overflow nor need the scale
  after), with a constant banded 0/1 weight [C, C] (channel c sums channels c - floor((size-1)/2) ..
  c + ceil((size-1)/2), the spec's window for odd and even sizes) and `bias` as the convolution's bias; then
  Pow(-beta) and a Mul by x (the elementwise program).

The pass runs after constant folding, before the per-op checks, which then read the new nodes as they read an
exporter's; a node the check refuses stays and is refused naming it. Each rewrite is recorded in the graph's
`rewrites` (the [OPT] log's frontend lines) and the frontend log."""
from __future__ import annotations

from math import prod

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.reduce_spec import ROW_MAX_LENGTH
from .onnx_base import rewrite_nodes, shape_of

OPS_HERE = ("InstanceNormalization", "GroupNormalization", "LRN")


def _groups(node: Node, c: int) -> int:
    return c if node.op_type == "InstanceNormalization" else int(node.attrs.get("num_groups", 0))


def _affine_size(node: Node, g: Graph, c: int) -> int:
    """The length scale and bias have: C, or G for GroupNormalization before opset 21."""
    if node.op_type == "GroupNormalization" and (g.opset or 13) < 21:
        return _groups(node, c)
    return c


def check_norm(node: Node, g: Graph) -> str | None:
    """What the rewrite takes (None) or why not."""
    shape = shape_of(g, node.inputs[0])
    if node.op_type == "LRN":
        return _check_lrn(node, shape)
    if not 3 <= len(shape) <= 5:
        return f"a {len(shape)}-D input {list(shape)}: rank 3..5 (N, C, spatial dims) is supported"
    c, groups = shape[1], _groups(node, shape[1])
    if groups < 1 or c % groups:
        return f"num_groups={groups} does not divide the {c} channels"
    if int(node.attrs.get("stash_type", 1)) != 1:
        return f"stash_type={node.attrs['stash_type']}: only 1 (mean and variance in float32) is supported"
    length = c // groups * prod(shape[2:])
    if length > ROW_MAX_LENGTH:
        return (f"each {'instance' if groups == c else 'group'} normalises {length} values (C/G * spatial); "
                f"rows of at most {ROW_MAX_LENGTH} are supported")
    want = _affine_size(node, g, c)
    for i, what in ((1, "scale"), (2, "bias")):
        if len(node.inputs) <= i or node.inputs[i] not in g.initializers:
            return f"{what} (input {i}) is computed at run time; kiln needs it constant"
        if g.initializers[node.inputs[i]].size != want:
            return f"{what} has {g.initializers[node.inputs[i]].size} values, the spec says {want}"
    return None


def _check_lrn(node: Node, shape: tuple[int, ...]) -> str | None:
    size, bias = int(node.attrs.get("size", 0)), float(node.attrs.get("bias", 1.0))
    if len(shape) != 4:
        return f"a {len(shape)}-D input {list(shape)}: a 4-D NCHW input is supported"
    if size < 1:
        return f"size={size}: a window of at least 1 channel"
    if not bias > 0:
        return f"bias={bias:g}: bias > 0 is supported (the fp16 window sum is exact relative to it)"
    return None


def infer_norm(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [shape_of(g, node.inputs[0])]


def _lrn_window(size: int) -> tuple[int, int]:
    """Channels (below, above) channel c the spec's window sums."""
    return (size - 1) // 2, size // 2


def fold_norm(node: Node, args: list) -> list[np.ndarray]:
    """The spec's definition in float64 (constant inputs; the tests' reference)."""
    x = np.asarray(args[0], np.float64)
    a = node.attrs
    if node.op_type == "LRN":
        size = int(a["size"])
        lo, hi = _lrn_window(size)
        sq = np.square(x)
        c = x.shape[1]
        window = np.stack([sq[:, max(0, i - lo):min(c, i + hi + 1)].sum(axis=1) for i in range(c)], axis=1)
        y = x / (float(a.get("bias", 1.0)) + float(a.get("alpha", 1e-4)) / size * window) ** float(a.get("beta", 0.75))
        return [y.astype(args[0].dtype)]
    n, c, groups = x.shape[0], x.shape[1], _groups(node, x.shape[1])
    rows = x.reshape(n * groups, -1)
    mean, var = rows.mean(axis=1, keepdims=True), rows.var(axis=1, keepdims=True)
    z = ((rows - mean) / np.sqrt(var + float(a.get("epsilon", 1e-5)))).reshape(x.shape)
    scale, bias = (np.asarray(v, np.float64).reshape(-1) for v in args[1:3])
    if scale.size != c:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return [(z * scale.reshape(bshape) + bias.reshape(bshape)).astype(args[0].dtype)]


class _Builder:
    """New nodes, values and constants for one rewritten node, named after it."""

    def __init__(self, g: Graph, node: Node):
        self.g, self.node = g, node
        self.nodes: list[Node] = []
        self.dtype = g.values[node.inputs[0]].dtype

    def const(self, key: str, arr: np.ndarray) -> str:
        name = f"{self.node.name}/{key}"
        self.g.initializers[name] = arr
        self.g.values[name] = Value(name, tuple(arr.shape), "int64" if arr.dtype == np.int64 else "float32")
        return name

    def add(self, op: str, key: str, ins: list[str], shape: tuple[int, ...], out: str | None = None, **attrs) -> str:
        """A node `op` reading `ins`; its output (a new value, or `out`, the original node's output)."""
        y = out or f"{self.node.name}/{key}"
        self.g.values.setdefault(y, Value(y, shape, self.dtype))
        self.nodes.append(Node(self.node.name if out else f"{self.node.name}/{key}", op, ins, [y], attrs,
                               [self.node.name]))
        return y

    def reshape(self, key: str, x: str, shape: tuple[int, ...], out: str | None = None) -> str:
        return self.add("Reshape", key, [x, self.const(f"{key}_shape", np.array(shape, np.int64))], shape, out)


def _rewrite_norm(b: _Builder) -> str:
    node, g = b.node, b.g
    x, y = node.inputs[0], node.outputs[0]
    shape = shape_of(g, x)
    n, c = shape[:2]
    groups, spatial = _groups(node, c), prod(shape[2:])
    rows = (n * groups, c // groups * spatial)
    eps = float(node.attrs.get("epsilon", 1e-5))
    scale, bias = (np.asarray(g.initializers[node.inputs[i]], np.float32).reshape(-1) for i in (1, 2))
    if scale.size != c:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    affine = not (np.all(scale == 1) and np.all(bias == 0))
    v = b.reshape("rows", x, rows)
    v = b.add("LayerNormalization", "normalised", [v, b.const("ones", np.ones(rows[1], np.float32)),
                                                     b.const("zeros", np.zeros(rows[1], np.float32))],
              rows, axis=-1, epsilon=eps)
    if not affine:
        b.reshape("back", v, shape, out=y)
        return f"LayerNormalization over rows {list(rows)} (eps {eps:g}), no affine (scale 1, bias 0)"
    nchw = shape if len(shape) == 4 else (n, c, spatial, 1)
    v = b.reshape("nchw", v, nchw)
    consts = [b.const(k, arr) for k, arr in (("scale", scale), ("bias", bias), ("mean", np.zeros(c, np.float32)),
                                            ("var", np.ones(c, np.float32)))]
    if len(shape) == 4:
        b.add("BatchNormalization", "affine", [v, *consts], shape, out=y, epsilon=0.0)
    else:
        v = b.add("BatchNormalization", "affine", [v, *consts], nchw, epsilon=0.0)
        b.reshape("back", v, shape, out=y)
    return (f"LayerNormalization over rows {list(rows)} (eps {eps:g}), then the per-channel scale and bias as a "
            f"BatchNormalization (mean 0, var 1, eps 0) on {list(nchw)}")


def _rewrite_lrn(b: _Builder) -> str:
    node, g = b.node, b.g
    x, y = node.inputs[0], node.outputs[0]
    shape = shape_of(g, x)
    c = shape[1]
    size, a = int(node.attrs["size"]), node.attrs
    alpha, beta, bias = float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0))
    lo, hi = _lrn_window(size)
    idx = np.arange(c)
    band = ((idx[None, :] >= idx[:, None] - lo) & (idx[None, :] <= idx[:, None] + hi)).astype(np.float32)
    v = b.add("Mul", "scaled", [x, b.const("s", np.array(np.sqrt(alpha / size), np.float32))], shape)
    v = b.add("Pow", "squared", [v, b.const("two", np.array(2.0, np.float32))], shape)
    v = b.add("Conv", "window_sum", [v, b.const("band", band.reshape(c, c, 1, 1)),
                                     b.const("bias", np.full(c, bias, np.float32))], shape,
              kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1], group=1)
    v = b.add("Pow", "power", [v, b.const("minus_beta", np.array(-beta, np.float32))], shape)
    b.add("Mul", "out", [x, v], shape, out=y)
    return (f"window sum of (sqrt(alpha/size) x)^2 over channels [c-{lo}, c+{hi}] as a 1x1 convolution with a "
            f"banded {c}x{c} weight and bias {bias:g}, then Pow {-beta:g} and Mul by x")


def _rewrite(g: Graph, node: Node) -> tuple[list[Node], str]:
    b = _Builder(g, node)
    what = (_rewrite_lrn if node.op_type == "LRN" else _rewrite_norm)(b)
    return b.nodes, what


def expand_norms(graph: Graph, log: list[str]) -> Graph:
    """Each InstanceNormalization / GroupNormalization / LRN the check takes, on a run-time value, as the ops it
    is (see the module docstring)."""
    return rewrite_nodes(graph, OPS_HERE, check_norm, _rewrite, log, "expand_norms")


ACCEPTED_NORMS = {
    "InstanceNormalization": "epsilon: any; rank 3..5; scale, B: constant per channel; H*W (all spatial dims) "
                             f"<= {ROW_MAX_LENGTH}",
    "GroupNormalization": "num_groups: any dividing C; epsilon: any; stash_type: 1; scale, bias: constant, per group "
                          f"(opset 18) or per channel (opset 21); rank 3..5; C/G * spatial <= {ROW_MAX_LENGTH}",
    "LRN": "size: any >= 1 (odd or even); alpha, beta: any; bias > 0; 4-D NCHW input",
}
