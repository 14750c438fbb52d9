"""The elementwise-program pass (codegen/passes/eltwise_programs.py): which chains become one program kernel,
what stays with eltwise_vector, the MAX_FUSION_DEPTH and ENABLE_FUSION limits, and the refusals."""
import numpy as np
import pytest

pytest.importorskip("onnx")

from codegen import KilnError
from codegen.frontend.onnx_import import load_onnx
from codegen.ir.eltwise_program import PROGRAM_OPS, decode, encode, evaluate
from codegen.ir.optlog import OptLog
from codegen.options import parse_options
from codegen.pipeline import plan_model


def _model(tmp_path, nodes, inputs, outputs, inits=None):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node(op, ins, outs, name=f"n{i}", **attrs) for i, (op, ins, outs, attrs) in enumerate(nodes)],
        "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in (inits or {}).items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _plan(path, **options):
    log = OptLog()
    stages = plan_model(load_onnx(path), "m", parse_options({"KILN_MODELS": "", **options}), log, memory=False)
    return stages, log


SE = [("Sigmoid", ["x"], ["s"], {}), ("Mul", ["x", "s"], ["m"], {}),
      ("HardSigmoid", ["g"], ["h"], {"alpha": 1 / 6, "beta": 0.5}), ("Mul", ["m", "h"], ["y"], {})]
SE_IO = ([("x", [1, 20, 4, 4]), ("g", [1, 20, 1, 1])], [("y", [1, 20, 4, 4])])


def test_silu_and_se_scale_are_one_kernel(tmp_path):
    stages, log = _plan(_model(tmp_path, SE, *SE_IO))
    (spec,) = stages.specs.values()
    # the SE gate's group joined last, so it comes first; inputs in the order the steps read them
    assert [op for op, _, _ in spec.steps] == ["hardsigmoid", "sigmoid", "mul", "mul"]
    assert spec.kind == "eltwise_program" and spec.forms == "channel,full"
    assert spec.c1 == 2 and spec.c_tail == 4  # 20 channels: the last block has 4 real lanes
    assert sum("EltwiseProgram(" in line and "reason=vector_chain" in line for line in log.lines) == 3


def test_depth_limit_splits_the_chain_and_is_logged(tmp_path):
    stages, log = _plan(_model(tmp_path, SE, *SE_IO), MAX_FUSION_DEPTH="2")
    assert [len(s.steps) for s in stages.specs.values()] == [2, 2]
    assert any(":rejected reason=depth_limit" in line for line in log.lines)


def test_fusion_off_gives_one_kernel_per_node(tmp_path):
    stages, log = _plan(_model(tmp_path, SE, *SE_IO), ENABLE_FUSION="OFF")
    kinds = [s.kind for s in stages.specs.values()]
    assert kinds.count("eltwise_program") == 3 and kinds.count("eltwise") == 1  # the first Mul: x * s, same shape
    assert any("reason=fusion_off" in line for line in log.lines)


def test_plain_chains_stay_with_eltwise_vector(tmp_path):
    nodes = [("Add", ["a", "b"], ["c"], {}), ("Relu", ["c"], ["d"], {}), ("Mul", ["d", "k"], ["y"], {})]
    path = _model(tmp_path, nodes, [("a", [1, 16, 4, 4]), ("b", [1, 16, 4, 4])], [("y", [1, 16, 4, 4])],
                  {"k": np.float32(2.0)})
    stages, _ = _plan(path)
    assert {s.kind for s in stages.specs.values()} == {"eltwise"}


def test_a_value_read_twice_or_stored_ends_the_chain(tmp_path):
    nodes = [("Sigmoid", ["x"], ["s"], {}), ("Mul", ["x", "s"], ["m"], {}), ("Add", ["m", "s"], ["y"], {})]
    stages, _ = _plan(_model(tmp_path, nodes, [("x", [2, 24])], [("y", [2, 24])]))
    # s is read by two nodes: it is stored, Sigmoid is a program of its own, Mul and Add stay plain
    assert [s.kind for s in stages.specs.values()] == ["eltwise_program", "eltwise", "eltwise"]
    nodes = [("Sigmoid", ["x"], ["s"], {}), ("Mul", ["x", "s"], ["y"], {})]
    stages, _ = _plan(_model(tmp_path, nodes, [("x", [2, 24])], [("y", [2, 24]), ("s", [2, 24])]))
    assert [s.kind for s in stages.specs.values()] == ["eltwise_program", "eltwise"]  # s is a graph output


