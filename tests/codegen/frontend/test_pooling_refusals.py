"""What stays unsupported in pooling, the Reduce ops and standalone BatchNormalization is refused naming the node,
the attribute and what is accepted (the frontend's checks, then the lowering's); and the ceil_mode output
rule (tests/kiln/op_cases/pooling.py checks the values against ONNX Runtime)."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend import onnx_import  # noqa: E402
from codegen.frontend.onnx_rules import ceil_extra  # noqa: E402
from codegen.passes.lowering import lower  # noqa: E402


def one_op(tmp_path, op, shape, consts=None, opset=17, **attrs):
    consts = consts or {}
    node = helper.make_node(op, ["x", *consts], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("op, attrs, reason", [
    ("AveragePool", {"kernel_shape": [3, 3], "dilations": [2, 2]},
     "dilations=[2, 2] are not supported (only 1; MaxPool takes any)"),
    ("MaxPool", {"kernel_shape": [3, 3], "storage_order": 1}, "storage_order=1 is not supported"),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "auto_pad": "SAME_UPPER"},
     "ceil_mode=1 with auto_pad='SAME_UPPER' is not supported (ceil_mode=1 only with explicit pads)"),
    ("AveragePool", {"kernel_shape": [3, 3, 3]}, "only 2-D pooling is supported"),
])
def test_pool_attributes_refused_by_the_frontend(tmp_path, op, attrs, reason):
    shape = [1, 5, 9, 9, 9] if len(attrs["kernel_shape"]) == 3 else [1, 5, 9, 9]
    opset = 19 if op == "AveragePool" and "dilations" in attrs else 17  # AveragePool has dilations from opset 19
    assert reason in refusal(one_op(tmp_path, op, shape, opset=opset, **attrs))


def lowering_error(path) -> str:
    with pytest.raises(KilnError) as e:
        lower(onnx_import.load_onnx(path), "m")
    assert "node 'the_node'" in str(e.value)
    return str(e.value)


def test_reduce_mean_over_too_many_values_refused_by_the_lowering(tmp_path):
    msg = lowering_error(one_op(tmp_path, "ReduceMean", [1, 64, 16, 17], axes=[1, 2, 3], keepdims=1))
    assert "ReduceMean over 17408 values (axes [1, 2, 3] of [1, 64, 16, 17]): 1/17408 is below fp16's normal " \
           "range" in msg


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceL2"])
def test_vector_reduce_over_too_many_values_refused_by_the_lowering(tmp_path, op):
    msg = lowering_error(one_op(tmp_path, op, [2, 3, 40, 103], axes=[2, 3], keepdims=0))
    assert f"{op} over 4120 values (axes [2, 3] of [2, 3, 40, 103]): the reduce_vector kernel takes rows of at " \
           f"most 4096 values" in msg


@pytest.mark.parametrize("op, opset", [("ReduceSum", 13), ("ReduceMax", 18), ("ReduceL2", 18)])
def test_reduce_axes_computed_at_run_time_refused(tmp_path, op, opset):
    node = helper.make_node(op, ["x", "a"], ["y"], name="the_node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7]),
                                            helper.make_tensor_value_info("a", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    assert "axes (input 1) are computed at run time; kiln needs them constant" in refusal(tmp_path / "m.onnx")


def test_reduce_noop_without_axes_is_the_identity(tmp_path):
    """noop_with_empty_axes=1 and no axes: the output is the input (a view, no kernel)."""
    for op in ("ReduceMean", "ReduceMax"):
        lowered = lower(onnx_import.load_onnx(one_op(tmp_path, op, [2, 7], opset=18, noop_with_empty_axes=1)), "m")
        assert not [s for s in lowered.steps if s.kind == "kernel"]


def test_batchnorm_of_3d_input_refused_by_the_lowering(tmp_path):
    consts = {k: np.ones(4, np.float32) for k in ("scale", "bias", "mean", "var")}
    msg = lowering_error(one_op(tmp_path, "BatchNormalization", [2, 4, 9], consts))
    assert "standalone BatchNormalization of a 3-D input [2, 4, 9]: only 4-D NCHW and 2-D (N, C)" in msg


def test_batchnorm_training_mode_refused(tmp_path):
    consts = {k: np.ones(4, np.float32) for k in ("scale", "bias", "mean", "var")}
    path = one_op(tmp_path, "BatchNormalization", [2, 4, 3, 3], consts, training_mode=1)
    assert "training_mode=1 is not supported (inference only)" in refusal(path)


@pytest.mark.parametrize("size, begin, end, k, s, extra", [
    (14, 0, 0, 3, 2, 1),    # 14 -> ceil(11/2)+1 = 7 windows: the last reaches one past the input
    (13, 0, 0, 3, 2, 0),    # exact: ceil_mode changes nothing (SqueezeNet's 111, 55, 27 are all exact)
    (14, 1, 1, 3, 3, 0),    # ceil gives 6, but window 6 would start at 15, in the end padding: dropped, 5 remain
    (12, 1, 1, 3, 3, 1),    # ceil gives 5 (floor 4); the fifth window starts at 12, inside the input
    (12, 0, 0, 2, 3, 0),    # 12 -> 4 windows at 0, 3, 6, 9; a fifth would start at 12, outside the input
    (15, 1, 1, 3, 2, 0),    # 8 windows, the last ends on the end padding
])
def test_ceil_mode_extra_rows(size, begin, end, k, s, extra):
    assert ceil_extra(size, begin, end, k, s) == extra
