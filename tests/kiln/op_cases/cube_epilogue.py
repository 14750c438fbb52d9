"""Cube Conv (dense, grouped) + an elementwise program in its Vector epilogue (codegen/passes/program_epilogue.py:
after bias, residual and activation, in fp32, before the cast; on chip on a coupled profile, in the Vector-core
pass on a split one, where the cost model decides) against ONNX Runtime: SiLU as exported (Sigmoid + Mul reading
the conv), HardSwish after a folded BatchNormalization (MobileNetV3), LeakyRelu; 1x1 and 3x3, output channels
not a multiple of 16 (a program mapping 0 to 0 keeps the padded lanes zero), a residual add then SiLU, a ReLU then
a Sigmoid, a grouped conv. Not fused (audited): Sigmoid (0 -> 0.5) over 20 output channels. Each launch count is
the build target's plan (ascend910b: the conv's Vector pass runs in its own launch, mixed, so the cost model takes
each program here; one it kept apart would be a second launch)."""
import numpy as np
from onnx import helper

from . import OpCase, graph_case

RNG = np.random.default_rng(19)


def _conv(cin: int, cout: int, k: int, init: dict, bias: bool = True, out: str = "c", **attrs):
    g = attrs.get("group", 1)
    init["w"] = (RNG.standard_normal((cout, cin // g, k, k)) * np.sqrt(2.0 / (cin // g * k * k))).astype(np.float32)
    ins = ["x", "w"]
    if bias:
        init["b"] = (0.1 * RNG.standard_normal(cout)).astype(np.float32)
        ins.append("b")
    return helper.make_node("Conv", ins, [out], kernel_shape=[k, k], pads=[k // 2] * 4, **attrs)


def _n(op: str, ins: list[str], out: str = "y", **attrs):
    return helper.make_node(op, ins, [out], **attrs)


def _silu(x: str, out: str = "y") -> list:
    return [_n("Sigmoid", [x], f"{x}_s"), _n("Mul", [x, f"{x}_s"], out)]


def _case(name: str, cin: int, cout: int, hw: int, k: int, tail: list, launches: int, bn: bool = False,
          pre: list | None = None, **attrs) -> OpCase:
    """x [1, cin, hw, hw] -> kxk conv to cout (-> BatchNormalization "n") (-> `pre`) -> the nodes of `tail`."""
    init: dict = {}
    nodes = [_conv(cin, cout, k, init, bias=not bn, **attrs)]
    if bn:
        init.update({"bn.s": 1 + 0.1 * RNG.standard_normal(cout), "bn.b": 0.1 * RNG.standard_normal(cout),
                     "bn.m": 0.1 * RNG.standard_normal(cout), "bn.v": 1 + 0.1 * RNG.random(cout)})
        nodes.append(helper.make_node("BatchNormalization", ["c", "bn.s", "bn.b", "bn.m", "bn.v"], ["n"]))
    ho = (hw - 1) // attrs.get("strides", [1, 1])[0] + 1
    return graph_case(name, nodes + (pre or []) + tail, [1, cin, hw, hw], [1, cout, ho, ho],
                      {k: np.asarray(v, np.float32) for k, v in init.items()}, 5e-3, launches)


CASES = [
    # SiLU as torch exports it (YOLO, EfficientNet's expand convs) after a 1x1 to 40 channels (a ragged C0 block)
    _case("cubeepi_silu_1x1_o40", 24, 40, 8, 1, _silu("c"), 1),
    # YOLO's Conv + SiLU: a 3x3/2 to 24 channels
    _case("cubeepi_silu_3x3_s2_o24", 16, 24, 9, 3, _silu("c"), 1, strides=[2, 2]),
    # MobileNetV3: 1x1 + BN (folded) + HardSwish, 48 channels
    _case("cubeepi_bn_hardswish_1x1_o48", 16, 48, 7, 1, [_n("HardSwish", ["n"])], 1, bn=True),
    _case("cubeepi_leakyrelu_3x3_o20", 16, 20, 6, 3, [_n("LeakyRelu", ["c"], alpha=0.1)], 1),
    # a residual add (the conv's Vector epilogue already), then SiLU; 3x3, 32 -> 32
    _case("cubeepi_residual_silu_3x3", 32, 32, 6, 3, _silu("a"), 1, pre=[_n("Add", ["c", "x"], "a")]),
    # a ReLU (Fixpipe's, then the Vector pass's) then a Sigmoid: 0 -> 0.5 over channels that fill C0
    _case("cubeepi_relu_sigmoid_1x1_o32", 16, 32, 6, 1, [_n("Sigmoid", ["r"])], 1, pre=[_n("Relu", ["c"], "r")]),
    # a grouped conv (conv2d_grouped_cube: the same epilogue), 2 groups
    _case("cubeepi_grouped_silu_3x3_g2", 32, 32, 6, 3, _silu("c"), 1, group=2),
    # Softplus (a scratch row; 0 -> ln 2 over channels that fill C0) after a 3x3 to 32 channels
    _case("cubeepi_softplus_3x3_o32", 16, 32, 6, 3, [_n("Softplus", ["c"])], 1),
    # not fused: Sigmoid(0) = 0.5 would fill the 12 padded lanes of 20 channels
    _case("cubeepi_sigmoid_o20_unfused", 16, 20, 6, 1, [_n("Sigmoid", ["c"])], 2),
]
