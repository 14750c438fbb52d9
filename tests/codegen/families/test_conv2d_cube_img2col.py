"""conv2d_cube_img2col's prefetch (codegen/families/conv2d_cube_img2col.py with_prefetch, cost/blocks.py L1Carry;
the template's PREFETCH): the L1 queue carried across a core's blocks moves the same instructions, bytes and MACs
and only drops the wait at each block's start, so it is never slower, and it is offered only where a core runs
more than one block of a double-buffered tiling. Cost model only (no build: the baked kernels that choose it are
held to the emulator by tests/codegen/cost/test_costmodel.py)."""
import pytest

from codegen import KilnError
from codegen.cost import model
from codegen.families.base import input_bytes
from codegen.families.conv2d_cube_img2col import FAMILY, from_params, with_prefetch
from codegen.ir.opspec import Conv2dSpec
from codegen.ir.profiles import PROFILES


def conv(n, cin, h, w, cout, k=3, s=1, pad=1, **kw):
    return Conv2dSpec(n, cin, h, w, cout, k, k, s, s, pad, pad, pad, pad, 1, 1, True, True, **kw)


B32 = conv(32, 256, 14, 14, 256)  # ResNet-50 layer3's 3x3 at batch 32: 64 blocks of m208 n128 over 24 cores
TILE = dict(base_m=208, base_n=128, base_k1=4, c1_step=4, slab_rows=14)


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
@pytest.mark.parametrize("hits", [None, (True, False, False)])
def test_prefetch_moves_the_same_work_and_is_faster(target, hits):
    profile = PROFILES[target]
    l2 = None if hits is None else model.L2Plan(hits, input_bytes(B32, FAMILY, TILE))
    plain = model.run(FAMILY.replay, B32, TILE, profile, l2=l2)
    ahead = model.run(FAMILY.replay, B32, dict(TILE, prefetch=1), profile, l2=l2)
    for p in model.PIPES:
        assert (ahead.pipes[p].instrs, ahead.pipes[p].bytes) == (plain.pipes[p].instrs, plain.pipes[p].bytes), p
        assert ahead.pipes[p].busy == pytest.approx(plain.pipes[p].busy, rel=1e-12), p
    assert (ahead.cube_macs, ahead.mem.hbm_read_bytes, ahead.mem.l2_hit_bytes) == (
        plain.cube_macs, plain.mem.hbm_read_bytes, plain.mem.l2_hit_bytes)
    # each core's later blocks start on a loaded chunk: at least a chunk's load saved per later block
    assert ahead.core_cycles < plain.core_cycles - 2 * 300


def test_prefetch_is_offered_where_a_core_runs_more_blocks():
    profile = PROFILES["ascend910b"]
    assert with_prefetch(B32, TILE, profile)["prefetch"] == 1
    assert "prefetch" not in with_prefetch(B32, dict(TILE, l1_buffers=1), profile)  # one buffer: nothing overlaps
    small = conv(1, 256, 14, 14, 256)  # 2 blocks: one per core
    assert "prefetch" not in with_prefetch(small, dict(TILE, prefetch=1), profile)


def test_a_pin_with_prefetch_and_one_l1_buffer_is_refused():
    profile = PROFILES["ascend910b"]
    p, _, blocks = from_params(B32, profile, dict(TILE, prefetch=1), "kernel list")
    assert p["prefetch"] == 1 and blocks == 64
    with pytest.raises(KilnError, match="prefetch"):
        from_params(B32, profile, dict(TILE, prefetch=1, l1_buffers=1), "kernel list")
