"""Where, the comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), Not and Clip with run-time bounds, as
steps of the elementwise program: a constant mask or a comparison as the condition, each scalar-constant form of
x and y, the broadcast forms, a condition read by two selects (stored as a 1 / 0 tensor), Clip's bounds computed
at run time (both, one, mixed with a constant). Comparison inputs are multiples of 1/4 (exact in fp16), so a tie
is a tie in ONNX Runtime's fp32 too (docs/numerics.md: comparisons see the fp16-stored values)."""
import numpy as np

from . import OpCase, single_op

RNG = np.random.default_rng(19)


def _model(name: str, nodes: list, inputs: list, outputs: list, inits: dict | None = None, opset: int = 17):
    """nodes as (op, inputs, outputs, attrs); inputs/outputs as (name, shape) of float; initializers keep their
    NumPy dtype (bool masks)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    made = [helper.make_node(op, ins, outs, name=f"{name}.{i}", **attrs)
            for i, (op, ins, outs, attrs) in enumerate(nodes)]
    graph = helper.make_graph(
        made, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _quarters(rng, shape):
    """Multiples of 1/4 in [-2, 2): exact in fp16, with ties between inputs."""
    return rng.integers(-8, 8, shape) / 4.0


def _mask(*shape):
    return RNG.random(shape) < 0.5


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _where() -> list[OpCase]:
    x40, x3 = [2, 40, 3, 3], [4, 8, 24]
    return [
        # a constant mask, x and y run-time tensors of the output's shape
        OpCase("where_mask_full_c40", _model("wmf", [("Where", ["c", "a", "b"], ["y"], {})], [("a", x40), ("b", x40)],
                                             [("y", x40)], {"c": _mask(*x40)}), launches=1),
        # the attention mask: a row mask over [.., M, L], x the masked value -inf (a scalar constant)
        OpCase("where_mask_row_neginf", _model("wmr", [("Where", ["c", "ninf", "s"], ["y"], {})], [("s", x3)],
                                               [("y", x3)], {"c": _mask(1, 1, 24), "ninf": np.float32(-np.inf)})),
        # y a scalar constant, x per channel ([1,C,1,1] of a 4-D output) computed at run time
        OpCase("where_channel_x_scalar_y", _model("wcy", [("Where", ["c", "g", "zero"], ["y"], {})],
                                                  [("g", [1, 40, 1, 1])], [("y", [1, 40, 3, 3])],
                                                  {"c": _mask(1, 40, 3, 3), "zero": np.float32(0.0)})),
        # both x and y scalar constants (a bool mask to an additive one), the condition from a comparison
        OpCase("where_both_scalars_from_greater", _model(
            "wxy", [("Greater", ["a", "half"], ["c"], {}), ("Where", ["c", "one", "mone"], ["y"], {})],
            [("a", [5, 36])], [("y", [5, 36])],
            {"half": np.float32(0.5), "one": np.float32(1.0), "mone": np.float32(-1e4)}),
            inputs={"a": _quarters}, launches=1),
        # y a constant tensor (full)
        OpCase("where_const_y_tensor", _model("wct", [("Where", ["c", "a", "k"], ["y"], {})], [("a", [6, 20])],
                                              [("y", [6, 20])], {"c": _mask(6, 20), "k": _f(6, 20)})),
    ]


def _compare(op: str, a_shape: list, b: tuple, name: str, where: tuple | None = None) -> OpCase:
    """op(a, b) -> Where(cond, *where) (default: a, b): b is ("b", shape) for a run-time operand, or (name,
    array) for a constant (on the right, or on the left with a leading '<')."""
    bname, bval = b
    where = where or ("a", bname.lstrip("<"))
    inputs, inits = [("a", a_shape)], {}
    if isinstance(bval, list):
        inputs.append((bname, bval))
    else:
        inits[bname.lstrip("<")] = bval
    args = [bname.lstrip("<"), "a"] if bname.startswith("<") else ["a", bname.lstrip("<")]
    out = list(np.broadcast_shapes(tuple(a_shape), *(tuple(s) for n, s in inputs[1:])))
    nodes = [(op, args, ["c"], {}), ("Where", ["c", *where], ["y"], {})]
    return OpCase(name, _model(name, nodes, inputs, [("y", out)], inits),
                  inputs={n: _quarters for n, _ in inputs}, launches=1)


def _comparisons() -> list[OpCase]:
    x20, x24 = [1, 20, 5, 6], [2, 24, 3, 4]
    return [
        _compare("Less", x20, ("b", x20), "less_tensors_min"),  # Where(a < b, a, b): min
        _compare("Greater", [4, 40], ("b", [1, 40]), "greater_row_max"),  # b a row: max
        _compare("Equal", x24, ("k", (_quarters(RNG, x24)).astype(np.float32)), "equal_const_tensor",
                 where=("a", "k")),
        _compare("Equal", [3, 50], ("q", np.float32(0.25)), "equal_scalar"),
        _compare("LessOrEqual", x24, ("b", [1, 24, 1, 1]), "lessequal_channel", where=("b", "a")),
        _compare("GreaterOrEqual", [5, 36], ("q", np.float32(-0.5)), "greaterequal_scalar"),
        _compare("Less", [5, 36], ("<q", np.float32(0.25)), "less_scalar_left"),  # 0.25 < a: a > 0.25
        _compare("Greater", [5, 36], ("<q", np.float32(0.0)), "greater_scalar_left"),  # 0 > a: a < 0
        OpCase("not_less_where", _model(
            "nlw", [("Less", ["a", "b"], ["c"], {}), ("Not", ["c"], ["n"], {}), ("Where", ["n", "a", "b"], ["y"], {})],
            [("a", x20), ("b", x20)], [("y", x20)]), inputs={"a": _quarters, "b": _quarters}, launches=1),
        # a condition read by two selects: stored once as a 1 / 0 tensor, each select its own kernel
        OpCase("condition_read_twice", _model(
            "crt", [("Less", ["a", "b"], ["c"], {}), ("Where", ["c", "a", "b"], ["lo"], {}),
                    ("Where", ["c", "b", "a"], ["hi"], {})],
            [("a", [4, 33]), ("b", [4, 33])], [("lo", [4, 33]), ("hi", [4, 33])]),
            inputs={"a": _quarters, "b": _quarters}, launches=3),
    ]


def _neg(rng, shape):
    return -np.abs(rng.standard_normal(shape)) - 0.25


def _pos(rng, shape):
    return np.abs(rng.standard_normal(shape)) + 0.25


def _clip() -> list[OpCase]:
    x20 = [1, 20, 5, 6]
    wide = {"x": lambda rng, shape: 3 * rng.standard_normal(shape), "lo": _neg, "hi": _pos}
    return [
        OpCase("clip_runtime_both", single_op("Clip", [("x", x20), ("lo", []), ("hi", [])], [("y", x20)], opset=13),
               inputs=wide, launches=1),
        OpCase("clip_runtime_max_only_2d", _model("crm", [("Clip", ["x", "", "hi"], ["y"], {})],
                                                  [("x", [4, 33]), ("hi", [])], [("y", [4, 33])], opset=13),
               inputs=wide),
        OpCase("clip_const_min_runtime_max", _model("ccr", [("Clip", ["x", "lo", "hi"], ["y"], {})],
                                                    [("x", [3, 40]), ("hi", [])], [("y", [3, 40])],
                                                    {"lo": np.float32(-0.5)}, opset=13), inputs=wide),
        OpCase("clip_runtime_min_const_max_c20", _model("crc", [("Clip", ["x", "lo", "hi"], ["y"], {})],
                                                        [("x", x20), ("lo", [])], [("y", x20)],
                                                        {"hi": np.float32(1.5)}, opset=13), inputs=wide),
    ]


CASES = _where() + _comparisons() + _clip()
