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


def is_small_channel_input(lw: LowererState, v: Value) -> bool:
    """A 4-D image of at most 4 channels that only dense convs read, each as its own input on its own (no chain,
    no second source): staged as NC1HWC0_C04, they run Load3D's channelSize 4 (Conv2dSpec.c04) instead of a
    16-channel block of which at most 4 are used. Decided by the shape and the readers alone, so every input size
    of the model (shape buckets) stages it alike."""
    shape = tuple(v.shape)
    if len(shape) != 4 or not 0 < shape[1] <= 4 or lw.g.values[v.name].dtype in INDEX_DTYPES:
        return False
    if any(o.name == v.name for o in lw.g.outputs):  # also a graph output: read back as NC1HWC0
        return False
    fused = {id(m.fused.chain_first) for m in lw.g.nodes} | {id(m.fused.second) for m in lw.g.nodes}
    readers = [n for n in lw.g.nodes if v.name in n.inputs]
    return bool(readers) and all(
        n.op_type == "Conv" and n.inputs.index(v.name) == 0 and n.inputs.count(v.name) == 1 and
        n.attrs.get("group", 1) == 1 and n.name not in lw.g.aicpu and id(n) not in fused and
        n.fused.chain_first is None and n.fused.second is None and v.name != n.fused.residual for n in readers)


def stage_input(lw: LowererState, v: Value) -> None:
    """A graph input's device value and its glue step: NCHW -> NC1HWC0 for a 4-D float input (NC1HWC0_C04 for a
    small-channel image that only convs read), fp32 -> fp16 for the others, an index input's values kept as fp32
    (glue input_index)."""
    shape = tuple(v.shape)
    index = is_index_input(lw, v.name)
    layout = "NC1HWC0" if len(shape) == 4 and not index else "ND"
    if layout == "NC1HWC0" and is_small_channel_input(lw, v):
        layout = "NC1HWC0_C04"
        lw.decisions.append(f"input {v.name}: staged as NC1HWC0_C04 ({shape[1]} channels, read by convs only)")
    dv = lw.new_value(f"{v.name}@staged", Storage(layout, shape, "fp32" if index else "fp16"))
    lw.device[v.name] = dv
    glue = ("input_index" if index else "input_nchw" if layout == "NC1HWC0" else
            "input_nchw_c04" if layout == "NC1HWC0_C04" else "input_nd")
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
