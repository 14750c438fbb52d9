"""Ops lowered to the copy_mte kernel: Transpose of any permutation (ranks 2-5, NC1HWC0 inputs of whole and of partial
C0 blocks, a result feeding a Conv, a pool or a per-channel Mul, of whole C0 blocks or not, and a Reshape's 4-D rows
feeding a Conv), ReduceMean over any axes (channels, C/H/W, single H or W, negative axes, keepdims 0/1, axes as an
attribute at opset 13 and as an input at opset 18, all axes), Concat along H, W, interleaved row-major axes and
aligned channels of several images, and Concats of Concats (DenseNet's blocks, a Concat of a Concat's result)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase, single_op


def _transpose(name: str, shape: list[int], perm: list[int]) -> OpCase:
    return OpCase(name, single_op("Transpose", [("x", shape)], [("y", None)], perm=perm))


def _model(name: str, nodes: list, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           init: dict[str, np.ndarray] | None = None, opset: int = 17):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                            for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(v, k) for k, v in (init or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _relu_transpose(name: str, shape: list[int], perm: list[int]) -> OpCase:
    """Relu then Transpose: the input is a kernel's NC1HWC0 output (read as stored when C is whole C0 blocks)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=perm)]
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y": [shape[a] for a in perm]}))


def _nhwc_conv(name: str, shape: list[int], cout: int) -> OpCase:
    """NHWC -> NCHW (0, 3, 1, 2) feeding a 1x1 Conv: the transpose writes NC1HWC0 for it."""
    n, h, w, c = shape
    weight = (np.random.default_rng(3).standard_normal((cout, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w"], ["y"])]
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y": [n, cout, h, w]}, {"w": weight}), tol=8e-3)


def _reshape_conv(name: str, n: int, chw: list[int], cout: int) -> OpCase:
    """Relu on rows (N, C*H*W), Reshape to (N, C, H, W) feeding a 3x3 Conv: a row-major 4-D value read as NC1HWC0
    (C not whole C0 blocks: a relayout step)."""
    c, h, w = chw
    weight = (np.random.default_rng(4).standard_normal((cout, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["t"]),
             helper.make_node("Conv", ["t", "w"], ["y"], pads=[1, 1, 1, 1])]
    init = {"w": weight, "shape": np.array([n, c, h, w], np.int64)}
    return OpCase(name, _model(name, nodes, {"x": [n, c * h * w]}, {"y": [n, cout, h, w]}, init), tol=8e-3)


def _transpose_pool(name: str, shape: list[int]) -> OpCase:
    """NHWC -> NCHW of 3 channels feeding a MaxPool: the pool reads NC1HWC0 too."""
    n, h, w, c = shape
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y": [n, c, h // 2, w // 2]}))


def _layer_scale(name: str, shape: list[int]) -> OpCase:
    """ConvNeXt's layer scale: NHWC -> NCHW, then Mul by a per-channel [C, 1, 1] constant (an elementwise program
    with a channel operand, which reads the row-major transpose result relaid out as NC1HWC0)."""
    n, h, w, c = shape
    gamma = (1 + 0.5 * np.random.default_rng(8).standard_normal((c, 1, 1))).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Mul", ["t", "gamma"], ["y"])]
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y": [n, c, h, w]}, {"gamma": gamma}))


def _reduce_mean(name: str, shape: list[int], axes: list[int] | None, keepdims: int, opset: int = 13) -> OpCase:
    if axes is None:
        return OpCase(name, single_op("ReduceMean", [("x", shape)], [("y", None)], opset=opset, keepdims=keepdims))
    if opset >= 18:
        return OpCase(name, single_op("ReduceMean", [("x", shape)], [("y", None)],
                                      {"axes": np.asarray(axes, np.int64)}, opset=opset, keepdims=keepdims))
    return OpCase(name, single_op("ReduceMean", [("x", shape)], [("y", None)], opset=opset, axes=axes,
                                  keepdims=keepdims))


def _relu_concat(name: str, shapes: list[list[int]], axis: int) -> OpCase:
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(len(shapes))]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(len(shapes))], ["y"], axis=axis))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return OpCase(name, _model(name, nodes, {f"x{i}": s for i, s in enumerate(shapes)}, {"y": out}))


