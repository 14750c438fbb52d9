"""Built-in model zoo: ResNet-50, MobileNetV2 and one BERT-base encoder layer.

Each model is written here as an ONNX graph with the topology and node
structure an exporter produces (torchvision / Hugging Face style names, explicit
BatchNormalization after every bias-free Conv, Clip for ReLU6, decomposed GELU),
so the frontend, BN folding and fusion passes see what they would see on a real
export. The weights are random, seeded with ``numpy.random.default_rng(seed)``:
the same seed gives a byte-identical file.

Random weights must still keep the signal alive. Plain random init makes a deep
net's outputs tiny (1e-9 and below, zero in fp16) and nearly independent of the
input, which is useless for checking kernels. So:

- Conv weights are He-scaled (std sqrt(2 / fan_in)).
- Every BatchNormalization is calibrated: while the graph is built, a small
  numpy forward pass runs a batch of two seeded standard-normal inputs through
  it, and each BN's running mean/var are set to the per-channel mean/var of the
  tensor that actually reaches it, so each BN output has about zero mean and
  unit variance.
- The last BN of every residual branch gets gamma ~0.3 (zero-init-residual,
  but not zero) so the residual sums do not grow block after block.
- The classifier is centred and scaled on the two calibration inputs. After
  ReLU and global pooling every feature has a large input-independent mean,
  so an uncentred classifier gives logits that are mostly the same vector for
  every input (same argmax). The bias cancels that common part and the weight
  scale puts the input-dependent part at a std of about LOGIT_STD, as for a
  trained classifier whose top class changes with the input.
- BERT uses N(0, 0.02)-like weights, with Q/K scaled so the attention
  probabilities are neither uniform nor one-hot.

The calibration pass runs in float64 and its statistics are rounded to
float32 when written, so BLAS thread counts or summation order (differences
far below float32 resolution) do not change the file.

Only numpy, onnx and the standard library are imported: this runs inside the
build. ``python -m codegen.zoo resnet50 out.onnx`` writes one model.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import KilnError
from ..ir.files import write_atomic

ZOO = ("resnet50", "mobilenet_v2", "bert_layer")

OPSET = 17        # LayerNormalization is an opset-17 op
IR_VERSION = 8    # the IR version that goes with opset 17; every onnxruntime reads it
BN_EPS = 1e-5
RESIDUAL_GAMMA = 0.3   # gamma of the last BN in a residual branch
LOGIT_STD = 4.0        # classifier logits std on the calibration inputs
CNN_CALIB_BATCH = 2    # calibration inputs for the CNNs (two, to tell common from input-dependent)


@dataclass
class T:
    """A tensor of the graph being built: its ONNX name and its value on the
    calibration inputs (float64, batch first; None for integer constants such
    as shapes)."""
    name: str
    value: np.ndarray | None

    @property
    def array(self) -> np.ndarray:
        """The calibration value of a float tensor (an integer constant has none)."""
        assert self.value is not None, f"{self.name} is an integer constant: it has no calibration value"
        return self.value


class GraphBuilder:
    """Collects nodes and initializers and runs the calibration forward pass.

    Each method adds one ONNX node, named as given (names are checked unique),
    computes the node's value on the calibration inputs with numpy and returns
    the output tensor. Values live only as long as the caller holds the ``T``,
    so the pass never keeps a whole network's activations.
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        # A separate stream for the calibration input, so it is not the same
        # array as a test's default_rng(seed).standard_normal(...) input.
        self.data_rng = np.random.default_rng([seed, 0x5EED])
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._node_names: set[str] = set()
        self._init_names: set[str] = set()
        self._shared: dict[str, T] = {}

    # --- graph plumbing -------------------------------------------------

    def input(self, name: str, shape: tuple[int, ...], calib_batch: int = 1, symbolic_batch: bool = False) -> T:
        """The graph input; with symbolic_batch its first dim is the symbol "batch" (bound when
        the model is baked, e.g. KILN_MODELS=resnet50@32), else 1. Its calibration value holds
        ``calib_batch`` standard-normal samples along the batch axis."""
        self.symbolic_batch = symbolic_batch
        dims = ["batch" if symbolic_batch else shape[0], *shape[1:]]
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
        return T(name, self.data_rng.standard_normal((calib_batch, *shape[1:])))

    def output(self, t: T) -> None:
        shape = ["batch" if getattr(self, "symbolic_batch", False) else 1, *t.array.shape[1:]]
        self.outputs.append(helper.make_tensor_value_info(t.name, TensorProto.FLOAT, shape))

    def const(self, name: str, array, dtype=np.float32) -> T:
        """An initializer. Its value is the stored (dtype-rounded) array, so the
        calibration sees exactly the weights onnxruntime will see."""
        assert name not in self._init_names, f"duplicate initializer {name}"
        self._init_names.add(name)
        arr = np.asarray(array).astype(dtype)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return T(name, arr.astype(np.float64) if arr.dtype.kind == "f" else None)

    def shared(self, name: str, array, dtype=np.float32) -> T:
        """A constant initializer used by several nodes (e.g. Clip's 0 and 6)."""
        if name not in self._shared:
            self._shared[name] = self.const(name, array, dtype)
        return self._shared[name]

    def node(self, op: str, name: str, inputs: list[T], value, output: str | None = None, **attrs) -> T:
        assert name not in self._node_names, f"duplicate node name {name}"
        self._node_names.add(name)
        out = output or name
        self.nodes.append(helper.make_node(op, [t.name for t in inputs], [out], name=name, **attrs))
        return T(out, value)

    def normal(self, shape, std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    # --- CNN layers -----------------------------------------------------

    def conv(self, name: str, x: T, cout: int, k: int, stride: int = 1, group: int = 1) -> T:
        """Bias-free Conv with 'same'-style padding k//2 (a BN follows)."""
        cin = x.array.shape[1]
        fan_in = cin // group * k * k
        w = self.const(name + ".weight", self.normal((cout, cin // group, k, k), math.sqrt(2.0 / fan_in)))
        pad = k // 2
        y = _conv2d(x.array, w.array, stride, pad, group)
        return self.node("Conv", name, [x, w], y, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, dilations=[1, 1], group=group)

    def bn(self, name: str, x: T, gamma_scale: float = 1.0) -> T:
        """BatchNormalization whose running stats are the calibration inputs'
        per-channel mean and variance, so its output is ~N(0, 1) per channel
        times gamma (~gamma_scale)."""
        c = x.array.shape[1]
        mean = x.array.mean(axis=(0, 2, 3))
        var = x.array.var(axis=(0, 2, 3))
        # A near-constant channel would get a huge gain and blow up on another
        # input; bound every channel's gain by 10x the layer's typical one.
        var = np.maximum(var, 1e-2 * var.mean())
        gamma = self.const(name + ".weight", gamma_scale * (1.0 + 0.1 * self.rng.standard_normal(c)))
        beta = self.const(name + ".bias", gamma_scale * 0.1 * self.rng.standard_normal(c))
        rmean = self.const(name + ".running_mean", mean)
        rvar = self.const(name + ".running_var", var)
        shape = (1, c, 1, 1)
        y = ((x.array - rmean.array.reshape(shape)) / np.sqrt(rvar.array.reshape(shape) + BN_EPS)
             * gamma.array.reshape(shape) + beta.array.reshape(shape))
        return self.node("BatchNormalization", name, [x, gamma, beta, rmean, rvar], y, epsilon=BN_EPS)

    def relu(self, name: str, x: T) -> T:
        return self.node("Relu", name, [x], np.maximum(x.array, 0.0))

    def relu6(self, name: str, x: T) -> T:
        # Clip with min/max as inputs: the opset >= 11 form exporters write.
        lo, hi = self.shared("relu6.min", np.float32(0.0)), self.shared("relu6.max", np.float32(6.0))
        return self.node("Clip", name, [x, lo, hi], np.clip(x.array, 0.0, 6.0))

    def maxpool(self, name: str, x: T, k: int, stride: int, pad: int) -> T:
        return self.node("MaxPool", name, [x], _maxpool2d(x.array, k, stride, pad),
                         kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def global_avgpool(self, name: str, x: T) -> T:
        return self.node("GlobalAveragePool", name, [x], x.array.mean(axis=(2, 3), keepdims=True))

    def flatten(self, name: str, x: T) -> T:
        return self.node("Flatten", name, [x], x.array.reshape(x.array.shape[0], -1), axis=1)

    def classifier(self, name: str, x: T, nout: int, output: str) -> T:
        """Gemm with a torch-layout [nout, nin] weight (transB=1), centred on
        the calibration features (see the module doc). Each logit is w . x with
        iid w, so std(logits) ~ std(w) * |x - mean|: pick std(w) from the
        calibration features' spread to land at LOGIT_STD."""
        n, nin = x.array.shape
        mean = x.array.mean(axis=0)
        # Expected |x - mean| for a fresh input: the sample variance (n - 1
        # dof) plus the error of the mean itself (1/n of it).
        spread = np.sqrt(np.sum((x.array - mean) ** 2) / (n - 1) * (1 + 1 / n))
        w = self.const(name + ".weight", self.normal((nout, nin), LOGIT_STD / max(float(spread), 1e-6)))
        b = self.const(name + ".bias", -(w.array @ mean) + 0.1 * self.rng.standard_normal(nout))
        return self.node("Gemm", name, [x, w, b], x.array @ w.array.T + b.array, output=output,
                         alpha=1.0, beta=1.0, transB=1)

    # --- generic ops (the transformer) ----------------------------------

    def add(self, name: str, a: T, b: T) -> T:
        return self.node("Add", name, [a, b], a.array + b.array)

    def mul(self, name: str, a: T, b: T) -> T:
        return self.node("Mul", name, [a, b], a.array * b.array)

    def div(self, name: str, a: T, b: T) -> T:
        return self.node("Div", name, [a, b], a.array / b.array)

    def matmul(self, name: str, a: T, b: T) -> T:
        return self.node("MatMul", name, [a, b], np.matmul(a.array, b.array))

    def erf(self, name: str, x: T) -> T:
        return self.node("Erf", name, [x], _erf(x.array))

    def softmax(self, name: str, x: T) -> T:
        e = np.exp(x.array - x.array.max(axis=-1, keepdims=True))
        return self.node("Softmax", name, [x], e / e.sum(axis=-1, keepdims=True), axis=-1)

    def reshape(self, name: str, x: T, shape: T, dims: tuple[int, ...]) -> T:
        return self.node("Reshape", name, [x, shape], x.array.reshape(dims))

    def transpose(self, name: str, x: T, perm: list[int]) -> T:
        return self.node("Transpose", name, [x], x.array.transpose(perm), perm=perm)

    def dense(self, prefix: str, x: T, nin: int, nout: int, std: float) -> T:
        """Linear layer as exporters write it: MatMul with a [nin, nout] weight, then Add bias."""
        w = self.const(prefix + ".weight", self.normal((nin, nout), std))
        b = self.const(prefix + ".bias", self.normal((nout,), 0.02))
        return self.add(prefix + ".Add", self.matmul(prefix + ".MatMul", x, w), b)

    def layernorm(self, name: str, x: T, eps: float, output: str | None = None) -> T:
        n = x.array.shape[-1]
        g = self.const(name + ".weight", 1.0 + 0.05 * self.rng.standard_normal(n))
        b = self.const(name + ".bias", 0.02 * self.rng.standard_normal(n))
        mu = x.array.mean(axis=-1, keepdims=True)
        y = (x.array - mu) / np.sqrt(x.array.var(axis=-1, keepdims=True) + eps) * g.array + b.array
        return self.node("LayerNormalization", name, [x, g, b], y, output=output, axis=-1, epsilon=eps)

    # --- result ---------------------------------------------------------

    def model(self, graph_name: str, doc: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="kiln.zoo", ir_version=IR_VERSION)
        model.doc_string = doc
        return model


# --- numpy kernels for the calibration pass (NCHW) --------------------------

def _conv2d(x: np.ndarray, w: np.ndarray, stride: int, pad: int, group: int) -> np.ndarray:
    """Direct convolution as a sum over kernel taps: each tap is one
    [cout, cin] x [cin, N*Ho*Wo] matmul (or a per-channel scale when
    depthwise), which needs no im2col buffer and is fast enough at 224x224."""
    n, c, h, wd = x.shape
    cout, _, k, _ = w.shape
    ho, wo = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).transpose(1, 0, 2, 3)  # C, N, H, W
    out = np.zeros((cout, n * ho * wo))
    for i in range(k):
        for j in range(k):
            tap = xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride].reshape(c, -1)
            if group == 1:
                out += w[:, :, i, j] @ tap
            elif group == c == cout:
                out += w[:, 0, i, j, None] * tap
            else:
                raise NotImplementedError("grouped conv other than depthwise")
    return out.reshape(cout, n, ho, wo).transpose(1, 0, 2, 3)


def _maxpool2d(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    ho, wo = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    out = np.full((n, c, ho, wo), -np.inf)
    for i in range(k):
        for j in range(k):
            np.maximum(out, xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride], out=out)
    return out


_erf = np.vectorize(math.erf, otypes=[np.float64])


# --- the models -------------------------------------------------------------

def _resnet50(b: GraphBuilder) -> None:
    """torchvision resnet50 (v1.5: the stride sits on the 3x3 conv)."""
    x = b.input("input", (1, 3, 224, 224), calib_batch=CNN_CALIB_BATCH, symbolic_batch=True)
    x = b.relu("relu", b.bn("bn1", b.conv("conv1", x, 64, 7, stride=2)))
    x = b.maxpool("maxpool", x, 3, 2, 1)
    for li, (width, blocks, stride) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), (1, 2, 2, 2)), start=1):
        for bi in range(blocks):
            p = f"layer{li}.{bi}"
            s = stride if bi == 0 else 1
            y = b.relu(f"{p}.relu1", b.bn(f"{p}.bn1", b.conv(f"{p}.conv1", x, width, 1)))
            y = b.relu(f"{p}.relu2", b.bn(f"{p}.bn2", b.conv(f"{p}.conv2", y, width, 3, stride=s)))
            y = b.bn(f"{p}.bn3", b.conv(f"{p}.conv3", y, width * 4, 1), gamma_scale=RESIDUAL_GAMMA)
            identity = x
            if bi == 0:  # channel count (and for layers 2-4 the size) changes
                identity = b.bn(f"{p}.downsample.1", b.conv(f"{p}.downsample.0", x, width * 4, 1, stride=s))
            x = b.relu(f"{p}.relu3", b.add(f"{p}.add", y, identity))
    x = b.flatten("flatten", b.global_avgpool("avgpool", x))
    b.output(b.classifier("fc", x, 1000, output="logits"))


MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))  # (t, c, n, s)


def _mobilenet_v2(b: GraphBuilder) -> None:
    """torchvision mobilenet_v2, width 1.0; names follow its module tree
    (features.N.conv.J.K inside an InvertedResidual)."""
    x = b.input("input", (1, 3, 224, 224), calib_batch=CNN_CALIB_BATCH, symbolic_batch=True)
    x = b.relu6("features.0.2", b.bn("features.0.1", b.conv("features.0.0", x, 32, 3, stride=2)))
    cin, idx = 32, 1
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        for i in range(n):
            p = f"features.{idx}.conv"
            stride = s if i == 0 else 1
            residual = stride == 1 and cin == c
            hidden = cin * t
            y, j = x, 0
            if t != 1:  # expansion 1x1
                y = b.relu6(f"{p}.0.2", b.bn(f"{p}.0.1", b.conv(f"{p}.0.0", y, hidden, 1)))
                j = 1
            y = b.conv(f"{p}.{j}.0", y, hidden, 3, stride=stride, group=hidden)  # depthwise
            y = b.relu6(f"{p}.{j}.2", b.bn(f"{p}.{j}.1", y))
            y = b.conv(f"{p}.{j + 1}", y, c, 1)  # linear projection, no activation
            y = b.bn(f"{p}.{j + 2}", y, gamma_scale=RESIDUAL_GAMMA if residual else 1.0)
            x = b.add(f"features.{idx}.add", x, y) if residual else y
            cin, idx = c, idx + 1
    x = b.relu6(f"features.{idx}.2", b.bn(f"features.{idx}.1", b.conv(f"features.{idx}.0", x, 1280, 1)))
    x = b.flatten("flatten", b.global_avgpool("avgpool", x))
    b.output(b.classifier("classifier.1", x, 1000, output="logits"))


