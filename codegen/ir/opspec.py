"""Features: one Opspec per unique kernel.

An Opspec is everything that makes two op instances the same kernel: op kind, dims, attributes, fused epilogue
and dtypes. Instances with equal Opspecs are generated once. The Opspec also carries the features later stages
rank by (FLOPs, bytes, arithmetic intensity, channel padding) and defines the packed tensors the kernel takes
and returns."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from math import ceil, prod
from typing import TYPE_CHECKING, ClassVar, Literal

from .. import KilnError
from .channel_gather_spec import ChannelGatherSpec
from .channel_norm_spec import ChannelNormSpec
from .col2im_spec import Col2imSpec
from .copy_spec import CopySpec, GatherSpec
from .eltwise_program import decode, epilogue_tag, vector_ops
from .graph import OpInstance
from .recurrent_spec import LOOP_SPECS, GruLoopSpec, LstmLoopSpec
from .reduce_spec import REDUCE_OPS, ReduceSpec
from .resize_spec import ResizeSpec
from .tensor import C0, Tensor, c1
from .tensor import num_fragment as _num

# How a kernel's output becomes the natural-layout array a caller of kiln.kernel(...) gets back: NC1HWC0 to NCHW
# with the spec's out_channels, reshaped like the first operand (elementwise and row-wise ops), or as written.
NaturalOutput = Literal["nchw", "like_input", "as_written"]


def _dtype(dtype: str) -> str:
    """The name fragment of a Cube kernel's operand type: none for fp16 (the names fp16 builds always had)."""
    return "" if dtype == "fp16" else "_" + dtype


def _act(relu: bool) -> str:
    return "_relu" if relu else ""


def _window(sh: int, sw: int, pads: tuple[int, int, int, int], dh: int = 1, dw: int = 1) -> str:
    """Stride, pads and dilation of a sliding window as a name fragment: s2_p1, s1x2_p2x1x3x0_d2x1."""
    s = f"s{sh}" if sh == sw else f"s{sh}x{sw}"
    p = f"p{pads[0]}" if len(set(pads)) == 1 else "p" + "x".join(map(str, pads))
    d = "" if (dh, dw) == (1, 1) else (f"_d{dh}" if dh == dw else f"_d{dh}x{dw}")
    return f"{s}_{p}{d}"


