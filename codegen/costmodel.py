"""The Ascend pipe cost model: predicted cycles of a kernel variant, per pipe and in total.

The model replays a variant's instruction stream (what its template issues, block by block, on each AI
core) against the profile's per-instruction costs, with the same timing rules as the emulator
(kernels/kiln/core.hpp): each pipe runs its instructions in order, pipes overlap, set/wait flags
order them, a kernel ends when its slowest core does, and chained phases (Cube then Vector) add up.
It needs no data and no compiled code, so the codegen can rank variants before anything is built;
tests hold its per-pipe instruction and byte counts equal to the emulator's and its cycles to the
emulator's simulated cycles.

Families without a replay yet return None from `predict`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from math import ceil

from .opspec import Conv2dSpec, c1
from .profiles import VEC_OPS, Profile

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

    # ---- timeline
    def issue(self, pipe: str, cycles: float, nbytes: int) -> None:
        start = max(self.free_at[pipe], self.wait_until[pipe])
        self.free_at[pipe] = start + cycles
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
        self.issue("MTE2", self.p.mte2_head + nbytes / rate, nbytes)

    def copy_ub_to_gm(self, nburst: int, burst: int, esize: int) -> None:
        if nburst == 0 or burst == 0:
            return
        nbytes = nburst * burst * esize
        self.issue("MTE3", self.p.mte3_head + nbytes / self.p.ub_to_gm_bpc, nbytes)

    def load2d(self, repeat: int, to: str) -> None:
        if not repeat:
            return
        nbytes = repeat * 512
        rate = self.p.l1_to_l0a_bpc if to == "L0A" else self.p.l1_to_l0b_bpc
        self.issue("MTE1", self.p.mte1_head + nbytes / rate, nbytes)

    def load3d(self, m1: int, k1: int) -> None:
        nbytes = m1 * k1 * 512
        self.issue("MTE1", self.p.load3d_head + nbytes / self.p.load3d_bpc, nbytes)

    def load_bias_table(self, n: int) -> None:
        self.issue("MTE1", self.p.bt_head + n * 4.0 / self.p.l1_to_bt_bpc, n * 4)

    def mmad(self, m: int, n: int, k: int) -> None:
        fractals = ceil(m / 16) * ceil(n / 16) * ceil(k / 16)
        self.cube_macs += fractals * 4096
        self.useful_macs += m * n * k
        self.issue("M", self.p.mmad_head + fractals, 0)

    def fixpipe(self, elems: int, esize: int = 2) -> None:
        self.issue("FIX", self.p.fix_head + elems / self.p.fix_elems_pc, elems * esize)

    def vec(self, op: str, fp32: bool, times: int) -> None:
        cpr = (self.p.vec_cpr_f32 if fp32 else self.p.vec_cpr_f16)[_VEC_INDEX[op]]
        self.issue("V", self.p.vec_head + cpr * times, times * 256)

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


def launch(profile: Profile, unit: str, blocks: int, body) -> Prediction:
    """Blocks over the unit's cores as kiln::emu::launch does (block b on core b % cores)."""
    cores = max(1, min(blocks, profile.cores_for(unit)))
    pipes = {p: PipeCount() for p in PIPES}
    cycles, macs, useful = 0.0, 0, 0
    for v in range(cores):
        core = SimCore(profile)
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
    return Prediction(cycles, pipes, macs, useful, cores, [cycles])


def then(*phases: Prediction) -> Prediction:
    """Launches that run one after another: cycles add up, counters are summed."""
    pipes = {p: PipeCount(sum(ph.pipes[p].instrs for ph in phases), sum(ph.pipes[p].bytes for ph in phases),
                          sum(ph.pipes[p].busy for ph in phases)) for p in PIPES}
    return Prediction(sum(ph.cycles for ph in phases), pipes, sum(ph.cube_macs for ph in phases),
                      sum(ph.useful_macs for ph in phases), max(ph.cores for ph in phases),
                      [c for ph in phases for c in ph.phases])


# ---------------------------------------------------------------- conv2d_cube_img2col

