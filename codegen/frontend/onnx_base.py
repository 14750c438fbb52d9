"""ONNX frontend, shared pieces: the Problem record, the two exceptions the per-op rules raise, and the
small graph helpers every step uses (static shapes, constant inputs, a graph copy passes may edit)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..ir.graph import Graph, Node

# ---------------------------------------------------------------- problems

@dataclass
class Problem:
    """Something kiln cannot compile. kind: "model" (the file as a whole), "op"
    (an unsupported op or attribute value) or "shape" (a shape that is not static)."""
    node: str
    op_type: str
    reason: str
    kind: str

    def as_dict(self) -> dict[str, str]:
        return {"node": self.node, "op_type": self.op_type, "reason": self.reason}


class ShapeUnknown(Exception):
    """A shape rule or normaliser needed a value whose shape is not static."""

    def __init__(self, value: str):
        super().__init__(value)
        self.value = value


class Unsupported(Exception):
    """A normaliser or shape rule found attribute/shape values kiln cannot lower."""


# ---------------------------------------------------------------- small helpers

def is_static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


def shape_of(g: Graph, name: str) -> tuple[int, ...]:
    v = g.values.get(name)
    if v is None or not is_static(v.shape):
        raise ShapeUnknown(name)
    return v.shape


def has_input(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] != ""


def const_input(g: Graph, node: Node, index: int) -> np.ndarray | None:
    """The constant at input `index`; None when the input is omitted or computed at run time."""
    return g.initializers.get(node.inputs[index]) if has_input(node, index) else None


def as_ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


def output_used(g: Graph, node: Node, index: int) -> bool:
    if index >= len(node.outputs) or not node.outputs[index]:
        return False
    name = node.outputs[index]
    return any(name in n.inputs for n in g.nodes) or any(v.name == name for v in g.outputs)


def copy_graph(graph: Graph) -> Graph:
    """A graph passes can edit freely: new node objects and dicts; arrays are shared, never edited."""
    nodes = [replace(n, inputs=list(n.inputs), outputs=list(n.outputs), attrs=dict(n.attrs), source=list(n.source))
             for n in graph.nodes]
    return replace(graph, nodes=nodes, values=dict(graph.values), initializers=dict(graph.initializers),
                   inputs=list(graph.inputs), outputs=list(graph.outputs), aicpu=dict(graph.aicpu),
                   rewrites=dict(graph.rewrites))



def rewrite_nodes(graph: Graph, ops: tuple[str, ...], check, rewrite, log: list[str], pass_name: str) -> Graph:
    """A frontend pass replacing each node of `ops` on a run-time value that `check(node, g)` takes (None) by the
    nodes `rewrite(g, node)` returns with a description; each rewrite recorded in the graph's `rewrites` (the
    [OPT] log's frontend lines) and in `log`. A node the check refuses stays, for the op table to refuse."""
    if not any(n.op_type in ops for n in graph.nodes):
        return graph
    g = copy_graph(graph)
    nodes: list[Node] = []
    for node in g.nodes:
        if node.op_type not in ops or node.inputs[0] in g.initializers or check(node, g):
            nodes.append(node)
            continue
        new, what = rewrite(g, node)
        nodes += new
        g.rewrites[node.name] = f"{node.op_type} as {what}"
        log.append(f"{pass_name}: '{node.name}' ({node.op_type}) as {what}")
    g.nodes = nodes
    return g