@dataclass(frozen=True)
class Conv2dSpec:
    n: int
    cin: int
    h: int
    w: int
    cout: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    pb: int
    pr: int
    dh: int
    dw: int
    bias: bool
    relu: bool
    residual: bool = False  # y = act(conv + residual), the add in a Vector-core pass after the Cube
    clip_hi: float = 0.0    # > 0: act is a clip to [0, clip_hi] (ReLU6), also in the Vector pass
    # A second source accumulated into the same L0C before the epilogue: a 1x1, unpadded convolution with stride
    # s2 of another input x2 (n, cin2, h2, w2) to the same output, y = act(conv(x) + conv1x1(x2) + bias). ResNet's
    # downsample path added to the block's last conv becomes one more stretch of the K loop. cin2 = 0: none.
    cin2: int = 0
    h2: int = 0
    w2: int = 0
    s2: int = 1
    # A chain (mid > 0): the window conv above produces `mid` channels (+ mid_bias, ReLU if mid_relu), rounded to
    # fp16 into L1 by Fixpipe, and a 1x1 conv mid -> cout reads them from there; bias, relu, residual and clip
    # then describe that second conv's epilogue. The intermediate never goes to GM. mid = 0: a single conv.
    mid: int = 0
    mid_bias: bool = False
    mid_relu: bool = False
    # The Cube's operand type (KILN_DTYPE): fp16, or bf16 with the weights packed as bf16 and the activations
    # (fp16 in GM) rounded to bf16 on their way into L1. Accumulation is fp32 and the output fp16 either way.
    dtype: str = "fp16"
    # Grouped convolution (ONNX Conv group > 1, not depthwise): output channel o reads input channels
    # [g * cin/group, (g+1) * cin/group) with g = o // (cout/group). The weight is packed block-diagonal (dense
    # FRACTAL_Z, zeros between groups) and an N tile of output blocks reduces over only the input channel blocks
    # of the groups it holds (group_c1_range). 1: a dense convolution.
    group: int = 1
    program: str = ""  # then an elementwise program in fp32 in the Vector epilogue (passes/program_epilogue.py)
    # A small-channel input (cin <= 4, staged NC1HWC0_C04 [N, 1, H, W, 4]): Load3D's channelSize 4, four taps of four
    # channels to a K fractal (k = tap * 4 + channel; weights FRACTAL_Z_C04), docs/compiler.md "Small-channel inputs".
    c04: bool = False
    kind: ClassVar[Literal["conv2d"]] = "conv2d"
    natural_output: ClassVar[NaturalOutput] = "nchw"

    @property
    def first_cout(self) -> int:
        """Output channels of the window conv: the intermediate's with a chain, else the kernel's."""
        return self.mid or self.cout

    def second(self) -> Conv2dSpec:
        """The second source as a conv of its own (for its geometry: rows per tile, reuse)."""
        return Conv2dSpec(self.n, self.cin2, self.h2, self.w2, self.cout, 1, 1, self.s2, self.s2, 0, 0, 0, 0, 1, 1,
                          False, False, dtype=self.dtype)

    def group_c1_range(self, n1_0: int, n1_cnt: int) -> tuple[int, int]:
        """The input channel blocks [lo, hi) output channel blocks [n1_0, n1_0 + n1_cnt) reduce over: all of
        them for a dense conv; with groups, those holding the input channels of the groups the outputs belong to."""
        if self.group == 1:
            return 0, c1(self.cin)
        per_in, per_out = self.cin // self.group, self.cout // self.group
        o0, o1 = n1_0 * C0, min(self.cout, (n1_0 + n1_cnt) * C0)
        g0, g1 = o0 // per_out, (o1 - 1) // per_out + 1
        return g0 * per_in // C0, ceil(g1 * per_in / C0)

    @property
    def k_fractals(self) -> int:  # of the window conv: a tap per channel block, or (c04) four taps to a fractal
        return ceil(self.kh * self.kw * 4 / C0) if self.c04 else c1(self.cin) * self.kh * self.kw

    @property
    def vector_epilogue(self) -> bool:
        """Fixpipe applies a plain ReLU; a residual add, a clip or a program needs a pass on the Vector cores."""
        return self.residual or self.clip_hi > 0 or bool(self.program)

    @property
    def ho(self) -> int:
        return (self.h + self.pt + self.pb - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self) -> int:
        return (self.w + self.pl + self.pr - self.dw * (self.kw - 1) - 1) // self.sw + 1

    @property
    def name(self) -> str:
        win = _window(self.sh, self.sw, (self.pt, self.pl, self.pb, self.pr), self.dh, self.dw)
        act = (f"_clip_0_{_num(self.clip_hi)}" if self.clip_hi else _act(self.relu)) + epilogue_tag(self.program)
        acc = f"_acc{self.cin2}x{self.h2}x{self.w2}s{self.s2}" if self.cin2 else ""
        if self.mid:  # conv2d_1x64x56x56_o64_k3x3_s1_p1_bias_relu_then_o256_bias_add_relu
            first = (f"conv2d_{self.n}x{self.cin}x{self.h}x{self.w}_o{self.mid}_k{self.kh}x{self.kw}_{win}"
                     f"{'_bias' if self.mid_bias else ''}{'_relu' if self.mid_relu else ''}")
            return (f"{first}_then_o{self.cout}{'_bias' if self.bias else ''}{acc}{'_add' if self.residual else ''}"
                    f"{act}{_dtype(self.dtype)}")
        grouped = f"_g{self.group}" if self.group > 1 else "_c04" if self.c04 else ""
        return (f"conv2d_{self.n}x{self.cin}x{self.h}x{self.w}_o{self.cout}_k{self.kh}x{self.kw}{grouped}_{win}"
                f"{'_bias' if self.bias else ''}{acc}{'_add' if self.residual else ''}{act}{_dtype(self.dtype)}")

    @property
    def flops(self) -> int:
        if self.mid:
            return 2 * self.n * self.ho * self.wo * (self.mid * self.cin * self.kh * self.kw + self.cout * self.mid)
        return 2 * self.n * self.cout * (self.cin // self.group * self.kh * self.kw + self.cin2) * self.ho * self.wo

    def inputs(self) -> list[Tensor]:
        x = (self.n, 1, self.h, self.w, 4) if self.c04 else (self.n, c1(self.cin), self.h, self.w, C0)
        t = [Tensor("x", x, "fp16", "NC1HWC0_C04" if self.c04 else "NC1HWC0"),
             Tensor("w", (self.k_fractals, c1(self.first_cout), C0, C0), self.dtype, f"FRACTAL_Z{'_C04' * self.c04}")]
        if self.mid:  # the chain's first bias, then the 1x1 conv's weights
            if self.mid_bias:
                t.append(Tensor("mid_bias", (c1(self.mid) * C0,), "fp32", "ND"))
            t.append(Tensor("w_mid", (c1(self.mid), c1(self.cout), C0, C0), self.dtype, "FRACTAL_Z"))
        if self.bias:
            t.append(Tensor("bias", (c1(self.cout) * C0,), "fp32", "ND"))
        if self.residual:
            t.append(Tensor("residual", self.output().shape, "fp16", "NC1HWC0"))
        if self.cin2:
            t.append(Tensor("x2", (self.n, c1(self.cin2), self.h2, self.w2, C0), "fp16", "NC1HWC0"))
            t.append(Tensor("w2", (c1(self.cin2), c1(self.cout), C0, C0), self.dtype, "FRACTAL_Z"))
        return t

    def output(self) -> Tensor:
        return Tensor("y", (self.n, c1(self.cout), self.ho, self.wo, C0), "fp16", "NC1HWC0")

    @property
    def out_channels(self) -> int:
        return self.cout

    @property
    def reduction_length(self) -> int:
        # a chain's output sums `mid` products (the intermediate's own error is its fp16 rounding)
        return self.mid or self.cin // self.group * self.kh * self.kw + self.cin2

    @property
    def channel_padding(self) -> float:
        """Fraction of Cube work spent on zero channels padded up to C0."""
        if self.mid:
            useful = self.cin * self.kh * self.kw * self.mid + self.mid * self.cout
            padded = c1(self.cin) * self.kh * self.kw * c1(self.mid) + c1(self.mid) * c1(self.cout)
            return 1 - useful / (padded * C0 * C0)
        if self.group > 1:  # the block-diagonal work each N tile of 16 output channels does
            done = sum(hi - lo for lo, hi in (self.group_c1_range(n1, 1) for n1 in range(c1(self.cout))))
            return 1 - self.cin // self.group * self.kh * self.kw * self.cout / (done * self.kh * self.kw * C0 * C0)
        useful = (self.cin * self.kh * self.kw + self.cin2) * self.cout
        return 1 - useful / ((c1(self.cin) * self.kh * self.kw + c1(self.cin2)) * C0 * c1(self.cout) * C0)


class _PerChannelWindow:
    """What depthwise convolution and pooling share: a window per channel over NC1HWC0."""

    if TYPE_CHECKING:  # the fields of the dataclasses that use it
        n: int
        c: int
        h: int
        w: int
        kh: int
        kw: int
        sh: int
        sw: int
        pt: int
        pl: int
        pb: int
        pr: int
        dh: int
        dw: int

    @property
    def ho(self) -> int:
        return (self.h + self.pt + self.pb - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self) -> int:
        return (self.w + self.pl + self.pr - self.dw * (self.kw - 1) - 1) // self.sw + 1

    def output(self) -> Tensor:
        return Tensor("y", (self.n, c1(self.c), self.ho, self.wo, C0), "fp16", "NC1HWC0")

    @property
    def out_channels(self) -> int:
        return self.c

    @property
    def reduction_length(self) -> int:
        return self.kh * self.kw

    @property
    def channel_padding(self) -> float:
        return 1 - self.c / (c1(self.c) * C0)


@dataclass(frozen=True)
class DwConv2dSpec(_PerChannelWindow):
    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    pb: int
    pr: int
    dh: int
    dw: int
    bias: bool
    relu: bool
    clip_hi: float = 0.0  # > 0: the epilogue clips to [0, clip_hi] (ReLU6) instead of a ReLU
    program: str = ""     # then a one-input elementwise program (eltwise_program.encode; passes/program_epilogue)
    kind: ClassVar[Literal["dwconv2d"]] = "dwconv2d"
    natural_output: ClassVar[NaturalOutput] = "nchw"

    @property
    def name(self) -> str:
        win = _window(self.sh, self.sw, (self.pt, self.pl, self.pb, self.pr), self.dh, self.dw)
        act = (f"_clip_0_{_num(self.clip_hi)}" if self.clip_hi else _act(self.relu)) + epilogue_tag(self.program)
        bias = "_bias" if self.bias else ""
        return f"dwconv2d_{self.n}x{self.c}x{self.h}x{self.w}_k{self.kh}x{self.kw}_{win}{bias}{act}"

    @property
    def flops(self) -> int:
        return 2 * self.n * self.c * self.kh * self.kw * self.ho * self.wo

    def inputs(self) -> list[Tensor]:
        t = [Tensor("x", (self.n, c1(self.c), self.h, self.w, C0), "fp16", "NC1HWC0"),
             Tensor("w", (c1(self.c), self.kh, self.kw, C0), "fp16", "C1HWC0")]
        if self.bias:
            t.append(Tensor("bias", (c1(self.c) * C0,), "fp32", "ND"))
        return t


@dataclass(frozen=True)
class GemmSpec:
    m: int
    k: int
    n: int
    bias: bool
    relu: bool
    dtype: str = "fp16"  # the Cube's operand type, as Conv2dSpec.dtype
    # Sibling GEMMs of one input, run as one (fusion): n is `n // split` results of `split` columns each, written
    # one after another, [n // split][m][split], so each is a contiguous slice of the output. 0: one result.
    split: int = 0
    kind: ClassVar[Literal["gemm"]] = "gemm"
    natural_output: ClassVar[NaturalOutput] = "as_written"

    @property
    def name(self) -> str:
        siblings = f"_siblings{self.n // self.split}" if self.split else ""
        return (f"gemm_m{self.m}_k{self.k}_n{self.n}{'_bias' if self.bias else ''}{_act(self.relu)}{siblings}"
                f"{_dtype(self.dtype)}")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n

    def inputs(self) -> list[Tensor]:
        t = [Tensor("a", (self.m, self.k), "fp16", "ND"),
             Tensor("b", (c1(self.k), c1(self.n), C0, C0), self.dtype, "ZN")]
        if self.bias:
            t.append(Tensor("bias", (c1(self.n) * C0,), "fp32", "ND"))
        return t

    def output(self) -> Tensor:
        if self.split:
            return Tensor("y", (self.n // self.split, self.m, self.split), "fp16", "ND")
        return Tensor("y", (self.m, self.n), "fp16", "ND")

    @property
    def reduction_length(self) -> int:
        return self.k

    @property
    def channel_padding(self) -> float:
        return 1 - (self.m * self.k * self.n) / (c1(self.m) * c1(self.k) * c1(self.n) * C0 ** 3)


def f32(v: float) -> float:
    """Float attributes are kept as the float32 value the kernel computes with."""
    import numpy as np
    return float(np.float32(v))


BINARY_ELTWISE = ("add", "mul")


@dataclass(frozen=True)
class EltwiseSpec:
    op: str        # relu | clip | add | mul | muls | adds | gelu
    numel: int
    act: str = ""  # epilogue after add/mul: "" | relu | clip
    lo: float = 0.0  # clip bounds (op or act clip)
    hi: float = 0.0
    scalar: float = 0.0  # the constant of muls / adds
    kind: ClassVar[Literal["eltwise"]] = "eltwise"
    natural_output: ClassVar[NaturalOutput] = "like_input"

    @property
    def name(self) -> str:
        clip = f"clip_{_num(self.lo)}_{_num(self.hi)}"
        scalar = _num(self.scalar)
        op = {"clip": clip, "muls": f"muls_{scalar}", "adds": f"adds_{scalar}"}.get(self.op, self.op)
        act = "" if not self.act else "_" + (clip if self.act == "clip" else self.act)
        return f"eltwise_{op}{act}_{self.numel}"

    @property
    def flops(self) -> int:
        per = {"gelu": 20}.get(self.op, 1)  # gelu: the erf polynomial, exp and the products
        return self.numel * (per + (1 if self.act else 0))

    def inputs(self) -> list[Tensor]:
        t = [Tensor("x", (self.numel,), "fp16", "ND")]
        if self.op in BINARY_ELTWISE:
            t.append(Tensor("y", (self.numel,), "fp16", "ND"))
        return t

    def output(self) -> Tensor:
        return Tensor("z", (self.numel,), "fp16", "ND")

    reduction_length = 1
    channel_padding = 0.0


# The operand forms of an elementwise program (codegen/ir/eltwise_program.py): the output's own shape; one C0
# block per (n, c1) of an NC1HWC0 output, broadcast over H*W ([N,C,1,1]); the same with one image ([1,C,1,1]);
# one row of a flat output's last axis, broadcast over the rows ([..., 1, L] over [..., M, L]); one run-time value.
PROGRAM_FORMS = ("full", "channel", "channel1", "row", "scalar")


@dataclass(frozen=True)
class EltwiseProgramSpec:
    """A fused chain of elementwise ops (the program, as text) over `numel` fp16 output values. NC1HWC0 outputs
    are `plane` = H*W*C0 values per (n, c1) (c1 blocks per image, c_tail real channels in the last block: the
    padded lanes are written as zeros); a flat output is one plane and c1 = 0."""
    numel: int
    plane: int
    c1: int
    c_tail: int
    forms: str    # comma-separated, one per input (PROGRAM_FORMS)
    program: str  # eltwise_program.encode(steps)
    kind: ClassVar[Literal["eltwise_program"]] = "eltwise_program"
    natural_output: ClassVar[NaturalOutput] = "as_written"

    def __post_init__(self) -> None:
        forms = self.forms.split(",")
        if any(f not in PROGRAM_FORMS for f in forms) or self.numel % self.plane:
            raise ValueError(f"forms {self.forms!r} (accepted: {PROGRAM_FORMS}) or plane {self.plane} of {self.numel}")
        channel = any(f.startswith("channel") for f in forms)
        if (self.c1 == 0 and channel) or (self.c1 > 0 and "row" in forms):
            raise ValueError(f"forms {self.forms!r}: a per-channel input needs an NC1HWC0 output (c1 > 0), a row "
                             f"input a flat one")
        decode(self.program, len(forms))

    @property
    def form_list(self) -> list[str]:
        return self.forms.split(",")

    @property
    def steps(self) -> tuple:
        return decode(self.program, len(self.form_list))

    @property
    def planes(self) -> int:
        return self.numel // self.plane

    @property
    def name(self) -> str:
        ops = "_".join(op for op, _, _ in self.steps)
        forms = "".join("fckrs"[PROGRAM_FORMS.index(f)] for f in self.form_list)
        digest = hashlib.sha256(f"{self.program}/{self.forms}/{self.plane}/{self.c_tail}".encode()).hexdigest()[:6]
        return f"eltwise_program_{ops}_{forms}_{self.numel}_{digest}"

    @property
    def flops(self) -> int:
        return self.numel * len(vector_ops(self.steps))

    def input_numel(self, form: str) -> int:
        return (self.numel, self.planes * C0, self.c1 * C0, self.plane, 1)[PROGRAM_FORMS.index(form)]

    def inputs(self) -> list[Tensor]:
        return [Tensor(f"x{i}", (self.input_numel(f),), "fp16", "ND") for i, f in enumerate(self.form_list)]

    def output(self) -> Tensor:
        return Tensor("z", (self.numel,), "fp16", "ND")

    reduction_length = 1

    @property
    def channel_padding(self) -> float:
        return (C0 - self.c_tail) / (self.c1 * C0) if self.c_tail else 0.0


@dataclass(frozen=True)
class Pool2dSpec(_PerChannelWindow):
    """Max or average pooling over NC1HWC0; global pooling is kh=H, kw=W."""
    op: str  # max | avg
    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    pb: int
    pr: int
    kind: ClassVar[Literal["pool2d"]] = "pool2d"
    natural_output: ClassVar[NaturalOutput] = "nchw"
    dh: int = field(default=1, kw_only=True)  # MaxPool's dilations (keyword-only: after AvgPool2dSpec's fields)
    dw: int = field(default=1, kw_only=True)

    @property
    def is_global(self) -> bool:
        return (self.kh, self.kw) == (self.h, self.w) and self.ho == self.wo == 1

    @property
    def name(self) -> str:
        if self.is_global:
            return f"pool2d_global{self.op}_{self.n}x{self.c}x{self.h}x{self.w}"
        win = _window(self.sh, self.sw, (self.pt, self.pl, self.pb, self.pr), self.dh, self.dw)
        return f"pool2d_{self.op}_{self.n}x{self.c}x{self.h}x{self.w}_k{self.kh}x{self.kw}_{win}"

    @property
    def flops(self) -> int:
        return self.n * self.c * self.ho * self.wo * self.kh * self.kw

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.n, c1(self.c), self.h, self.w, C0), "fp16", "NC1HWC0")]


