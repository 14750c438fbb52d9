"""The Ascend pipe cost model: predicted cycles of a kernel variant, per pipe and in total.

The model replays a variant's instruction stream (what its template issues, block by block, on each AI
core) against the profile's per-instruction costs, with the same timing rules as the emulator
(kernels/kiln/core.hpp): each pipe runs its instructions in order, pipes overlap, set/wait flags
order them, a kernel ends when its slowest core does, and chained phases (Cube then Vector) add up.
It needs no data and no compiled code, so the codegen can rank variants before anything is built;
tests hold its per-pipe instruction and byte counts equal to the emulator's and its cycles to the
emulator's simulated cycles.

The memory system (docs/ascend-model.md section 12): a GM read is an L2 hit or a miss, as the build's L2
plan recorded for the step and operand (codegen/passes/l2.py; a kernel called on its own misses on every
read), and streams at the profile's hit or miss rate on its core; a launch ends no earlier than the chip's
HBM and L2 can carry all its cores' GM traffic (`chip_cycles`), where a launch's re-reads of its cold inputs are
L2 hits (`reused`: the first read of a byte brings it into L2).

Every kernel family has a replay; `predict` returns None for an unknown family.
"""
from __future__ import annotations

import os
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from math import ceil
from typing import NamedTuple

from ..ir.profiles import VEC_OPS, Profile
from .steady import Memo, steady_loop

PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
_VEC_INDEX = {op: i for i, op in enumerate(VEC_OPS)}
# Bumped whenever a cost rule or the meaning of a prediction changes: search-cache entries and tuning records
# made under another version are never reused (codegen/select/search_cache.py, codegen/select/tuning.py).
COST_MODEL_VERSION = "kiln-cost/5"
# GM sources of a read besides the kernel's inputs (0, 1, ...): its own output, read back in the same call, and a
# GM workspace it wrote itself. Both were just written by this kernel: hits whenever the call has an L2 plan.
OUT, WORKSPACE = -1, -2


@dataclass
class PipeCount:
    instrs: int = 0
    bytes: int = 0
    busy: float = 0.0


@dataclass
class MemCount:
    """A launch's GM traffic: reads served by L2, reads from HBM (L2 misses), writes (every write reaches HBM:
    charged to the launch that writes it, as a write-through would)."""
    l2_hit_bytes: int = 0
    hbm_read_bytes: int = 0
    write_bytes: int = 0

    def add(self, o: MemCount) -> None:
        self.l2_hit_bytes += o.l2_hit_bytes
        self.hbm_read_bytes += o.hbm_read_bytes
        self.write_bytes += o.write_bytes

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_read_bytes + self.write_bytes


def chip_cycles(profile: Profile, reads: float, writes: float, hits: float) -> tuple[float, float]:
    """(HBM, L2) cycles the chip needs for a launch's GM traffic: HBM reads alone, writes alone and both
    together each have a chip-wide rate; all traffic (hits, misses, writes) passes the L2. kiln::emu::chip_cycles."""
    p = profile
    hbm = 0.0
    if p.hbm_mixed_gbps:
        hbm = max(reads / p.chip_bpc(p.hbm_read_gbps), writes / p.chip_bpc(p.hbm_write_gbps),
                  (reads + writes) / p.chip_bpc(p.hbm_mixed_gbps))
    l2 = (hits + reads + writes) / p.chip_bpc(p.l2_gbps) if p.l2_gbps else 0.0
    return hbm, l2


def reread(reads: float, cold: int | None) -> float:
    """The bytes of a launch's missed reads that the chip serves from L2 all the same: the first read of a byte
    brings it into L2 and later reads of it in the same launch hit, whichever core reads it. A core does not know
    what the others read, so its own reads keep the step's plan (SimCore.hits); at the chip, the launch's reads of
    its cold inputs (`cold`: their total size) cost HBM only up to that size. This never counts a read of a byte not
    read before as a hit (reads beyond the size are re-reads) and equals the bytes read at least once when each
    cold input is read in full (weights). cold=None, a kernel called on its own: every read misses.
    kiln::emu::reuse_within_launch."""
    return 0.0 if cold is None else max(0.0, reads - cold)


