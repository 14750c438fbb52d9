"""LstmLoopSpec and GruLoopSpec: the op specs of the lstm_loop and gru_loop kinds, an ONNX LSTM's or GRU's
recurrence looped over time inside one launch (their own module: opspec.py is at its size limit; opspec lists them
in SPEC_CLASSES).

The input projection X W^T + (Wb + Rb) of the whole sequence is a GEMM before the kernel (codegen/frontend/
onnx_rnn.py); the kernel takes its result `xw` [T*B, D*4H] (gates i, o, f, c of direction d at columns
d*4H + k*H), each direction's R^T as ZN fractals, the initial states [D, B, H] when given, and writes one packed
output of H columns: Y [T, D, B, H] as T*D*B rows, then Y_h [D, B, H], then Y_c [D, B, H]."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .tensor import C0, Tensor, c1


@dataclass(frozen=True)
class _Loop:
    """What the looped LSTM and GRU specs share: seq steps over batch rows with hidden size `hidden`, `dirs`
    directions (2: bidirectional, direction 1 reversed; 1: `reverse` says which way); `gates` per direction."""
    seq: int
    batch: int
    hidden: int
    dirs: int
    reverse: bool
    gates: ClassVar[int]
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        if min(self.seq, self.batch, self.hidden) < 1 or self.dirs not in (1, 2) or self.hidden % C0:
            raise ValueError(f"{self.kind}: seq {self.seq}, batch {self.batch}, hidden {self.hidden} (a multiple of "
                             f"16), dirs {self.dirs} (1 or 2)")

    def _name(self, tail: str) -> str:
        how = "bidir" if self.dirs == 2 else ("reverse" if self.reverse else "forward")
        return f"{self.kind}_{how}_t{self.seq}_b{self.batch}_h{self.hidden}{tail}"

    def _inputs(self, states: tuple[tuple[str, bool], ...]) -> list[Tensor]:
        """xw, R^T as ZN fractals, then the [D, B, H] inputs of `states` that are on."""
        g = self.gates * self.hidden
        t = [Tensor("xw", (self.seq * self.batch, self.dirs * g), "fp16", "ND"),
             Tensor("r", (self.dirs, c1(self.hidden), c1(g), C0, C0), "fp16", "ZN")]
        return t + [Tensor(s, (self.dirs, self.batch, self.hidden), "fp16", "ND") for s, on in states if on]

    def _output(self, state_rows: int) -> Tensor:
        """Y as T*D*B rows, then `state_rows` blocks of D*B rows (the last states)."""
        return Tensor("y", ((self.seq + state_rows) * self.dirs * self.batch, self.hidden), "fp16", "ND")

    @property
    def out_channels(self) -> int:
        return self.hidden

    @property
    def reduction_length(self) -> int:  # the hidden projection's, per step (the state carries over the steps)
        return self.hidden

    @property
    def channel_padding(self) -> float:
        return 0.0


@dataclass(frozen=True)
class LstmLoopSpec(_Loop):
    """An LSTM's loop (_Loop); h0 / c0: the initial states are inputs (else zero)."""
    h0: bool
    c0: bool
    gates: ClassVar[int] = 4
    kind: ClassVar[Literal["lstm_loop"]] = "lstm_loop"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    @property
    def name(self) -> str:
        return self._name(("_h0" if self.h0 else "") + ("_c0" if self.c0 else ""))

    @property
    def flops(self) -> int:  # per step and direction: the hidden projection and about 30 gate ops per value
        return self.seq * self.dirs * self.batch * self.hidden * (2 * 4 * self.hidden + 30)

    def inputs(self) -> list[Tensor]:
        return self._inputs((("h0", self.h0), ("c0", self.c0)))

    def output(self) -> Tensor:
        return self._output(2)


@dataclass(frozen=True)
class GruLoopSpec(_Loop):
    """A GRU's loop (_Loop); h0: the initial hidden state is an input (else zero); lbr: linear_before_reset (1:
    r * (h R_h^T + Rb_h), Rb_h an input [D, B, H]; 0: (r * h) R_h^T, a second Cube step per time step).

    The kernel takes the input projection `xw` [T*B, D*3H] (gates z, r, h of direction d at columns d*3H + k*H,
    biases Wb + Rb folded in, but for gate h only Wb_h when lbr), each direction's R^T as ZN fractals (lbr: one
    [H, 3H] block; else R_zr^T [H, 2H], then R_h^T [H, H]), Rb_h broadcast over the batch rows when lbr, h0 when
    given; it writes Y [T, D, B, H] as T*D*B rows, then Y_h [D, B, H]."""
    h0: bool
    lbr: bool
    gates: ClassVar[int] = 3
    kind: ClassVar[Literal["gru_loop"]] = "gru_loop"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    @property
    def name(self) -> str:
        return self._name(f"{'_h0' if self.h0 else ''}_lbr{int(self.lbr)}")

    @property
    def flops(self) -> int:  # per step and direction: the hidden projection and about 25 gate ops per value
        return self.seq * self.dirs * self.batch * self.hidden * (2 * 3 * self.hidden + 25)

    def inputs(self) -> list[Tensor]:
        return self._inputs((("rbh", self.lbr), ("h0", self.h0)))

    def output(self) -> Tensor:
        return self._output(1)


# the graph op of a looped recurrence (kiln's own, written by the frontend) -> its spec from the op's attributes
LOOP_SPECS: dict[str, Callable[[dict[str, Any]], LstmLoopSpec | GruLoopSpec]] = {
    "LSTMLoop": lambda a: LstmLoopSpec(a["seq"], a["batch"], a["hidden"], a["dirs"], a["reverse"], a["h0"], a["c0"]),
    "GRULoop": lambda a: GruLoopSpec(a["seq"], a["batch"], a["hidden"], a["dirs"], a["reverse"], a["h0"], a["lbr"]),
}
