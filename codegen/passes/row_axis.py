"""The lowering of Softmax and LogSoftmax over an axis other than the last (opset 13's single-axis semantics; opsets
below 13 arrive converted, their coerce-to-2-D form as a Flatten -> last-axis op -> Reshape): the axis moved last by
a copy_mte transpose, the last-axis row kernel, and the inverse transpose back. A function of the lowerer
(codegen/passes/lowering.py calls it; it is at its size limit)."""
from __future__ import annotations

from math import prod

from ..ir.copy_spec import transpose_copy
from ..ir.graph import Node, OpInstance
from .copy_rules import copy_step, permuted
from .lowered import LowererState, Step, Storage


def moved_row_op(lw: LowererState, node: Node) -> None:
    """Softmax/LogSoftmax over `axis`: x transposed so that the axis is last (the `@perm_<axes>` value, shared with
    any other op that moves the same axes of x), the row kernel over it (its result the output transposed the same
    way, `<y>@perm_<axes>`), then the inverse transpose into y. LayerNormalization, which normalises every axis
    from `axis` on, is refused below its last axis."""
    x, y = node.inputs[0], node.outputs[0]
    xs, axis = lw.shape(x), node.attrs["axis"] % len(lw.shape(x))
    if node.op_type not in ("Softmax", "LogSoftmax"):
        raise lw.fail(node, f"{node.op_type} over axis {axis} of {list(xs)}: only the last axis is supported")
    perm = tuple(a for a in range(len(xs)) if a != axis) + (axis,)
    tag = "perm_" + "_".join(map(str, perm))  # isolate.py: the value transposed by perm
    src = f"{x}@{tag}"
    if src not in lw.storage:
        src = permuted(lw, node, x, perm, src, False)
    moved = tuple(xs[a] for a in perm)
    mid = lw.new_value(f"{y}@{tag}", Storage("ND", moved))
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type], [src], mid,
                         instance=OpInstance(node.name, node.op_type, {"rows": prod(moved[:-1]), "length": moved[-1],
                                                                      "activation": "", "bias": False})))
    lw.device[y] = lw.new_value(y, Storage("ND", xs))
    copy_step(lw, node, transpose_copy(moved, tuple(perm.index(a) for a in range(len(xs)))), [mid], y)
    lw.decisions.append(f"{node.name}: {node.op_type} over axis {axis} of {list(xs)}: the axis moved last "
                        f"(copy_mte, perm {list(perm)}), the last-axis kernel over {prod(moved[:-1])} rows of "
                        f"{moved[-1]}, moved back (copy_mte)")
