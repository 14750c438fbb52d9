"""Resize (opsets 10..19) and Upsample (opsets 7, 9) against ONNX Runtime on the resize_vector kernel: every mode,
nearest_mode and coordinate_transformation_mode once, pairwise where they combine, integer scales (2, 4),
non-integer (1.5, 1.7) and downscales (0.5), sizes given, opset 18's axes; and a YOLO-neck-shaped graph
(Conv -> Resize x2 nearest -> Concat -> Conv). Channel counts mostly not multiples of 16."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase

X = [1, 20, 5, 6]


def _model(name: str, nodes: list, x: list[int], init: dict[str, np.ndarray], opset: int) -> object:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _resize(name: str, mode: str, coord: str | None, nearest: str | None = None, scales=None, sizes=None,
            x: list[int] = X, opset: int = 13, tol: float = 4e-3, **extra) -> OpCase:
    """One Resize; scales/sizes over the 4 axes (2 with opset 18's axes), roi left out as exporters write it
    (opset 11 requires it: an empty constant)."""
    init, ins = {}, ["x", "", "", ""]
    if opset == 11:
        init["roi"], ins[1] = np.zeros(0, np.float32), "roi"
    if scales is not None:
        init["scales"], ins[2] = np.asarray(scales, np.float32), "scales"
    if sizes is not None:
        init["sizes"], ins[3] = np.asarray(sizes, np.int64), "sizes"
    attrs = {"mode": mode, **extra}
    if coord is not None:
        attrs["coordinate_transformation_mode"] = coord
    if nearest is not None:
        attrs["nearest_mode"] = nearest
    node = helper.make_node("Resize", ins[:4 if sizes is not None else 3], ["y"], **attrs)
    return OpCase(name, _model(name, [node], x, init, opset), tol=tol, launches=1)


def _old(name: str, op: str, mode: str, scales: list[float], opset: int, x: list[int] = X) -> OpCase:
    """Upsample (scales an attribute at opset 7, an input at 9) or Resize-10 (X, scales)."""
    if opset == 7:
        node, init = helper.make_node(op, ["x"], ["y"], mode=mode, scales=[float(v) for v in scales]), {}
    else:
        node, init = helper.make_node(op, ["x", "s"], ["y"], mode=mode), {"s": np.asarray(scales, np.float32)}
    return OpCase(name, _model(name, [node], x, init, opset), launches=1)


NEAREST = [
    # YOLOv5/v8/11's upsampling: asymmetric, floor, scales 1,1,2,2
    _resize("resize_nearest_asym_floor_x2", "nearest", "asymmetric", "floor", scales=[1, 1, 2, 2]),
    _resize("resize_nearest_default_x2", "nearest", None, None, scales=[1, 1, 2, 2]),  # half_pixel, prefer floor
    _resize("resize_nearest_hp_rpc_x1_5", "nearest", "half_pixel", "round_prefer_ceil", scales=[1, 1, 1.5, 1.5]),
    _resize("resize_nearest_pthp_ceil_x4", "nearest", "pytorch_half_pixel", "ceil", scales=[1, 1, 4, 4]),
    _resize("resize_nearest_ac_rpf_sizes", "nearest", "align_corners", "round_prefer_floor",
            sizes=[1, 20, 11, 9]),
    _resize("resize_nearest_tfnn_rpc_x1_7", "nearest", "tf_half_pixel_for_nn", "round_prefer_ceil",
            scales=[1, 1, 1.7, 2.5]),
    _resize("resize_nearest_asym_ceil_down", "nearest", "asymmetric", "ceil", scales=[1, 1, 0.5, 0.5],
            x=[2, 17, 10, 12]),
    _resize("resize_nearest_hp_floor_down_sizes", "nearest", "half_pixel", "floor", sizes=[2, 17, 4, 7],
            x=[2, 17, 10, 12]),
    _resize("resize_nearest_tfnn_floor_x2_c64", "nearest", "tf_half_pixel_for_nn", "floor", scales=[1, 1, 2, 2],
            x=[1, 64, 12, 12]),
    _resize("resize_nearest_opset11_asym_x2", "nearest", "asymmetric", "floor", scales=[1, 1, 2, 2], opset=11),
    _resize("resize_nearest_opset18_axes", "nearest", "asymmetric", "round_prefer_ceil", scales=[2, 3], opset=18,
            axes=[2, 3]),
    _resize("resize_nearest_opset19_ac", "nearest", "align_corners", "ceil", sizes=[1, 20, 8, 3], opset=19),
]

LINEAR = [
    _resize("resize_linear_hp_x2", "linear", "half_pixel", scales=[1, 1, 2, 2]),
    _resize("resize_linear_pthp_x1_5", "linear", "pytorch_half_pixel", scales=[1, 1, 1.5, 1.5]),
    _resize("resize_linear_ac_sizes", "linear", "align_corners", sizes=[1, 20, 11, 9]),
    _resize("resize_linear_asym_x4", "linear", "asymmetric", scales=[1, 1, 4, 4]),
    _resize("resize_linear_hp_down", "linear", "half_pixel", scales=[1, 1, 0.5, 0.5], x=[2, 17, 10, 12]),
    _resize("resize_linear_pthp_sizes_1", "linear", "pytorch_half_pixel", sizes=[1, 20, 1, 9]),
    _resize("resize_linear_ac_x2_c48", "linear", "align_corners", scales=[1, 1, 2, 2], x=[1, 48, 16, 16]),
    _resize("resize_linear_opset18_axes", "linear", "half_pixel", sizes=[7, 13], opset=18, axes=[2, 3],
            antialias=0),
]

OLD = [
    _old("upsample_opset7_nearest_x2", "Upsample", "nearest", [1, 1, 2, 2], 7),
    _old("upsample_opset9_linear_x2", "Upsample", "linear", [1, 1, 2, 2], 9),
    _old("upsample_opset9_nearest_x1_5", "Upsample", "nearest", [1, 1, 1.5, 1.7], 9),
    _old("resize_opset10_nearest_down", "Resize", "nearest", [1, 1, 0.5, 0.5], 10, x=[1, 20, 10, 12]),
    _old("resize_opset10_linear_x1_5", "Resize", "linear", [1, 1, 1.5, 1.5], 10),
]


def _yolo_neck() -> OpCase:
    """YOLOv5's top-down neck: a 1x1 Conv, Resize x2 nearest (asymmetric, floor), Concat with the backbone's
    finer map, then a 3x3 Conv."""
    rng = np.random.default_rng(7)
    init = {"w1": rng.standard_normal((32, 48, 1, 1)).astype(np.float32) * 0.2,
            "w2": rng.standard_normal((16, 64, 3, 3)).astype(np.float32) * 0.1,
            "scales": np.asarray([1, 1, 2, 2], np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="cv1"),
             helper.make_node("Resize", ["c1", "", "scales"], ["up"], name="upsample", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Concat", ["up", "skip"], ["cat"], name="concat", axis=1),
             helper.make_node("Conv", ["cat", "w2"], ["y"], name="cv2", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "yolo_neck",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 10, 10]),
                               helper.make_tensor_value_info("skip", TensorProto.FLOAT, [1, 32, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return OpCase("yolo_neck_resize_concat", model, tol=1e-2)


CASES = NEAREST + LINEAR + OLD + [_yolo_neck()]
