"""Grouped convolution (codegen/families/conv2d_grouped_cube.py): which input channel blocks each N tile reduces
over, the group blocking the cost model picks and logs, and where a Conv's group count sends it. The kernel's
results, its replay against the emulator and its MTE2 bytes are checked with every baked kernel (test_families,
test_kernels: kernels/default.toml bakes two grouped convs) and, op by op, against ONNX Runtime
(tests/kiln/op_cases/conv_grouped.py)."""
import numpy as np
import pytest

from codegen.families import conv2d_algorithm, conv2d_grouped_cube
from codegen.families.registry import predict
from codegen.ir import layouts
from codegen.ir.graph import OpInstance
from codegen.ir.opspec import Conv2dSpec, DwConv2dSpec, opspec_of
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES


def grouped(cin, cout, group, h=14, k=3, stride=1):
    pad = k // 2
    return Conv2dSpec(1, cin, h, h, cout, k, k, stride, stride, pad, pad, pad, pad, 1, 1, True, True, group=group)


@pytest.mark.parametrize("cin,cout,group", [(128, 128, 32), (6, 8, 2), (20, 28, 4), (48, 48, 2), (3, 6, 3),
                                            (104, 104, 13), (64, 32, 4), (30, 36, 3)])
def test_each_n_tile_reads_exactly_the_blocks_its_groups_hold(cin, cout, group):
    """group_c1_range covers every nonzero input block of the block-diagonal weight's output blocks, and nothing
    before the first or after the last."""
    spec = grouped(cin, cout, group)
    w = np.ones((cout, cin // group, 1, 1), np.float32)
    dense = layouts.grouped_to_dense(w, group)[:, :, 0, 0]
    for n1 in range(-(-cout // 16)):
        for cnt in (1, 2):
            rows = dense[n1 * 16:(n1 + cnt) * 16]
            used = sorted({c // 16 for c in np.nonzero(rows.any(axis=0))[0]})
            assert spec.group_c1_range(n1, cnt) == (used[0], used[-1] + 1), (n1, cnt)


def test_group_blocking_is_the_cost_models_choice_and_is_logged():
    spec = grouped(128, 128, 32, h=56)  # ResNeXt-50 32x4d's first stage: 4 channels per group
    profile = PROFILES["ascend910b"]
    log = OptLog()
    v = conv2d_algorithm.choose_conv_algorithm(spec, profile, log, None, "", False)
    assert v.family == "conv2d_grouped_cube" and v.notes["algorithm"] == "grouped_img2col"
    lines = [ln for ln in log.lines if "group_blocking" in ln]
    assert len(lines) == 4  # N tiles of 16, 32, 64, 128 channels: 4, 8, 16, 32 groups per GEMM block
    chosen = next(ln for ln in lines if ":rejected" not in ln)
    assert f"group_blocking:base_n={v.params['base_n']} reason=cost_model" in chosen
    cycles = {int(ln.split("base_n=")[1].split(" ")[0].split(":")[0]): int(ln.split(" cycles=")[1].split(" ")[0])
              for ln in lines}
    assert cycles[v.params["base_n"]] == min(cycles.values())
    assert predict(spec, "conv2d_grouped_cube", v.params, profile).cycles == pytest.approx(
        cycles[v.params["base_n"]], abs=1)
    facts = conv2d_grouped_cube.blocking_facts(spec, 128)  # all 32 groups in one block: a dense conv's MACs
    assert facts["groups_per_block"] == 32 and facts["mac_waste"] == pytest.approx(1 - 1 / 32, abs=1e-4)


def _conv_op(cin, cout, group, wshape):
    return OpInstance("c", "Conv", dict(input=(1, cin, 8, 8), weight=wshape, strides=(1, 1), pads=(1, 1, 1, 1),
                                        dilations=(1, 1), group=group, bias=False, activation=""))


def test_group_count_decides_the_kind():
    assert isinstance(opspec_of(_conv_op(16, 16, 16, (16, 1, 3, 3))), DwConv2dSpec)  # depthwise
    multiplier = opspec_of(_conv_op(8, 16, 8, (16, 1, 3, 3)))  # group = C_in < C_out: grouped, 2 outputs each
    assert isinstance(multiplier, Conv2dSpec) and multiplier.group == 8
    assert opspec_of(_conv_op(1, 1, 1, (1, 1, 3, 3))).group == 1  # a 1-channel dense conv stays dense
    g = opspec_of(_conv_op(32, 64, 4, (64, 8, 3, 3)))
    assert g.group == 4 and g.reduction_length == 8 * 9 and "_g4_" in g.name
    assert g.flops == 2 * 64 * 8 * 9 * 8 * 8
