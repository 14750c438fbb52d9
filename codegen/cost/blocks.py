"""The instruction streams several families' replays share (each mirrors a building block of the templates or
kernels/kiln/ops.hpp)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil
from typing import NamedTuple

from ..ir.profiles import Profile
from .model import OUT, PingPongSim, Prediction, SimCore, current_mode, launch, vec_body
from .steady import Memo, steady_loop


def program_ops(terms: list[tuple[int, list[tuple[int, float]]]]) -> list[list[tuple[str, bool]]]:
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


def run_program(core: SimCore, ops: list[list[tuple[str, bool]]], length: int) -> None:
    for term_ops in ops:  # each term is its own vec_flat loop in the template
        core.vec_flat(length, 64, term_ops)


@dataclass(frozen=True)
class L1Carry:
    """A block's place in its core's L1 queue when the chunks pipeline across blocks (a conv's `prefetch`: the
    next block's first chunk loads while this block's last one computes): the chunks the core ran before this
    block (the slot parity), whether the queue starts here (the core's first block: its slots start free) and
    whether it ends here (the core's last block: drained)."""
    chunk0: int
    first: bool
    last: bool


def cube_k_loop(core: SimCore, m: int | tuple[int, ...], n_cols: int,
                chunks: list[tuple[int, list[tuple[int, int, int]]]], bk1: int, loads: tuple,
                l1_depth: int | L1Carry = 2) -> None:
    """The Cube main loop every Cube template shares: per L1 chunk its GM->L1 copies ((nburst, burst, source) in
    fp16 elements, the source an input index or OUT/WORKSPACE; ping-pong), then per BASE_K1 slice the L0A loads
    a_load(kc), the L0B loads b_loads(kc, k1n) (load2d repeats), one mmad of m rows, or one per entry of a tuple m
    (several images sharing the B fractals), ping-pong. l1_depth: the L1 queue's slots, or an L1Carry (two slots,
    the queue running on across the core's blocks)."""
    a_load, b_loads = loads
    rows = (m,) if isinstance(m, int) else m
    carry, depth = (l1_depth, 2) if isinstance(l1_depth, L1Carry) else (None, l1_depth)
    l1 = PingPongSim(core, "MTE2", "MTE1", 0, depth, fresh=carry is None or carry.first)
    l0, c0 = PingPongSim(core, "MTE1", "M", 2), carry.chunk0 if carry else 0
    it = 0
    for ci, (k1n, copies) in enumerate(chunks):
        s = l1.slot(c0 + ci)
        l1.acquire_for_write(s)
        for nburst, burst, src in copies:
            core.copy_gm(nburst, burst, 2, "L1", src=src)
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
            for r in rows:
                core.mmad(r, n_cols, kc * 16)
            l0.released(t)
            it += 1
        l1.released(s)
    if carry is None or carry.last:
        l1.drain()
    l0.drain()


def cube_drain(core: SimCore, elems: int, esize: int = 2, tiles: int = 1) -> None:
    """The block's end: Fixpipe waits for the Cube, drains L0C (`tiles` tiles of `elems` values: a conv's images),
    and frees it for the next block."""
    core.set_flag("M", "FIX", 0)
    core.wait_flag("M", "FIX", 0)
    for _ in range(tiles):
        core.fixpipe(elems, esize)
    core.set_flag("FIX", "M", 0)


def rows_load2d(core: SimCore, m: int):
    """L0A loads of an NZ A tile: one LoadData2D per 16-row fractal row."""
    def load(kc: int) -> None:
        for _ in range(ceil(m / 16)):
            core.load2d(kc, "L0A")
    return load


def pingpong_tile(core: SimCore, queues: tuple[PingPongSim, PingPongSim], slot: int, n: int,
                  copies: list[tuple[int, int]], vector: list[tuple[int, int, list[tuple[str, bool]]]],
                  bursts: int = 1) -> None:
    """One tile of the Vector kernels' CopyIn -> Compute -> CopyOut loop on ping-pong slot `slot` of `queues` (GM->UB,
    UB->GM): a GM->UB copy of each (count in fp16 elements, source) in `copies`, each (elements, lanes, ops) of
    `vector` as one vec_flat, then one UB->GM copy of `n` fp16 values; bursts > 1: each copy is that many runs of
    count (n)."""
    inq, outq = queues
    inq.acquire_for_write(slot)
    for count, src in copies:
        core.copy_gm(bursts, count, 2, "UB", src=src)
    inq.written(slot)
    inq.acquire_for_read(slot)
    outq.acquire_for_write(slot)
    for elems, lanes, ops in vector:
        core.vec_flat(elems, lanes, ops)
    inq.released(slot)
    outq.written(slot)
    outq.acquire_for_read(slot)
    core.copy_ub_to_gm(bursts, n, 2)
    outq.released(slot)


def stream(profile: Profile, numel: int, tile: int, blocks: int, inputs: int, ops: list[tuple[str, bool]],
            lanes: int = 128) -> Prediction:
    """Tiles of a flat tensor split over `blocks` Vector cores; per tile: `inputs` GM->UB copies, the ops
    over the tile (vec_flat), one UB->GM copy, with ping-pong queues (eltwise_vector and the conv epilogue)."""
    ntiles = ceil(numel / tile)

    memo = Memo()  # the tiles' effects, shared by the launch's cores

    def block(core: SimCore, b: int) -> None:
        tile_loop(core, [min(tile, numel - t * tile) for t in range(ntiles * b // blocks, ntiles * (b + 1) // blocks)],
                  lambda q, inq, outq, s, n: pingpong_tile(q, (inq, outq), s, n, [(n, i) for i in range(inputs)],
                                                           [(n, lanes, ops)]), memo)

    return launch(profile, "vector", blocks, block)


def tile_loop(core: SimCore, sizes: list[int], one, memo: Memo) -> None:
    """A block's ping-pong tile loop: queues GM->UB (MTE2 -> V, events 0/1) and UB->GM (V -> MTE3, events 2/3),
    one(core, inq, outq, slot, n) per tile of n elements, slots alternating, then both queues drained. Pairs of
    tiles of equal sizes are costed once steady (cost/steady.py; `memo`: one per launch)."""
    inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
    pairs = [tuple(sizes[i:i + 2]) for i in range(0, len(sizes), 2)]

    def item(k: int) -> None:
        for slot, n in enumerate(pairs[k]):
            one(core, inq, outq, slot, n)

    steady_loop(core, pairs, item, every=current_mode().every_block or core.trace is not None, memo=memo)
    inq.drain()
    outq.drain()


def row_reduce(core: SimCore, op: str, length: int, pad_first: bool) -> None:
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


def slab_padding(core: SimCore, rows: int, lo: int, hi: int, wp: int, pl: int, pr: int) -> None:
    """ops.hpp fill_slab_padding: the rows outside [lo, hi) whole, then per side of the rows inside one Dup a
    255-row run and 8 pixels (a repeat a row)."""
    lo = min(max(lo, 0), rows)
    hi = min(max(hi, lo), rows)
    for r0, r1 in ((0, lo), (hi, rows)):
        if r1 > r0:
            core.vec_flat((r1 - r0) * wp * 16, 128, [("Dup", False)])
    for pixels in (pl, pr):
        for r in range(lo, hi, 255) if pixels else ():
            for _ in range(0, pixels, 8):
                core.vec("Dup", False, min(255, hi - r))


class SlabQueue(NamedTuple):
    """A window kernel's two UB slabs, a queue running on across its core's blocks (prefetch): the next block's rows
    load while this one computes. The block's slot (its place among the core's blocks, mod 2) and whether it is
    the core's first (its slots start free) and last (drained after it)."""
    queue: PingPongSim
    slot: int
    last: bool


def window_slabs(core: SimCore, params: dict, b: int, blocks: int) -> SlabQueue | None:
    """Block b's slab queue (on events 4 and 5; block b on core b % cores, as launch() places it) where the tiling
    prefetches, else None (one slab): ops.hpp WindowSlabs."""
    if not params.get("prefetch"):
        return None
    cores = max(1, min(blocks, core.p.cores_for("vector")))
    return SlabQueue(PingPongSim(core, "MTE2", "V", 4, 2, fresh=b < cores), (b // cores) % 2, b + cores >= blocks)


def window_block_prologue(core: SimCore, spec, rows_out: int, r0: int, dilation_h: int,
                          slabs: SlabQueue | None = None) -> None:
    """The block's slab: its padding (slab_padding) and its image rows GM->UB. The copy waits for the slab to be
    free: for the previous block's Vector work, or with `slabs` for the work of the core's block two before."""
    slab_rows = (rows_out - 1) * spec.sh + (spec.kh - 1) * dilation_h + 1
    img_row0 = r0 * spec.sh - spec.pt
    lo, hi = max(0, img_row0), min(spec.h, img_row0 + slab_rows)
    if slabs is not None:
        slabs.queue.acquire_for_write(slabs.slot)
    elif core.blocks > 0:
        core.wait_flag("V", "MTE2", 1)
    slab_padding(core, slab_rows, lo - img_row0, hi - img_row0, spec.w + spec.pl + spec.pr, spec.pl, spec.pr)
    if hi > lo:
        core.copy_gm(hi - lo, spec.w * 16, 2, "UB", src=0)


def window_rows_ready(core: SimCore, slabs: SlabQueue | None) -> None:
    """The Vector unit waits for the block's rows."""
    if slabs is None:
        core.set_flag("MTE2", "V", 0)
        core.wait_flag("MTE2", "V", 0)
    else:
        slabs.queue.written(slabs.slot)
        slabs.queue.acquire_for_read(slabs.slot)


def window_block_done(core: SimCore, slabs: SlabQueue | None) -> None:
    """The block's Vector work is done with its slab."""
    if slabs is None:
        core.set_flag("V", "MTE2", 1)
        return
    slabs.queue.released(slabs.slot)
    if slabs.last:
        slabs.queue.drain()


def store_row(core: SimCore, outq: PingPongSim, ro: int, fill, row: int) -> None:
    """One output row of a windowed kernel: the Vector unit fills a ping-pong UB row, MTE3 stores it."""
    q = outq.slot(ro)
    outq.acquire_for_write(q)
    fill()
    outq.written(q)
    outq.acquire_for_read(q)
    core.copy_ub_to_gm(1, row, 2)
    outq.released(q)


def activate_and_store(core: SimCore, spec, outq: PingPongSim, ro: int, row: int, residual: bool = False,
                       program: Sequence[str] = ()) -> None:
    """The end of a windowed Vector kernel's output row: + residual, clip or ReLU in fp32, the VecOps of a program
    epilogue (one pass), cast and store."""
    if residual:
        core.vec_flat(row, 64, [("Cast", True)])
        core.vec_flat(row, 64, [("Add", True)])
    if spec.clip_hi > 0:
        core.vec_flat(row, 64, [("Maxs", True), ("Mins", True)])
    if spec.relu:
        core.vec_flat(row, 64, [("Relu", True)])
    if program:
        core.vec_flat(row, 64, [(op, True) for op in program])
    store_row(core, outq, ro, lambda: core.vec_flat(row, 64, [("Cast", True)]), row)


def vec_flat_cycles(profile: Profile, n: int, lanes: int, op: str, fp32: bool) -> float:
    """V-pipe busy cycles of SimCore.vec_flat(n, lanes, [(op, fp32)]), without running it."""
    full, tail = divmod(n, lanes)
    whole, rest = divmod(full, 255)
    return (whole * vec_body(profile, op, fp32, 255) + (vec_body(profile, op, fp32, rest) if rest else 0.0)
            + (vec_body(profile, op, fp32, 1) if tail else 0.0))


class VectorPass(NamedTuple):
    """A conv's Vector pass as finish_rows runs it: UB tile (values), lanes and ops per element (pass_ops), the
    residual's input index (None: no residual)."""
    tile: int
    lanes: int
    ops: list[tuple[str, bool]]
    residual: int | None


def finish_rows(aiv: SimCore, vpass: VectorPass, m: int, n1_cnt: int, r0: int, r1: int) -> None:
    """conv2d_cube_img2col's finish_rows (its mixed epilogue) after the AIC's flag: rows [r0, r1) of a block's output
    tile (m pixels of one channel block each) on one AIV, whole rows per UB tile, ping-pong."""
    row, per = m * 16, vpass.tile // (m * 16)
    inq, outq = PingPongSim(aiv, "MTE2", "V", 0), PingPongSim(aiv, "V", "MTE3", 2)
    sources = [OUT] if vpass.residual is None else [OUT, vpass.residual]
    q, k = r0, 0
    while q < r1:
        cnt = min(per, r1 - q, n1_cnt - q % n1_cnt)  # one image's rows
        pingpong_tile(aiv, (inq, outq), inq.slot(k), row, [(row, src) for src in sources],
                      [(cnt * row, vpass.lanes, vpass.ops)], bursts=cnt)
        q, k = q + cnt, k + 1
    inq.drain()
    outq.drain()
