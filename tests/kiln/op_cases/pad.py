"""Pad on run-time data: a zero constant pad of H and W folded into the Conv reading it (codegen/passes/pad_fold.py):
the opset 11+ input form, Pad-2's attributes (through the version converter), opset 18's axes input, an explicit
constant_value 0, asymmetric pads onto a Conv with its own pads, a strided depthwise Conv and a TF-style VALID
Conv. Any other constant pad (pads >= 0, any value, any axes) is one copy_mte kernel (codegen/passes/pad_rules.py):
each form again (inputs, Pad-2 attributes, axes with a negative axis), a value other than 0, padded N/C, one side,
the last axis only. Reflect and edge: one gather_mte kernel per padded axis (both axes, H/W of 4-D, one side, the
axes input, Pad-2's attributes). Crops on run-time data are refused (tests/codegen/passes/test_pad_fold.py)."""
import numpy as np

from . import OpCase

RNG = np.random.default_rng(23)


def _w(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


def _pad_conv(name: str, x: list, pad_inputs: dict, conv: dict, w: np.ndarray, out: list, opset: int = 17,
              pad_attrs: dict | None = None) -> OpCase:
    """Pad(x, *pad_inputs) -> Conv(w, **conv): pad_inputs in order (pads, constant_value, axes; "" skips one)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    names = [k if v is not None else "" for k, v in pad_inputs.items()]
    nodes = [helper.make_node("Pad", ["x", *names], ["p"], name=f"{name}.pad", **(pad_attrs or {})),
             helper.make_node("Conv", ["p", "w"], ["y"], name=f"{name}.conv", **conv)]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in pad_inputs.items() if v is not None]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              inits + [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset >= 13 else 5
    onnx.checker.check_model(m)
    return OpCase(name, m, launches=1)


def _cases() -> list[OpCase]:
    x = [1, 20, 9, 11]
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    return [
        _pad_conv("pad_conv_hw_asym", x, {"pads": pads}, {"pads": [1, 1, 1, 1]}, _w(24, 20, 3, 3), [1, 24, 12, 14]),
        _pad_conv("pad_conv_value0_valid", x, {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
                                               "cval": np.float32(0.0)},
                  {"auto_pad": "VALID", "strides": [2, 2]}, _w(16, 20, 3, 3), [1, 16, 5, 6]),
        _pad_conv("pad_conv_opset10_attrs", x, {}, {"pads": [0, 0, 0, 0]}, _w(24, 20, 3, 3), [1, 24, 9, 11],
                  opset=10, pad_attrs={"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "constant", "value": 0.0}),
        _pad_conv("pad_axes_dw_stride2", x, {"pads": np.array([1, 0, 2, 1], np.int64), "": None,
                                             "axes": np.array([2, 3], np.int64)},
                  {"group": 20, "strides": [2, 2]}, _w(20, 1, 3, 3), [1, 20, 5, 5], opset=18),
    ]


def _pad(name: str, x: list, pads: list, value: float | None = None, axes: list | None = None, opset: int = 17,
         attrs: bool = False, mode: str = "constant", launches: int = 1) -> OpCase:
    """Pad(x) alone: pads/value/axes as inputs (opset 11+; axes from 18), or (attrs) Pad-2's attributes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = {} if attrs else {"pads": np.array(pads, np.int64)}
    if value is not None and not attrs:
        inits["cval"] = np.float32(value)
    if axes is not None:
        inits.update({"cval": np.float32(value or 0.0)} if "cval" not in inits else {})
        inits["axes"] = np.array(axes, np.int64)
    extra = {"pads": pads, "mode": mode, "value": value or 0.0} if attrs else {"mode": mode}
    node = helper.make_node("Pad", ["x", *inits], ["y"], name=f"{name}.pad", **extra)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset >= 13 else 5
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    onnx.checker.check_model(m)
    return OpCase(name, m, launches=launches)


CASES = _cases() + [
    _pad("pad_const_2d_both_sides", [5, 7], [1, 2, 3, 0]),
    _pad("pad_const_value_4d_all_axes", [1, 3, 4, 5], [1, 2, 0, 1, 0, 1, 2, 3], value=-1.5),
    _pad("pad_const_last_axis_only_3d", [2, 3, 20], [0, 0, 5, 0, 0, 7], value=2.0),
    _pad("pad_const_axes_negative_opset18", [2, 6, 4], [1, 2, 3, 0], value=0.25, axes=[-1, 0], opset=18),
    _pad("pad_const_opset2_attrs_value", [3, 5], [0, 1, 2, 0], value=3.0, opset=10, attrs=True),
    # reflect and edge: one gather_mte kernel per padded axis
    _pad("pad_reflect_2d_both_axes", [5, 7], [1, 2, 3, 0], mode="reflect", launches=2),
    _pad("pad_edge_4d_hw", [1, 3, 6, 5], [0, 0, 2, 1, 0, 0, 1, 3], mode="edge", launches=2),
    _pad("pad_reflect_last_axis_3d", [2, 3, 8], [0, 0, 2, 0, 0, 3], mode="reflect"),
    _pad("pad_edge_axes_opset18", [4, 6], [3, 1], axes=[0], mode="edge", opset=18),
    _pad("pad_reflect_opset2_attrs", [3, 4], [2, 0, 0, 3], opset=10, attrs=True, mode="reflect", launches=2),
]
