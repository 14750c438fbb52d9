"""Identical blocks costed once: what a block (or a loop iteration) does to its core's timeline is replayed once
per distinct situation and reused, with every result bit for bit what replaying each block gives.

Why it is exact. A block's instructions act on the core's times (each pipe's free and wait times, the times queued
on each flag) only through max and + constant, so its effect F on the times it writes is a function of the times
it reads with F(x + s) = F(x) + s. Its instructions are fixed by its signature (what the family says they depend
on) and by the flag queues' lengths (which queued time a wait pops). So with r the latest time it reads, F(x) is
r + F(x - r): the first replay of a block records, under (signature, queue lengths, x - r), the times it writes
minus r, the flag times it pushes minus r and what it adds to the counters (instructions, bytes, busy cycles,
MACs; they do not depend on time); a later block with the same key gets them added to its own r. In binary64 this
holds bit for bit only where no operation rounds: a core takes the fast path only while every cost it is charged
is a multiple of GRID and every time and counter stays below LIMIT (such sums are exact), which ascend910b's
power-of-two rates satisfy; a cost off the grid (ascend310p's 17 B/cycle) makes that core replay every block.

Tests hold the result equal to the block-by-block replay (ReplayMode.every_block) for every family that passes a
signature.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence

from ..ir.profiles import Profile
from .model import PIPES, SimCore

GRID = 2.0 ** -12  # every admitted cost is a multiple of this ...
LIMIT = 2.0 ** 40  # ... and every value stays below this: then no float operation of the replay rounds
# SimCore attributes the fast path knows: times, counters, the rest constant. A core with any other attribute
# (state a later cost rule adds) replays every block, until that state is handled here.
_COUNTERS = ("blocks", "cube_macs", "useful_macs")
_KNOWN = frozenset(("free_at", "wait_until", "flags", "count", "p", "trace", "off_grid", *_COUNTERS))


class CheckedCore(SimCore):
    """A SimCore that notes whether any cost it was charged is off GRID (then no result of it is reused)."""

    def __init__(self, profile: Profile) -> None:
        super().__init__(profile)
        self.off_grid = False

    def issue(self, pipe: str, cycles: float, nbytes: int, instr: str = "") -> None:
        if cycles % GRID:
            self.off_grid = True
        SimCore.issue(self, pipe, cycles, nbytes, instr)


class _Reads:
    """The input times one tracked replay read, in order (a time written first and read later is not input)."""

    def __init__(self) -> None:
        self.ids: dict[tuple, None] = {}


class _TrackedTimes(dict):
    def __init__(self, src: dict, name: str, reads: _Reads) -> None:
        super().__init__(src)
        self.name, self.reads, self.written = name, reads, set()

    def __getitem__(self, k):
        if k not in self.written:
            self.reads.ids.setdefault((self.name, k))
        return dict.__getitem__(self, k)

    def __setitem__(self, k, v) -> None:
        self.written.add(k)
        dict.__setitem__(self, k, v)

    def values(self):  # max over every pipe (barrier_all, end_cycle)
        for k in self:
            if k not in self.written:
                self.reads.ids.setdefault((self.name, k))
        return dict.values(self)


class _TrackedQueue(deque):
    def __init__(self, src: deque, key: tuple, reads: _Reads) -> None:
        super().__init__(src)
        self.key, self.reads, self.inputs, self.pops = key, reads, len(src), 0

    def popleft(self):
        if self.pops < self.inputs:
            self.reads.ids.setdefault(("flag", self.key, self.pops))
        self.pops += 1
        return deque.popleft(self)


class _Snapshot:
    """The core's times before an item, to read the inputs a tracked replay turns out to need."""

    def __init__(self, core: SimCore) -> None:
        self.times = {"free_at": dict(core.free_at), "wait_until": dict(core.wait_until)}
        self.flags = {k: list(q) for k, q in core.flags.items()}

    def value(self, ident: tuple) -> float:
        return self.flags[ident[1]][ident[2]] if ident[0] == "flag" else self.times[ident[0]][ident[1]]


def _value(core: SimCore, ident: tuple) -> float:
    return core.flags[ident[1]][ident[2]] if ident[0] == "flag" else getattr(core, ident[0])[ident[1]]


def _counters(core: SimCore) -> list:
    vals: list = [getattr(core, name) for name in _COUNTERS]
    for p in PIPES:
        c = core.count[p]
        vals += [c.instrs, c.bytes, c.busy]
    return vals


def _set_counters(core: SimCore, vals: list) -> None:
    for name, v in zip(_COUNTERS, vals):
        setattr(core, name, v)
    for i, p in enumerate(PIPES):
        c = core.count[p]
        c.instrs, c.bytes, c.busy = vals[3 + 3 * i: 6 + 3 * i]


class _Shape:
    """What one (signature, queue lengths) reads and writes: input times read, times written, per flag queue
    how many queued inputs it pops."""

    def __init__(self, reads: list[tuple], writes: list[tuple], pops: dict[tuple, int]) -> None:
        self.reads, self.writes, self.pops = reads, writes, pops


