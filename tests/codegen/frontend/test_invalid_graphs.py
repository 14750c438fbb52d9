"""Invalid graphs (issue 18, class 3) and element types (issue 17): each refusal is a KilnError naming the node or
value at fault and what would be accepted, never a traceback; valid multi-input/output graphs still load."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from test_frontend import init, save, tensor  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend import onnx_import as onnx_frontend  # noqa: E402


def refusal(path) -> str:
    with pytest.raises(KilnError) as e:
        onnx_frontend.load_onnx(path)
    assert e.value.__cause__ is None
    return str(e.value)


def test_conv_whose_input_channels_do_not_match_its_weight(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    path = save(tmp_path, nodes, [tensor("x", [1, 4, 8, 8])], [tensor("y", None)],
                [init("w", np.ones((8, 3, 3, 3), np.float32))])
    msg = refusal(path)
    assert "node 'conv' (Conv" in msg and "input has 4 channels, weight [8, 3, 3, 3] with group 1 expects 3" in msg
    # the same with the output shape declared in the file, as an exporter would write it
    path = save(tmp_path, nodes, [tensor("x", [1, 4, 8, 8])], [tensor("y", [1, 8, 8, 8])],
                [init("w", np.ones((8, 3, 3, 3), np.float32))], name="declared.onnx")
    assert "input has 4 channels" in refusal(path)


def test_two_nodes_writing_one_tensor(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="second")]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)]))
    assert "value 'y'" in msg and "written by two nodes, 'first' (Relu) and 'second' (Neg)" in msg
    assert "exactly once" in msg


def test_a_node_writing_a_graph_input(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Relu", ["y"], ["x"], name="back")]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)]))
    assert "node 'back' (Relu)" in msg and "writes 'x', which is a graph input" in msg


def test_a_graph_output_no_node_produces(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None), tensor("ghost", [1, 4])]))
    assert "graph output 'ghost'" in msg and "no node produces it" in msg
    for check in (onnx_frontend.check_onnx,):
        with pytest.raises(KilnError, match="graph output 'ghost'"):
            check(tmp_path / "model.onnx")


def test_a_constant_graph_output(tmp_path):
    # an initializer listed as a graph output reached the lowering as a KeyError
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None), tensor("c", [4])],
                       [init("c", np.ones(4, np.float32))]))
    assert "graph output 'c'" in msg and "it is an initializer (a constant)" in msg


def test_a_graph_input_that_is_also_an_output_still_plans(tmp_path):
    from codegen.ir.optlog import OptLog
    from codegen.options import parse_options
    from codegen.pipeline import plan_model
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None), tensor("x", [1, 4])])
    stages = plan_model(onnx_frontend.load_onnx(path), "io", parse_options({"KILN_MODELS": ""}), OptLog())
    assert [name for name, _ in stages.lowered.graph_outputs] == ["y", "x"]


@pytest.mark.parametrize("dim,what", [(0, "dim 1 is 0 (an empty tensor)"), (-3, "dim 1 is negative (-3)")])
def test_empty_or_negative_input_dims_are_named_not_called_dynamic(tmp_path, dim, what):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, dim, 4])], [tensor("y", None)]))
    assert f"input 'x' {what}" in msg and "dynamic" not in msg and ">= 1" in msg


@pytest.mark.parametrize("elem,name", [(TensorProto.INT64, "int64"), (TensorProto.BOOL, "bool"),
                                       (TensorProto.UINT8, "uint8"), (TensorProto.INT32, "int32")])
def test_non_float_data_is_refused_naming_value_and_type(tmp_path, elem, name):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [helper.make_tensor_value_info("x", elem, [1, 4])],
                [helper.make_tensor_value_info("y", elem, None)])
    msg = refusal(path)
    assert f"input 'x' has element type {name}" in msg and "node 'relu' (Relu) reads it as data" in msg
    assert "accepted only as index, shape or condition operands" in msg


def test_an_intermediate_int_value_read_as_data(tmp_path):
    # Cast of an activation to int64, then added: the Cast's output is the value at fault
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["ri"], name="cast", to=TensorProto.INT64),
             helper.make_node("Add", ["ri", "ri"], ["y"], name="add")]
    problems = onnx_frontend.check_onnx(save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)]))
    assert any(p["node"] == "add" and "value 'ri' has element type int64" in p["reason"] for p in problems), problems


def test_int64_indices_are_not_a_type_problem(tmp_path):
    # an embedding lookup: int64 ids are Gather indices (a gather_mte kernel), not a type problem
    nodes = [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")]
    path = save(tmp_path, nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                [tensor("y", None)], [init("table", np.ones((10, 3), np.float32))])
    problems = onnx_frontend.check_onnx(path)
    assert problems == []


def test_float16_inputs_are_float_values(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    assert onnx_frontend.check_onnx(path) == []


def test_several_inputs_and_outputs_load_and_lower(tmp_path):
    # two inputs, two outputs (one an intermediate also read by another node)
    from codegen.ir.optlog import OptLog
    from codegen.options import parse_options
    from codegen.pipeline import plan_model
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w"], ["m"], name="mm")]
    path = save(tmp_path, nodes, [tensor("a", [1, 32, 64]), tensor("b", [1, 32, 64])],
                [tensor("r", None), tensor("m", None)], [init("w", np.ones((64, 16), np.float32))])
    g = onnx_frontend.load_onnx(path)
    assert [v.name for v in g.inputs] == ["a", "b"] and [(v.name, v.shape) for v in g.outputs] == [
        ("r", (1, 32, 64)), ("m", (1, 32, 16))]
    stages = plan_model(g, "two_io", parse_options({"KILN_MODELS": ""}), OptLog(), memory=False)
    assert [name for name, _ in stages.lowered.graph_inputs] == ["a", "b"]


def _conv_with_weight(tmp_path, w, name="w.onnx"):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1, 1])]
    return save(tmp_path, nodes, [tensor("x", [1, 4, 4, 4])], [tensor("y", None)], [init("w", w)], name=name)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_weight_is_refused_naming_the_initializer(tmp_path, bad):
    w = np.ones((8, 4, 1, 1), np.float32)
    w[3, 2, 0, 0] = bad
    msg = refusal(_conv_with_weight(tmp_path, w))
    assert "node 'conv' (Conv" in msg and "constant 'w' (input 1): 1 of its 32 values are non-finite" in msg
    assert "index [3, 2, 0, 0]" in msg and "kiln bakes only finite weights" in msg


def test_batchnorm_with_a_negative_variance_is_refused(tmp_path):
    c = 4
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn", epsilon=1e-5)]
    v = np.ones(c, np.float32)
    v[2] = -0.5
    inits = [init("w", np.ones((c, c, 1, 1), np.float32)), init("g", np.ones(c, np.float32)),
             init("b", np.zeros(c, np.float32)), init("m", np.zeros(c, np.float32)), init("v", v)]
    msg = refusal(save(tmp_path, nodes, [tensor("x", [1, c, 4, 4])], [tensor("y", None)], inits))
    assert "node 'bn' (BatchNormalization" in msg and "variance 'v' + epsilon 1e-05 is <= 0 for 1 channel(s)" in msg
    assert "channel 2: variance -0.5" in msg


def test_a_weight_beyond_fp16_stops_lowering_naming_it(tmp_path):
    from codegen.passes import lowering
    w = np.ones((8, 4, 1, 1), np.float32)
    w[0, 0, 0, 0] = 1e6  # finite in the file, beyond fp16's 65504 once packed
    g = onnx_frontend.load_onnx(_conv_with_weight(tmp_path, w))
    with pytest.raises(KilnError) as e:
        lowering.lower(g, "big", "fp16")
    msg = str(e.value)
    assert "weight 'conv.w' of node 'conv'" in msg and "1 of its" in msg and "do not fit float16" in msg
