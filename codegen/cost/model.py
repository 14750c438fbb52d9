"""The Ascend pipe cost model: predicted cycles of a kernel variant, per pipe and in total.

The model replays a variant's instruction stream (what its template issues, block by block, on each AI
core) against the profile's per-instruction costs, with the same timing rules as the emulator
(kernels/kiln/core.hpp): each pipe runs its instructions in order, pipes overlap, set/wait flags
order them, a kernel ends when its slowest core does, and chained phases (Cube then Vector) add up.
It needs no data and no compiled code, so the codegen can rank variants before anything is built;
tests hold its per-pipe instruction and byte counts equal to the emulator's and its cycles to the
emulator's simulated cycles.

Every kernel family has a replay; `predict` returns None for an unknown family.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from math import ceil

from ..ir.opspec import Conv2dSpec, c1
from ..ir.profiles import VEC_OPS, Profile

PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
_VEC_INDEX = {op: i for i, op in enumerate(VEC_OPS)}


@dataclass
class PipeCount:
    instrs: int = 0
    bytes: int = 0
    busy: float = 0.0


@dataclass
class Prediction:
    """Predicted execution of one kernel call on the profile."""
    cycles: float
    pipes: dict[str, PipeCount]
    cube_macs: int = 0         # MACs on the 16x16x16 fractal grid
    useful_macs: int = 0       # m*n*k as asked
    cores: int = 0             # most cores any phase used
    phases: list[float] = field(default_factory=list)  # cycles of each chained launch

    def bound_unit(self) -> str:
        """The pipe with the most busy cycles per core: what limits the kernel."""
        return max(self.pipes, key=lambda p: self.pipes[p].busy)

    def utilization(self, pipe: str, cores: int) -> float:
        """Busy share of `pipe` over `cores` cores for the whole kernel time."""
        return self.pipes[pipe].busy / (cores * self.cycles) if self.cycles else 0.0


class SimCore:
    """One AI core's timeline: the emulator's issue/flag rules, with costs from the profile."""

    def __init__(self, profile: Profile):
        self.p = profile
        self.free_at = dict.fromkeys(PIPES, 0.0)
        self.wait_until = dict.fromkeys(PIPES, 0.0)
        self.flags: dict[tuple[str, str, int], deque] = {}
        self.count = {p: PipeCount() for p in PIPES}
        self.blocks = 0
        self.cube_macs = 0
        self.useful_macs = 0
        self.trace: list | None = None  # set by record(): (pipe, instr, bytes, start, end) per instruction

    # ---- timeline
    def issue(self, pipe: str, cycles: float, nbytes: int, instr: str = "") -> None:
        start = max(self.free_at[pipe], self.wait_until[pipe])
        self.free_at[pipe] = start + cycles
        if self.trace is not None:
            self.trace.append((pipe, instr, nbytes, start, start + cycles))
        c = self.count[pipe]
        c.instrs += 1
        c.bytes += nbytes
        c.busy += cycles

    def set_flag(self, src: str, dst: str, ev: int) -> None:
        self.flags.setdefault((src, dst, ev), deque()).append(self.free_at[src])

    def wait_flag(self, src: str, dst: str, ev: int) -> None:
        self.wait_until[dst] = max(self.wait_until[dst], self.flags[(src, dst, ev)].popleft())

    def end_cycle(self) -> float:
        return max(self.free_at.values())

    # ---- instructions (costs as in core.hpp)
    def copy_gm(self, nburst: int, burst: int, esize: int, to: str) -> None:
        if nburst == 0 or burst == 0:
            return
        nbytes = nburst * burst * esize
        rate = self.p.gm_to_l1_bpc if to == "L1" else self.p.gm_to_ub_bpc
        self.issue("MTE2", self.p.mte2_head + nbytes / rate, nbytes, "copy_gm_to_l1" if to == "L1" else "copy_gm_to_ub")

    def copy_ub_to_gm(self, nburst: int, burst: int, esize: int) -> None:
        if nburst == 0 or burst == 0:
            return
        nbytes = nburst * burst * esize
        self.issue("MTE3", self.p.mte3_head + nbytes / self.p.ub_to_gm_bpc, nbytes, "copy_ub_to_gm")

    def load2d(self, repeat: int, to: str) -> None:
        if not repeat:
            return
        nbytes = repeat * 512
        rate = self.p.l1_to_l0a_bpc if to == "L0A" else self.p.l1_to_l0b_bpc
        self.issue("MTE1", self.p.mte1_head + nbytes / rate, nbytes,
                   "load2d_to_l0a" if to == "L0A" else "load2d_to_l0b")

    def load3d(self, m1: int, k1: int) -> None:
        nbytes = m1 * k1 * 512
        self.issue("MTE1", self.p.load3d_head + nbytes / self.p.load3d_bpc, nbytes, "load3d_img2col")

    def load_bias_table(self, n: int) -> None:
        self.issue("MTE1", self.p.bt_head + n * 4.0 / self.p.l1_to_bt_bpc, n * 4, "load_bias_table")

    def mmad(self, m: int, n: int, k: int) -> None:
        # One 16x16x16 fractal per cycle for either 16-bit operand type: ascend-model.md §2 (line 29), "Per-cycle
        # block (dav-2201, AD-perf mmad): b16 16x16x16 (4096 MAC)", b16 covering fp16 and bf16 (line 28: "Types
        # (A2): ... f16·f16→f32, bf16·bf16→f32"; line 17: "Peak fp16/bf16" one figure). So KILN_DTYPE=bf16
        # kernels cost what their fp16 twins do, and emulator and cost model stay equal per instruction.
        fractals = ceil(m / 16) * ceil(n / 16) * ceil(k / 16)
        self.cube_macs += fractals * 4096
        self.useful_macs += m * n * k
        self.issue("M", self.p.mmad_head + fractals, 0, "mmad")

    def fixpipe(self, elems: int, esize: int = 2) -> None:
        self.issue("FIX", self.p.fix_head + elems / self.p.fix_elems_pc, elems * esize, "fixpipe")

    def fixpipe_to_l1(self, count: int) -> None:
        self.issue("FIX", self.p.fix_head + count / self.p.fix_elems_pc, count * 2, "fixpipe_nz_to_l1")

    def fixpipe_to_ub(self, count: int) -> None:
        self.issue("FIX", self.p.fix_head + count / self.p.fix_elems_pc, count * 4, "fixpipe_to_ub")

    def barrier_all(self) -> None:
        t = max(self.free_at.values())
        self.wait_until = dict.fromkeys(PIPES, t)

    def vec(self, op: str, fp32: bool, times: int) -> None:
        cpr = (self.p.vec_cpr_f32 if fp32 else self.p.vec_cpr_f16)[_VEC_INDEX[op]]
        self.issue("V", self.p.vec_head + cpr * times, times * 256,
                   (op + (".f32" if fp32 else ".f16")) if self.trace is not None else "")

    def scalar_read(self, esize: int = 4) -> None:
        self.issue("S", 1, esize, "scalar_read")

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
    def __init__(self, core: SimCore, producer: str, consumer: str, ev0: int, depth: int = 2):
        self.c, self.prod, self.cons, self.ev0, self.depth = core, producer, consumer, ev0, depth
        for i in range(depth):
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


_SAMPLE = False  # set by predict(sample=True): replay only the first core and the one with the last block
_RECORD: list | None = None  # set by record(): launch() appends (unit, cycles, {core: SimCore.trace})


def launch(profile: Profile, unit: str, blocks: int, body) -> Prediction:
    """Blocks over the unit's cores as kiln::emu::launch does (block b on core b % cores)."""
    cores = max(1, min(blocks, profile.cores_for(unit)))
    pipes = {p: PipeCount() for p in PIPES}
    cycles, macs, useful = 0.0, 0, 0
    # Core 0 holds the most blocks; the core with the last block holds the tail: a quick estimate for ranking.
    traces = {} if _RECORD is not None else None
    for v in (sorted({0, (blocks - 1) % cores}) if _SAMPLE else range(cores)):
        core = SimCore(profile)
        if traces is not None:
            core.trace = traces[v] = []
        for b in range(v, blocks, cores):
            body(core, b)
            core.blocks += 1
        cycles = max(cycles, core.end_cycle())
        for p in PIPES:
            pipes[p].instrs += core.count[p].instrs
            pipes[p].bytes += core.count[p].bytes
            pipes[p].busy += core.count[p].busy
        macs += core.cube_macs
        useful += core.useful_macs
    if traces is not None:
        _RECORD.append((unit, cycles, traces))
    return Prediction(cycles, pipes, macs, useful, cores, [cycles])