def read_rate(first: float, hit: float, miss: float) -> float:
    """A core's GM read rate, B/cycle, when `first` of the bytes it reads are first reads (at the miss rate) and the
    rest re-reads of bytes a core brought into L2 earlier in the launch (at the hit rate), spread evenly over its
    reads: 0, an L2 hit; 1, every byte a miss. kiln::emu::read_rate."""
    if first <= 0.0:
        return hit
    if first >= 1.0:
        return miss
    return 1.0 / (first / miss + (1.0 - first) / hit)


def reused(mem: MemCount, cold: int | None) -> MemCount:
    """A launch's traffic as the chip serves it: its re-reads of cold inputs moved from HBM to L2 hits (reread)."""
    again = 0 if cold is None else max(0, mem.hbm_read_bytes - cold)
    return MemCount(mem.l2_hit_bytes + again, mem.hbm_read_bytes - again, mem.write_bytes)


def bounded(profile: Profile, core_cycles: float, mem: MemCount, scale: float = 1.0,
            cold: int | None = None) -> tuple[float, str]:
    """A launch's cycles, max(slowest core, the chip's HBM, its L2), and which of "cores", "HBM", "L2" set them.
    mem: its cores' traffic (each core's reads as the step's plan says); cold: its cold inputs' total size
    (reread). scale: the traffic of all cores over that of the replayed ones (sampled ranking replays)."""
    reads = mem.hbm_read_bytes * scale
    again = reread(reads, cold)
    hbm, l2 = chip_cycles(profile, reads - again, mem.write_bytes * scale, mem.l2_hit_bytes * scale + again)
    if core_cycles >= hbm and core_cycles >= l2:
        return core_cycles, "cores"
    return (hbm, "HBM") if hbm >= l2 else (l2, "L2")


@dataclass
class Prediction:
    """Predicted execution of one kernel call on the profile."""
    cycles: float
    pipes: dict[str, PipeCount]
    cube_macs: int = 0         # MACs on the 16x16x16 fractal grid
    useful_macs: int = 0       # m*n*k as asked
    cores: int = 0             # most cores any phase used
    phases: list[float] = field(default_factory=list)  # cycles of each chained launch
    mem: MemCount = field(default_factory=MemCount)  # GM traffic, all launches
    core_cycles: float = 0.0   # the slowest core of each launch, summed: the time without the chip's memory limit
    limits: list[str] = field(default_factory=list)  # per launch: "cores", "HBM" or "L2" (what set its cycles)

    def bound_unit(self) -> str:
        """What limits the kernel: "HBM" or "L2" where the chip's memory set most of its cycles, else the pipe with
        the most busy cycles per core."""
        by_limit: dict[str, float] = {}
        for c, lim in zip(self.phases, self.limits):
            by_limit[lim] = by_limit.get(lim, 0.0) + c
        top = max(by_limit, key=lambda k: by_limit[k]) if by_limit else "cores"
        return top if top != "cores" else max(self.pipes, key=lambda p: self.pipes[p].busy)

    def utilization(self, pipe: str, cores: int) -> float:
        """Busy share of `pipe` over `cores` cores for the whole kernel time."""
        return self.pipes[pipe].busy / (cores * self.cycles) if self.cycles else 0.0


def vec_body(profile: Profile, op: str, fp32: bool, times: int) -> float:
    """Cycles a Vector instruction of `times` repeats occupies the V pipe (Core::vec_cost): its cycles per repeat,
    and at least vec_min_cycles (a short instruction takes as long as three repeats, KPP-res)."""
    cpr = (profile.vec_cpr_f32 if fp32 else profile.vec_cpr_f16)[_VEC_INDEX[op]]
    return max(profile.vec_min_cycles, cpr * times)


