"""What kiln's ConvTranspose does not take is refused naming the node and what is accepted (the values it takes are
checked against ONNX Runtime in tests/kiln/op_cases/conv_transpose.py); the normalised attributes."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402


def convt_model(tmp_path, k=(3, 3), x=(1, 4, 5, 5), runtime_weight=False, **attrs):
    """A ConvTranspose named the_node, 4 -> 6 channels."""
    w = np.ones((x[1], 6, *k), np.float32)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x))]
    if runtime_weight:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [] if runtime_weight else [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "convt.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("k, attrs, reason", [
    ((1, 1), {"strides": [2, 2], "group": 2}, "H phase 1 is reached by no kernel tap (kernel smaller than the stride)"),
    ((3, 3), {"strides": [2, 2], "dilations": [2, 2], "group": 2}, "is reached by no kernel tap"),
    ((3, 3), {"strides": [3, 3], "pads": [1, 1, 1, 1], "group": 2}, "H phase 1 would need negative pads (0, -1)"),
    ((3, 3), {"strides": [2, 2], "output_padding": [2, 0]}, "output_padding=[2, 0] must be >= 0 and smaller than"),
    ((3, 3), {"strides": [2, 2], "output_shape": [14, 14]}, "output size 14 exceeds what the input reaches (11)"),
])
def test_convtranspose_refused(tmp_path, k, attrs, reason):
    assert reason in refusal(convt_model(tmp_path, k, **attrs))


@pytest.mark.parametrize("k, attrs", [((1, 1), {"strides": [2, 2]}), ((3, 3), {"strides": [2, 2], "dilations": [2, 2]}),
                                      ((3, 3), {"strides": [3, 3], "pads": [1, 1, 1, 1]})])
def test_one_group_takes_what_the_phases_cannot(tmp_path, k, attrs):
    """With one group the GEMM + col2im form computes any phase (a phase no tap reaches is the bias alone)."""
    (n,) = onnx_import.load_onnx(convt_model(tmp_path, k, **attrs)).nodes
    assert n.attrs["phases"] is False


def test_convtranspose_runtime_weight_refused(tmp_path):
    assert "the weight (input 1) is computed at run time" in refusal(convt_model(tmp_path, runtime_weight=True))


def test_convtranspose_normalised(tmp_path):
    (n,) = onnx_import.load_onnx(convt_model(tmp_path, (4, 4), strides=[2, 3], auto_pad="SAME_LOWER")).nodes
    assert (n.attrs["pads"], n.attrs["out_hw"], n.attrs["output_padding"]) == ((1, 1, 1, 0), (10, 15), (0, 0))


def test_batchnorm_folds_into_grouped_convtranspose(tmp_path):
    """ConvTranspose (2 groups) -> BatchNormalization is one node whose weight and bias give what both gave."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(3)
    init = {"w": rng.standard_normal((4, 3, 2, 2)), "b": rng.standard_normal(6), "s": 1 + rng.random(6),
            "t": rng.standard_normal(6), "m": rng.standard_normal(6), "v": 1 + rng.random(6)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], name="up", strides=[2, 2], group=2),
             helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["y"], name="bn")]

    def save(nodes, init, name):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in init.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, tmp_path / name)
        return ort.InferenceSession(str(tmp_path / name)).run(None, {"x": x})[0]
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    want = save(nodes, init, "bn.onnx")
    g = onnx_import.load_onnx(tmp_path / "bn.onnx")
    (n,) = g.nodes
    assert n.op_type == "ConvTranspose" and n.source == ["up", "bn"]
    got = save([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], group=2)],
               {"w": g.initializers[n.inputs[1]], "b": g.initializers[n.inputs[2]]}, "folded.onnx")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