def _conv_img2col(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    from .tiling import conv_tile_rows  # tiling imports this module
    bm, bn, bk1, step = params["base_m"], params["base_n"], params["base_k1"], params["c1_step"]
    C1, CO1, taps = c1(spec.cin), c1(spec.cout), spec.kh * spec.kw
    M = spec.ho * spec.wo
    tiles = conv_tile_rows(spec, bm)
    m_tiles, n_tiles = len(tiles), ceil(CO1 * 16 / bn)

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
        l1 = PingPongSim(core, "MTE2", "MTE1", 0)
        l0 = PingPongSim(core, "MTE1", "M", 2)
        it = 0
        for chunk, c1a in enumerate(range(0, C1, step)):
            c1n, s = min(step, C1 - c1a), l1.slot(chunk)
            l1.acquire_for_write(s)
            if rows > 0:
                core.copy_gm(c1n, rows * spec.w * 16, 2, "L1")
            core.copy_gm(c1n * taps, n1_cnt * 256, 2, "L1")
            l1.written(s)
            l1.acquire_for_read(s)
            k1n = c1n * taps
            for kb in range(0, k1n, bk1):
                kc, t = min(bk1, k1n - kb), l0.slot(it)
                l0.acquire_for_write(t)
                core.load3d(m1, kc)
                core.load2d(kc * n1_cnt, "L0B")
                l0.written(t)
                l0.acquire_for_read(t)
                core.mmad(m, n1_cnt * 16, kc * 16)
                l0.released(t)
                it += 1
            l1.released(s)
        l1.drain()
        l0.drain()
        core.set_flag("M", "FIX", 0)
        core.wait_flag("M", "FIX", 0)
        core.fixpipe(m * n1_cnt * 16)
        core.set_flag("FIX", "M", 0)

    cube = launch(profile, "cube", spec.n * m_tiles * n_tiles, block)
    if not spec.vector_epilogue:
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
    from . import winograd
    from .tiling import winograd_geometry
    tile, tb = params["tile"], params["tile_batch"]
    g = winograd_geometry(spec, tile)
    alpha, xi = g.alpha, g.positions
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    twc = ceil(g.tw / tb)
    raw_w, out_w, plane = tb * tile + 2, tb * tile, tb * 16
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
        l1, l0 = PingPongSim(core, "MTE2", "MTE1", 0), PingPongSim(core, "MTE1", "M", 2)
        it = 0
        for chunk_i, c1a in enumerate(range(0, C1, step)):
            c1n, s = min(step, C1 - c1a), l1.slot(chunk_i)
            l1.acquire_for_write(s)
            core.copy_gm(c1n, m1 * 256, 2, "L1")
            core.copy_gm(c1n, n1_cnt * 256, 2, "L1")
            l1.written(s)
            l1.acquire_for_read(s)
            for kb in range(0, c1n, bk1):
                kc, t = min(bk1, c1n - kb), l0.slot(it)
                l0.acquire_for_write(t)
                for _ in range(m1):
                    core.load2d(kc, "L0A")
                core.load2d(kc * n1_cnt, "L0B")
                l0.written(t)
                l0.acquire_for_read(t)
                core.mmad(m, n1_cnt * 16, kc * 16)
                l0.released(t)
                it += 1
            l1.released(s)
        l1.drain()
        l0.drain()
        core.set_flag("M", "FIX", 0)
        core.wait_flag("M", "FIX", 0)
        core.fixpipe(m * n1_cnt * 16, 4)
        core.set_flag("FIX", "M", 0)

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
    return then(launch(profile, "vector", rows * c1_groups, input_transform),
                launch(profile, "cube", xi * m_tiles * n_tiles, gemm),
                launch(profile, "vector", rows * co1_groups, output_transform))


_REPLAYS = {"conv2d_cube_img2col": _conv_img2col, "conv2d_winograd": _conv_winograd}


def predict(spec, family: str, params: dict, profile: Profile) -> Prediction | None:
    """Predicted execution of `family` with `params` for `spec`, or None if the family has no replay yet."""
    replay = _REPLAYS.get(family)
    return replay(spec, params, profile) if replay else None
