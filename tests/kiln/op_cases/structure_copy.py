"""Channel moves on NC1HWC0 that need a copy (the channel_gather_mte kernel): Concat of channel counts that are
not multiples of C0 (ShuffleNet's 58 + 58), the channel shuffle Reshape -> Transpose(0,2,1,3,4) -> Reshape
recognised as one permutation, and channel Slices/Splits at unaligned bounds or over several images."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase, single_op


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _model(name: str, nodes: list, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           init: dict[str, np.ndarray] | None = None) -> object:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                            for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(v, k) for k, v in (init or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _relu_concat(name: str, shapes: list[list[int]], axis: int = 1) -> OpCase:
    """Concat of Relu(x_i) along the channels: unaligned counts, so the result is a copy, not views."""
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(len(shapes))]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(len(shapes))], ["y"], axis=axis))
    out = list(shapes[0])
    out[1] = sum(s[1] for s in shapes)
    return OpCase(name, _model(name, nodes, {f"x{i}": s for i, s in enumerate(shapes)}, {"y": out}))


def _shuffle_nodes(x: str, y: str, shape: list[int], groups: int, tag: str) -> tuple[list, dict[str, np.ndarray]]:
    """torchvision's channel_shuffle: view(N, g, C/g, H, W), transpose(1, 2), view(N, C, H, W)."""
    n, c, h, w = shape
    init = {f"{tag}_s5": _i64(n, groups, c // groups, h, w), f"{tag}_s4": _i64(n, c, h, w)}
    nodes = [helper.make_node("Reshape", [x, f"{tag}_s5"], [f"{tag}_r5"]),
             helper.make_node("Transpose", [f"{tag}_r5"], [f"{tag}_t5"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", [f"{tag}_t5", f"{tag}_s4"], [y])]
    return nodes, init


def _shuffle(name: str, shape: list[int], groups: int) -> OpCase:
    nodes, init = _shuffle_nodes("r", "y", shape, groups, "cs")
    nodes.insert(0, helper.make_node("Relu", ["x"], ["r"]))
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y": shape}, init))


def _shuffle_unit(name: str, c: int, hw: int) -> OpCase:
    """A ShuffleNetV2 stride-1 unit without its convolutions: split the channels in halves, keep one, Relu the
    other, Concat, channel shuffle (groups 2), and split the result in halves again (the next unit's input)."""
    shape = [1, c, hw, hw]
    half = [1, c // 2, hw, hw]
    nodes, init = _shuffle_nodes("cat", "shuf", shape, 2, "cs")
    nodes = [helper.make_node("Split", ["x", "halves"], ["a", "b"], axis=1),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Concat", ["a", "rb"], ["cat"], axis=1),
             *nodes,
             helper.make_node("Split", ["shuf", "halves"], ["y0", "y1"], axis=1)]
    init["halves"] = _i64(c // 2, c // 2)
    return OpCase(name, _model(name, nodes, {"x": shape}, {"y0": half, "y1": half}, init))


def _slice(name: str, shape: list[int], starts, ends, axes) -> OpCase:
    init = {"starts": _i64(*starts), "ends": _i64(*ends), "axes": _i64(*axes)}
    return OpCase(name, single_op("Slice", [("x", shape)], [("y", None)], init))


def _concat_constant(name: str, x: list[int], const: list[int], first: bool) -> OpCase:
    """Concat of a run-time value and a constant (ViT's class token before the patch embeddings, a 4-D map beside
    constant channels): a copy_mte kernel reading the constant from the weights blob."""
    token = np.random.default_rng(7).standard_normal(const).astype(np.float32)
    ins = ["token", "r"] if first else ["r", "token"]
    out = [x[i] + const[i] if i == 1 else x[i] for i in range(len(x))]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ins, ["y"], axis=1)]
    return OpCase(name, _model(name, nodes, {"x": x}, {"y": out}, {"token": token}))


CASES: list[OpCase] = [
    # Concat along the channels of unaligned counts: 58 + 58 (ShuffleNet), three odd inputs, two images, axis -3
    _relu_concat("copy_concat_58_58", [[1, 58, 4, 4], [1, 58, 4, 4]]),
    _relu_concat("copy_concat_5_7_9", [[1, 5, 3, 3], [1, 7, 3, 3], [1, 9, 3, 3]]),
    _relu_concat("copy_concat_batch2_11_13", [[2, 11, 3, 5], [2, 13, 3, 5]]),
    _relu_concat("copy_concat_axis_m3_16_5_16", [[1, 16, 2, 3], [1, 5, 2, 3], [1, 16, 2, 3]], -3),
    # Channel shuffle: groups 2 at ShuffleNet's 116 channels and at odd small counts, groups 3, two images
    _shuffle("copy_shuffle_g2_c116", [1, 116, 4, 4], 2),
    _shuffle("copy_shuffle_g2_c10", [1, 10, 3, 5], 2),
    _shuffle("copy_shuffle_g3_c21", [1, 21, 3, 3], 3),
    _shuffle("copy_shuffle_g2_batch2_c24", [2, 24, 2, 2], 2),
    _shuffle_unit("copy_shuffle_unit_c116", 116, 3),
    # Channel slices a view cannot hold: unaligned bounds, the middle of odd counts, several images
    _slice("copy_slice_channels_5_29", [1, 37, 3, 3], [5], [29], [1]),
    _slice("copy_slice_channels_58_116", [1, 116, 2, 2], [58], [116], [1]),
    _slice("copy_slice_channels_batch2_16_32", [2, 48, 2, 3], [16], [32], [1]),
    OpCase("copy_split_58_58", single_op("Split", [("x", [1, 116, 3, 3])], [("a", None), ("b", None)],
                                         {"split": _i64(58, 58)}, axis=1)),
    OpCase("copy_split_3_parts_odd", single_op("Split", [("x", [1, 21, 2, 2])], [("a", None), ("b", None), ("c", None)],
                                               opset=18, axis=1, num_outputs=3)),
    _concat_constant("concat_class_token_first", [1, 6, 16], [1, 1, 16], True),
    _concat_constant("concat_constant_channels_4d", [1, 8, 4, 4], [1, 3, 4, 4], False),
]
