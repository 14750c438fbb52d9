"""gemm_cube: a GEMM (MatMul / Gemm, bias and activation fused) on the Cube, an M x N tile per block, K in L1
chunks of k1_step fractals (templates/gemm_cube.cpp.j2). Searched: the rule tiling, then the cost model's best."""
from __future__ import annotations

from collections.abc import Callable
from math import ceil
from typing import Any

from .. import KilnError
from ..cost.blocks import cube_drain, cube_k_loop, rows_load2d
from ..cost.model import Prediction, SimCore, launch
from ..ir.opspec import GemmSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, half16, r16, register
from .ranking import K_FRACTALS, TILE_EDGES, cube_grid, pick_best, step_sizes, wide_grid


def gemm_buffers(spec: GemmSpec, base_m: int, base_n: int, base_k1: int, k1_step: int) -> dict[str, int]:
    return {
        "L1": (2 * k1_step * (base_m // 16) * 512 + 2 * k1_step * (base_n // 16) * 512
               + (base_n * 4 if spec.bias else 0)),
        "L0A": 2 * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": (base_m // 16) * (base_n // 16) * 1024,
        "BT": base_n * 4 if spec.bias else 0,
    }


def gemm_rule(spec: GemmSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    K1, N1 = c1(spec.k), c1(spec.n)
    cores = profile.cores_for("cube")
    base_m, base_n, base_k1 = min(128, r16(spec.m)), min(256, N1 * 16), min(4, K1)

    def blocks(bm, bn):
        return ceil(spec.m / bm) * ceil(N1 * 16 / bn)
    before = blocks(base_m, base_n)
    while blocks(base_m, base_n) < cores and base_n > 64:
        base_n = half16(base_n)
    while blocks(base_m, base_n) < cores and base_m > 32:
        base_m = half16(base_m)
    if blocks(base_m, base_n) != before:
        log.add("tiling", spec.name, f"base_m={base_m},base_n={base_n}", "balance_cores",
                blocks_before=before, blocks=blocks(base_m, base_n), cores=cores)
    while spec.split and spec.split % base_n:  # an N tile writes into one sibling's result
        base_n -= 16
    k1_step = None
    for s in range(ceil(K1 / base_k1) * base_k1, 0, -base_k1):
        if fits(profile, gemm_buffers(spec, base_m, base_n, base_k1, s)) is None:
            k1_step = min(s, K1) if s >= K1 else s
            break
    if k1_step is None:
        raise KilnError("tiling", spec.name, f"no K step fits L1 of {profile.name}")
    p = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, k1_step=k1_step)
    if search:  # the rule's tiling is the baseline the search must beat
        p = search_gemm(spec, p, profile, log, gemm_buffers)
    return Variant("gemm_cube", p, blocks(p["base_m"], p["base_n"]),
                   gemm_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"]))


def gemm_mte2(spec: GemmSpec, v: Variant) -> int:
    p = v.params
    K1, N1 = c1(spec.k), c1(spec.n)
    total = 0
    for m0 in range(0, spec.m, p["base_m"]):
        m = min(p["base_m"], spec.m - m0)
        for n1 in range(0, N1, p["base_n"] // 16):
            n1c = min(p["base_n"] // 16, N1 - n1)
            for k1a in range(0, K1, p["k1_step"]):
                k1n = min(p["k1_step"], K1 - k1a)
                cols = min(k1n * 16, spec.k - k1a * 16)
                total += m * cols * 2 + k1n * n1c * 512
            total += n1c * 64 if spec.bias else 0
    return total


def replay_gemm(spec, params: dict, profile: Profile) -> Prediction:
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
            core.copy_gm(1, n1_cnt * 16, 4, "L1", src=2)
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(n1_cnt * 16)
        chunks = []
        for k1a in range(0, K1, step):
            k1n = min(step, K1 - k1a)
            cols = min(k1n * 16, spec.k - k1a * 16)
            chunks.append((k1n, [(1, m * cols, 0), (k1n, n1_cnt * 256, 1)]))
        cube_k_loop(core, m, n1_cnt * 16, chunks, bk1, (rows_load2d(core, m), lambda kc, k1n: [kc * n1_cnt]))
        cube_drain(core, m * n)

    def signature(b: int) -> tuple:  # what block b issues depends on (cost/steady.py): its tile's extent
        ni, mi = b % n_tiles, b // n_tiles
        n1_cnt = min(bn // 16, N1 - ni * (bn // 16))
        return min(bm, spec.m - mi * bm), n1_cnt, min(n1_cnt * 16, spec.n - ni * bn)

    return launch(profile, "cube", m_tiles * n_tiles, block, signature)


def search_gemm(spec: GemmSpec, rule_params: dict, profile: Profile, log: OptLog, buffers) -> dict:
    cands, fit = gemm_candidates(spec, profile, buffers)
    return pick_best(spec, "gemm_cube", rule_params, (cands, fit), profile, log)


def gemm_candidates(spec: GemmSpec, profile: Profile, buffers, edges=TILE_EDGES):
    """(every tiling candidate of a GEMM, the buffer-fit predicate)."""
    K1, N1 = c1(spec.k), c1(spec.n)
    cands = []
    for bm in edges:
        if bm > ceil(spec.m / 16) * 16 and bm != 16:
            continue
        for bn in edges:
            if (bn > N1 * 16 and bn != 16) or spec.split % bn:  # siblings: an N tile stays in one result
                continue
            for bk in K_FRACTALS:
                if bk > K1:
                    continue
                for step in step_sizes(K1):
                    if step % bk and step != K1:
                        continue
                    cands.append(dict(base_m=bm, base_n=bn, base_k1=bk, k1_step=step))

    def fit(p):
        bufs = buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"])
        return all(b <= profile.capacity[pos] for pos, b in bufs.items())
    return cands, fit


def from_params(spec: GemmSpec, profile: Profile, params: dict, source: str) -> tuple[dict, dict, int]:
    """A pinned or recorded tiling completed from the rule's, checked, with its buffers and blocks."""
    base = gemm_rule(spec, profile, OptLog())
    p = dict(base.params, **params)
    if spec.split and spec.split % p["base_n"]:
        raise KilnError("tiling", spec.name, f"{source}: base_n={p['base_n']} must divide the {spec.split} "
                        f"columns of each sibling result")
    bufs = gemm_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"])
    return p, bufs, ceil(spec.m / p["base_m"]) * ceil(c1(spec.n) * 16 / p["base_n"])


def tune_candidates(spec: GemmSpec, profile: Profile, edges) -> tuple[dict, list[dict], Callable]:
    return gemm_rule(spec, profile, OptLog()).params, *gemm_candidates(spec, profile, gemm_buffers, edges)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return cube_grid(spec, spec.m, c1(spec.n) * 16, c1(spec.k), gemm_buffers, profile)


def gemm_wide_space(family: str, bufs, n_edge: Callable[[Any], int]):
    """The wide grid of a GEMM-shaped family (gemm_cube, batched_gemm_cube)."""
    def wide(spec, params: dict, profile: Profile) -> list[dict]:
        K1 = c1(spec.k)

        def make(bm, bn, bk, step):
            if (step % bk and step != K1) or getattr(spec, "split", 0) % bn:  # siblings: a tile in one result
                return None
            p = dict(params, base_m=bm, base_n=bn, base_k1=bk, k1_step=step)
            return p if all(b <= profile.capacity[k] for k, b in bufs(spec, bm, bn, bk, step).items()) else None
        return wide_grid(spec, family, params, profile, (spec.m, n_edge(spec), K1, K1), "k1_step", make)
    return wide


FAMILY = register(Family("gemm_cube", "gemm", "cube", gemm_rule, gemm_mte2, replay_gemm, searched=True,
                tunable=("base_m", "base_n", "base_k1", "k1_step"), from_params=from_params, space=space,
                wide_space=gemm_wide_space("gemm_cube", gemm_buffers, lambda spec: c1(spec.n) * 16),
                candidates=tune_candidates))
