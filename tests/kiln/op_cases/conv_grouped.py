"""Grouped Conv (1 < group, not depthwise: conv2d_grouped_cube) against ONNX Runtime: groups 2, 3, 4, 6, 8, 13, 32;
channels per group 1..24, mostly not multiples of 16 (groups share a C0 block, or one spans two); kernels 1x1 and
3x3, strides 1 and 2, symmetric and asymmetric pads, dilation 2, with and without bias; a channel multiplier
(group = C_in < C_out); Conv + Relu / Clip / residual Add fused into the grouped kernel; and two small blocks in the
exporters' shapes (a ResNeXt bottleneck, a RegNetX block with its strided projection shortcut), BN folded."""
import numpy as np
from onnx import helper

from . import OpCase, graph_case, single_op

RNG = np.random.default_rng(19)


def _w(cout: int, per_group_in: int, k: int) -> np.ndarray:
    return (RNG.standard_normal((cout, per_group_in, k, k)) / np.sqrt(per_group_in * k * k)).astype(np.float32)


def _grouped(name: str, x: list[int], cout: int, group: int, k: int, bias: bool = True, **attrs) -> OpCase:
    init = {"w": _w(cout, x[1] // group, k)}
    if bias:
        init["b"] = RNG.standard_normal(cout).astype(np.float32)
    return OpCase(name, single_op("Conv", [("x", x)], [("y", None)], init, group=group, **attrs), tol=8e-3,
                  launches=1)


SINGLE = [
    # group 2, 3 in / 4 out per group: both groups inside one C0 block of the input and of the output
    _grouped("gconv_g2_c6_k3_p1", [1, 6, 9, 10], 8, 2, 3, pads=[1, 1, 1, 1]),
    # group 3, 3 per group, stride 2, no bias
    _grouped("gconv_g3_c9_k3_s2_nobias", [1, 9, 11, 8], 12, 3, 3, bias=False, strides=[2, 2], pads=[1, 1, 1, 1]),
    # group 4, 5 in / 7 out per group, 1x1: groups straddle the output blocks (7 does not divide 16)
    _grouped("gconv_g4_c20_k1", [1, 20, 7, 7], 28, 4, 1),
    # group 8, 8 per group, dilation 2 (dilated ResNeXt / segmentation backbones)
    _grouped("gconv_g8_c64_k3_d2", [1, 64, 12, 12], 64, 8, 3, pads=[2, 2, 2, 2], dilations=[2, 2]),
    # group 32, 4 per group (ResNeXt-50 32x4d's first stage width)
    _grouped("gconv_g32_c128_k3", [1, 128, 10, 10], 128, 32, 3, pads=[1, 1, 1, 1]),
    # group 2, 24 per group: a group spans two C0 blocks and the second shares its block with the next group
    _grouped("gconv_g2_c48_k3_s2", [1, 48, 10, 9], 48, 2, 3, strides=[2, 2], pads=[1, 1, 1, 1]),
    # group 3 = C_in < C_out: one input channel per group, a channel multiplier of 2 (not depthwise)
    _grouped("gconv_g3_mult2_k3", [1, 3, 11, 11], 6, 3, 3, pads=[1, 1, 1, 1]),
    # group 4, 16 in / 8 out per group, asymmetric pads (SAME_UPPER at stride 2)
    _grouped("gconv_g4_c64_k3_asym", [1, 64, 8, 8], 32, 4, 3, bias=False, strides=[2, 2], pads=[0, 0, 1, 1]),
    # RegNetY-400MF's widths: group 6 (48 channels) and group 13 (104 channels), 8 per group
    _grouped("gconv_g6_c48_k3_s2", [1, 48, 14, 14], 48, 6, 3, strides=[2, 2], pads=[1, 1, 1, 1]),
    _grouped("gconv_g13_c104_k3", [1, 104, 7, 7], 104, 13, 3, pads=[1, 1, 1, 1]),
    # group 2 with auto_pad (resolved to pads by the frontend), batch 2
    _grouped("gconv_g2_c10_same_upper", [2, 10, 7, 7], 14, 2, 3, auto_pad="SAME_UPPER"),
]


def _bn(prefix: str, c: int) -> dict[str, np.ndarray]:
    return {f"{prefix}.s": 1 + 0.1 * RNG.standard_normal(c), f"{prefix}.b": 0.1 * RNG.standard_normal(c),
            f"{prefix}.m": 0.1 * RNG.standard_normal(c), f"{prefix}.v": 1 + 0.1 * RNG.random(c)}


def _conv_bn(name: str, x: str, y: str, w: np.ndarray, init: dict, relu: bool, **attrs) -> list:
    """Conv (no bias, as torchvision exports a conv before its BN) -> BatchNormalization [-> Relu]."""
    init[f"{name}.w"] = w
    init.update(_bn(name, w.shape[0]))
    out = f"{name}.bn" if relu else y
    nodes = [helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], **attrs),
             helper.make_node("BatchNormalization", [f"{name}.c"] + [f"{name}.{p}" for p in "sbmv"], [out])]
    return nodes + ([helper.make_node("Relu", [out], [y])] if relu else [])


