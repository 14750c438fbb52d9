"""ONNX frontend, DepthToSpace (modes DCR and CRD) and SpaceToDepth: a check, a shape rule and a NumPy evaluator
(constant data folds at build time), and the graph pass that rewrites each one on run-time data into what it is,
Reshape -> Transpose -> Reshape (ONNX's own definition of the ops), so the views and the copy_mte transpose of
any permutation serve it (codegen/passes/lowering.py). The pass runs after constant folding, before the per-op
checks, which then read the three new nodes as they read an exporter's."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from .onnx_base import rewrite_nodes, shape_of

OPS_HERE = ("DepthToSpace", "SpaceToDepth")


def _mode(node: Node) -> str:
    mode = node.attrs.get("mode", "DCR")
    return mode.decode() if isinstance(mode, bytes) else mode


def check_depth_space(node: Node, g: Graph) -> str | None:
    """A 4-D input whose channels (DepthToSpace) or H and W (SpaceToDepth) the block size divides; DCR or CRD."""
    bs, shape = int(node.attrs.get("blocksize", 0)), shape_of(g, node.inputs[0])
    if bs < 1 or len(shape) != 4:
        return f"blocksize {bs} on a {len(shape)}-D input: a block size >= 1 on a 4-D NCHW input"
    if node.op_type == "DepthToSpace":
        if _mode(node) not in ("DCR", "CRD"):
            return f"mode={_mode(node)!r} is not supported (accepted: DCR, CRD)"
        if shape[1] % (bs * bs):
            return f"{shape[1]} channels are not a multiple of blocksize^2 = {bs * bs}"
    elif shape[2] % bs or shape[3] % bs:
        return f"H, W = {shape[2]}, {shape[3]} are not multiples of blocksize {bs}"
    return None


def steps(op: str, mode: str, bs: int, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...],
                                                                          tuple[int, ...]]:
    """(first reshape, transpose perm, result shape) of the op on an NCHW `shape` (the ONNX definitions)."""
    n, c, h, w = shape
    if op == "SpaceToDepth":
        return (n, c, h // bs, bs, w // bs, bs), (0, 3, 5, 1, 2, 4), (n, c * bs * bs, h // bs, w // bs)
    out = (n, c // (bs * bs), h * bs, w * bs)
    if mode == "DCR":
        return (n, bs, bs, c // (bs * bs), h, w), (0, 3, 4, 1, 5, 2), out
    return (n, c // (bs * bs), bs, bs, h, w), (0, 1, 4, 2, 5, 3), out


def infer_depth_space(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    return [steps(node.op_type, _mode(node), int(node.attrs["blocksize"]), shape_of(g, node.inputs[0]))[2]]


def fold_depth_space(node: Node, args: list) -> list[np.ndarray]:
    first, perm, out = steps(node.op_type, _mode(node), int(node.attrs["blocksize"]), args[0].shape)
    return [np.transpose(args[0].reshape(first), perm).reshape(out)]


def reshape_transpose_reshape(g: Graph, prefix: str, x: str, plan: tuple[tuple[int, ...], ...], y: str,
                              last: str) -> list[Node]:
    """x -> Reshape first -> Transpose perm -> Reshape out (plan: the three, as steps() gives them) into y, the last
    node named `last`; the shape constants and intermediate values added to g (y too, when new), every node
    sourced from the node `prefix` names."""
    first, perm, out = plan
    dtype = g.values[x].dtype
    a, t, s1, s2 = (f"{prefix}/{k}" for k in ("reshaped", "transposed", "shape1", "shape2"))
    g.initializers[s1], g.initializers[s2] = np.array(first, np.int64), np.array(out, np.int64)
    for name, shape, dt in ((s1, (len(first),), "int64"), (s2, (len(out),), "int64"), (a, first, dtype),
                            (t, tuple(first[p] for p in perm), dtype)):
        g.values[name] = Value(name, shape, dt)
    g.values.setdefault(y, Value(y, out, dtype))
    return [Node(f"{prefix}/reshape", "Reshape", [x, s1], [a], {}, [prefix]),
            Node(f"{prefix}/transpose", "Transpose", [a], [t], {"perm": list(perm)}, [prefix]),
            Node(last, "Reshape", [t, s2], [y], {}, [prefix])]


def _rewrite(g: Graph, node: Node) -> tuple[list[Node], str]:
    x, y = node.inputs[0], node.outputs[0]
    first, perm, out = steps(node.op_type, _mode(node), int(node.attrs["blocksize"]), shape_of(g, x))
    return (reshape_transpose_reshape(g, node.name, x, (first, perm, out), y, node.name),
            f"{_mode(node)}, blocksize {node.attrs['blocksize']}: Reshape {list(first)} -> Transpose {list(perm)} -> "
            f"Reshape")


def expand_depth_space(graph: Graph, log: list[str]) -> Graph:
    """Each DepthToSpace / SpaceToDepth the checks take, on a run-time value, as Reshape -> Transpose -> Reshape."""
    return rewrite_nodes(graph, OPS_HERE, check_depth_space, _rewrite, log, "expand_depth_space")


ACCEPTED_DEPTH_SPACE = {
    "DepthToSpace": "blocksize: any whose square divides the channels; mode: DCR, CRD; 4-D NCHW input",
    "SpaceToDepth": "blocksize: any dividing H and W; 4-D NCHW input",
}