BERT_HIDDEN, BERT_HEADS, BERT_FFN, BERT_SEQ = 768, 12, 3072, 128


def _bert_layer(b: GraphBuilder) -> None:
    """One BERT-base encoder layer as the Hugging Face export writes it."""
    d, heads, seq = BERT_HIDDEN, BERT_HEADS, BERT_SEQ
    hd = d // heads
    x = b.input("hidden_states", (1, seq, d))
    # Weight scales, for a unit-variance input: q and k come out with variance
    # d * std^2 = 1.5, so the scores q.k / sqrt(hd) have std ~1.5 -- softmax is
    # peaked over ~10 keys, neither uniform nor one-hot. V and the output
    # projection are a little larger than 0.02 so the attention branch is not
    # negligible next to the residual.
    qk_std = math.sqrt(1.5 / d)
    head_dims = (1, seq, heads, hd)
    head_shape = b.const("attention.self.head_shape", head_dims, np.int64)
    ctx_shape = b.const("attention.self.context_shape", (1, seq, d), np.int64)

    def split_heads(name: str, std: float, perm: list[int]) -> T:
        t = b.dense(f"attention.self.{name}", x, d, d, std)
        t = b.reshape(f"attention.self.{name}.Reshape", t, head_shape, head_dims)
        return b.transpose(f"attention.self.{name}.Transpose", t, perm)

    q = split_heads("query", qk_std, [0, 2, 1, 3])   # [1, 12, 128, 64]
    k = split_heads("key", qk_std, [0, 2, 3, 1])     # [1, 12, 64, 128], pre-transposed for Q.K^T
    v = split_heads("value", 0.04, [0, 2, 1, 3])
    scores = b.matmul("attention.self.scores.MatMul", q, k)
    scores = b.div("attention.self.scores.Div", scores, b.const("attention.self.scale", np.float32(math.sqrt(hd))))
    probs = b.softmax("attention.self.Softmax", scores)
    ctx = b.matmul("attention.self.context.MatMul", probs, v)
    ctx = b.transpose("attention.self.context.Transpose", ctx, [0, 2, 1, 3])
    ctx = b.reshape("attention.self.context.Reshape", ctx, ctx_shape, (1, seq, d))
    attn = b.dense("attention.output.dense", ctx, d, d, 0.04)
    h = b.layernorm("attention.output.LayerNorm", b.add("attention.output.residual.Add", attn, x), 1e-12)

    inter = b.dense("intermediate.dense", h, d, BERT_FFN, 1.0 / math.sqrt(d))
    # GELU in the decomposed form exporters emit: x * 0.5 * (1 + erf(x / sqrt(2)))
    half = b.mul("intermediate.gelu.Mul", inter, b.const("intermediate.gelu.half", np.float32(0.5)))
    e = b.erf("intermediate.gelu.Erf",
              b.div("intermediate.gelu.Div", inter, b.const("intermediate.gelu.sqrt2", np.float32(math.sqrt(2.0)))))
    e = b.add("intermediate.gelu.Add", e, b.const("intermediate.gelu.one", np.float32(1.0)))
    g = b.mul("intermediate.gelu.Mul_1", half, e)

    out = b.dense("output.dense", g, BERT_FFN, d, 0.02)
    out = b.layernorm("output.LayerNorm", b.add("output.residual.Add", out, h), 1e-12, output="output")
    b.output(out)


_BUILDERS = {"resnet50": _resnet50, "mobilenet_v2": _mobilenet_v2, "bert_layer": _bert_layer}


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """The zoo model ``name`` with random weights drawn from ``seed``."""
    if name not in _BUILDERS:
        raise KilnError("zoo", name, f"not a zoo model; the zoo has {', '.join(ZOO)}")
    seed = int(seed)
    b = GraphBuilder(seed)
    _BUILDERS[name](b)
    return b.model(name, f"kiln zoo {name}: seeded random weights (seed {seed}), BN calibrated for unit-variance "
                         "activations on standard-normal inputs; for testing kernels, not for predictions")


def write(name: str, path, seed: int = 0) -> Path:
    """Build ``name`` and write it to ``path`` (a file, or a directory to get
    ``<name>.onnx`` in it). Atomic: a temp file in the same directory, then
    os.replace, so a reader (or an interrupted build) never sees half a file."""
    path = Path(path)
    if path.is_dir():
        path = path / f"{name}.onnx"
    data = build(name, seed).SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, data, durable=False)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(f"usage: python -m codegen.zoo {{{'|'.join(ZOO)}}} OUT.onnx [SEED]")
    try:
        print(write(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 0))
    except KilnError as e:
        sys.exit(str(e))