@dataclass(frozen=True)
class AvgPool2dSpec(Pool2dSpec):
    """AveragePool with a window smaller than the map. pb, pr include ceil_mode's extra rows/columns (eb, er),
    which are never counted; count_pad: the ONNX pads count in the divisor (count_include_pad=1) or not."""
    count_pad: int = 0
    eb: int = 0
    er: int = 0
    kind: ClassVar[Literal["avgpool2d"]] = "avgpool2d"  # type: ignore[assignment]

    @property
    def name(self) -> str:
        win = _window(self.sh, self.sw, (self.pt, self.pl, self.pb, self.pr))
        ceil = f"_ceil{self.eb}x{self.er}" if self.eb or self.er else ""
        return (f"avgpool2d_{self.n}x{self.c}x{self.h}x{self.w}_k{self.kh}x{self.kw}_{win}"
                f"{'_countpad' if self.count_pad else ''}{ceil}")

    def divisors(self, axis: int) -> list[int]:
        """Per output row (axis 0) or column (axis 1): how many of its window's taps the mean divides by."""
        if axis == 0:
            size, k, s, begin, end, extra, out = self.h, self.kh, self.sh, self.pt, self.pb, self.eb, self.ho
        else:
            size, k, s, begin, end, extra, out = self.w, self.kw, self.sw, self.pl, self.pr, self.er, self.wo
        lo, hi = (-begin, size + end - extra) if self.count_pad else (0, size)
        return [min(o * s - begin + k, hi) - max(o * s - begin, lo) for o in range(out)]


