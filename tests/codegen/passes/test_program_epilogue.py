"""Program epilogues (codegen/passes/program_epilogue.py): an elementwise program reading only a depthwise Conv joins
its dwconv2d_vector kernel; what is not taken is logged and audited with its reason."""
import re
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("onnx")

from test_eltwise_programs import _model, _plan

from codegen.families.dwconv2d_vector import dw_buffers, replay_dwconv
from codegen.frontend.onnx_import import load_onnx
from codegen.ir.eltwise_program import decode, vector_ops
from codegen.ir.opspec import Conv2dSpec, DwConv2dSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import get_profile
from codegen.options import parse_options
from codegen.pipeline import plan_model

X20 = [("x", [1, 20, 6, 6])]
W20 = {"w": np.ones((20, 1, 3, 3)) / 9}
DW = ("Conv", ["x", "w"], ["c"], {"group": 20, "pads": [1, 1, 1, 1]})
SILU = [DW, ("Sigmoid", ["c"], ["s"], {}), ("Mul", ["c", "s"], ["y"], {})]


def test_silu_after_a_depthwise_conv_is_its_epilogue(tmp_path):
    stages, log = _plan(_model(tmp_path, SILU, X20, [("y", [1, 20, 6, 6])], W20))
    (spec,) = stages.specs.values()
    assert spec.kind == "dwconv2d" and [op for op, _, _ in decode(spec.program, 1)] == ["sigmoid", "mul"]
    assert spec.name.startswith("dwconv2d_1x20x6x6_k3x3_s1_p1_sigmoid_mul_")
    (step,) = [s for s in stages.lowered.steps if s.kind == "kernel"]
    assert step.ops == ["n0", "n1", "n2"]  # the conv's kernel carries the program's source nodes
    assert any("m:n2 Fused(Conv+Sigmoid+Mul) reason=program_epilogue into=n0" in line for line in log.lines)
    assert not stages.fusion.audit
    # the program's step and scratch rows are in the kernel's UB footprint
    plain = dw_buffers(replace(spec, program=""), 1)["UB"]
    assert dw_buffers(spec, 1)["UB"] == plain + 2 * 6 * 64


def test_not_taken_each_with_its_reason(tmp_path):
    io = (X20, [("y", [1, 20, 6, 6])], W20)
    # Sigmoid(0) = 0.5 would fill the padded lanes of the last channel block (20 channels)
    stages, log = _plan(_model(tmp_path, [DW, ("Sigmoid", ["c"], ["y"], {})], *io))
    assert [s.kind for s in stages.specs.values()] == ["dwconv2d", "eltwise_program"]
    assert [a["reason"] for a in stages.fusion.audit] == ["epilogue_unsupported"]
    assert "padded channel lanes" in stages.fusion.audit[0]["detail"]
    # over channels that fill C0 it is taken
    stages, _ = _plan(_model(tmp_path, [("Conv", ["x", "w"], ["c"], {"group": 16}), ("Sigmoid", ["c"], ["y"], {})],
                             [("x", [1, 16, 6, 6])], [("y", [1, 16, 4, 4])], {"w": np.ones((16, 1, 3, 3))}))
    assert [s.kind for s in stages.specs.values()] == ["dwconv2d"]
    for options, pattern, reason in (({"ENABLE_FUSION": "OFF"}, "Conv+Sigmoid", "fusion_off"),
                                     ({"MAX_FUSION_DEPTH": "2"}, "Conv+Sigmoid+Mul", "depth_limit")):
        stages, log = _plan(_model(tmp_path, SILU, *io), **options)
        assert [s.kind for s in stages.specs.values()][:1] == ["dwconv2d"] and len(stages.specs) > 1
        assert any(f"{pattern}:rejected reason={reason}" in line for line in log.lines), log.lines
    # the conv's output is also a graph output
    stages, log = _plan(_model(tmp_path, SILU, X20, [("y", [1, 20, 6, 6]), ("c", [1, 20, 6, 6])], W20))
    assert len(stages.specs) == 2 and any("reason=multiple_consumers" in line for line in log.lines)


DENSE_SILU = [("Conv", ["x", "w"], ["c"], {}), ("Sigmoid", ["c"], ["s"], {}), ("Mul", ["c", "s"], ["y"], {})]


def _cycles(line: str) -> tuple[int, int]:
    return tuple(int(re.search(f" {k}=([0-9]+)", line).group(1)) for k in ("fused_cycles", "separate_cycles"))


