"""Ranking tiling candidates by the families' cost-model replays: a quick two-core replay of every candidate,
then an exact replay of the best few (codegen/families/base.py predict)."""
from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from math import ceil

from ..cost import model as cost
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import FAMILIES, predicted_cycles, tag_of

TILE_EDGES = (16, 32, 64, 128, 256)
ALL_EDGES = tuple(range(16, 257, 16))  # every fractal multiple: the exhaustive search of `kiln optimize`
K_FRACTALS = (1, 2, 4, 8)
EXACT_REPLAYS = 6  # candidates replayed on every core after the quick ranking


def step_sizes(total: int) -> list[int]:
    """L1 step sizes worth trying for `total` K blocks: powers of two below it, and all of it."""
    out, s = [], 1
    while s < total:
        out.append(s)
        s *= 2
    return out + [total]


def best_quick(cands: Sequence, quick: Callable, low: Callable, keep: int, tie: Callable) -> list:
    """sorted(cands, key=lambda c: (quick(c), tie(c)))[:keep], with quick(c) computed only for the candidates that
    can be among them: every candidate's lower bound low(c) <= quick(c) first (a cheap replay: cost/model.py
    launch_bound), then quick in the bounds' order until the next bound exceeds the keep-th best quick figure
    (every candidate left is slower than all kept, so the kept ones and their order are the full sort's)."""
    bounds = [low(c) for c in cands]
    best: list[tuple] = []
    for i in sorted(range(len(cands)), key=bounds.__getitem__):
        if len(best) >= keep and bounds[i] * (1 - 1e-9) - 1e-6 > best[keep - 1][0]:
            break  # (the margin: the bound adds busy cycles in another order than the replay, a few ulps apart)
        insort(best, (quick(cands[i]), tie(cands[i]), i))
    return [cands[i] for *_, i in best[:keep]]


def ranked(spec, family: str, rule_params: dict, cands: list[dict], fit, profile: Profile,
           replays: int = EXACT_REPLAYS) -> tuple[list[tuple[float, dict]], int]:
    """(exact cycles, params) of the rule and the best `replays` quick-ranked candidates, fastest first; and
    how many candidates fit the buffers."""
    fitting = [p for p in cands if fit(p)]
    replay = FAMILIES[family].replay
    quick = best_quick(fitting, lambda p: predicted_cycles(spec, family, p, profile, sample=True),
                       lambda p: cost.run_bound(replay, spec, p, profile, sample=True), replays,
                       lambda p: sorted(p.items()))
    finish = FAMILIES[family].finalist
    finalists = [rule_params] + [q for q in (finish(spec, p, profile) if finish else p for p in quick)
                                 if q != rule_params]
    exact = [(predicted_cycles(spec, family, p, profile), i, p) for i, p in enumerate(finalists)]
    exact.sort(key=lambda e: (e[0], e[1]))
    return [(c, p) for c, _, p in exact], len(fitting)


def pick_best(spec, family: str, rule_params: dict, space: tuple[list[dict], Callable], profile: Profile,
              log: OptLog, partition=None) -> dict:
    """The candidate with the fewest exactly replayed cycles (the rule is always replayed). partition(params):
    the L1 bytes of the winner's feature-map and weight chunks, logged as shares of L1."""
    cands, fit = space
    exact, fitting = ranked(spec, family, rule_params, cands, fit, profile)
    best_cycles, best = exact[0]
    rule_cycles = next(c for c, p in exact if p is rule_params)
    shares = {}
    if partition is not None:  # the seeds' CONV_CACHE_RATIO / DATA_CACHE_RATIO, as the search arrived at them
        fm, w = partition(best)
        shares = dict(l1_data_share=round(fm / profile.capacity["L1"], 3),
                      l1_weight_share=round(w / profile.capacity["L1"], 3))
    log.add("search", spec.name, tag_of(family, best),
            "cost_model", candidates=len(cands), fitting=fitting, replayed=len(exact),
            rule_cycles=round(rule_cycles), best_cycles=round(best_cycles), **shares)
    return best


WIDE_PAIRS = 8  # (base_m, base_n) pairs off the power-of-two grid whose K blocking is explored


def cube_grid(spec, m: int, n_edge: int, k1: int, bufs, profile: Profile) -> list[dict]:
    """GEMM-shaped tilings on the power-of-two grid that fit (the build search's grid; `kiln optimize`)."""
    out = []
    for bm in TILE_EDGES:
        if bm > ceil(m / 16) * 16 and bm != 16:
            continue
        for bn in TILE_EDGES:
            if bn > n_edge and bn != 16:
                continue
            for bk in K_FRACTALS:
                if bk > k1:
                    continue
                for step in step_sizes(k1):
                    if step % bk and step != k1:
                        continue
                    if all(b <= profile.capacity[pos] for pos, b in bufs(spec, bm, bn, bk, step).items()):
                        out.append(dict(base_m=bm, base_n=bn, base_k1=bk, k1_step=step))
    return out


def wide_grid(spec, family: str, params: dict, profile: Profile, dims: tuple[int, int, int, int], kstep: str,
              make) -> list[dict]:
    """Cube tilings with base_m/base_n any multiple of 16 (the build's search tries powers of two): every
    (base_m, base_n) pair ranked by the quick replay with the kernel's K blocking (or the largest L1 step that
    fits), then the best pairs with every base_k1 and L1 step. dims: (M, N, K1, L1 steps of); make(bm, bn, bk,
    step): the tiling, or None where it does not fit."""
    M, N, K1, steps_of = dims
    bk0 = min(params["base_k1"], K1)
    pairs = []
    for bm in range(16, min(256, ceil(M / 16) * 16) + 1, 16):
        for bn in range(16, min(256, N) + 1, 16):
            p = next((q for step in sorted(step_sizes(steps_of), key=lambda s: (s != params[kstep], -s))
                      if (q := make(bm, bn, bk0, step)) is not None), None)
            if p is not None:
                pairs.append((bm, bn, p))
    replay = FAMILIES[family].replay
    out = []
    for bm, bn, _ in best_quick(pairs, lambda t: predicted_cycles(spec, family, t[2], profile, sample=True),
                                lambda t: cost.run_bound(replay, spec, t[2], profile, sample=True),
                                WIDE_PAIRS, lambda t: t[:2]):
        for bk in K_FRACTALS:
            if bk > K1:
                continue
            for step in step_sizes(steps_of):
                p = make(bm, bn, bk, step)
                if p is not None and p != params:
                    out.append(p)
    return out
