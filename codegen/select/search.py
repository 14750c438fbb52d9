"""Variant search for the Cube families: tilings ranked by the pipe cost model.

For a direct convolution or a GEMM, every combination of the template's tiling parameters
(baseM, baseN, baseK and the L1 step) is a candidate; those whose buffers (double-buffered) do not
fit the profile are pruned, the rest are ranked by a quick two-core replay of the cost model, and the
best few are replayed exactly. The foundation's rule tiling is always among the exact replays, so the
chosen variant is never predicted slower than it. One log line per kernel gives the counts and cycles.
The build runs it inside each searched family's rule (codegen/families/ranking.py); this module is the
entry point of `kiln tune` and `kiln optimize`.
"""
from __future__ import annotations

from ..families.ranking import ALL_EDGES, EXACT_REPLAYS, TILE_EDGES, ranked
from ..families.registry import FAMILIES
from ..ir.profiles import Profile


def top_candidates(spec, family: str, profile: Profile, k: int, exhaustive: bool = False) -> list[tuple[float, dict]]:
    """The k fastest tilings of a searched family (a direct conv or GEMM) by the cost model (for `kiln tune` to
    measure); exhaustive=True also tries every multiple of 16 for baseM/baseN and replays every fitting candidate
    exactly instead of the quick-ranked few (`kiln optimize`)."""
    edges = ALL_EDGES if exhaustive else TILE_EDGES
    candidates = FAMILIES[family].candidates
    assert candidates is not None, f"{family} has no candidate space"  # kiln tune offers only those that do
    rule, cands, fit = candidates(spec, profile, edges)
    return ranked(spec, family, rule, cands, fit, profile,
                  replays=len(cands) if exhaustive else max(k, EXACT_REPLAYS))[0][:k]