def test_a_cube_conv_takes_a_program_where_the_cost_model_predicts_fewer_cycles(tmp_path):
    path = _model(tmp_path, DENSE_SILU, X20, [("y", [1, 16, 4, 4])], {"w": np.ones((16, 20, 3, 3)) / 180})
    # 310P: the tile goes L0C -> UB and the program runs there, no second pass over GM: taken
    stages, log = _plan(path, KILN_TARGET="ascend310p")
    (spec,) = stages.specs.values()
    assert spec.kind == "conv2d" and spec.program == "sigmoid(0);mul(0,1)" and "_sigmoid_mul_" in spec.name
    (line,) = [ln for ln in log.lines if "m:n2 Fused(Conv+Sigmoid+Mul) reason=program_epilogue into=n0" in ln]
    fused, separate = _cycles(line)
    assert fused < separate and not stages.fusion.audit
    # 910B: the Vector pass runs in the Cube's launch (mixed), its AIVs finishing each tile as Fixpipe writes it:
    # one launch against the conv's and the program kernel's two, taken too
    stages, log = _plan(path, KILN_TARGET="ascend910b")
    (spec,) = stages.specs.values()
    assert spec.kind == "conv2d" and spec.program == "sigmoid(0);mul(0,1)"
    (line,) = [ln for ln in log.lines if "m:n2 Fused(Conv+Sigmoid+Mul) reason=program_epilogue into=n0" in ln]
    fused, separate = _cycles(line)
    assert fused < separate and not stages.fusion.audit


def test_a_residual_conv_takes_the_program_into_the_pass_it_already_has(tmp_path):
    nodes = [("Conv", ["x", "w"], ["c"], {"pads": [1, 1, 1, 1]}), ("Add", ["c", "x"], ["a"], {}),
             ("Sigmoid", ["a"], ["s"], {}), ("Mul", ["a", "s"], ["y"], {})]
    path = _model(tmp_path, nodes, [("x", [1, 32, 6, 6])], [("y", [1, 32, 6, 6])], {"w": np.ones((32, 32, 3, 3)) / 300})
    for target in ("ascend910b", "ascend310p"):
        stages, log = _plan(path, KILN_TARGET=target)
        (spec,) = stages.specs.values()
        assert spec.residual and spec.program == "sigmoid(0);mul(0,1)"
        (line,) = [ln for ln in log.lines if "Fused(Conv+Add+Sigmoid+Mul) reason=program_epilogue" in ln]
        assert _cycles(line)[0] < _cycles(line)[1]


def test_a_cube_conv_not_taking_a_program_says_why(tmp_path):
    from codegen.ir.optlog import REASONS
    assert "program_epilogue_slower" in REASONS
    # Sigmoid(0) = 0.5 would fill the padded lanes of 20 output channels
    stages, _ = _plan(_model(tmp_path, [("Conv", ["x", "w"], ["c"], {}), ("Sigmoid", ["c"], ["y"], {})], X20,
                             [("y", [1, 20, 4, 4])], {"w": np.ones((20, 20, 3, 3))}), KILN_TARGET="ascend310p")
    assert [s.kind for s in stages.specs.values()] == ["conv2d", "eltwise_program"]
    assert [a["reason"] for a in stages.fusion.audit] == ["epilogue_unsupported"]
    path = _model(tmp_path, DENSE_SILU, X20, [("y", [1, 16, 4, 4])], {"w": np.ones((16, 20, 3, 3))})
    _, log = _plan(path, ENABLE_FUSION="OFF", KILN_TARGET="ascend310p")
    assert any("m:n1 Conv+Sigmoid:rejected reason=fusion_off" in line for line in log.lines), log.lines
    # without a profile (the runtime's generic planning) nothing predicts: the program stays its own kernel
    stages = plan_model(load_onnx(path), "m", parse_options({"KILN_MODELS": "", "KILN_TARGET": "ascend310p"}),
                        OptLog(), None, memory=False)
    assert [s.kind for s in stages.specs.values()] == ["conv2d", "eltwise_program"]
    assert "no profile" in stages.fusion.audit[0]["detail"]


def test_the_replay_issues_the_program_once_per_output_row():
    base = DwConv2dSpec(1, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, True, False)
    silu = replace(base, program="sigmoid(0);mul(0,1)")
    profile = get_profile("ascend910b")
    p0, p1 = (replay_dwconv(s, {"rows_per_block": 4}, profile) for s in (base, silu))
    # 8 output rows of 8 pixels x 16 channels: 128 fp32 values, one instruction (2 repeats) per VecOp
    assert p1.pipes["V"].instrs - p0.pipes["V"].instrs == 8 * len(vector_ops(decode(silu.program, 1))) == 8 * 5
    assert p1.cycles > p0.cycles


