"""Col2imSpec: the op spec of the col2im_vector family, the second half of a ConvTranspose built as a GEMM + col2im
(codegen/passes/conv_transpose.py): the GEMM's columns, one output channel block per (tap, channel block), are
scatter-added into the output per the ONNX ConvTranspose spec (strides, pads, dilations; output_padding is in the
output size), then the bias and the fused activation are applied once per output pixel. Its own module: opspec.py
is at its size limit; opspec lists it in SPEC_CLASSES."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from .tensor import C0, Tensor, c1


@dataclass(frozen=True)
class Col2imSpec:
    """y[n, c, oh, ow] = bias[c] + sum of cols[n, (a kw + b) C1 16 + c, ih, iw] over the taps (a, b) and input
    pixels with oh = ih sh - pt + a dh, ow = iw sw - pl + b dw; then ReLU or Clip(lo, hi). cols NC1HWC0 fp16
    [N, kh kw C1, H, W, 16] (tap (a, b)'s channel block c1 is block (a kw + b) C1 + c1), y NC1HWC0 fp16."""
    n: int
    c: int
    h: int
    w: int
    ho: int
    wo: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    bias: bool
    activation: str = ""  # "", "Relu" or "Clip" (to [clip_lo, clip_hi])
    clip_lo: float = 0.0
    clip_hi: float = 0.0
    kind: ClassVar[Literal["col2im"]] = "col2im"
    natural_output: ClassVar[Literal["nchw"]] = "nchw"

    def __post_init__(self) -> None:
        if min(self.n, self.c, self.h, self.w, self.ho, self.wo, self.kh, self.kw, self.sh, self.sw, self.dh,
               self.dw) < 1 or min(self.pt, self.pl) < 0 or self.activation not in ("", "Relu", "Clip"):
            raise ValueError("col2im sizes, strides and dilations must be >= 1, pads >= 0, the activation '', Relu "
                             "or Clip")

    @classmethod
    def of(cls, attrs: dict) -> Col2imSpec:
        """The spec of a Col2im op instance: its geometry (n, c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl), bias
        and fused activation (Clip's bounds as float32)."""
        act = attrs["activation"]
        clip = (float(np.float32(attrs["min"])), float(np.float32(attrs["max"]))) if act == "Clip" else (0.0, 0.0)
        n, c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl = attrs["geometry"]
        return cls(n, c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl, bool(attrs["bias"]), act, *clip)

    def row_taps(self, oh: int) -> list[tuple[int, int]]:
        """(tap row a, input row ih) of each column row that adds into output row oh."""
        out = []
        for a in range(self.kh):
            t = oh + self.pt - a * self.dh
            if t >= 0 and t % self.sh == 0 and t // self.sh < self.h:
                out.append((a, t // self.sh))
        return out

    def col_runs(self) -> list[tuple[int, int, int]]:
        """Per tap column b: (first input column, count, its output column); the input columns iw0 .. iw0+count-1
        land on output columns ow0, ow0 + sw, ... (count 0: the tap reaches no output column)."""
        out = []
        for b in range(self.kw):
            off = b * self.dw - self.pl
            lo = max(0, -(off // self.sw))  # the first iw with iw sw + off >= 0
            hi = min(self.w, (self.wo - 1 - off) // self.sw + 1) if self.wo - 1 - off >= 0 else 0
            out.append((lo, max(0, hi - lo), lo * self.sw + off))
        return out

    @property
    def max_row_taps(self) -> int:
        """The most tap rows any output row reads (the input buffer holds that many times kw column rows)."""
        return max(len(self.row_taps(oh)) for oh in range(self.ho))

    @property
    def name(self) -> str:
        s = f"s{self.sh}" if self.sh == self.sw else f"s{self.sh}x{self.sw}"
        d = "" if (self.dh, self.dw) == (1, 1) else f"_d{self.dh}x{self.dw}"
        act = {"": "", "Relu": "_relu", "Clip": f"_clip_{_num(self.clip_lo)}_{_num(self.clip_hi)}"}[self.activation]
        return (f"col2im_{self.n}x{self.c}x{self.h}x{self.w}_to_{self.ho}x{self.wo}_k{self.kh}x{self.kw}_{s}"
                f"_p{self.pt}x{self.pl}{d}{'_bias' if self.bias else ''}{act}")

    @property
    def out_channels(self) -> int:
        return self.c

    @property
    def flops(self) -> int:  # one add per column value that lands in the output
        runs = self.col_runs()
        rows = sum(len(self.row_taps(oh)) for oh in range(self.ho))
        return self.n * self.c * rows * sum(cnt for _, cnt, _ in runs)

    def inputs(self) -> list[Tensor]:
        t = [Tensor("cols", (self.n, self.kh * self.kw * c1(self.c), self.h, self.w, C0), "fp16", "NC1HWC0")]
        if self.bias:
            t.append(Tensor("bias", (c1(self.c) * C0,), "fp32", "ND"))
        return t

    def output(self) -> Tensor:
        return Tensor("y", (self.n, c1(self.c), self.ho, self.wo, C0), "fp16", "NC1HWC0")

    @property
    def reduction_length(self) -> int:  # the column values summed into one output pixel (at most), and the bias
        runs = [(cnt, ow0) for _, cnt, ow0 in self.col_runs() if cnt]
        cols = max(sum(1 for cnt, ow0 in runs if (ow - ow0) % self.sw == 0 and 0 <= (ow - ow0) // self.sw < cnt)
                   for ow in range(self.wo))
        return max(1, self.max_row_taps * cols + int(self.bias))

    @property
    def channel_padding(self) -> float:
        return 1 - self.c / (c1(self.c) * C0)


def _num(v: float) -> str:
    """A clip bound as an identifier fragment: 6 -> 6, 0.5 -> 0p5, -1 -> m1."""
    return f"{float(v):g}".replace("-", "m").replace(".", "p").replace("+", "")
