"""ONNX frontend, reading: parse and check the file, the opset, bind the batch dimension, run onnx shape
inference, and turn the protobuf graph into kiln IR (nodes in topological order, values, initializers)."""
from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

import numpy as np

from .. import KilnError
from ..ir.graph import Graph, Node, Value
from .onnx_base import Problem
from .onnx_resize import restore_resize10

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # only reading ONNX files needs it; the kernel-list build does not
    onnx = None  # type: ignore[assignment]  # optional: the module is None where onnx is not installed

ACCEPTED_OPSETS = range(7, 22)
NATIVE_OPSETS = range(13, 22)  # what the op table follows; older models are converted to the first of these
_DEFAULT_DOMAINS = ("", "ai.onnx")


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


def opset_problem(opset: int | None) -> str | None:
    lo, hi = ACCEPTED_OPSETS[0], ACCEPTED_OPSETS[-1]
    if opset is None:
        return f"the model imports no default-domain (ai.onnx) opset; kiln accepts opsets {lo}..{hi}"
    if opset not in ACCEPTED_OPSETS:
        return (f"opset {opset} is not supported: kiln accepts ONNX opsets {lo}..{hi} ({lo}..{NATIVE_OPSETS[0] - 1} "
                f"converted to {NATIVE_OPSETS[0]} with onnx's version converter; re-export with one of those)")
    return None


