"""DepthToSpace / SpaceToDepth (codegen/frontend/onnx_depth_space.py): the rewrite into Reshape -> Transpose ->
Reshape equals ONNX's definition (numpy) for each mode, is logged, and what it cannot take is refused naming the
node. The values against ONNX Runtime: tests/kiln/op_cases/depth_space.py."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402
from codegen.frontend.onnx_depth_space import fold_depth_space  # noqa: E402
from codegen.ir.graph import Node  # noqa: E402


def one_op(tmp_path, op, shape, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, path)
    return path, model


@pytest.mark.parametrize("op, shape, attrs", [
    ("DepthToSpace", [2, 18, 2, 3], {"blocksize": 3, "mode": "DCR"}),
    ("DepthToSpace", [1, 20, 3, 2], {"blocksize": 2, "mode": "CRD"}),
    ("DepthToSpace", [1, 8, 2, 2], {"blocksize": 2}),
    ("SpaceToDepth", [1, 3, 6, 4], {"blocksize": 2}),
])
def test_the_rewrite_is_onnx_s_definition_and_is_logged(tmp_path, op, shape, attrs):
    path, model = one_op(tmp_path, op, shape, **attrs)
    log: list[str] = []
    g = onnx_import.load_onnx(path, log=log)
    assert [n.op_type for n in g.nodes] == ["Reshape", "Transpose", "Reshape"]
    assert any(line.startswith("expand_depth_space: 'the_node'") for line in log)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    first, perm, out = g.nodes[0].attrs["shape"], g.nodes[1].attrs["perm"], g.nodes[2].attrs["shape"]
    np.testing.assert_array_equal(np.transpose(x.reshape(first), perm).reshape(out), want)
    np.testing.assert_array_equal(fold_depth_space(Node("n", op, ["x"], ["y"], attrs), [x])[0], want)


@pytest.mark.parametrize("op, shape, attrs, reason", [
    ("DepthToSpace", [1, 12, 2, 2], {"blocksize": 2, "mode": "XYZ"}, "mode='XYZ' is not supported (accepted: DCR"),
    ("DepthToSpace", [1, 12, 2, 2], {"blocksize": 3}, "12 channels are not a multiple of blocksize^2 = 9"),
    ("SpaceToDepth", [1, 4, 6, 5], {"blocksize": 2}, "H, W = 6, 5 are not multiples of blocksize 2"),
])
def test_what_it_cannot_take_is_refused_naming_the_node(tmp_path, op, shape, attrs, reason):
    path, _ = one_op(tmp_path, op, shape, **attrs)
    assert reason in refusal(path)