CROSS_CORE_CYCLES = 100  # kiln::emu::kCrossCoreCycles (kernels/kiln/ops.hpp)


class CrossFlagSim:
    """kiln::emu::CrossFlag: a flag between two cores' timelines (no latency when both are one core)."""

    def __init__(self, same_core: bool):
        self.latency = 0.0 if same_core else CROSS_CORE_CYCLES
        self.times: deque = deque()

    def set(self, core: SimCore, src: str) -> None:
        self.times.append(core.free_at[src] + self.latency)

    def wait(self, core: SimCore, dst: str) -> None:
        core.wait_until[dst] = max(core.wait_until[dst], self.times.popleft())


def launch_group(profile: Profile, blocks: int, body) -> Prediction:
    """kiln::emu::launch_group: block b on core group b % groups, an AIC and its two AIVs (one core if coupled);
    body(aic, aiv0, aiv1, block)."""
    groups = max(1, min(blocks, profile.cube_cores))
    pipes = {p: PipeCount() for p in PIPES}
    cycles, macs, useful = 0.0, 0, 0
    traces = {} if _RECORD is not None else None
    for v in (sorted({0, (blocks - 1) % groups}) if _SAMPLE else range(groups)):
        aic = SimCore(profile)
        aivs = [aic, aic] if profile.coupled else [SimCore(profile), SimCore(profile)]
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
    if traces is not None:
        _RECORD.append(("cube", cycles, traces))
    return Prediction(cycles, pipes, macs, useful, groups if profile.coupled else 3 * groups, [cycles])


def then(*phases: Prediction) -> Prediction:
    """Launches that run one after another: cycles add up, counters are summed."""
    pipes = {p: PipeCount(sum(ph.pipes[p].instrs for ph in phases), sum(ph.pipes[p].bytes for ph in phases),
                          sum(ph.pipes[p].busy for ph in phases)) for p in PIPES}
    return Prediction(sum(ph.cycles for ph in phases), pipes, sum(ph.cube_macs for ph in phases),
                      sum(ph.useful_macs for ph in phases), max(ph.cores for ph in phases),
                      [c for ph in phases for c in ph.phases])


# ---------------------------------------------------------------- conv2d_cube_img2col

def _on_chip_epilogue(core: SimCore, spec: Conv2dSpec, m: int, n1_cnt: int) -> None:
    """The coupled-profile epilogue of conv2d_cube_img2col: per channel block L0C -> UB, residual add and
    activation on the same core's Vector unit, one fp16 rounding, UB -> GM."""
    n = m * 16
    act = [("Maxs", True), ("Mins", True)] if spec.clip_hi > 0 else [("Relu", True)] if spec.relu else []
    core.set_flag("M", "FIX", 0)
    core.wait_flag("M", "FIX", 0)
    for j in range(n1_cnt):
        if j > 0:
            core.wait_flag("MTE3", "FIX", 2)
        core.fixpipe_to_ub(ceil(m / 16) * 256)
        if spec.residual:
            if j > 0:
                core.wait_flag("V", "MTE2", 2)
            core.copy_gm(1, n, 2, "UB")
        core.set_flag("FIX", "V", 1)
        core.wait_flag("FIX", "V", 1)
        if spec.residual:
            core.set_flag("MTE2", "V", 1)
            core.wait_flag("MTE2", "V", 1)
            core.vec_flat(n, 64, [("Cast", True), ("Add", True)])
            core.set_flag("V", "MTE2", 2)
        core.vec_flat(n, 64, act + [("Cast", True)])
        core.set_flag("V", "MTE3", 1)
        core.wait_flag("V", "MTE3", 1)
        core.copy_ub_to_gm(1, n, 2)
        core.set_flag("MTE3", "FIX", 2)
    core.wait_flag("MTE3", "FIX", 2)
    if spec.residual:
        core.wait_flag("V", "MTE2", 2)
    core.set_flag("FIX", "M", 0)


