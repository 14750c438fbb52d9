"""Identical blocks costed once: a run of blocks (or loop items) with the same instructions is replayed only until
the core's timeline is in its steady state, and the rest of the run is added at once, with its multiplicity; a
stretch whose items repeat a pattern of P keys (an M tile's input rows over the image) goes the same way P items
at a time; and an item met again in the same situation gets its recorded effect instead of a replay (Memo).

Why this holds. An item's instructions act on the core's times (each pipe's free, done and wait times, the times
queued on its flags) only through max and + a non-negative cost, so replaying the same instructions again is a
max-plus map F of those times. When two replays in a row moved every time by the same delta (or left it where it
was: a pipe the run does not use), and the times left in place lie below every moving one, each further replay
moves them by delta again: the max that set each moving time was, at the second replay, attained by a moving
time (an unmoved one cannot reach a value that grew by delta), and moving times only grow, so the unmoved ones
never win a max again. Counters (instructions, bytes, busy cycles, MACs, GM bytes) grow by the same amounts per
replay. So the remaining r replays of the run add r * delta to every moving time and r times the increments to
every counter. The instructions themselves are the caller's promise: equal keys mean equal instructions.

Situations met again (Memo). What an item does depends only on its key, the lengths of the flag queues and the
times it reads (learnt once per key and queue lengths by a replay that tracks them); shifted by the latest of
those, it is the same map, so an effect recorded relative to that time is reused wherever the relative input
times match to 1/QUANTUM of a cycle (a max-plus map moves no output further than its inputs moved, so the match
bounds the error).

In floating point a replay's delta carries rounding noise (a few units in the last place of the times per
instruction), so the two deltas are compared within that noise (`_tolerance`), and the result differs from the
item-by-item replay only by rounding: tests hold both equal to rel 1e-9 (integers exactly), as the emulator is
held to the cost model. ReplayMode.every_block (or KILN_COST_EVERY_BLOCK=1) replays item by item: the reference.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence

ULP = 2.0 ** -52  # binary64's relative spacing: the rounding noise one addition can leave in a time


class _Snap:
    """A core's times and counters at an item boundary: queued flags by key and length, every time (free, done,
    wait per pipe, then the queued flag times), the integer counters and the busy cycles per pipe."""

    def __init__(self, core) -> None:
        pipes = tuple(core.free_at)
        self.pipes = pipes
        self.queues = tuple((k, len(q)) for k, q in sorted(core.flags.items()) if q)
        times = [core.free_at[p] for p in pipes] + [core.done_at[p] for p in pipes] + \
            [core.wait_until[p] for p in pipes]
        for k, _ in self.queues:
            times.extend(core.flags[k])
        self.times = times
        m = core.mem
        ints = [core.blocks, core.cube_macs, core.useful_macs, m.l2_hit_bytes, m.hbm_read_bytes, m.write_bytes]
        for p in pipes:
            c = core.count[p]
            ints += [c.instrs, c.bytes]
        self.ints = ints
        self.busy = [core.count[p].busy for p in pipes]


class _Steady:
    """One replay's effect in the steady state: delta on the moving times, the counters' increments."""

    def __init__(self, delta: float, moving: list[bool], ints: list[int], busy: list[float]) -> None:
        self.delta, self.moving, self.ints, self.busy = delta, moving, ints, busy


def _tolerance(values: list[float], instrs: int) -> float:
    """How far two replays' increments of `values` may differ by rounding alone: half an ulp of the largest value
    per addition, a few additions per instruction."""
    return (4 * instrs + 16) * ULP * max(1.0, max(map(abs, values), default=0.0))


def _steady(a: _Snap, b: _Snap, c: _Snap) -> _Steady | None:
    """The steady effect if the replays a -> b and b -> c did the same (module docstring), else None."""
    if not (a.queues == b.queues == c.queues):
        return None
    ints = [y - x for x, y in zip(b.ints, c.ints)]
    if ints != [y - x for x, y in zip(a.ints, b.ints)]:
        return None
    instrs = sum(ints[6::2])
    tol = _tolerance(c.busy, instrs)
    busy = [y - x for x, y in zip(b.busy, c.busy)]
    if any(abs(d - (y - x)) > tol for d, x, y in zip(busy, a.busy, b.busy)):
        return None
    tol = _tolerance(c.times, instrs)
    top = max(range(len(c.times)), key=c.times.__getitem__)
    delta = c.times[top] - b.times[top]
    if delta <= tol:
        return None
    moving = []
    for x, y, z in zip(a.times, b.times, c.times):
        if abs(z - y - delta) <= tol and abs(y - x - delta) <= tol:
            moving.append(True)
        elif x == y == z:
            moving.append(False)
        else:
            return None
    low = min((t for t, mv in zip(c.times, moving) if mv), default=0.0)
    if any(t > low for t, mv in zip(c.times, moving) if not mv):
        return None
    return _Steady(delta, moving, ints, busy)


def _jump(core, snap: _Snap, st: _Steady, r: int) -> None:
    """The core as after r more steady replays from `snap` (the core's state now)."""
    times = [t + r * st.delta if mv else t for t, mv in zip(snap.times, st.moving)]
    n = len(snap.pipes)
    for i, p in enumerate(snap.pipes):
        core.free_at[p], core.done_at[p], core.wait_until[p] = times[i], times[n + i], times[2 * n + i]
    at = 3 * n
    for k, length in snap.queues:
        core.flags[k] = deque(times[at:at + length])
        at += length
    ints = [x + r * d for x, d in zip(snap.ints, st.ints)]
    core.blocks, core.cube_macs, core.useful_macs = ints[0:3]
    core.mem.l2_hit_bytes, core.mem.hbm_read_bytes, core.mem.write_bytes = ints[3:6]
    for i, p in enumerate(snap.pipes):
        c = core.count[p]
        c.instrs, c.bytes = ints[6 + 2 * i], ints[7 + 2 * i]
        c.busy = snap.busy[i] + r * st.busy[i]


QUANTUM = 2.0 ** 20  # relative input times are matched to 2**-20 cycles (far above rounding noise, far below a cost)


class _TrackedTimes(dict):
    """A core's times of one kind (free_at, done_at, wait_until) noting which are read before this item writes
    them: the item's inputs."""

    def __init__(self, src: dict, name: str, reads: dict) -> None:
        super().__init__(src)
        self.name, self.reads = name, reads
        self.written: set[str] = set()

    def __getitem__(self, k):
        if k not in self.written:
            self.reads.setdefault((self.name, k))
        return dict.__getitem__(self, k)

    def __setitem__(self, k, v) -> None:
        self.written.add(k)
        dict.__setitem__(self, k, v)

    def values(self):  # a max over every pipe (barrier_all)
        for k in self:
            if k not in self.written:
                self.reads.setdefault((self.name, k))
        return dict.values(self)


class _TrackedQueue(deque):
    """A flag queue holding times queued before this item: its first pops read them (inputs)."""

    def __init__(self, src: deque, key: tuple, reads: dict) -> None:
        super().__init__(src)
        self.key, self.reads, self.inputs, self.pops = key, reads, len(src), 0

    def popleft(self):
        if self.pops < self.inputs:
            self.reads.setdefault(("flag", self.key, self.pops))
        self.pops += 1
        return deque.popleft(self)


_KINDS = ("free_at", "done_at", "wait_until")


class _Shape:
    """What the items of one key read (input times, in order) and write (times), and how many queued times they
    pop per flag queue, learnt from a tracked replay."""

    def __init__(self, reads: list[tuple], writes: list[tuple], pops: dict) -> None:
        self.reads, self.writes, self.pops = reads, writes, pops
        # each read as (kind index: free_at, done_at, wait_until or 3 = a flag queue, key, position in the queue)
        self.at = [(3, r[1], r[2]) if r[0] == "flag" else (_KINDS.index(r[0]), r[1], 0) for r in reads]

    def inputs(self, core) -> list[float]:
        times, flags = (core.free_at, core.done_at, core.wait_until), core.flags
        return [times[i][k] if i < 3 else flags[k][j] for i, k, j in self.at]


def _tracked(core, run: Callable[[], None]) -> _Shape:
    reads: dict = {}
    for k, q in list(core.flags.items()):
        if q:
            core.flags[k] = _TrackedQueue(q, k, reads)
    tracked = {name: _TrackedTimes(getattr(core, name), name, reads) for name in _KINDS}
    for name, t in tracked.items():
        setattr(core, name, t)
    run()
    writes = []
    for name, t in tracked.items():
        now = getattr(core, name)
        writes += [(name, k) for k in sorted(t.written if now is t else now)]  # barrier_all replaces wait_until
        setattr(core, name, dict(now))
    pops = {}
    for k, q in list(core.flags.items()):
        if isinstance(q, _TrackedQueue):
            pops[k] = min(q.pops, q.inputs)
            core.flags[k] = deque(q)
    return _Shape(list(reads), writes, pops)


class Memo:
    """Item effects by (key, flag queue lengths, input times relative to the latest), for one launch's cores (or
    one loop): an item met again in the same situation gets its recorded effect added, not replayed. Max-plus
    maps move no time further than their inputs moved, so matching inputs to QUANTUM bounds the error."""

    def __init__(self) -> None:
        self.shapes: dict[tuple, _Shape] = {}
        self.effects: dict[tuple, tuple] = {}

    def item(self, core, key: Hashable, run: Callable[[], None]) -> None:
        """run() (the item of `key`) on core, or its recorded effect."""
        queues = tuple((k, len(q)) for k, q in sorted(core.flags.items()) if q)
        shape = self.shapes.get((key, queues))
        if shape is None:
            before = _Snap(core)
            shape = _tracked(core, run)
            self.shapes[(key, queues)] = shape
            inputs = [_snap_read(before, r) for r in shape.reads]
        else:
            inputs = shape.inputs(core)
            before = None
        ref = max(inputs, default=0.0)
        rel = (key, queues, tuple([round((t - ref) * QUANTUM) for t in inputs]))
        if before is not None:
            self.effects[rel] = _effect(core, shape, queues, ref, before)
            return
        effect = self.effects.get(rel)
        if effect is not None:
            _apply(core, shape, effect, ref)
            return
        before = _Snap(core)
        run()
        self.effects[rel] = _effect(core, shape, queues, ref, before)


def _snap_read(before: _Snap, ident: tuple) -> float:
    """An input time's value before the item ran (from the snapshot taken then)."""
    if ident[0] == "flag":
        at = 3 * len(before.pipes)
        for k, length in before.queues:
            if k == ident[1]:
                return before.times[at + ident[2]]
            at += length
        raise KeyError(ident)
    return before.times[_KINDS.index(ident[0]) * len(before.pipes) + before.pipes.index(ident[1])]


def _effect(core, shape: _Shape, queues: tuple, ref: float, before: _Snap) -> tuple:
    """What the item just replayed did, relative to `ref`: its written times (per kind), per flag queue (queued
    times it popped, times it queued), its counters' increments (per pipe that changed)."""
    written = tuple(tuple((k, getattr(core, name)[k] - ref) for n, k in shape.writes if n == name) for name in _KINDS)
    had = dict(queues)
    flags = []
    for k, q in core.flags.items():
        popped = shape.pops.get(k, 0)
        kept = had.get(k, 0) - popped
        new = tuple(t - ref for t in list(q)[kept:])
        if popped or new:
            flags.append((k, popped, new))
    for k in had:
        if k not in core.flags:  # not expected: queues are never removed
            raise AssertionError(f"flag queue {k} removed by an item")
    after = _Snap(core)
    ints: list = [y - x for x, y in zip(before.ints[:6], after.ints[:6])]
    if not any(ints):
        ints = [None]
    busy = []
    for i, p in enumerate(after.pipes):
        d = (after.ints[6 + 2 * i] - before.ints[6 + 2 * i], after.ints[7 + 2 * i] - before.ints[7 + 2 * i],
             after.busy[i] - before.busy[i])
        if any(d):
            busy.append((p, *d))
    return written, tuple(flags), ints, tuple(busy)


def _apply(core, shape: _Shape, effect: tuple, ref: float) -> None:
    written, flags, ints, busy = effect
    for name, ts in zip(_KINDS, written):
        times = getattr(core, name)
        for k, t in ts:
            times[k] = ref + t
    for k, popped, new in flags:
        q = core.flags.get(k)
        if q is None:
            q = core.flags[k] = deque()
        for _ in range(popped):
            q.popleft()
        q.extend([ref + t for t in new])
    if ints[0] is not None:
        core.blocks += ints[0]
        core.cube_macs += ints[1]
        core.useful_macs += ints[2]
        m = core.mem
        m.l2_hit_bytes += ints[3]
        m.hbm_read_bytes += ints[4]
        m.write_bytes += ints[5]
    for p, instrs, nbytes, b in busy:
        c = core.count[p]
        c.instrs += instrs
        c.bytes += nbytes
        c.busy += b


MAX_PERIOD = 24  # longest repeating pattern of keys looked for (a tile pattern over the image's rows)


class _Runs:
    """runs(P)[j]: how many items from j on equal the item P before them (P = 1..top: a third of the items, at most
    MAX_PERIOD: a pattern must repeat three times to be used), each period's row counted when first asked for."""

    def __init__(self, keys: Sequence[Hashable]) -> None:
        ids: dict = {}
        self.seq = [ids.setdefault(k, len(ids)) for k in keys]
        self.top = min(MAX_PERIOD, len(self.seq) // 3)
        self.rows: dict[int, list[int]] = {}

    def __call__(self, period: int) -> list[int]:
        row = self.rows.get(period)
        if row is None:
            seq, n = self.seq, len(self.seq)
            row = self.rows[period] = [0] * (n + 1)
            for j in range(n - 1, period - 1, -1):
                if seq[j] == seq[j - period]:
                    row[j] = row[j + 1] + 1
        return row


def _stretch(runs: _Runs, i: int, n: int) -> tuple[int, int]:
    """(P, end): the shortest period P whose pattern repeats at least three times from item i, and where that
    repetition ends; (0, 0) if none does."""
    for period in range(1, min(runs.top, (n - i) // 3) + 1):
        r = runs(period)[i + period]
        if r >= 2 * period:
            return period, i + period + r
    return 0, 0


def steady_loop(core, keys: Sequence[Hashable], run_item: Callable[[int], None], every: bool = False,
                memo: Memo | None = None) -> None:
    """run_item(i) for i in range(len(keys)) on `core`, in order, where equal keys mean the same instructions. A
    stretch of items whose keys repeat with a period P (a run of equal keys: P = 1) is replayed P items at a time
    until two periods in a row did the same (module docstring), its remaining whole periods are then added at
    once; an item met before in the same situation gets its effect from `memo` (shared by the loops whose equal
    keys mean equal instructions: a launch's cores). every: replay every item (the reference)."""
    if every:
        for k in range(len(keys)):
            run_item(k)
        return
    memo = memo if memo is not None else Memo()

    def one(k: int) -> None:
        memo.item(core, keys[k], lambda: run_item(k))

    n, i = len(keys), 0
    runs = _Runs(keys) if n >= 3 else None
    while i < n:
        period, end = _stretch(runs, i, n) if runs is not None else (0, 0)
        if not period:
            one(i)
            i += 1
            continue
        snaps = [_Snap(core)]
        while end - i >= period:
            st = _steady(*snaps[-3:]) if len(snaps) >= 3 else None
            if st is not None:
                times = (end - i) // period
                _jump(core, snaps[-1], st, times)
                i += times * period
                break
            for k in range(i, i + period):
                one(k)
            i += period
            snaps = snaps[-2:] + [_Snap(core)]
