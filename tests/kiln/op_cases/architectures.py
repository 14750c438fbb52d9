"""Whole small networks in the shapes real exporters write (issue 19's acceptance: several architectures baked and
validated with the isolated check, beside the corpus files of tests/kiln/test_corpus.py). Each is a scaled-down
torchvision / Ultralytics network spelled as torch.onnx.export spells it at opset 17: BatchNormalization kept
where it follows a Concat (DenseNet), Linear as Gemm(transB=1) on 2-D and MatMul + Add on 3-D inputs, GELU as
its Erf form, SiLU as Sigmoid * x, Upsample as Resize with an empty roi, `x.view(x.size(0), -1)` as the Shape ->
Gather -> Unsqueeze -> Concat -> Reshape chain, `x[:, 0]` as a scalar Gather. Weights are scaled so activations
stay O(1) through the depth. Each bound is about 5x the error measured on the final output (fp16 storage through
every layer; 2.6e-4..1.4e-3 when written), and each launch count is the fused plan's, so a lost fusion fails."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase

RNG = np.random.default_rng(1900)


class Net:
    """A graph under construction: each method appends its nodes and returns the name of its output."""

    def __init__(self, name: str):
        self.name, self.nodes, self.init, self.count = name, [], {}, 0

    def _id(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def const(self, value, dtype=np.float32) -> str:
        name = self._id("k")
        self.init[name] = np.asarray(value, dtype)
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self._id(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{out}", **attrs))
        return out

    def split(self, x: str, sizes: list[int]) -> list[str]:
        outs = [self._id("split") for _ in sizes]
        self.nodes.append(helper.make_node("Split", [x, self.const(sizes, np.int64)], outs, name=f"/{outs[0]}",
                                           axis=1))
        return outs

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, bias: bool = True,
             pad: int | None = None) -> str:
        pad = k // 2 if pad is None else pad
        w = self.const(RNG.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k)))
        ins = [x, w] + ([self.const(0.1 * RNG.standard_normal(cout))] if bias else [])
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group,
                         dilations=[1, 1])

    def bn(self, x: str, c: int) -> str:
        params = [1 + 0.1 * RNG.standard_normal(c), 0.1 * RNG.standard_normal(c), 0.1 * RNG.standard_normal(c),
                  1 + 0.2 * RNG.random(c)]
        return self.node("BatchNormalization", [x] + [self.const(p) for p in params], epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def silu(self, x: str) -> str:
        return self.node("Mul", [x, self.node("Sigmoid", [x])])

    def gelu(self, x: str) -> str:
        erf = self.node("Erf", [self.node("Div", [x, self.const(np.sqrt(2.0))])])
        return self.node("Mul", [self.node("Mul", [x, self.node("Add", [erf, self.const(1.0)])]), self.const(0.5)])

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        """torch's Linear: Gemm(transB=1) on a 2-D input."""
        w = self.const(RNG.standard_normal((n_out, n_in)) / np.sqrt(n_in))
        return self.node("Gemm", [x, w, self.const(0.1 * RNG.standard_normal(n_out))], alpha=1.0, beta=1.0,
                         transB=1)

    def linear_3d(self, x: str, n_in: int, n_out: int) -> str:
        """torch's Linear on a [B, T, C] input: MatMul by the transposed weight, then Add of the bias."""
        w = self.const(RNG.standard_normal((n_in, n_out)) / np.sqrt(n_in))
        return self.node("Add", [self.const(0.1 * RNG.standard_normal(n_out)), self.node("MatMul", [x, w])])

    def layer_norm(self, x: str, c: int, eps: float = 1e-6) -> str:
        scale, bias = self.const(1 + 0.1 * RNG.standard_normal(c)), self.const(0.1 * RNG.standard_normal(c))
        return self.node("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    def flatten_by_view(self, x: str) -> str:
        """`x.view(x.size(0), -1)` as torch exports it: the batch from Shape -> Gather, a Concat with -1."""
        batch = self.node("Gather", [self.node("Shape", [x]), self.const(0, np.int64)], axis=0)
        dims = self.node("Concat", [self.node("Unsqueeze", [batch, self.const([0], np.int64)]),
                                    self.const([-1], np.int64)], axis=0)
        return self.node("Reshape", [x, dims])

    def case(self, x_shape: list[int], y_shape: list[int], tol: float, launches: int | None = None) -> OpCase:
        self.nodes[-1].output[0] = "y"
        graph = helper.make_graph(self.nodes, self.name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                                  [numpy_helper.from_array(v, k) for k, v in self.init.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  producer_name="pytorch", producer_version="2.1.0")
        model.ir_version = 8
        return OpCase(self.name, model, tol=tol, launches=launches)


def _resnext() -> OpCase:
    """torchvision resnext50_32x4d scaled: 3x3/2 stem + BN (folded by the exporter: a biased Conv) + Relu,
    MaxPool 3x3/2, two bottlenecks (1x1, grouped 3x3 with 4 channels per group, 1x1, the first with a strided
    projection), GlobalAveragePool, the view-flatten chain, Linear."""
    n = Net("arch_resnext")
    x = n.node("MaxPool", [n.relu(n.conv("x", 3, 32, 3, stride=2))], kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1])
    for cin, stride in ((32, 2), (64, 1)):
        h = n.relu(n.conv(x, cin, 64, 1))
        h = n.relu(n.conv(h, 64, 64, 3, stride=stride, group=16))
        h = n.conv(h, 64, 64, 1)
        short = n.conv(x, cin, 64, 1, stride=stride) if stride != 1 or cin != 64 else x
        x = n.relu(n.node("Add", [h, short]))
    x = n.flatten_by_view(n.node("GlobalAveragePool", [x]))
    n.linear(x, 64, 10)
    return n.case([1, 3, 32, 32], [1, 10], 2e-3, 10)


def _densenet() -> OpCase:
    """torchvision densenet121 scaled: stem conv/2 + BN + Relu + MaxPool, a dense block of three layers
    (BN -> Relu -> 1x1 -> BN -> Relu -> 3x3, growth 8, Concat each), a transition (BN -> Relu -> 1x1 ->
    AveragePool 2x2/2), the final BN -> Relu -> GlobalAveragePool -> Flatten -> Linear. The BatchNormalizations
    after a Concat stay in the graph: the exporter cannot fold them into a Conv."""
    n = Net("arch_densenet")
    x = n.relu(n.bn(n.conv("x", 3, 16, 3, stride=2, bias=False), 16))
    x = n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 16
    for _ in range(3):
        h = n.conv(n.relu(n.bn(x, c)), c, 32, 1, bias=False)
        h = n.conv(n.relu(n.bn(h, 32)), 32, 8, 3, bias=False)
        x, c = n.node("Concat", [x, h], axis=1), c + 8
    x = n.conv(n.relu(n.bn(x, c)), c, 20, 1, bias=False)
    x = n.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = n.node("Flatten", [n.node("GlobalAveragePool", [n.relu(n.bn(x, 20))])], axis=1)
    n.linear(x, 20, 10)
    return n.case([1, 3, 32, 32], [1, 10], 2e-3, 18)


def _convnext() -> OpCase:
    """torchvision convnext_tiny scaled: 4x4/4 patchify stem, its LayerNorm over channels between two
    Transposes, two blocks (depthwise 7x7, Transpose to NHWC, LayerNorm, Linear x4 as MatMul + Add, GELU, Linear,
    layer-scale Mul, Transpose back, residual Add), GlobalAveragePool, LayerNorm, Flatten, Linear."""
    n = Net("arch_convnext")
    x = n.node("Transpose", [n.conv("x", 3, 32, 4, stride=4, pad=0)], perm=[0, 2, 3, 1])
    x = n.node("Transpose", [n.layer_norm(x, 32)], perm=[0, 3, 1, 2])
    for _ in range(2):
        h = n.node("Transpose", [n.conv(x, 32, 32, 7, group=32)], perm=[0, 2, 3, 1])
        h = n.linear_3d(n.gelu(n.linear_3d(n.layer_norm(h, 32), 32, 128)), 128, 32)
        h = n.node("Mul", [n.const(np.full(32, 0.5)), h])
        x = n.node("Add", [x, n.node("Transpose", [h], perm=[0, 3, 1, 2])])
    x = n.node("Transpose", [n.node("GlobalAveragePool", [x])], perm=[0, 2, 3, 1])
    x = n.node("Flatten", [n.node("Transpose", [n.layer_norm(x, 32)], perm=[0, 3, 1, 2])], axis=1)
    n.linear(x, 32, 10)
    return n.case([1, 3, 32, 32], [1, 10], 3e-3, 22)


def _vit() -> OpCase:
    """torchvision vit_b_16 scaled: 4x4/4 patch Conv, Reshape + Transpose to tokens, the class token Concat
    (a constant), position embedding Add, one pre-norm encoder layer (LayerNorm, Q/K/V Linear, heads by Reshape
    + Transpose, scaled QK^T, Softmax, AV, merge, out Linear, residual; LayerNorm, MLP with GELU, residual), the
    final LayerNorm, the class token by a scalar Gather, the head Linear."""
    n, d, heads, tokens = Net("arch_vit"), 32, 4, 17
    x = n.node("Reshape", [n.conv("x", 3, d, 4, stride=4, pad=0), n.const([1, d, 16], np.int64)])
    x = n.node("Concat", [n.const(0.1 * RNG.standard_normal((1, 1, d))), n.node("Transpose", [x], perm=[0, 2, 1])],
               axis=1)
    x = n.node("Add", [x, n.const(0.1 * RNG.standard_normal((1, tokens, d)))])
    h = n.layer_norm(x, d)
    q, k, v = (n.node("Transpose", [n.node("Reshape", [n.linear_3d(h, d, d),
                                                        n.const([1, tokens, heads, d // heads], np.int64)])],
                      perm=perm) for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]))
    att = n.node("Softmax", [n.node("Mul", [n.node("MatMul", [q, k]), n.const(1 / np.sqrt(d // heads))])], axis=-1)
    o = n.node("Transpose", [n.node("MatMul", [att, v])], perm=[0, 2, 1, 3])
    o = n.linear_3d(n.node("Reshape", [o, n.const([1, tokens, d], np.int64)]), d, d)
    x = n.node("Add", [x, o])
    x = n.node("Add", [x, n.linear_3d(n.gelu(n.linear_3d(n.layer_norm(x, d), d, 2 * d)), 2 * d, d)])
    x = n.node("Gather", [n.layer_norm(x, d), n.const(0, np.int64)], axis=1)
    n.linear(x, d, 10)
    return n.case([1, 3, 16, 16], [1, 10], 4e-3, 20)


def _yolo() -> OpCase:
    """An Ultralytics YOLOv8-style backbone and neck scaled: Conv + SiLU blocks, a C2f (Split in two, a
    bottleneck on one half, Concat of all three), SPPF (three chained MaxPool 5x5/1 and a Concat), the neck's
    nearest x2 Resize (empty roi, scales) and Concat with the stride-8 feature, a Conv + SiLU output."""
    n = Net("arch_yolo")
    p1 = n.silu(n.conv("x", 3, 16, 3, stride=2))
    p2 = n.silu(n.conv(p1, 16, 32, 3, stride=2))
    halves = n.split(n.silu(n.conv(p2, 32, 32, 1)), [16, 16])
    m = n.node("Add", [halves[1], n.silu(n.conv(n.silu(n.conv(halves[1], 16, 16, 3)), 16, 16, 3))])
    c2f = n.silu(n.conv(n.node("Concat", [halves[0], halves[1], m], axis=1), 48, 32, 1))
    p3 = n.silu(n.conv(c2f, 32, 64, 3, stride=2))
    s = n.silu(n.conv(p3, 64, 32, 1))
    pools = [s]
    for _ in range(3):
        pools.append(n.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    sppf = n.silu(n.conv(n.node("Concat", pools, axis=1), 128, 64, 1))
    up = n.node("Resize", [sppf, "", n.const([1, 1, 2, 2])], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    n.silu(n.conv(n.node("Concat", [up, c2f], axis=1), 96, 32, 3))
    return n.case([1, 3, 32, 32], [1, 32, 8, 8], 6e-3, 16)


def _regnety() -> OpCase:
    """torchvision regnet_y_400mf scaled: stem 3x3/2 + Relu, a Y block (1x1 + Relu, grouped 3x3/2 with group
    width 8 + Relu, squeeze-excitation: GlobalAveragePool, 1x1 + Relu, 1x1, Sigmoid, Mul; 1x1), the strided
    1x1 projection, Add, Relu; GlobalAveragePool, Flatten, Linear."""
    n = Net("arch_regnety")
    x = n.relu(n.conv("x", 3, 24, 3, stride=2))
    h = n.relu(n.conv(x, 24, 48, 1))
    h = n.relu(n.conv(h, 48, 48, 3, stride=2, group=6))
    se = n.node("Sigmoid", [n.conv(n.relu(n.conv(n.node("GlobalAveragePool", [h]), 48, 8, 1)), 8, 48, 1)])
    h = n.conv(n.node("Mul", [h, se]), 48, 48, 1)
    x = n.relu(n.node("Add", [h, n.conv(x, 24, 48, 1, stride=2)]))
    n.linear(n.node("Flatten", [n.node("GlobalAveragePool", [x])], axis=1), 48, 10)
    return n.case([1, 3, 32, 32], [1, 10], 2e-3, 10)


def _lraspp() -> OpCase:
    """torchvision lraspp_mobilenet_v3_large's head on a small backbone (Conv + HardSwish, depthwise + Relu): the
    high branch Conv + BN + Relu gated by GlobalAveragePool -> 1x1 -> Sigmoid, Resize (bilinear, half_pixel) to
    the low feature's size, the two classifiers added, Resize back to the input size given as `sizes`."""
    n = Net("arch_lraspp")
    low = n.node("HardSwish", [n.conv("x", 3, 16, 3, stride=2)])
    high = n.relu(n.conv(n.relu(n.conv(low, 16, 16, 3, stride=2, group=16)), 16, 32, 1))
    gate = n.node("Sigmoid", [n.conv(n.node("GlobalAveragePool", [high]), 32, 16, 1, bias=False)])
    h = n.node("Mul", [n.relu(n.bn(n.conv(high, 32, 16, 1, bias=False), 16)), gate])
    h = n.node("Resize", [h, "", "", n.const([1, 16, 16, 16], np.int64)], mode="linear",
               coordinate_transformation_mode="half_pixel")
    seg = n.node("Add", [n.conv(low, 16, 4, 1), n.conv(h, 16, 4, 1)])
    n.node("Resize", [seg, "", "", n.const([1, 4, 32, 32], np.int64)], mode="linear",
           coordinate_transformation_mode="half_pixel")
    return n.case([1, 3, 32, 32], [1, 4, 32, 32], 4e-3, 10)


def _alexnet() -> OpCase:
    """The Caffe-zoo AlexNet scaled (bvlc_alexnet in the ONNX model zoo): 11x11/4 Conv + Relu, LRN (size 5,
    alpha 1e-4, beta 0.75), MaxPool 3x3/2, 5x5 Conv in two groups + Relu, LRN, MaxPool, 3x3 Conv + Relu,
    Flatten, two Gemm layers."""
    n = Net("arch_alexnet")
    x = n.relu(n.conv("x", 3, 32, 11, stride=4, pad=2))
    x = n.node("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)
    x = n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    x = n.relu(n.conv(x, 32, 64, 5, group=2))
    x = n.node("MaxPool", [n.node("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)], kernel_shape=[3, 3],
               strides=[2, 2])
    x = n.node("Flatten", [n.relu(n.conv(x, 64, 64, 3))], axis=1)
    n.linear(n.relu(n.linear(x, 64 * 3 * 3, 64)), 64, 10)
    return n.case([1, 3, 63, 63], [1, 10], 6e-3, 13)


CASES = [_resnext(), _densenet(), _convnext(), _vit(), _yolo(), _regnety(), _lraspp(), _alexnet()]