@dataclass(frozen=True)
class RowSpec:
    """Softmax, LogSoftmax or LayerNormalization over the last axis of `rows` contiguous rows of `length`."""
    op: Literal["softmax", "logsoftmax", "layernorm"]
    rows: int
    length: int
    eps: float = 0.0  # layernorm
    natural_output: ClassVar[NaturalOutput] = "like_input"

    @property
    def kind(self) -> Literal["softmax", "logsoftmax", "layernorm"]:
        return self.op

    @property
    def name(self) -> str:
        eps = f"_eps{_num(self.eps)}" if self.op == "layernorm" else ""
        return f"{self.op}_{self.rows}x{self.length}{eps}"

    @property
    def flops(self) -> int:
        return self.rows * self.length * (8 if self.op == "layernorm" else 5)

    def inputs(self) -> list[Tensor]:
        t = [Tensor("x", (self.rows, self.length), "fp16", "ND")]
        if self.op == "layernorm":
            t += [Tensor("gamma", (self.length,), "fp32", "ND"), Tensor("beta", (self.length,), "fp32", "ND")]
        return t

    def output(self) -> Tensor:
        return Tensor("y", (self.rows, self.length), "fp16", "ND")

    @property
    def reduction_length(self) -> int:
        return self.length

    channel_padding = 0.0


