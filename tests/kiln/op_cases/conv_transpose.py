"""ConvTranspose (stride-phase convolutions on the Cube + one copy_mte interleave, or the GEMM + col2im_vector
scatter-add where the cost model prices it cheaper: every dense case with a stride > 1) against ONNX Runtime: kernels
2x2 / 3x3 / 4x4, strides 1, 2, 3 and mixed (2, 1); pads symmetric, asymmetric and none; output_padding; dilation
(stride 1, and with stride 3); groups (grouped and depthwise); auto_pad NOTSET, VALID, SAME_UPPER, SAME_LOWER;
output_shape (with and without auto_pad); with and without bias, batch 2; ReLU and Clip(0, 6) fused into every
phase. Then a DBNet-style head (convs, Resize + Concat, two 2x2 stride-2 up-convs, Sigmoid)."""
import numpy as np
from onnx import helper

from . import OpCase, graph_case, single_op

RNG = np.random.default_rng(20)


def _w(cin: int, cout_per_group: int, kh: int, kw: int | None = None) -> np.ndarray:
    kw = kh if kw is None else kw
    return (RNG.standard_normal((cin, cout_per_group, kh, kw)) / np.sqrt(cin * kh * kw)).astype(np.float32)


def _ct(name: str, x: list[int], cout: int, k: int | tuple[int, int], bias: bool = True, group: int = 1,
        launches: int | None = None, **attrs) -> OpCase:
    kh, kw = (k, k) if isinstance(k, int) else k
    init = {"w": _w(x[1], cout // group, kh, kw)}
    if bias:
        init["b"] = RNG.standard_normal(cout).astype(np.float32)
    if group > 1:
        attrs["group"] = group
    return OpCase(name, single_op("ConvTranspose", [("x", x)], [("y", None)], init, **attrs), tol=8e-3,
                  launches=launches)


SINGLE = [
    # DBNet's up-convs: 2x2 stride 2, no overlap: one 1x1 conv to 4 x 8 channels + the depth-to-space copy
    _ct("convt_k2_s2", [1, 16, 6, 7], 8, 2, strides=[2, 2], launches=2),
    # the same form at batch 2 (one move per image), 3x2 kernel = stride, 20 output channels (two C0 blocks)
    _ct("convt_k3x2_s3x2_b2", [2, 6, 4, 5], 20, (3, 2), strides=[3, 2], launches=2),
    # FCN / U-Net: 4x4 stride 2 pad 1 (overlapping windows: the GEMM + col2im scatter-add)
    _ct("convt_k4_s2_p1", [1, 8, 5, 6], 12, 4, strides=[2, 2], pads=[1, 1, 1, 1], launches=2),
    # col2im: dilation 2 at stride 3 (windows of 7 overlap), asymmetric pads, batch 2, two channel blocks
    _ct("convt_k4_s3_d2_b2", [2, 8, 5, 6], 20, 4, strides=[3, 3], dilations=[2, 2], pads=[1, 2, 2, 1], launches=2),
    # phases no tap reaches (their outputs are the bias alone): only the GEMM + col2im takes them (one group)
    _ct("convt_k1_s2", [1, 8, 4, 5], 12, 1, strides=[2, 2], launches=2),
    _ct("convt_k3_s2_d2_b2", [2, 8, 5, 6], 20, 3, strides=[2, 2], dilations=[2, 2], pads=[1, 2, 2, 1], launches=2),
    # 3x3 stride 2 pad 1 output_padding 1 (PyTorch decoders doubling the size), no bias
    _ct("convt_k3_s2_p1_op1", [1, 6, 5, 4], 10, 3, bias=False, strides=[2, 2], pads=[1, 1, 1, 1],
        output_padding=[1, 1]),
    # stride 1: one convolution with the flipped weight, no interleave; batch 2
    _ct("convt_k3_s1_p1_b2", [2, 8, 6, 5], 8, 3, pads=[1, 1, 1, 1], launches=1),
    # dilation 2 at stride 1, and at stride 3 (every phase one tap)
    _ct("convt_k3_s1_d2", [1, 5, 6, 6], 7, 3, dilations=[2, 2], pads=[1, 1, 1, 1], launches=1),
    _ct("convt_k3_s3_d2", [1, 4, 4, 5], 6, 3, strides=[3, 3], dilations=[2, 2]),
    # asymmetric pads, mixed strides (2, 1), a rectangular kernel
    _ct("convt_k3x2_s2x1_asym", [1, 6, 5, 6], 9, (3, 2), strides=[2, 1], pads=[1, 0, 0, 1]),
    # stride 3 kernel 3 (phases of one tap each), output_padding 2 on W only
    _ct("convt_k3_s3_op", [1, 4, 4, 3], 5, 3, strides=[3, 3], output_padding=[0, 2]),
    # groups: grouped (2 groups, 4 in / 3 out each) and depthwise (16 groups of one channel)
    _ct("convt_g2_k4_s2_p1", [1, 8, 5, 5], 6, 4, group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
    _ct("convt_dw16_k4_s2_p1", [1, 16, 5, 6], 16, 4, group=16, strides=[2, 2], pads=[1, 1, 1, 1]),
    # auto_pad: VALID, SAME_UPPER, SAME_LOWER (odd total padding on W: the pixel goes to the end / the beginning)
    _ct("convt_k3_s2_valid", [1, 4, 4, 5], 6, 3, strides=[2, 2], auto_pad="VALID"),
    _ct("convt_k4_s2x3_same_upper", [1, 4, 5, 4], 6, 4, strides=[2, 3], auto_pad="SAME_UPPER"),
    _ct("convt_k4_s2x3_same_lower", [1, 4, 5, 4], 6, 4, strides=[2, 3], auto_pad="SAME_LOWER"),
    # output_shape: total padding (1, 2) split with the odd pixel first; with SAME_UPPER, last
    _ct("convt_k3_s2_output_shape", [1, 4, 5, 6], 6, 3, strides=[2, 2], output_shape=[10, 11]),
    _ct("convt_k4_s2_output_shape_upper", [1, 4, 5, 6], 6, 4, strides=[2, 2], output_shape=[9, 11],
        auto_pad="SAME_UPPER"),
]


def _fused(name: str, act: str) -> OpCase:
    """ConvTranspose 4x4/2 + Relu or Clip(0, 6): the GEMM + col2im form, the activation applied by the col2im
    kernel once per output pixel, after the bias (2 launches)."""
    init = {"w": _w(8, 8, 4), "b": RNG.standard_normal(8).astype(np.float32)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    else:
        init.update(lo=np.zeros((), np.float32), hi=np.full((), 6.0, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    return graph_case(name, nodes, [1, 8, 5, 5], [1, 8, 10, 10], init, 8e-3, 2)


def _conv(name: str, x: str, y: str, cin: int, cout: int, k: int, init: dict, **attrs) -> object:
    init[f"{name}.w"] = (RNG.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    init[f"{name}.b"] = 0.1 * RNG.standard_normal(cout).astype(np.float32)
    return helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [y], **attrs)


def _dbnet_head() -> OpCase:
    """A DBNet-style text-detection head (PaddleOCR's DB head on a small FPN): a stride-2 conv branch upsampled
    back by Resize (nearest x2) and concatenated with the input, a 3x3 conv + ReLU, then the head's 2x2 stride-2
    ConvTranspose + BatchNormalization (folded into its weights) + ReLU, the second 2x2 stride-2 ConvTranspose to
    one channel, Sigmoid: 9 launches."""
    init: dict = {"up1.w": _w(16, 16, 2), "up1.b": 0.1 * RNG.standard_normal(16).astype(np.float32),
                  "up2.w": _w(16, 1, 2), "up2.b": 0.1 * RNG.standard_normal(1).astype(np.float32),
                  "scales": np.array([1, 1, 2, 2], np.float32), "bn.s": 1 + 0.1 * RNG.standard_normal(16),
                  "bn.b": 0.1 * RNG.standard_normal(16), "bn.m": 0.1 * RNG.standard_normal(16),
                  "bn.v": 1 + 0.1 * RNG.random(16)}
    nodes = [_conv("c1", "x", "c1o", 16, 32, 3, init, strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1o"], ["c1r"]),
             _conv("c2", "c1r", "c2o", 32, 16, 1, init),
             helper.make_node("Resize", ["c2o", "", "scales"], ["up"], mode="nearest"),
             helper.make_node("Concat", ["x", "up"], ["cat"], axis=1),
             _conv("c3", "cat", "c3o", 32, 16, 3, init, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c3o"], ["c3r"]),
             helper.make_node("ConvTranspose", ["c3r", "up1.w", "up1.b"], ["u1"], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["u1", "bn.s", "bn.b", "bn.m", "bn.v"], ["u1n"]),
             helper.make_node("Relu", ["u1n"], ["u1r"]),
             helper.make_node("ConvTranspose", ["u1r", "up2.w", "up2.b"], ["u2"], strides=[2, 2]),
             helper.make_node("Sigmoid", ["u2"], ["y"])]
    return graph_case("block_dbnet_head", nodes, [1, 16, 12, 12], [1, 1, 48, 48], init, 1e-2, 9)


CASES = SINGLE + [_fused("convt_k4_s2_p1_relu", "relu"), _fused("convt_k4_s2_p1_relu6", "clip"), _dbnet_head()]