def test_unsupported_broadcast_is_refused_naming_the_node(tmp_path):
    path = _model(tmp_path, [("Sigmoid", ["x"], ["s"], {}), ("Mul", ["s", "m"], ["y"], {})],
                  [("x", [1, 20, 4, 4]), ("m", [1, 1, 4, 4])], [("y", [1, 20, 4, 4])])
    with pytest.raises(KilnError, match=r"node 'n1' \(Mul\).*operand 'm' of shape \[1, 1, 4, 4\].*per channel"):
        _plan(path)


def test_program_text_round_trips_and_references_are_the_onnx_definitions():
    steps = (("hardsigmoid", (0,), (0.2, 0.5)), ("mul", (0, 1), ()), ("rdivs", (2,), (3.0,)))
    assert decode(encode(steps), 1) == tuple((op, a, tuple(np.float32(p) for p in ps)) for op, a, ps in steps)
    with pytest.raises(ValueError, match="step 1"):
        decode("relu(0);mul(0,5)", 1)
    x = np.linspace(-6, 6, 25)
    assert np.allclose(evaluate((("hardswish", (0,), ()),), [x]), x * np.clip(x / 6 + 0.5, 0, 1))
    assert np.allclose(evaluate((("sigmoid", (0,), ()),), [x]), 1 / (1 + np.exp(-x)))
    assert all(e.depth == 1 for e in PROGRAM_OPS.values())


def test_row_operand_of_a_blocked_output_is_refused_naming_the_source_op(tmp_path):
    path = _model(tmp_path, [("Add", ["x", "r"], ["y"], {})], [("x", [1, 20, 4, 5]), ("r", [5])],
                  [("y", [1, 20, 4, 5])])
    with pytest.raises(KilnError, match=r"node 'n0' \(Add\).*row operand.*held as NC1HWC0"):
        _plan(path)


def test_a_per_channel_operand_of_a_row_major_4d_value_reads_it_relaid_out(tmp_path):
    """ConvNeXt's layer scale: NHWC -> NCHW (held as rows) times a [C, 1, 1] constant is a program over NC1HWC0;
    the transpose result reaches it through one relayout step."""
    path = _model(tmp_path, [("Transpose", ["x"], ["t"], {"perm": [0, 3, 1, 2]}), ("Mul", ["t", "g"], ["y"], {})],
                  [("x", [1, 3, 4, 20])], [("y", [1, 20, 3, 4])], {"g": np.ones((20, 1, 1))})
    stages, _ = _plan(path)
    steps = stages.lowered.steps
    program = next(s for s in steps if s.kind == "kernel" and s.kernel_op.type == "EltwiseProgram")
    assert program.kernel_op.attrs["layout"] == "NC1HWC0" and program.inputs[0] == "t@nc1hwc0"
    assert [s.glue for s in steps if s.kind == "glue"].count("to_nc1hwc0") == 1


# ---- issue 19's elementwise catalogue

def _steps(tmp_path, nodes, inputs, outputs, inits=None, **options):
    stages, log = _plan(_model(tmp_path, nodes, inputs, outputs, inits), **options)
    return [[(op, params) for op, _, params in getattr(s, "steps", ())] for s in stages.specs.values()], log


X = [("x", [1, 20, 4, 4])]


def test_mish_is_one_program_of_three_steps(tmp_path):
    nodes = [("Softplus", ["x"], ["s"], {}), ("Tanh", ["s"], ["t"], {}), ("Mul", ["x", "t"], ["y"], {})]
    (steps,), log = _steps(tmp_path, nodes, X, [("y", [1, 20, 4, 4])])
    assert steps == [("softplus", ()), ("tanh", ()), ("mul", ())]
    assert any("EltwiseProgram(Softplus+Tanh+Mul) reason=vector_chain" in line for line in log.lines)


@pytest.mark.parametrize("p,step", [(2.0, ("powi", (2.0,))), (3.0, ("powi", (3.0,))), (-1.0, ("powi", (-1.0,))),
                                    (0.5, ("sqrt", ())), (-0.5, ("rsqrt", ())),
                                    (1.7, ("powf", (np.float32(1.7),)))])
def test_pow_takes_the_sequence_of_its_exponent(tmp_path, p, step):
    (steps,), _ = _steps(tmp_path, [("Pow", ["x", "p"], ["y"], {})], X, [("y", [1, 20, 4, 4])], {"p": np.float32(p)})
    assert steps == [step]


@pytest.mark.parametrize("p,why", [(0.0, "x \\*\\* 0 is the constant 1"), (20.0, "at most 16 in magnitude")])
def test_pow_exponents_without_a_sequence_are_refused_naming_the_node(tmp_path, p, why):
    with pytest.raises(KilnError, match=f"node 'n0' \\(Pow.*{why}"):
        _steps(tmp_path, [("Pow", ["x", "p"], ["y"], {})], X, [("y", [1, 20, 4, 4])], {"p": np.float32(p)})
    with pytest.raises(KilnError, match=r"node 'n0' \(Pow.*exponent \(input 1\) is computed at run time"):
        _steps(tmp_path, [("Pow", ["x", "e"], ["y"], {})], X + [("e", [1])], [("y", [1, 20, 4, 4])])


