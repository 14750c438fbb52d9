"""ArgMax / ArgMin against ONNX Runtime (codegen/frontend/onnx_argmax.py rewrites them: ReduceMax/Min, a K=1 GEMM
repeating it along the row, Equal, Where over the positions, ReduceMin/Max): the last axis, channels of NCHW (moved
last by a copy), a leading axis, negative axes; keepdims 0/1; select_last_index 0/1 on inputs with ties (small
integers, exact in fp16) where first and last differ; a segmentation head (Conv, ArgMax over the classes). The
result is int64 (compared exactly: tol 0)."""
import numpy as np

from . import OpCase


def _arg(name, op, shape, axis, keepdims=1, last=0, ties=False):
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    inputs = {"x": lambda rng, s: rng.integers(0, 4, s)} if ties else {}
    return OpCase(name, model, tol=0.0, inputs=inputs)


CASES = [
    _arg("argmax_last_keep", "ArgMax", [6, 50], -1),
    _arg("argmax_channels_drop", "ArgMax", [2, 12, 5, 6], 1, keepdims=0),
    _arg("argmax_axis0_keep", "ArgMax", [5, 7, 9], 0),
    _arg("argmax_ties_first", "ArgMax", [4, 30], 1, ties=True),
    _arg("argmax_ties_last", "ArgMax", [4, 30], 1, last=1, ties=True),
    _arg("argmax_ties_last_axis_neg3_drop", "ArgMax", [6, 5, 8], -3, keepdims=0, last=1, ties=True),
    _arg("argmin_axis2_keep", "ArgMin", [2, 3, 20, 4], 2),
    _arg("argmin_ties_last_drop", "ArgMin", [3, 17], -1, keepdims=0, last=1, ties=True),
    _arg("argmin_ties_first", "ArgMin", [3, 17], 1, ties=True),
]


def _seg_head():
    """A segmentation head as torch exports it: 1x1 Conv to class scores, ArgMax over the classes (keepdims 1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(1).standard_normal((5, 16, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["s"], name="classifier"),
             helper.make_node("ArgMax", ["s"], ["y"], name="argmax", axis=1, keepdims=1)]
    graph = helper.make_graph(nodes, "seg", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return OpCase("net_segmentation_conv_argmax", model, tol=0.0)


CASES.append(_seg_head())
