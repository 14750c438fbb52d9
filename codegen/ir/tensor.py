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


def num_fragment(v: float) -> str:
    """A float32 as an identifier fragment, injective: the shortest repr that round-trips float32
    (6 -> 6, 0.5 -> 0p5, -1 -> m1, 1e-12 -> 1em12, inf -> inf)."""
    import numpy as np
    text = np.format_float_scientific(np.float32(v), unique=True, trim="-") if v and (abs(v) < 1e-4 or abs(v) >= 1e6) \
        else np.format_float_positional(np.float32(v), unique=True, trim="-")
    return text.replace("-", "m").replace(".", "p").replace("+", "")