def test_variadic_max_min_mean_and_prelu_leakyrelu_steps(tmp_path):
    shape = [1, 20, 4, 4]
    (steps,), _ = _steps(tmp_path, [("Max", ["x", "b", "c"], ["y"], {})], X + [("b", [1, 20, 1, 1])],
                         [("y", shape)], {"c": np.float32(0.5)})
    assert steps == [("max", ()), ("maxs", (0.5,))]
    (steps,), _ = _steps(tmp_path, [("Mean", ["x", "b", "z"], ["y"], {})], X + [("b", shape), ("z", shape)],
                         [("y", shape)])
    assert steps == [("add", ()), ("add", ()), ("muls", (np.float32(1 / 3),))]
    (steps,), _ = _steps(tmp_path, [("Min", ["x"], ["y"], {})], X, [("y", shape)])
    assert steps == [("muls", (1.0,))]
    (steps,), _ = _steps(tmp_path, [("PRelu", ["x", "s"], ["y"], {})], X, [("y", shape)], {"s": np.float32([0.25])})
    assert steps == [("leakyrelu", (0.25,))]  # a scalar slope
    (steps,), _ = _steps(tmp_path, [("PRelu", ["x", "s"], ["y"], {})], X, [("y", shape)], {"s": np.ones((20, 1, 1))})
    assert steps == [("prelu", ())]
    (steps,), _ = _steps(tmp_path, [("LeakyRelu", ["x"], ["y"], {})], X, [("y", shape)])
    assert steps == [("leakyrelu", (np.float32(0.01),))]  # the ONNX default alpha


def test_a_program_op_after_a_gemm_is_its_own_kernel_and_audited(tmp_path):
    nodes = [("MatMul", ["x", "w"], ["c"], {}), ("LeakyRelu", ["c"], ["y"], {"alpha": 0.1})]
    io = ([("x", [16, 32])], [("y", [16, 48])], {"w": np.ones((32, 48))})
    kinds, log = _steps(tmp_path, nodes, *io)
    assert kinds == [[], [("leakyrelu", (np.float32(0.1),))]]
    assert any("m:n1 MatMul+LeakyRelu:rejected reason=no_program_epilogue" in line for line in log.lines)
    _, log = _steps(tmp_path, nodes, *io, ENABLE_FUSION="OFF")
    assert any("m:n1 MatMul+LeakyRelu:rejected reason=fusion_off" in line for line in log.lines)
    # after a Cube Conv the cost model decides (tests/codegen/passes/test_program_epilogue.py): on 910B this 1x1's
    # Vector epilogue runs in the conv's own launch (mixed), cheaper than the program's own kernel: taken
    nodes = [("Conv", ["x", "w"], ["c"], {}), ("LeakyRelu", ["c"], ["y"], {"alpha": 0.1})]
    kinds, log = _steps(tmp_path, nodes, X, [("y", [1, 16, 4, 4])], {"w": np.ones((16, 20, 1, 1))},
                        KILN_TARGET="ascend910b")
    assert kinds == [[]]  # one kernel, the conv, its program in its epilogue
    assert any("m:n1 Fused(Conv+LeakyRelu) reason=program_epilogue" in line for line in log.lines), log.lines


# ---- Where, the comparisons, Not, Clip with run-time bounds (issue 19)

