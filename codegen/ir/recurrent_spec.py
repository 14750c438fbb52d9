"""LstmLoopSpec: the op spec of the lstm_loop family, an ONNX LSTM's recurrence looped over time inside one
launch (its own module: opspec.py is at its size limit; opspec lists it in SPEC_CLASSES).

The input projection X W^T + (Wb + Rb) of the whole sequence is a GEMM before the kernel (codegen/frontend/
onnx_rnn.py); the kernel takes its result `xw` [T*B, D*4H] (gates i, o, f, c of direction d at columns
d*4H + k*H), each direction's R^T as ZN fractals, the initial states [D, B, H] when given, and writes one packed
output of H columns: Y [T, D, B, H] as T*D*B rows, then Y_h [D, B, H], then Y_c [D, B, H]."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .tensor import C0, Tensor, c1


@dataclass(frozen=True)
class LstmLoopSpec:
    """seq steps of an LSTM over batch rows with hidden size `hidden`, `dirs` directions (2: bidirectional,
    direction 1 reversed; 1: `reverse` says which way); h0 / c0: the initial states are inputs (else zero)."""
    seq: int
    batch: int
    hidden: int
    dirs: int
    reverse: bool
    h0: bool
    c0: bool
    kind: ClassVar[Literal["lstm_loop"]] = "lstm_loop"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    def __post_init__(self) -> None:
        if min(self.seq, self.batch, self.hidden) < 1 or self.dirs not in (1, 2) or self.hidden % C0:
            raise ValueError(f"lstm_loop: seq {self.seq}, batch {self.batch}, hidden {self.hidden} (a multiple of "
                             f"16), dirs {self.dirs} (1 or 2)")

    @property
    def name(self) -> str:
        how = "bidir" if self.dirs == 2 else ("reverse" if self.reverse else "forward")
        states = ("_h0" if self.h0 else "") + ("_c0" if self.c0 else "")
        return f"lstm_loop_{how}_t{self.seq}_b{self.batch}_h{self.hidden}{states}"

    @property
    def out_channels(self) -> int:
        return self.hidden

    @property
    def flops(self) -> int:  # per step and direction: the hidden projection and about 30 gate ops per value
        return self.seq * self.dirs * self.batch * self.hidden * (2 * 4 * self.hidden + 30)

    def inputs(self) -> list[Tensor]:
        g = 4 * self.hidden
        t = [Tensor("xw", (self.seq * self.batch, self.dirs * g), "fp16", "ND"),
             Tensor("r", (self.dirs, c1(self.hidden), c1(g), C0, C0), "fp16", "ZN")]
        t += [Tensor(s, (self.dirs, self.batch, self.hidden), "fp16", "ND") for s, on in (("h0", self.h0),
                                                                                      ("c0", self.c0)) if on]
        return t

    def output(self) -> Tensor:
        return Tensor("y", ((self.seq + 2) * self.dirs * self.batch, self.hidden), "fp16", "ND")

    @property
    def reduction_length(self) -> int:  # the hidden projection's, per step (the state carries over the steps)
        return self.hidden

    @property
    def channel_padding(self) -> float:
        return 0.0
