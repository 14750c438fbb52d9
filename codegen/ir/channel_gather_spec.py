"""ChannelGatherSpec: the op spec of the channel_gather_mte family (its own module: opspec.py is at its size limit;
opspec lists it in SPEC_CLASSES)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar, Literal

from .tensor import C0, Tensor, c1


@dataclass(frozen=True)
class ChannelGatherSpec:
    """out[n, j, h, w] = inputs[t_j][n, c_j, h, w] on NC1HWC0 fp16: a table of sources, one (input, channel) per
    output channel (Concat of channel counts that are not multiples of C0, a channel shuffle, an unaligned channel
    slice). `in_channels`: comma-separated channel counts of the inputs; `table`: "t:c" per output channel. The
    output's padded lanes are written as zeros."""
    n: int
    h: int
    w: int
    in_channels: str
    table: str
    kind: ClassVar[Literal["channel_gather"]] = "channel_gather"
    natural_output: ClassVar[Literal["nchw"]] = "nchw"

    def __post_init__(self) -> None:
        chans = self.channel_counts
        if any(t >= len(chans) or not 0 <= c < chans[t] for t, c in self.sources) or not self.sources:
            raise ValueError(f"channel gather table {self.table!r} names channels outside inputs {self.in_channels}")

    @property
    def channel_counts(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.in_channels.split(","))

    @property
    def sources(self) -> tuple[tuple[int, int], ...]:
        return tuple((int(t), int(c)) for t, c in (e.split(":") for e in self.table.split(",")))

    @property
    def out_channels(self) -> int:
        return len(self.sources)

    def runs(self) -> list[tuple[int, int, int, int]]:
        """(input, first source channel, first output channel, count): maximal stretches of consecutive output
        channels reading consecutive channels of one input, neither crossing a C0 block (one strided MTE burst)."""
        out: list[list[int]] = []
        for j, (t, c) in enumerate(self.sources):
            r = out[-1] if out else None
            if r and r[0] == t and r[1] + r[3] == c and c % C0 and j % C0:
                r[3] += 1
            else:
                out.append([t, c, j, 1])
        return [(t, c, j, k) for t, c, j, k in out]

    @property
    def name(self) -> str:
        digest = hashlib.sha256(f"{self.in_channels}/{self.table}".encode()).hexdigest()[:6]
        ins = "_".join(str(c) for c in self.channel_counts)
        return f"channel_gather_{self.n}x{self.h}x{self.w}_{ins}_to_{self.out_channels}_{digest}"

    flops = 0

    def inputs(self) -> list[Tensor]:
        return [Tensor(f"x{i}", (self.n, c1(c), self.h, self.w, C0), "fp16", "NC1HWC0")
                for i, c in enumerate(self.channel_counts)]

    def output(self) -> Tensor:
        return Tensor("y", (self.n, c1(self.out_channels), self.h, self.w, C0), "fp16", "NC1HWC0")

    reduction_length = 1

    @property
    def channel_padding(self) -> float:
        return 1 - self.out_channels / (c1(self.out_channels) * C0)

