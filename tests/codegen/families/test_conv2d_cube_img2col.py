"""conv2d_cube_img2col's prefetch (codegen/families/conv2d_cube_img2col.py with_prefetch, cost/blocks.py L1Carry;
the template's PREFETCH): the L1 queue carried across a core's blocks moves the same instructions, bytes and MACs
and only drops the wait at each block's start, so it is never slower, and it is offered only where a core runs
more than one block of a double-buffered tiling. Cost model only (no build: the baked kernels that choose it are
held to the emulator by tests/codegen/cost/test_costmodel.py)."""
import pytest

from codegen import KilnError
from codegen.cost import model
from codegen.families.base import Variant, input_bytes
from codegen.families.conv2d_cube_img2col import (
    FAMILY,
    IMAGE_COUNTS,
    conv_buffers,
    conv_candidates,
    from_params,
    search_conv,
    with_prefetch,
)
from codegen.ir.opspec import Conv2dSpec
from codegen.ir.optlog import OptLog
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


# Several images per block (`images`): the block's images share each weight chunk and B fractal load, each with its
# own slab, A fractals and L0C tile. The emulator runs it in the default build (kernels/default.toml's images.*
# entry, held to this replay by tests/codegen/cost/test_costmodel.py), on the coupled profile (test_coupled.py) and
# with a second source (test_conv2d_cube_img2col_images.py).
B32_7 = conv(32, 512, 7, 7, 512)  # ResNet-50 layer4's 3x3 at batch 32: 49 pixels an image, one M tile of 64
TILE_7 = dict(base_m=64, base_n=128, base_k1=4, c1_step=4, slab_rows=7)


@pytest.mark.parametrize("images", [2, 3, 5])
def test_images_share_the_weights_and_compute_the_same(images):
    """Same MACs and feature-map bytes, the weights read once per image group instead of once per image; the last
    group holds what is left of the batch."""
    profile = PROFILES["ascend910b"]
    one = model.run(FAMILY.replay, B32_7, TILE_7, profile)
    grouped = model.run(FAMILY.replay, B32_7, dict(TILE_7, images=images), profile)
    groups = -(-32 // images)
    assert (grouped.useful_macs, grouped.cube_macs) == (one.useful_macs, one.cube_macs)
    maps = 32 * 512 * 49 * 2  # each image's slab once per N tile: 4 N tiles of 128
    weights = 512 * 9 * 512 * 2 + 512 * 4  # and the bias, once per block
    assert one.pipes["MTE2"].bytes == 4 * maps + 32 * weights
    assert grouped.pipes["MTE2"].bytes == 4 * maps + groups * weights
    assert grouped.pipes["MTE2"].bytes == FAMILY.mte2(B32_7, Variant(FAMILY.name, dict(TILE_7, images=images)))
    assert grouped.pipes["MTE1"].instrs < one.pipes["MTE1"].instrs  # the B loads, once per group


def test_the_search_groups_images_where_a_tile_holds_an_image():
    profile = PROFILES["ascend910b"]
    cands, fit = conv_candidates(B32_7, TILE_7, profile, conv_buffers, images=IMAGE_COUNTS)
    grouped = [p for p in cands if p.get("images", 1) > 1]
    assert grouped and all(p["base_m"] >= 49 for p in grouped)
    assert {p["images"] for p in grouped if fit(p)} == set(IMAGE_COUNTS)  # each fits some tile (L0C: images x tile)
    b14 = conv(32, 256, 14, 14, 256)  # 196 pixels: no M tile of the grid holds an image
    assert not [p for p in conv_candidates(b14, TILE, profile, conv_buffers, images=IMAGE_COUNTS)[0] if "images" in p]
    small = conv(1, 512, 7, 7, 512)  # one image: nothing to group
    assert not [p for p in conv_candidates(small, TILE_7, profile, conv_buffers, images=IMAGE_COUNTS)[0]
                if "images" in p]
    # the search's choice for the batch of 7x7 maps groups images, and is faster than every tiling that does not
    best = search_conv(B32_7, dict(TILE_7, base_n=256, base_k1=2, c1_step=2), profile, OptLog(), conv_buffers)
    assert best.get("images", 1) > 1
    singles = [p for p in cands if p.get("images", 1) == 1 and fit(p)]
    fastest_single = min(model.run(FAMILY.replay, B32_7, p, profile, sample=True).cycles for p in singles)
    assert model.run(FAMILY.replay, B32_7, best, profile).cycles < fastest_single


def test_a_pin_with_more_images_than_the_batch_is_refused():
    profile = PROFILES["ascend910b"]
    p, bufs, blocks = from_params(B32_7, profile, dict(TILE_7, images=3), "kernel list")
    assert p["images"] == 3 and blocks == 11 * 4 and bufs["L0C"] == 3 * 4 * 8 * 1024
    with pytest.raises(KilnError, match=r"images=33 must be 1\.\.32"):
        from_params(B32_7, profile, dict(TILE_7, images=33), "kernel list")
