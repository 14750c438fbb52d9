"""Lowering rules beside lowering.py (at its size limit), as functions of the lowerer: the staging of the graph
inputs (an index input, int64/int32 in ONNX, is held as fp32 integers, exact below 2**24, instead of fp16, exact
only below 2048) and Gather (a constant scalar index: a view, the lowerer's own rule; indices of any shape known at
run time, or constant on run-time data: one gather_mte kernel)."""
from __future__ import annotations

from math import prod

import numpy as np

from ..frontend.onnx_checks import INDEX_DTYPES
from ..ir.graph import Node, OpInstance, Value
from .lowered import LowererState, Step, Storage


def is_index_input(lw: LowererState, name: str) -> bool:
    """An int64/int32 graph input that only Gathers read, as their indices (any other reader keeps fp16)."""
    readers = [(n, i) for n in lw.g.nodes for i, x in enumerate(n.inputs) if x == name]
    return lw.g.values[name].dtype in INDEX_DTYPES and bool(readers) and all(
        n.op_type == "Gather" and i == 1 and n.name not in lw.g.aicpu for n, i in readers)


def stage_input(lw: LowererState, v: Value) -> None:
    """A graph input's device value and its glue step: NCHW -> NC1HWC0 for a 4-D float input, fp32 -> fp16 for
    the others, an index input's values kept as fp32 (glue input_index)."""
    shape = tuple(v.shape)
    index = is_index_input(lw, v.name)
    layout = "NC1HWC0" if len(shape) == 4 and not index else "ND"
    dv = lw.new_value(f"{v.name}@staged", Storage(layout, shape, "fp32" if index else "fp16"))
    lw.device[v.name] = dv
    glue = "input_index" if index else "input_nchw" if layout == "NC1HWC0" else "input_nd"
    lw.steps.append(Step("glue", f"input {v.name}", [], ["Input"], [v.name], dv, glue=glue, params=list(shape)))


def gather(lw: LowererState, node: Node) -> None:
    """Gather: a constant scalar index is a view (the lowerer's rule); other indices drive a gather_mte kernel
    reading the data as row-major [outer, axis, inner] and the indices as fp32 (a graph input as staged, constant
    indices as a weight)."""
    if "index" in node.attrs:
        return lw.gather(node)
    data, xs, axis = node.inputs[0], lw.shape(node.inputs[0]), node.attrs["axis"]
    constant = node.attrs.get("indices")  # constant indices (the frontend checked their range) or a run-time input
    indices = "" if constant is not None else node.inputs[1]
    count = len(constant) if constant is not None else prod(lw.shape(indices))
    spec = (prod(xs[:axis]), xs[axis], count, prod(xs[axis + 1:]))
    if data in lw.g.initializers:  # an embedding table: fp16 rows in the weights blob
        src = lw.weight(f"{node.name}.data", np.asarray(lw.g.initializers[data], np.float16))
    else:
        src = lw.act(node, data, "ND")
    if constant is not None:
        idx = lw.weight(f"{node.name}.indices", np.asarray(constant, np.float32))
    elif indices in lw.device and lw.storage[lw.device[indices]].dtype == "fp32":
        idx = lw.device[indices]
    else:
        raise lw.fail(node, f"indices '{indices}' are computed in the model; kiln takes run-time indices from a "
                            f"graph input (int64/int32) or a constant")
    out = lw.out(node, "ND")
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type], [src, idx], out,
                         instance=OpInstance(node.name, "Gather", {"gather": spec, "activation": "", "bias": False})))
    lw.decisions.append(f"{node.name}: {count} run-time indices into axis {axis} (size {xs[axis]}) of "
                        f"{list(xs)}: rows of {spec[3]} copied by one gather_mte kernel")
