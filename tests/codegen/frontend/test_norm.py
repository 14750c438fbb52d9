"""InstanceNormalization, GroupNormalization, LRN (codegen/frontend/onnx_norm.py): the spec evaluator and the rewrite
(as the ONNX nodes the isolated check gives ONNX's reference evaluator) equal ONNX's definition, LRN's even sizes
included (ONNX Runtime refuses those, so tests/kiln/op_cases/norm.py has odd sizes only); the rewrite is logged; what
it cannot take is refused naming the node."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402
from codegen.frontend.onnx_norm import fold_norm  # noqa: E402
from codegen.ir.graph import Node  # noqa: E402


def one_op(tmp_path, op, shape, inits=None, opset=17, **attrs):
    inits = inits or {}
    node = helper.make_node(op, ["x", *inits], ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, path)
    return path, model


def _lrn_spec(x, size, alpha, beta, bias):
    """The spec's formula, channel by channel (onnx 1.23's reference LRN loops over the batch instead of the
    channels, so it is no reference here)."""
    c = x.shape[1]
    y = np.empty_like(x, dtype=np.float64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + int(np.ceil((size - 1) / 2)))
        square_sum = np.sum(np.square(x[:, lo:hi + 1].astype(np.float64)), axis=1)
        y[:, ch] = x[:, ch] / (bias + alpha / size * square_sum) ** beta
    return y


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES = [
    ("InstanceNormalization", [2, 3, 4, 5], {"s": _f(3), "b": _f(3, seed=1)}, 17, {"epsilon": 1e-3},
     ["Reshape", "LayerNormalization", "Reshape", "BatchNormalization"]),
    ("InstanceNormalization", [1, 4, 6], {"s": np.ones(4), "b": np.zeros(4)}, 17, {},
     ["Reshape", "LayerNormalization", "Reshape"]),
    ("GroupNormalization", [2, 6, 2, 3, 2], {"s": _f(6), "b": _f(6, seed=1)}, 21, {"num_groups": 3},
     ["Reshape", "LayerNormalization", "Reshape", "BatchNormalization", "Reshape"]),
    ("LRN", [1, 7, 3, 3], {}, 17, {"size": 4, "alpha": 0.1, "beta": 0.75, "bias": 2.0},
     ["Mul", "Pow", "Conv", "Pow", "Mul"]),
    ("LRN", [2, 5, 2, 2], {}, 17, {"size": 2, "alpha": 0.5, "beta": 1.0, "bias": 1.0},
     ["Mul", "Pow", "Conv", "Pow", "Mul"]),
    ("LRN", [1, 9, 2, 3], {}, 17, {"size": 5, "alpha": 1e-2, "beta": 0.6, "bias": 1.0},
     ["Mul", "Pow", "Conv", "Pow", "Mul"]),
]


@pytest.mark.parametrize("op, shape, inits, opset, attrs, ops", CASES)
def test_the_rewrite_is_onnx_s_definition_and_is_logged(tmp_path, op, shape, inits, opset, attrs, ops):
    path, model = one_op(tmp_path, op, shape, inits, opset, **attrs)
    log: list[str] = []
    g = onnx_import.load_onnx(path, log=log)
    assert [n.op_type for n in g.nodes] == ops
    assert any(line.startswith("expand_norms: 'the_node'") for line in log) and "the_node" in g.rewrites
    x = 3 * _f(*shape, seed=5)
    (want,) = [_lrn_spec(x, **attrs)] if op == "LRN" else ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = ReferenceEvaluator(onnx_import.unrolled_reference(model)).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    node = Node("n", op, ["x", *inits], ["y"], attrs)
    spec = fold_norm(node, [x, *(np.asarray(v, np.float32) for v in inits.values())])[0]
    np.testing.assert_allclose(spec, want, rtol=2e-5, atol=2e-5)


def test_group_normalization_18_has_per_group_scale_and_bias(tmp_path):
    s, b = _f(2), _f(2, seed=1)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="the_node", num_groups=2)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 2, 2])],
                              [numpy_helper.from_array(s, "s"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])  # deprecated: no onnx.checker
    model.ir_version = 8
    onnx.save(model, tmp_path / "gn18.onnx")
    g = onnx_import.load_onnx(tmp_path / "gn18.onnx")
    bn = next(n for n in g.nodes if n.op_type == "BatchNormalization")
    np.testing.assert_array_equal(g.initializers[bn.inputs[1]], np.repeat(s, 3))
    np.testing.assert_array_equal(g.initializers[bn.inputs[2]], np.repeat(b, 3))
    x = _f(1, 6, 2, 2, seed=3)
    rows = x.reshape(2, -1).astype(np.float64)
    z = ((rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + 1e-5)).reshape(x.shape)
    want = z * np.repeat(s, 3).reshape(1, 6, 1, 1) + np.repeat(b, 3).reshape(1, 6, 1, 1)
    (got,) = ReferenceEvaluator(onnx_import.unrolled_reference(model)).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, shape, inits, opset, attrs, reason", [
    ("GroupNormalization", [1, 6, 2, 2], {"s": _f(6), "b": _f(6)}, 21, {"num_groups": 4},
     "num_groups=4 does not divide the 6 channels"),
    ("GroupNormalization", [1, 6, 2, 2], {"s": _f(6), "b": _f(6)}, 21, {"num_groups": 3, "stash_type": 0},
     "stash_type=0: only 1"),
    ("GroupNormalization", [1, 6, 2, 2], {"s": _f(3), "b": _f(3)}, 21, {"num_groups": 3},
     "scale has 3 values, the spec says 6"),
    ("InstanceNormalization", [1, 2, 80, 80], {"s": _f(2), "b": _f(2)}, 17, {},
     "each instance normalises 6400 values (C/G * spatial); rows of at most 4096"),
    ("InstanceNormalization", [4, 6], {"s": _f(6), "b": _f(6)}, 17, {}, "rank 3..5"),
    ("LRN", [1, 4, 5], {}, 17, {"size": 3}, "a 4-D NCHW input is supported"),
    ("LRN", [1, 4, 5, 5], {}, 17, {"size": 3, "bias": 0.0}, "bias=0: bias > 0 is supported"),
])
def test_what_it_cannot_take_is_refused_naming_the_node(tmp_path, op, shape, inits, opset, attrs, reason):
    path, _ = one_op(tmp_path, op, shape, inits, opset, **attrs)
    assert reason in refusal(path)


def test_a_run_time_scale_is_refused(tmp_path):
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="the_node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(v, TensorProto.FLOAT, s) for v, s in
                                            (("x", [1, 3, 4, 4]), ("s", [3]))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [numpy_helper.from_array(_f(3), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert "scale (input 1) is computed at run time; kiln needs it constant" in refusal(tmp_path / "m.onnx")
