"""ONNX frontend, graph passes run before the per-op check: constant folding (with kiln's shape rules
completing the shapes onnx inference left open), LSTM and GRU unrolled (onnx_rnn), Identity and Dropout removal,
BatchNormalization folded into the Conv before it. Each appends its decisions to the log."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from .. import KilnError
from ..ir.graph import Graph, Node, Value
from .onnx_argmax import expand_args
from .onnx_base import ShapeUnknown, Unsupported, const_input, copy_graph, has_input, is_static, output_used
from .onnx_depth_space import expand_depth_space
from .onnx_norm import expand_norms
from .onnx_ops import OPS, shape_slice
from .onnx_patchify import expand_patchify
from .onnx_rnn import Chooser, expand_recurrent_nodes
from .onnx_rules import check_batchnorm


def _fresh_name(g: Graph, base: str) -> str:
    name, k = base, 1
    while name in g.values or name in g.initializers:
        name, k = f"{base}_{k}", k + 1
    return name


def _error_name(e: Exception) -> str:
    """The class name the build-time evaluation error shows: the two rule exceptions keep the spelling they had
    before the frontend was split into modules (_ShapeUnknown, _Unsupported), so the message is unchanged."""
    name = type(e).__name__
    return f"_{name}" if isinstance(e, (ShapeUnknown, Unsupported)) else name


def _try_fold(node: Node, g: Graph) -> list[np.ndarray] | None:
    """The node's outputs evaluated at build time, or None when it cannot be."""
    entry = OPS.get(node.op_type)
    if entry is None:
        return None
    if node.op_type == "Shape":  # needs only the input's shape, known for run-time values too
        v = g.values.get(node.inputs[0])
        return [shape_slice(node, v.shape)] if v is not None and is_static(v.shape) else None
    if entry.fold is None or not all(i == "" or i in g.initializers for i in node.inputs):
        return None
    try:
        return [np.asarray(a) for a in entry.fold(node, [g.initializers[i] if i else None for i in node.inputs])]
    except Exception as e:  # every input is constant, so a failure means the model itself is inconsistent
        raise KilnError("frontend", f"node '{node.name}' ({node.op_type})",
                        f"cannot evaluate it at build time: {_error_name(e)}: {e}") from None


def _shapes_by_placeholders(node: Node, g: Graph, entry) -> list[tuple[tuple[int, ...], str]] | None:
    """Output (shape, dtype)s of an op without a kiln shape rule (shape arithmetic on a run-time value, e.g. an
    Unsqueeze of an activation), from its evaluator run on zero placeholders of the run-time inputs: valid when
    every input whose values decide the output shape (entry.shape_inputs) is constant. None when it cannot be."""
    if entry.fold is None or any(has_input(node, i) and node.inputs[i] not in g.initializers
                                 for i in entry.shape_inputs):
        return None
    args: list[np.ndarray | None] = []
    for name in node.inputs:
        if not name:
            args.append(None)
        elif name in g.initializers:
            args.append(g.initializers[name])
        else:
            v = g.values.get(name)
            if v is None or not is_static(v.shape) or v.dtype == "undefined":
                return None
            args.append(np.broadcast_to(np.zeros((), v.dtype), v.shape))  # no memory for the values
    try:
        with np.errstate(all="ignore"):  # placeholder zeros divide by zero; only the shapes are read
            arrays = entry.fold(node, args)
    except Exception:  # the op's own check reports what is wrong with it
        return None
    return [(tuple(int(d) for d in np.shape(a)), np.asarray(a).dtype.name) for a in arrays]


def _complete_shapes(node: Node, g: Graph) -> bool:
    """Fill output shapes onnx shape inference left unknown, with kiln's rule for the op (if it is supported), or
    for shape arithmetic on run-time values by evaluating it on placeholders. True when a shape was filled."""
    outs = [o for o in node.outputs if o]
    if all(is_static(g.values[o].shape) for o in outs):
        return False
    entry = OPS.get(node.op_type)
    if entry is None:
        return False
    if entry.infer is None:
        typed = _shapes_by_placeholders(node, g, entry)
    elif entry.check(node, g):
        return False
    else:
        try:
            inputs_dtype = g.values[node.inputs[0]].dtype
            typed = [(tuple(int(d) for d in s), inputs_dtype) for s in entry.infer(node, g, entry.normalise(node, g))]
        except (ShapeUnknown, Unsupported):  # reported later, by the check or the static-shape check
            return False
    if typed is None:
        return False
    for name, (shape, dtype) in zip(node.outputs, typed):
        if name:
            old = g.values[name]
            g.values[name] = Value(name, shape, old.dtype if old.dtype != "undefined" else dtype)
    return all(is_static(g.values[o].shape) for o in outs)  # a negative dim stays unknown: no endless rounds


def _fold_round(g: Graph, graph_outputs: set[str], folded: Counter[str]) -> bool:
    """One pass over the nodes in order: fold what is constant, complete the shapes of the rest. True when it
    changed anything (a node folded or a shape became known), so another round may fold more."""
    nodes, g.nodes = g.nodes, []
    changed = False
    for node in nodes:
        arrays = None if graph_outputs & set(node.outputs) else _try_fold(node, g)
        if arrays is None:
            g.nodes.append(node)
            changed |= _complete_shapes(node, g)
            continue
        for name, arr in zip(node.outputs, arrays):
            if name:
                g.initializers[name] = arr
                g.values[name] = Value(name, tuple(int(d) for d in arr.shape), arr.dtype.name)
        folded[node.op_type] += 1
        changed = True
    return changed


