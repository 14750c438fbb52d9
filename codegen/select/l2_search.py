"""The tiling search with the models' L2 plans (issue 22 point 5): the build's search (codegen/select/tiling.py)
ranks each kernel called on its own, every GM read a miss; a model step reads most activations from L2 (the
L2 plan of codegen/passes/l2.py), where a core streams about three times as fast (docs/ascend-model.md section
12). So after the models are planned, each searched kernel that model steps launch is ranked again, its
family's candidates (the build search's grid and the off-grid tiles of `kiln optimize`'s wide grid, which
balance the blocks over the cores) by the sum of its steps' predicted cycles, each step with its own L2 hits, and
takes the winner's tiling (same family, so the same inputs and the same L2 plan). A kernel called on its own
(`kiln.kernel`) runs that tiling too; its own prediction stays the all-miss one.

What it costs (issue 22 point 6): a kernel's result depends only on its spec, its current variant, the
profile, its steps' hit patterns (with their counts) and the cost model, so it is kept under a key of those
and the codegen's sources: in this process (a test session plans the zoo many times) and in the build's search
cache (codegen/select/search_cache.py: a reconfigure or a second build reuses it; an entry made under another
COST_MODEL_VERSION is never read). Kernels not found are ranked in the search's worker processes. The exact
replays the ranking made are the launches' and the kernel's predictions: nothing is replayed again.

One decision per kernel, logged: `[OPT] search KERNEL TAG reason=l2_plan steps=S before=B after=A`.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, replace

from ..cost import model as cost
from ..families.base import RULE_DERIVED, Variant, input_bytes
from ..families.ranking import EXACT_REPLAYS, TILE_EDGES, best_quick
from ..families.registry import FAMILIES
from ..ir.opspec import spec_hash
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .launches import kernel_reads, prediction_record
from .plan import KernelPlan, ModelPlan
from .search_cache import SearchCache, SearchSetup, parallel_map
from .tiling import SIZE_DERIVED, variant_from_params

FINALISTS = EXACT_REPLAYS  # quick-ranked candidates replayed exactly
SHAPES = 6  # tile shapes whose every K blocking is quick-ranked
K_BLOCKING = ("base_k1", "c1_step", "k1_step", "base_k2")  # what a tiling's K loop is blocked by
Hits = tuple[bool, ...]


@dataclass(frozen=True)
class Reranked:
    """A kernel's re-ranking: the winner's variant (None: the current one stays), the steps' cycles before and after,
    and, for a new tiling, its own (all-miss) prediction and its prediction per hit pattern."""
    variant: Variant | None
    before: float
    after: float
    alone: cost.Prediction | None = None
    launches: tuple[tuple[Hits, cost.Prediction], ...] = ()


_SESSION: dict[str, Reranked] = {}  # this process's results by key (tests plan the zoo many times)


def _ranked_family(k: KernelPlan) -> bool:
    """The families re-ranked: those the build searches whose tilings `kiln optimize` also widens off the grid (the
    GEMM-shaped Cube families: any tiling reads the same inputs, so the L2 plan holds)."""
    f = FAMILIES[k.variant.family]
    return f.searched and f.wide_space is not None and f.candidates is not None


def _tiling(p: dict) -> dict:
    """What a tiling chooses (what the size derives aside; a missing l1_buffers is the default 2)."""
    return dict({n: v for n, v in p.items() if n not in SIZE_DERIVED}, l1_buffers=p.get("l1_buffers", 2))


def _key(k: KernelPlan, patterns: Counter, profile: Profile, digest: str) -> str:
    text = "\n".join([digest, cost.COST_MODEL_VERSION, type(k.spec).__name__, repr(k.spec), repr(profile),
                      k.variant.family, repr(sorted(k.variant.params.items())), repr(sorted(patterns.items()))])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def rerank(k: KernelPlan, patterns: Counter, profile: Profile) -> Reranked:
    """The tiling with the fewest cycles over the steps (`patterns`: each hit pattern with its number of steps):
    every fitting candidate by a quick two-core replay per pattern, then the best few replayed exactly, against
    the current tiling's exact cycles (a tie keeps it); a tiling slower than the family's rule tiling when the
    kernel is called on its own is passed over."""
    f = FAMILIES[k.variant.family]
    assert f.candidates is not None
    rule, cands, fit = f.candidates(k.spec, profile, TILE_EDGES)
    extra = {n: v for n, v in k.variant.params.items() if n in RULE_DERIVED}
    # and the off-grid tiles (any multiple of 16: `kiln optimize`'s wide grid), which balance the blocks over
    # the cores and the weight re-reads where the powers of two cannot
    if f.wide_space:  # (a chain's: its M tiles off the grid, its 1x1 tiled as the kernel's)
        cands = cands + f.wide_space(k.spec, k.variant.params, profile)

    sizes = input_bytes(k.spec, f, k.variant.params)  # the tilings searched here keep the kernel's inputs

    def run(p: dict, hits: Hits | None, sample: bool = False) -> cost.Prediction:
        return cost.run(f.replay, k.spec, p, profile, sample, None if hits is None else cost.L2Plan(hits, sizes))

    current = _tiling(k.variant.params)
    before = sum(n * run(k.variant.params, h).cycles for h, n in patterns.items())
    quick = _quick_ranked([dict(p, **extra) for p in cands if fit(p) and _tiling(dict(p, **extra)) != current],
                          k.variant.params, lambda p: sum(n * run(p, h, True).cycles for h, n in patterns.items()),
                          lambda p: sum(n * cost.run_bound(f.replay, k.spec, p, profile, True, cost.L2Plan(h, sizes))
                                        for h, n in patterns.items()))
    exact = []
    for i, p in enumerate(quick):
        p = f.finalist(k.spec, p, profile) if f.finalist else p
        want = {n: p[n] for n in (*f.tunable, *f.searched_extra) if n in p}
        v = variant_from_params(k.spec, profile, k.variant.family, want, "l2 search", whole=True)
        preds = tuple((h, run(v.params, h)) for h in patterns)  # the tiling as it bakes
        exact.append((sum(patterns[h] * q.cycles for h, q in preds), i, v, preds))
    # called on its own (every read a miss), the kernel stays no slower than its family's rule tiling, as the
    # build search guarantees (tests/codegen/cost/test_costmodel.py): the fastest finalist that keeps that
    alone_rule = None
    for c, _, v, preds in sorted(exact, key=lambda e: (e[0], e[1])):
        if c >= before:
            break
        alone = run(v.params, None)
        alone_rule = alone_rule if alone_rule is not None else (
            k.prediction.cycles if k.prediction is not None and _tiling(dict(rule, **extra)) == current
            else run(dict(rule, **extra), None).cycles)
        if alone.cycles <= alone_rule:
            return Reranked(replace(v, notes=k.variant.notes), before, c, alone, preds)  # notes: the algorithm
            # comparison, as the build's search made it
    return Reranked(None, before, before)


def _quick_ranked(cands: list[dict], current: dict, quick, low) -> list[dict]:
    """The FINALISTS best of `cands` by their quick cycles (`quick(p)`; low(p) <= quick(p), a cheap bound that
    spares the replays of candidates that cannot be among them: ranking.best_quick), in two stages: the tile
    shapes (a tiling but its K blocking) each by one member, the one whose K blocking is nearest the current
    tiling's; then every member of the best SHAPES shapes and of the current one (a shape's K blockings differ by
    a few percent, its tiles by far more)."""
    shapes: dict[tuple, list[dict]] = {}
    for p in cands:
        shapes.setdefault(tuple(sorted((n, v) for n, v in p.items() if n not in K_BLOCKING)), []).append(p)
    cycles: dict[tuple, float] = {}

    def of(p: dict) -> float:
        key = tuple(sorted(p.items()))
        if key not in cycles:
            cycles[key] = quick(p)
        return cycles[key]

    def nearest(p: dict) -> tuple:
        return tuple((p.get(n) != current.get(n), -p.get(n, 0)) for n in K_BLOCKING)
    reps = [(shape, min(ps, key=nearest)) for shape, ps in shapes.items()]
    best = best_quick(reps, lambda s: of(s[1]), lambda s: low(s[1]), SHAPES, lambda s: sorted(s[1].items()))
    names = {n for shape in shapes for n, _ in shape}
    mine = tuple(sorted((n, v) for n, v in current.items() if n in names))
    keep = [shapes[shape] for shape, _ in best] + ([shapes[mine]] if mine in shapes and
                                                  all(shape != mine for shape, _ in best) else [])
    return best_quick([p for ps in keep for p in ps], of, low, FINALISTS, lambda p: sorted(p.items()))


def _kernels_steps(models: list[ModelPlan]) -> dict[int, tuple[KernelPlan, list[tuple[ModelPlan, int]]]]:
    """Per kernel (by identity): the model steps that launch it."""
    out: dict[int, tuple[KernelPlan, list[tuple[ModelPlan, int]]]] = {}
    for m in models:
        for i, k in m.step_kernels.items():
            out.setdefault(id(k), (k, []))[1].append((m, i))
    return out


def rank_with_l2_plans(models: list[ModelPlan], profile: Profile, log: OptLog, options, records: dict,
                       setup: SearchSetup | None = None) -> None:
    """Re-ranks the searched Cube kernels of `models` with their steps' L2 hits (module doc); a kernel whose
    tiling changes gets the new variant and prediction, and its steps their launches with it."""
    if options.kiln_opt_level == "O0" or not models:
        return
    setup = setup or SearchSetup()
    cache = SearchCache(setup.cache_dir) if setup.cache_dir is not None else None
    digest = cache.digest if cache else "session"
    todo = []
    for k, steps in _kernels_steps(models).values():
        if not _ranked_family(k) or k.pinned or k.pinned_tiling or spec_hash(k.spec) in records:
            continue
        patterns = Counter(m.l2_hits[i] for m, i in steps)  # steps with the same hits run alike: replayed once
        if any(m.launches[i] is None for m, i in steps):
            continue
        key = _key(k, patterns, profile, "session")
        found = _SESSION.get(key) or (cache.get_l2(_key(k, patterns, profile, digest)) if cache else None)
        todo.append((k, steps, patterns, key, found))
    missing = [t for t in todo if t[4] is None]
    ranked = iter(parallel_map(rerank, [(k, patterns, profile) for k, _, patterns, _, _ in missing], setup.jobs))
    for k, steps, patterns, key, found in todo:
        r = found if found is not None else next(ranked)
        _SESSION[key] = r
        if found is None and cache:
            cache.put_l2(_key(k, patterns, profile, digest), r)
        if r.variant is not None:
            _apply(k, steps, r, log, profile)


def _apply(k: KernelPlan, steps: list[tuple[ModelPlan, int]], r: Reranked, log: OptLog, profile: Profile) -> None:
    """Kernel k takes the re-ranked tiling: its variant, its own prediction and its steps' launches and reads (the
    same inputs, so the same L2 plan: checked)."""
    v = r.variant
    assert v is not None
    log.add("search", k.spec.name, v.tag, "l2_plan", steps=len(steps), before=round(r.before),
            after=round(r.after), replaced=k.variant.tag)
    inputs = [t.nbytes for t in k.inputs]
    k.variant, k.prediction = v, r.alone
    assert [t.nbytes for t in k.inputs] == inputs, f"{k.spec.name}: a re-ranked tiling changed the kernel's inputs"
    launches = {h: prediction_record(p) for h, p in r.launches}
    reads = kernel_reads(k, profile)
    for m, i in steps:
        m.launches[i] = launches[m.l2_hits[i]]
        if reads is not None:
            m.l2_reads[i] = reads
