"""Identical blocks costed once (codegen/cost/steady.py): every prediction equals the block-by-block replay
(ReplayMode.every_block) -- instructions, bytes, GM traffic, MACs and limits exactly, cycles and busy cycles to
rounding -- on kernels with odd tails, more blocks than cores (imbalance), L2 hits and both profiles; the search
picks the same variant either way; and the steady path really skips blocks. Cost model only (no build)."""
import dataclasses

import pytest

from codegen.cost import model
from codegen.cost.model import SimCore
from codegen.families.base import input_bytes
from codegen.families.registry import FAMILIES, predict
from codegen.ir.opspec import Conv2dSpec, EltwiseSpec, GemmSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES
from codegen.options import parse_options
from codegen.select.tiling import choose_variant


def conv(n, cin, h, w, cout, k=3, s=1, pad=1, **kw):
    return Conv2dSpec(n, cin, h, w, cout, k, k, s, s, pad, pad, pad, pad, 1, 1, True, True, **kw)


# (spec, tiling changes from the rule's): M tiles with a pixel tail and a varying number of input rows, an N tail
# (cout not a multiple of base_n), more blocks than cores by an odd count, a residual (the Vector epilogue's tile
# loop with a tail tile), a stride, a chain (mid), Winograd's three launches, a GEMM and a flat stream.
CASES = [
    ("conv_tails", conv(5, 64, 28, 28, 80), dict(base_m=96, base_n=64)),
    ("conv_residual", conv(3, 48, 14, 14, 64, k=1, pad=0, residual=True), dict(base_m=48, epi_tile=1040)),
    # the residual on a split profile runs in the Cube's launch (mixed: its AIVs' items memoised beside the AIC's);
    # a program keeps the second launch there; a chain and a group of images hand over their tiles' rows
    ("conv_residual_program", conv(3, 48, 14, 14, 64, k=1, pad=0, residual=True, program="sigmoid(0);mul(0,1)"),
     dict(base_m=48, epi_tile=1040)),
    ("conv_mixed_chain", conv(3, 64, 14, 14, 256, k=3, mid=64, mid_bias=True, mid_relu=True, residual=True),
     dict(base_m=64)),
    ("conv_mixed_images", conv(5, 64, 7, 7, 128, k=1, pad=0, residual=True), dict(base_m=64, base_n=48, images=2)),
    ("conv_stride", conv(4, 32, 29, 29, 64, s=2), dict(base_m=64)),
    ("conv_chain", conv(3, 64, 14, 14, 256, k=3, mid=64, mid_bias=True, mid_relu=True), {}),
    ("winograd", conv(3, 32, 19, 19, 48), {}),
    # grouped, 24 channels per group over 16-wide N tiles: the tiles' groups reduce over 2 or 3 C1 blocks
    ("conv_grouped", conv(2, 72, 14, 14, 72, group=3), dict(base_n=16)),
    # prefetch (the L1 queue carried across a core's blocks): 3 chunks a block (the slot parity alternates), a
    # grouped conv's N tiles with 2 or 3 chunks, a second source's chunks after the first's
    ("conv_prefetch", conv(5, 48, 28, 28, 80), dict(base_m=96, base_n=64, c1_step=1, l1_buffers=2, prefetch=1)),
    ("conv_prefetch_grouped", conv(3, 72, 14, 14, 72, group=3), dict(base_n=16, c1_step=1, l1_buffers=2, prefetch=1)),
    ("conv_prefetch_dual", conv(4, 48, 14, 14, 64, k=1, pad=0, cin2=32, h2=28, w2=28, s2=2),
     dict(base_m=32, c1_step=2, l1_buffers=2, prefetch=1)),
    ("gemm", GemmSpec(300, 520, 200, True, False), dict(base_m=64, base_n=64)),
    ("eltwise", EltwiseSpec("add", 3 * 1000 * 1000 + 17, act="relu"), {}),
]


def _variant(name, spec, changes, profile):
    if name == "winograd":
        from codegen.families.conv2d_winograd import winograd_rule
        return "conv2d_winograd", winograd_rule(spec, profile, 2).params
    v = choose_variant(spec, profile, OptLog())
    return v.family, dict(v.params, **changes)


def _plans(spec, family, params):
    """L2 plans: none (called alone), every input a hit, every other input cold (six entries: more than any case's
    inputs; the extra ones are never read)."""
    sizes = input_bytes(spec, FAMILIES[family], params)
    sizes = sizes + (0,) * (6 - len(sizes))
    return [None, model.L2Plan((True,) * 6, sizes), model.L2Plan((False, True) * 3, sizes)]