def _one_node_model(model, node, opset: int):
    """A model of `node` alone (its inputs as graph inputs, typed as in the model where known), to convert."""
    g = model.graph
    known = {vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}
    for t in g.initializer:
        known.setdefault(t.name, onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    def typed(name):
        return known.get(name) or onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
    graph = onnx.helper.make_graph([node], "one_node", [typed(i) for i in node.input if i],
                                   [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])


def _node_failing_conversion(model, opset: int, names: list[str]) -> tuple[str, str, str] | None:
    """(kiln node name, op type, error) of the first node the converter fails on when converted alone."""
    from onnx import version_converter
    tried = set()
    for node, name in zip(model.graph.node, names):
        key = (node.op_type, node.domain, tuple(a.SerializeToString() for a in node.attribute))
        if key in tried:
            continue
        tried.add(key)
        try:
            version_converter.convert_version(_one_node_model(model, node, opset), NATIVE_OPSETS[0])
        except Exception as e:
            return name, node.op_type, f"{type(e).__name__}: {e}"
    return None


def upgrade_opset(model, path: str, log: list[str]):
    """A model at opset 7..12 converted to the first native opset with onnx's version converter (the decision
    logged); others unchanged. A conversion failure is a KilnError naming the node it fails on."""
    opset = default_opset(model)
    if opset is None or opset not in ACCEPTED_OPSETS or opset in NATIVE_OPSETS:
        return model
    from onnx import version_converter
    target = NATIVE_OPSETS[0]
    try:
        converted = version_converter.convert_version(model, target)
    except Exception as e:
        culprit = _node_failing_conversion(model, opset, node_names(model))
        if culprit is None:
            raise KilnError("frontend", path, f"onnx's version converter cannot convert opset {opset} to {target}: "
                            f"{type(e).__name__}: {e}") from None
        name, op_type, error = culprit
        raise KilnError("frontend", f"node '{name}' ({op_type}, opset {opset})",
                        f"onnx's version converter cannot convert it to opset {target} ({error}); re-export the "
                        f"model at opset {target}..{NATIVE_OPSETS[-1]}") from None
    if opset < 11:  # Upsample and Resize-10 keep what they computed
        restore_resize10(model, converted)
    log.append(f"opset: converted from opset {opset} to {target} with onnx's version converter")
    return converted


def _bind_pinned(inp, dims: tuple[int, ...], problems: list[Problem], log: list[str]) -> None:
    """Give input `inp` the pinned shape `dims`; a static dim of the file must agree with it."""
    declared = inp.type.tensor_type.shape.dim
    if len(declared) != len(dims):
        problems.append(Problem(inp.name, "", f"input '{inp.name}' has rank {len(declared)} in the model, but "
                                f"the spec pins {len(dims)} dims ({'x'.join(map(str, dims))})", "model"))
        return
    for i, (dim, pinned) in enumerate(zip(declared, dims)):
        if dim.HasField("dim_value") and dim.dim_value != pinned:
            problems.append(Problem(inp.name, "", f"input '{inp.name}' dim {i} is {dim.dim_value} in the model, "
                                    f"but the spec pins it to {pinned}", "model"))
            return
    for dim, pinned in zip(declared, dims):
        dim.Clear()
        dim.dim_value = pinned
    log.append(f"bind: input '{inp.name}' pinned to {'x'.join(map(str, dims))}")


def _bind_dim(inp, i: int, dim, batch: int, problems: list[Problem], log: list[str]) -> None:
    if dim.HasField("dim_value") and dim.dim_value <= 0:
        what = "0 (an empty tensor)" if dim.dim_value == 0 else f"negative ({dim.dim_value})"
        problems.append(Problem(inp.name, "", f"input '{inp.name}' dim {i} is {what}; kiln compiles only tensors "
                                f"whose dims are all >= 1", "model"))
    elif dim.HasField("dim_value"):
        if i == 0 and dim.dim_value != batch:
            log.append(f"bind: input '{inp.name}' has a fixed dim 0 of {dim.dim_value}; batch={batch} "
                       f"does not apply to it")
    elif i == 0:
        label = dim.dim_param or "unknown"
        dim.Clear()
        dim.dim_value = batch
        log.append(f"bind: input '{inp.name}' dim 0 ({label!r}) bound to batch={batch}")
    else:
        label = dim.dim_param or "unknown"
        problems.append(Problem(inp.name, "", f"input '{inp.name}' dim {i} ({label!r}) is dynamic; kiln "
                                f"binds only the batch dimension (dim 0) unless the model spec pins the input's "
                                f"shape (file.onnx@{inp.name}=1x3x224x224), every other dim must be static",
                                "model"))


def bind_inputs(model, batch: int, problems: list[Problem], log: list[str],
                pinned: dict[str, tuple[int, ...]] | None = None) -> None:
    """Give every graph input a static shape: a pinned input takes its pinned shape; otherwise dim 0 when
    symbolic/unknown is the batch, and nothing else may be dynamic."""
    initializers = {t.name for t in model.graph.initializer}
    pinned = dict(pinned or {})
    inputs = [inp for inp in model.graph.input if inp.name not in initializers]  # old exporters list weights too
    unknown = sorted(set(pinned) - {inp.name for inp in inputs})
    if unknown:
        problems.append(Problem(unknown[0], "", f"the spec pins input(s) {', '.join(map(repr, unknown))}, which "
                                f"the model does not have; its inputs are {', '.join(repr(i.name) for i in inputs)}",
                                "model"))
    for inp in inputs:
        if not inp.type.HasField("tensor_type") or not inp.type.tensor_type.HasField("shape"):
            if inp.name in pinned and inp.type.HasField("tensor_type"):  # no declared rank: the pinned one
                for d in pinned[inp.name]:
                    inp.type.tensor_type.shape.dim.add().dim_value = d
                log.append(f"bind: input '{inp.name}' pinned to {'x'.join(map(str, pinned[inp.name]))}")
                continue
            problems.append(Problem(inp.name, "", f"input '{inp.name}' has no tensor shape (rank unknown)", "model"))
            continue
        if inp.name in pinned:
            _bind_pinned(inp, pinned[inp.name], problems, log)
            continue
        for i, dim in enumerate(inp.type.tensor_type.shape.dim):
            _bind_dim(inp, i, dim, batch, problems, log)


def infer_onnx_shapes(model, log: list[str]):
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
    # a declared shape may be absent or symbolic: the frontend binds or reports it before any stage reads it
    return Value(vi.name, shape, _dtype_name(tt.elem_type))  # type: ignore[arg-type]


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


def _check_single_assignment(nodes: list[Node], inputs: set[str], initializers: set[str], outputs: list[str]) -> None:
    """Each value written once (ONNX graphs are SSA) and every graph output produced by something."""
    producer: dict[str, Node] = {}
    for n in nodes:
        for o in n.outputs:
            if not o:
                continue
            if o in producer:
                first = producer[o]
                raise KilnError("frontend", f"value '{o}'", f"written by two nodes, '{first.name}' ({first.op_type}) "
                                f"and '{n.name}' ({n.op_type}); an ONNX graph assigns every value exactly once")
            if o in inputs or o in initializers:
                what = "a graph input" if o in inputs else "an initializer"
                raise KilnError("frontend", f"node '{n.name}' ({n.op_type})", f"writes '{o}', which is {what}; an "
                                f"ONNX graph assigns every value exactly once")
            producer[o] = n
    for o in outputs:
        if o in initializers:  # the lowering has no step that writes a constant into an output buffer
            raise KilnError("frontend", f"graph output '{o}'", "it is an initializer (a constant); kiln's graph "
                            "outputs must be computed by a node or be a graph input")
        if o not in producer and o not in inputs:
            raise KilnError("frontend", f"graph output '{o}'", "no node produces it and it is neither a graph input "
                            "nor an initializer; every graph output must be the output of some node")


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


def _initializer_array(t, path: str) -> np.ndarray:
    """An initializer's values; one whose bytes do not fill its dims (or whose type has no NumPy reading) is
    refused naming it."""
    try:
        return numpy_helper.to_array(t)
    except Exception as e:  # ValueError (size vs dims), TypeError/KeyError (a data type NumPy cannot hold)
        types = onnx.TensorProto.DataType
        dtype = types.Name(t.data_type) if t.data_type in types.values() else t.data_type
        raise KilnError("frontend", f"initializer '{t.name}' of {path}",
                        f"its data does not match its dims {list(t.dims)} and type {dtype} "
                        f"({type(e).__name__}: {e})") from None


def to_graph(model, path: str, opset: int) -> Graph:
    g = model.graph
    initializers = {t.name: _initializer_array(t, path) for t in g.initializer}
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
                values[v] = Value(v, None, "undefined")  # type: ignore[arg-type]  # shaped by inference, or reported

    inputs = [values[i.name] for i in g.input if i.name not in initializers]
    ready = {v.name for v in inputs} | set(initializers)
    _check_single_assignment(nodes, {v.name for v in inputs}, set(initializers), [o.name for o in g.output])
    return Graph(name=g.name or Path(path).stem, inputs=inputs, outputs=[values[o.name] for o in g.output],
                 nodes=_sort_topologically(nodes, ready), values=values, initializers=initializers,
                 opset=opset, source_path=str(path))



# Ops whose schema onnx deprecated at the opset a model has, which exporters still write and ONNX Runtime runs:
# their op table entry checks them (GroupNormalization-18, per-group scale and bias: codegen/frontend/onnx_norm.py)
DEPRECATED_READ = ("GroupNormalization",)


def check_nodes_against_spec(model, path: str) -> None:
    """Each node of an op onnx knows checked against its operator schema at the model's opset (attribute names
    and types, required inputs present, input and output counts): the one place a malformed node is caught,
    before any rule reads its attributes. Ops onnx does not know are left to the op table's refusal."""
    from onnx import checker, defs
    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version or 8
    ctx.opset_imports = {("" if imp.domain == "ai.onnx" else imp.domain): int(imp.version)
                         for imp in model.opset_import}
    lex = checker.C.LexicalScopeContext()
    for i, node in enumerate(model.graph.node):
        if node.domain not in _DEFAULT_DOMAINS or not defs.has(node.op_type):
            continue
        try:
            checker.check_node(node, ctx, lex)
            why = _empty_required_input(node, ctx.opset_imports.get("", 1))
        except Exception as e:  # onnx's ValidationError: its message says what the schema wants
            why = str(e).split("\n\n==>")[0].strip()
            if node.op_type in DEPRECATED_READ and "is deprecated" in why:
                why = ""
        if why:
            name = node.name or f"#{i}"
            raise KilnError("frontend", f"node '{name}' ({node.op_type}, opset {ctx.opset_imports.get('', '?')})",
                            f"in {path}: not a valid {node.op_type} per the ONNX spec: {why}")


def _empty_required_input(node, opset: int) -> str:
    """The checker lets an empty name stand for any input; only an optional one may be left out."""
    from onnx import defs
    formal = defs.get_schema(node.op_type, opset).inputs
    for i, name in enumerate(node.input):
        if name or not formal:
            continue
        param = formal[min(i, len(formal) - 1)]
        if param.option != defs.OpSchema.FormalParameterOption.Optional:
            return f"input {i} ('{param.name}') is empty, but it is required (only optional inputs may be left out)"
    return ""