class SimCore:
    """One AI core's timeline: the emulator's issue/flag rules, with costs from the profile."""

    def __init__(self, profile: Profile, l2: tuple[bool, ...] | None = None, first: tuple[float, ...] = (),
                 reads: Counter | None = None):
        self.p = profile
        self.l2 = l2  # per kernel input: an L2 hit? (the step's L2 plan; None: called alone, every read misses)
        self.first = first  # per kernel input: the share of the step's reads of it that are first reads
        self.reads = reads  # with a count pass (read_counts): bytes read per source
        self.mem = MemCount()
        self.free_at = dict.fromkeys(PIPES, 0.0)     # when the pipe takes its next instruction
        self.done_at = dict.fromkeys(PIPES, 0.0)     # when every result issued on the pipe is ready
        self.wait_until = dict.fromkeys(PIPES, 0.0)
        self.flags: dict[tuple[str, str, int], deque] = {}
        self.count = {p: PipeCount() for p in PIPES}
        self.blocks = 0
        self.cube_macs = 0
        self.useful_macs = 0
        self.trace: list | None = None  # set by record(): (pipe, instr, bytes, start, end) per instruction

    # ---- timeline
    def issue(self, pipe: str, head: float, body: float, nbytes: int, instr: str = "") -> None:
        """Core::issue: the instruction occupies the pipe for `body` cycles and its result is ready `head` cycles
        (the pipe's latency) later, so back-to-back instructions pay one head per burst and whatever waits on
        the pipe (a flag, a barrier, the core's end) sees the last one's."""
        start = max(self.free_at[pipe], self.wait_until[pipe])
        end = self.free_at[pipe] = start + body
        self.done_at[pipe] = max(self.done_at[pipe], end + head)
        if self.trace is not None:
            self.trace.append((pipe, instr, nbytes, start, end))
        c = self.count[pipe]
        c.instrs += 1
        c.bytes += nbytes
        c.busy += body

    def set_flag(self, src: str, dst: str, ev: int) -> None:
        self.flags.setdefault((src, dst, ev), deque()).append(self.done_at[src])

    def wait_flag(self, src: str, dst: str, ev: int) -> None:
        self.wait_until[dst] = max(self.wait_until[dst], self.flags[(src, dst, ev)].popleft())

    def end_cycle(self) -> float:
        return max(self.done_at.values())

    # ---- instructions (costs as in core.hpp)
    def first_share(self, src: int) -> float:
        """The share of first reads in a read of `src` (an input's index, OUT or WORKSPACE): 0 where it hits L2, else
        the input's first share (first_shares; 1 called on its own: every read misses). Core::gm_read."""
        if self.l2 is None:
            return 1.0
        if src < 0 or self.l2[src]:
            return 0.0
        return self.first[src] if self.first else 1.0

    def copy_gm(self, nburst: int, burst: int, esize: int, to: str, *, src: int) -> None:
        """GM -> L1/UB, reading operand `src`: at the L2 rate on a hit, the per-core HBM share on a miss."""
        if nburst == 0 or burst == 0:
            return
        nbytes = nburst * burst * esize
        p = self.p
        if self.reads is not None:
            self.reads[src] += nbytes
        first = self.first_share(src)
        if first > 0.0:
            self.mem.hbm_read_bytes += nbytes
        else:
            self.mem.l2_hit_bytes += nbytes
        rate = (read_rate(first, p.l2_to_l1_bpc, p.gm_to_l1_bpc) if to == "L1"
                else read_rate(first, p.l2_to_ub_bpc, p.gm_to_ub_bpc))
        copy = p.gm_to_l1_copy if to == "L1" else p.gm_to_ub_copy
        self.issue("MTE2", p.mte2_head, copy + nbytes / rate, nbytes,
                   "copy_gm_to_l1" if to == "L1" else "copy_gm_to_ub")

    def copy_ub_to_gm(self, nburst: int, burst: int, esize: int) -> None:
        if nburst == 0 or burst == 0:
            return
        nbytes = nburst * burst * esize
        self.mem.write_bytes += nbytes
        self.issue("MTE3", self.p.mte3_head, self.p.ub_to_gm_copy + nbytes / self.p.ub_to_gm_bpc, nbytes,
                   "copy_ub_to_gm")

    def load2d(self, repeat: int, to: str) -> None:
        if not repeat:
            return
        nbytes = repeat * 512
        rate = self.p.l1_to_l0a_bpc if to == "L0A" else self.p.l1_to_l0b_bpc
        self.issue("MTE1", self.p.mte1_head, self.p.mte1_issue + nbytes / rate, nbytes,
                   "load2d_to_l0a" if to == "L0A" else "load2d_to_l0b")

    def load3d(self, m1: int, k1: int, kh: int, stride_w: int) -> None:
        """img2col of m1 x k1 fractals for a kh-row kernel at stride_w (its rate: Profile.load3d_rate)."""
        nbytes = m1 * k1 * 512
        self.issue("MTE1", self.p.load3d_head, self.p.mte1_issue + nbytes / self.p.load3d_rate(kh, stride_w), nbytes,
                   "load3d_img2col")

    def load_bias_table(self, n: int) -> None:
        self.issue("MTE1", self.p.bt_head, self.p.bt_issue + n * 4.0 / self.p.l1_to_bt_bpc, n * 4, "load_bias_table")

    def mmad(self, m: int, n: int, k: int) -> None:
        # One 16x16x16 fractal per cycle for either 16-bit operand type: docs/ascend-model.md §2, "Per-cycle
        # block (dav-2201, AD-perf mmad): b16 16x16x16 (4096 MAC)", b16 covering fp16 and bf16 (line 28: "Types
        # (A2): ... f16·f16→f32, bf16·bf16→f32"; line 17: "Peak fp16/bf16" one figure). So KILN_DTYPE=bf16
        # kernels cost what their fp16 twins do, and emulator and cost model stay equal per instruction.
        fractals = ceil(m / 16) * ceil(n / 16) * ceil(k / 16)
        self.cube_macs += fractals * 4096
        self.useful_macs += m * n * k
        self.issue("M", self.p.mmad_head, self.p.mmad_issue + fractals, 0, "mmad")

    def _fixpipe(self, elems: int, fp32_out: bool, to_gm: bool, instr: str) -> None:
        """Core::fixpipe_cost: 16-bit or fp32 results at their rate; to GM at least fix_gm_min_cycles, on chip
        fix_local_issue more."""
        p = self.p
        move = elems / (p.fix_f32_elems_pc if fp32_out else p.fix_elems_pc)
        body = max(p.fix_gm_min_cycles, move) if to_gm else p.fix_local_issue + move
        self.issue("FIX", p.fix_head, body, elems * (4 if fp32_out else 2), instr)

    def fixpipe(self, elems: int, esize: int = 2) -> None:
        """L0C -> GM: fp16 out (esize 2) or fp32 out (esize 4); the writes of Core::fixpipe_nz_to_nd, _nd_f32,
        _nc1hwc0, _blocked_f32."""
        self.mem.write_bytes += elems * esize
        self._fixpipe(elems, esize == 4, True, "fixpipe")

    def fixpipe_to_l1(self, count: int) -> None:
        self._fixpipe(count, False, False, "fixpipe_nz_to_l1")

    def fixpipe_to_ub(self, count: int) -> None:
        self._fixpipe(count, True, False, "fixpipe_to_ub")

    def barrier_all(self) -> None:
        """Every pipe waits for every result (the drain of each pipe's latency); each then starts a new burst."""
        t = max(self.done_at.values())
        self.wait_until = dict.fromkeys(PIPES, t)

    def vec(self, op: str, fp32: bool, times: int) -> None:
        self.issue("V", self.p.vec_head, vec_body(self.p, op, fp32, times), times * 256,
                   (op + (".f32" if fp32 else ".f16")) if self.trace is not None else "")

    def scalar_read(self, esize: int = 4) -> None:
        self.issue("S", 0, 1, esize, "scalar_read")

    def vec_flat(self, n: int, lanes: int, ops: list[tuple[str, bool]]) -> None:
        """ops over n contiguous elements split as kiln::emu::vec_flat does (full repeats, a masked tail)."""
        done = 0
        while n - done >= lanes:
            reps = min(255, (n - done) // lanes)
            for op, fp32 in ops:
                self.vec(op, fp32, reps)
            done += reps * lanes
        if done < n:
            for op, fp32 in ops:
                self.vec(op, fp32, 1)


class PingPongSim:
    """kiln::emu::PingPong. fresh=False: the queue goes on from an earlier one on the same events (its free slots
    are the flags that one's consumer left set, none are set anew)."""

    def __init__(self, core: SimCore, producer: str, consumer: str, ev0: int, depth: int = 2, fresh: bool = True):
        self.c, self.prod, self.cons, self.ev0, self.depth = core, producer, consumer, ev0, depth
        for i in range(depth if fresh else 0):
            core.set_flag(consumer, producer, ev0 + i)

    def slot(self, it: int) -> int:
        return it % self.depth

    def acquire_for_write(self, s: int) -> None:
        self.c.wait_flag(self.cons, self.prod, self.ev0 + s)

    def written(self, s: int) -> None:
        self.c.set_flag(self.prod, self.cons, self.ev0 + s)

    def acquire_for_read(self, s: int) -> None:
        self.c.wait_flag(self.prod, self.cons, self.ev0 + s)

    def released(self, s: int) -> None:
        self.c.set_flag(self.cons, self.prod, self.ev0 + s)

    def drain(self) -> None:
        for i in range(self.depth):
            self.c.wait_flag(self.cons, self.prod, self.ev0 + i)


@dataclass(frozen=True)
class ReplayMode:
    """How launch() replays while a family's replay runs (set by run()/run_recorded() around that one call).
    sample: replay only the first core and the one with the last block (a ranking estimate). record: launch()
    appends (unit, cycles, {core: SimCore.trace}) to this list. l2: the cores' L2 hits (SimCore.l2). every_block:
    identical blocks are replayed one by one, not added once steady (cost/steady.py; the reference its tests and
    benchmarks/bench_plan.py compare with; KILN_COST_EVERY_BLOCK=1 makes it the default). bound: the cycles are
    a lower bound of what the same mode without it gives (launch_bound), the other fields are not filled."""

    def new_core(self, profile: Profile, tally: Counter | None = None) -> SimCore:
        """A core of a launch replayed in this mode: the step's L2 plan and first-read shares; tally: where a count
        pass adds its reads (the launch's, scaled to all its cores by _tally)."""
        return SimCore(profile, self.l2, self.first, tally)

    def tally(self) -> Counter | None:
        """A launch's own count of its reads, with a count pass."""
        return None if self.reads is None else Counter()

    @property
    def cold(self) -> int | None:
        """The total size of the step's cold inputs (reread); None without an L2 plan."""
        if self.l2 is None:
            return None
        if len(self.l2_bytes) != len(self.l2):
            raise ValueError(f"an L2 plan of {len(self.l2)} inputs needs their bytes, got {len(self.l2_bytes)}")
        return sum(n for hit, n in zip(self.l2, self.l2_bytes) if not hit)
    sample: bool = False
    record: list | None = None
    l2: tuple[bool, ...] | None = None  # the step's L2 plan: per kernel input, a hit? (None: every read misses)
    l2_bytes: tuple[int, ...] = ()  # with l2: each kernel input's bytes (what bounds the launch's HBM reads: reread)
    every_block: bool = False
    first: tuple[float, ...] = ()  # with l2: per kernel input, the share of the step's reads that are first reads
    reads: Counter | None = None  # a count pass (read_counts): the bytes read per source, all launches
    bound: bool = False  # a lower bound of the cycles only (launch_bound: what lets a ranking skip a replay)


# The default of every_block: KILN_COST_EVERY_BLOCK=1 replays every block (benchmarks/bench_plan.py --every-block
# times the planner that way; tests set this to compare the two).
EVERY_BLOCK = os.environ.get("KILN_COST_EVERY_BLOCK") == "1"


# A context variable, not module state: the mode belongs to the replay call that set it (threads and nested
# predictions each see their own), and it is reset when that call returns.
_MODE: ContextVar[ReplayMode] = ContextVar("kiln_replay_mode")


def current_mode() -> ReplayMode:
    """The replay mode launch() uses now (outside run()/run_recorded(): exact, nothing recorded)."""
    mode = _MODE.get(None)
    return mode if mode is not None else ReplayMode(every_block=EVERY_BLOCK)


@contextmanager
def _replaying(mode: ReplayMode) -> Iterator[None]:
    token = _MODE.set(mode)
    try:
        yield
    finally:
        _MODE.reset(token)


def launch(profile: Profile, unit: str, blocks: int, body,
           signature: Callable[[int], Hashable] | None = None) -> Prediction:
    """Blocks over the unit's cores as kiln::emu::launch does (block b on core b % cores). signature(b): what
    block b's instructions depend on besides whether it is its core's first (equal signatures, equal
    instructions); with it, a core's runs of identical blocks are costed once steady (cost/steady.py)."""
    cores = max(1, min(blocks, profile.cores_for(unit)))
    pipes = {p: PipeCount() for p in PIPES}
    cycles, macs, useful, replayed = 0.0, 0, 0, 0
    mem = MemCount()
    # Core 0 holds the most blocks; the core with the last block holds the tail: a quick estimate for ranking.
    mode = current_mode()
    if mode.bound and signature is not None:
        return launch_bound(profile, blocks, cores, body, signature)
    recording = mode.record
    traces: dict[int, list] | None = {} if recording is not None else None
    memo = Memo()  # block effects, shared by the launch's cores
    tally = mode.tally()
    for v in (sorted({0, (blocks - 1) % cores}) if mode.sample else range(cores)):
        core = mode.new_core(profile, tally)
        if traces is not None:
            core.trace = traces[v] = []
        _blocks(core, body, range(v, blocks, cores), signature, memo if traces is None and not mode.every_block
                else None)
        cycles = max(cycles, core.end_cycle())
        for p in PIPES:
            pipes[p].instrs += core.count[p].instrs
            pipes[p].bytes += core.count[p].bytes
            pipes[p].busy += core.count[p].busy
        macs += core.cube_macs
        useful += core.useful_macs
        mem.add(core.mem)
        replayed += core.blocks
    _tally(mode, tally, blocks, replayed)
    total, limit = bounded(profile, cycles, mem, max(1, blocks) / max(1, replayed), mode.cold)
    total += profile.launch_cycles  # kiln::emu::add_launch_overhead
    if recording is not None:
        recording.append((unit, total, traces))
    return Prediction(total, pipes, macs, useful, cores, [total], reused(mem, mode.cold), cycles, [limit])


class _BusyCore(SimCore):
    """A core that only counts (launch_bound): each instruction's body goes to its pipe's busy cycles, its GM bytes
    to the traffic; no timeline, so flags and barriers do nothing."""

    def issue(self, pipe: str, head: float, body: float, nbytes: int, instr: str = "") -> None:
        c = self.count[pipe]
        c.instrs += 1
        c.bytes += nbytes
        c.busy += body

    def set_flag(self, src: str, dst: str, ev: int) -> None:
        pass

    def wait_flag(self, src: str, dst: str, ev: int) -> None:
        pass

    def barrier_all(self) -> None:
        pass


def launch_bound(profile: Profile, blocks: int, cores: int, body, signature) -> Prediction:
    """A lower bound of launch()'s cycles in the current mode (its cores, sampled or all): a core ends no earlier
    than its busiest pipe has run all its instructions (a pipe runs one at a time), and the launch no earlier than
    the chip's memory allows (`bounded`, exact: bytes do not depend on timing). The busy cycles and GM bytes of a
    core's blocks are counted (_BusyCore) once per signature and whether the block is its core's first (what its
    instructions depend on: launch()) and added once with their multiplicity, so a bound costs a few blocks where
    the replay costs the cores' steady state."""
    mode = current_mode()
    seen: dict[tuple, tuple[list[float], MemCount, Counter]] = {}  # (first?, signature) -> busy per pipe, bytes

    def counted(first: bool, sig: Hashable, b: int) -> tuple[list[float], MemCount, Counter]:
        got = seen.get((first, sig))
        if got is None:
            reads: Counter = Counter()
            core = _BusyCore(profile, mode.l2, mode.first, reads)
            core.blocks = 0 if first else 1
            body(core, b)
            got = seen[(first, sig)] = ([core.count[p].busy for p in PIPES], core.mem, reads)
        return got

    cycles, replayed, mem = 0.0, 0, MemCount()
    tally = mode.tally()
    for v in (sorted({0, (blocks - 1) % cores}) if mode.sample else range(cores)):
        bs = range(v, blocks, cores)
        busy, first_mem, first_reads = counted(True, signature(v), v)
        busy = list(busy)
        mem.add(first_mem)
        if tally is not None:
            tally.update(first_reads)
        sigs = list(map(signature, bs[1:]))  # the later blocks by signature, each counted with its multiplicity
        for sig, n in Counter(sigs).items():
            got, m, r = counted(False, sig, bs[1 + sigs.index(sig)])
            busy = [x + n * y for x, y in zip(busy, got)]
            if tally is not None:
                for src, nbytes in r.items():
                    tally[src] += n * nbytes
            mem.l2_hit_bytes += n * m.l2_hit_bytes
            mem.hbm_read_bytes += n * m.hbm_read_bytes
            mem.write_bytes += n * m.write_bytes
        replayed += len(bs)
        cycles = max(cycles, max(busy))
    _tally(mode, tally, blocks, replayed)
    total, limit = bounded(profile, cycles, mem, max(1, blocks) / max(1, replayed), mode.cold)
    return Prediction(total + profile.launch_cycles, {p: PipeCount() for p in PIPES}, cores=cores,
                      phases=[total + profile.launch_cycles], mem=reused(mem, mode.cold), core_cycles=cycles,
                      limits=[limit])


def _tally(mode: ReplayMode, tally: Counter | None, blocks: int, replayed: int) -> None:
    """A launch's count of its reads added to the count pass's, scaled from the replayed blocks to all of them (a
    sampled count: an estimate for ranking; every block replayed: exact)."""
    if mode.reads is None or tally is None:
        return
    scale = max(1, blocks) / max(1, replayed)
    for src, n in tally.items():
        mode.reads[src] += n if scale == 1 else round(n * scale)


def _blocks(core: SimCore, body, bs: range, signature, memo: Memo | None) -> None:
    """body(core, b) for the core's blocks bs, core.blocks counting them; identical blocks costed once (with
    `memo`; None: block by block, as without a signature)."""
    def item(i: int) -> None:
        body(core, bs[i])
        core.blocks += 1

    if signature is None or memo is None:
        for i in range(len(bs)):
            item(i)
        return
    steady_loop(core, [(i > 0, signature(b)) for i, b in enumerate(bs)], item, memo=memo)


class CrossFlagSim:
    """kiln::emu::CrossFlag: a flag between two cores' timelines (no latency when both are one core)."""

    def __init__(self, same_core: bool, profile: Profile):
        self.latency = 0.0 if same_core else profile.cross_core_cycles
        self.times: deque = deque()

    def set(self, core: SimCore, src: str) -> None:
        self.times.append(core.done_at[src] + self.latency)

    def wait(self, core: SimCore, dst: str) -> None:
        core.wait_until[dst] = max(core.wait_until[dst], self.times.popleft())


def launch_group(profile: Profile, blocks: int, body) -> Prediction:
    """kiln::emu::launch_group: block b on core group b % groups, an AIC and its two AIVs (one core if coupled);
    body(aic, aiv0, aiv1, block)."""
    groups = max(1, min(blocks, profile.cube_cores))
    pipes = {p: PipeCount() for p in PIPES}
    cycles, macs, useful, replayed = 0.0, 0, 0, 0
    mem = MemCount()
    mode = current_mode()
    recording = mode.record
    traces: dict[int, list] | None = {} if recording is not None else None
    tally = mode.tally()
    for v in (sorted({0, (blocks - 1) % groups}) if mode.sample else range(groups)):
        aic = mode.new_core(profile, tally)
        aivs = [aic, aic] if profile.coupled else [mode.new_core(profile, tally), mode.new_core(profile, tally)]
        if traces is not None:
            aic.trace = traces[v] = []
            if not profile.coupled:
                aivs[0].trace, aivs[1].trace = traces[groups + 2 * v], traces[groups + 2 * v + 1] = [], []
        for b in range(v, blocks, groups):
            body(aic, aivs[0], aivs[1], b)
            aic.blocks += 1
        for core in ([aic] if profile.coupled else [aic] + aivs):
            cycles = max(cycles, core.end_cycle())
            for p in PIPES:
                pipes[p].instrs += core.count[p].instrs
                pipes[p].bytes += core.count[p].bytes
                pipes[p].busy += core.count[p].busy
            macs += core.cube_macs
            useful += core.useful_macs
            mem.add(core.mem)
        replayed += aic.blocks
    _tally(mode, tally, blocks, replayed)
    total, limit = bounded(profile, cycles, mem, max(1, blocks) / max(1, replayed), mode.cold)
    total += profile.launch_cycles + (0.0 if profile.coupled else profile.mixed_launch_cycles)
    if recording is not None:
        recording.append(("cube", total, traces))
    return Prediction(total, pipes, macs, useful, groups if profile.coupled else 3 * groups, [total],
                      reused(mem, mode.cold), cycles, [limit])


def then(*phases: Prediction) -> Prediction:
    """Launches that run one after another: cycles add up, counters are summed."""
    pipes = {p: PipeCount(sum(ph.pipes[p].instrs for ph in phases), sum(ph.pipes[p].bytes for ph in phases),
                          sum(ph.pipes[p].busy for ph in phases)) for p in PIPES}
    mem = MemCount()
    for ph in phases:
        mem.add(ph.mem)
    return Prediction(sum(ph.cycles for ph in phases), pipes, sum(ph.cube_macs for ph in phases),
                      sum(ph.useful_macs for ph in phases), max(ph.cores for ph in phases),
                      [c for ph in phases for c in ph.phases], mem, sum(ph.core_cycles for ph in phases),
                      [lim for ph in phases for lim in ph.limits])


class L2Plan(NamedTuple):
    """A model step's L2 plan as a replay takes it: per kernel input, a hit? (codegen/passes/l2.py) and its bytes."""
    hits: tuple[bool, ...]
    sizes: tuple[int, ...]


_READS: dict[tuple, Counter] = {}


def read_counts(replay, spec, params: dict, profile: Profile, sample: bool = False) -> Counter:
    """The bytes the kernel's cores read from each source (an input's index, OUT, WORKSPACE) over all its
    launches: a count pass (bytes do not depend on timing), cached per kernel and tiling. sample=True counts the
    two cores a sampled replay replays, scaled to all blocks: the estimate its ranking uses (cheaper at batch 32)."""
    key = (replay, repr(spec), repr(sorted(params.items())), repr(profile), sample)
    got = _READS.get(key)
    if got is None:
        if len(_READS) > 4096:
            _READS.clear()
        got = Counter()
        with _replaying(ReplayMode(bound=True, sample=sample, reads=got)):
            replay(spec, params, profile)
        _READS[key] = got
    return got


def first_shares(l2: L2Plan, reads: Counter) -> tuple[float, ...]:
    """Per kernel input, the share of the step's reads of it that are first reads: its size over the bytes read
    (1 where it hits L2 or is read at most once)."""
    return tuple(1.0 if hit or reads[i] <= size else size / reads[i]
                 for i, (hit, size) in enumerate(zip(l2.hits, l2.sizes)))


def _shares(replay, spec, params: dict, profile: Profile, l2: L2Plan | None, sample: bool) -> tuple[float, ...]:
    """The first-read shares of a replay with L2 plan `l2` (none without one; sampled with a sampled replay)."""
    return () if l2 is None else first_shares(l2, read_counts(replay, spec, params, profile, sample))


def _mode(sample: bool, l2: L2Plan | None, every_block: bool, bound: bool = False,
          first: tuple[float, ...] = ()) -> ReplayMode:
    return ReplayMode(sample=sample, l2=None if l2 is None else l2.hits, l2_bytes=() if l2 is None else l2.sizes,
                      first=first, every_block=every_block, bound=bound)


def run(replay, spec, params: dict, profile: Profile, sample: bool = False,
        l2: L2Plan | None = None, every_block: bool | None = None) -> Prediction:
    """One family's replay (codegen/families/) of `params` for `spec`. sample=True replays two cores per launch:
    cycles for ranking candidates, not per-pipe totals. l2: the step's L2 plan (None: called alone, every read
    misses). every_block: replay identical blocks one by one (None: EVERY_BLOCK)."""
    mode = _mode(sample, l2, EVERY_BLOCK if every_block is None else every_block,
                 first=_shares(replay, spec, params, profile, l2, sample))
    with _replaying(mode):
        return replay(spec, params, profile)


def run_bound(replay, spec, params: dict, profile: Profile, sample: bool = False,
              l2: L2Plan | None = None) -> float:
    """A lower bound of run(replay, spec, params, profile, sample, l2).cycles (ReplayMode.bound: launch_bound), far
    cheaper where blocks repeat: what lets a ranking pass over a candidate without replaying it."""
    first = _shares(replay, spec, params, profile, l2, sample)
    with _replaying(_mode(sample, l2, EVERY_BLOCK, bound=True, first=first)):
        return replay(spec, params, profile).cycles


def run_recorded(replay, spec, params: dict, profile: Profile) -> tuple[Prediction, list]:
    """run() with every instruction recorded: (prediction, launches), each launch (unit, cycles, {core: trace})."""
    launches: list = []
    with _replaying(ReplayMode(record=launches, every_block=True)):
        return replay(spec, params, profile), launches