def _conv_img2col(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    from ..select.tiling import conv_tile_rows  # tiling imports this module
    bm, bn, bk1, step = params["base_m"], params.get("base_n", 16), params["base_k1"], params["c1_step"]
    C1, CO1, taps = c1(spec.cin), c1(spec.cout), spec.kh * spec.kw
    M = spec.ho * spec.wo
    tiles = conv_tile_rows(spec, bm)
    m_tiles, n_tiles = len(tiles), ceil(CO1 * 16 / bn)
    second = spec.second() if spec.cin2 else None
    tiles2 = conv_tile_rows(second, bm) if second else []

    def block(core: SimCore, b: int) -> None:
        ni, mi = b % n_tiles, (b // n_tiles) % m_tiles
        _, m, _, rows = tiles[mi]
        m1 = ceil(m / 16)
        n1_cnt = min(bn // 16, CO1 - ni * (bn // 16))
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        if spec.bias:
            core.copy_gm(1, n1_cnt * 16, 4, "L1")
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(n1_cnt * 16)
        chunks = []
        for c1a in range(0, C1, step):
            c1n = min(step, C1 - c1a)
            chunks.append((c1n * taps, ([(c1n, rows * spec.w * 16)] if rows > 0 else []) + [(c1n * taps, n1_cnt * 256)]))
        if second:  # the second source's channel blocks go on into the same L0C (1x1: one tap)
            rows2 = tiles2[mi][3]
            for c1a in range(0, c1(second.cin), step):
                c1n = min(step, c1(second.cin) - c1a)
                chunks.append((c1n, ([(c1n, rows2 * second.w * 16)] if rows2 > 0 else []) + [(c1n, n1_cnt * 256)]))
        _cube_k_loop(core, m, n1_cnt * 16, chunks, bk1, lambda kc: core.load3d(m1, kc), lambda kc, k1n: [kc * n1_cnt],
                     params.get("l1_buffers", 2))
        if params.get("on_chip"):
            _on_chip_epilogue(core, spec, m, n1_cnt)
        else:
            _cube_drain(core, m * n1_cnt * 16)

    n_split = params.get("n_split", 1)

    def chain_block(core: SimCore, b: int) -> None:  # the template's chain_block
        ns = b % n_split
        _, m, _, rows = tiles[(b // n_split) % m_tiles]
        m1, mid1 = ceil(m / 16), c1(spec.mid)
        later = core.blocks > 0
        if later:
            core.wait_flag("FIX", "M", 0)
        if spec.mid_bias:
            core.copy_gm(1, mid1 * 16, 4, "L1")
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(mid1 * 16)
        chunks = []
        for c1a in range(0, C1, step):
            c1n = min(step, C1 - c1a)
            chunks.append((c1n * taps, ([(c1n, rows * spec.w * 16)] if rows > 0 else []) + [(c1n * taps, mid1 * 256)]))
        _cube_k_loop(core, m, mid1 * 16, chunks, bk1, lambda kc: core.load3d(m1, kc), lambda kc, k1n: [kc * mid1])
        core.set_flag("M", "FIX", 0)
        core.wait_flag("M", "FIX", 0)
        if later:
            core.wait_flag("MTE1", "FIX", 3)
        core.fixpipe_to_l1(mid1 * m1 * 256)
        core.set_flag("FIX", "MTE1", 3)
        core.wait_flag("FIX", "MTE1", 3)
        bn2, bk2 = params["base_n2"], params["base_k2"]
        n_chunks = ceil(CO1 / (bn2 // 16))
        j0, j1 = n_chunks * ns // n_split, n_chunks * (ns + 1) // n_split
        for j in range(j0, j1):
            n1_0 = j * (bn2 // 16)
            n1_cnt = min(bn2 // 16, CO1 - n1_0)
            if j > j0:
                core.wait_flag("FIX", "M", 0)
            if spec.bias:
                core.copy_gm(1, n1_cnt * 16, 4, "L1")
                core.set_flag("MTE2", "MTE1", 4)
                core.wait_flag("MTE2", "MTE1", 4)
                core.load_bias_table(n1_cnt * 16)
            _cube_k_loop(core, m, n1_cnt * 16, [(mid1, [(mid1, n1_cnt * 256)])], bk2, _rows_load2d(core, m),
                         lambda kc, k1n: [kc * n1_cnt])
            _cube_drain(core, m * n1_cnt * 16)
        core.set_flag("MTE1", "FIX", 3)

    if spec.mid:
        cube = launch(profile, "cube", spec.n * m_tiles * n_split, chain_block)
    else:
        cube = launch(profile, "cube", spec.n * m_tiles * n_tiles, block)
    if not spec.vector_epilogue or params.get("on_chip"):
        return cube
    numel = spec.n * CO1 * M * 16
    tile = params["epi_tile"]
    ntiles = ceil(numel / tile)
    vblocks = min(ntiles, profile.cores_for("vector"))
    per_elem = ([("Add", False)] if spec.residual else []) + (
        [("Maxs", False), ("Mins", False)] if spec.clip_hi > 0 else
        [("Relu", False)] if spec.relu else [] if spec.residual else [("Copy", False)])

    def epilogue(core: SimCore, b: int) -> None:
        t0, t1 = ntiles * b // vblocks, ntiles * (b + 1) // vblocks
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            n = min(tile, numel - t * tile)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            core.copy_gm(1, n, 2, "UB")
            if spec.residual:
                core.copy_gm(1, n, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            core.vec_flat(n, 128, per_elem)
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(1, n, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return then(cube, launch(profile, "vector", vblocks, epilogue))


# ---------------------------------------------------------------- conv2d_winograd

def _program_ops(terms: list[tuple[int, list[tuple[int, float]]]]) -> list[list[tuple[str, bool]]]:
    """Per program term, the fp32 Vector ops the template's run_program issues for it."""
    ops = []
    for _, row in terms:
        for i, (_, coef) in enumerate(row):
            if i == 0:
                ops.append([("Copy" if coef == 1.0 else "Muls", True)])
            elif coef in (1.0, -1.0):
                ops.append([("Add" if coef == 1.0 else "Sub", True)])
            else:
                ops.append([("Muls", True), ("Add", True)])
    return ops


def _run_program(core: SimCore, ops: list[list[tuple[str, bool]]], length: int) -> None:
    for term_ops in ops:  # each term is its own vec_flat loop in the template
        core.vec_flat(length, 64, term_ops)


def _conv_winograd(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    return winograd_phases(spec, params, profile, (1, 2, 3))


def winograd_phases(spec: Conv2dSpec, params: dict, profile: Profile, which: tuple[int, ...],
                    sample: bool = False) -> Prediction:
    """The Winograd kernel's launches `which` (1 input transform, 2 GEMMs, 3 output transform), chained:
    the search tunes the GEMM and the Vector passes separately since their parameters do not interact."""
    global _SAMPLE
    _SAMPLE = sample
    try:
        return _winograd_launches(spec, params, profile, which)
    finally:
        _SAMPLE = False


def _winograd_launches(spec: Conv2dSpec, params: dict, profile: Profile, which: tuple[int, ...]) -> Prediction:
    from ..ir import winograd
    from ..select.tiling import winograd_geometry
    tile, tb = params["tile"], params["tile_batch"]
    g = winograd_geometry(spec, tile)
    alpha, xi = g.alpha, g.positions
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    twc = ceil(g.tw / tb)
    raw_w, plane = tb * tile + 2, tb * 16
    bt_ops = _program_ops(winograd.linear_program(winograd.tile(tile).BT))
    at_ops = _program_ops(winograd.linear_program(winograd.tile(tile).AT))
    c1_block, co1_block = params["c1_block"], params["co1_block"]
    c1_groups, co1_groups = ceil(C1 / c1_block), ceil(CO1 / co1_block)

    def chunk(b: int, groups: int) -> tuple[int, int, int]:
        rest = b // groups
        ci = rest % twc
        th = (rest // twc) % g.th
        tw0 = ci * tb
        return th, tw0, min(tb, g.tw - tw0)

    def input_transform(core: SimCore, b: int) -> None:
        th, tw0, ntb = chunk(b, c1_groups)
        c1_0 = (b % c1_groups) * c1_block
        c1_n = min(c1_block, C1 - c1_0)
        row0, col0 = th * tile - spec.pt, tw0 * tile - spec.pl
        q_lo, q_hi = max(0, -col0), min(raw_w, spec.w - col0)
        edge = row0 < 0 or row0 + alpha > spec.h or q_lo > 0 or q_hi < raw_w
        valid_rows = sum(1 for a in range(alpha) if 0 <= row0 + a < spec.h)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for it in range(c1_n):
            s = inq.slot(it)
            inq.acquire_for_write(s)
            if edge:
                core.vec_flat(alpha * raw_w * 16, 128, [("Dup", False)])
                core.set_flag("V", "MTE2", 4)
                core.wait_flag("V", "MTE2", 4)
            if q_hi > q_lo:
                for _ in range(valid_rows):
                    core.copy_gm(1, (q_hi - q_lo) * 16, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            for _ in range(xi):
                core.vec("Cast", True, tb // 4)
            inq.released(s)
            _run_program(core, bt_ops, alpha * plane)
            for _ in range(alpha):
                _run_program(core, bt_ops, plane)
            so = outq.slot(it)
            outq.acquire_for_write(so)
            core.vec_flat(xi * plane, 64, [("Cast", True)])
            outq.written(so)
            outq.acquire_for_read(so)
            core.copy_ub_to_gm(xi, ntb * 16, 2)
            outq.released(so)
        inq.drain()
        outq.drain()

    bm, bn, bk1, step = params["base_m"], params["base_n"], params["base_k1"], params["c1_step"]
    m_tiles, n_tiles = ceil(g.p / bm), ceil(CO1 * 16 / bn)

    def gemm(core: SimCore, b: int) -> None:
        ni, mi = b % n_tiles, (b // n_tiles) % m_tiles
        m = min(bm, g.p - mi * bm)
        m1 = ceil(m / 16)
        n1_cnt = min(bn // 16, CO1 - ni * (bn // 16))
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        chunks = [(min(step, C1 - c1a), [(min(step, C1 - c1a), m1 * 256), (min(step, C1 - c1a), n1_cnt * 256)])
                  for c1a in range(0, C1, step)]
        _cube_k_loop(core, m, n1_cnt * 16, chunks, bk1, _rows_load2d(core, m), lambda kc, k1n: [kc * n1_cnt])
        _cube_drain(core, m * n1_cnt * 16, 4)

    epi = [("Maxs", True), ("Mins", True)] if spec.clip_hi > 0 else [("Relu", True)] if spec.relu else []

    def output_transform(core: SimCore, b: int) -> None:
        th, tw0, ntb = chunk(b, co1_groups)
        co1_0 = (b % co1_groups) * co1_block
        co1_n = min(co1_block, CO1 - co1_0)
        valid_w = min(ntb * tile, spec.wo - tw0 * tile)
        valid_h = sum(1 for i in range(tile) if th * tile + i < spec.ho)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        yn = tile * tile * plane
        for it in range(co1_n):
            s = inq.slot(it)
            inq.acquire_for_write(s)
            core.copy_gm(xi, ntb * 16, 4, "UB")
            if spec.bias:
                core.copy_gm(4, 16, 4, "UB")
            if spec.residual:
                for _ in range(valid_h):
                    core.copy_gm(1, valid_w * 16, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            _run_program(core, at_ops, alpha * plane)
            for _ in range(tile):
                _run_program(core, at_ops, plane)
            if spec.bias:
                core.vec_flat(yn, 64, [("Add", True)])
            if spec.residual:
                for _ in range(tile * tile):
                    core.vec("Cast", True, tb // 4)
                core.vec_flat(yn, 64, [("Add", True)])
            inq.released(s)
            if epi:
                core.vec_flat(yn, 64, epi)
            so = outq.slot(it)
            outq.acquire_for_write(so)
            for _ in range(tile * tile):
                core.vec("Cast", True, tb // 4)
            outq.written(so)
            outq.acquire_for_read(so)
            for _ in range(valid_h):
                core.copy_ub_to_gm(1, valid_w * 16, 2)
            outq.released(so)
        inq.drain()
        outq.drain()

    rows = spec.n * g.th * twc
    phases = {1: lambda: launch(profile, "vector", rows * c1_groups, input_transform),
              2: lambda: launch(profile, "cube", xi * m_tiles * n_tiles, gemm),
              3: lambda: launch(profile, "vector", rows * co1_groups, output_transform)}
    return then(*(phases[i]() for i in which))


# ---------------------------------------------------------------- gemm_cube, batched_gemm_cube

def _cube_k_loop(core: SimCore, m: int, n_cols: int, chunks: list[tuple[int, list[tuple[int, int]]]], bk1: int,
                 a_load, b_loads, l1_depth: int = 2) -> None:
    """The Cube main loop every Cube template shares: per L1 chunk its GM->L1 copies ((nburst, burst) in fp16
    elements, ping-pong), then per BASE_K1 slice the L0A loads a_load(kc), the L0B loads b_loads(kc, k1n)
    (load2d repeats), one mmad (ping-pong)."""
    l1, l0 = PingPongSim(core, "MTE2", "MTE1", 0, l1_depth), PingPongSim(core, "MTE1", "M", 2)
    it = 0
    for ci, (k1n, copies) in enumerate(chunks):
        s = l1.slot(ci)
        l1.acquire_for_write(s)
        for nburst, burst in copies:
            core.copy_gm(nburst, burst, 2, "L1")
        l1.written(s)
        l1.acquire_for_read(s)
        for kb in range(0, k1n, bk1):
            kc, t = min(bk1, k1n - kb), l0.slot(it)
            l0.acquire_for_write(t)
            a_load(kc)
            for rep in b_loads(kc, k1n):
                core.load2d(rep, "L0B")
            l0.written(t)
            l0.acquire_for_read(t)
            core.mmad(m, n_cols, kc * 16)
            l0.released(t)
            it += 1
        l1.released(s)
    l1.drain()
    l0.drain()


def _cube_drain(core: SimCore, elems: int, esize: int = 2) -> None:
    """The block's end: Fixpipe waits for the Cube, drains L0C, and frees it for the next block."""
    core.set_flag("M", "FIX", 0)
    core.wait_flag("M", "FIX", 0)
    core.fixpipe(elems, esize)
    core.set_flag("FIX", "M", 0)


def _rows_load2d(core: SimCore, m: int):
    """L0A loads of an NZ A tile: one LoadData2D per 16-row fractal row."""
    def load(kc: int) -> None:
        for _ in range(ceil(m / 16)):
            core.load2d(kc, "L0A")
    return load


def _gemm(spec, params: dict, profile: Profile) -> Prediction:
    bm, bn, bk1, step = params["base_m"], params["base_n"], params["base_k1"], params["k1_step"]
    K1, N1 = ceil(spec.k / 16), ceil(spec.n / 16)
    m_tiles, n_tiles = ceil(spec.m / bm), ceil(N1 * 16 / bn)

    def block(core: SimCore, b: int) -> None:
        ni, mi = b % n_tiles, b // n_tiles
        m = min(bm, spec.m - mi * bm)
        n1_0 = ni * (bn // 16)
        n1_cnt = min(bn // 16, N1 - n1_0)
        n = min(n1_cnt * 16, spec.n - n1_0 * 16)
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        if spec.bias:
            core.copy_gm(1, n1_cnt * 16, 4, "L1")
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(n1_cnt * 16)
        chunks = []
        for k1a in range(0, K1, step):
            k1n = min(step, K1 - k1a)
            cols = min(k1n * 16, spec.k - k1a * 16)
            chunks.append((k1n, [(1, m * cols), (k1n, n1_cnt * 256)]))
        _cube_k_loop(core, m, n1_cnt * 16, chunks, bk1, _rows_load2d(core, m), lambda kc, k1n: [kc * n1_cnt])
        _cube_drain(core, m * n)

    return launch(profile, "cube", m_tiles * n_tiles, block)


def _bgemm(spec, params: dict, profile: Profile) -> Prediction:
    bm, bn, bk1, step = params["base_m"], params["base_n"], params["base_k1"], params["k1_step"]
    K1 = ceil(spec.k / 16)
    m_tiles, n_tiles = ceil(spec.m / bm), ceil(spec.n / bn)

    def block(core: SimCore, b: int) -> None:
        ni, mi = b % n_tiles, (b // n_tiles) % m_tiles
        m = min(bm, spec.m - mi * bm)
        n = min(bn, spec.n - ni * bn)
        n1 = ceil(n / 16)
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        chunks = []
        for k1a in range(0, K1, step):
            k1n = min(step, K1 - k1a)
            cols = min(k1n * 16, spec.k - k1a * 16)
            chunks.append((k1n, [(1, m * cols), (1, n * cols)]))
        if spec.trans_b:
            b_loads = lambda kc, k1n: [kc * n1]  # noqa: E731
        else:
            b_loads = lambda kc, k1n: [n1] * kc  # noqa: E731  one transposing load per ZN row
        _cube_k_loop(core, m, n1 * 16, chunks, bk1, _rows_load2d(core, m), b_loads)
        _cube_drain(core, m * n)

    return launch(profile, "cube", spec.batch * m_tiles * n_tiles, block)


# ---------------------------------------------------------------- streaming Vector kernels

def _stream(profile: Profile, numel: int, tile: int, blocks: int, inputs: int, ops: list[tuple[str, bool]],
            lanes: int = 128) -> Prediction:
    """Tiles of a flat tensor split over `blocks` Vector cores; per tile: `inputs` GM->UB copies, the ops
    over the tile (vec_flat), one UB->GM copy, with ping-pong queues (eltwise_vector and the conv epilogue)."""
    ntiles = ceil(numel / tile)

    def block(core: SimCore, b: int) -> None:
        t0, t1 = ntiles * b // blocks, ntiles * (b + 1) // blocks
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            n = min(tile, numel - t * tile)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            for _ in range(inputs):
                core.copy_gm(1, n, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            core.vec_flat(n, lanes, ops)
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(1, n, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


def _eltwise(spec, params: dict, profile: Profile) -> Prediction:
    from ..select.tiling import choose_blocks_eltwise
    binary = spec.op in ("add", "mul")
    ops = []
    if binary:
        ops.append(("Mul" if spec.op == "mul" else "Add", False))
    if spec.op in ("muls", "adds"):
        ops.append(("Muls" if spec.op == "muls" else "Adds", False))
    if "relu" in (spec.act, spec.op):
        ops.append(("Relu", False))
    if "clip" in (spec.act, spec.op):
        ops += [("Maxs", False), ("Mins", False)]
    tile = params["tile_elems"]
    return _stream(profile, spec.numel, tile, choose_blocks_eltwise(spec.numel, tile, profile), 2 if binary else 1,
                   ops)


# GELU as erf by Abramowitz-Stegun 7.1.26, one fp32 instruction chain per repeat (templates/gelu_vector.cpp.j2).
_GELU_OPS = [("Cast", True), ("Abs", True), ("Muls", True), ("Muls", True), ("Adds", True), ("Reciprocal", True),
             ("Muls", True)] + [("Adds", True), ("Mul", True)] * 4 + [
             ("Mul", True), ("Muls", True), ("Exp", True), ("Mul", True), ("Muls", True), ("Adds", True),
             ("Abs", True), ("Mul", True), ("Add", True), ("Muls", True), ("Cast", True)]


def _gelu(spec, params: dict, profile: Profile) -> Prediction:
    tile = params["tile_elems"]
    from ..select.tiling import choose_blocks_eltwise
    return _stream(profile, spec.numel, tile, choose_blocks_eltwise(spec.numel, tile, profile), 1, _GELU_OPS, 64)


def _row_reduce(core: SimCore, op: str, length: int, pad_first: bool) -> None:
    """A row reduction to one scalar (softmax/layernorm templates): whole repeats, then the partials, read by S."""
    partials = ceil(length / 64)
    if pad_first and partials * 64 != length:
        core.vec("Dup", True, 1)
    core.vec(op, True, partials)
    core.vec(op, True, 1)
    core.set_flag("V", "S", 0)
    core.wait_flag("V", "S", 0)
    core.scalar_read()
    core.set_flag("S", "V", 0)
    core.wait_flag("S", "V", 0)


def _rows(spec, params: dict, profile: Profile) -> Prediction:
    from ..select.tiling import row_blocks
    rpt, L = params["rows_per_tile"], spec.length
    tiles = ceil(spec.rows / rpt)
    blocks = row_blocks(spec, rpt, profile)
    padded = ceil(L / 64) * 64

    def block(core: SimCore, b: int) -> None:
        t0, t1 = tiles * b // blocks, tiles * (b + 1) // blocks
        if spec.op == "layernorm":
            if padded != L:
                core.vec("Dup", True, 1)
                core.vec("Dup", True, 1)
            if t0 < t1:
                core.copy_gm(1, L, 4, "UB")
                core.copy_gm(1, L, 4, "UB")
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for t in range(t0, t1):
            nrows = min(rpt, spec.rows - t * rpt)
            s = inq.slot(t - t0)
            inq.acquire_for_write(s)
            core.copy_gm(1, nrows * L, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            outq.acquire_for_write(s)
            for _ in range(nrows):
                core.vec_flat(L, 64, [("Cast", True)])
                if spec.op == "softmax":
                    _row_reduce(core, "ReduceMax", L, True)
                    core.vec_flat(L, 64, [("Adds", True), ("Exp", True)])
                    _row_reduce(core, "ReduceSum", L, True)
                    core.vec_flat(L, 64, [("Muls", True), ("Cast", True)])
                else:
                    _row_reduce(core, "ReduceSum", L, False)
                    core.vec_flat(L, 64, [("Adds", True), ("Mul", True)])
                    _row_reduce(core, "ReduceSum", L, False)
                    core.vec_flat(L, 64, [("Muls", True), ("Mul", True), ("Add", True), ("Cast", True)])
            inq.released(s)
            outq.written(s)
            outq.acquire_for_read(s)
            core.copy_ub_to_gm(1, nrows * L, 2)
            outq.released(s)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


# ---------------------------------------------------------------- windowed Vector kernels (dwconv, maxpool)

def _window_block_prologue(core: SimCore, spec, rows_out: int, r0: int, dilation_h: int) -> None:
    """Zero/-inf fill of the padded slab (when padding is touched) and the valid rows GM->UB."""
    slab_rows = (rows_out - 1) * spec.sh + (spec.kh - 1) * dilation_h + 1
    img_row0 = r0 * spec.sh - spec.pt
    lo, hi = max(0, img_row0), min(spec.h, img_row0 + slab_rows)
    wp = spec.w + spec.pl + spec.pr
    if core.blocks > 0:
        core.wait_flag("V", "MTE2", 1)
    if spec.pl or spec.pr or lo != img_row0 or hi != img_row0 + slab_rows:
        core.vec_flat(slab_rows * wp * 16, 128, [("Dup", False)])
        core.set_flag("V", "MTE2", 0)
        core.wait_flag("V", "MTE2", 0)
    if hi > lo:
        core.copy_gm(hi - lo, spec.w * 16, 2, "UB")


def _store_row(core: SimCore, outq: PingPongSim, ro: int, fill, row: int) -> None:
    """One output row of a windowed kernel: the Vector unit fills a ping-pong UB row, MTE3 stores it."""
    q = outq.slot(ro)
    outq.acquire_for_write(q)
    fill()
    outq.written(q)
    outq.acquire_for_read(q)
    core.copy_ub_to_gm(1, row, 2)
    outq.released(q)


def _dwconv(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, c1s, taps, row = ceil(spec.ho / rpb), c1(spec.c), spec.kh * spec.kw, spec.wo * 16

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        _window_block_prologue(core, spec, rows_out, r0, spec.dh)
        core.copy_gm(1, taps * 16, 2, "UB")
        if spec.bias:
            core.copy_gm(1, 16, 4, "UB")
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        core.vec_flat(taps * 16, 64, [("Cast", True)])
        for _ in range(taps + (1 if spec.bias else 0)):
            core.vec("Copy", True, 4)
        outq = PingPongSim(core, "V", "MTE3", 2)
        for ro in range(rows_out):
            core.vec_flat(row, 64, [("Copy" if spec.bias else "Dup", True)])
            for _ in range(taps):
                core.vec_flat(row, 64, [("Cast", True)])
                core.vec_flat(row, 64, [("MulAddDst", True)])
            _activate_and_store(core, spec, outq, ro, row)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * c1s * bands, block)


def _activate_and_store(core: SimCore, spec, outq: PingPongSim, ro: int, row: int, residual: bool = False) -> None:
    """The end of a windowed Vector kernel's output row: + residual, clip or ReLU in fp32, cast and store."""
    if residual:
        core.vec_flat(row, 64, [("Cast", True)])
        core.vec_flat(row, 64, [("Add", True)])
    if spec.clip_hi > 0:
        core.vec_flat(row, 64, [("Maxs", True), ("Mins", True)])
    if spec.relu:
        core.vec_flat(row, 64, [("Relu", True)])
    _store_row(core, outq, ro, lambda: core.vec_flat(row, 64, [("Cast", True)]), row)


def _vec_flat_cycles(profile: Profile, n: int, lanes: int, op: str, fp32: bool) -> float:
    """V-pipe cycles of SimCore.vec_flat(n, lanes, [(op, fp32)]), without running it."""
    cpr = (profile.vec_cpr_f32 if fp32 else profile.vec_cpr_f16)[_VEC_INDEX[op]]
    full, tail = divmod(n, lanes)
    instrs = ceil(full / 255) + (1 if tail else 0)
    return instrs * profile.vec_head + cpr * (full + (1 if tail else 0))


def vector_conv_lower_bound(spec, params: dict, profile: Profile) -> float:
    """Cycles conv2d_vector cannot beat: its per-channel cast and multiply-add work alone, spread evenly over
    the Vector cores. Lets the algorithm choice skip the exact replay of a conv the Vector unit clearly loses."""
    per_row = (_vec_flat_cycles(profile, spec.wo * 16, 64, "Cast", True)
               + _vec_flat_cycles(profile, spec.wo * 16, 64, "MulAddDst", True))
    work = spec.n * c1(spec.cout) * spec.ho * spec.cin * spec.kh * spec.kw * per_row
    return work / profile.cores_for("vector")


def _conv_vector(spec, params: dict, profile: Profile) -> Prediction:
    """templates/conv2d_vector.cpp.j2, instruction for instruction."""
    from ..select.tiling import _vector_conv_geometry
    rpb = params["rows_per_block"]
    bands, co1s, c1s, taps = ceil(spec.ho / rpb), c1(spec.cout), c1(spec.cin), spec.kh * spec.kw
    band_rows, wpp = _vector_conv_geometry(spec, rpb)
    row, plane = spec.wo * 16, band_rows * wpp

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        slab_rows = _vector_conv_geometry(spec, rows_out)[0]
        img_row0 = r0 * spec.sh - spec.pt
        lo, hi = max(0, img_row0), min(spec.h, img_row0 + slab_rows)
        if core.blocks > 0:
            core.wait_flag("V", "MTE2", 1)
        if spec.pl or spec.pr or lo != img_row0 or hi != img_row0 + slab_rows:
            core.vec_flat(c1s * plane * 16, 128, [("Dup", False)])
            core.set_flag("V", "MTE2", 0)
            core.wait_flag("V", "MTE2", 0)
        if hi > lo:
            for _ in range(c1s):
                core.copy_gm(hi - lo, spec.w * 16, 2, "UB")
        core.copy_gm(c1s * taps, 256, 2, "UB")
        if spec.bias:
            core.copy_gm(1, 16, 4, "UB")
        if spec.residual:
            core.copy_gm(1, rows_out * row, 2, "UB")
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        for _ in range(c1s * slab_rows):
            core.vec("Transpose", False, 2 * (wpp // 16))
        for done in range(0, c1s * taps, 255):
            core.vec("Transpose", False, 2 * min(255, c1s * taps - done))
        core.vec_flat(c1s * taps * 256, 64, [("Cast", True)])
        if spec.bias:
            core.vec("Copy", True, 4)
        core.vec_flat(rows_out * row, 64, [("Copy" if spec.bias else "Dup", True)])
        brcb_repeats = slab_rows * wpp // 8
        for _ in range(spec.cin):
            for done in range(0, brcb_repeats, 254):
                core.vec("Brcb", False, min(254, brcb_repeats - done))
            for _ in range(taps):
                core.vec("Copy", True, 4)
            for _ in range(rows_out * taps):
                core.vec_flat(row, 64, [("Cast", True)])
                core.vec_flat(row, 64, [("MulAddDst", True)])
        outq = PingPongSim(core, "V", "MTE3", 2)
        for ro in range(rows_out):
            _activate_and_store(core, spec, outq, ro, row, spec.residual)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * co1s * bands, block)


def _maxpool(spec, params: dict, profile: Profile) -> Prediction:
    rpb = params["rows_per_block"]
    bands, c1s, row = ceil(spec.ho / rpb), c1(spec.c), spec.wo * 16

    def block(core: SimCore, b: int) -> None:
        r0 = (b % bands) * rpb
        rows_out = min(rpb, spec.ho - r0)
        _window_block_prologue(core, spec, rows_out, r0, 1)
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
        outq = PingPongSim(core, "V", "MTE3", 2)
        for ro in range(rows_out):
            _store_row(core, outq, ro, lambda: [core.vec_flat(row, 128, [("Copy" if t == 0 else "Max", False)])
                                                for t in range(spec.kh * spec.kw)], row)
        outq.drain()
        core.set_flag("V", "MTE2", 1)

    return launch(profile, "vector", spec.n * c1s * bands, block)


def _global_avgpool(spec, params: dict, profile: Profile) -> Prediction:
    chunk, hw = params["chunk_pixels"], spec.h * spec.w

    def block(core: SimCore, b: int) -> None:
        if core.blocks > 0:
            core.wait_flag("MTE3", "V", 1)
        core.vec("Dup", True, 1)
        inq = PingPongSim(core, "MTE2", "V", 0)
        for ci, p0 in enumerate(range(0, hw, chunk)):
            px, s = min(chunk, hw - p0), inq.slot(ci)
            inq.acquire_for_write(s)
            core.copy_gm(1, px * 16, 2, "UB")
            inq.written(s)
            inq.acquire_for_read(s)
            core.vec_flat(px * 16, 64, [("Cast", True)])
            inq.released(s)
            count = px
            while count > 1:  # pairwise halving
                half = count // 2
                core.vec_flat(half * 16, 64, [("Add", True)])
                count -= half
            core.vec("Add", True, 1)
        inq.drain()
        core.vec("Muls", True, 1)
        core.vec("Cast", True, 1)
        core.set_flag("V", "MTE3", 0)
        core.wait_flag("V", "MTE3", 0)
        core.copy_ub_to_gm(1, 16, 2)
        core.set_flag("MTE3", "V", 1)

    return launch(profile, "vector", spec.n * c1(spec.c), block)


def _transpose(spec, params: dict, profile: Profile) -> Prediction:
    ppb, planes, plane = params["planes_per_block"], spec.d0 * spec.d1, spec.d2 * spec.d3

    def block(core: SimCore, b: int) -> None:
        q = PingPongSim(core, "MTE2", "MTE3", 0)
        p0 = b * ppb
        for p in range(p0, min(planes, p0 + ppb)):
            s = q.slot(p - p0)
            q.acquire_for_write(s)
            core.copy_gm(1, plane, 2, "UB")
            q.written(s)
            q.acquire_for_read(s)
            core.copy_ub_to_gm(spec.d2, spec.d3, 2)
            q.released(s)
        q.drain()

    return launch(profile, "vector", ceil(planes / ppb), block)


# ---------------------------------------------------------------- attention_flash (Cube + Vector)

def _attention(spec, params: dict, profile: Profile) -> Prediction:
    """templates/attention_flash.cpp.j2, instruction for instruction."""
    bq, bkv, on_chip = params["base_q"], params["base_kv"], bool(params.get("on_chip"))
    split = params.get("vec_split", 1) == 2
    reader = "V" if on_chip else "MTE2"  # what reads the S and P.V tiles on the Vector side
    D1 = ceil(spec.d / 16)
    d16 = D1 * 16
    kvp = ceil(bkv / 64) * 64
    parts = kvp // 64
    qt, kvt = ceil(spec.q / bq), ceil(spec.kv / bkv)

    class Side:  # one Vector core's rows of the block and its flags with the Cube
        def __init__(self, core: SimCore, rows: int, same: bool):
            self.v, self.rows = core, rows
            self.x = {n: CrossFlagSim(same) for n in ("s_ready", "s_free", "p_ready", "p_free", "o_ready", "o_free")}

    def mmad_and_hand_over(c: SimCore, sides: list, ev: int, mnk: tuple, ub_elems: int, gm_elems: int,
                           tile: str) -> None:
        """The end of both Cube stages once L0A/L0B are loaded: mmad, then Fixpipe hands the tile (S or P.V)
        to the Vector side (tile + "_free" / "_ready" cross flags), into UB on a coupled core or the workspace."""
        c.set_flag("MTE1", "MTE2", ev)
        c.set_flag("MTE1", "M", ev)
        c.wait_flag("MTE1", "M", ev)
        c.wait_flag("FIX", "M", ev)
        c.mmad(*mnk)
        c.set_flag("M", "MTE1", ev)
        c.set_flag("M", "FIX", ev)
        c.wait_flag("M", "FIX", ev)
        for sd in sides:
            sd.x[tile + "_free"].wait(c, "FIX")
        if on_chip:
            c.fixpipe_to_ub(ub_elems)
        else:
            c.fixpipe(gm_elems, 4)
        c.set_flag("FIX", "M", ev)
        for sd in sides:
            sd.x[tile + "_ready"].set(c, "FIX")

    def scores(c: SimCore, sides: list, j: int, m: int) -> None:
        n = min(bkv, spec.kv - j * bkv)
        n1 = ceil(n / 16)
        c.wait_flag("MTE1", "MTE2", 1)
        c.copy_gm(1, n * spec.d, 2, "L1")
        c.set_flag("MTE2", "MTE1", 1)
        c.wait_flag("MTE2", "MTE1", 1)
        c.wait_flag("M", "MTE1", 1)
        c.load2d(D1 * n1, "L0B")
        mmad_and_hand_over(c, sides, 1, (m, n1 * 16, D1 * 16), n1 * ceil(m / 16) * 256, m * n, "s")

    def pv(c: SimCore, sides: list, j: int, m: int) -> None:
        n = min(bkv, spec.kv - j * bkv)
        n1, m1 = ceil(n / 16), ceil(m / 16)
        c.wait_flag("MTE1", "MTE2", 2)
        c.copy_gm(1, n * spec.d, 2, "L1")
        for sd in sides:
            sd.x["p_ready"].wait(c, "MTE2")
        c.copy_gm(1, m * n, 2, "L1")
        for sd in sides:
            sd.x["p_free"].set(c, "MTE2")
        c.set_flag("MTE2", "MTE1", 2)
        c.wait_flag("MTE2", "MTE1", 2)
        c.wait_flag("M", "MTE1", 2)
        for _ in range(m1):
            c.load2d(n1, "L0A")
        for _ in range(n1):
            c.load2d(D1, "L0B")
        mmad_and_hand_over(c, sides, 2, (m, D1 * 16, n1 * 16), D1 * m1 * 256, m * spec.d, "o")

    def rows_reduce(v: SimCore, fold: str, reduce: str, rows: int) -> None:
        for _ in range(max(0, parts - 1)):
            v.vec(fold, True, rows)
        v.vec(reduce, True, rows)

    def softmax(sd: Side, j: int) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        n = min(bkv, spec.kv - j * bkv)
        tile = rows * kvp
        if spec.mask:
            v.wait_flag("V", "MTE2", 3)
            v.copy_gm(1, n, 2, "UB")
            v.set_flag("MTE2", "V", 3)
        if on_chip:
            x["s_ready"].wait(v, "V")
            for _ in range(ceil(n / 16)):
                v.vec("Copy", True, rows)
            x["s_free"].set(v, "V")
        else:
            v.wait_flag("V", "MTE2", 1)
            x["s_ready"].wait(v, "MTE2")
            v.copy_gm(1, tile, 4, "UB")
            x["s_free"].set(v, "MTE2")
            v.set_flag("MTE2", "V", 1)
            v.wait_flag("MTE2", "V", 1)
        v.vec_flat(tile, 64, [("Muls", True)])
        if spec.mask:
            v.wait_flag("MTE2", "V", 3)
            v.vec_flat(n, 64, [("Cast", True)])
            for _ in range(parts):
                v.vec("Add", True, rows)
            v.set_flag("V", "MTE2", 3)
        for _ in range(n // 64, parts):
            v.vec("Dup", True, rows)
        rows_reduce(v, "Max", "ReduceMax", rows)
        v.vec_flat(rows, 64, [("Max", True), ("Sub", True), ("Exp", True), ("Copy", True)])
        v.set_flag("V", "S", 0)
        v.wait_flag("V", "S", 0)
        for _ in range(2 * rows):
            v.scalar_read()
        v.set_flag("S", "V", 0)
        v.wait_flag("S", "V", 0)
        for _ in range(rows):
            v.vec("Adds", True, parts)
        v.vec_flat(tile, 64, [("Exp", True)])
        rows_reduce(v, "Add", "ReduceSum", rows)
        v.vec_flat(rows, 64, [("Mul", True), ("Add", True)])
        v.wait_flag("MTE3", "V", 1)
        v.vec_flat(tile, 64, [("Cast", True)])
        if not on_chip:
            v.set_flag("V", "MTE2", 1)
        v.set_flag("V", "MTE3", 1)
        v.wait_flag("V", "MTE3", 1)
        x["p_free"].wait(v, "MTE3")
        v.copy_ub_to_gm(1, tile, 2)
        v.set_flag("MTE3", "V", 1)
        x["p_ready"].set(v, "MTE3")

    def update(sd: Side) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        if on_chip:
            x["o_ready"].wait(v, "V")
            for _ in range(D1):
                v.vec("Copy", True, rows)
            x["o_free"].set(v, "V")
        else:
            v.wait_flag("V", "MTE2", 2)
            x["o_ready"].wait(v, "MTE2")
            v.copy_gm(1, rows * d16, 4, "UB")
            x["o_free"].set(v, "MTE2")
            v.set_flag("MTE2", "V", 2)
            v.wait_flag("MTE2", "V", 2)
        for _ in range(rows):
            v.vec_flat(d16, 64, [("Muls", True)])
        v.vec_flat(rows * d16, 64, [("Add", True)])
        if not on_chip:
            v.set_flag("V", "MTE2", 2)

    def begin(sd: Side, c: SimCore) -> None:
        v, x = sd.v, sd.x
        for _ in range(2):
            x["s_free"].set(v, reader)
            x["p_free"].set(c, "MTE2")
            x["o_free"].set(v, reader)
        if not on_chip:
            v.set_flag("V", "MTE2", 1)
            v.set_flag("V", "MTE2", 2)
        v.set_flag("MTE3", "V", 1)
        if spec.mask:
            v.set_flag("V", "MTE2", 3)

    def end(sd: Side, c: SimCore) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        v.vec_flat(rows, 64, [("Reciprocal", True)])
        v.set_flag("V", "S", 0)
        v.wait_flag("V", "S", 0)
        for _ in range(rows):
            v.scalar_read()
        v.set_flag("S", "V", 0)
        v.wait_flag("S", "V", 0)
        for _ in range(rows):
            v.vec_flat(d16, 64, [("Muls", True)])
        v.vec_flat(rows * d16, 64, [("Cast", True)])
        v.set_flag("V", "MTE3", 3)
        v.wait_flag("V", "MTE3", 3)
        if spec.d == d16:
            v.copy_ub_to_gm(1, rows * spec.d, 2)
        else:
            v.copy_ub_to_gm(rows, spec.d, 2)
        for _ in range(2):
            x["s_free"].wait(c, "FIX")
            x["p_free"].wait(v, "MTE3")
            x["o_free"].wait(c, "FIX")
        if not on_chip:
            v.wait_flag("V", "MTE2", 1)
            v.wait_flag("V", "MTE2", 2)
        v.wait_flag("MTE3", "V", 1)
        if spec.mask:
            v.wait_flag("V", "MTE2", 3)

    def block(c: SimCore, v0: SimCore, v1: SimCore, blk: int) -> None:
        q0 = (blk % qt) * bq
        m = min(bq, spec.q - q0)
        m1 = ceil(m / 16)
        same = c is v0
        if c.blocks > 0:
            c.barrier_all()
            if not same:
                v0.barrier_all()
                v1.barrier_all()
        nv = 2 if split and m > 1 else 1
        half = (m + 1) // 2 if nv == 2 else m
        sides = [Side(v0, half, same), Side(v1, m - half, same)][:nv]
        for sd in sides:
            begin(sd, c)
        for ev in (1, 2):
            c.set_flag("MTE1", "MTE2", ev)
            c.set_flag("M", "MTE1", ev)
            c.set_flag("FIX", "M", ev)
        c.copy_gm(1, m * spec.d, 2, "L1")
        c.set_flag("MTE2", "MTE1", 0)
        c.wait_flag("MTE2", "MTE1", 0)
        for _ in range(m1):
            c.load2d(D1, "L0A")
        for sd in sides:
            sd.v.vec_flat(sd.rows, 64, [("Dup", True), ("Dup", True)])
            sd.v.vec_flat(sd.rows * d16, 64, [("Dup", True)])
        scores(c, sides, 0, m)
        if kvt > 1:
            scores(c, sides, 1, m)
        for sd in sides:
            softmax(sd, 0)
        for j in range(kvt):
            pv(c, sides, j, m)
            if j + 2 < kvt:
                scores(c, sides, j + 2, m)
            for sd in sides:
                if j + 1 < kvt:
                    softmax(sd, j + 1)
                update(sd)
        for sd in sides:
            end(sd, c)
        for ev in (1, 2):
            c.wait_flag("MTE1", "MTE2", ev)
            c.wait_flag("M", "MTE1", ev)
            c.wait_flag("FIX", "M", ev)

    return launch_group(profile, spec.batch * spec.heads * qt, block)


_REPLAYS = {"conv2d_cube_img2col": _conv_img2col, "conv2d_winograd": _conv_winograd,
            "conv2d_vector": _conv_vector, "gemm_cube": _gemm,
            "batched_gemm_cube": _bgemm, "eltwise_vector": _eltwise, "gelu_vector": _gelu,
            "softmax_vector": _rows, "layernorm_vector": _rows, "dwconv2d_vector": _dwconv,
            "maxpool2d_vector": _maxpool, "global_avgpool_vector": _global_avgpool, "transpose_mte": _transpose,
            "attention_flash": _attention}


def predict(spec, family: str, params: dict, profile: Profile, sample: bool = False) -> Prediction | None:
    """Predicted execution of `family` with `params` for `spec` (None for an unknown family). sample=True
    replays two cores per launch: cycles for ranking candidates, not per-pipe totals."""
    global _SAMPLE
    replay = _REPLAYS.get(family)
    if replay is None:
        return None
    _SAMPLE = sample
    try:
        return replay(spec, params, profile)
    finally:
        _SAMPLE = False


def record(spec, family: str, params: dict, profile: Profile) -> tuple[Prediction | None, list]:
    """predict() with every instruction recorded (for `kiln trace` and the report): (prediction, launches),
    the launches in the order they chain, each (unit, cycles, {core: [(pipe, instr, bytes, start, end)]}) with
    start/end in cycles from that launch's start (launch i begins when launches 0..i-1 have ended)."""
    global _RECORD
    _RECORD = launches = []
    try:
        return predict(spec, family, params, profile), launches
    finally:
        _RECORD = None
