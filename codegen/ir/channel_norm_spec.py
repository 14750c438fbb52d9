"""ChannelNormSpec: the op spec of the channel_layernorm_vector family, ConvNeXt's Transpose(0,2,3,1) ->
LayerNormalization(last axis) as one kernel (codegen/passes/channel_norm.py): it reads the NCHW activation as
NC1HWC0 holds it and writes the normalised rows [N*H*W, C] (the NHWC tensor) the next MatMul reads, so the
transposed tensor is never stored. Its own module: opspec.py is at its size limit; opspec lists it in
SPEC_CLASSES."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from .tensor import C0, Tensor, c1, num_fragment


@dataclass(frozen=True)
class ChannelNormSpec:
    """y[(n h + i) w + j, c] = (x[n, c, i, j] - mean) / sqrt(var + eps) * gamma[c] + beta[c], mean and var over
    the C channels of pixel (n, i, j) (population variance, fp32). x NC1HWC0 fp16 [N, C1, H, W, 16] (padded
    lanes never read into the statistics), gamma and beta fp32 [C], y row-major fp16 [N*H*W, C]."""
    n: int
    c: int
    h: int
    w: int
    eps: float
    kind: ClassVar[Literal["channel_layernorm"]] = "channel_layernorm"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    def __post_init__(self) -> None:
        if min(self.n, self.c, self.h, self.w) < 1:
            raise ValueError("channel_layernorm sizes must be >= 1")

    @classmethod
    def of(cls, attrs: dict) -> ChannelNormSpec:
        """The spec of a ChannelLayerNorm op instance: its NCHW `input` shape and `epsilon` (as float32)."""
        n, c, h, w = attrs["input"]
        return cls(n, c, h, w, float(np.float32(attrs["epsilon"])))

    @property
    def rows(self) -> int:
        return self.n * self.h * self.w

    @property
    def name(self) -> str:
        return f"channel_layernorm_{self.n}x{self.c}x{self.h}x{self.w}_eps{num_fragment(self.eps)}"

    @property
    def flops(self) -> int:
        return self.rows * self.c * 8

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.n, c1(self.c), self.h, self.w, C0), "fp16", "NC1HWC0"),
                Tensor("gamma", (self.c,), "fp32", "ND"), Tensor("beta", (self.c,), "fp32", "ND")]

    def output(self) -> Tensor:
        return Tensor("y", (self.rows, self.c), "fp16", "ND")

    @property
    def reduction_length(self) -> int:
        return self.c

    @property
    def channel_padding(self) -> float:
        return 1 - self.c / (c1(self.c) * C0)