@dataclass(frozen=True)
class BatchedGemmSpec:
    """Y[b] = A[b] B[b] for activations A [batch, m, k] and B [batch, k, n] (or [batch, n, k] if trans_b)."""
    batch: int
    m: int
    k: int
    n: int
    trans_b: bool
    dtype: str = "fp16"  # the Cube's operand type, as Conv2dSpec.dtype (both operands are activations)
    kind: ClassVar[Literal["bgemm"]] = "bgemm"
    natural_output: ClassVar[NaturalOutput] = "as_written"

    @property
    def name(self) -> str:
        return f"bgemm_b{self.batch}_m{self.m}_k{self.k}_n{self.n}{'_bt' if self.trans_b else ''}{_dtype(self.dtype)}"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    def inputs(self) -> list[Tensor]:
        b = (self.batch, self.n, self.k) if self.trans_b else (self.batch, self.k, self.n)
        return [Tensor("a", (self.batch, self.m, self.k), "fp16", "ND"), Tensor("b", b, "fp16", "ND")]

    def output(self) -> Tensor:
        return Tensor("y", (self.batch, self.m, self.n), "fp16", "ND")

    @property
    def reduction_length(self) -> int:
        return self.k

    @property
    def channel_padding(self) -> float:
        return 1 - (self.m * self.k * self.n) / (c1(self.m) * c1(self.k) * c1(self.n) * C0 ** 3)


