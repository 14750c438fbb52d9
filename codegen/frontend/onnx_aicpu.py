"""The AI CPU fallback, frontend half (issue 19): which nodes run on the AI CPU instead of being refused.

CANN runs an operator the AI Core has no kernel for on the chip's AI CPU. kiln does the same: a node of the
default ONNX domain with no entry in the op table (onnx_ops.OPS), or a build-time-only entry whose inputs are
computed at run time (Mod on an activation), becomes an `aicpu` step when

- it is not one of issue 19's operators (ISSUE19_OPS: each of those gets an AI Core kernel, or stays refused),
- the onnx package's reference evaluator implements it at the model's opset (it evaluates the step at run time),
- its first output is the only one used and is float, its run-time inputs are float, its shapes static.

Anything else keeps the frontend's refusal naming the node. The decision is the graph's `aicpu` map (node ->
reason code, the [OPT] log's closed catalogue: codegen/ir/optlog.py); lowering turns each such node into a host
step (codegen/passes/lowering.py) carrying the one-node model built here.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir.graph import Graph, Node
from .onnx_base import is_static
from .onnx_checks import FLOAT_DTYPES

# Issue 19's operator list: every op here must have an AI Core kernel and never runs on the AI CPU (a test holds
# this: tests/codegen/frontend/test_aicpu.py). "kernel": lowered by a kernel family today; "pending: ...": not yet
# (still refused by the frontend). Helpers adding a kernel for one of these turn its entry into "kernel".
ISSUE19_OPS: dict[str, str] = {
    # elementwise (the fused Vector program)
    **dict.fromkeys(("Max", "Min", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "LeakyRelu", "PRelu",
                     "Tanh", "Erf", "Softplus", "Mean", "Clip", "Where"), "kernel"),
    # structure (DepthToSpace / SpaceToDepth: rewritten as Reshape -> Transpose -> Reshape by a frontend pass)
    **dict.fromkeys(("Pad", "Expand", "Tile", "Gather", "DepthToSpace", "SpaceToDepth", "Flatten", "Squeeze",
                     "Unsqueeze", "Reshape"), "kernel"),
    # convolution, pooling, reductions
    **dict.fromkeys(("Conv", "MaxPool", "GlobalMaxPool", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2"), "kernel"),
    "ArgMax": "kernel",  # rewritten into kernel ops by a frontend pass (onnx_argmax); its int64 result an output
    # normalisation (InstanceNormalization, GroupNormalization, LRN: rewritten into kernel ops by a frontend pass)
    **dict.fromkeys(("InstanceNormalization", "GroupNormalization", "LRN", "LayerNormalization", "Softmax",
                     "LogSoftmax"), "kernel"),
    # matrix products
    "MatMul": "kernel", "Gemm": "kernel",
}

# The reason codes of an aicpu decision (each also in the [OPT] log's catalogue, codegen/ir/optlog.py)
NO_KERNEL = "no_kernel"


def has_reference(op_type: str, opset: int) -> bool:
    """The onnx package's reference evaluator implements this default-domain op at `opset`."""
    from onnx.reference.ops import load_op
    try:
        load_op("", op_type, opset)
    except Exception:  # load_op raises several kinds for an op it lacks (NotImplementedError, RuntimeError)
        return False
    return True


def is_candidate(node: Node, build_time_only: bool | None, g: Graph) -> bool:
    """The node has no AI Core kernel and may run on the AI CPU: a default-domain op the op table lacks
    (build_time_only None) or takes only at build time (True) while some input is computed at run time, outside
    ISSUE19_OPS, with a reference implementation. Shape is not: its shape comes from the inputs' shapes."""
    if "." in node.op_type or node.op_type in ISSUE19_OPS or node.op_type == "Shape":
        return False
    if build_time_only is False:
        return False
    if build_time_only and all(not i or i in g.initializers for i in node.inputs):
        return False
    return onnx.defs.has(node.op_type) and has_reference(node.op_type, g.opset or 13)


def problem(node: Node, g: Graph) -> str | None:
    """Why a candidate still cannot run as an AI CPU step (None: it can): what a host step between AI Core
    launches exchanges through the arena is float tensors of static shape, one per step."""
    why = _why_not(node, g)
    return None if why is None else (f"op type {node.op_type} is not supported by an AI Core kernel, and it cannot "
                                     f"run on the AI CPU fallback either: {why}")


def _why_not(node: Node, g: Graph) -> str | None:
    out = node.outputs[0] if node.outputs else ""
    used_later = [o for o in node.outputs[1:] if o and (g.consumers(o) or any(v.name == o for v in g.outputs))]
    if used_later:
        names = ", ".join(repr(o) for o in used_later)
        return f"output(s) {names} are used, and an AI CPU step passes on its first output only"
    value = g.values.get(out)
    if value is None or not is_static(value.shape):
        return f"the shape of its output '{out}' is not static"
    if value.dtype not in FLOAT_DTYPES:
        return (f"its output '{out}' has element type {value.dtype}, and AI CPU steps exchange float values with the "
                f"AI Core kernels")
    for i in node.inputs:
        if i and i not in g.initializers and g.values.get(i) is not None and g.values[i].dtype not in FLOAT_DTYPES:
            return f"its input '{i}' is a run-time {g.values[i].dtype} value, and AI CPU steps read float values"
    return None


def _attribute(value: Any) -> Any:
    """A kiln IR attribute value (onnx_read._attr_value) back in a form onnx.helper.make_node takes."""
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def one_node_model(node: Node, g: Graph) -> bytes:
    """The node alone as a serialised ONNX model: its run-time inputs as float graph inputs (their ONNX shapes),
    its constant inputs as initializers, its first output as the graph output. The AI CPU step's runtime
    (kiln/aicpu.py) evaluates it with onnx.reference.ReferenceEvaluator."""
    attrs = {k: _attribute(v) for k, v in node.attrs.items()}
    proto = helper.make_node(node.op_type, list(node.inputs), list(node.outputs), name=node.name, **attrs)
    runtime = [i for i in dict.fromkeys(node.inputs) if i and i not in g.initializers]
    consts = [numpy_helper.from_array(np.asarray(g.initializers[i]), i)
              for i in dict.fromkeys(node.inputs) if i and i in g.initializers]
    out = node.outputs[0]
    graph = helper.make_graph(
        [proto], f"aicpu_{node.name}",
        [helper.make_tensor_value_info(i, onnx.TensorProto.FLOAT, list(g.values[i].shape)) for i in runtime],
        [helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, list(g.values[out].shape))], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset or 13)])
    return model.SerializeToString()
