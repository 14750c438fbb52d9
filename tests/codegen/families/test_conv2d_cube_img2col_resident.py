"""A chained conv whose weights stay in L1 across a core's M tiles (conv2d_cube_img2col `resident`): each core's
first block loads both convs' weights, its later blocks only their feature-map slabs. It computes what the
streaming chain computes with the same MACs and fewer GM bytes (the weights once per core instead of once per M
tile), is offered only where a core runs more than one M tile, and the build's search takes it for ResNet-50's
batch-32 chains on ascend910b. On the emulator: a small ONNX chain (3x3 + ReLU -> 1x1 + residual add + ReLU) at
batch 2, its chain pinned resident by a tuning record, must match ONNX Runtime, and its kernel the cost model, alone
and with the step's L2 plan."""
import json

import numpy as np
import pytest

from codegen import KilnError
from codegen.cost import model
from codegen.families.base import Variant, input_bytes
from codegen.families.conv2d_cube_img2col import FAMILY, chain_candidates, conv_rule, conv_tile_rows, from_params
from codegen.ir.opspec import Conv2dSpec, c1
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES
from codegen.select.tiling import variant_from_params


def conv(n, cin, h, w, cout, k=3, pad=1, **kw):
    return Conv2dSpec(n, cin, h, w, cout, k, k, 1, 1, pad, pad, pad, pad, 1, 1, True, True, **kw)


# ResNet-50's layer2 chain (3x3 128 -> 1x1 512 + add) at batch 32 and 1
CHAIN_B32 = conv(32, 128, 28, 28, 512, residual=True, mid=128, mid_bias=True, mid_relu=True)
CHAIN_B1 = conv(1, 128, 28, 28, 512, residual=True, mid=128, mid_bias=True, mid_relu=True)
TILING = dict(base_m=128, base_k1=4, c1_step=4, base_n2=128, base_k2=4, n_split=1)


def weight_bytes(spec: Conv2dSpec) -> int:
    return (c1(spec.cin) * spec.kh * spec.kw * c1(spec.mid) + c1(spec.mid) * c1(spec.cout)) * 512


@pytest.mark.parametrize("target", ["ascend910b", "ascend310p"])
@pytest.mark.parametrize("hits", [False, True], ids=["alone", "l2"])
def test_resident_weights_load_once_per_core_and_are_faster(target, hits):
    profile = PROFILES[target]
    plain, bufs, blocks = from_params(CHAIN_B32, profile, TILING, "test")
    kept, kept_bufs, _ = from_params(CHAIN_B32, profile, dict(TILING, resident=1), "test")
    cores = profile.cores_for("cube")
    assert kept["resident"] == cores < blocks  # the cores that hold the weights: the parameter's value
    assert kept_bufs["L1"] > bufs["L1"] and kept_bufs["L1"] <= profile.capacity["L1"]
    sizes = input_bytes(CHAIN_B32, FAMILY, kept)
    l2 = model.L2Plan((True,) * len(sizes), sizes) if hits else None  # every input an L2 hit, or every read a miss
    a, b = (model.run(FAMILY.replay, CHAIN_B32, p, profile, l2=l2) for p in (plain, kept))
    assert (a.cube_macs, a.useful_macs) == (b.cube_macs, b.useful_macs)
    saved = (blocks - cores) * weight_bytes(CHAIN_B32)
    assert a.pipes["MTE2"].bytes - b.pipes["MTE2"].bytes == saved
    assert b.pipes["MTE2"].bytes == FAMILY.mte2(CHAIN_B32, Variant(FAMILY.name, kept, blocks, kept_bufs))
    assert a.pipes["MTE2"].bytes == FAMILY.mte2(CHAIN_B32, Variant(FAMILY.name, plain, blocks, bufs))
    assert b.cycles < a.cycles


def test_the_search_keeps_the_weights_where_a_core_runs_several_m_tiles():
    profile = PROFILES["ascend910b"]
    p = conv_rule(CHAIN_B32, profile, OptLog(), search=True).params
    assert p.get("resident") == profile.cores_for("cube"), p
    # offered only where a core runs more than one M tile (else the plain chain does the same in less L1)
    for spec in (CHAIN_B1, CHAIN_B32):
        for target in ("ascend910b", "ascend310p"):
            cores = PROFILES[target].cores_for("cube")
            rule = conv_rule(spec, PROFILES[target], OptLog()).params
            cands, _ = chain_candidates(spec, rule, PROFILES[target])
            offered = {c["base_m"] for c in cands if c.get("resident")}
            several = {c["base_m"] for c in cands if spec.n * len(conv_tile_rows(spec, c["base_m"])) > cores}
            assert offered == several and offered, (spec.n, target)
            assert all(c["resident"] == cores and c["n_split"] == 1 for c in cands if c.get("resident"))


def test_a_resident_pin_with_an_n_split_is_refused():
    with pytest.raises(KilnError, match="resident weights need n_split=1"):
        from_params(CHAIN_B32, PROFILES["ascend910b"], dict(TILING, n_split=2, resident=1), "kernel list")


