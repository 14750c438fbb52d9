"""Fuzzing the ONNX frontend and the model stages (issue 18): real exports from shared/models and a small generated
graph, mutated field by field (dims, attributes, element types, node wiring, op types, truncated bytes). Every
input gives a KilnError naming what is wrong, or a graph the build's model stages plan (fusion, patterns,
elementwise programs, lowering, specs, arena) or refuse with a KilnError; never another exception. Fixed seed,
bounded budget: the examples run here are the CI's executions."""
import copy

import numpy as np
import pytest
from conftest import model_file
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend import onnx_import as onnx_frontend  # noqa: E402
from codegen.frontend.onnx_read import read_model  # noqa: E402
from codegen.ir.optlog import OptLog  # noqa: E402
from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan_model  # noqa: E402

OPTIONS = parse_options({"KILN_MODELS": ""})

REAL = ("squeezenet1_1.onnx", "mobilenet_v2.onnx", "mobilenet_v3_small.onnx", "bert_layer_torch.onnx")
FUZZ = settings(max_examples=1000, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])


def small_cnn():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "fc"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Reshape", ["g", "shape"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "fc"], ["m"], name="fc"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def seeds():
    return [small_cnn()] + [read_model(model_file(name)) for name in REAL]


def _tensor_types(m):
    g = m.graph
    return [v.type.tensor_type for v in [*g.input, *g.output, *g.value_info]]


def mutate_dim(m, data):
    types = [t for t in _tensor_types(m) if t.shape.dim]
    inits = list(m.graph.initializer)
    if types and data.draw(st.booleans()):
        dim = data.draw(st.sampled_from(list(data.draw(st.sampled_from(types)).shape.dim)))
        new = data.draw(st.sampled_from([0, -3, 1, 7, 10 ** 6, 2 ** 40, None]))
        if new is None:
            dim.dim_param = "N"
        else:
            dim.dim_value = new
    elif inits:
        t = data.draw(st.sampled_from(inits))
        if t.dims:
            t.dims[data.draw(st.integers(0, len(t.dims) - 1))] = data.draw(st.sampled_from([0, 1, 3, 1000]))


def mutate_attribute(m, data):
    node = data.draw(st.sampled_from(list(m.graph.node)))
    if node.attribute and data.draw(st.booleans()):
        a = data.draw(st.sampled_from(list(node.attribute)))
        action = data.draw(st.sampled_from(["drop", "int", "ints", "float", "string"]))
        if action == "drop":
            node.attribute.remove(a)
            return
        node.attribute.remove(a)
        value = {"int": st.integers(-5, 2 ** 31), "ints": st.lists(st.integers(-3, 9), min_size=1, max_size=6),
                 "float": st.floats(allow_nan=True), "string": st.sampled_from(["", "SAME_UPPER", "bogus"])}[action]
        node.attribute.append(helper.make_attribute(a.name, data.draw(value)))
    else:
        name = data.draw(st.sampled_from(["axis", "pads", "strides", "group", "kernel_shape", "perm", "ceil_mode",
                                          "dilations", "keepdims", "auto_pad", "epsilon", "transB"]))
        value = data.draw(st.integers(-3, 5) | st.lists(st.integers(-2, 4), min_size=1, max_size=5) | st.just("VALID"))
        node.attribute.append(helper.make_attribute(name, value))


def mutate_dtype(m, data):
    candidates = _tensor_types(m) + list(m.graph.initializer)
    t = data.draw(st.sampled_from(candidates))
    new = data.draw(st.sampled_from([TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL, TensorProto.INT8,
                                     TensorProto.DOUBLE, TensorProto.STRING, TensorProto.UINT8]))
    if isinstance(t, TensorProto):
        t.data_type = new  # the raw bytes now read as another type: sizes may no longer match
    else:
        t.elem_type = new


def mutate_wiring(m, data):
    nodes = list(m.graph.node)
    node = data.draw(st.sampled_from(nodes))
    action = data.draw(st.sampled_from(["rewire", "dangle", "empty", "drop_node", "swap", "drop_output"]))
    values = [o for n in nodes for o in n.output] + [i.name for i in m.graph.input]
    if action in ("rewire", "dangle", "empty") and node.input:
        i = data.draw(st.integers(0, len(node.input) - 1))
        node.input[i] = {"rewire": data.draw(st.sampled_from(values)), "dangle": "no_such_value", "empty": ""}[action]
    elif action == "drop_node":
        m.graph.node.remove(node)
    elif action == "swap" and len(nodes) > 1:
        j = data.draw(st.integers(0, len(nodes) - 1))
        i = nodes.index(node)
        a, b = copy.deepcopy(m.graph.node[i]), copy.deepcopy(m.graph.node[j])
        m.graph.node[i].CopyFrom(b)
        m.graph.node[j].CopyFrom(a)
    elif action == "drop_output" and node.output:
        node.output[0] = ""


def mutate_op_type(m, data):
    node = data.draw(st.sampled_from(list(m.graph.node)))
    node.op_type = data.draw(st.sampled_from(["Relu", "Conv", "Gemm", "MaxPool", "Reshape", "Transpose", "Concat",
                                              "Softmax", "Add", "Gather", "NoSuchOp", "Slice", "Sigmoid"]))


MUTATORS = [mutate_dim, mutate_attribute, mutate_dtype, mutate_wiring, mutate_op_type]


def check(model, path):
    """The property: a KilnError or a graph that lowers (or a KilnError from lowering)."""
    try:
        g = onnx_frontend.load_model(model, path)
    except KilnError:
        event("frontend: KilnError")
        return
    try:
        plan_model(g, "fuzzed", OPTIONS, OptLog())  # fusion, patterns, programs, lowering, specs, arena
        event("lowered")
    except KilnError:
        event("lowering: KilnError")


@FUZZ
@given(data=st.data())
def test_mutated_models_give_a_kiln_error_or_a_plan(seeds, data):
    base = data.draw(st.integers(0, len(seeds) - 1))
    m = copy.deepcopy(seeds[base]) if base == 0 else _light_copy(seeds[base])
    for _ in range(data.draw(st.integers(1, 3))):
        data.draw(st.sampled_from(MUTATORS))(m, data)
    check(m, f"fuzzed:{base}")


def _light_copy(m):
    """A deep copy of the graph structure that shares nothing mutable with `m` (initializer bytes included: a
    dims or type mutation must not leak into the next example)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    return out


@FUZZ
@given(cut=st.integers(0, 10 ** 6), flip=st.integers(0, 10 ** 6))
def test_truncated_or_flipped_files_give_a_kiln_error(tmp_path, cut, flip):
    data = bytearray(small_cnn().SerializeToString())
    data = data[: cut % (len(data) + 1)]
    if data:
        data[flip % len(data)] ^= 0xA5
    path = tmp_path / "cut.onnx"
    path.write_bytes(bytes(data))
    try:
        model = read_model(path)
    except KilnError:
        return
    check(model, path)
