"""ONNX frontend: an .onnx file -> kiln IR (see ir/graph.py).

load_onnx() runs these steps in order (the module that holds each in brackets):

    read        parse the file; anything unreadable is a KilnError naming the file      (onnx_read)
    opset       the default-domain opset must be 7..21; 7..12 converted to 13 (onnx's version converter) (onnx_read)
    bind        pinned inputs take the model spec's shapes; else a symbolic dim 0 becomes `batch`, and any
                other dynamic dim is an error                                            (onnx_read)
    infer       onnx shape inference on the bound model                                  (onnx_read)
    to IR       nodes, values (shapes possibly still partial), initializers as NumPy arrays; every value
                written once, every graph output produced                                (onnx_read)
    passes      fold_constants (to a fixed point), remove_identities, remove_dropout, fold_batchnorm
                (PASSES, onnx_passes)
    normalise   per-op check, explicit attributes and kiln's shape rule re-checked, driven by the OPS table (here)
    finish      drop unused initializers, float weights to float32; every shape static and non-empty,
                element types float (int64/bool only as index operands)                  (here, onnx_checks)

Op support is one table, onnx_ops.OPS: op type -> OpEntry (check, normalise, shape rule
from onnx_rules, build-time evaluator). Adding an op is one entry there (and a test).
onnx_base holds what they share: Problem, the rule exceptions, small graph helpers.

Problems with the model (unsupported ops or attribute values, dynamic shapes)
are collected, not raised one at a time: load_onnx() raises one KilnError
listing all of them, check_onnx() returns them, analyze.py counts them.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from .. import KilnError
from ..ir.graph import Graph, Node, Value
from . import onnx_aicpu
from .onnx_argmax import OPS_HERE as ARG_OPS
from .onnx_argmax import expand_args
from .onnx_base import Problem, ShapeUnknown, Unsupported, copy_graph, has_input, is_static
from .onnx_checks import dtype_problems, shape_problems, weight_problems
from .onnx_depth_space import OPS_HERE as DEPTH_SPACE_OPS
from .onnx_depth_space import expand_depth_space
from .onnx_norm import OPS_HERE as NORM_OPS
from .onnx_norm import expand_norms
from .onnx_ops import OPS, OpEntry, supported_ops_text
from .onnx_passes import PASSES, expand_recurrent, fold_constants
from .onnx_patchify import expand_patchify, is_patch_embedding
from .onnx_read import (
    bind_inputs,
    check_nodes_against_spec,
    default_opset,
    infer_onnx_shapes,
    node_names,
    opset_problem,
    read_model,
    to_graph,
    upgrade_opset,
)
from .onnx_rnn import GATES, LOOP_OPS, Chooser, expand_recurrent_nodes, reference_nodes

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
    g = copy_graph(graph)
    moved: Counter[str] = Counter()
    for node in g.nodes:
        if node.op_type in LOOP_OPS:  # written by expand_recurrent, which checked the LSTM it replaces
            continue
        entry = OPS.get(node.op_type)
        if onnx_aicpu.is_candidate(node, None if entry is None else entry.build_time_only, g):
            reason = onnx_aicpu.problem(node, g)  # no AI Core kernel: an AI CPU step, or refused saying why not
            if reason:
                problems.append(Problem(node.name, node.op_type, reason, "op"))
            else:
                g.aicpu[node.name] = onnx_aicpu.NO_KERNEL
            continue
        reason = _unsupported_reason(node, entry, g)
        if reason:
            problems.append(Problem(node.name, node.op_type, reason, "op"))
            continue
        assert entry is not None  # _unsupported_reason names an unknown op
        try:
            attrs = entry.normalise(node, g)
        except Unsupported as e:
            problems.append(Problem(node.name, node.op_type, str(e), "op"))
            continue
        except ShapeUnknown as e:
            problems.append(Problem(node.name, node.op_type, f"the shape of '{e.value}' is not static", "shape"))
            continue
        reason = _shape_rule_problem(node, g, entry, attrs)
        if reason:
            problems.append(Problem(node.name, node.op_type, reason, "op"))
            continue
        node.attrs = attrs
        if any(has_input(node, i) for i in entry.attr_inputs):
            moved[node.op_type] += 1
        node.inputs = _without_attr_inputs(node, g, entry.attr_inputs)
    if moved:
        log.append("normalise: constant inputs moved to attributes on " +
                   ", ".join(f"{op} x{k}" for op, k in moved.most_common()))
    return g


def _without_attr_inputs(node: Node, g: Graph, attr_inputs: tuple[int, ...]) -> list[str]:
    """The node's inputs less those now attributes. An attr input computed at run time (Clip's bounds, which its
    check lets through) stays an input, at its position: the constant ones before it are left as ""."""
    runtime = [i for i in attr_inputs if has_input(node, i) and node.inputs[i] not in g.initializers]
    if not runtime:
        return [x for i, x in enumerate(node.inputs) if i not in attr_inputs]
    return [x if i not in attr_inputs or i in runtime else "" for i, x in enumerate(node.inputs)][:max(runtime) + 1]


def _shape_rule_problem(node: Node, g: Graph, entry: OpEntry, attrs: dict) -> str | None:
    """kiln's own shape rule run on a node onnx inference already shaped: what it rejects (a Conv whose input
    channels do not match its weight) or computes differently is a problem, so an inconsistent model is never
    lowered on the shapes the file declares."""
    if entry.infer is None or entry.build_time_only:
        return None
    try:
        shapes = entry.infer(node, g, attrs)
    except Unsupported as e:
        return str(e)
    except ShapeUnknown:  # an input without a static shape: reported by _finish, at its root
        return None
    for name, shape in zip(node.outputs, shapes):
        declared: tuple[int, ...] | None = g.values[name].shape if name and name in g.values else None
        if name and declared is not None and is_static(declared) and tuple(declared) != tuple(shape):
            return (f"output '{name}' is declared (or inferred by onnx) as {list(declared)}, but the op computes "
                    f"{list(shape)} from its inputs")
    return None


def _as_float32(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        return arr.astype(np.float32, copy=False)
    return arr


def _finish(graph: Graph, problems: list[Problem]) -> Graph:
    """Drop what no node uses, make float weights float32, and report every value without a static shape."""
    g = copy_graph(graph)
    used = {i for n in g.nodes for i in n.inputs if i} | {v.name for v in g.outputs}
    g.initializers = {k: _as_float32(a) for k, a in g.initializers.items() if k in used}
    for k, a in g.initializers.items():
        g.values[k] = Value(k, tuple(int(d) for d in a.shape), a.dtype.name)
    keep = used | {o for n in g.nodes for o in n.outputs if o} | {v.name for v in g.inputs}
    g.values = {k: v for k, v in g.values.items() if k in keep}
    g.inputs = [g.values[v.name] for v in g.inputs]
    g.outputs = [g.values[v.name] for v in g.outputs]

    problems += shape_problems(g, OPS)
    problems += dtype_problems(g, OPS)
    problems += weight_problems(g, OPS)
    return g


# ---------------------------------------------------------------- entry points

def build_graph(model, path: str | Path, batch: int = 1, log: list[str] | None = None,
                pinned: dict[str, tuple[int, ...]] | None = None, recurrence: Chooser | None = None
                ) -> tuple[Graph, list[Problem]]:
    """Every frontend step on a parsed model, collecting problems instead of raising them.
    Binds the model's input shapes in place (`pinned`: input name -> shape, from the model spec). `recurrence`:
    looped or unrolled per LSTM / GRU node (onnx_rnn.expand_recurrent_nodes; the build's is the cost model's).
    Malformed graphs (dangling inputs, cycles, values written twice, outputs nothing produces,
    constants that cannot be evaluated, an opset conversion that fails) still raise KilnError."""
    if type(batch) is not int or batch < 1:  # a bool is no batch
        raise KilnError("frontend", "batch", f"must be a positive integer, got {batch!r}")
    log = [] if log is None else log
    problems: list[Problem] = []
    source_opset = default_opset(model)
    if opset_problem(source_opset) is None:
        check_nodes_against_spec(model, str(path))
    model = upgrade_opset(model, str(path), log)
    opset = default_opset(model)
    reason = opset_problem(opset)
    if reason:
        problems.append(Problem("", "", reason, "model"))
    bind_inputs(model, batch, problems, log, pinned)
    model = infer_onnx_shapes(model, log)
    graph = to_graph(model, str(path), opset or 0)
    if source_opset != opset:
        graph.source_opset = source_opset or 0
    for run_pass in PASSES:
        graph = expand_recurrent(graph, log, recurrence) if run_pass is expand_recurrent else run_pass(graph, log)
    graph = _check_and_normalise(graph, problems, log)
    graph = _finish(graph, problems)
    if any(p.kind == "model" for p in problems):
        # an input left unbound (or an opset kiln does not read) makes what follows unfoldable and unshaped as a
        # consequence: the input is what to report
        problems = [p for p in problems if p.kind == "model"]
    elif any(p.kind == "op" for p in problems):
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


def load_onnx(path: str | Path, batch: int = 1, log: list[str] | None = None,
              pinned: dict[str, tuple[int, ...]] | None = None, recurrence: Chooser | None = None) -> Graph:
    """The ONNX file as a kiln Graph with static shapes, supported ops only and explicit attributes.
    `pinned` gives input shapes (the model spec's @x=1x3x224x224); decisions taken on the way are
    appended to `log` when given; `recurrence` as build_graph."""
    return load_model(read_model(path), path, batch, log, pinned, recurrence)


def load_model(model, path: str | Path, batch: int = 1, log: list[str] | None = None,
               pinned: dict[str, tuple[int, ...]] | None = None, recurrence: Chooser | None = None) -> Graph:
    """load_onnx on a parsed model (`path` names it in messages): a Graph, or a KilnError naming what is wrong."""
    reason = opset_problem(default_opset(model))
    if reason:  # nothing after this is meaningful for an opset kiln does not know
        raise KilnError("frontend", str(path), reason)
    graph, problems = build_graph(model, path, batch, log, pinned, recurrence)
    _raise_for(problems, str(path), graph.opset)
    return graph


def check_onnx(path: str | Path, batch: int = 1, pinned: dict[str, tuple[int, ...]] | None = None
               ) -> list[dict[str, str]]:
    """Every problem load_onnx would report, as [{"node", "op_type", "reason"}]; empty when the
    model compiles. Raises only for a file that is not a readable ONNX model or a malformed graph."""
    _, problems = build_graph(read_model(path), path, batch, pinned=pinned)
    return [p.as_dict() for p in problems]


def unrolled_reference(model, pinned: dict[str, tuple[int, ...]] | None = None, recurrence: Chooser | None = None):
    """The parsed model (a copy) with every node the frontend rewrites into other ops (LSTM / GRU unrolled,
    DepthToSpace / SpaceToDepth as Reshape -> Transpose -> Reshape, the normalisations of onnx_norm; the opset
    import raised to 17 for their LayerNormalization) replaced by the ONNX nodes it becomes, named as
    the build names them (the same frontend steps on the same shapes: `pinned`, input name -> shape), so ONNX
    Runtime computes every value their kernels write (the isolated per-kernel check). The model itself when it
    has none. A Softmax or LogSoftmax of opset < 13 (its coerce-to-2-D form) is read as the version converter writes
    it (Flatten -> op -> Reshape), whose middle value the kernel writes. `recurrence`: the build's (build_graph)."""
    rewritten_ops = (*DEPTH_SPACE_OPS, *NORM_OPS, *ARG_OPS)
    if not any(n.op_type in GATES or n.op_type in rewritten_ops or is_patch_embedding(n) for n in model.graph.node):
        coerced = (default_opset(model) or 13) < 13 and any(n.op_type in ("Softmax", "LogSoftmax")
                                                            for n in model.graph.node)
        return upgrade_opset(type(model).FromString(model.SerializeToString()), "", []) if coerced else model
    from onnx import helper, numpy_helper
    m = upgrade_opset(type(model).FromString(model.SerializeToString()), "", [])
    bind_inputs(m, 1, [], [], pinned)
    g = fold_constants(to_graph(infer_onnx_shapes(m, []), "", default_opset(m) or 0), [])
    rewritten = {name: [m for n in new for m in (reference_nodes(g, n) if n.op_type in LOOP_OPS else [n])]
                 for name, new in expand_recurrent_nodes(g, [], recurrence).items()}
    spaced = expand_patchify(expand_args(expand_norms(expand_depth_space(g, []), []), []), [])
    for orig in (n for n in g.nodes if n.name in spaced.rewrites):  # not those left for their checks to refuse
        rewritten[orig.name] = [n for n in spaced.nodes if n.source == [orig.name]]
    inits = {**g.initializers, **spaced.initializers}
    arg_nodes = {n.name for n in g.nodes if n.op_type in ARG_OPS}
    nodes, consts = [], set()
    for proto, name in zip(m.graph.node, node_names(m)):
        if name not in rewritten:
            nodes.append(proto)
            continue
        for n in rewritten[name]:
            consts |= {i for i in n.inputs if i in inits}
            if n.name == name and name in arg_nodes:  # the index as kiln holds it (float), then the graph's int64
                nodes += [helper.make_node(n.op_type, n.inputs, [f"{n.outputs[0]}/float"], name=n.name, **n.attrs),
                          helper.make_node("Cast", [f"{n.outputs[0]}/float"], n.outputs, name=f"{name}/int64", to=7)]
                continue
            nodes.append(helper.make_node(n.op_type, n.inputs, n.outputs, name=n.name, **n.attrs))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    have = {t.name for t in m.graph.initializer}
    m.graph.initializer.extend(numpy_helper.from_array(np.asarray(inits[c]), c) for c in sorted(consts - have))
    if any(n.op_type == "LayerNormalization" for n in nodes) and (default_opset(m) or 0) < 17:
        for imp in m.opset_import:  # the ops kiln reads (13..16) mean the same at 17
            if imp.domain in ("", "ai.onnx"):
                imp.version = 17
    return m