def _typed_model(tmp_path, nodes, inputs, outputs, inits):
    """As _model, with (name, shape, onnx elem type) inputs/outputs and initializers keeping their dtype."""
    import onnx
    from onnx import helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node(op, ins, outs, name=f"n{i}", **attrs) for i, (op, ins, outs, attrs) in enumerate(nodes)],
        "g", [helper.make_tensor_value_info(n, t, s) for n, s, t in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, s, t in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_comparison_where_and_not_are_one_program(tmp_path):
    nodes = [("Less", ["x", "b"], ["c"], {}), ("Not", ["c"], ["n"], {}), ("Where", ["n", "x", "b"], ["y"], {})]
    (steps,), log = _steps(tmp_path, nodes, X + [("b", [1, 20, 1, 1])], [("y", [1, 20, 4, 4])])
    assert steps == [("less", ()), ("not", ()), ("where", ())]
    assert any("EltwiseProgram(Less+Not+Where) reason=vector_chain" in line for line in log.lines)
    nodes = [("Less", ["h", "x"], ["c"], {}), ("Where", ["c", "x", "z"], ["y"], {})]  # constants on the left/right
    (steps,), _ = _steps(tmp_path, nodes, X, [("y", [1, 20, 4, 4])], {"h": np.float32(0.5), "z": np.float32(0)})
    assert steps == [("greaters", (0.5,)), ("wherey", (0.0,))]


def test_a_constant_mask_selects_with_scalar_forms(tmp_path):
    from onnx import TensorProto
    f = TensorProto.FLOAT
    path = _typed_model(tmp_path, [("Where", ["m", "ninf", "s"], ["y"], {})], [("s", [4, 8, 24], f)],
                        [("y", [4, 8, 24], f)], {"m": np.ones((1, 1, 24), bool), "ninf": np.float32(-np.inf)})
    stages, _ = _plan(path)
    (spec,) = stages.specs.values()
    assert spec.program == "wherex(0,1|-inf)" and spec.forms == "row,full"


def test_clip_bounds_computed_at_run_time_are_scalar_operands(tmp_path):
    shape = [1, 20, 4, 4]
    (steps,), _ = _steps(tmp_path, [("Clip", ["x", "lo", "hi"], ["y"], {})], X + [("lo", []), ("hi", [])],
                         [("y", shape)])
    assert steps == [("max", ()), ("min", ())]
    stages, _ = _plan(_model(tmp_path, [("Clip", ["x", "lo", "hi"], ["y"], {})], X + [("hi", [])],
                             [("y", shape)], {"lo": np.float32(-1)}))
    (spec,) = stages.specs.values()
    assert spec.program == "maxs(0|-1.0);min(2,1)" and spec.forms == "full,scalar"
    # after a Conv, a Clip(0, run-time max) is no epilogue (Relu6 would drop the bound): a program of its own
    nodes = [("Conv", ["x", "w"], ["c"], {}), ("Clip", ["c", "zero", "hi"], ["y"], {})]
    kinds, log = _steps(tmp_path, nodes, X + [("hi", [])], [("y", [1, 16, 4, 4])],
                        {"w": np.ones((16, 20, 1, 1)), "zero": np.float32(0)})
    assert kinds == [[], [("maxs", (0.0,)), ("min", ())]]
    assert any("Conv+Clip:rejected reason=epilogue_unsupported" in line for line in log.lines)


def test_conditions_kiln_cannot_take_are_refused_naming_the_node(tmp_path):
    from onnx import TensorProto

    from codegen.frontend.onnx_import import check_onnx
    f, b = TensorProto.FLOAT, TensorProto.BOOL
    path = _typed_model(tmp_path, [("Where", ["c", "x", "x"], ["y"], {})], [("c", [4, 5], b), ("x", [4, 5], f)],
                        [("y", [4, 5], f)], {})
    (problem,) = check_onnx(path)
    assert problem["node"] == "n0" and "the condition (input 0) is the graph input 'c'" in problem["reason"]
    path = _typed_model(tmp_path, [("Less", ["x", "x"], ["c"], {})], [("x", [4, 5], f)], [("c", [4, 5], b)], {})
    (problem,) = check_onnx(path)
    assert problem["node"] == "n0" and "element type bool, but it is a graph output" in problem["reason"]


def test_expand_and_tile_are_a_program_copy_of_the_broadcast_operand(tmp_path):
    from onnx import TensorProto
    f = TensorProto.FLOAT
    path = _typed_model(tmp_path, [("Tile", ["g", "r"], ["y"], {})], [("g", [1, 20, 1, 1], f)],
                        [("y", [2, 20, 3, 4], f)], {"r": np.array([2, 1, 3, 4], np.int64)})
    stages, _ = _plan(path)
    (spec,) = stages.specs.values()
    assert spec.program == "muls(0|1.0)" and spec.forms == "channel1"
    path = _typed_model(tmp_path, [("Expand", ["x", "s"], ["y"], {})], [("x", [2, 1, 4], f)],
                        [("y", [2, 3, 4], f)], {"s": np.array([2, 3, 4], np.int64)})
    with pytest.raises(KilnError, match=r"node 'n0' \(Expand\).*operand 'x' of shape \[2, 1, 4\] broadcasts to"):
        _plan(path)
    from codegen.frontend.onnx_import import check_onnx
    path = _typed_model(tmp_path, [("Tile", ["g", "r"], ["y"], {})], [("g", [1, 20, 2, 1], f)],
                        [("y", [1, 20, 4, 1], f)], {"r": np.array([1, 1, 2, 1], np.int64)})
    (problem,) = check_onnx(path)
    assert problem["node"] == "n0" and "axes [2] of [1, 20, 2, 1] are repeated but not of size 1" in problem["reason"]
