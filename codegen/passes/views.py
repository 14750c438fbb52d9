"""Index arithmetic of the data-movement ops the lowering turns into views (no bytes moved) or into the
transpose kernel: which slices of a row-major tensor are one contiguous byte range, and the simplest form of
an axis permutation (unit axes dropped, axes that stay neighbours merged)."""
from __future__ import annotations

from math import prod


def contiguous_offset(shape: tuple[int, ...], begin: tuple[int, ...], end: tuple[int, ...]) -> int | None:
    """Element offset of the slice [begin, end) of a row-major `shape` when the slice is one contiguous range
    (every axis after the last partial one whole, every axis before it of extent 1), else None."""
    extents = [e - b for b, e in zip(begin, end)]
    partial = [i for i, (n, d) in enumerate(zip(extents, shape)) if n != d]
    last = partial[-1] if partial else 0
    if any(n != 1 for n in extents[:last]):
        return None
    return sum(b * prod(shape[i + 1:]) for i, b in enumerate(begin))


def canonical_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dims, perm) moving the same bytes as `perm` on `shape`: unit axes dropped, runs of input axes that stay
    consecutive in the output merged into one axis."""
    keep = [a for a in range(len(shape)) if shape[a] != 1]
    index = {a: i for i, a in enumerate(keep)}
    order = [index[a] for a in perm if shape[a] != 1]  # output position -> input axis, unit axes gone
    groups: list[list[int]] = []
    for a in order:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    by_input = sorted(groups, key=lambda g: g[0])
    dims = tuple(prod(shape[keep[a]] for a in g) for g in by_input)
    return dims, tuple(by_input.index(g) for g in groups)


def as_swap_0213(dims: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """[D0, D1, D2, D3] when the canonical permutation swaps two neighbouring axis groups, i.e. is the 4-D
    (0,2,1,3) with some of the outer/inner axes of size 1; None for any other permutation."""
    if perm == (1, 0):
        return (1, dims[0], dims[1], 1)
    if perm == (0, 2, 1):
        return (dims[0], dims[1], dims[2], 1)
    if perm == (1, 0, 2):
        return (1, dims[0], dims[1], dims[2])
    if perm == (0, 2, 1, 3):
        return (dims[0], dims[1], dims[2], dims[3])
    return None


def blocked_transpose(shape: tuple[int, ...], perm: tuple[int, ...], in_blocked: bool,
                      out_blocked: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dims, output strides) of `perm` on `shape` as a move of stored bytes: the input held row-major, or
    NC1HWC0 (in_blocked: axis 1 of a 4-D shape split into C1 blocks and C0 lanes, the lanes last), the output
    row-major or NC1HWC0 over its own axis 1 (out_blocked). A split axis needs whole C0 blocks; each axis held
    split on one side only is split on the other too (row-major, the split is the same bytes)."""
    split = ({1} if in_blocked else set()) | ({perm[1]} if out_blocked else set())
    size = {(a, ""): shape[a] for a in range(len(shape))}
    for a in split:
        assert shape[a] % 16 == 0, f"axis {a} of {shape} is not whole C0 blocks"
        size[(a, "hi")], size[(a, "lo")] = shape[a] // 16, 16

    def order(axes: tuple[int, ...], blocked: bool) -> list[tuple[int, str]]:
        out = [t for i, a in enumerate(axes)
               for t in ([(a, "hi")] if blocked and i == 1 else [(a, "hi"), (a, "lo")] if a in split else [(a, "")])]
        return out + ([(axes[1], "lo")] if blocked else [])

    src, dst = order(tuple(range(len(shape))), in_blocked), order(perm, out_blocked)
    dst_dims = [size[t] for t in dst]
    stride = {t: prod(dst_dims[i + 1:]) for i, t in enumerate(dst)}
    return tuple(size[t] for t in src), tuple(stride[t] for t in src)