def test_kiln_tune_pins_a_chain_candidate_whole():
    """kiln tune writes a candidate as a pin and a record: a chain's has no base_n, its 1x1 tiling and resident."""
    from codegen.families.registry import tunable
    from kiln.tune import _pinned
    profile = PROFILES["ascend910b"]
    cand = dict(from_params(CHAIN_B32, profile, dict(TILING, resident=1), "test")[0], slab_rows=8)
    pin = _pinned(cand, FAMILY.name, tunable())
    assert set(pin) == {"base_m", "base_k1", "c1_step", "base_n2", "base_k2", "n_split", "resident"}
    assert variant_from_params(CHAIN_B32, profile, FAMILY.name, pin, "kernel list").params == cand


def test_a_chain_pin_sets_no_base_n():
    """A chain tiles its 1x1 by base_n2: a pin or record gives base_m, base_k1, c1_step (and what it chooses)."""
    profile = PROFILES["ascend910b"]
    v = variant_from_params(CHAIN_B32, profile, FAMILY.name, dict(TILING, resident=1), "kernel list")
    assert v.params["resident"] == profile.cores_for("cube") and "base_n" not in v.params
    with pytest.raises(KilnError, match="must set"):
        variant_from_params(CHAIN_B32, profile, FAMILY.name, {"base_m": 128, "base_k1": 4}, "kernel list")


onnx = pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, plan_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.cost.model import COST_MODEL_VERSION  # noqa: E402
from codegen.ir.opspec import spec_hash  # noqa: E402

SHAPE = (2, 32, 28, 28)
PIN = dict(base_m=32, base_k1=2, c1_step=1, base_n2=16, base_k2=1, n_split=1, resident=1)


def chain_model(path, residual: bool = True) -> None:
    """x [2, 32, 28, 28] -> 3x3 16 + ReLU -> 1x1 32, + x, ReLU (a bottleneck's chained middle), or without the
    residual add."""
    rng = np.random.default_rng(5)
    inits = []

    def weights(name, cout, cin, k):
        w, b = rng.standard_normal((cout, cin, k, k)) * (1.0 / np.sqrt(cin * k * k)), rng.standard_normal(cout) * 0.1
        inits.extend([numpy_helper.from_array(w.astype(np.float32), f"{name}.w"),
                      numpy_helper.from_array(b.astype(np.float32), f"{name}.b")])
        return [f"{name}.w", f"{name}.b"]

    nodes = [helper.make_node("Conv", ["x", *weights("c1", 16, 32, 3)], ["a"], name="c1", pads=[1] * 4),
             helper.make_node("Relu", ["a"], ["r"], name="r1"),
             helper.make_node("Conv", ["r", *weights("c2", 32, 16, 1)], ["b"], name="c2"),
             helper.make_node("Add", ["b", "x"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu_out")]
    if not residual:
        nodes[3:] = [helper.make_node("Relu", ["b"], ["y"], name="relu_out")]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


# ascend910b with the residual add (its epilogue in the Cube's launch: mixed), ascend310p without (a plain launch)
@pytest.fixture(scope="module", params=[("ascend910b", True), ("ascend310p", False)], ids=["910b_residual", "310p"])
def built(tmp_path_factory, request):
    target, residual = request.param
    root = tmp_path_factory.mktemp("resident_chain")
    chain_model(root / "chain.onnx", residual)
    m = plan_model(root, root / "chain.onnx")
    chains = [k.spec for k in m.step_kernels.values() if getattr(k.spec, "mid", 0)]
    assert len(chains) == 1, [k.spec.name for k in m.step_kernels.values()]  # the fusion this test is about
    records = root / "records.json"
    records.write_text(json.dumps({"format": "kiln-tuning/1", "profile": target, "cost_model": COST_MODEL_VERSION,
                                   "records": [{"opspec": spec_hash(chains[0]), "family": "conv2d_cube_img2col",
                                                "simulated_cycles": 1.0, "params": PIN}]}))
    out = build_and_check(root, root / "chain.onnx", SHAPE, f"KILN_TUNING_RECORDS={records}", f"KILN_TARGET={target}")
    return chains[0], target, out


def test_a_resident_chain_matches_onnx_runtime(built):
    spec, target, out = built
    (err, scale), = out["errors"]
    assert err <= 2e-3 * max(1.0, scale), out["errors"]  # fp16 activations, K <= 288 per output
    kept = {n: k for n, k in out["kernels"].items() if k["tiling"].get("resident")}
    assert len(kept) == 1 and next(iter(kept)).endswith(spec.name.removeprefix("conv2d_")), out["kernels"]
    (tiling,) = (k["tiling"] for k in kept.values())
    assert tiling["resident"] == PROFILES[target].cores_for("cube")  # 2 x 25 M tiles on 24 (8) cores
    assert bool(tiling.get("mixed")) == (target == "ascend910b")


def test_the_cost_model_replays_the_resident_chain_exactly(built):
    assert_replayed_exactly(built[2]["kernels"])
