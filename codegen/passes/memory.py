"""Memory plan: every intermediate device tensor gets an offset in one arena.

1. Lifetimes over the kernel order. A view shares the bytes (and extends the
   lifetime) of the tensor it views.
2. In-place reuse: an elementwise or row-wise kernel (each element or row read
   before it is written, by the same core) writes its output over its first
   input when that input dies at this kernel and has the same size.
3. Placement by two strategies, keeping the smaller arena: greedy by size
   (largest first, lowest offset that overlaps no tensor alive at the same
   time; Pisarchyk & Lee 2020, arXiv:2001.03288) and best-fit decreasing
   (largest first, into the smallest gap that holds it, as TFLite's arena
   planner does).
The lower bound is the largest total size alive at one step after in-place
reuse; no placement can beat it. Offsets are aligned to the profile's GM
alignment (128 bytes on both profiles).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..passes.lowering import LoweredModel

# Kernels that may write over their first input: outputs have its size, and every element (or row)
# is read before the same core writes it.
IN_PLACE_OPS = {"Relu", "Clip", "Add", "Mul", "Muls", "Adds", "Gelu", "Softmax", "LogSoftmax", "LayerNormalization"}


@dataclass(frozen=True)
class Interval:
    value: str
    nbytes: int
    first: int  # step that writes it
    last: int   # last step that reads it


@dataclass
class Placement:
    value: str
    offset: int
    nbytes: int
    first: int
    last: int


@dataclass
class MemoryPlan:
    arena_bytes: int
    lower_bound_bytes: int
    naive_bytes: int
    strategy: str
    placements: dict[str, Placement]
    strategies: dict[str, int] = field(default_factory=dict)  # strategy -> arena bytes
    in_place: list[tuple[str, str]] = field(default_factory=list)  # (output, input whose bytes it took)
    alignment: int = 128
    roots: dict[str, str] = field(default_factory=dict)  # every device value -> the arena tensor holding it

    @property
    def fragmentation(self) -> float:
        return self.arena_bytes / self.lower_bound_bytes - 1 if self.lower_bound_bytes else 0.0


def align_up(x: int, align: int) -> int:
    return -(-x // align) * align


def intervals(m: LoweredModel) -> tuple[dict[str, Interval], dict[str, str], list[tuple[str, str]]]:
    """Lifetimes of the arena tensors after views and in-place reuse.
    Returns (root -> interval, value -> root, in-place pairs)."""
    boundary_outputs = {s.output for s in m.steps if s.kind == "glue" and s.glue.startswith("output")}
    root = dict(m.aliases)

    def r(v: str) -> str:
        while v in root:
            v = root[v]
        return v

    uses: dict[str, list[int]] = {}
    for i, s in enumerate(m.steps):
        for v in s.inputs:
            if v in m.storage:
                uses.setdefault(r(v), []).append(i)
    in_place = []
    for i, s in enumerate(m.steps):
        if s.kind != "kernel" or s.kernel_op.type not in IN_PLACE_OPS or not s.inputs or s.inputs[0] not in m.storage:
            continue
        src, out = r(s.inputs[0]), s.output
        if out in root:  # the output is a sub-range of another tensor (an in-place Concat): its bytes are fixed
            continue
        if m.storage[src].nbytes != m.storage[out].nbytes or any(u > i for u in uses.get(src, [])):
            continue
        root[out] = src  # the output takes the input's bytes from here on
        uses.setdefault(src, []).extend(uses.pop(out, []))
        in_place.append((out, src))
    spans: dict[str, list[int]] = {}
    for i, s in enumerate(m.steps):
        vals = [v for v in s.inputs if v in m.storage] + ([] if s.output in boundary_outputs else [s.output])
        for v in vals:
            span = spans.setdefault(r(v), [i, i])
            span[0], span[1] = min(span[0], i), max(span[1], i)
    intervals = {v: Interval(v, m.storage[v].nbytes, a, b) for v, (a, b) in spans.items()}
    return intervals, {v: r(v) for v in m.storage}, in_place


def lower_bound(ivs: list[Interval], align: int) -> int:
    steps = max((iv.last for iv in ivs), default=-1) + 1
    live = [0] * steps
    for iv in ivs:
        for i in range(iv.first, iv.last + 1):
            live[i] += align_up(iv.nbytes, align)
    return max(live, default=0)


def _busy(placed: list[Placement], iv: Interval, align: int) -> list[tuple[int, int]]:
    return sorted((p.offset, p.offset + align_up(p.nbytes, align)) for p in placed
                  if not (p.last < iv.first or iv.last < p.first))


def place_greedy_by_size(ivs: list[Interval], align: int) -> list[Placement]:
    placed: list[Placement] = []
    for iv in sorted(ivs, key=lambda t: (-t.nbytes, t.first, t.value)):
        size, offset = align_up(iv.nbytes, align), 0
        for lo, hi in _busy(placed, iv, align):  # first gap that holds it
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append(Placement(iv.value, offset, iv.nbytes, iv.first, iv.last))
    return placed


def place_best_fit(ivs: list[Interval], align: int) -> list[Placement]:
    placed: list[Placement] = []
    for iv in sorted(ivs, key=lambda t: (-t.nbytes, t.first, t.value)):
        size, best, best_gap, cursor = align_up(iv.nbytes, align), None, None, 0
        busy = _busy(placed, iv, align)
        for lo, hi in busy:  # the smallest gap between live neighbours that holds it
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        placed.append(Placement(iv.value, best if best is not None else cursor, iv.nbytes, iv.first, iv.last))
    return placed


STRATEGIES = {"greedy_by_size": place_greedy_by_size, "best_fit_decreasing": place_best_fit}


def arena_size(placed: list[Placement], align: int) -> int:
    return max((p.offset + align_up(p.nbytes, align) for p in placed), default=0)


def plan_arena(m: LoweredModel, align: int = 128) -> MemoryPlan:
    ivs, roots, in_place = intervals(m)
    tried = {name: place(list(ivs.values()), align) for name, place in STRATEGIES.items()}
    sizes = {name: arena_size(p, align) for name, p in tried.items()}
    best = min(sizes, key=lambda n: (sizes[n], list(STRATEGIES).index(n)))
    naive = sum(align_up(st.nbytes, align) for v, st in m.storage.items()
                if v not in m.aliases and not v.endswith("@out"))
    return MemoryPlan(sizes[best], lower_bound(list(ivs.values()), align), naive, best,
                      {p.value: p for p in tried[best]}, sizes, in_place, align, roots)


def overlaps(plan: MemoryPlan) -> list[tuple[str, str]]:
    """Pairs of tensors alive at the same step whose bytes overlap (must be empty)."""
    ps, bad = list(plan.placements.values()), []
    for i, a in enumerate(ps):
        for b in ps[i + 1:]:
            if a.last < b.first or b.last < a.first:
                continue
            if a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                bad.append((a.value, b.value))
    return bad
