"""The pipe cost model (codegen/cost/model.py and each family's replay in codegen/families/) against the
emulator, for every baked kernel whose family the
model replays: the same instructions and bytes on every pipe, and the same cycles, since both apply the
profile's per-instruction costs and the same pipe/flag timing rules."""
import numpy as np
import pytest

import kiln
from codegen.families.registry import predict
from codegen.ir.manifest import opspec_of_record
from codegen.ir.profiles import PROFILES
from kiln.runtime import as_packed


def spec_of(k):
    return opspec_of_record(k.entry)


PROFILE = PROFILES[kiln.build_info()["profile"]]
REPLAYED = [k for k in kiln.kernels() if predict(spec_of(k), k.record["family"], k.tiling, PROFILE) is not None]


def test_the_default_build_has_replayed_kernels_of_both_conv_algorithms():
    algos = {k.record["algorithm"] for k in REPLAYED}
    winograd = kiln.build_info()["dtype"] == "fp16"  # KILN_DTYPE=bf16 builds have no Winograd kernels
    assert "direct_img2col" in algos and any(a.startswith("winograd") for a in algos) == winograd, algos


@pytest.mark.parametrize("k", REPLAYED, ids=[k.name for k in REPLAYED])
def test_prediction_equals_the_emulator(k):
    ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    k.run_packed(*ins)
    st = k.last_stats
    p = predict(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]])
    for pipe, got in st["pipes"].items():
        assert (p.pipes[pipe].instrs, p.pipes[pipe].bytes) == (got["instructions"], got["bytes"]), pipe
        assert p.pipes[pipe].busy == pytest.approx(got["busy_cycles"], rel=1e-9), pipe
    assert p.cycles == pytest.approx(st["cycles"], rel=1e-9)
    if k.record.get("predicted_cycles") is not None:  # what the build recorded in the manifest
        assert k.record["predicted_cycles"] == pytest.approx(st["cycles"], abs=1e-3)
    assert p.cube_macs == st["cube_macs"]


CUBE = [k for k in kiln.kernels() if k.record["family"] in ("conv2d_cube_img2col", "conv2d_winograd", "gemm_cube")]


@pytest.mark.parametrize("k", CUBE, ids=[k.name for k in CUBE])
def test_chosen_variant_is_never_slower_than_the_rule_tiling(k):
    """The searched variant against the foundation's fixed rule tiling of the same algorithm (AUTO's choice
    between algorithms is tested in test_winograd): the rule's cycles come from the cost model, which equals
    the emulator (test above)."""
    from codegen.families import conv2d_cube_img2col, conv2d_winograd, gemm_cube
    from codegen.ir.optlog import OptLog
    spec = spec_of(k)
    if k.record["features"]["kind"] == "gemm":
        rule = gemm_cube.gemm_rule(spec, PROFILE, OptLog(), search=False)
    elif k.record["family"] == "conv2d_winograd":  # same algorithm: what the search started from
        rule = conv2d_winograd.winograd_rule(spec, PROFILE, k.tiling["tile"])
    else:
        rule = conv2d_cube_img2col.conv_rule(spec, PROFILE, OptLog(), search=False)
    rule_cycles = predict(spec, rule.family, rule.params, PROFILE).cycles
    ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    k.run_packed(*ins)
    assert k.last_stats["cycles"] <= rule_cycles + 1e-6, (k.last_stats["cycles"], rule_cycles)
