"""The isolated per-kernel check's pieces that need no build (kiln/isolate.py): the ONNX counterpart of each
device-only value, the bound, and the error count; the whole check runs in test_corpus.py and test_models.py."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from codegen.ir.manifest import Ref, StepRecord  # noqa: E402  (the source tree's: records are read by attribute)
from kiln.isolate import C_BOUND, FLOOR, _Counterparts, bound_of, isolated_error  # noqa: E402


def siblings_graph():
    """x -> (MatMul+Add) x2, each read by its own Relu: two sibling GEMM members."""
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["m0"], name="q.MatMul"),
             helper.make_node("Add", ["m0", "b0"], ["a0"], name="q.Add"),
             helper.make_node("MatMul", ["x", "w1"], ["m1"], name="k.MatMul"),
             helper.make_node("Add", ["m1", "b1"], ["a1"], name="k.Add"),
             helper.make_node("Relu", ["a0"], ["r0"], name="r0"), helper.make_node("Relu", ["a1"], ["r1"], name="r1")]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "r0", "r1")]
    return helper.make_graph(nodes, "g", vi[:1], vi[1:])


def step(value: str, shape, ops=()) -> StepRecord:
    return StepRecord("s", "kernel", tuple(ops), (), "k", None, (), (), Ref(0, 0, 0), value, "ND", tuple(shape), ())


def test_device_only_values_get_their_onnx_counterpart():
    rng = np.random.default_rng(0)
    a0, a1, t = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (4, 8), (1, 2, 8, 4)))
    cp = _Counterparts(siblings_graph(), {"a0": a0, "a1": a1, "t": t, "x": a0})
    np.testing.assert_array_equal(cp.natural("x@staged", step("x@staged", (4, 8))), a0)
    np.testing.assert_array_equal(cp.natural("t@bt", step("t@bt", (1, 2, 4, 8))), np.swapaxes(t, -1, -2))
    both = cp.natural("q.MatMul@siblings", step("q.MatMul@siblings", (2, 4, 8),
                                                ("q.MatMul", "q.Add", "k.MatMul", "k.Add")))
    np.testing.assert_array_equal(both, np.stack([a0, a1]))
    assert cp.base_names("q.MatMul@siblings", ("q.MatMul", "q.Add", "k.MatMul", "k.Add")) == ["a0", "a1"]


def test_a_reduce_means_moved_input_is_its_input_transposed():
    """`x@perm_0_2_3_1` (copy_rules.reduce_mean: the reduced channels moved last) and the GEMM's rows view of it:
    both have a counterpart, so the copy and the GEMM reading it are gated; a permutation of the wrong rank has
    none."""
    x = np.random.default_rng(1).standard_normal((2, 5, 3, 4)).astype(np.float32)
    cp = _Counterparts(siblings_graph(), {"x": x})
    moved = np.transpose(x, (0, 2, 3, 1))
    np.testing.assert_array_equal(cp.natural("x@perm_0_2_3_1", step("x@perm_0_2_3_1", (2, 3, 4, 5))), moved)
    np.testing.assert_array_equal(cp.natural("x@perm_0_2_3_1@rows", step("x@perm_0_2_3_1@rows", (24, 5))),
                                  moved.reshape(24, 5))
    assert cp.natural("x@perm_0_2_1", step("x@perm_0_2_1", (2, 3, 5, 4))) is None
    assert cp.natural("x@perm_a_b", step("x@perm_a_b", (2, 5, 3, 4))) is None
    np.testing.assert_array_equal(cp.natural("x@affine", step("x@affine", (2, 5, 3, 4))), x)


def test_a_value_without_counterpart_is_none_not_a_guess():
    cp = _Counterparts(siblings_graph(), {"a0": np.zeros((4, 8), np.float32)})
    assert cp.natural("a0@winograd", step("a0@winograd", (4, 8))) is None  # an unknown device-only kind
    assert cp.natural("nowhere", step("nowhere", (4, 8))) is None
    assert cp.natural("a0", step("a0", (5, 8))) is None  # a shape the value cannot take
    # a sibling step whose ops are not in the graph (renamed nodes): no members, no counterpart
    assert cp.natural("q@siblings", step("q@siblings", (2, 4, 8), ("gone",))) is None


def test_error_counts_nonfinite_disagreement_and_ignores_agreeing_inf():
    ref = np.array([1.0, np.inf, 2.0, 3.0], np.float32)
    got = np.array([1.5, np.inf, np.nan, 3.0], np.float32)
    err, nonfinite = isolated_error(got, ref)
    assert err == 0.5 and nonfinite == 1


def test_bound_scales_with_the_dtype_and_sqrt_of_the_reduction():
    from types import SimpleNamespace
    ref = np.array([[-2.0, 1.0]], np.float32)
    fp16 = SimpleNamespace(spec={}, features={"reduction_length": 16})
    bf16 = SimpleNamespace(spec={"dtype": "bf16"}, features={"reduction_length": 16})
    assert bound_of(fp16, ref) == C_BOUND * 2.0 ** -11 * 4 * 2.0 + FLOOR
    assert bound_of(bf16, ref) == C_BOUND * 2.0 ** -8 * 4 * 2.0 + FLOOR
    assert bound_of(SimpleNamespace(spec={}, features={}), np.zeros(3, np.float32)) == FLOOR


def test_a_conv_transposes_phases_and_gemm_are_parts_of_its_output():
    """`y@phase_<ph>_<pw>_<sh>_<sw>` (a stride-phase convolution) is y's rows ph::sh, columns pw::sw;
    `y@d2s_<kh>_<kw>_<cpad>` (the GEMM before the depth-to-space) is y's tap (a, b) of channel c at channel
    (a kw + b) cpad + c, the padded channels zero."""
    y = np.random.default_rng(2).standard_normal((2, 3, 6, 4)).astype(np.float32)
    cp = _Counterparts(siblings_graph(), {"y": y})
    np.testing.assert_array_equal(cp.natural("y@phase_1_0_2_2", step("y@phase_1_0_2_2", (2, 3, 3, 2))),
                                  y[:, :, 1::2, 0::2])
    d2s = cp.natural("y@d2s_2_2_16", step("y@d2s_2_2_16", (2, 64, 3, 2)))
    assert d2s[1, 1 * 16 + 2, 2, 1] == y[1, 2, 2 * 2 + 0, 1 * 2 + 1]  # tap (0, 1) of channel 2 at pixel (2, 1)
    assert not d2s[:, 3:16].any() and not d2s[:, 51:64].any()
    assert cp.natural("y@d2s_4_4_16", step("y@d2s_4_4_16", (2, 256, 1, 1))) is None  # 6 rows are not 4-tap blocks


def test_a_conv_transposes_columns_are_its_input_times_its_weight():
    """`y@cols_<kh>_<kw>_<cpad>` (the GEMM before the col2im scatter-add) is made from the ConvTranspose's input and
    weight, not its output: channel (a kw + b) cpad + c of pixel (h, w) is sum over ci of x[ci, h, w] W[ci, c, a, b];
    ONNX Runtime is asked for x."""
    from onnx import numpy_helper
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 5, 3, 4)).astype(np.float32), rng.standard_normal((5, 3, 2, 3)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    cp = _Counterparts(graph, {"x": x})
    assert cp.base_names("y@cols_2_3_16", ("up",)) == ["x"]
    cols = cp.natural("y@cols_2_3_16", step("y@cols_2_3_16", (2, 96, 3, 4), ("up",)))
    want = np.einsum("ni,ic->nc", x[:, :, 2, 1].astype(np.float64), w[:, :, 1, 0].astype(np.float64))
    np.testing.assert_allclose(cols[:, (1 * 3 + 0) * 16:(1 * 3 + 0) * 16 + 3, 2, 1], want, rtol=1e-5)
    assert not cols[:, 3:16].any()  # padded lanes
    assert cp.natural("y@cols_3_3_16", step("y@cols_3_3_16", (2, 144, 3, 4), ("up",))) is None  # not its kernel


def test_a_fused_conv_transposes_columns_carry_its_folded_batchnorm():
    """ConvTranspose -> BatchNormalization -> Relu fused into one node writing `r`: `r@cols_...` is the
    ConvTranspose's columns with the BatchNormalization's per-channel factor folded into the weight."""
    from onnx import numpy_helper
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 4, 2, 3)).astype(np.float32), rng.standard_normal((4, 2, 2, 2)).astype(np.float32)
    gamma, var = np.array([2.0, 0.5], np.float32), np.array([3.0, 0.0], np.float32)
    init = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (gamma, "g"), (np.zeros(2, np.float32), "b"),
                                                        (np.zeros(2, np.float32), "m"), (var, "v"))]
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], epsilon=1.0),
             helper.make_node("Relu", ["n"], ["r"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 3])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)], init)
    cp = _Counterparts(graph, {"x": x})
    assert cp.base_names("r@cols_2_2_16", ()) == ["x"]
    cols = cp.natural("r@cols_2_2_16", step("r@cols_2_2_16", (1, 64, 2, 3)))
    scale = gamma / np.sqrt(var + 1.0)
    want = np.einsum("ni,ic->nc", x[:, :, 1, 2].astype(np.float64), w[:, :, 0, 1].astype(np.float64)) * scale
    np.testing.assert_allclose(cols[:, 1 * 16:1 * 16 + 2, 1, 2], want, rtol=1e-5)