def test_a_kernel_list_takes_a_program_on_a_convolution(tmp_path):
    from codegen import KilnError
    from codegen.frontend.kernel_list import load_kernel_list
    from codegen.ir.opspec import opspec_of
    conv = '[[op]]\nlabel = "k"\ntype = "Conv"\ninput = [1, 24, 8, 8]\nweight = [{w}]\ngroup = {g}\nprogram = "{p}"\n'
    path = tmp_path / "k.toml"
    for w, g, kind in (("24, 1, 3, 3", 24, "dwconv2d"), ("40, 24, 1, 1", 1, "conv2d"), ("24, 12, 3, 3", 2, "conv2d")):
        path.write_text(conv.format(w=w, g=g, p="sigmoid(0);mul(0,1)"))
        (op,) = load_kernel_list(path)
        spec = opspec_of(op)
        assert spec.kind == kind and spec.program == "sigmoid(0);mul(0,1)"
    path.write_text(conv.format(w="24, 1, 3, 3", g=24, p="mul(0,1)"))
    with pytest.raises(KilnError, match="'program'"):
        load_kernel_list(path)


def test_the_cube_conv_epilogue_replay_issues_the_program_per_tile():
    from codegen.families.conv2d_cube_img2col import conv_rule, epi_bytes, on_chip_ub, replay_img2col
    base = Conv2dSpec(1, 16, 8, 8, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, True, False, clip_hi=6.0)
    silu = replace(base, program="sigmoid(0);mul(0,1)")
    ops = len(vector_ops(decode(silu.program, 1)))
    # 310P: on chip, per channel block of each M tile, one instruction per VecOp (64 pixels x 16: 16 repeats)
    profile = get_profile("ascend310p")
    params = conv_rule(silu, profile, OptLog()).params
    p0, p1 = (replay_img2col(s, params, profile) for s in (base, silu))
    tiles = -(-64 // params["base_m"])
    assert params["on_chip"] and p1.pipes["V"].instrs - p0.pipes["V"].instrs == tiles * ops
    assert on_chip_ub(silu, params["base_m"]) == on_chip_ub(base, params["base_m"]) + 2 * params["base_m"] * 64
    # 910B: the Vector pass (in the Cube's launch) casts the tile to fp32 (and back) around the clip and the program
    profile = get_profile("ascend910b")
    params = conv_rule(silu, profile, OptLog()).params
    p0, p1 = (replay_img2col(s, params, profile) for s in (base, silu))
    assert "on_chip" not in params and params["mixed"] == 1
    assert p1.cycles > p0.cycles and p1.pipes["V"].instrs > p0.pipes["V"].instrs
    assert epi_bytes(silu) == epi_bytes(base) + 4 * (1 + 2) and epi_bytes(base) == 12


X32 = [("x", [1, 32, 4, 4])]
UP = ("Resize", ["x", "", "scales"], ["r"], {"mode": "nearest"})
UP_INIT = {"scales": [1, 1, 2, 2]}
Y32 = [("y", [1, 32, 8, 8])]


def test_a_program_after_a_resize_is_its_epilogue(tmp_path):
    stages, log = _plan(_model(tmp_path, [UP, ("Sigmoid", ["r"], ["y"], {})], X32, Y32, UP_INIT))
    (spec,) = stages.specs.values()
    assert spec.kind == "resize" and spec.program == "sigmoid(0)" and "_sigmoid_" in spec.name
    assert any("m:n1 Fused(Resize+Sigmoid) reason=program_epilogue into=n0" in line for line in log.lines)
    assert not stages.fusion.audit
    # a scalar Mul (an eltwise_vector kernel on its own) is formed as a program for the resize to take; SiLU too:
    # both map 0 to 0, so 20 channels (a ragged C0 block) are fine
    for tail in ([("Mul", ["r", "k"], ["y"], {})], [("Sigmoid", ["r"], ["s"], {}), ("Mul", ["r", "s"], ["y"], {})]):
        stages, _ = _plan(_model(tmp_path, [UP, *tail], [("x", [1, 20, 4, 4])], [("y", [1, 20, 8, 8])],
                                 {**UP_INIT, "k": 0.5}))
        assert [s.kind for s in stages.specs.values()] == ["resize"]
    (spec,) = _plan(_model(tmp_path, [UP, ("Sigmoid", ["r"], ["s"], {}), ("Mul", ["r", "s"], ["y"], {})], X32, Y32,
                           UP_INIT))[0].specs.values()
    assert [op for op, _, _ in decode(spec.program, 1)] == ["sigmoid", "mul"]


def test_a_resize_not_taking_a_program_says_why(tmp_path):
    sig = [UP, ("Sigmoid", ["r"], ["y"], {})]
    # Sigmoid(0) = 0.5 would fill the padded lanes of 20 channels
    stages, _ = _plan(_model(tmp_path, sig, [("x", [1, 20, 4, 4])], [("y", [1, 20, 8, 8])], UP_INIT))
    assert [s.kind for s in stages.specs.values()] == ["resize", "eltwise_program"]
    assert [a["reason"] for a in stages.fusion.audit] == ["epilogue_unsupported"]
    assert "padded channel lanes" in stages.fusion.audit[0]["detail"]
    # a program that also reads a per-channel gate
    gate = [UP, ("Sigmoid", ["r"], ["s"], {}), ("Mul", ["s", "g"], ["y"], {})]
    stages, log = _plan(_model(tmp_path, gate, X32 + [("g", [1, 32, 1, 1])], Y32, UP_INIT))
    assert len(stages.specs) == 2 and any("Resize+Sigmoid+Mul:rejected reason=epilogue_unsupported" in line
                                          for line in log.lines), log.lines
    for options, reason in (({"ENABLE_FUSION": "OFF"}, "fusion_off"), ({"MAX_FUSION_DEPTH": "1"}, "depth_limit")):
        stages, log = _plan(_model(tmp_path, sig, X32, Y32, UP_INIT), **options)
        assert len(stages.specs) == 2 and any(f"Resize+Sigmoid:rejected reason={reason}" in line
                                              for line in log.lines), log.lines
    # the resize's output is also a graph output
    stages, log = _plan(_model(tmp_path, sig, X32, Y32 + [("r", [1, 32, 8, 8])], UP_INIT))
    assert len(stages.specs) == 2 and any("reason=multiple_consumers" in line for line in log.lines)


def test_the_resize_replay_issues_the_program_once_per_computed_row():
    from codegen.families.resize_vector import replay_resize, resize_buffers
    from codegen.ir.resize_spec import ResizeSpec
    profile = get_profile("ascend910b")
    for mode, rows in (("nearest", 4), ("linear", 8)):  # nearest x2: 4 runs of 2 output rows; bilinear: each row
        base = ResizeSpec(1, 16, 4, 4, 8, 8, mode, "half_pixel", "floor" if mode == "nearest" else "", 2.0, 2.0)
        sig = replace(base, program="sigmoid(0)")
        p0, p1 = (replay_resize(s, {"rows_per_block": 8}, profile) for s in (base, sig))
        # 8 pixels x 16 channels: 128 values, one instruction (2 fp32 repeats) per VecOp: 2 casts + the program
        assert p1.pipes["V"].instrs - p0.pipes["V"].instrs == rows * (2 + len(vector_ops(decode(sig.program, 1))))
        assert resize_buffers(sig, 8)["UB"] == resize_buffers(base, 8)["UB"] + 2 * 8 * 64


def test_a_kernel_list_takes_a_program_on_a_resize(tmp_path):
    from codegen import KilnError
    from codegen.frontend.kernel_list import load_kernel_list
    from codegen.ir.opspec import opspec_of
    entry = '[[op]]\nlabel = "k"\ntype = "Resize"\ninput = [1, 24, 8, 8]\nscales = [2.0, 2.0]\nprogram = "{p}"\n'
    path = tmp_path / "k.toml"
    path.write_text(entry.format(p="hardswish(0)"))
    (op,) = load_kernel_list(path)
    assert opspec_of(op).program == "hardswish(0)"
    path.write_text(entry.format(p="mul(0,1)"))
    with pytest.raises(KilnError, match=r"'program'|step"):
        load_kernel_list(path)


def test_a_conv_output_beyond_pricing_keeps_its_program_without_a_replay(tmp_path):
    """A mistaken or mutated shape (here 252M output values) is not priced: the exact replay would walk millions of
    blocks at plan time (the fuzz test's batch 10^6 ran out of memory there)."""
    path = _model(tmp_path, DENSE_SILU, [("x", [4096, 20, 64, 64])], [("y", [4096, 16, 62, 62])],
                  {"w": np.ones((16, 20, 3, 3)) / 180})
    log = OptLog()
    stages = plan_model(load_onnx(path), "m", parse_options({"KILN_MODELS": "", "KILN_TARGET": "ascend310p"}), log)
    (line,) = [ln for ln in log.lines if "m:n2 Conv+Sigmoid+Mul:rejected reason=not_priced" in ln]
    assert f"{4096 * 16 * 62 * 62}_values_>_{2 ** 27}" in line  # the log writes spaces as _
    assert [a["reason"] for a in stages.fusion.audit] == ["not_priced"]
