"""The lowering rule of a node the frontend sent to the AI CPU (graph.aicpu, codegen/frontend/onnx_aicpu.py): a
function of the lowerer (codegen/passes/lowering.py calls it; it is at its size limit)."""
from __future__ import annotations

from math import prod

from ..frontend import onnx_aicpu
from ..ir.graph import Node
from .lowered import HostOp, LowererState, Step


def aicpu_step(lw: LowererState, node: Node) -> None:
    """A host step between the AI Core launches before and after it. It reads its run-time inputs as ND fp16 (a
    relayout step first where one is held NC1HWC0) and writes its first output as ND fp16; the host evaluates the
    node alone (HostOp.model, kiln/aicpu.py)."""
    runtime = [v for v in dict.fromkeys(node.inputs) if v and v not in lw.g.initializers]
    ins = [lw.act(node, v, "ND") for v in runtime]
    out = lw.out(node, "ND")
    elements = sum(prod(lw.shape(v)) for v in runtime) + prod(lw.shape(out))
    host = HostOp(onnx_aicpu.one_node_model(node, lw.g), lw.g.aicpu[node.name], elements)
    lw.steps.append(Step("aicpu", node.name, [node.name], [node.op_type], ins, out, glue="aicpu", host=host))
