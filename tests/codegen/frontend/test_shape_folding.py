"""Shape computation folded at build time (issue 17): Range and Mod evaluated, shape arithmetic on run-time values
shaped by evaluating it on placeholders, the folding repeated to a fixed point, and what stays dynamic reported
naming the node, the value and the dim. Small graphs built with onnx.helper; the torch exports of BERT and
ShuffleNetV2 from shared/models."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from conftest import model_file  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from test_frontend import init, save, tensor  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend import onnx_import as onnx_frontend  # noqa: E402
from codegen.frontend.onnx_checks import shape_problems  # noqa: E402
from codegen.frontend.onnx_ops import OPS  # noqa: E402
from codegen.frontend.onnx_passes import fold_constants  # noqa: E402
from codegen.ir.graph import Graph, Node, Value  # noqa: E402


def ints(name, values):
    return init(name, np.array(values, np.int64))


def test_range_folds_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    for start, limit, delta, dtype in ((0, 10, 3, np.int64), (10, 2, -3, np.int64), (0.5, 2.0, 0.25, np.float32),
                                       (5, 5, 1, np.int64), (1, 4, 1, np.int32)):
        node = helper.make_node("Range", ["s", "l", "d"], ["y"])
        kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, kind, []) for n in "sld"],
                                  [helper.make_tensor_value_info("y", kind, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        args = [np.array(v, dtype) for v in (start, limit, delta)]
        want = ort.InferenceSession(model.SerializeToString()).run(None, dict(zip("sld", args)))[0]
        (got,) = OPS["Range"].fold(node, args)
        np.testing.assert_allclose(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_folds_with_the_sign_rule_of_fmod(fmod):
    a, b = np.array([7, -7, 7, -7], np.int64), np.array([3, 3, -3, -3], np.int64)
    (got,) = OPS["Mod"].fold(Node("m", "Mod", ["a", "b"], ["y"], {"fmod": fmod}), [a, b])
    assert list(got) == ([1, -1, 1, -1] if fmod else [1, 2, -2, -1])


def test_range_and_mod_fold_into_a_reshape_target(tmp_path):
    # the target [n, 2, -1] with n = Range(0, Shape(x)[0]).size and 2 = 5 mod 3
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             helper.make_node("Shape", ["r"], ["rn"], name="shape_r"),
             helper.make_node("Mod", ["five", "three"], ["two"], name="mod"),
             helper.make_node("Concat", ["rn", "two", "minus_one"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    inits = [ints("zero", 0), ints("one", 1), ints("five", [5]), ints("three", [3]), ints("minus_one", [-1])]
    path = save(tmp_path, nodes, [tensor("x", ["batch", 4, 3])], [tensor("y", None)], inits)
    g = onnx_frontend.load_onnx(path, batch=3)
    assert [n.op_type for n in g.nodes] == ["Reshape"] and g.nodes[0].attrs["shape"] == (3, 2, 6)


def test_shape_arithmetic_on_a_runtime_value_is_shaped_and_folds(tmp_path):
    # Unsqueeze and Gather of an activation get their shapes from kiln's rules once the Mod computing the axis
    # folds, so the Shape behind them folds and the Reshape gets a constant target. Onnx's own inference
    # cannot see through the Mod that computes the Unsqueeze axis.
    nodes = [helper.make_node("Mod", ["four", "three"], ["axis"], name="mod"),
             helper.make_node("Unsqueeze", ["x", "axis"], ["u"], name="unsqueeze"),
             helper.make_node("Gather", ["u", "zero"], ["gathered"], name="gather", axis=0),
             helper.make_node("Shape", ["gathered"], ["gs"], name="shape"),
             helper.make_node("Reshape", ["x", "gs"], ["y"], name="reshape")]
    inits = [ints("four", [4]), ints("three", [3]), ints("zero", 0)]
    path = save(tmp_path, nodes, [tensor("x", ["batch", 6])], [tensor("y", None)], inits)
    graph, problems = onnx_frontend.build_graph(onnx.load(path), path, 1)
    assert graph.values["u"].shape == (1, 1, 6) and graph.values["gathered"].shape == (1, 6)
    assert "gs" in graph.initializers or graph.values["y"].shape == (1, 6)
    # the Unsqueeze and Gather of the activation are run-time views now (onnx_structure): nothing is refused
    assert problems == []


def test_folding_repeats_to_a_fixed_point():
    # a node list in which the Reshape comes before the Concat that computes its target: one pass in order
    # leaves the Reshape unshaped, the next round (the target now constant) shapes it and folds the Shape after it
    values = {n: Value(n, s, d) for n, s, d in (("x", (2, 2, 5), "float32"), ("r", None, "float32"),
                                               ("t", None, "int64"), ("rs", None, "int64"), ("y", None, "float32"),
                                               ("a", (1,), "int64"), ("b", (1,), "int64"))}
    nodes = [Node("reshape", "Reshape", ["x", "t"], ["r"]), Node("concat", "Concat", ["a", "b"], ["t"], {"axis": 0}),
             Node("shape", "Shape", ["r"], ["rs"]), Node("reshape2", "Reshape", ["x", "rs"], ["y"])]
    g = Graph("g", [values["x"]], [values["y"]], nodes, values,
              {"a": np.array([2], np.int64), "b": np.array([-1], np.int64)}, 17)
    log = []
    folded = fold_constants(g, log)
    assert [n.name for n in folded.nodes] == ["reshape", "reshape2"]
    assert folded.values["r"].shape == (2, 10) and list(folded.initializers["rs"]) == [2, 10]
    assert folded.values["y"].shape == (2, 10)
    again = []
    assert [n.name for n in fold_constants(folded, again).nodes] == ["reshape", "reshape2"] and again == []


def test_shape_depending_on_runtime_values_names_node_and_dim(tmp_path):
    # Expand to a shape computed from the values of a run-time tensor: nothing at build time determines it
    nodes = [helper.make_node("Cast", ["x"], ["xi"], name="cast", to=TensorProto.INT64),
             helper.make_node("Expand", ["c", "xi"], ["e"], name="expand"),
             helper.make_node("Relu", ["e"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", [2])], [tensor("y", None)],
                [init("c", np.ones((1, 1), np.float32))])
    # the refusal names the run-time Expand (an op problem hides the shapes downstream of it) ...
    problems = onnx_frontend.check_onnx(path)
    assert [p["node"] for p in problems] == ["cast", "expand"]
    # ... and the shape check itself names the node, the value, its dims and why they are unknown
    graph, _ = onnx_frontend.build_graph(onnx.load(path), path, 1)
    (p,) = shape_problems(graph, OPS)
    assert p.node == "expand" and "of 'e'" in p.reason and "is not determined at build time" in p.reason, p.reason
    assert "the values of 'xi', which are computed at run time" in p.reason


def test_a_rule_rejection_is_the_reason_not_a_missing_shape(tmp_path):
    # a MatMul whose inner dims differ: onnx inference leaves the output unknown, kiln's rule says why
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None)],
                [init("w", np.ones((4, 5), np.float32))])
    with pytest.raises(KilnError) as e:
        onnx_frontend.load_onnx(path)
    assert "node 'mm'" in str(e.value) and "inner dimensions differ" in str(e.value)
    assert "no static shape" not in str(e.value) and "got None" not in str(e.value)


def test_bert_and_shufflenet_exports_get_past_shape_computation():
    for name in ("bert_layer_torch.onnx", "shufflenet_v2_x1_0.onnx"):
        graph, problems = onnx_frontend.build_graph(onnx.load(model_file(name)), name, 1)
        assert not [p for p in problems if p.kind == "shape"], name
        shapes = {n: v.shape for n, v in graph.values.items()}
        assert all(s is not None and all(isinstance(d, int) and d > 0 for d in s) for s in shapes.values()), name
        # the run-time uses of shape ops (the packed QKV split, the channel split) are accepted too
        assert problems == [], name
