"""A kernel operand's description (Tensor) and the C0 channel blocking: shared by the op specs (opspec.py and
the spec modules it lists)."""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod

C0 = 16  # fp16 channels per 32-byte block


def c1(c: int) -> int:
    return ceil(c / C0)


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str    # fp16 | bf16 | fp32
    layout: str   # NC1HWC0, FRACTAL_Z, ZN, C1HWC0, ND

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * (4 if self.dtype == "fp32" else 2)
