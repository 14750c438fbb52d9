"""ArgMax / ArgMin (codegen/frontend/onnx_argmax.py): the rewrite (as the ONNX nodes the isolated check gives ONNX's
reference evaluator) and the build-time evaluator equal ONNX's definition for each axis, keepdims and
select_last_index, ties included; the result is an int64 graph output (the manifest says so); what it cannot take
is refused naming the node. The values against ONNX Runtime: tests/kiln/op_cases/argmax.py."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402
from codegen.frontend.onnx_argmax import fold_arg  # noqa: E402
from codegen.ir.graph import Node  # noqa: E402
from codegen.ir.manifest import IoDesc  # noqa: E402


def arg_model(tmp_path, op, shape, extra_nodes=(), out="y", **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node, *extra_nodes], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out, TensorProto.INT64 if out == "y" else
                                                             TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, path)
    return path, model


@pytest.mark.parametrize("op, shape, attrs", [
    ("ArgMax", [3, 10], {"axis": 1}),
    ("ArgMax", [2, 5, 3, 4], {"axis": 1, "keepdims": 0}),
    ("ArgMax", [4, 6, 5], {"axis": -3, "select_last_index": 1}),
    ("ArgMin", [4, 6, 5], {"axis": 0, "keepdims": 0, "select_last_index": 1}),
    ("ArgMin", [7, 9], {"axis": -1}),
])
def test_the_rewrite_is_onnx_s_definition_and_is_logged(tmp_path, op, shape, attrs):
    path, model = arg_model(tmp_path, op, shape, **attrs)
    log: list[str] = []
    g = onnx_import.load_onnx(path, log=log)
    assert any(line.startswith("expand_args: 'the_node'") for line in log) and "the_node" in g.rewrites
    assert g.values["y"].dtype == "int64" and g.outputs[0].name == "y"
    for seed in range(3):  # small integers: ties, where first and last differ
        x = np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
        (got,) = ReferenceEvaluator(onnx_import.unrolled_reference(model)).run(None, {"x": x})
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(fold_arg(Node("n", op, ["x"], ["y"], attrs), [x])[0], want)


def test_an_int64_output_is_recorded_and_read_back():
    d = IoDesc("y", (2, 1), "int64")
    assert d.to_json() == {"name": "y", "shape": [2, 1], "dtype": "int64"} and IoDesc.from_json(d.to_json()) == d
    assert IoDesc("y", (2,)).to_json() == {"name": "y", "shape": [2]}  # float outputs: the manifest as before


def test_what_it_cannot_take_is_refused_naming_the_node(tmp_path):
    path, _ = arg_model(tmp_path, "ArgMax", [2, 3000], axis=1)
    assert "the axis has 3000 values; at most 2048 are supported" in refusal(path)
    cast = helper.make_node("Cast", ["y"], ["z"], name="cast", to=TensorProto.FLOAT)
    path, _ = arg_model(tmp_path, "ArgMax", [2, 30], [cast], out="z", axis=1)
    assert [p["reason"] for p in onnx_import.check_onnx(path) if p["node"] == "the_node"] == [
        "its int64 result is read by node(s) ['cast']: kiln returns an ArgMax result only as a graph output"]


def test_the_manifest_marks_the_int64_output_and_the_cpp_runtime_refuses_it(tmp_path):
    import json

    from conftest import REPO

    from codegen import KilnError
    from codegen.emit.render import CppApi, render
    from codegen.options import parse_options
    from codegen.pipeline import plan
    path, _ = arg_model(tmp_path, "ArgMax", [2, 12, 5, 6], axis=1, keepdims=0)
    p = plan(parse_options({"KILN_MODELS": str(path)}), REPO, tmp_path, kernel_list=False)
    entry = json.loads(render(p)["manifest.json"])["models"][0]
    assert entry["outputs"] == [{"name": "y", "shape": [2, 5, 6], "dtype": "int64"}]
    assert entry["kernel_launches"] == 5  # transpose, ReduceMax, GEMM, Equal+Where, ReduceMin
    with pytest.raises(KilnError, match=r"output\(s\) \['y'\] are int64 .*the C\+\+ runtime returns float outputs"):
        render(p, cpp_api=CppApi("net", tmp_path / "gen"))