@dataclass(frozen=True)
class TransposeSpec:
    """out[a, c, b, d] = in[a, b, c, d]: swaps the middle axes (attention heads in and out)."""
    d0: int
    d1: int
    d2: int
    d3: int
    kind: ClassVar[Literal["transpose"]] = "transpose"
    natural_output: ClassVar[NaturalOutput] = "as_written"

    @property
    def name(self) -> str:
        return f"transpose0213_{self.d0}x{self.d1}x{self.d2}x{self.d3}"

    flops = 0

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.d0, self.d1, self.d2, self.d3), "fp16", "ND")]

    def output(self) -> Tensor:
        return Tensor("y", (self.d0, self.d2, self.d1, self.d3), "fp16", "ND")

    reduction_length = 1
    channel_padding = 0.0


@dataclass(frozen=True)
class AttentionSpec:
    """y[b, h] = softmax(scale * q[b, h] k[b, h]^T) v[b, h] over the last axis, for q [batch, heads, q, d] and
    k, v [batch, heads, kv, d] (fp16 ND); the score matrix is never stored (flash attention)."""
    batch: int
    heads: int
    q: int
    kv: int
    d: int
    scale: float
    mask: bool = False  # an additive mask [batch, kv] (fp16) on the scaled scores
    kind: ClassVar[Literal["attention"]] = "attention"
    natural_output: ClassVar[NaturalOutput] = "as_written"

    @property
    def name(self) -> str:
        return (f"attention_b{self.batch}_h{self.heads}_q{self.q}_kv{self.kv}_d{self.d}_scale{_num(self.scale)}"
                f"{'_mask' if self.mask else ''}")

    @property
    def flops(self) -> int:
        # two GEMMs per head, and per score the scale, max, exp, sum and the output rescale
        return self.batch * self.heads * self.q * self.kv * (4 * self.d + 5)

    def inputs(self) -> list[Tensor]:
        return [Tensor("q", (self.batch, self.heads, self.q, self.d), "fp16", "ND"),
                Tensor("k", (self.batch, self.heads, self.kv, self.d), "fp16", "ND"),
                Tensor("v", (self.batch, self.heads, self.kv, self.d), "fp16", "ND")] + (
            [Tensor("mask", (self.batch, self.kv), "fp16", "ND")] if self.mask else [])

    def output(self) -> Tensor:
        return Tensor("y", (self.batch, self.heads, self.q, self.d), "fp16", "ND")

    @property
    def score_bytes(self) -> int:
        """fp16 bytes of one score (or probability) matrix over all heads: what the unfused kernels store."""
        return self.batch * self.heads * self.q * self.kv * 2

    @property
    def reduction_length(self) -> int:
        return max(self.kv, self.d)

    @property
    def channel_padding(self) -> float:
        useful = self.q * self.kv * self.d
        return 1 - useful / (c1(self.q) * c1(self.kv) * c1(self.d) * C0 ** 3)


Opspec = (Conv2dSpec | DwConv2dSpec | GemmSpec | EltwiseSpec | Pool2dSpec | RowSpec | BatchedGemmSpec | TransposeSpec
          | AttentionSpec | AvgPool2dSpec | EltwiseProgramSpec | ChannelGatherSpec | CopySpec | ResizeSpec | ReduceSpec
          | GatherSpec | LstmLoopSpec | Col2imSpec | GruLoopSpec | ChannelNormSpec)
