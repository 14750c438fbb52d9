"""Memory plan: every intermediate device tensor gets an offset in one arena.

Lifetimes run over the step order (a view extends the lifetime of the tensor
whose bytes it shares). Placement is greedy by size (largest first, lowest
offset that overlaps no tensor alive at the same time), which reached the
lower bound on ResNet-50, MobileNetV2 and BERT in shared/reference-figures.md.
The lower bound is the largest total size alive at one step.
"""
from __future__ import annotations

from dataclasses import dataclass

from .lowering import LoweredModel

ALIGN = 128  # bytes, as the seed articles' planner and the GM burst size


@dataclass
class Placement:
    value: str
    offset: int
    nbytes: int
    first: int  # step index that writes it
    last: int   # last step index that reads it


@dataclass
class MemoryPlan:
    arena_bytes: int
    lower_bound_bytes: int
    naive_bytes: int
    strategy: str
    placements: dict[str, Placement]


def _align(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


def lifetimes(m: LoweredModel) -> dict[str, tuple[int, int, int]]:
    """root value -> (bytes, first step, last step), for values that live in the arena."""
    out_values = {s.output for s in m.steps if s.kind == "glue" and s.glue.startswith("output")}
    life: dict[str, list[int]] = {}
    for i, s in enumerate(m.steps):
        for v in ([s.output] if s.output not in out_values else []) + [x for x in s.inputs if x in m.storage]:
            root = m.aliases.get(v, v)
            span = life.setdefault(root, [i, i])
            span[0], span[1] = min(span[0], i), max(span[1], i)
    return {v: (m.storage[v].nbytes, a, b) for v, (a, b) in life.items()}


def plan_arena(m: LoweredModel) -> MemoryPlan:
    life = lifetimes(m)
    steps = len(m.steps)
    live = [0] * steps
    for nbytes, a, b in life.values():
        for i in range(a, b + 1):
            live[i] += _align(nbytes)
    placed: list[Placement] = []
    for v, (nbytes, a, b) in sorted(life.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0])):
        size = _align(nbytes)
        busy = sorted((p.offset, p.offset + _align(p.nbytes)) for p in placed if not (p.last < a or b < p.first))
        offset = 0
        for lo, hi in busy:  # first gap large enough
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append(Placement(v, offset, nbytes, a, b))
    arena = max((p.offset + _align(p.nbytes) for p in placed), default=0)
    return MemoryPlan(arena, max(live, default=0), sum(_align(n) for n, _, _ in life.values()), "greedy_by_size",
                      {p.value: p for p in placed})
