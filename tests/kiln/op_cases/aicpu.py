"""The AI CPU fallback (issue 19): ops with no AI Core kernel family run as host steps between AI Core launches,
evaluated by onnx's reference evaluator. Each model puts such an op between kernels, so the boundary conversions
(NC1HWC0 <-> rows, fp16 arena <-> fp32 host) are checked both ways: CumSum between two convolutions, Sign and
TopK (values only) around an elementwise kernel with a graph output straight from the AI CPU, Einsum of two
kernels' outputs (two run-time inputs)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase


def _model(name: str, nodes, inputs, outputs, init) -> object:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _cumsum_between_convs() -> OpCase:
    """Conv+Relu (NC1HWC0) -> CumSum over W on the AI CPU (rows) -> 1x1 Conv (NC1HWC0 again)."""
    rng = np.random.default_rng(3)
    init = {"w": (rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32), "axis": np.array(3, np.int64),
            "w2": (rng.standard_normal((8, 16, 1, 1)) / 4).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("CumSum", ["r", "axis"], ["s"], name="cumsum"),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv2")]
    return OpCase("aicpu_cumsum_between_convs", _model("aicpu_cumsum", nodes, [("x", [1, 8, 6, 6])],
                                                       [("y", [1, 8, 6, 6])], init), tol=8e-3, launches=2)


def _sign_topk() -> OpCase:
    """Sign (AI CPU) -> Mul with the input (a kernel: |x|) -> TopK's values over the last axis (AI CPU, its
    indices unused), which is the graph output."""
    nodes = [helper.make_node("Sign", ["x"], ["s"], name="sign"),
             helper.make_node("Mul", ["s", "x"], ["a"], name="abs"),
             helper.make_node("TopK", ["a", "k"], ["y", "idx"], axis=-1, name="topk")]
    return OpCase("aicpu_sign_topk", _model("aicpu_sign_topk", nodes, [("x", [2, 3, 40])], [("y", [2, 3, 5])],
                                            {"k": np.array([5], np.int64)}), launches=1)


def _einsum_of_two_kernels() -> OpCase:
    """Einsum of two Relu results (two run-time inputs of one AI CPU step), then a Sigmoid kernel."""
    nodes = [helper.make_node("Relu", ["a"], ["ra"], name="relu_a"),
             helper.make_node("Relu", ["b"], ["rb"], name="relu_b"),
             helper.make_node("Einsum", ["ra", "rb"], ["e"], equation="bij,bjk->bik", name="einsum"),
             helper.make_node("Sigmoid", ["e"], ["y"], name="sigmoid")]
    return OpCase("aicpu_einsum", _model("aicpu_einsum", nodes, [("a", [2, 4, 24]), ("b", [2, 24, 8])],
                                         [("y", [2, 4, 8])], {}), launches=3)


CASES = [_cumsum_between_convs(), _sign_topk(), _einsum_of_two_kernels()]
