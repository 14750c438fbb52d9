"""Data-movement ops on run-time values: Concat (in place), Slice, Split, Transpose (ranks 3-5), Gather with a
scalar index, Squeeze, Unsqueeze. Odd channel counts included; a Concat's inputs come from kernels (Relu), as in
a real model, so its producers can write into the output."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase, single_op


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _relu_concat(name: str, shapes: list[list[int]], axis: int) -> OpCase:
    """Concat of Relu(x_i): the producers are kernels that can write into their sub-range of the result."""
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(len(shapes))]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(len(shapes))], ["y"], axis=axis))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, s) for i, s in enumerate(shapes)]
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return OpCase(name, model)


def _fire_module(name: str, cin: int, squeeze: int, expand: int) -> OpCase:
    """SqueezeNet's fire module: Concat of a 1x1 and a 3x3 expand conv (each + ReLU) of one squeeze conv."""
    rng = np.random.default_rng(7)
    weights = {"ws": rng.standard_normal((squeeze, cin, 1, 1)) / np.sqrt(cin),
               "we1": rng.standard_normal((expand, squeeze, 1, 1)) / np.sqrt(squeeze),
               "we3": rng.standard_normal((expand, squeeze, 3, 3)) / np.sqrt(9 * squeeze)}
    nodes = [helper.make_node("Conv", ["x", "ws"], ["s"]), helper.make_node("Relu", ["s"], ["rs"]),
             helper.make_node("Conv", ["rs", "we1"], ["e1"]), helper.make_node("Relu", ["e1"], ["r1"]),
             helper.make_node("Conv", ["rs", "we3"], ["e3"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["e3"], ["r3"]),
             helper.make_node("Concat", ["r1", "r3"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 * expand, 6, 6])],
                              [numpy_helper.from_array(w.astype(np.float32), k) for k, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return OpCase(name, model, tol=8e-3)


def _slice(name: str, shape: list[int], starts, ends, axes=None, steps=None) -> OpCase:
    init = {"starts": _i64(*starts), "ends": _i64(*ends)}
    if axes is not None:
        init["axes"] = _i64(*axes)
    if steps is not None:
        init["steps"] = _i64(*steps)
    return OpCase(name, single_op("Slice", [("x", shape)], [("y", None)], init))


def _transpose(name: str, shape: list[int], perm: list[int]) -> OpCase:
    return OpCase(name, single_op("Transpose", [("x", shape)], [("y", None)], perm=perm))


CASES: list[OpCase] = [
    # Concat: NC1HWC0 channels at C0-aligned offsets (the last input may be odd), images, row-major axis 1
    _relu_concat("concat_c16_c32", [[1, 16, 5, 7], [1, 32, 5, 7]], 1),
    _relu_concat("concat_c16_c16_c5", [[1, 16, 3, 3], [1, 16, 3, 3], [1, 5, 3, 3]], 1),
    _relu_concat("concat_axis_m3_c16_c16", [[1, 16, 3, 4], [1, 16, 3, 4]], -3),
    _relu_concat("concat_images", [[1, 5, 3, 3], [2, 5, 3, 3]], 0),
    _fire_module("concat_fire_module", 7, 16, 16),
    _relu_concat("concat_nd_axis1_3in", [[1, 5, 7], [1, 3, 7], [1, 9, 7]], 1),
    # Slice: channels at C0-aligned bounds, negative and clamped indices, several axes, axes omitted
    _slice("slice_channels_16_48", [1, 48, 3, 5], [16], [48], [1]),
    _slice("slice_channels_to_end_odd", [1, 37, 3, 3], [32], [1000], [1]),
    _slice("slice_negative", [1, 6, 10], [-4], [-1], [1]),
    _slice("slice_clamped", [1, 6, 10], [2], [1000], [-2]),
    _slice("slice_two_axes", [4, 6, 10], [2, 1], [3, 4], [0, 1], [1, 1]),
    _slice("slice_axes_omitted", [5, 3, 4], [-2], [9]),
    _slice("slice_image_of_batch", [3, 5, 4, 4], [1], [2], [0]),
    # Split: equal parts (num_outputs, opset 18), uneven sizes (split input), NC1HWC0 channel halves
    OpCase("split_equal_axis1", single_op("Split", [("x", [1, 12, 10])], [("a", None), ("b", None), ("c", None)],
                                          opset=18, axis=1, num_outputs=3)),
    OpCase("split_uneven_axis0", single_op("Split", [("x", [7, 3, 5])], [("a", None), ("b", None)],
                                           {"split": _i64(2, 5)}, axis=0)),
    OpCase("split_channels_16_16", single_op("Split", [("x", [1, 32, 3, 3])], [("a", None), ("b", None)],
                                             {"split": _i64(16, 16)}, axis=1)),
    OpCase("split_last_smaller", single_op("Split", [("x", [1, 7, 6])], [("a", None), ("b", None)],
                                           opset=18, axis=1, num_outputs=2)),
    # Transpose: ranks 3, 4, 5 (channel shuffle, BERT's packed QKV), default perm
    _transpose("transpose_102", [5, 6, 8], [1, 0, 2]),
    _transpose("transpose_021", [3, 5, 7], [0, 2, 1]),
    _transpose("transpose_0132", [1, 3, 5, 8], [0, 1, 3, 2]),
    _transpose("transpose_2013", [1, 3, 5, 8], [2, 0, 1, 3]),
    _transpose("transpose_shuffle_5d", [1, 2, 3, 4, 5], [0, 2, 1, 3, 4]),
    _transpose("transpose_qkv_5d", [1, 6, 1, 3, 8], [3, 1, 2, 0, 4]),
    OpCase("transpose_default_perm", single_op("Transpose", [("x", [6, 5])], [("y", None)])),
    _transpose("transpose_unit_axes_view", [1, 5, 1, 7], [2, 1, 0, 3]),
    # Gather: constant scalar index, negative index, on axis 1 of a single row
    OpCase("gather_axis0", single_op("Gather", [("x", [3, 6, 8])], [("y", None)], {"i": np.array(1, np.int64)})),
    OpCase("gather_axis0_negative", single_op("Gather", [("x", [3, 6, 8])], [("y", None)],
                                              {"i": np.array(-1, np.int64)})),
    OpCase("gather_axis1", single_op("Gather", [("x", [1, 4, 6])], [("y", None)], {"i": np.array(2, np.int64)},
                                     axis=1)),
    # Squeeze / Unsqueeze: axes as inputs (opset 13+), negative axes, axes omitted
    OpCase("squeeze_axes", single_op("Squeeze", [("x", [1, 6, 1, 8])], [("y", None)], {"axes": _i64(0, 2)})),
    OpCase("squeeze_all_unit", single_op("Squeeze", [("x", [1, 6, 1, 8])], [("y", None)])),
    OpCase("unsqueeze_axes", single_op("Unsqueeze", [("x", [6, 8])], [("y", None)], {"axes": _i64(0, -1)})),
]
