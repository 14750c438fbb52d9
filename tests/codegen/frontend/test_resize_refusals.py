"""What kiln's Resize does not take is refused naming the node, the attribute or input and what is accepted; the
coordinate and rounding rules (tests/kiln/op_cases/resize.py checks the values against ONNX Runtime); Upsample /
Resize-10 keep their semantics through the version converter."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402
from codegen.ir.resize_spec import ResizeSpec, nearest_index, source_coordinate  # noqa: E402

SCALES2 = np.array([1, 1, 2, 2], np.float32)


def resize_model(tmp_path, inputs: dict, opset=13, shape=(1, 4, 6, 6), x_runtime_scales=False, **attrs):
    """A Resize named the_node reading x and the given inputs (name -> array; "" leaves an input out)."""
    names = ["x"] + [k if v is not None else "" for k, v in inputs.items()]
    node = helper.make_node("Resize", names, ["y"], name="the_node", **attrs)
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    if x_runtime_scales:
        graph_inputs.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4]))
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inputs.items()
                               if v is not None and not (x_runtime_scales and k == "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / "resize.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("attrs, reason", [
    ({"mode": "cubic"}, "mode='cubic' is not supported (accepted: nearest, linear)"),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
     "coordinate_transformation_mode='tf_crop_and_resize' is not supported (accepted: half_pixel"),
    ({"mode": "nearest", "nearest_mode": "nearest"}, "nearest_mode='nearest' is not supported"),
    ({"mode": "linear", "antialias": 1}, "antialias=1 is not supported (only 0)"),
    ({"mode": "nearest", "exclude_outside": 1}, "exclude_outside=1 is not supported (only 0)"),
])
def test_resize_attributes_refused(tmp_path, attrs, reason):
    opset = 18 if "antialias" in attrs else 13
    assert reason in refusal(resize_model(tmp_path, {"roi": None, "scales": SCALES2}, opset=opset, **attrs))


def test_resize_inputs_refused(tmp_path):
    assert "resizes N or C" in refusal(resize_model(tmp_path, {"roi": None, "scales": np.array([1, 2, 2, 2],
                                                                                               np.float32)}))
    assert "scales (input 2) is computed at run time" in refusal(
        resize_model(tmp_path, {"roi": None, "scales": SCALES2}, x_runtime_scales=True))
    sizes = np.array([1, 4, 12, 12], np.int64)
    assert "exactly one of scales (input 2) and sizes (input 3)" in refusal(
        resize_model(tmp_path, {"roi": None, "scales": SCALES2, "sizes": sizes}))
    assert "keep_aspect_ratio_policy='not_larger' is not supported (only stretch)" in refusal(
        resize_model(tmp_path, {"roi": None, "scales": None, "sizes": sizes}, opset=18,
                     keep_aspect_ratio_policy="not_larger"))
    assert "4-D NCHW" in refusal(resize_model(tmp_path, {"roi": None, "scales": np.ones(3, np.float32)},
                                              shape=(1, 4, 6)))


def test_resize10_semantics_kept_through_the_converter(tmp_path):
    """Upsample / Resize-10 compute asymmetric coordinates and round down when upsampling (up when
    downsampling); the converted Resize-13 says so instead of taking Resize-11's defaults."""
    node = helper.make_node("Upsample", ["x", "s"], ["y"], name="the_node", mode="nearest")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 1, 1.5, 2], np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "up.onnx")
    (n,) = [n for n in onnx_import.load_onnx(tmp_path / "up.onnx").nodes if n.op_type == "Resize"]
    assert (n.attrs["coord"], n.attrs["nearest"], n.attrs["out_hw"]) == ("asymmetric", "floor", (7, 10))


def test_resize10_nearest_up_and_down_refused(tmp_path):
    node = helper.make_node("Resize", ["x", "s"], ["y"], name="the_node", mode="nearest")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 1, 2, 0.5], np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "mixed.onnx")
    assert "upsamples one axis and downsamples another" in refusal(tmp_path / "mixed.onnx")


def test_coordinates_and_rounding():
    assert [float(source_coordinate(x, 2.0, 8, 4, "half_pixel")) for x in (0, 1, 7)] == [-0.25, 0.25, 3.25]
    assert float(source_coordinate(3, 2.0, 1, 4, "pytorch_half_pixel")) == 0.0
    assert float(source_coordinate(3, 2.0, 7, 4, "align_corners")) == 1.5
    assert float(source_coordinate(3, 2.0, 8, 4, "tf_half_pixel_for_nn")) == 1.75
    assert [nearest_index(np.float32(v), m) for v, m in ((1.5, "round_prefer_floor"), (1.5, "round_prefer_ceil"),
                                                          (1.2, "ceil"), (1.8, "floor"), (-0.5, "round_prefer_ceil"))] \
        == [1, 2, 2, 1, -1]
    s = ResizeSpec(1, 16, 4, 4, 8, 8, "linear", "half_pixel", "", 2.0, 2.0)
    assert s.taps(1)[:3] == [(0, 0, 1.0, 0.0), (0, 1, 0.75, 0.25), (0, 1, 0.25, 0.75)]
    assert s.taps(1)[-1] == (3, 3, 1.0, 0.0)  # clamped at the edge
