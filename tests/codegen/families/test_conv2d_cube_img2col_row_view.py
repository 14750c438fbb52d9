"""A strided 1x1 source's row view (conv2d_cube_img2col.row_view, the template's slab_source): a 1x1 source at row
stride s > 1 without vertical padding whose M tiles each cover whole images (h = ho x s) copies only the rows it
uses, every s-th, in one strided copy, and its slab holds a map of ho rows at row stride 1 (ResNet's downsample
1x1/2 read 13 rows of 14 for 7). Same MACs, fewer GM bytes, fewer cycles; any other source reads its row span. On
the emulator: a downsample kernel whose two sources are both 1x1/2 (x -> 1x1/2, plus x -> 1x1 + ReLU -> 1x1/2,
accumulated in one L0C), pinned to a whole-image M tile, must match ONNX Runtime, and its kernel the cost model,
on both profiles."""
import json
from dataclasses import replace

import numpy as np
import pytest

import codegen.families.conv2d_cube_img2col as img2col
from codegen.cost import model
from codegen.families.base import Variant
from codegen.families.conv2d_cube_img2col import FAMILY, conv_mte2, conv_tile_rows, from_params
from codegen.ir.opspec import Conv2dSpec, c1
from codegen.ir.profiles import PROFILES


def conv(n, cin, h, cout, k=1, s=2, pad=0, **kw):
    return Conv2dSpec(n, cin, h, h, cout, k, k, s, s, pad, pad, pad, pad, 1, 1, True, True, **kw)


# ResNet-50's last downsample at batch 32: 1x1/2 1024 -> 2048 on 14x14, accumulated with the block's 1x1 512 at 7x7
DOWNSAMPLE = conv(32, 1024, 14, 2048, cin2=512, h2=7, w2=7, s2=1)
TILING = dict(base_m=64, base_n=240, base_k1=2, c1_step=8, images=2, prefetch=1)


def test_the_view_is_taken_where_a_tile_covers_whole_images():
    assert conv_tile_rows(DOWNSAMPLE, 64) == [(0, 49, 0, 7)]  # rows 0, 2, .. 12 of the 14: a 7-row map
    assert conv_tile_rows(DOWNSAMPLE, 32) == [(0, 32, 0, 9), (32, 17, 8, 5)]  # part images: the row span
    for other in (conv(1, 64, 14, 64, k=3, pad=1),  # a window
                  conv(1, 64, 15, 64),  # 15 rows: ho 8 x 2 = 16, the last row one past the map
                  conv(1, 64, 14, 64, pad=1)):  # padded
        assert img2col.row_view(other, 256) is other


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
def test_a_row_view_reads_the_rows_it_uses(target, monkeypatch):
    """With the view, the main source's slabs are 7 rows instead of 13 per image, channel block and N tile: the
    replay moves exactly those bytes fewer (what conv_mte2 counts), the same MACs, in fewer cycles."""
    profile = PROFILES[target]
    p, bufs, blocks = from_params(DOWNSAMPLE, profile, TILING, "test")
    viewed = model.run(FAMILY.replay, DOWNSAMPLE, p, profile)
    assert viewed.pipes["MTE2"].bytes == conv_mte2(DOWNSAMPLE, Variant(FAMILY.name, p, blocks, bufs))
    monkeypatch.setattr(img2col, "row_view", lambda spec, base_m: spec)
    whole = model.run(FAMILY.replay, DOWNSAMPLE, p, profile)
    n_tiles = -(-c1(DOWNSAMPLE.cout) * 16 // TILING["base_n"])
    saved = DOWNSAMPLE.n * n_tiles * c1(DOWNSAMPLE.cin) * (13 - 7) * 14 * 32
    assert whole.pipes["MTE2"].bytes - viewed.pipes["MTE2"].bytes == saved
    assert (whole.cube_macs, whole.pipes["MTE2"].instrs) == (viewed.cube_macs, viewed.pipes["MTE2"].instrs)
    assert viewed.cycles < whole.cycles


onnx = pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, plan_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.cost.model import COST_MODEL_VERSION  # noqa: E402
from codegen.ir.opspec import spec_hash  # noqa: E402

SHAPE = (2, 32, 14, 14)
PIN = dict(base_m=64, base_n=64, base_k1=2, c1_step=2)


def downsample_model(path) -> None:
    """x [2, 32, 14, 14]: y = ReLU(1x1/2 64 (x) + 1x1/2 64 (ReLU(1x1 16 (x)))), both branches at 7x7."""
    rng = np.random.default_rng(7)
    inits = []

    def weights(name, cout, cin):
        w, b = rng.standard_normal((cout, cin, 1, 1)) / np.sqrt(cin), rng.standard_normal(cout) * 0.1
        inits.extend([numpy_helper.from_array(w.astype(np.float32), f"{name}.w"),
                      numpy_helper.from_array(b.astype(np.float32), f"{name}.b")])
        return [f"{name}.w", f"{name}.b"]

    nodes = [helper.make_node("Conv", ["x", *weights("c1", 16, 32)], ["a"], name="c1"),
             helper.make_node("Relu", ["a"], ["r"], name="r1"),
             helper.make_node("Conv", ["r", *weights("c2", 64, 16)], ["b"], name="c2", strides=[2, 2]),
             helper.make_node("Conv", ["x", *weights("ds", 64, 32)], ["d"], name="ds", strides=[2, 2]),
             helper.make_node("Add", ["b", "d"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu_out")]
    g = helper.make_graph(nodes, "downsample", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64, 7, 7])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture(scope="module", params=["ascend910b", "ascend310p"])
def built(tmp_path_factory, request):
    target = request.param
    root = tmp_path_factory.mktemp("row_view")
    downsample_model(root / "ds.onnx")
    m = plan_model(root, root / "ds.onnx")
    dual = [k.spec for k in m.step_kernels.values() if getattr(k.spec, "cin2", 0)]
    assert len(dual) == 1 and dual[0].s2 == dual[0].sh == 2, [k.spec.name for k in m.step_kernels.values()]
    records = root / "records.json"
    records.write_text(json.dumps({"format": "kiln-tuning/1", "profile": target, "cost_model": COST_MODEL_VERSION,
                                   "records": [{"opspec": spec_hash(dual[0]), "family": "conv2d_cube_img2col",
                                                "simulated_cycles": 1.0, "params": PIN}]}))
    out = build_and_check(root, root / "ds.onnx", SHAPE, f"KILN_TUNING_RECORDS={records}", f"KILN_TARGET={target}")
    return dual[0], out


def test_a_row_view_kernel_matches_onnx_runtime(built):
    spec, out = built
    (err, scale), = out["errors"]
    assert err <= 2e-3 * max(1.0, scale), out["errors"]  # fp16 activations, K <= 48 per output
    (tiling,) = (k["tiling"] for n, k in out["kernels"].items() if n.endswith(spec.name.removeprefix("conv2d_")))
    assert tiling["base_m"] == 64 and tiling["slab_rows"] == 7, tiling  # both sources' slabs: 7 of 14 rows
    assert conv_tile_rows(spec.second(), 64) == conv_tile_rows(replace(spec, cin2=0), 64) == [(0, 49, 0, 7)]


def test_the_cost_model_replays_it_exactly(built):
    assert_replayed_exactly(built[1]["kernels"])
