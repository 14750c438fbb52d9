"""Depthwise Conv + an elementwise program as its epilogue (codegen/passes/program_epilogue.py: one
dwconv2d_vector launch applies the program to each fp32 output row) against ONNX Runtime: SiLU as exported
(Sigmoid + Mul reading the conv), HardSwish after a folded BatchNormalization (MobileNetV3), LeakyRelu, Tanh,
Erf and Softplus (scratch rows), a ReLU then a Sigmoid; channels filling C0 and not (a program mapping 0 to 0
keeps the padded lanes zero), x + HardSwish(x). Not fused (audited): Sigmoid (0 -> 0.5) over 20 channels, and a
conv output also read by a GlobalAveragePool."""
import numpy as np
from onnx import helper

from . import OpCase, graph_case

RNG = np.random.default_rng(23)


def _dw(c: int, k: int, init: dict, name: str = "dw", bias: bool = True, **attrs):
    init[f"{name}.w"] = (RNG.standard_normal((c, 1, k, k)) / k).astype(np.float32)
    ins = ["x", f"{name}.w"]
    if bias:
        init[f"{name}.b"] = (0.1 * RNG.standard_normal(c)).astype(np.float32)
        ins.append(f"{name}.b")
    return helper.make_node("Conv", ins, ["c"], group=c, kernel_shape=[k, k], **attrs)


def _case(name: str, c: int, hw: int, k: int, tail: list, launches: int, bn: bool = False, **attrs) -> OpCase:
    """x [1, c, hw, hw] -> depthwise kxk (-> BatchNormalization) -> the nodes of `tail` reading "c" (or "n")."""
    init: dict = {}
    nodes = [_dw(c, k, init, bias=not bn, **attrs)]
    if bn:
        init.update({"bn.s": 1 + 0.1 * RNG.standard_normal(c), "bn.b": 0.1 * RNG.standard_normal(c),
                     "bn.m": 0.1 * RNG.standard_normal(c), "bn.v": 1 + 0.1 * RNG.random(c)})
        nodes.append(helper.make_node("BatchNormalization", ["c", "bn.s", "bn.b", "bn.m", "bn.v"], ["n"]))
    span = attrs.get("dilations", [1, 1])[0] * (k - 1) + 1
    ho = (hw + sum(attrs.get("pads", [0, 0, 0, 0])[::2]) - span) // attrs.get("strides", [1, 1])[0] + 1
    return graph_case(name, nodes + tail, [1, c, hw, hw], [1, c, ho, ho], init, 5e-3, launches)


def _n(op: str, ins: list[str], out: str = "y", **attrs):
    return helper.make_node(op, ins, [out], **attrs)


CASES = [
    # SiLU as torch exports it (YOLO, EfficientNet): both the Sigmoid and the Mul read the conv; 24 channels
    _case("dwepi_silu_c24_k3", 24, 9, 3, [_n("Sigmoid", ["c"], "s"), _n("Mul", ["c", "s"])], 1, pads=[1, 1, 1, 1]),
    # MobileNetV3: depthwise 5x5/2 + BN (folded) + HardSwish
    _case("dwepi_bn_hardswish_c32_k5_s2", 32, 11, 5, [_n("HardSwish", ["n"])], 1, bn=True, strides=[2, 2],
          pads=[2, 2, 2, 2]),
    _case("dwepi_leakyrelu_c16_k3", 16, 8, 3, [_n("LeakyRelu", ["c"], alpha=0.1)], 1, pads=[1, 1, 1, 1]),
    _case("dwepi_tanh_c20_k3_d2", 20, 10, 3, [_n("Tanh", ["c"])], 1, pads=[2, 2, 2, 2], dilations=[2, 2]),
    # Erf (two scratch rows) and Softplus (one; 0 -> ln 2 over channels that fill C0)
    _case("dwepi_erf_c16_k3", 16, 7, 3, [_n("Erf", ["c"])], 1, pads=[1, 1, 1, 1]),
    _case("dwepi_softplus_c32_k3", 32, 7, 3, [_n("Softplus", ["c"])], 1, pads=[1, 1, 1, 1]),
    # a ReLU (the kernel's own epilogue) and then a program
    _case("dwepi_relu_sigmoid_c16_k3", 16, 6, 3, [_n("Relu", ["c"], "r"), _n("Sigmoid", ["r"])], 1,
          pads=[1, 1, 1, 1]),
    # not fused: Sigmoid(0) = 0.5 would fill the 12 padded lanes of 20 channels
    _case("dwepi_sigmoid_c20_unfused", 20, 6, 3, [_n("Sigmoid", ["c"])], 2, pads=[1, 1, 1, 1]),
    # x + HardSwish(x): the Add joins the program, which still reads only the conv
    _case("dwepi_hardswish_add_c16", 16, 6, 3, [_n("HardSwish", ["c"], "h"), _n("Add", ["c", "h"])], 1,
          pads=[1, 1, 1, 1]),
    # not fused: the conv's output is also read by a GlobalAveragePool, whose result the program multiplies in
    _case("dwepi_gap_gate_unfused", 16, 6, 3, [_n("HardSwish", ["c"], "h"), _n("GlobalAveragePool", ["c"], "g"),
                                               _n("Mul", ["h", "g"])], 3, pads=[1, 1, 1, 1]),
]
