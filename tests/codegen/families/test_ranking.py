"""The rankings' candidate pruning (codegen/families/ranking.py best_quick): the kept candidates and their order are
exactly the full sort's, with the quick figure computed only where a candidate's lower bound lets it compete; and
the tiling search picks the same variants as with the full sort. Cost model only (no build)."""
import random

import pytest

from codegen.families import ranking
from codegen.ir.opspec import Conv2dSpec, GemmSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES
from codegen.options import parse_options
from codegen.select.tiling import choose_variant


def _full_sort(cands, quick, low, keep, tie):
    return sorted(cands, key=lambda c: (quick(c), tie(c)))[:keep]


@pytest.mark.parametrize("seed", range(20))
def test_best_quick_equals_the_full_sort(seed):
    rng = random.Random(seed)
    cands = [(rng.choice([10.0, 20.0, 30.0]) + rng.randrange(50), i) for i in range(rng.randrange(1, 60))]
    quick_of = {c: c[0] + rng.choice([0.0, 0.0, 5.0, 40.0]) for c in cands}  # ties, tight and loose bounds
    computed = []

    def quick(c):
        computed.append(c)
        return quick_of[c]
    keep = rng.randrange(1, 8)
    got = ranking.best_quick(cands, quick, lambda c: c[0], keep, lambda c: -c[1])
    assert got == _full_sort(cands, quick_of.__getitem__, None, keep, lambda c: -c[1])
    assert len(computed) == len(set(computed))  # each at most once


def test_best_quick_skips_what_cannot_compete():
    computed = []
    got = ranking.best_quick(list(range(100)), lambda c: computed.append(c) or c + 0.5, float, 3, lambda c: 0)
    assert got == [0, 1, 2] and computed == [0, 1, 2]  # candidate 3's bound (3.0) exceeds the third best (2.5)


def conv(n, cin, h, w, cout, k=3, s=1, pad=1, **kw):
    return Conv2dSpec(n, cin, h, w, cout, k, k, s, s, pad, pad, pad, pad, 1, 1, True, True, **kw)


@pytest.mark.parametrize("spec", [conv(4, 32, 14, 14, 48), conv(3, 64, 14, 14, 256, mid=64, mid_bias=True,
                                                                 mid_relu=True), GemmSpec(300, 520, 200, True, False)],
                         ids=["conv", "chain", "gemm"])
def test_search_picks_the_full_sorts_variant(spec, monkeypatch):
    profile = PROFILES["ascend910b"]
    options = parse_options({"KILN_ISA_RESOLVED": "portable"})
    log = OptLog()
    pruned = choose_variant(spec, profile, log, options)
    monkeypatch.setattr(ranking, "best_quick", _full_sort)
    full_log = OptLog()
    full = choose_variant(spec, profile, full_log, options)
    assert (pruned.family, pruned.params) == (full.family, full.params)
    assert log.lines == full_log.lines