def _same(a, b):
    for p in model.PIPES:
        assert (a.pipes[p].instrs, a.pipes[p].bytes) == (b.pipes[p].instrs, b.pipes[p].bytes), p
        assert a.pipes[p].busy == pytest.approx(b.pipes[p].busy, rel=1e-9, abs=1e-9), p
    assert dataclasses.astuple(a.mem) == dataclasses.astuple(b.mem)
    assert (a.cube_macs, a.useful_macs, a.cores, a.limits) == (b.cube_macs, b.useful_macs, b.cores, b.limits)
    assert a.cycles == pytest.approx(b.cycles, rel=1e-9)
    assert a.core_cycles == pytest.approx(b.core_cycles, rel=1e-9)
    assert a.phases == pytest.approx(b.phases, rel=1e-9)


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
@pytest.mark.parametrize("name,spec,changes", CASES, ids=[c[0] for c in CASES])
def test_steady_replay_equals_every_block(name, spec, changes, target):
    profile = PROFILES[target]
    family, params = _variant(name, spec, changes, profile)
    replay = FAMILIES[family].replay
    for l2 in _plans(spec, family, params):
        for sample in (False, True):
            fast = model.run(replay, spec, params, profile, sample, l2, every_block=False)
            every = model.run(replay, spec, params, profile, sample, l2, every_block=True)
            _same(fast, every)


def test_steady_replay_skips_blocks(monkeypatch):
    """The batch-5 convolution: far fewer instructions replayed than the prediction counts."""
    profile = PROFILES["ascend910b"]
    name, spec, changes = CASES[0]
    family, params = _variant(name, spec, changes, profile)
    issued = []
    issue = SimCore.issue
    monkeypatch.setattr(SimCore, "issue", lambda self, *a, **kw: (issued.append(1), issue(self, *a, **kw)))
    p = predict(spec, family, params, profile)
    assert p is not None and len(issued) * 4 < sum(c.instrs for c in p.pipes.values())


def test_search_chooses_the_same_variant(monkeypatch):
    """The whole tiling search (ranking replays and exact replays) in both modes: the same variant, the same
    prediction."""
    profile = PROFILES["ascend910b"]
    options = parse_options({"KILN_ISA_RESOLVED": "portable"})
    spec = conv(4, 32, 14, 14, 48)
    fast = choose_variant(spec, profile, OptLog(), options)
    monkeypatch.setattr(model, "EVERY_BLOCK", True)
    every = choose_variant(spec, profile, OptLog(), options)
    assert (fast.family, fast.params) == (every.family, every.params)
    monkeypatch.setattr(model, "EVERY_BLOCK", False)
    _same(predict(spec, fast.family, fast.params, profile), model.run(
        FAMILIES[fast.family].replay, spec, fast.params, profile, every_block=True))


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
@pytest.mark.parametrize("name,spec,changes", CASES, ids=[c[0] for c in CASES])
def test_bound_is_at_most_the_replay(name, spec, changes, target):
    """ReplayMode.bound (model.launch_bound): a lower bound of the cycles of the same replay without it, sampled or
    not, with and without L2 hits; what the rankings rely on to skip candidates (families/ranking.py best_quick)."""
    profile = PROFILES[target]
    family, params = _variant(name, spec, changes, profile)
    replay = FAMILIES[family].replay
    for l2 in _plans(spec, family, params):
        for sample in (False, True):
            low = model.run_bound(replay, spec, params, profile, sample, l2)
            full = model.run(replay, spec, params, profile, sample, l2).cycles
            assert profile.launch_cycles < low <= full * (1 + 1e-12), (l2, sample)


def test_bound_replays_few_blocks(monkeypatch):
    """A batch-32 convolution (20 blocks a core): the bound issues far fewer instructions than the sampled replay
    it bounds."""
    profile = PROFILES["ascend910b"]
    spec = conv(32, 64, 28, 28, 80)
    family, params = _variant("conv_b32", spec, dict(base_m=96, base_n=64), profile)
    issued = []
    issue = SimCore.issue
    monkeypatch.setattr(SimCore, "issue", lambda self, *a, **kw: (issued.append(1), issue(self, *a, **kw)))
    model.run(FAMILIES[family].replay, spec, params, profile, sample=True)
    quick, issued[:] = len(issued), []
    model.run_bound(FAMILIES[family].replay, spec, params, profile, sample=True)
    assert len(issued) * 3 < quick
