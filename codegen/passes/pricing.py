"""The bound on the fusion decisions the cost model prices at plan time (a Cube conv taking a program epilogue,
a channel LayerNorm): the price is an exact replay of the rule's kernels, whose work grows with the kernel's blocks,
so a tensor far larger than any layer a model has (a mistaken or mutated shape) is not priced and its ops stay
separate kernels, logged `not_priced`. 2^27 values is over 5x ResNet-50's largest activation at batch 32."""
from __future__ import annotations

from math import prod

PRICED_ELEMENTS = 2 ** 27


def unpriced(shape: tuple[int, ...] | list[int]) -> str:
    """"" when fusion prices a kernel writing a tensor of `shape`; otherwise the log's detail saying why not."""
    n = prod(int(d) for d in shape)
    return "" if n <= PRICED_ELEMENTS else f"{n} values > {PRICED_ELEMENTS} priced at plan time"
