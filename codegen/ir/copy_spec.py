"""CopySpec: the op spec of the copy_mte family (its own module: opspec.py is at its size limit; opspec lists it
in SPEC_CLASSES), and the index arithmetic of a strided move (canonical form, the kernel's item table)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from math import ceil, prod
from typing import ClassVar, Literal

from .tensor import Tensor


def canonical_move(dims: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dims, output strides) of the move of a row-major input of `dims` whose axis a lands at output stride
    strides[a], simplest form: unit axes dropped, neighbouring axes that stay neighbours in the output merged,
    at least two axes (a leading unit axis of stride 0 added)."""
    kept = [(d, s) for d, s in zip(dims, strides) if d != 1]
    merged: list[list[int]] = []
    for d, s in kept:
        if merged and merged[-1][1] == s * d:  # the previous axis steps over exactly this one in the output too
            merged[-1] = [merged[-1][0] * d, s]
        else:
            merged.append([d, s])
    while len(merged) < 2:
        merged.insert(0, [1, 0])
    return tuple(d for d, _ in merged), tuple(s for _, s in merged)


def pitch(length: int) -> int:
    """UB elements a row of `length` fp16 elements takes: every row starts on a 32-byte block, as a Vector or MTE
    operand in UB must."""
    return ceil(length / 16) * 16


@dataclass(frozen=True)
class Move:
    """One input's move in canonical form: the input row-major over `dims`, its axis a written at output stride
    strides[a] from element `base`. The kernel moves it as items: a chunk of consecutive input rows of the last
    axis (or a piece of one row when a row exceeds a buffer), read as one burst per row into rows of whole 32-byte
    blocks, written as one strided burst per row (contiguous rows: strides[-1] == 1) or one burst per element
    (the last axis scatters)."""
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    base: int

    @property
    def numel(self) -> int:
        return prod(self.dims)

    def layout(self, capacity: int) -> tuple[int, int, int, int]:
        """(rows per chunk, piece length, row chunks, pieces per row) for buffers of `capacity` elements (a
        multiple of 16), each row at a pitch of whole 32-byte blocks (pitch())."""
        rows, length = self.dims[-2], self.dims[-1]
        piece = min(length, capacity)
        chunk_rows = max(1, min(rows, capacity // pitch(piece))) if piece == length else 1
        return chunk_rows, piece, ceil(rows / chunk_rows), ceil(length / piece)

    def items(self, capacity: int) -> int:
        _, _, chunks, pieces = self.layout(capacity)
        return prod(self.dims[:-2]) * chunks * pieces


def parse_moves(text: str) -> tuple[Move, ...]:
    """'d0xd1:s0xs1:base' per input, ';'-joined (CopySpec.moves)."""
    out = []
    for entry in text.split(";"):
        dims, strides, base = entry.split(":")
        out.append(Move(tuple(int(v) for v in dims.split("x")), tuple(int(v) for v in strides.split("x")),
                        int(base)))
    return tuple(out)


def format_moves(moves: list[tuple[tuple[int, ...], tuple[int, ...], int]]) -> str:
    """The CopySpec.moves text of (dims, output strides, base) per input, each put in canonical form."""
    parts = []
    for dims, strides, base in moves:
        d, s = canonical_move(dims, strides)
        parts.append(f"{'x'.join(map(str, d))}:{'x'.join(map(str, s))}:{base}")
    return ";".join(parts)


@dataclass(frozen=True)
class CopySpec:
    """y (out_numel fp16 elements) = every input moved to its place: input t (row-major, in_numels[t] elements)
    is Move t of `moves`. Covers any Transpose (one move, strides of the permuted output), a Concat that needs a
    copy (one move per input, each into its range of the output) and the blocked (NC1HWC0) forms of both, whose
    stored bytes are a row-major tensor too. The moves together write every output element exactly once."""
    out_numel: int
    moves: str
    kind: ClassVar[Literal["copy"]] = "copy"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    def __post_init__(self) -> None:
        written = sum(m.numel for m in self.parsed)
        last = max(m.base + sum((d - 1) * s for d, s in zip(m.dims, m.strides)) for m in self.parsed)
        if written != self.out_numel or last >= self.out_numel or min(m.base for m in self.parsed) < 0:
            raise ValueError(f"copy moves {self.moves!r} do not tile an output of {self.out_numel} elements")

    @property
    def parsed(self) -> tuple[Move, ...]:
        return parse_moves(self.moves)

    @property
    def name(self) -> str:
        digest = hashlib.sha256(self.moves.encode()).hexdigest()[:6]
        ins = "_".join(str(m.numel) for m in self.parsed)
        return f"copy_{ins}_to_{self.out_numel}_{digest}"

    flops = 0

    def inputs(self) -> list[Tensor]:
        return [Tensor(f"x{i}", (m.numel,), "fp16", "ND") for i, m in enumerate(self.parsed)]

    def output(self) -> Tensor:
        return Tensor("y", (self.out_numel,), "fp16", "ND")

    reduction_length = 1
    channel_padding = 0.0


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(prod(shape[i + 1:]) for i in range(len(shape)))


def transpose_copy(shape: tuple[int, ...], perm: tuple[int, ...]) -> CopySpec:
    """out = x.transpose(perm) for a row-major x of `shape`."""
    out_strides = row_major_strides(tuple(shape[a] for a in perm))
    strides = [0] * len(shape)
    for i, a in enumerate(perm):
        strides[a] = out_strides[i]
    return CopySpec(prod(shape), format_moves([(tuple(shape), tuple(strides), 0)]))


def concat_copy(shapes: list[tuple[int, ...]], axis: int) -> CopySpec:
    """out = concatenate(inputs, axis) for row-major inputs of `shapes` (equal outside `axis`)."""
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    strides = row_major_strides(tuple(out_shape))
    moves, at = [], 0
    for s in shapes:
        moves.append((tuple(s), strides, at * strides[axis]))
        at += s[axis]
    return CopySpec(prod(out_shape), format_moves(moves))


GATHER_MAX_INDICES = 8192  # the index vector sits whole in UB (fp32, 32 KB) next to the two row buffers


@dataclass(frozen=True)
class GatherSpec:
    """y[o, j, :] = x[o, idx[j], :] (ONNX Gather over one axis, flattened): x row-major [outer, axis, inner] fp16,
    the indices `count` values held as fp32 (exact integers below 2**24; a negative index counts from the end of the
    axis, ONNX's rule; out of range raises), y [outer, count, inner] fp16. Pure data movement driven by the
    indices: the scalar unit reads them from UB, each output row is one MTE burst from its source row."""
    outer: int
    axis: int
    count: int
    inner: int
    kind: ClassVar[Literal["gather"]] = "gather"
    natural_output: ClassVar[Literal["as_written"]] = "as_written"

    def __post_init__(self) -> None:
        if min(self.outer, self.axis, self.count, self.inner) < 1 or self.count > GATHER_MAX_INDICES:
            raise ValueError(f"a gather of {self.count} indices: 1..{GATHER_MAX_INDICES} indices, every dim >= 1")

    @property
    def name(self) -> str:
        return f"gather_{self.outer}x{self.axis}x{self.inner}_i{self.count}"

    flops = 0

    @property
    def rows(self) -> int:
        """Output rows of `inner` elements, one per (outer, index) pair."""
        return self.outer * self.count

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.outer, self.axis, self.inner), "fp16", "ND"),
                Tensor("indices", (self.count,), "fp32", "ND")]

    def output(self) -> Tensor:
        return Tensor("y", (self.outer, self.count, self.inner), "fp16", "ND")

    reduction_length = 1
    channel_padding = 0.0