class Memo:
    """Block effects by (key, queue lengths, reads relative to the latest); shared by the cores of one launch."""

    def __init__(self) -> None:
        self.shapes: dict[tuple, _Shape] = {}
        self.effects: dict[tuple, tuple] = {}


def _tracked_run(core: SimCore, run: Callable[[], None]) -> _Shape:
    """run() with the core's times tracked: which input times it read, which it wrote, what it popped."""
    reads = _Reads()
    queues = {k: _TrackedQueue(q, k, reads) for k, q in core.flags.items() if q}
    core.flags = dict(queues)
    free, wait = _TrackedTimes(core.free_at, "free_at", reads), _TrackedTimes(core.wait_until, "wait_until", reads)
    core.free_at, core.wait_until = free, wait
    run()
    writes = []
    for name, tracked in (("free_at", free), ("wait_until", wait)):
        now = getattr(core, name)
        keys = tracked.written if now is tracked else now.keys()  # barrier_all replaces wait_until whole
        writes += [(name, k) for k in sorted(keys)]
        setattr(core, name, dict(now))
    core.flags = {k: deque(q) for k, q in core.flags.items()}
    return _Shape(list(reads.ids), writes, {k: min(q.pops, q.inputs) for k, q in queues.items()})


def _qlens(core: SimCore) -> tuple:
    return tuple(sorted((k, len(q)) for k, q in core.flags.items() if q))


def _effect(core: SimCore, shape: _Shape, qlens: tuple, ref: float, counts0: list) -> tuple:
    """The effect of the item just replayed, relative to `ref`: written times, per queue (popped inputs, new
    times), counter increments."""
    written = tuple(_value(core, w) - ref for w in shape.writes)
    before = dict(qlens)
    queues = []
    for k, q in core.flags.items():
        popped = shape.pops.get(k, 0)
        kept = before.get(k, 0) - popped
        queues.append((k, popped, tuple(t - ref for t in list(q)[kept:])))
    for k in before:  # a queue emptied by this item
        if k not in core.flags:
            queues.append((k, before[k], ()))
    return written, tuple(queues), [b - a for a, b in zip(counts0, _counters(core))]


def _apply(core: SimCore, shape: _Shape, effect: tuple, ref: float) -> bool:
    """The recorded effect added at `ref`; False (nothing changed) if a value would reach LIMIT."""
    written, queues, steps = effect
    counts = [c + d for c, d in zip(_counters(core), steps)]
    if ref + max(written, default=0.0) >= LIMIT or any(abs(c) >= LIMIT for c in counts):
        return False
    for (name, k), t in zip(shape.writes, written):
        getattr(core, name)[k] = ref + t
    for k, popped, new in queues:
        q = core.flags.get(k)
        kept = list(q)[popped:] if q else []
        core.flags[k] = deque(kept + [ref + t for t in new])
    _set_counters(core, counts)
    return True


def steady_loop(core: SimCore, keys: Sequence[Hashable], run_item: Callable[[SimCore, int], None],
                memo: Memo | None = None) -> None:
    """run_item(core, i) for i in range(len(keys)), in order, where equal keys mean the same instructions; an item
    whose key, flag queue lengths and relative input times were seen before gets that effect added (module
    docstring). memo: shared between loops whose equal keys mean the same instructions (a launch's cores)."""
    if not isinstance(core, CheckedCore):
        for i in range(len(keys)):
            run_item(core, i)
        return
    memo = memo if memo is not None else Memo()
    for i, key in enumerate(keys):
        if core.off_grid or set(vars(core)) - _KNOWN:
            run_item(core, i)
            continue
        qlens = _qlens(core)
        shape = memo.shapes.get((key, qlens))
        if shape is None:  # first time: learn what it reads and writes, and record its effect
            counts0 = _counters(core)
            snap = _Snapshot(core)
            shape = memo.shapes[(key, qlens)] = _tracked_run(core, lambda i=i: run_item(core, i))
            inputs = [snap.value(r) for r in shape.reads]
            ref = max(inputs, default=0.0)
            if not core.off_grid and ref < LIMIT:
                memo.effects[(key, qlens, tuple(t - ref for t in inputs))] = _effect(core, shape, qlens, ref, counts0)
            continue
        inputs = [_value(core, r) for r in shape.reads]
        ref = max(inputs, default=0.0)
        rel = (key, qlens, tuple(t - ref for t in inputs))
        effect = memo.effects.get(rel)
        if effect is not None and ref < LIMIT and _apply(core, shape, effect, ref):
            continue
        counts0 = _counters(core)
        run_item(core, i)
        if not core.off_grid and ref < LIMIT:
            memo.effects[rel] = _effect(core, shape, qlens, ref, counts0)


def replay_blocks(core: SimCore, body: Callable[[SimCore, int], None], blocks: range,
                  signature: Callable[[int], Hashable], memo: Memo) -> None:
    """A launch's blocks on one core (body(core, b), then core.blocks += 1), identical situations costed once. A
    block's instructions depend on its signature and on whether it is the core's first."""
    bs = list(blocks)

    def run_item(c: SimCore, i: int) -> None:
        body(c, bs[i])
        c.blocks += 1

    steady_loop(core, [(i > 0, signature(b)) for i, b in enumerate(bs)], run_item, memo)
