"""maxpool2d_vector's slab queue (codegen/families/maxpool2d_vector.py, `prefetch`): where there are more planes
than Vector cores, each core runs several bands and its two UB slabs form a queue across them, so the next band's
rows load while this one computes (one slab a block made MTE2, V and MTE3 take turns). The padding is filled apart
from the rows the copy writes (kernels/kiln/ops.hpp fill_slab_padding), so the copy never waits for the fill. On
the emulator: a padded MaxPool at batch 12 built for ascend310p (12 planes of 17 x 400 in 3 bands each, 36 blocks
on 8 Vector cores: each core reuses its slabs, for bands padded at the top, the bottom and neither) must match ONNX
Runtime exactly and its kernel the cost model, alone and with its L2 plan; a generic kernel takes the choice at run
time, as a map too wide for two slabs cannot queue them."""
import pytest

from codegen.cost import model
from codegen.families.maxpool2d_vector import FAMILY, maxpool_buffers, maxpool_rule
from codegen.ir.opspec import Pool2dSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES


def pool(n, c, h, k=3, s=2, p=1):
    return Pool2dSpec(op="max", n=n, c=c, h=h, w=h, kh=k, kw=k, sh=s, sw=s, pt=p, pl=p, pb=p, pr=p)


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
def test_the_slab_queue_overlaps_the_loads_with_the_work(target):
    """ResNet-50's pool at batch 32: the rule queues two slabs (both fit UB); against the same bands one slab a
    block, the same bytes move and the same Vector instructions run, in fewer cycles."""
    profile, spec = PROFILES[target], pool(32, 64, 112)
    v = maxpool_rule(spec, profile, OptLog())
    assert v.params.get("prefetch") == 1 and v.buffers == maxpool_buffers(spec, v.params["rows_per_block"], 2)
    assert v.buffers["UB"] <= profile.capacity["UB"]
    one = {"rows_per_block": v.params["rows_per_block"]}
    a, b = (model.run(FAMILY.replay, spec, p, profile) for p in (one, v.params))
    for pipe in ("MTE2", "MTE3", "V"):
        assert (a.pipes[pipe].bytes, a.pipes[pipe].instrs) == (b.pipes[pipe].bytes, b.pipes[pipe].instrs), pipe
    assert a.pipes["MTE2"].bytes == FAMILY.mte2(spec, v)
    assert b.core_cycles < 0.8 * a.core_cycles, (a.core_cycles, b.core_cycles)


def test_few_planes_or_a_wide_map_keep_one_slab():
    """Batch 1 (4 planes on 48 Vector cores): a band a core, nothing to queue. A 900-pixel-wide map at batch 32:
    two slabs of one output row do not fit UB, so one slab of two rows (hence a runtime field of the generic
    kernel, not part of its key)."""
    v = maxpool_rule(pool(1, 64, 112), PROFILES["ascend910b"], OptLog())
    assert "prefetch" not in v.params and v.blocks <= 48
    wide = maxpool_rule(pool(32, 64, 900), PROFILES["ascend910b"], OptLog())
    assert wide.params == {"rows_per_block": 2}
    assert "prefetch" in FAMILY.generic.tiling_fields and "prefetch" not in FAMILY.generic.structural


def dups(spec, params):
    """(Dup instructions, their repeats) of the kernel's first core."""
    _, launches = model.run_recorded(FAMILY.replay, spec, params, PROFILES["ascend910b"])
    trace = launches[0][2][0]
    return sum(1 for _, op, *_ in trace if op == "Dup.f16"), sum(n // 256 for _, op, n, *_ in trace if op == "Dup.f16")


def test_the_padding_fill_writes_only_the_padding():
    """One band of 16 output rows over a 32x32 map padded by 1: the slab's 33 rows of 34 pixels hold the image in
    rows 1..32, so the fill is the top row whole (544 values: 4 repeats and a masked one) and the left and right
    pixel of the 32 rows below (one Dup a side, a repeat a row); the old fill wrote all 33 x 34 pixels. Unpadded,
    nothing is filled."""
    assert dups(pool(1, 16, 32), {"rows_per_block": 16}) == (4, 4 + 1 + 32 + 32)
    assert dups(pool(1, 16, 32, p=0), {"rows_per_block": 15}) == (0, 0)


pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, one_node_model  # noqa: E402

SHAPE = (12, 16, 17, 400)  # 12 planes on ascend310p's 8 Vector cores, 3 bands of 3 output rows each


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("maxpool_queue")
    model = one_node_model(root / "pool.onnx", "MaxPool", SHAPE, (*SHAPE[:2], 9, 200), kernel_shape=[3, 3],
                           strides=[2, 2], pads=[1, 1, 1, 1])
    return build_and_check(root, model, SHAPE, "KILN_TARGET=ascend310p")


def test_the_slab_queue_matches_onnx_runtime_on_the_emulator(built):
    (err, scale), = built["errors"]
    assert err <= 1e-3 * max(1.0, scale), built["errors"]  # max is exact; the fp16 input rounding only
    (tiling,) = (k["tiling"] for k in built["kernels"].values())
    assert tiling == {"rows_per_block": 3, "prefetch": 1}, tiling


def test_the_cost_model_replays_it_exactly(built):
    assert_replayed_exactly(built["kernels"])