def _fused(name: str, act: str) -> OpCase:
    """Grouped conv + an epilogue the dense conv takes: Relu (Fixpipe), Clip 0..6 (Vector pass), residual Add +
    Relu (Vector pass): one kernel each."""
    init = {"w": _w(32, 8, 3), "b": RNG.standard_normal(32).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=4, pads=[1, 1, 1, 1])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif act == "clip":
        init.update(lo=np.zeros((), np.float32), hi=np.full((), 6.0, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    else:
        nodes += [helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return graph_case(name, nodes, [1, 32, 9, 9], [1, 32, 9, 9], init, 8e-3, 1)


def _resnext_block() -> OpCase:
    """ResNeXt bottleneck (torchvision resnext50_32x4d's shape, scaled): 1x1 -> BN -> Relu, 3x3 group 32 (4 per
    group) -> BN -> Relu, 1x1 -> BN, + identity, Relu: three kernels (BN folded, each Relu and the Add fused)."""
    init: dict = {}
    nodes = (_conv_bn("c1", "x", "r1", _w(128, 64, 1), init, True)
             + _conv_bn("c2", "r1", "r2", _w(128, 4, 3), init, True, group=32, pads=[1, 1, 1, 1])
             + _conv_bn("c3", "r2", "o3", _w(64, 128, 1), init, False)
             + [helper.make_node("Add", ["o3", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])])
    return graph_case("block_resnext_32x4d", nodes, [1, 64, 8, 8], [1, 64, 8, 8], init, 1e-2, 3)


def _regnet_block() -> OpCase:
    """RegNetX block (torchvision regnet_x_400mf's shape: group width 8): 1x1 -> BN -> Relu, 3x3/s2 group 6 -> BN
    -> Relu, 1x1 -> BN, + the strided 1x1 projection of the input (-> BN), Relu: three kernels (the projection
    accumulated into the last 1x1's L0C as its second source)."""
    init: dict = {}
    nodes = (_conv_bn("a", "x", "ra", _w(48, 32, 1), init, True)
             + _conv_bn("b", "ra", "rb", _w(48, 8, 3), init, True, group=6, strides=[2, 2], pads=[1, 1, 1, 1])
             + _conv_bn("c", "rb", "oc", _w(48, 48, 1), init, False)
             + _conv_bn("p", "x", "op", _w(48, 32, 1), init, False, strides=[2, 2])
             + [helper.make_node("Add", ["oc", "op"], ["s"]), helper.make_node("Relu", ["s"], ["y"])])
    return graph_case("block_regnetx_g6", nodes, [1, 32, 14, 14], [1, 48, 7, 7], init, 1e-2, 3)


CASES = SINGLE + [_fused("gconv_g4_relu", "relu"), _fused("gconv_g4_relu6", "clip"),
                  _fused("gconv_g4_residual_relu", "residual"), _resnext_block(), _regnet_block()]
