"""Variant search for the Cube families: tilings ranked by the pipe cost model.

For a direct convolution or a GEMM, every combination of the template's tiling parameters
(baseM, baseN, baseK and the L1 step) is a candidate; those whose buffers (double-buffered) do not
fit the profile are pruned, the rest are ranked by a quick two-core replay of the cost model, and the
best few are replayed exactly. The foundation's rule tiling is always among the exact replays, so the
chosen variant is never predicted slower than it. One log line per kernel gives the counts and cycles.
"""
from __future__ import annotations

from math import ceil

from ..cost import model as costmodel
from ..ir.opspec import Conv2dSpec, GemmSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile

TILE_EDGES = (16, 32, 64, 128, 256)
ALL_EDGES = tuple(range(16, 257, 16))  # every fractal multiple: the exhaustive search of `kiln optimize`
K_FRACTALS = (1, 2, 4, 8)
EXACT_REPLAYS = 6  # candidates replayed on every core after the quick ranking


def _steps(total: int) -> list[int]:
    """L1 step sizes worth trying for `total` K blocks: powers of two below it, and all of it."""
    out, s = [], 1
    while s < total:
        out.append(s)
        s *= 2
    return out + [total]


def ranked(spec, family: str, rule_params: dict, cands: list[dict], fit, profile: Profile,
           replays: int = EXACT_REPLAYS) -> tuple[list[tuple[float, dict]], int]:
    """(exact cycles, params) of the rule and the best `replays` quick-ranked candidates, fastest first; and
    how many candidates fit the buffers."""
    fitting = [p for p in cands if fit(p)]
    quick = sorted(fitting, key=lambda p: (costmodel.predict(spec, family, p, profile, sample=True).cycles,
                                           sorted(p.items())))
    finalists = [rule_params] + [p for p in quick[:replays] if p != rule_params]
    exact = [(costmodel.predict(spec, family, p, profile).cycles, i, p) for i, p in enumerate(finalists)]
    exact.sort(key=lambda e: (e[0], e[1]))
    return [(c, p) for c, _, p in exact], len(fitting)


def _pick(spec, family: str, rule_params: dict, cands: list[dict], fit, profile: Profile, log: OptLog,
          total: int, partition=None) -> dict:
    """The candidate with the fewest exactly replayed cycles (the rule is always replayed). partition(params):
    the L1 bytes of the winner's feature-map and weight chunks, logged as shares of L1."""
    exact, fitting = ranked(spec, family, rule_params, cands, fit, profile)
    best_cycles, best = exact[0]
    rule_cycles = next(c for c, p in exact if p is rule_params)
    from ..select.tiling import PARAM_LETTER
    shares = {}
    if partition is not None:  # the seeds' CONV_CACHE_RATIO / DATA_CACHE_RATIO, as the search arrived at them
        fm, w = partition(best)
        shares = dict(l1_data_share=round(fm / profile.capacity["L1"], 3),
                      l1_weight_share=round(w / profile.capacity["L1"], 3))
    log.add("search", spec.name, family + "_" + "".join(f"{PARAM_LETTER[k]}{v}" for k, v in best.items()),
            "cost_model", candidates=total, fitting=fitting, replayed=len(exact),
            rule_cycles=round(rule_cycles), best_cycles=round(best_cycles), **shares)
    return best


