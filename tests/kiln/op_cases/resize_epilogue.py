"""Resize + an elementwise program as its epilogue (codegen/passes/program_epilogue.py: one resize_vector launch
applies the program to each output row in UB before the store) against ONNX Runtime: nearest and bilinear, with
a Sigmoid (a segmentation head), a HardSwish and a scalar Mul over channels that do not fill C0 (programs
mapping 0 to 0 keep the padded lanes zero), an Add of a scalar constant. Not fused (audited): a Sigmoid
(0 -> 0.5) over 20 channels."""
import numpy as np
from onnx import helper

from . import OpCase, graph_case


def _case(name: str, c: int, hw: tuple[int, int], out: tuple[int, int], mode: str, coord: str, tail: list,
          launches: int, init: dict | None = None, **attrs) -> OpCase:
    """x [1, c, *hw] -> Resize to `out` (sizes) -> the nodes of `tail` reading "r"."""
    init = {"sizes": np.asarray([1, c, *out], np.int64), **(init or {})}
    resize = helper.make_node("Resize", ["x", "", "", "sizes"], ["r"], mode=mode,
                              coordinate_transformation_mode=coord, **attrs)
    case = graph_case(name, [resize] + tail, [1, c, *hw], [1, c, *out], {}, 5e-3, launches)
    from onnx import numpy_helper
    case.model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in init.items())  # type: ignore
    return case


def _n(op: str, ins: list[str], out: str = "y", **attrs):
    return helper.make_node(op, ins, [out], **attrs)


CASES = [
    # a segmentation head's upsampling: nearest x2 (asymmetric, floor as torch exports it) + Sigmoid, 32 channels
    _case("rsepi_nearest_sigmoid_c32", 32, (5, 6), (10, 12), "nearest", "asymmetric", [_n("Sigmoid", ["r"])], 1,
          nearest_mode="floor"),
    # bilinear x2 + HardSwish over 20 channels (0 -> 0)
    _case("rsepi_linear_hardswish_c20", 20, (5, 7), (10, 14), "linear", "half_pixel", [_n("HardSwish", ["r"])], 1),
    # nearest x1.5 (half_pixel, round_prefer_ceil) times a scalar constant
    _case("rsepi_nearest_mul_scalar_c20", 20, (4, 6), (6, 9), "nearest", "half_pixel",
          [_n("Mul", ["r", "k"])], 1, {"k": np.asarray(0.5, np.float32)}, nearest_mode="round_prefer_ceil"),
    # bilinear (align_corners) + a scalar constant added, 32 channels
    _case("rsepi_linear_add_scalar_c32", 32, (4, 5), (7, 9), "linear", "align_corners",
          [_n("Add", ["r", "k"])], 1, {"k": np.asarray(0.25, np.float32)}),
    # not fused: Sigmoid(0) = 0.5 would fill the 12 padded lanes of 20 channels
    _case("rsepi_nearest_sigmoid_c20_unfused", 20, (4, 4), (8, 8), "nearest", "asymmetric",
          [_n("Sigmoid", ["r"])], 2, nearest_mode="floor"),
]
