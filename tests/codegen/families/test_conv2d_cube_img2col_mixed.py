"""conv2d_cube_img2col's mixed epilogue (codegen/families/conv2d_cube_img2col.py vector_pass and img2col_mixed; the
template's MIXED): on a split profile the Vector pass of a residual, clipped or program conv runs in the Cube's own
launch, each group's two AIVs finishing its blocks' output tiles as Fixpipe writes them. It moves the same bytes
and MACs as the two-launch form, pays one launch instead of two and overlaps the Vector work with the Cube's, so
it is faster. Cost model only: the baked kernels that use it are held to the emulator by
tests/codegen/cost/test_costmodel.py, and tests/codegen/families/test_conv2d_cube_img2col_images.py builds a
910B bottleneck whose residual convs run mixed and matches ONNX Runtime."""
from dataclasses import replace

import pytest

from codegen import KilnError
from codegen.cost import model
from codegen.families.base import input_bytes
from codegen.families.conv2d_cube_img2col import FAMILY, conv_rule, epi_bytes, from_params
from codegen.ir.opspec import Conv2dSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES


def conv(n, cin, h, w, cout, k=1, pad=0, **kw):
    return Conv2dSpec(n, cin, h, w, cout, k, k, 1, 1, pad, pad, pad, pad, 1, 1, True, True, **kw)


# ResNet-50's layer3 1x1 + residual add (batch 1 and 32), and layer1's chained 3x3 -> 1x1 + add
RESIDUAL_B1 = conv(1, 256, 14, 14, 1024, residual=True)
RESIDUAL_B32 = conv(32, 256, 14, 14, 1024, residual=True)
CHAIN = conv(4, 64, 56, 56, 256, k=3, pad=1, residual=True, mid=64, mid_bias=True, mid_relu=True)
SILU = replace(RESIDUAL_B32, program="sigmoid(0);mul(0,1)")  # a program epilogue after the add and ReLU


def test_the_rule_runs_the_vector_pass_in_the_cube_launch_on_split_profiles():
    log = OptLog()
    p = conv_rule(RESIDUAL_B32, PROFILES["ascend910b"], log).params
    ub = PROFILES["ascend910b"].capacity["UB"]
    assert p["mixed"] == 1 and p["epi_tile"] == ub // epi_bytes(RESIDUAL_B32) // 128 * 128
    assert any(" epilogue=mixed,epi_tile=" in line and "reason=vector_epilogue" in line for line in log.lines)
    assert conv_rule(CHAIN, PROFILES["ascend910b"], OptLog()).params["mixed"] == 1
    # a program runs there too, in fp32, while its rows leave UB room for a tile's whole rows (256 x 16 values);
    # a longer one keeps the second launch; a coupled profile finishes the tile on chip (a chain: a pass)
    assert conv_rule(SILU, PROFILES["ascend910b"], OptLog()).params["mixed"] == 1
    long = replace(RESIDUAL_B32, program=";".join(f"sigmoid({2 * i});mul({2 * i},{2 * i + 1})" for i in range(4)))
    assert ub // epi_bytes(long) < 256 * 16
    assert "mixed" not in conv_rule(long, PROFILES["ascend910b"], OptLog()).params
    assert conv_rule(RESIDUAL_B32, PROFILES["ascend310p"], OptLog()).params.get("on_chip") == 1
    assert "mixed" not in conv_rule(CHAIN, PROFILES["ascend310p"], OptLog()).params


@pytest.mark.parametrize("spec", [RESIDUAL_B1, RESIDUAL_B32, CHAIN, SILU], ids=["b1", "b32", "chain", "program"])
@pytest.mark.parametrize("hits", [False, True], ids=["alone", "l2"])
def test_mixed_moves_the_same_work_in_one_launch_and_is_faster(spec, hits):
    profile = PROFILES["ascend910b"]
    mixed = conv_rule(spec, profile, OptLog()).params
    two = dict({k: v for k, v in mixed.items() if k != "mixed"}, epi_tile=4096)
    sizes = input_bytes(spec, FAMILY, mixed)
    l2 = model.L2Plan((True,) * len(sizes), sizes) if hits else None
    one, both = (model.run(FAMILY.replay, spec, p, profile, l2=l2) for p in (mixed, two))
    assert len(one.phases) == 1 and len(both.phases) == 2
    for p in ("MTE2", "MTE3", "MTE1", "FIX"):
        assert one.pipes[p].bytes == both.pipes[p].bytes, p
    assert (one.cube_macs, one.useful_macs, one.mem.write_bytes) == (both.cube_macs, both.useful_macs,
                                                                     both.mem.write_bytes)
    assert one.mem.hbm_read_bytes + one.mem.l2_hit_bytes == both.mem.hbm_read_bytes + both.mem.l2_hit_bytes
    # a launch's overhead saved at least, less the mixed launch's extra
    assert one.cycles < both.cycles - (profile.launch_cycles - profile.mixed_launch_cycles)


def test_a_pin_whose_tile_rows_overflow_the_mixed_ub_tile_is_refused():
    profile = PROFILES["ascend910b"]
    spec = conv(1, 16, 56, 56, 16, residual=True, program="sigmoid(0);mul(0,1)")
    tile = conv_rule(spec, profile, OptLog()).params["epi_tile"]  # 6912 values: the program's fp32 rows take UB
    pin = dict(base_m=512, base_n=16, base_k1=1, c1_step=1)  # fits L0A, L0B, L0C and L1
    with pytest.raises(KilnError, match=f"base_m=512 is over .* base_m <= {tile // 16}"):
        from_params(spec, profile, pin, "kernel list")
    assert from_params(spec, profile, dict(pin, base_m=256), "kernel list")[0]["mixed"] == 1
