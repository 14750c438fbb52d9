"""ReduceSpec: the op spec of the reduce_vector family (ReduceMax, ReduceMin, ReduceL2 over the last axis of rows;
lowering moves any reduced axes last first). Its own module: opspec.py is at its size limit; opspec lists it in
SPEC_CLASSES."""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import ClassVar, Literal

from .tensor import Tensor

ReduceOp = Literal["max", "min", "l2"]
REDUCE_OPS: dict[str, ReduceOp] = {"ReduceMax": "max", "ReduceMin": "min", "ReduceL2": "l2"}
MAX_LENGTH = 4096  # two reduction levels of 64 fp32 lanes each (the template's static_assert)
ROW_MAX_LENGTH = 4096  # the longest row of the row kernels (softmax, layernorm: codegen/families/rows.py)


@dataclass(frozen=True)
class ReduceSpec:
    """y[r] = reduce(x[r, 0:length]) for `rows` contiguous fp16 rows, in fp32 on the Vector unit: max, min
    (the max of -x, negated), l2 (the square root of the sum of squares). Output (rows, 1) fp16."""
    op: ReduceOp
    rows: int
    length: int
    kind: ClassVar[Literal["reduce"]] = "reduce"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    def __post_init__(self) -> None:
        if self.op not in REDUCE_OPS.values():
            raise ValueError(f"reduce op {self.op!r} is not one of {', '.join(REDUCE_OPS.values())}")
        if not (self.rows >= 1 and 1 <= self.length <= MAX_LENGTH):
            raise ValueError(f"a reduction over {self.length} values: 1..{MAX_LENGTH} are supported")

    @property
    def name(self) -> str:
        return f"reduce{self.op}_{self.rows}x{self.length}"

    @property
    def flops(self) -> int:
        return self.rows * self.length * (2 if self.op == "l2" else 1)

    @property
    def partials(self) -> int:
        """fp32 repeats of 64 a row takes (one first-level partial each)."""
        return ceil(self.length / 64)

    @property
    def stride(self) -> int:
        """Partials a row's first level writes: its repeats, rounded up to whole 32-byte blocks (8 fp32) when
        there are several, so the second level reads each row's partials from a block boundary."""
        return 1 if self.partials == 1 else ceil(self.partials / 8) * 8

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.rows, self.length), "fp16", "ND")]

    def output(self) -> Tensor:
        return Tensor("y", (self.rows, 1), "fp16", "ND")

    @property
    def reduction_length(self) -> int:
        return self.length

    channel_padding = 0.0
