"""ONNX frontend, the checks on the finished graph: every run-time value has a static, non-empty shape (and when
one does not, the problem names the value, the dims and the reason kiln's own rules give), and element types are
ones kiln computes with: float values; int64/int32/bool only where an op reads indices, a shape or a condition."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from .onnx_base import Problem, ShapeUnknown, Unsupported, has_input, is_static

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INDEX_DTYPES = ("int64", "int32", "bool")


def _dims_text(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _why_unknown(node: Node, g: Graph, ops: dict) -> str:
    """The reason kiln's rules give for an output shape they could not compute, inputs all shaped."""
    entry = ops.get(node.op_type)
    if entry is None:
        return f"kiln has no shape rule for op type {node.op_type}"
    runtime_shape_inputs = [node.inputs[i] for i in entry.shape_inputs
                            if has_input(node, i) and node.inputs[i] not in g.initializers]
    if runtime_shape_inputs:
        names = ", ".join(f"'{v}'" for v in runtime_shape_inputs)
        return (f"it depends on the values of {names}, which are computed at run time (only shapes are known at "
                f"build time); pin the input shapes that determine them")
    if entry.infer is not None:
        reason = entry.check(node, g)  # the rule's own check first: infer assumes what it checks (ranks, windows)
        if reason:
            return reason
        try:
            entry.infer(node, g, entry.normalise(node, g))
        except Unsupported as e:
            return str(e)
        except ShapeUnknown as e:
            return f"it needs the shape of '{e.value}', which is not static"
    return f"kiln cannot evaluate {node.op_type} on these inputs to find the shape"


def _shape_problem(node: Node, g: Graph, name: str, ops: dict) -> Problem | None:
    shape: tuple[int | None, ...] | None = g.values[name].shape  # in the frontend a value may still be unshaped
    if shape is not None and all(isinstance(d, int) for d in shape):
        bad = [(i, d) for i, d in enumerate(shape) if d is not None and d <= 0]
        if not bad:
            return None
        what = "; ".join(f"dim {i} is {'0 (an empty tensor)' if d == 0 else f'negative ({d})'}" for i, d in bad)
        return Problem(node.name, node.op_type, f"value '{name}' has shape {list(shape)}: {what}; kiln compiles "
                       f"only tensors whose dims are all >= 1", "shape")
    inputs_known = all(is_static(g.values[i].shape) for i in node.inputs if i and i in g.values)
    if not inputs_known:  # a consequence: the value without a shape upstream is reported at its own node
        return None
    where = (f"the shape of '{name}' (rank unknown)" if shape is None else
             f"dim(s) {', '.join(str(i) for i, d in enumerate(shape) if d is None)} of '{name}' "
             f"{_dims_text(shape)}")
    return Problem(node.name, node.op_type, f"{where} is not determined at build time: "
                   f"{_why_unknown(node, g, ops)}", "shape")


def shape_problems(g: Graph, ops: dict) -> list[Problem]:
    """One problem per run-time value whose shape is not static and non-empty, at the node where it starts."""
    problems = []
    for node in g.nodes:
        for name in node.outputs:
            if name and name in g.values:
                p = _shape_problem(node, g, name, ops)
                if p:
                    problems.append(p)
    return problems


def _index_uses_only(g: Graph, name: str, ops: dict) -> Node | None:
    """The first node that reads `name` as data (not as an index, shape or condition operand), else None."""
    for node in g.nodes:
        entry = ops.get(node.op_type)
        for i, x in enumerate(node.inputs):
            if x == name and (entry is None or i not in entry.index_inputs):
                return node
    return None


def dtype_problems(g: Graph, ops: dict) -> list[Problem]:
    """Run-time values of a type kiln does not compute with, each naming the value, its type and who reads it."""
    problems = []
    graph_outputs = {v.name for v in g.outputs}
    runtime = [(v.name, None) for v in g.inputs] + [(o, n) for n in g.nodes for o in n.outputs if o]
    for name, producer in runtime:
        dtype = g.values[name].dtype if name in g.values else "undefined"
        if dtype in FLOAT_DTYPES or dtype == "undefined" or name in g.initializers:
            continue
        if producer is not None and producer.op_type not in ops:  # the unsupported op is the refusal to report
            continue
        if producer is not None and (producer.op_type in ("ArgMax", "ArgMin")
                                     or g.rewrites.get(producer.name, "").startswith("Arg")):
            continue  # ArgMax/ArgMin's int64 result: a graph output returned as int64, or refused by their check
        reader = _index_uses_only(g, name, ops)
        if dtype in INDEX_DTYPES and reader is None and name not in graph_outputs:
            continue
        where = (f"node '{reader.name}' ({reader.op_type}) reads it as data" if reader is not None
                 else "it is a graph output")
        subject = reader if reader is not None else producer
        kind = "input" if producer is None else "value"
        problems.append(Problem(subject.name if subject else name, subject.op_type if subject else "",
                                f"{kind} '{name}' has element type {dtype}, but {where}: kiln computes with float "
                                f"values ({', '.join(FLOAT_DTYPES)}); {'/'.join(INDEX_DTYPES)} are accepted only as "
                                f"index, shape or condition operands (Gather indices, Where condition, Reshape "
                                f"shape)", "op" if subject else "model"))
    return problems


def _bad_values(a: np.ndarray, allow_neg_inf: bool) -> str:
    """What is wrong with the values of a float constant ('' when nothing): NaN, +inf, or -inf where not allowed."""
    bad = np.isnan(a) | np.isposinf(a) | (np.isneginf(a) & (not allow_neg_inf))
    if not bad.any():
        return ""
    first = np.unravel_index(int(np.argmax(bad)), a.shape) if a.ndim else ()
    return (f"{int(bad.sum())} of its {a.size} values are non-finite (the first, at index {list(map(int, first))}, "
            f"is {a[first] if a.ndim else a.item()})")


def weight_problems(g: Graph, ops: dict) -> list[Problem]:
    """Float constants that would bake as NaN/inf (a damaged or badly exported weight), and BatchNormalization
    variances with var + epsilon <= 0 (a NaN scale), each naming the initializer and the node reading it. -inf is
    accepted in an Add's or a Where's operand: the attention mask's "masked" value."""
    problems = []
    for node in g.nodes:
        entry = ops.get(node.op_type)
        for i, name in enumerate(node.inputs):
            a = g.initializers.get(name) if name else None
            if a is None or a.dtype.kind != "f" or (entry is not None and i in entry.index_inputs):
                continue
            what = _bad_values(a, allow_neg_inf=node.op_type in ("Add", "Where"))
            if what:
                problems.append(Problem(node.name, node.op_type, f"constant '{name}' (input {i}): {what}; kiln "
                                        f"bakes only finite weights", "op"))
        if node.op_type == "BatchNormalization" and len(node.inputs) > 4 and node.inputs[4] in g.initializers:
            var = g.initializers[node.inputs[4]].astype(np.float64)
            eps = float(node.attrs.get("epsilon", 1e-5))
            low = var + eps <= 0
            if low.any():
                c = int(np.argmax(low))
                problems.append(Problem(node.name, node.op_type, f"variance '{node.inputs[4]}' + epsilon {eps:g} is "
                                        f"<= 0 for {int(low.sum())} channel(s) (channel {c}: variance "
                                        f"{var.reshape(-1)[c]}); a variance must be >= 0", "op"))
    return problems