# kind -> its spec class (the one table a spec is rebuilt from: an .opspec file, a manifest record)
SPEC_CLASSES: dict[str, type[Opspec]] = {
    "conv2d": Conv2dSpec, "dwconv2d": DwConv2dSpec, "gemm": GemmSpec, "eltwise": EltwiseSpec, "pool2d": Pool2dSpec,
    "softmax": RowSpec, "logsoftmax": RowSpec, "layernorm": RowSpec, "bgemm": BatchedGemmSpec, "copy": CopySpec,
    "transpose": TransposeSpec, "attention": AttentionSpec, "avgpool2d": AvgPool2dSpec, "resize": ResizeSpec,
    "eltwise_program": EltwiseProgramSpec, "channel_gather": ChannelGatherSpec, "reduce": ReduceSpec,
    "gather": GatherSpec, "lstm_loop": LstmLoopSpec, "col2im": Col2imSpec, "gru_loop": GruLoopSpec,
    "channel_layernorm": ChannelNormSpec}


CUBE_DTYPES = ("fp16", "bf16")


def cube_dtype(op: OpInstance) -> str:
    """The Cube operand type lowering (or the build, for kernel-list entries) gave the instance."""
    dtype = op.attrs.get("dtype", "fp16")
    if dtype not in CUBE_DTYPES:
        raise KilnError("opspec", op.label, f"dtype {dtype!r} is not one of {', '.join(CUBE_DTYPES)}")
    return dtype


def is_depthwise(group: int, cin: int, weight) -> bool:
    """A Conv of `group` groups over `cin` input channels with an OIHW `weight` shape is depthwise (one input and
    one output channel per group: dwconv2d_vector); any other group count > 1 is a grouped Cube convolution."""
    return group > 1 and group == cin == weight[0] and weight[1] == 1


def opspec_of(op: OpInstance) -> Opspec:
    a, relu = op.attrs, op.attrs["activation"] == "Relu"
    if op.type == "Conv":
        (n, cin, h, w), (cout, _, kh, kw) = a["input"], a["weight"]
        (pt, pl, pb, pr), (sh, sw), (dh, dw) = a["pads"], a["strides"], a["dilations"]
        clip_hi, extra = (f32(a["max"]) if a["activation"] == "Clip" else 0.0), {"program": a.get("program", "")}
        if not is_depthwise(a["group"], cin, a["weight"]):  # dense or grouped: the Cube
            second = a.get("second")  # (cin2, h2, w2, stride) of an accumulated 1x1 conv
            extra.update(dict(cin2=second[0], h2=second[1], w2=second[2], s2=second[3]) if second else {})
            if a.get("mid"):  # a chain: the window conv's (channels, bias, relu); cout is the 1x1 conv's
                extra.update(mid=a["mid"][0], mid_bias=a["mid"][1], mid_relu=a["mid"][2])
                cout = a["cout"]
            return Conv2dSpec(n, cin, h, w, cout, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, a["bias"], relu,
                              bool(a.get("residual", False)), clip_hi, **extra, dtype=cube_dtype(op), group=a["group"],
                              c04=bool(a.get("c04", False)))
        return DwConv2dSpec(n, cin, h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, a["bias"], relu, clip_hi, **extra)
    if op.type in ("Gemm", "MatMul"):
        return GemmSpec(a["a"][0], a["a"][1], a["b"][1], a["bias"], relu, cube_dtype(op), a.get("split", 0))
    if op.type in ("Relu", "Add", "Clip", "Mul", "Muls", "Adds", "Gelu"):
        numel = prod(a["shape"])
        act = "relu" if relu else ("clip" if a["activation"] == "Clip" else "")
        lo, hi = a.get("min", 0.0), a.get("max", 0.0)
        if op.type in ("Relu", "Gelu"):
            return EltwiseSpec(op.type.lower(), numel)
        lo, hi = f32(max(lo, -65504.0)), f32(min(hi, 65504.0))  # fp16 data: clip bounds beyond its range are no-ops
        if op.type == "Clip":
            return EltwiseSpec("clip", numel, "", lo, hi)
        if op.type in ("Muls", "Adds"):
            return EltwiseSpec(op.type.lower(), numel, scalar=f32(a["scalar"]))
        return EltwiseSpec(op.type.lower(), numel, act, lo if act == "clip" else 0.0, hi if act == "clip" else 0.0)
    if op.type == "EltwiseProgram":
        return program_spec_of(op)
    if op.type in ("Softmax", "LogSoftmax", "LayerNormalization"):
        rows, length = a["rows"], a["length"]
        if op.type != "LayerNormalization":
            return RowSpec("softmax" if op.type == "Softmax" else "logsoftmax", rows, length)
        return RowSpec("layernorm", rows, length, f32(a["epsilon"]))
    if op.type == "BatchedMatMul":
        return BatchedGemmSpec(a["batch"], a["m"], a["k"], a["n"], bool(a["trans_b"]), cube_dtype(op))
    if op.type in ("Transpose0213", "ChannelGather"):
        return TransposeSpec(*a["input"]) if op.type == "Transpose0213" else ChannelGatherSpec(
            a["n"], a["h"], a["w"], a["in_channels"], a["table"])
    if op.type in ("Copy", "Gather"):
        return CopySpec(a["out_numel"], a["moves"]) if op.type == "Copy" else GatherSpec(*a["gather"])
    if op.type in REDUCE_OPS:
        return ReduceSpec(REDUCE_OPS[op.type], a["rows"], a["length"])
    if op.type in (*LOOP_SPECS, "Col2im", "ChannelLayerNorm"):  # LSTMLoop, GRULoop; specs of their own modules
        return Col2imSpec.of(a) if op.type == "Col2im" else \
            ChannelNormSpec.of(a) if op.type == "ChannelLayerNorm" else LOOP_SPECS[op.type](a)
    if op.type == "Resize":
        (n, c, h, w), (ho, wo), (sh, sw) = a["input"], a["out_hw"], map(f32, a["scales"])
        return ResizeSpec(n, c, h, w, ho, wo, a["mode"], a["coord"], a["nearest"], sh, sw, a.get("program", ""))
    if op.type == "Attention":
        return AttentionSpec(a["batch"], a["heads"], a["q"], a["kv"], a["d"], f32(a["scale"]), bool(a.get("mask")))
    if op.type in ("MaxPool", "AveragePool", "GlobalAveragePool"):
        n, c, h, w = a["input"]
        if op.type == "GlobalAveragePool":
            return Pool2dSpec("avg", n, c, h, w, h, w, 1, 1, 0, 0, 0, 0)
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = a["kernel_shape"], a["strides"], a["pads"]
        if op.type == "AveragePool":
            return AvgPool2dSpec("avg", n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr, int(a["count_include_pad"]),
                                 *a["ceil_extra"])
        return Pool2dSpec("max" if op.type == "MaxPool" else "avg", n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr,
                          dh=a.get("dilations", (1, 1))[0], dw=a.get("dilations", (1, 1))[1])
    raise KilnError("opspec", op.label, f"no kernel for op type {op.type}")