def fold_constants(graph: Graph, log: list[str]) -> Graph:
    """Evaluate every node whose inputs are all constant (and Shape of any static value) into initializers,
    repeated until a round changes nothing (a fixed point).

    Each round walks the graph in order and completes missing shapes on the way, because a
    Shape node needs the static shape of its input, which may come from a Reshape
    whose target shape was folded just before. A later round picks up what an earlier one
    made constant or shaped only after its consumer had been visited.
    """
    g = copy_graph(graph)
    graph_outputs = {v.name for v in graph.outputs}
    folded: Counter[str] = Counter()
    rounds = 0
    while _fold_round(g, graph_outputs, folded):
        rounds += 1
        if rounds > len(graph.nodes) + len(graph.values):  # each productive round folds or shapes something
            raise AssertionError("fold_constants did not reach a fixed point")
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
    g = copy_graph(graph)
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
    g = copy_graph(graph)
    for node in [n for n in g.nodes if n.op_type == "Dropout"]:
        training = const_input(g, node, 2)
        if output_used(g, node, 1):
            log.append(f"remove_dropout: kept '{node.name}': its mask output is used")
        elif has_input(node, 2) and (training is None or bool(training.reshape(-1)[0])):
            log.append(f"remove_dropout: kept '{node.name}': training_mode is not constant false")
        elif _bypass(g, node):
            log.append(f"remove_dropout: removed '{node.name}'")
    return g


def _bn_fold_blocker(g: Graph, bn: Node, conv: Node | None) -> str | None:
    if conv is None or conv.op_type not in ("Conv", "ConvTranspose"):
        return "its input does not come from a Conv or ConvTranspose"
    if len(g.consumers(conv.outputs[0])) != 1 or any(v.name == conv.outputs[0] for v in g.outputs):
        return f"the output of '{conv.name}' is used elsewhere too"
    if (check_batchnorm(bn, g) or const_input(g, conv, 1) is None
            or (has_input(conv, 2) and const_input(g, conv, 2) is None)):
        return "its parameters or the Conv's weights are not constants"
    if np.any(g.initializers[bn.inputs[4]] + float(bn.attrs.get("epsilon", 1e-5)) <= 0):
        return "a variance + epsilon is <= 0 (refused by the weight check, naming it)"
    return None


def _scaled_weight(conv: Node, w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The weight times `scale` per output channel: OIHW's axis 0 for a Conv; for a ConvTranspose (C_in,
    C_out/group, kh, kw), output channel g * C_out/group + o is axis 1's o within input group g."""
    if conv.op_type == "Conv":
        return w * scale.reshape(-1, *[1] * (w.ndim - 1))
    group = int(conv.attrs.get("group", 1))
    cin, cog = w.shape[:2]
    per_group = w.reshape(group, cin // group, cog, *w.shape[2:])
    return (per_group * scale.reshape(group, 1, cog, *[1] * (w.ndim - 2))).reshape(w.shape)


def fold_batchnorm(graph: Graph, log: list[str]) -> Graph:
    """Fold an inference BatchNormalization into the Conv (or ConvTranspose) feeding only it:
    w' = w * s per output channel, b' = (b - mean) * s + beta, with s = gamma / sqrt(var + eps)."""
    g = copy_graph(graph)
    folded = 0
    for bn in [n for n in g.nodes if n.op_type == "BatchNormalization"]:
        conv = g.producer(bn.inputs[0])
        blocker = _bn_fold_blocker(g, bn, conv)
        if blocker:
            log.append(f"fold_batchnorm: kept '{bn.name}' as BatchNormalization: {blocker}")
            continue
        assert conv is not None  # _bn_fold_blocker names a missing producer
        gamma, beta, mean, var = (g.initializers[bn.inputs[i]].astype(np.float64) for i in range(1, 5))
        scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        w = g.initializers[conv.inputs[1]].astype(np.float64)
        b = const_input(g, conv, 2)
        b = np.zeros(len(scale)) if b is None else b.astype(np.float64)
        w_name = _fresh_name(g, f"{conv.inputs[1]}.bn_folded")
        g.initializers[w_name] = _scaled_weight(conv, w, scale).astype(np.float32)
        g.values[w_name] = Value(w_name, tuple(w.shape), "float32")
        b_name = _fresh_name(g, f"{conv.name}.bias.bn_folded")
        g.initializers[b_name] = ((b - mean) * scale + beta).astype(np.float32)
        g.values[b_name] = Value(b_name, (len(scale),), "float32")

        g.values.pop(conv.outputs[0], None)
        conv.inputs = [conv.inputs[0], w_name, b_name]
        conv.outputs = [bn.outputs[0]]
        conv.source = (conv.source or [conv.name]) + [bn.name]
        g.nodes.remove(bn)
        folded += 1
        log.append(f"fold_batchnorm: '{bn.name}' folded into '{conv.name}'")
    return g


def expand_recurrent(graph: Graph, log: list[str], choose: Chooser | None = None) -> Graph:
    """LSTM and GRU looped (one kernel) or unrolled over their baked sequence length into ops kiln lowers
    (onnx_rnn; `choose` as there), then folded again: a constant initial state's hidden projection is evaluated at
    build time."""
    if not any(n.op_type in ("LSTM", "GRU") for n in graph.nodes):
        return graph
    g = copy_graph(graph)
    return fold_constants(g, log) if expand_recurrent_nodes(g, log, choose) else g


PASSES: tuple[Callable[[Graph, list[str]], Graph], ...] = (
    fold_constants, expand_recurrent, expand_depth_space, expand_norms, expand_args, expand_patchify,
    remove_identities, remove_dropout, fold_batchnorm)

