"""Elementwise ops and chains (eltwise_program_vector, and eltwise_vector where it still serves): each op, each
attribute value exporters write, each broadcast form on both sides, SiLU / HardSwish / squeeze-excite chains,
odd channel counts (20, 24, 40, 72)."""
import numpy as np

from . import OpCase, single_op

RNG = np.random.default_rng(17)


def _chain(name: str, nodes: list, inputs: list, outputs: list, inits: dict | None = None, opset: int = 17):
    """A small multi-node model: nodes as (op, inputs, outputs, attrs); inputs/outputs as (name, shape)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    made = [helper.make_node(op, ins, outs, name=f"{name}.{i}", **attrs)
            for i, (op, ins, outs, attrs) in enumerate(nodes)]
    graph = helper.make_graph(
        made, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in (inits or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _away_from_zero(rng, shape):
    """Divisors: |v| in [0.5, 2], either sign."""
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _wide(rng, shape):
    """Wide enough that HardSigmoid / Clip saturate on both sides."""
    return 4 * rng.standard_normal(shape)


def _c(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _unary() -> list[OpCase]:
    x20, x40, x72 = [1, 20, 5, 6], [1, 40, 4, 5], [1, 72, 3, 5]
    return [
        OpCase("sigmoid_c20", single_op("Sigmoid", [("x", x20)], [("y", x20)]), inputs={"x": _wide}),
        OpCase("sigmoid_2d", single_op("Sigmoid", [("x", [3, 50])], [("y", [3, 50])]), inputs={"x": _wide}),
        OpCase("hardsigmoid_default_c24", single_op("HardSigmoid", [("x", [1, 24, 4, 4])], [("y", [1, 24, 4, 4])]),
               inputs={"x": _wide}),
        OpCase("hardsigmoid_torch_c40", single_op("HardSigmoid", [("x", x40)], [("y", x40)], alpha=1 / 6, beta=0.5),
               inputs={"x": _wide}),
        OpCase("hardsigmoid_other_c72", single_op("HardSigmoid", [("x", x72)], [("y", x72)], alpha=0.5, beta=0.25),
               inputs={"x": _wide}),
        OpCase("hardswish_c40", single_op("HardSwish", [("x", x40)], [("y", x40)]), inputs={"x": _wide}),
        OpCase("hardswish_2d", single_op("HardSwish", [("x", [4, 33])], [("y", [4, 33])]), inputs={"x": _wide}),
        OpCase("sum_three_c24", single_op("Sum", [("a", [1, 24, 3, 4]), ("b", [1, 24, 3, 4]), ("c", [1, 24, 3, 4])],
                                          [("y", [1, 24, 3, 4])])),
        OpCase("sum_one_c20", single_op("Sum", [("a", x20)], [("y", x20)])),
        OpCase("sum_broadcast_c40", single_op("Sum", [("a", x40), ("b", [1, 40, 1, 1])], [("y", x40)],
                                              {"c": _c(1, 40, 1, 1)})),
    ]


def _operand_cases(op: str, form: str, side: str) -> OpCase:
    """op with its second operand of `form` on `side` ("right": x op c, "left": c op x)."""
    o, x, ch = op.lower(), [2, 24, 3, 5], [2, 24, 1, 1]
    divisor = "b" if side == "right" else "x"  # Div: the divisor stays away from zero
    feeds = {divisor: _away_from_zero} if op == "Div" else {}
    const = {"scalar": (np.float32(1.75), x), "channel_const": (_c(1, 20, 1, 1), [1, 20, 4, 3]),
             "row_const": (_c(36), [5, 36])}
    name = f"{o}_{form}_{side}"
    if form == "channel_act":
        ins = [("x", x), ("b", ch)] if side == "right" else [("b", ch), ("x", x)]
        return OpCase(name, single_op(op, ins, [("y", x)]), inputs=feeds)
    value, shape = const[form]
    if op == "Div":
        value = value + np.sign(value) * np.float32(0.5)
    operands = ["x", "k"] if side == "right" else ["k", "x"]
    return OpCase(name, _chain(name, [(op, operands, ["y"], {})], [("x", shape)], [("y", shape)],
                               {"k": np.asarray(value, np.float32)}), inputs=feeds if side == "left" else {})


def _binary() -> list[OpCase]:
    """Add/Sub/Mul/Div, pairwise over operand form x side (each op meets each form once, each side twice):
    a scalar constant, a per-channel constant [1,C,1,1], a per-channel activation [N,C,1,1], a row constant [L]
    over [M,L]; and two activations of the same shape."""
    ops = ("Add", "Sub", "Mul", "Div")
    forms = ("scalar", "channel_const", "channel_act", "row_const")
    cases = [_operand_cases(op, form, ("right", "left")[(i + j) % 2])
             for i, form in enumerate(forms) for j, op in enumerate(ops)]
    for op in ops:
        cases.append(OpCase(f"{op.lower()}_same_shape_c40", single_op(op, [("x", [1, 40, 3, 3]), ("b", [1, 40, 3, 3])],
                                                                      [("y", [1, 40, 3, 3])]),
                            inputs={"b": _away_from_zero} if op == "Div" else {}))
    return cases


def _chains() -> list[OpCase]:
    x24, x72 = [1, 24, 6, 6], [1, 72, 5, 5]
    w1 = (_c(10, 40, 1, 1) / np.sqrt(40)).astype(np.float32)
    w2 = (_c(40, 10, 1, 1) / np.sqrt(10)).astype(np.float32)
    return [
        OpCase("silu_c24", _chain("silu", [("Sigmoid", ["x"], ["s"], {}), ("Mul", ["x", "s"], ["y"], {})],
                                  [("x", x24)], [("y", x24)]), inputs={"x": _wide}),
        OpCase("hardswish_decomposed_c20", _chain("hsw", [("HardSigmoid", ["x"], ["h"], {"alpha": 1 / 6, "beta": 0.5}),
                                                          ("Mul", ["h", "x"], ["y"], {})],
                                                  [("x", [1, 20, 4, 4])], [("y", [1, 20, 4, 4])]), inputs={"x": _wide}),
        OpCase("se_sigmoid_c72", _chain("se_sig", [("Sigmoid", ["s"], ["g"], {}), ("Mul", ["x", "g"], ["y"], {})],
                                        [("x", x72), ("s", [1, 72, 1, 1])], [("y", x72)]), inputs={"s": _wide}),
        OpCase("se_hardsigmoid_c40_n2", _chain("se_hs", [("HardSigmoid", ["s"], ["g"], {"alpha": 1 / 6, "beta": 0.5}),
                                                         ("Mul", ["g", "x"], ["y"], {})],
                                               [("x", [2, 40, 4, 4]), ("s", [2, 40, 1, 1])], [("y", [2, 40, 4, 4])]),
               inputs={"s": _wide}),
        OpCase("se_block_c40", _chain("se_block", [
            ("GlobalAveragePool", ["x"], ["p"], {}), ("Conv", ["p", "w1"], ["q"], {}), ("Relu", ["q"], ["r"], {}),
            ("Conv", ["r", "w2"], ["t"], {}), ("HardSigmoid", ["t"], ["g"], {"alpha": 1 / 6, "beta": 0.5}),
            ("Mul", ["x", "g"], ["y"], {})], [("x", [1, 40, 5, 5])], [("y", [1, 40, 5, 5])], {"w1": w1, "w2": w2})),
        OpCase("clip_in_chain_c20", _chain("clipc", [("Sigmoid", ["x"], ["s"], {}),
                                                     ("Clip", ["s", "lo", "hi"], ["y"], {})],
                                           [("x", [1, 20, 3, 3])], [("y", [1, 20, 3, 3])],
                                           {"lo": np.float32(0.2), "hi": np.float32(0.7)}), inputs={"x": _wide}),
        OpCase("clip_max_only_in_chain", _chain("clipm", [("HardSwish", ["x"], ["s"], {}),
                                                          ("Clip", ["s", "", "hi"], ["y"], {})],
                                                [("x", [6, 40])], [("y", [6, 40])], {"hi": np.float32(1.5)}),
               inputs={"x": _wide}),
        OpCase("relu_after_sub_c24", _chain("subrelu", [("Sub", ["a", "b"], ["d"], {}), ("Relu", ["d"], ["y"], {})],
                                            [("a", x24), ("b", x24)], [("y", x24)])),
        # seven ops: more than the default MAX_FUSION_DEPTH, so the chain is split into kernels
        OpCase("long_chain_c20", _chain("long", [
            ("Sigmoid", ["x"], ["a"], {}), ("Mul", ["x", "a"], ["b"], {}), ("Add", ["b", "k"], ["c"], {}),
            ("HardSwish", ["c"], ["d"], {}), ("Mul", ["d", "x"], ["e"], {}), ("Sigmoid", ["e"], ["f"], {}),
            ("Relu", ["f"], ["y"], {})], [("x", [1, 20, 4, 4])], [("y", [1, 20, 4, 4])], {"k": np.float32(0.3)})),
    ]


def _specials(rng, shape):
    """3 x standard normal with NaN, +-inf, 0 and -0 in the first lanes (the spec's edge cases)."""
    v = 3 * rng.standard_normal(shape)
    flat = v.reshape(-1)
    flat[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    return v


def _infs(rng, shape):
    """As _specials without NaN, and with +-60 (saturating Tanh, Erf, Softplus's two sides)."""
    v = 3 * rng.standard_normal(shape)
    v.reshape(-1)[:6] = [np.inf, -np.inf, 0.0, -0.0, 60.0, -60.0]
    return v


def _pow_specials(rng, shape):
    """For a non-integer exponent: NaN, inf, 0 and negatives (NaN out); not -inf nor -0, whose C pow results
    (+-inf, 0) kiln does not reproduce (docs/numerics.md)."""
    v = 3 * rng.standard_normal(shape)
    v.reshape(-1)[:3] = [np.nan, np.inf, 0.0]
    return v


def _pow(p: float, shape: list, feed=_specials) -> OpCase:
    name = f"pow_{str(p).replace('-', 'm').replace('.', 'p')}"
    return OpCase(name, single_op("Pow", [("x", shape)], [("y", shape)], {"p": np.float32(p)}), inputs={"x": feed})


def _catalogue() -> list[OpCase]:
    """Issue 19's ops: each op, each attribute value exporters write, the broadcast forms, NaN/inf in and out."""
    x20, x24, x40 = [1, 20, 5, 6], [1, 24, 3, 4], [2, 40, 3, 3]
    unary = [("Sqrt", x20, _specials), ("Reciprocal", x24, _specials), ("Exp", x20, _specials),
             ("Log", x24, _specials), ("Abs", [3, 50], _specials), ("Neg", x20, _specials),
             ("Tanh", x40, _specials), ("Tanh", [4, 70], _infs), ("Erf", x20, _infs), ("Erf", [3, 90], _wide),
             ("Softplus", x24, _specials), ("Softplus", [2, 66], _infs)]
    cases = [OpCase(f"{op.lower()}_{'x'.join(map(str, shape))}", single_op(op, [("x", shape)], [("y", shape)]),
                    inputs={"x": feed}) for op, shape, feed in unary]
    cases += [_pow(2, x20), _pow(0.5, x24, _pow_specials), _pow(3, [4, 33]), _pow(-1, x20),
              _pow(-0.5, x24, _pow_specials), _pow(1.7, x40, _pow_specials), _pow(4, [4, 33])]
    cases += [
        OpCase("leakyrelu_default", single_op("LeakyRelu", [("x", x20)], [("y", x20)]), inputs={"x": _specials}),
        OpCase("leakyrelu_alpha02_2d", single_op("LeakyRelu", [("x", [5, 36])], [("y", [5, 36])], alpha=0.2),
               inputs={"x": _specials}),
        OpCase("prelu_channel_c40", single_op("PRelu", [("x", x40)], [("y", x40)], {"s": _c(40, 1, 1)}),
               inputs={"x": _specials}),
        OpCase("prelu_scalar_c24", single_op("PRelu", [("x", x24)], [("y", x24)], {"s": np.float32([0.25])})),
        OpCase("prelu_row_2d", single_op("PRelu", [("x", [6, 48])], [("y", [6, 48])], {"s": _c(48)})),
        OpCase("prelu_full_act", single_op("PRelu", [("x", x20), ("s", x20)], [("y", x20)])),
        OpCase("max_three_channel_scalar", single_op("Max", [("x", x40), ("b", [2, 40, 1, 1])], [("y", x40)],
                                                     {"c": np.float32(0.3)})),
        OpCase("max_one", single_op("Max", [("x", x20)], [("y", x20)])),
        OpCase("min_channel_left", single_op("Min", [("b", [1, 24, 1, 1]), ("x", x24)], [("y", x24)])),
        OpCase("min_row_const", single_op("Min", [("x", [5, 36])], [("y", [5, 36])], {"r": _c(36)})),
        OpCase("mean_three_c20", single_op("Mean", [("a", x20), ("b", x20), ("c", [1, 20, 1, 1])], [("y", x20)])),
        OpCase("mean_two_2d", single_op("Mean", [("a", [4, 40]), ("b", [4, 40])], [("y", [4, 40])])),
    ]
    return cases


def _catalogue_chains() -> list[OpCase]:
    w = (_c(24, 20, 3, 3) / np.sqrt(180)).astype(np.float32)
    return [
        # Mish as exporters write it (YOLOv4): x * tanh(softplus(x)), one kernel
        OpCase("mish_c40", _chain("mish", [("Softplus", ["x"], ["s"], {}), ("Tanh", ["s"], ["t"], {}),
                                           ("Mul", ["x", "t"], ["y"], {})], [("x", [1, 40, 4, 4])],
                                  [("y", [1, 40, 4, 4])]), inputs={"x": _wide}, launches=1),
        # YOLO's Conv + LeakyRelu(0.1): the activation is a program after the Conv
        OpCase("conv_leakyrelu_c24", _chain("convlr", [("Conv", ["x", "w"], ["c"], {"pads": [1, 1, 1, 1]}),
                                                       ("LeakyRelu", ["c"], ["y"], {"alpha": 0.1})],
                                            [("x", [1, 20, 6, 6])], [("y", [1, 24, 6, 6])], {"w": w})),
        OpCase("rms_style_chain", _chain("rms", [("Pow", ["x", "two"], ["p"], {}), ("Add", ["p", "eps"], ["q"], {}),
                                                 ("Sqrt", ["q"], ["r"], {}), ("Reciprocal", ["r"], ["i"], {}),
                                                 ("Mul", ["x", "i"], ["y"], {})], [("x", [4, 40])], [("y", [4, 40])],
                                         {"two": np.float32(2), "eps": np.float32(1e-3)})),
    ]


CASES = _unary() + _binary() + _chains() + _catalogue() + _catalogue_chains()