def program_spec_of(op: OpInstance) -> EltwiseProgramSpec:
    """An elementwise program over an output of logical `shape` held in `layout` (NC1HWC0 for 4-D, else ND)."""
    a = op.attrs
    shape = tuple(a["shape"])
    if a["layout"] == "NC1HWC0":
        n, c, h, w = shape
        plane = h * w * C0
        return EltwiseProgramSpec(n * c1(c) * plane, plane, c1(c), c % C0, a["forms"], a["program"])
    numel = prod(shape)
    plane = shape[-1] if "row" in a["forms"].split(",") else numel  # one item per row chunk: the row's slice
    return EltwiseProgramSpec(numel, plane, 0, 0, a["forms"], a["program"])


def bytes_moved(spec: Opspec) -> int:
    """Compulsory GM traffic: every packed input read once, the output written once."""
    return sum(t.nbytes for t in spec.inputs()) + spec.output().nbytes


def arithmetic_intensity(spec: Opspec) -> float:
    return spec.flops / bytes_moved(spec)


def features(spec: Opspec) -> dict:
    return {"kind": spec.kind, "flops": spec.flops, "bytes": bytes_moved(spec),
            "arithmetic_intensity": round(arithmetic_intensity(spec), 3), "reduction_length": spec.reduction_length,
            "c0_padding_waste": round(spec.channel_padding, 4)}


def spec_hash(spec: Opspec) -> str:
    """The opspec hash: a kernel's identity in file names, the search cache and tuning records."""
    values = {f.name: getattr(spec, f.name) for f in fields(spec)}
    # A conv without a second source hashes as it did before those fields existed; nor does a conv without a chained
    # 1x1, a conv on a 16-channel-block input (c04 false) or a GEMM with one result (split 0).
    for key, names in (("cin2", ("cin2", "h2", "w2", "s2")), ("mid", ("mid", "mid_bias", "mid_relu")),
                       ("c04", ("c04",)), ("split", ("split",))):
        if key in values and not values[key]:
            for name in names:
                values.pop(name)
    if values.get("group", 2) == 1:  # nor a dense conv (before grouped convolution)
        values.pop("group")
    if isinstance(spec, Pool2dSpec) and (spec.dh, spec.dw) == (1, 1):  # nor a pool without dilation
        values.pop("dh"), values.pop("dw")
    if values.get("dtype") == "fp16":  # nor does an fp16 Cube kernel (the only type before KILN_DTYPE)
        values.pop("dtype")
    canon = json.dumps({"kind": spec.kind, **values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]
