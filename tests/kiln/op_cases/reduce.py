"""ReduceSum / ReduceMax / ReduceMin / ReduceL2 against ONNX Runtime: each op over the last axis, over H, W, over
leading and interleaved axes (moved last by a copy) and over all axes; keepdims 0/1, axes as an attribute and as an
input (ReduceSum's from opset 13, the others' from 18), negative axes, noop_with_empty_axes 0/1 (pairwise with the
op); LogSoftmax over the last axis. Lengths above 64 (two reduction levels) and not multiples of 16 (rows landing
on 32-byte boundaries)."""
import numpy as np

from . import OpCase, single_op


def _reduce(name, op, shape, axes, keepdims=1, opset=17, tol=4e-3, inputs=None, **extra):
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    if axes is not None and axes_input:
        model = single_op(op, [("x", shape)], [("y", None)], {"axes": np.asarray(axes, np.int64)}, opset=opset,
                          keepdims=keepdims, **extra)
    else:
        attrs = {} if axes is None else {"axes": axes}
        model = single_op(op, [("x", shape)], [("y", None)], opset=opset, keepdims=keepdims, **attrs, **extra)
    return OpCase(name, model, tol=tol, inputs=inputs or {})


CASES = [
    # ReduceMax: last axis (one level, two levels, unaligned), H, W of NCHW, a leading axis, all axes
    _reduce("reducemax_last_keep", "ReduceMax", [6, 50], [1], 1),
    _reduce("reducemax_last_drop_l300", "ReduceMax", [3, 4, 300], [-1], 0),
    _reduce("reducemax_hw_keep_opset18", "ReduceMax", [2, 20, 7, 9], [2, 3], 1, opset=18),
    _reduce("reducemax_axis0_drop", "ReduceMax", [5, 3, 33], [0], 0),
    _reduce("reducemax_all_keep", "ReduceMax", [4, 7, 9], None, 1),
    # ReduceMin: channels of NCHW (moved last), last axis, all axes dropped
    _reduce("reducemin_c_keep", "ReduceMin", [2, 19, 5, 6], [1], 1),
    _reduce("reducemin_last_drop_opset18", "ReduceMin", [7, 130], [-1], 0, opset=18),
    _reduce("reducemin_all_drop", "ReduceMin", [3, 40], None, 0),
    # ReduceL2: last axis, two interleaved axes, H, W
    _reduce("reducel2_last_keep", "ReduceL2", [9, 77], [1], 1),
    _reduce("reducel2_axes02_drop", "ReduceL2", [4, 5, 6, 7], [0, 2], 0),
    _reduce("reducel2_hw_keep_opset18", "ReduceL2", [1, 24, 8, 8], [2, 3], 1, opset=18),
    # ReduceSum (a GEMM with a column of ones): axes input (opset 13) and attribute (opset 11), H, W, last, all
    _reduce("reducesum_last_keep_opset13", "ReduceSum", [5, 60], [1], 1, opset=13),
    _reduce("reducesum_hw_drop_opset13", "ReduceSum", [2, 20, 7, 9], [-2, -1], 0, opset=13),
    _reduce("reducesum_axis1_keep_opset11", "ReduceSum", [3, 10, 12], [1], 1, opset=11),
    _reduce("reducesum_all_drop", "ReduceSum", [6, 20], None, 0, opset=13),
    # noop_with_empty_axes: 1 without axes is the identity; 1 with axes reduces them; 0 without axes: all
    _reduce("reducemax_noop1_no_axes", "ReduceMax", [3, 50], None, 1, opset=18, noop_with_empty_axes=1),
    _reduce("reducesum_noop1_no_axes", "ReduceSum", [2, 8, 5], None, 0, opset=13, noop_with_empty_axes=1),
    _reduce("reducel2_noop1_axes", "ReduceL2", [3, 50], [1], 0, opset=18, noop_with_empty_axes=1),
    _reduce("reducemin_noop0_no_axes", "ReduceMin", [2, 33], None, 1, opset=18, noop_with_empty_axes=0),
    _reduce("reducemean_noop1_no_axes", "ReduceMean", [4, 6], None, 1, opset=18, noop_with_empty_axes=1),
]

CASES += [  # LogSoftmax over the last axis (logsoftmax_vector): one and two reduction levels, wide inputs
    OpCase("logsoftmax_last_l77", single_op("LogSoftmax", [("x", [4, 77])], [("y", None)], axis=-1)),
    OpCase("logsoftmax_last_3d_l300", single_op("LogSoftmax", [("x", [2, 3, 300])], [("y", None)], axis=2)),
    OpCase("logsoftmax_wide_inputs", single_op("LogSoftmax", [("x", [5, 64])], [("y", None)]),
           inputs={"x": lambda rng, shape: 8 * rng.standard_normal(shape)}),
]