def _dense_block(name: str, cin: int, growth: int, layers: int, hw: int = 5) -> OpCase:
    """DenseNet's block: layer k reads the Concat of the block input and every earlier layer's output (Relu of a
    3x3 conv here), and the block's result is the Concat of all of them."""
    rng = np.random.default_rng(11)
    nodes, init, features = [helper.make_node("Relu", ["x"], ["f0"])], {}, ["f0"]
    for k in range(1, layers + 1):
        src = features[0] if k == 1 else f"cat{k - 1}"
        c = cin + growth * (k - 1)
        init[f"w{k}"] = (rng.standard_normal((growth, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        nodes += [helper.make_node("Conv", [src, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k}"], [f"f{k}"])]
        features.append(f"f{k}")
        nodes.append(helper.make_node("Concat", list(features), [f"cat{k}"], axis=1))
    return OpCase(name, _model(name, nodes, {"x": [1, cin, hw, hw]}, {f"cat{layers}": [1, cin + growth * layers,
                                                                                      hw, hw]}, init), tol=8e-3)


def _concat_of_concat(name: str) -> OpCase:
    """Concat(Concat(a, b), c): the first result is itself an input, placed whole in the second."""
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(3)]
    nodes += [helper.make_node("Concat", ["r0", "r1"], ["ab"], axis=1),
              helper.make_node("Concat", ["ab", "r2"], ["y"], axis=1)]
    return OpCase(name, _model(name, nodes, {"x0": [1, 16, 3, 3], "x1": [1, 32, 3, 3], "x2": [1, 7, 3, 3]},
                               {"y": [1, 55, 3, 3]}))


CASES: list[OpCase] = [
    # Transpose: every kind of permutation the swap kernel does not take
    _transpose("transpose_any_201", [4, 5, 6], [2, 0, 1]),
    _transpose("transpose_any_120", [4, 5, 6], [1, 2, 0]),
    _transpose("transpose_any_0231", [1, 5, 6, 7], [0, 2, 3, 1]),
    _transpose("transpose_any_0312", [2, 5, 6, 7], [0, 3, 1, 2]),
    _transpose("transpose_any_3210", [2, 3, 4, 5], [3, 2, 1, 0]),
    _transpose("transpose_any_5d_03142", [1, 2, 3, 4, 5], [0, 3, 1, 4, 2]),
    _transpose("transpose_any_5d_reversed", [2, 3, 2, 3, 4], [4, 3, 2, 1, 0]),
    _transpose("transpose_any_5d_20413", [3, 2, 4, 2, 5], [2, 0, 4, 1, 3]),
    _relu_transpose("transpose_blocked_0231", [1, 32, 5, 6], [0, 2, 3, 1]),
    _relu_transpose("transpose_blocked_0231_batch2", [2, 16, 3, 4], [0, 2, 3, 1]),
    _relu_transpose("transpose_blocked_1023", [2, 32, 3, 4], [1, 0, 2, 3]),
    _relu_transpose("transpose_partial_block_0231", [1, 20, 3, 5], [0, 2, 3, 1]),
    _relu_transpose("transpose_blocked_0321", [1, 16, 4, 6], [0, 3, 2, 1]),
    _nhwc_conv("transpose_nhwc_to_conv", [1, 5, 6, 16], 8),
    # ... and of channels that are not whole C0 blocks (3, 20, two images): relaid out as NC1HWC0 for the reader
    _nhwc_conv("transpose_nhwc_c3_to_conv", [1, 6, 7, 3], 8),
    _nhwc_conv("transpose_nhwc_c20_to_conv_batch2", [2, 4, 5, 20], 17),
    _transpose_pool("transpose_nhwc_c3_to_maxpool", [1, 6, 8, 3]),
    _reshape_conv("reshape_rows_c5_to_conv", 2, [5, 4, 3], 6),
    _layer_scale("transpose_nhwc_c20_layer_scale", [1, 3, 4, 20]),
    _layer_scale("transpose_nhwc_c32_layer_scale_batch2", [2, 3, 2, 32]),
    # ReduceMean: axes beyond H, W of 4-D and the last axis
    _reduce_mean("reducemean_channels_keep", [1, 32, 4, 5], [1], 1),
    _reduce_mean("reducemean_channels_drop", [2, 20, 3, 3], [1], 0),
    _reduce_mean("reducemean_chw_keep", [2, 16, 3, 3], [1, 2, 3], 1),
    _reduce_mean("reducemean_h_only", [1, 8, 5, 6], [2], 1),
    _reduce_mean("reducemean_w_only_drop", [1, 8, 5, 6], [3], 0),
    _reduce_mean("reducemean_negative_axes", [2, 6, 4, 5], [-1, -3], 1),
    _reduce_mean("reducemean_opset18_channels", [1, 24, 3, 4], [1], 0, opset=18),
    _reduce_mean("reducemean_opset18_negative_h", [1, 24, 3, 4], [-2], 1, opset=18),
    _reduce_mean("reducemean_all_axes", [2, 3, 4, 5], None, 0),
    _reduce_mean("reducemean_3d_axis1", [2, 5, 7], [1], 1),
    _reduce_mean("reducemean_3d_axes01", [3, 5, 7], [0, 1], 0),
    # Concat needing a copy: NC1HWC0 rows (H) and columns (W), interleaved row-major axes, aligned channels of two
    # images
    _relu_concat("concat_copy_h", [[1, 5, 3, 4], [1, 5, 2, 4]], 2),
    _relu_concat("concat_copy_w", [[2, 16, 3, 2], [2, 16, 3, 5]], 3),
    _relu_concat("concat_copy_nd_last", [[2, 3, 4], [2, 3, 5]], 2),
    _relu_concat("concat_copy_nd_middle_3in", [[2, 3, 4], [2, 1, 4], [2, 2, 4]], 1),
    _relu_concat("concat_copy_channels_batch2", [[2, 16, 3, 3], [2, 32, 3, 3]], 1),
    # Concat of Concats in place
    _dense_block("concat_dense_block", 16, 16, 3),
    _concat_of_concat("concat_of_concat"),
]
