"""The tiling search with the models' L2 plans (issue 22 point 5): the build's search (codegen/select/tiling.py)
ranks each kernel called on its own, every GM read a miss; a model step reads most activations from L2 (the
L2 plan of codegen/passes/l2.py), where a core streams about three times as fast (docs/ascend-model.md section
12). So after the models are planned, each searched kernel that model steps launch is ranked again, its
family's candidates (the build search's grid and the off-grid tiles of `kiln optimize`'s wide grid, which
balance the blocks over the cores) by the sum of its steps' predicted cycles, each step with its own L2 hits, and
takes the winner's tiling (same family, so the same inputs and the same L2 plan). A kernel called on its own
(`kiln.kernel`) runs that tiling too; its own prediction stays the all-miss one.

One decision per kernel, logged: `[OPT] search KERNEL TAG reason=l2_plan steps=S before=B after=A`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..cost import model as cost
from ..families.base import predict
from ..families.ranking import EXACT_REPLAYS, TILE_EDGES
from ..families.registry import FAMILIES
from ..ir.opspec import Conv2dSpec, spec_hash
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .launches import attach_launches
from .plan import KernelPlan, ModelPlan
from .tiling import SIZE_DERIVED, variant_from_params


def _ranked_family(k: KernelPlan) -> bool:
    """The families re-ranked: those the build searches whose tilings `kiln optimize` also widens off the grid (the
    GEMM-shaped Cube families: any tiling reads the same inputs, so the L2 plan holds)."""
    f = FAMILIES[k.variant.family]
    return f.searched and f.wide_space is not None and f.candidates is not None


def _steps_hits(models: list[ModelPlan]) -> dict[int, tuple[KernelPlan, list[tuple[bool, ...]]]]:
    """Per kernel (by identity): the L2 hits of every model step that launches it."""
    out: dict[int, tuple[KernelPlan, list[tuple[bool, ...]]]] = {}
    for m in models:
        for i, k in m.step_kernels.items():
            out.setdefault(id(k), (k, []))[1].append(m.l2_hits[i])
    return out


def _chained(k: KernelPlan) -> bool:
    return isinstance(k.spec, Conv2dSpec) and k.spec.mid > 0


def _tiling(p: dict) -> dict:
    """What a tiling chooses (what the size derives aside; a missing l1_buffers is the default 2)."""
    return dict({n: v for n, v in p.items() if n not in SIZE_DERIVED}, l1_buffers=p.get("l1_buffers", 2))


def _ranked_params(k: KernelPlan, hits: list[tuple[bool, ...]], profile: Profile) -> tuple[dict, float, float]:
    """(the tiling with the fewest cycles over the steps, its cycles, the current tiling's cycles): every fitting
    candidate by a quick two-core replay per step, then the best few and the current one replayed exactly; a
    tiling slower than the family's rule tiling when the kernel is called on its own is passed over."""
    f = FAMILIES[k.variant.family]
    assert f.candidates is not None
    rule, cands, fit = f.candidates(k.spec, profile, TILE_EDGES)
    extra = {n: v for n, v in k.variant.params.items() if n in ("epi_tile", "on_chip")}
    # and the off-grid tiles (any multiple of 16: `kiln optimize`'s wide grid), which balance the blocks over
    # the cores and the weight re-reads where the powers of two cannot
    if f.wide_space and not _chained(k):  # (a chain's 1x1 is tiled by base_n2: its grid only)
        cands = cands + f.wide_space(k.spec, k.variant.params, profile)

    patterns = Counter(hits)  # steps with the same hits run alike: replayed once

    def cycles(p: dict, sample: bool) -> float:
        return sum(n * cost.run(f.replay, k.spec, p, profile, sample, h).cycles for h, n in patterns.items())

    current = dict(k.variant.params)
    quick = sorted((dict(p, **extra) for p in cands if fit(p)),
                   key=lambda p: (cycles(p, True), sorted(p.items())))
    finalists = [current] + [p for p in quick[:EXACT_REPLAYS] if _tiling(p) != _tiling(current)]
    exact = sorted(((cycles(p, False), i, p) for i, p in enumerate(finalists)), key=lambda e: (e[0], e[1]))
    before = next(c for c, i, _ in exact if i == 0)
    # called on its own (every read a miss), the kernel stays no slower than its family's rule tiling, as the
    # build search guarantees (tests/codegen/cost/test_costmodel.py): the fastest finalist that keeps that
    alone = cost.run(f.replay, k.spec, dict(rule, **extra), profile).cycles
    c, _, p = next(e for e in exact if e[1] == 0 or cost.run(f.replay, k.spec, e[2], profile).cycles <= alone)
    return p, c, before


def rank_with_l2_plans(models: list[ModelPlan], profile: Profile, log: OptLog, options, records: dict) -> None:
    """Re-ranks the searched Cube kernels of `models` with their steps' L2 hits (module doc); a kernel whose
    tiling changes gets the new variant and prediction, and the models' launches are predicted again."""
    if options.kiln_opt_level == "O0" or not models:
        return
    changed = False
    for k, hits in _steps_hits(models).values():
        if (not _ranked_family(k) or k.pinned or k.pinned_tiling
                or spec_hash(k.spec) in records):
            continue
        best, after, before = _ranked_params(k, hits, profile)
        if after >= before:
            continue
        f = FAMILIES[k.variant.family]
        want = {n: best[n] for n in (*f.tunable, *f.searched_extra) if n in best}
        v = replace(variant_from_params(k.spec, profile, k.variant.family, want, "l2 search", whole=True),
                    notes=k.variant.notes)  # the algorithm comparison, as the search made it
        log.add("search", k.spec.name, v.tag, "l2_plan", steps=len(hits), before=round(before), after=round(after),
                replaced=k.variant.tag)
        k.variant = v
        k.prediction = predict(k.spec, v.family, v.params, profile)
        changed = True
    if changed:
        for m in models:
            m.l2_hits.clear()
            m.launches.clear()
            attach_launches(m, profile, OptLog())  # the same L2 plan (same inputs): logged once already
