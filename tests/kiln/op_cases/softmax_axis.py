"""Softmax and LogSoftmax over any axis. Opset 13: the one axis given (the first, a middle one, negative counting
from the end; the last is baseline.py's and reduce.py's), moved last and back by copy_mte transposes around the
last-axis kernel. Opsets < 13: the input coerced to 2-D at `axis` (the default 1, axis 0: one row of everything, the
last axis), as those opsets define it, which the version converter writes as a Flatten -> last-axis op -> Reshape."""
from __future__ import annotations

from . import OpCase, single_op


def _case(name: str, op: str, shape: list[int], axis: int | None, opset: int = 13, launches: int | None = None):
    attrs = {} if axis is None else {"axis": axis}
    return OpCase(name, single_op(op, [("x", shape)], [("y", None)], opset=opset, **attrs), launches=launches)


CASES = [
    _case("softmax_axis0_5x3x7", "Softmax", [5, 3, 7], 0, launches=3),
    _case("softmax_axis1_2x33x6", "Softmax", [2, 33, 6], 1, launches=3),
    _case("softmax_axis_neg2_2x4x9x5", "Softmax", [2, 4, 9, 5], -2, launches=3),
    _case("logsoftmax_axis1_4x20x3", "LogSoftmax", [4, 20, 3], 1, launches=3),
    _case("logsoftmax_axis_neg3_3x5x2", "LogSoftmax", [3, 5, 2], -3, launches=3),
    _case("softmax_opset11_axis1_2x3x4", "Softmax", [2, 3, 4], 1, opset=11, launches=1),
    _case("softmax_opset11_default_3x5x6", "Softmax", [3, 5, 6], None, opset=11, launches=1),
    _case("logsoftmax_opset11_axis0_2x3x5", "LogSoftmax", [2, 3, 5], 0, opset=11, launches=1),
    _case("logsoftmax_opset12_last_4x10", "LogSoftmax", [4, 10], -1, opset=12, launches=1),
]
