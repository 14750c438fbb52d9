"""global_avgpool_vector's blocks of several planes (codegen/families/global_avgpool_vector.py): where a map is
small (at most 127 pixels) and there are more planes than Vector cores, a block takes a run of consecutive planes,
one strided copy and one fold instruction per 64-value column for all of them, instead of a block per plane paying
a copy's and each instruction's fixed costs per plane. The same bytes move, fewer instructions run, and the
launch is faster. On the emulator: a GlobalAveragePool at batch 30 built for ascend310p, whose rule takes 237
planes a block in chunks of 7 pixels (several chunks, a short last block), must match ONNX Runtime, and its kernel
the cost model; the default build's ResNet-50 pool (3 planes a block, the last block 2) runs both fold orientations
(tests/kernels, tests/codegen/cost)."""
import pytest

from codegen.cost import model
from codegen.families.global_avgpool_vector import FAMILY, global_avgpool_rule
from codegen.ir.opspec import Pool2dSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES


def gap(n, c, h):
    return Pool2dSpec(op="avg", n=n, c=c, h=h, w=h, kh=h, kw=h, sh=1, sw=1, pt=0, pl=0, pb=0, pr=0)


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
@pytest.mark.parametrize("spec", [gap(32, 2048, 7), gap(1, 2048, 7), gap(3, 1000, 10)], ids=["b32", "b1", "odd"])
def test_planes_a_block_move_the_same_bytes_in_fewer_instructions(target, spec):
    profile = PROFILES[target]
    v = global_avgpool_rule(spec, profile, OptLog())
    planes = spec.n * -(-spec.c // 16)
    assert v.params["planes_per_block"] > 1 and v.blocks == -(-planes // v.params["planes_per_block"])
    assert v.buffers["UB"] <= profile.capacity["UB"]
    one = {"chunk_pixels": spec.h * spec.w, "planes_per_block": 1}
    a, b = (model.run(FAMILY.replay, spec, p, profile) for p in (one, v.params))
    for pipe in ("MTE2", "MTE3"):
        assert a.pipes[pipe].bytes == b.pipes[pipe].bytes == (FAMILY.mte2(spec, v) if pipe == "MTE2" else
                                                              planes * 32)
    assert b.pipes["V"].instrs < a.pipes["V"].instrs
    assert b.cycles < a.cycles


def test_a_large_map_or_few_planes_keep_a_plane_a_block():
    for spec in (gap(4, 64, 56), gap(1, 256, 7)):  # 3136 pixels; 16 planes on 48 Vector cores
        v = global_avgpool_rule(spec, PROFILES["ascend910b"], OptLog())
        assert v.params["planes_per_block"] == 1 and v.params["chunk_pixels"] == min(spec.h * spec.w, 1534)


onnx = pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

SHAPE = (30, 1000, 7, 7)  # 1890 planes (1000 channels: 63 blocks, the last padded)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("gap_planes")
    g = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")], "gap",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*SHAPE[:2], 1, 1])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(root / "gap.onnx"))
    return build_and_check(root, root / "gap.onnx", SHAPE, "KILN_TARGET=ascend310p")


def test_planes_a_block_match_onnx_runtime_on_the_emulator(built):
    (err, scale), = built["errors"]
    assert err <= 2e-3 * max(1.0, scale), built["errors"]  # fp16 output, fp32 sums of 49 values
    (tiling,) = (k["tiling"] for k in built["kernels"].values())
    v = global_avgpool_rule(gap(*SHAPE[:3]), PROFILES["ascend310p"], OptLog())
    assert tiling == v.params and tiling["chunk_pixels"] < 49 and 1890 % tiling["planes_per_block"], tiling


def test_the_cost_model_replays_it_exactly(built):
    assert_replayed_exactly(built["kernels"])
