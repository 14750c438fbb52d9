"""kiln IR: the graph every stage after the frontend works on.

A Graph is a topologically ordered list of Nodes over named Values with static
shapes. Constant tensors (weights, folded shapes) live in `initializers` as
NumPy arrays. Op types and attribute names follow ONNX; after the frontend's
passes a graph holds only ops some lowering rule supports, every attribute the
lowering needs is explicit (defaults filled in), and constant operands that are
really attributes (Clip min/max, Reshape shape, ...) are attributes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"  # float32 | int64 | ...


@dataclass
class Fused:
    """What the fusion stage folded into a node, for lowering to turn into one kernel (codegen/passes/fusion.py
    writes it, codegen/passes/lowering.py reads it; the ONNX attributes stay in Node.attrs)."""
    activation: str = ""                       # an activation applied on the way out (Relu, Clip, ...)
    clip: tuple[float, float] | None = None    # its (min, max) when the activation is Clip
    residual: str = ""                         # a value added before the activation
    second: Node | None = None                 # a 1x1 conv accumulated into the same L0C
    chain_first: Node | None = None            # the window conv whose output this 1x1 conv reads from L1
    siblings: list[Node] = field(default_factory=list)  # GEMMs of the same input run with this one
    program: str = ""                          # an elementwise program applied last (eltwise_program.encode)
    ops: list[str] = field(default_factory=list)        # the fused nodes' names, in fusion order
    op_types: list[str] = field(default_factory=list)   # their op types ("BN" for a folded BatchNormalization)


@dataclass
class Node:
    name: str                 # unique; the ONNX node name (or a generated one when empty)
    op_type: str              # ONNX op type
    inputs: list[str]         # value names; "" for an omitted optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    source: list[str] = field(default_factory=list)  # ONNX nodes folded into this one (e.g. BatchNormalization)
    fused: Fused = field(default_factory=Fused)      # what fusion folded into it


@dataclass
class Graph:
    name: str
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[Node]
    values: dict[str, Value]                 # every value: inputs, outputs, intermediates, initializers
    initializers: dict[str, np.ndarray]
    opset: int
    source_path: str = ""
    source_opset: int = 0  # the file's opset when the frontend converted it to `opset` (0: not converted)
    aicpu: dict[str, str] = field(default_factory=dict)  # node -> reason code: runs on the AI CPU (no AI Core kernel)
    rewrites: dict[str, str] = field(default_factory=dict)  # node -> what a frontend pass rewrote it into

    def producer(self, value: str) -> Node | None:
        for n in self.nodes:
            if value in n.outputs:
                return n
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]

    def is_constant(self, value: str) -> bool:
        return value in self.initializers


@dataclass(frozen=True)
class OpInstance:
    """One op to bake a kernel for: from the kernel list, or a lowered model step (label model:node)."""
    label: str
    type: str
    attrs: dict[str, Any] = field(hash=False, compare=False)
