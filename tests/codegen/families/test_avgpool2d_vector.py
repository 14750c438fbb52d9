"""avgpool2d_vector's slab queue (maxpool2d_vector's, ops.hpp WindowSlabs): with more planes than Vector cores its
two UB slabs run as a queue across a core's bands. The same bytes and instructions in fewer cycles; on the emulator
a padded AveragePool (count_include_pad=0: per-column divisors at the edges) at batch 12 built for ascend310p (36
bands on 8 Vector cores) must match ONNX Runtime and its kernel the cost model, alone and with its L2 plan."""
import pytest

from codegen.cost import model
from codegen.families.avgpool2d_vector import FAMILY, avgpool_buffers, avgpool_rule
from codegen.ir.opspec import AvgPool2dSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES

SHAPE = (12, 16, 17, 400)  # 12 planes, 3 bands of 3 output rows each (as test_maxpool2d_vector's)


def pool(n, c, h, w):
    return AvgPool2dSpec(n=n, c=c, h=h, w=w, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, pb=1, pr=1, op="avg")


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
def test_the_slab_queue_overlaps_the_loads_with_the_work(target):
    profile, spec = PROFILES[target], pool(32, 64, 112, 112)
    v = avgpool_rule(spec, profile, OptLog())
    assert v.params.get("prefetch") == 1 and v.buffers == avgpool_buffers(spec, v.params["rows_per_block"], 2)
    assert v.buffers["UB"] <= profile.capacity["UB"]
    a, b = (model.run(FAMILY.replay, spec, p, profile)
            for p in ({"rows_per_block": v.params["rows_per_block"]}, v.params))
    for pipe in ("MTE2", "MTE3", "V"):
        assert (a.pipes[pipe].bytes, a.pipes[pipe].instrs) == (b.pipes[pipe].bytes, b.pipes[pipe].instrs), pipe
    assert b.core_cycles < 0.8 * a.core_cycles, (a.core_cycles, b.core_cycles)


pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, one_node_model  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("avgpool_queue")
    model = one_node_model(root / "pool.onnx", "AveragePool", SHAPE, (*SHAPE[:2], 9, 200), kernel_shape=[3, 3],
                           strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
    return build_and_check(root, model, SHAPE, "KILN_TARGET=ascend310p")


def test_the_slab_queue_matches_onnx_runtime_on_the_emulator(built):
    (err, scale), = built["errors"]
    assert err <= 2e-3 * max(1.0, scale), built["errors"]  # fp16 sums of at most 9 values, scaled
    (tiling,) = (k["tiling"] for k in built["kernels"].values())
    assert tiling == {"rows_per_block": 3, "prefetch": 1}, tiling


def test_the_cost_model_replays_it_exactly(built):
    assert_replayed_exactly(built["kernels"])