def conv_l1_partition(spec: Conv2dSpec, p: dict) -> tuple[int, int]:
    """L1 bytes of a direct-conv tiling's feature-map slabs and weight chunks (both buffers)."""
    from ..select.tiling import conv_slab_elems
    bufs, step = p.get("l1_buffers", 2), p["c1_step"]
    return (bufs * step * conv_slab_elems(spec, p["base_m"]) * 2,
            bufs * step * spec.kh * spec.kw * (p["base_n"] // 16) * 512)


def search_conv(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog, buffers) -> dict:
    """Tiling of conv2d_cube_img2col: base_m x base_n x base_k1 x c1_step; `buffers(spec, m, n, k1, step)`
    gives the on-chip bytes of a candidate (tiling's own accounting)."""
    cands, fit = conv_candidates(spec, rule_params, profile, buffers)
    return _pick(spec, "conv2d_cube_img2col", rule_params, cands, fit, profile, log, len(cands),
                 lambda p: conv_l1_partition(spec, p))


def conv_candidates(spec: Conv2dSpec, rule_params: dict, profile: Profile, buffers, edges=TILE_EDGES):
    """(every tiling candidate of a direct conv, the buffer-fit predicate)."""
    from ..select.tiling import conv_tile_rows
    M, C1, CO1 = spec.ho * spec.wo, c1(spec.cin), c1(spec.cout)
    K1 = C1 * spec.kh * spec.kw
    extra = {k: v for k, v in rule_params.items() if k in ("epi_tile", "on_chip")}
    cands = []
    for bm in edges:
        if bm > ceil(M / 16) * 16 and bm != 16:
            continue
        for bn in edges:
            if bn > CO1 * 16 and bn != 16:
                continue
            for bk in K_FRACTALS:
                if bk > K1:
                    continue
                for step in _steps(C1):
                    rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
                    cands.append(dict(base_m=bm, base_n=bn, base_k1=bk, c1_step=step, slab_rows=rows, **extra))
                    # single-buffered L1 (no overlap of the next chunk's load): only worth it for a chunk
                    # that does not fit double-buffered, which the fit predicate decides
                    cands.append(dict(base_m=bm, base_n=bn, base_k1=bk, c1_step=step, slab_rows=rows, **extra,
                                      l1_buffers=1))

    def fit(p):
        bufs = buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["c1_step"], p.get("l1_buffers", 2))
        return all(b <= profile.capacity[pos] for pos, b in bufs.items())
    return cands, fit


def search_gemm(spec: GemmSpec, rule_params: dict, profile: Profile, log: OptLog, buffers) -> dict:
    cands, fit = gemm_candidates(spec, profile, buffers)
    return _pick(spec, "gemm_cube", rule_params, cands, fit, profile, log, len(cands))


def gemm_candidates(spec: GemmSpec, profile: Profile, buffers, edges=TILE_EDGES):
    """(every tiling candidate of a GEMM, the buffer-fit predicate)."""
    K1, N1 = c1(spec.k), c1(spec.n)
    cands = []
    for bm in edges:
        if bm > ceil(spec.m / 16) * 16 and bm != 16:
            continue
        for bn in edges:
            if bn > N1 * 16 and bn != 16 or spec.split % bn:  # siblings: an N tile stays in one result
                continue
            for bk in K_FRACTALS:
                if bk > K1:
                    continue
                for step in _steps(K1):
                    if step % bk and step != K1:
                        continue
                    cands.append(dict(base_m=bm, base_n=bn, base_k1=bk, k1_step=step))

    def fit(p):
        bufs = buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"])
        return all(b <= profile.capacity[pos] for pos, b in bufs.items())
    return cands, fit


def top_candidates(spec, family: str, profile: Profile, k: int, exhaustive: bool = False) -> list[tuple[float, dict]]:
    """The k fastest tilings of a direct conv or GEMM by the cost model (for `kiln tune` to measure);
    exhaustive=True also tries every multiple of 16 for baseM/baseN and replays every fitting candidate
    exactly instead of the quick-ranked few (`kiln optimize`)."""
    from ..select import tiling
    from ..ir.optlog import OptLog
    edges = ALL_EDGES if exhaustive else TILE_EDGES
    if family == "gemm_cube":
        rule = tiling._gemm_variant(spec, profile, OptLog()).params
        cands, fit = gemm_candidates(spec, profile, tiling._gemm_buffers, edges)
    else:
        rule = tiling._conv_variant(spec, profile, OptLog()).params
        cands, fit = conv_candidates(spec, rule, profile, tiling._conv_buffers, edges)
    return ranked(spec, family, rule, cands, fit, profile,
                  replays=len(cands) if exhaustive else max(k, EXACT_REPLAYS))[0][:k]


def search_winograd(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog, gemm_buffers,
                    vector_ub) -> dict:
    """Tiling of conv2d_winograd: the GEMM phase (base_m x base_n x base_k1 x c1_step, ranked on that phase
    alone) and the Vector passes (tiles per step x channel blocks per block, on phases 1 and 3)."""
    from ..select.tiling import winograd_geometry
    g = winograd_geometry(spec, rule_params["tile"])
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    p = dict(rule_params)

    def phase_cycles(params, which, sample):
        return costmodel.winograd_phases(spec, params, profile, which, sample).cycles

    gemm = []
    for bm in TILE_EDGES:
        if bm > ceil(g.p / 16) * 16 and bm != 16:
            continue
        for bn in TILE_EDGES:
            if bn > CO1 * 16 and bn != 16:
                continue
            for bk in K_FRACTALS:
                if bk > C1:
                    continue
                for step in _steps(C1):
                    cand = dict(p, base_m=bm, base_n=bn, base_k1=bk, c1_step=step)
                    bufs = gemm_buffers(bm, bn, bk, step)
                    if all(b <= profile.capacity[pos] for pos, b in bufs.items()):
                        gemm.append(cand)
    vec = []
    for tb in range(4, min(64, ceil(g.tw / 4) * 4) + 1, 4):
        if vector_ub(tb) > profile.capacity["UB"]:
            continue
        for cb in sorted({1, 2, 4, 8, C1} & set(range(1, C1 + 1))):
            for ob in sorted({1, 2, 4, 8, CO1} & set(range(1, CO1 + 1))):
                vec.append(dict(tile_batch=tb, c1_block=cb, co1_block=ob))
    quick = sorted(gemm, key=lambda c: (phase_cycles(c, (2,), True), sorted(c.items())))[:EXACT_REPLAYS]
    best_gemm = min([p] + quick, key=lambda c: phase_cycles(c, (2,), False))
    quickv = sorted(vec, key=lambda v: (phase_cycles(dict(p, **v), (1, 3), True), sorted(v.items())))[:EXACT_REPLAYS]
    best_vec = min([{k: p[k] for k in ("tile_batch", "c1_block", "co1_block")}] + quickv,
                   key=lambda v: phase_cycles(dict(p, **v), (1, 3), False))
    best = dict(p, **{k: best_gemm[k] for k in ("base_m", "base_n", "base_k1", "c1_step")}, **best_vec)
    rule_cycles = costmodel.predict(spec, "conv2d_winograd", p, profile).cycles
    best_cycles = costmodel.predict(spec, "conv2d_winograd", best, profile).cycles
    if best_cycles > rule_cycles:  # cannot happen when the phases are independent; keep the rule if it does
        best, best_cycles = p, rule_cycles
    from ..select.tiling import PARAM_LETTER
    log.add("search", spec.name, "conv2d_winograd_" + "".join(f"{PARAM_LETTER[k]}{v}" for k, v in best.items()),
            "cost_model", candidates=len(gemm) + len(vec), fitting=len(gemm) + len(vec),
            replayed=2 * (len(quick) + 1 + len(quickv) + 1), rule_cycles=round(rule_cycles),
            best_cycles=round(best_cycles))
    return best


def search_chain(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog) -> dict:
    """Tiling of a chained conv (window conv -> 1x1, intermediate in L1): base_m x base_k1 x c1_step of the
    window conv, base_n2 x base_k2 of the 1x1; one block per M tile."""
    from ..select.tiling import chain_buffers, conv_tile_rows
    M, C1 = spec.ho * spec.wo, c1(spec.cin)
    K1, MID1, CO1 = C1 * spec.kh * spec.kw, c1(spec.mid), c1(spec.cout)
    extra = {k: v for k, v in rule_params.items() if k == "epi_tile"}
    cands = []
    for bm in TILE_EDGES:
        if bm > ceil(M / 16) * 16 and bm != 16:
            continue
        rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
        for bk in (k for k in K_FRACTALS if k <= K1):
            for step in _steps(C1):
                for bn2 in (e for e in TILE_EDGES if e <= CO1 * 16 or e == 16):
                    n_chunks = ceil(CO1 / (bn2 // 16))
                    for bk2 in (k for k in K_FRACTALS if k <= MID1):
                        for split in (z for z in (1, 2, 4, 8) if z <= n_chunks):
                            cands.append(dict(base_m=bm, base_k1=bk, c1_step=step, base_n2=bn2, base_k2=bk2,
                                              n_split=split, slab_rows=rows, **extra))

    def fit(p):
        bufs = chain_buffers(spec, p["base_m"], p["base_k1"], p["c1_step"], p["base_n2"], p["base_k2"])
        return all(b <= profile.capacity[pos] for pos, b in bufs.items())
    return _pick(spec, "conv2d_cube_img2col", rule_params, cands, fit, profile, log, len(cands))
